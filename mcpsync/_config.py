"""Server configuration files: the ``mcpServers`` JSON format desktop clients and editors use.

A file names servers; each is either a command to run (stdio) or a remote URL::

    {
      "mcpServers": {
        "everything": {"command": "npx", "args": ["-y", "@modelcontextprotocol/server-everything"]},
        "search": {
          "type": "http",
          "url": "https://search.example.com/mcp",
          "headers": {"Authorization": "Bearer ${SEARCH_TOKEN}"}
        }
      }
    }

Fields of a stdio entry: ``command`` (required), ``args``, ``env``, ``cwd``. Of a remote
entry: ``url`` (required), ``headers``, ``type`` (``"http"``/``"streamable-http"``,
``"sse"``, ``"websocket"``, ``"grpc"``; inferred from the URL scheme when absent). Both may
carry ``timeout`` (seconds per request) and ``disabled``. A remote server run as several
nodes or regions lists them instead of one ``url``: ``"endpoints": [{"name": "eu", "url":
"https://eu.example.com/mcp", "region": "eu"}, ...]`` (``name`` defaults to ``endpoint-N``,
``region`` is optional) and may set ``"region"``, the region to prefer; its Client is
:meth:`~mcpsync.Client.routed` (nearest endpoint, failover, a breaker per endpoint).
Other keys editors add
(``autoApprove``, ``alwaysAllow`` ...) are kept in ``extra`` and otherwise ignored. The VS
Code spelling ``{"servers": {...}}`` with ``"type": "stdio"`` is read too, comments and
trailing commas included, and so are Windsurf's ``serverUrl``, Gemini CLI's ``httpUrl`` and
Cline's ``transportType``. A key that looks like a misspelling of one mcpsync reads
(``"enviroment"``, ``"arguments"``, ``"URL"``) is an error that names the key meant.
A configuration may also be given as a dict instead of a file.

Strings in ``command``, ``args``, ``env``, ``cwd``, ``url`` and ``headers`` expand
``${VAR}`` and ``${VAR:-default}`` from the environment (``$${`` is a literal ``${``). A
variable that is unset (and has no default) makes that one server unusable, not the
file: the error is raised when the server is asked for. Expanded values are never shown:
``repr()`` and every error message print the template (``Bearer ${SEARCH_TOKEN}``) and
hide env and header values.

Example:
    >>> cfg = parse_config({"mcpServers": {"demo": {"command": "python", "args": ["-m", "mcpsync.server.demo"]}}})
    >>> cfg["demo"].transport, cfg["demo"].args
    ('stdio', ('-m', 'mcpsync.server.demo'))
    >>> parse_config({"mcpServers": {"demo": {"command": "python", "args": ["-m", 3]}}})
    Traceback (most recent call last):
    ...
    mcpsync._errors.ConfigError: mcpServers.demo.args[1]: expected a string, got 3
"""

from __future__ import annotations

import inspect
import json
import os
import re
from dataclasses import dataclass, field, replace
from pathlib import Path
from types import MappingProxyType
from typing import Any, Iterator, Mapping, Sequence

from ._errors import ConfigError

__all__ = [
    "ConfigError",
    "ServerConfig",
    "Config",
    "load_config",
    "parse_config",
    "client_from_config",
    "build_client",
    "expand",
    "strip_jsonc",
    "TRANSPORTS",
    "EDITOR_KEYS",
]

#: The transports a configuration entry may name, after aliases are folded.
TRANSPORTS: tuple[str, ...] = ("stdio", "http", "sse", "websocket", "grpc")

_TYPE_ALIASES = {
    "stdio": "stdio",
    "http": "http",
    "streamable-http": "http",
    "streamable_http": "http",
    "streamablehttp": "http",
    "sse": "sse",
    "websocket": "websocket",
    "ws": "websocket",
    "grpc": "grpc",
}

#: Client constructor per remote transport (classmethods on :class:`~mcpsync.Client`).
_CONSTRUCTORS = {"http": "http", "sse": "sse", "websocket": "websocket", "grpc": "grpc"}

_KNOWN = {"type", "transport", "command", "args", "env", "cwd", "url", "headers", "timeout", "disabled", "endpoints", "region"}

#: Other editors' names for keys mcpsync reads, read as those keys: Windsurf's ``serverUrl``,
#: Gemini CLI's ``httpUrl`` (a Streamable HTTP URL), Cline's ``transportType``.
_ALIASES = {"serverUrl": "url", "httpUrl": "url", "transportType": "type"}

#: Other spellings people write for the keys mcpsync reads: a key close to one of these
#: (or to a key in ``_KNOWN``) is reported as a typo, with the key meant.
_SYNONYMS = {
    "environment": "env", "environ": "env", "envs": "env", "env_vars": "env", "envvars": "env",
    "arguments": "args", "argv": "args", "cmd": "command", "executable": "command",
    "uri": "url", "endpoint": "url", "address": "url", "serverurl": "url", "server_url": "url",
    "header": "headers", "workingdirectory": "cwd", "working_directory": "cwd", "workdir": "cwd",
    "directory": "cwd", "timeoutseconds": "timeout", "timeout_seconds": "timeout",
    "disable": "disabled", "enabled": "disabled", "kind": "type",
}
#: Keys editors and other clients write that mcpsync does not use: never reported.
EDITOR_KEYS = frozenset({
    "autoApprove", "alwaysAllow", "autoapprove", "envFile", "description", "disabledTools", "enabledTools",
    "includeTools", "excludeTools", "trust", "gallery", "version", "dev", "roots", "oauth", "auth",
    "icon", "title", "note", "notes", "comment", "_comment", "id", "name",
})

_VAR = re.compile(r"\$\$\{|\$\{([^}]*)\}")
_NAME_OK = re.compile(r"[A-Za-z_][A-Za-z0-9_]*\Z")


def _describe(value: Any) -> str:
    """How a wrong value is shown: literals of numbers / booleans / null, kinds otherwise.

    Strings are never echoed (they may be secrets)."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, (int, float)):
        return repr(value)
    if isinstance(value, str):
        return "a string"
    if isinstance(value, Mapping):
        return "an object"
    if isinstance(value, (list, tuple)):
        return "a list"
    return f"a {type(value).__name__}"


def expand(template: str, environ: Mapping[str, str] | None = None, *, field: str | None = None) -> str:
    """Expand ``${VAR}`` and ``${VAR:-default}`` in ``template``.

    ``${VAR:-default}`` uses the default when VAR is unset or empty, ``${VAR-default}``
    only when it is unset; ``$${`` is a literal ``${``.

    Args:
        template: the string as written in the file.
        environ: where variables come from (default ``os.environ``).
        field: the field's path, for error messages.

    Raises:
        ConfigError: a variable is unset and has no default, or a reference is malformed.
            The message names the variable and the field, never a value.

    Example:
        >>> expand("Bearer ${TOKEN}", {"TOKEN": "abc"})
        'Bearer abc'
        >>> expand("${HOST:-127.0.0.1}:${PORT-8080}", {})
        '127.0.0.1:8080'
    """
    env = os.environ if environ is None else environ

    def sub(match: re.Match[str]) -> str:
        if match.group(0) == "$${":
            return "${"
        body = match.group(1)
        name, default, op = body, None, ""
        for candidate in (":-", "-"):
            if candidate in body:
                name, default = body.split(candidate, 1)
                op = candidate
                break
        if name.startswith("env:"):  # the VS Code spelling ${env:VAR}
            name = name[4:]
        if not _NAME_OK.match(name):
            raise ConfigError(f"malformed variable reference ${{{body}}}", field=field)
        value = env.get(name)
        if op == ":-" and not value:
            return default or ""
        if op == "-" and value is None:
            return default or ""
        if value is None:
            raise ConfigError(f"environment variable {name} is not set (write ${{{name}:-default}} for a default)", field=field)
        return value

    return _VAR.sub(sub, template)


def _mask_url(url: str) -> str:
    # hide a password in user:password@host; the template itself is shown otherwise
    return re.sub(r"(://[^/@:]*):[^/@]*@", r"\1:***@", url)


@dataclass(frozen=True, slots=True)
class ServerConfig:
    """One server entry of a configuration file, validated and with variables expanded.

    Attributes:
        name: the entry's key under ``mcpServers``.
        transport: ``"stdio"``, ``"http"`` (Streamable HTTP, falling back to HTTP+SSE),
            ``"sse"``, ``"websocket"`` or ``"grpc"``.
        command: the executable (stdio).
        args: its arguments (stdio).
        env: extra environment variables for the child (stdio).
        cwd: the child's working directory (stdio).
        url: the server's address (remote; for gRPC ``host:port`` or ``grpc://host:port``);
            with ``endpoints``, the first endpoint's.
        endpoints: the nodes or regions of a routed server
            (:class:`~mcpsync._routing.Endpoint` values, ``address`` = the URL); empty
            for a server with one ``url``.
        region: the region to prefer among the endpoints.
        headers: headers sent on every request (remote; gRPC metadata).
        timeout: seconds per request, when the entry sets one.
        disabled: the entry says ``"disabled": true``.
        extra: keys of the entry mcpsync does not use (``autoApprove`` ...).
        source: the file the entry came from.

    ``repr()`` shows templates as written (``${TOKEN}``), never expanded values, and hides
    env and header values altogether.

    Example:
        >>> s = ServerConfig(name="api", transport="http", url="https://x.test/mcp",
        ...                  headers={"Authorization": "Bearer s3cret"})
        >>> "s3cret" in repr(s)
        False
    """

    name: str
    transport: str
    command: str | None = None
    args: tuple[str, ...] = ()
    env: Mapping[str, str] = field(default_factory=dict, hash=False, compare=True)
    cwd: str | None = None
    url: str | None = None
    headers: Mapping[str, str] = field(default_factory=dict, hash=False, compare=True)
    timeout: float | None = None
    disabled: bool = False
    endpoints: tuple[Any, ...] = ()
    region: str | None = None
    extra: Mapping[str, Any] = field(default_factory=dict, hash=False, compare=False)
    source: str | None = field(default=None, compare=False)
    templates: Mapping[str, Any] = field(default_factory=dict, hash=False, compare=False, repr=False)

    def __post_init__(self) -> None:
        if self.transport not in TRANSPORTS:
            raise ValueError(f"transport must be one of {', '.join(TRANSPORTS)}, not {self.transport!r}")
        for name in ("env", "headers", "extra", "templates"):
            object.__setattr__(self, name, MappingProxyType(dict(getattr(self, name))))
        object.__setattr__(self, "args", tuple(self.args))
        object.__setattr__(self, "endpoints", tuple(self.endpoints))

    def __repr__(self) -> str:
        t = self.templates
        parts = [f"name={self.name!r}", f"transport={self.transport!r}"]
        if self.transport == "stdio":
            parts.append(f"command={t.get('command', self.command)!r}")
            parts.append(f"args={tuple(t.get('args', self.args))!r}")
            if self.env:
                parts.append("env={" + ", ".join(f"{k!r}: '***'" for k in self.env) + "}")
            if self.cwd is not None:
                parts.append(f"cwd={t.get('cwd', self.cwd)!r}")
        elif self.endpoints:
            shown = [f"{e.name}={_mask_url(str(u))}" for e, u in zip(self.endpoints, t.get("endpoint_urls", ()))]
            parts.append(f"endpoints={shown!r}")
            if self.region is not None:
                parts.append(f"region={self.region!r}")
            if self.headers:
                parts.append("headers={" + ", ".join(f"{k!r}: '***'" for k in self.headers) + "}")
        else:
            parts.append(f"url={_mask_url(str(t.get('url', self.url)))!r}")
            if self.headers:
                parts.append("headers={" + ", ".join(f"{k!r}: '***'" for k in self.headers) + "}")
        if self.timeout is not None:
            parts.append(f"timeout={self.timeout!r}")
        if self.disabled:
            parts.append("disabled=True")
        return f"ServerConfig({', '.join(parts)})"

    __str__ = __repr__

    @property
    def remote(self) -> bool:
        """True for every transport but stdio."""
        return self.transport != "stdio"

    def describe(self) -> str:
        """One line for listings: the command or URL as written (templates, not secrets)."""
        t = self.templates
        if self.transport == "stdio":
            argv = [t.get("command", self.command or ""), *t.get("args", self.args)]
            return " ".join(_shell_quote(a) for a in argv)
        if self.endpoints:
            names = ", ".join(e.name for e in self.endpoints)
            return f"{self.transport} routed over {len(self.endpoints)} endpoints ({names})"
        return f"{self.transport} {_mask_url(str(t.get('url', self.url)))}"

    def client(self, **options: Any) -> Any:
        """A :class:`~mcpsync.Client` for this server; see :func:`build_client`."""
        return build_client(self, **options)


def _shell_quote(s: str) -> str:
    return s if s and re.fullmatch(r"[\w@%+=:,./${}-]+", s) else "'" + s.replace("'", "'\\''") + "'"


class Config(Mapping[str, ServerConfig]):
    """The servers a configuration file defines, by name, in file order.

    As a mapping it holds the servers that loaded; :attr:`names` lists every entry of
    the file, including those in :attr:`errors`. ``config[name]`` raises
    :class:`ConfigError` both for a name the file does not define and for an entry whose
    variables could not be expanded (with that entry's own message).

    Attributes:
        source: the file, or ``None``.
        errors: server name → the error that makes it unusable (an unset variable).
    """

    def __init__(
        self,
        servers: Mapping[str, ServerConfig],
        errors: Mapping[str, ConfigError] | None = None,
        source: str | None = None,
        order: Sequence[str] | None = None,
    ) -> None:
        self._servers = dict(servers)
        self.errors: Mapping[str, ConfigError] = MappingProxyType(dict(errors or {}))
        known = [*self._servers, *(n for n in self.errors if n not in self._servers)]
        if order is not None:
            names = [n for n in order if n in self._servers or n in self.errors]
            names += [n for n in known if n not in names]
        else:
            names = known
        self._names = names
        self.source = source

    @property
    def names(self) -> list[str]:
        """Every server the file defines, in file order (usable or not)."""
        return list(self._names)

    def __getitem__(self, name: str) -> ServerConfig:
        server = self._servers.get(name)
        if server is not None:
            return server
        if name in self.errors:
            raise self.errors[name]
        defined = ", ".join(self._names) or "none"
        raise ConfigError(f"no server named {name!r} (defined: {defined})", source=self.source, server=name)

    def __contains__(self, name: object) -> bool:
        return name in self._servers

    def __iter__(self) -> Iterator[str]:
        return (n for n in self._names if n in self._servers)

    def __len__(self) -> int:
        return len(self._servers)

    def defines(self, name: str) -> bool:
        """Whether the file has an entry ``name`` (usable or not)."""
        return name in self._servers or name in self.errors

    @property
    def usable(self) -> dict[str, ServerConfig]:
        """The servers that loaded without error and are not disabled, in file order."""
        return {n: self._servers[n] for n in self if not self._servers[n].disabled}

    def __repr__(self) -> str:
        return f"Config(source={self.source!r}, servers={self._names!r}, errors={list(self.errors)!r})"


# ----------------------------------------------------------------------------- parsing


def _expect_str(value: Any, where: str) -> str:
    if not isinstance(value, str):
        raise ConfigError(f"expected a string, got {_describe(value)}", field=where)
    return value


def _expect_map(value: Any, where: str) -> Mapping[str, Any]:
    if not isinstance(value, Mapping):
        raise ConfigError(f"expected an object, got {_describe(value)}", field=where)
    return value


def _did_you_mean(key: str) -> str | None:
    """The key ``key`` was probably meant to be (a misspelling of one mcpsync reads)."""
    import difflib

    if not isinstance(key, str) or key in _KNOWN or key in EDITOR_KEYS or key in _ALIASES:
        return None
    low = key.lower()
    if low in _KNOWN:
        return low
    if low in _SYNONYMS:
        return _SYNONYMS[low]
    candidates = {k: k for k in _KNOWN}
    candidates.update(_SYNONYMS)
    close = difflib.get_close_matches(low, list(candidates), n=1, cutoff=0.75)
    return candidates[close[0]] if close else None


def _check_keys(entry: Mapping[str, Any], where: str) -> None:
    """An unknown key that looks like a misspelt known one is an error, not a silent no-op
    (``"enviroment"`` would otherwise start the server without its environment)."""
    for key in entry:
        meant = _did_you_mean(key)
        if meant is not None:
            raise ConfigError(
                f"unknown key {key!r}: did you mean {meant!r}? "
                f"(a server entry reads {', '.join(sorted(_KNOWN))})",
                field=f"{where}.{key}",
            )


def _unalias(entry: Mapping[str, Any], where: str) -> Mapping[str, Any]:
    """Other editors' spellings (:data:`_ALIASES`) read as the keys they stand for."""
    present = [k for k in _ALIASES if k in entry]
    if not present:
        return entry
    out = dict(entry)
    for key in present:
        meant = _ALIASES[key]
        if meant in out or (meant == "url" and "endpoints" in out):
            raise ConfigError(f"give either {meant!r} or {key!r}, not both", field=f"{where}.{key}")
        out[meant] = out.pop(key)
        if key == "httpUrl" and "type" not in out and "transport" not in out:
            out["type"] = "http"
    return out


def _check_entry(name: str, entry: Any, where: str) -> tuple[str, dict[str, Any]]:
    """Validate the shape of one entry; return its transport and the raw templates."""
    entry = _expect_map(entry, where)
    _check_keys(entry, where)
    entry = _unalias(entry, where)
    raw: dict[str, Any] = {}
    type_key = "type" if "type" in entry else ("transport" if "transport" in entry else None)
    kind: str | None = None
    if type_key is not None:
        declared = _expect_str(entry[type_key], f"{where}.{type_key}")
        kind = _TYPE_ALIASES.get(declared.strip().lower())
        raw["type"] = declared
        if kind is None:
            raise ConfigError(
                f"unknown transport type {declared!r} (expected one of: stdio, http, streamable-http, sse, websocket, grpc)",
                field=f"{where}.{type_key}",
            )
    has_command, has_url = "command" in entry, "url" in entry
    if "endpoints" in entry:
        if has_url:
            raise ConfigError("give either \"url\" or \"endpoints\", not both", field=f"{where}.endpoints")
        if has_command:
            raise ConfigError("\"endpoints\" belongs to remote servers, not to a stdio server", field=f"{where}.endpoints")
        raw["endpoints"] = _check_endpoints(entry["endpoints"], f"{where}.endpoints")
        entry = {**entry, "url": raw["endpoints"][0]["url"]}  # the first one decides the kind
        has_url = True
    if "region" in entry and entry["region"] is not None:
        if "endpoints" not in raw:
            raise ConfigError("\"region\" is the region to prefer among \"endpoints\"; this server has none",
                              field=f"{where}.region")
        raw["region"] = _expect_str(entry["region"], f"{where}.region")
    if has_command and has_url:
        raise ConfigError("give either \"command\" (stdio) or \"url\" (remote), not both", field=where)
    if kind is None:
        if not has_command and not has_url:
            raise ConfigError("missing \"command\" (for a stdio server) or \"url\" (for a remote server)", field=where)
        if has_command:
            kind = "stdio"
        else:
            url = _expect_str(entry["url"], f"{where}.url").strip().lower()
            if url.startswith(("ws://", "wss://")):
                kind = "websocket"
            elif url.startswith("grpc://") or url.startswith("grpcs://"):
                kind = "grpc"
            else:
                kind = "http"
    if kind == "stdio":
        if not has_command:
            raise ConfigError("missing \"command\" (required for a stdio server)", field=where)
        for key in ("url", "headers"):
            if key in entry:
                raise ConfigError(f"\"{key}\" belongs to remote servers, not to a stdio server", field=f"{where}.{key}")
        raw["command"] = _expect_str(entry["command"], f"{where}.command")
        if not raw["command"].strip():
            raise ConfigError("must not be empty", field=f"{where}.command")
        args = entry.get("args", [])
        if not isinstance(args, (list, tuple)):
            raise ConfigError(f"expected a list of strings, got {_describe(args)}", field=f"{where}.args")
        raw["args"] = [_expect_str(a, f"{where}.args[{i}]") for i, a in enumerate(args)]
        env = _expect_map(entry.get("env", {}) if entry.get("env") is not None else {}, f"{where}.env")
        raw["env"] = {}
        for k, v in env.items():
            if not isinstance(k, str) or not k or "=" in k:
                raise ConfigError("environment variable names must be non-empty and contain no '='", field=f"{where}.env")
            if isinstance(v, (int, float)) and not isinstance(v, bool):
                v = str(v)  # editors accept numbers here; the environment holds strings
            raw["env"][k] = _expect_str(v, f"{where}.env.{k}")
        if entry.get("cwd") is not None:
            raw["cwd"] = _expect_str(entry["cwd"], f"{where}.cwd")
    else:
        if not has_url:
            raise ConfigError(f"missing \"url\" (required for a {kind} server)", field=where)
        for key in ("command", "args", "env", "cwd"):
            if key in entry:
                raise ConfigError(f"\"{key}\" belongs to stdio servers, not to a {kind} server", field=f"{where}.{key}")
        raw["url"] = _expect_str(entry["url"], f"{where}.url")
        for i, ep in enumerate(raw.get("endpoints") or [{"url": raw["url"]}]):
            at = f"{where}.endpoints[{i}].url" if "endpoints" in raw else f"{where}.url"
            if "${" not in ep["url"]:  # otherwise checked once expanded, for that server only
                _check_url(kind, ep["url"].strip(), ep["url"], at)
        headers = _expect_map(entry.get("headers", {}) if entry.get("headers") is not None else {}, f"{where}.headers")
        raw["headers"] = {}
        for k, v in headers.items():
            if not isinstance(k, str) or not k or any(c in k for c in ":\r\n "):
                raise ConfigError("header names must be non-empty, without spaces, colons or line breaks", field=f"{where}.headers")
            raw["headers"][k] = _expect_str(v, f"{where}.headers.{k}")
    if "timeout" in entry and entry["timeout"] is not None:
        t = entry["timeout"]
        if isinstance(t, bool) or not isinstance(t, (int, float)):
            raise ConfigError(f"expected a number of seconds, got {_describe(t)}", field=f"{where}.timeout")
        if t <= 0:
            raise ConfigError(f"must be positive, got {_describe(t)}", field=f"{where}.timeout")
        raw["timeout"] = float(t)
    if "disabled" in entry:
        d = entry["disabled"]
        if not isinstance(d, bool):
            raise ConfigError(f"expected true or false, got {_describe(d)}", field=f"{where}.disabled")
        raw["disabled"] = d
    raw["_where"] = where
    return kind, raw


def _check_endpoints(value: Any, where: str) -> list[dict[str, Any]]:
    if not isinstance(value, (list, tuple)) or not value:
        raise ConfigError(f"expected a non-empty list of endpoints, got {_describe(value)}", field=where)
    out: list[dict[str, Any]] = []
    names: set[str] = set()
    for i, item in enumerate(value):
        at = f"{where}[{i}]"
        item = _expect_map(item, at)
        unknown = sorted(set(item) - {"name", "url", "region"})
        if unknown:
            raise ConfigError(f"unknown key {unknown[0]!r} (an endpoint has name, url and region)", field=at)
        if "url" not in item:
            raise ConfigError("missing \"url\"", field=at)
        ep = {"url": _expect_str(item["url"], f"{at}.url"), "name": f"endpoint-{i + 1}"}
        if item.get("name") is not None:
            ep["name"] = _expect_str(item["name"], f"{at}.name").strip()
            if not ep["name"]:
                raise ConfigError("must not be empty", field=f"{at}.name")
        if ep["name"] in names:
            raise ConfigError(f"endpoint name {ep['name']!r} is used twice", field=f"{at}.name")
        names.add(ep["name"])
        if item.get("region") is not None:
            ep["region"] = _expect_str(item["region"], f"{at}.region")
        out.append(ep)
    return out


def _check_url(kind: str, url: str, template: str, where: str) -> str:
    low = url.lower()
    shown = _mask_url(template)
    if kind in ("http", "sse"):
        if not low.startswith(("http://", "https://")):
            raise ConfigError(f"expected an http:// or https:// URL for a {kind} server, got {shown!r}", field=where)
    elif kind == "websocket":
        if not low.startswith(("ws://", "wss://")):
            raise ConfigError(f"expected a ws:// or wss:// URL for a websocket server, got {shown!r}", field=where)
    elif kind == "grpc":
        target = url.split("://", 1)[1] if "://" in url else url
        if low.startswith(("http://", "https://", "ws://", "wss://")) or not re.fullmatch(r"[^/\s]+:\d+/?", target):
            raise ConfigError(f"expected host:port (or grpc://host:port) for a grpc server, got {shown!r}", field=where)
    return url


def _resolve(name: str, kind: str, raw: dict[str, Any], extra: dict[str, Any], where: str, environ: Mapping[str, str] | None, source: str | None) -> ServerConfig:
    def x(value: str, at: str) -> str:
        return expand(value, environ, field=at)

    try:
        if kind == "stdio":
            command = x(raw["command"], f"{where}.command")
            if not command.strip():
                raise ConfigError("is empty after expanding variables", field=f"{where}.command")
            return ServerConfig(
                name=name,
                transport=kind,
                command=command,
                args=tuple(x(a, f"{where}.args[{i}]") for i, a in enumerate(raw["args"])),
                env={k: x(v, f"{where}.env.{k}") for k, v in raw["env"].items()},
                cwd=x(raw["cwd"], f"{where}.cwd") if "cwd" in raw else None,
                timeout=raw.get("timeout"),
                disabled=raw.get("disabled", False),
                extra=extra,
                source=source,
                templates=raw,
            )
        endpoints: list[Any] = []
        if "endpoints" in raw:
            from ._routing import Endpoint

            for i, ep in enumerate(raw["endpoints"]):
                at = f"{where}.endpoints[{i}].url"
                address = _check_url(kind, x(ep["url"], at).strip(), ep["url"], at)
                endpoints.append(Endpoint(ep["name"], address=address, region=ep.get("region")))
            url = endpoints[0].address
            raw = {**raw, "endpoint_urls": [ep["url"] for ep in raw["endpoints"]]}
        else:
            url = _check_url(kind, x(raw["url"], f"{where}.url").strip(), raw["url"], f"{where}.url")
        headers = {k: x(v, f"{where}.headers.{k}") for k, v in raw["headers"].items()}
        for k, v in headers.items():
            if "\r" in v or "\n" in v:
                raise ConfigError("header values must not contain line breaks", field=f"{where}.headers.{k}")
        return ServerConfig(
            name=name,
            transport=kind,
            url=url,
            headers=headers,
            endpoints=tuple(endpoints),
            region=raw.get("region"),
            timeout=raw.get("timeout"),
            disabled=raw.get("disabled", False),
            extra=extra,
            source=source,
            templates=raw,
        )
    except ConfigError as exc:
        raise ConfigError(exc.detail, field=exc.field, source=source, server=name) from None


def parse_config(data: Any, *, source: str | None = None, environ: Mapping[str, str] | None = None) -> Config:
    """Validate a decoded configuration (``{"mcpServers": {...}}``) and expand its variables.

    Args:
        data: the decoded JSON document.
        source: the file name, for error messages.
        environ: where ``${VAR}`` values come from (default ``os.environ``).

    Returns:
        The servers; those whose variables are unset are in :attr:`Config.errors`.

    Raises:
        ConfigError: the document's shape is wrong; the message names the field.
    """
    try:
        top = _expect_map(data, "")
    except ConfigError:
        raise ConfigError(f"expected a JSON object with \"mcpServers\", got {_describe(data)}", source=source) from None
    key = "mcpServers" if "mcpServers" in top else ("servers" if "servers" in top else None)
    if key is None:
        import difflib

        near = difflib.get_close_matches("mcpServers", [k for k in top if isinstance(k, str)], n=1, cutoff=0.7)
        hint = f": found {near[0]!r}, did you mean \"mcpServers\"?" if near else " (no \"mcpServers\" key found)"
        raise ConfigError(f"expected a top-level \"mcpServers\" object{hint}", source=source)
    try:
        entries = _expect_map(top[key], key)
        servers: dict[str, ServerConfig] = {}
        errors: dict[str, ConfigError] = {}
        shaped: list[tuple[str, str, dict[str, Any], dict[str, Any], str]] = []
        for name, entry in entries.items():
            where = f"{key}.{name}"
            if not isinstance(name, str) or not name.strip():
                raise ConfigError("server names must be non-empty strings", field=key)
            try:
                kind, raw = _check_entry(name, entry, where)
            except ConfigError as exc:
                raise ConfigError(exc.detail, field=exc.field, server=name) from None
            extra = {k: v for k, v in entry.items() if k not in _KNOWN and k not in _ALIASES}
            shaped.append((name, kind, raw, extra, where))
    except ConfigError as exc:
        raise ConfigError(exc.detail, field=exc.field, source=source, server=exc.server) from None
    for name, kind, raw, extra, where in shaped:
        try:
            servers[name] = _resolve(name, kind, raw, extra, where, environ, source)
        except ConfigError as exc:
            errors[name] = exc
    return Config(servers, errors, source, order=[name for name, *_ in shaped])


def strip_jsonc(text: str) -> str:
    r"""JSON with comments (VS Code's ``jsonc``) as plain JSON.

    ``// line`` and ``/* block */`` comments and trailing commas before ``}`` or ``]``
    are removed; strings are left exactly as they are (a ``//`` inside a URL stays).
    Every removed character becomes a space (newlines are kept), so a JSON error still
    points at the right line and column of the file.

    Example:
        >>> strip_jsonc('{"url": "http://x", // the server\n "a": [1, 2,],}')
        '{"url": "http://x",              \n "a": [1, 2 ] }'
    """
    out = list(text)
    n = len(text)
    i = 0
    last = -1  # index of the last significant character written (not blank, not comment)
    while i < n:
        c = text[i]
        if c == '"':
            i += 1
            while i < n and text[i] != '"':
                i += 2 if text[i] == "\\" else 1
            last = min(i, n - 1)
            i += 1
            continue
        if c == "/" and i + 1 < n and text[i + 1] == "/":
            while i < n and text[i] != "\n":
                out[i] = " "
                i += 1
            continue
        if c == "/" and i + 1 < n and text[i + 1] == "*":
            end = text.find("*/", i + 2)
            end = n if end < 0 else end + 2
            for j in range(i, end):
                if out[j] != "\n":
                    out[j] = " "
            i = end
            continue
        if c in "}]" and last >= 0 and out[last] == ",":
            out[last] = " "  # a trailing comma
        if not c.isspace():
            last = i
        i += 1
    return "".join(out)


def load_config(
    path: str | os.PathLike[str] | Mapping[str, Any], *, environ: Mapping[str, str] | None = None
) -> Config:
    """Read a configuration in the ``mcpServers`` format, from a file or a dict.

    The file may carry comments and trailing commas, as VS Code's ``.vscode/mcp.json``
    does (see :func:`strip_jsonc`).

    Args:
        path: the JSON file (``claude_desktop_config.json``, ``.cursor/mcp.json``,
            ``.vscode/mcp.json`` ...), or the configuration itself as a dict
            (``{"mcpServers": {...}}``).
        environ: where ``${VAR}`` values come from (default ``os.environ``).

    Raises:
        ConfigError: the file is missing, is not JSON, or its shape is wrong.

    Example:
        >>> cfg = load_config("mcp.json")                      # doctest: +SKIP
        >>> cfg["everything"].describe()                       # doctest: +SKIP
        'npx -y @modelcontextprotocol/server-everything'
    """
    if isinstance(path, Mapping):
        return parse_config(path, environ=environ)
    source = os.fspath(path)
    try:
        text = Path(source).read_text(encoding="utf-8-sig")
    except FileNotFoundError:
        raise ConfigError("no such file", source=source) from None
    except (OSError, UnicodeDecodeError) as exc:
        raise ConfigError(f"cannot read the file: {type(exc).__name__}", source=source) from None
    try:
        data = json.loads(text)
    except json.JSONDecodeError:
        data = None
    if data is None:  # comments, trailing commas (a file that is plain JSON never pays this)
        try:
            data = json.loads(strip_jsonc(text))
        except json.JSONDecodeError as exc:
            raise ConfigError(f"not valid JSON: {exc.msg} at line {exc.lineno} column {exc.colno}", source=source) from None
    return parse_config(data, source=source, environ=environ)


# ----------------------------------------------------------------------------- clients


def _accepts(fn: Any, name: str) -> bool:
    try:
        params = inspect.signature(fn).parameters
    except (TypeError, ValueError):
        return True
    if name in params:
        return True
    return any(p.kind is inspect.Parameter.VAR_KEYWORD for p in params.values())


def _names(fn: Any) -> set[str]:
    try:
        return set(inspect.signature(fn).parameters)
    except (TypeError, ValueError):
        return set()


def build_client(server: ServerConfig, *, client_class: Any = None, allow_disabled: bool = False, **options: Any) -> Any:
    """A :class:`~mcpsync.Client` for one configured server.

    stdio entries go through ``Client.stdio(command, args, env=, cwd=)``; remote ones
    through ``Client.http`` / ``Client.sse`` / ``Client.websocket`` / ``Client.grpc``.
    The entry's ``timeout`` becomes ``Timeouts(request=...)`` unless ``timeouts`` is
    given; ``name`` defaults to the entry's name.

    Args:
        server: the entry.
        client_class: the class to build (default :class:`mcpsync.Client`).
        allow_disabled: build it even if the entry says ``"disabled": true``.
        **options: keyword options of the Client (``mode``, ``retry``, ``profile`` ...).

    Raises:
        ConfigError: the entry says ``"disabled": true`` (pass ``allow_disabled=True`` to
            build it anyway), this build of mcpsync has no constructor for the entry's
            transport, or the constructor does not take its headers.
    """
    if server.disabled and not allow_disabled:
        where = server.templates.get("_where", f"mcpServers.{server.name}")
        raise ConfigError(
            f"server {server.name!r} is disabled in the configuration (\"disabled\": true); "
            "remove the flag, or pass allow_disabled=True to use it anyway",
            field=f"{where}.disabled",
            source=server.source,
            server=server.name,
        )
    if client_class is None:
        from ._client import Client as client_class  # noqa: N813
    options.setdefault("name", server.name)
    if server.timeout is not None and "timeouts" not in options:
        from ._policies import Timeouts

        options["timeouts"] = replace(Timeouts.DEFAULT, request=server.timeout)
    where = server.templates.get("_where", f"mcpServers.{server.name}")
    if server.transport == "stdio":
        return client_class.stdio(server.command, list(server.args), env=dict(server.env) or None, cwd=server.cwd, **options)
    ctor_name = _CONSTRUCTORS[server.transport]
    ctor = getattr(client_class, ctor_name, None)
    if ctor is None:
        raise ConfigError(
            f"this build of mcpsync cannot connect to {server.transport} servers (Client.{ctor_name} is missing)",
            field=f"{where}.type" if "type" in server.templates else f"{where}.url",
            source=server.source,
            server=server.name,
        )
    target = _target(server.transport, server.url or "", ctor, options)
    if server.headers:
        names = _names(ctor)
        if "headers" in names:
            options["headers"] = dict(server.headers)
        elif "metadata" in names:  # gRPC: a sequence of (key, value), keys lowercase
            options["metadata"] = [(k.lower(), v) for k, v in server.headers.items()]
        elif _accepts(ctor, "headers"):
            options["headers"] = dict(server.headers)
        else:
            raise ConfigError(
                f"Client.{ctor_name} takes no headers, so the configured headers cannot be sent",
                field=f"{where}.headers",
                source=server.source,
                server=server.name,
            )
    if server.endpoints:
        return _routed(server, client_class, ctor, options)
    return ctor(target, **options)


def _target(kind: str, url: str, ctor: Any, options: dict[str, Any]) -> str:
    """What the constructor takes: gRPC drops its ``grpc://`` scheme (``grpcs://`` asks for TLS)."""
    if kind == "grpc" and url.lower().startswith(("grpc://", "grpcs://")):
        if url.lower().startswith("grpcs://") and _accepts(ctor, "secure") and "secure" in _names(ctor):
            options.setdefault("secure", True)
        return url.split("://", 1)[1].rstrip("/")
    return url


def _routed(server: ServerConfig, client_class: Any, ctor: Any, options: dict[str, Any]) -> Any:
    """A routed Client over the entry's endpoints.

    Each endpoint's transport is made exactly as ``ctor(url, **options)`` would make
    it (headers, auth, TLS, the profile's limits): that Client is built once per
    endpoint, never connected, and only its transport factory is kept.
    """
    profile = options.pop("profile", None)
    if profile is not None:  # once, for the routed Client and its transports alike
        from ._profiles import resolve

        options, _flags = resolve(profile, server.transport, options, client_class, ctor)
    transport_options = {k: v for k, v in options.items() if k not in ("name", "record", "on_breaker_change")}
    factories: dict[str, Any] = {}
    for ep in server.endpoints:
        probe = ctor(_target(server.transport, str(ep.address), ctor, transport_options), **transport_options)
        factories[ep.name] = probe._factory
        probe.close()
    endpoints = [replace(ep, address=_target(server.transport, str(ep.address), ctor, {})) for ep in server.endpoints]
    accepted = _names(client_class.routed) | _names(client_class.__init__)
    options = {k: v for k, v in options.items() if k in accepted}  # the rest was spent on the transports
    if server.transport in ("http", "sse"):
        from ._policies import PoolLimits

        options.setdefault("pool", PoolLimits.SINGLE)  # as Client.http: urllib3 pools the sockets
    return client_class.routed(endpoints, lambda ep: factories[ep.name](), region=server.region, **options)


def client_from_config(
    path: str | os.PathLike[str] | Mapping[str, Any], name: str, *, environ: Mapping[str, str] | None = None, **options: Any
) -> Any:
    """Load ``path`` and build the Client for its server ``name``.

    This is ``Client.from_config(path, name, **options)``.

    Args:
        path: the configuration file, or the configuration as a dict.
        name: the server's key under ``mcpServers``.
        environ: where ``${VAR}`` values come from (default ``os.environ``).
        **options: keyword options of the Client; they win over the file's.

    Raises:
        ConfigError: the file is bad, ``name`` is not defined, is ``disabled``, or its
            variables are unset.

    Example:
        >>> from mcpsync import Client
        >>> with Client.from_config("mcp.json", "everything") as client:    # doctest: +SKIP
        ...     print(client.call_tool("echo", {"message": "hi"}).text)
    """
    return build_client(load_config(path, environ=environ)[name], **options)
