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
carry ``timeout`` (seconds per request) and ``disabled``. An ``http`` or ``sse`` entry may
also set ``verify`` (``false``, ``"system"`` or a CA file or directory), ``cert`` (a client
certificate: a PEM file, or ``[certfile, keyfile]``) and ``proxy`` (a forward proxy URL),
the options of :meth:`~mcpsync.Client.http`. A remote server run as several
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

Strings in ``command``, ``args``, ``env``, ``cwd``, ``url``, ``headers``, ``verify``, ``cert`` and ``proxy`` expand
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

import json
import os
import re
from dataclasses import dataclass, field, replace
from pathlib import Path
from types import MappingProxyType
from typing import Any, Callable, Iterator, Mapping, Sequence

from ._policies import PoolLimits, Timeouts
from ._profiles import resolve
from ._routing import Endpoint
from .transports._factory import TRANSPORT_OPTIONS, build
from ._config_formats import (
    EDITOR_KEYS,
    KEY_ALIASES,
    KNOWN_KEYS,
    TRANSPORTS,
    ConfigError,
    check_entry,
    check_url,
    describe,
    expand,
    expect_map,
    mask_url,
    strip_jsonc,
)

__all__ = [
    "ConfigError",
    "ServerConfig",
    "Config",
    "load_config",
    "parse_config",
    "ClientPlan",
    "client_plan",
    "open_client",
    "expand",
    "strip_jsonc",
    "TRANSPORTS",
    "EDITOR_KEYS",
]

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
            (:class:`~mcpsync.Endpoint` values, ``address`` = the URL); empty
            for a server with one ``url``.
        region: the region to prefer among the endpoints.
        headers: headers sent on every request (remote; gRPC metadata).
        verify: whom TLS trusts (http, sse): True, False, ``"system"``, a CA file or directory.
        cert: a client certificate (http, sse): a PEM file, or ``(certfile, keyfile)``.
        proxy: a forward proxy URL (http, sse); None: the environment's.
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
    verify: bool | str = True
    cert: str | tuple[str, str] | None = None
    proxy: str | None = None
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
        if isinstance(self.cert, list):
            object.__setattr__(self, "cert", tuple(self.cert))

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
            shown = [f"{e.name}={mask_url(str(u))}" for e, u in zip(self.endpoints, t.get("endpoint_urls", ()))]
            parts.append(f"endpoints={shown!r}")
            if self.region is not None:
                parts.append(f"region={self.region!r}")
            if self.headers:
                parts.append("headers={" + ", ".join(f"{k!r}: '***'" for k in self.headers) + "}")
        else:
            parts.append(f"url={mask_url(str(t.get('url', self.url)))!r}")
            if self.headers:
                parts.append("headers={" + ", ".join(f"{k!r}: '***'" for k in self.headers) + "}")
        if self.verify is not True:
            parts.append(f"verify={t.get('verify', self.verify)!r}")
        if self.cert is not None:
            parts.append(f"cert={t.get('cert', self.cert)!r}")
        if self.proxy is not None:
            parts.append(f"proxy={mask_url(str(t.get('proxy', self.proxy)))!r}")
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
        return f"{self.transport} {mask_url(str(t.get('url', self.url)))}"


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
        errors: server name → the error that makes it unusable (a malformed entry, an
            unset variable).
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
            for i, ep in enumerate(raw["endpoints"]):
                at = f"{where}.endpoints[{i}].url"
                address = check_url(kind, x(ep["url"], at).strip(), ep["url"], at)
                endpoints.append(Endpoint(ep["name"], address=address, region=ep.get("region")))
            url = endpoints[0].address
            raw = {**raw, "endpoint_urls": [ep["url"] for ep in raw["endpoints"]]}
        else:
            url = check_url(kind, x(raw["url"], f"{where}.url").strip(), raw["url"], f"{where}.url")
        headers = {k: x(v, f"{where}.headers.{k}") for k, v in raw["headers"].items()}
        for k, v in headers.items():
            if "\r" in v or "\n" in v:
                raise ConfigError("header values must not contain line breaks", field=f"{where}.headers.{k}")
        verify, cert, proxy = raw.get("verify", True), raw.get("cert"), raw.get("proxy")
        if isinstance(verify, str):
            verify = x(verify, f"{where}.verify")
        if cert is not None:
            cert = x(cert, f"{where}.cert") if isinstance(cert, str) else tuple(x(c, f"{where}.cert[{i}]") for i, c in enumerate(cert))
        return ServerConfig(
            name=name,
            transport=kind,
            url=url,
            headers=headers,
            verify=verify,
            cert=cert,
            proxy=x(proxy, f"{where}.proxy") if proxy is not None else None,
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


def parse_config(
    data: Any, *, source: str | None = None, environ: Mapping[str, str] | None = None, strict: bool = False
) -> Config:
    """Validate a decoded configuration (``{"mcpServers": {...}}``) and expand its variables.

    One bad entry fails that server, not the file (as an editor's list of servers shows
    the others): its :class:`ConfigError` is in :attr:`Config.errors`, and raised when it
    is asked for by name.

    Args:
        data: the decoded JSON document.
        source: the file name, for error messages.
        environ: where ``${VAR}`` values come from (default ``os.environ``).
        strict: raise the first bad entry's error instead (an unset variable still goes to
            :attr:`Config.errors`: it is the environment's, not the file's).

    Returns:
        The servers; those whose entry is malformed or whose variables are unset are in
        :attr:`Config.errors`.

    Raises:
        ConfigError: the document's shape is wrong (not an object, no ``mcpServers``
            object, a server name that is not a string), or with ``strict`` an entry's;
            the message names the field.
    """
    try:
        top = expect_map(data, "")
    except ConfigError:
        raise ConfigError(f"expected a JSON object with \"mcpServers\", got {describe(data)}", source=source) from None
    key = "mcpServers" if "mcpServers" in top else ("servers" if "servers" in top else None)
    if key is None:
        import difflib

        near = difflib.get_close_matches("mcpServers", [k for k in top if isinstance(k, str)], n=1, cutoff=0.7)
        hint = f": found {near[0]!r}, did you mean \"mcpServers\"?" if near else " (no \"mcpServers\" key found)"
        raise ConfigError(f"expected a top-level \"mcpServers\" object{hint}", source=source)
    try:
        entries = expect_map(top[key], key)
        servers: dict[str, ServerConfig] = {}
        errors: dict[str, ConfigError] = {}
        shaped: list[tuple[str, str, dict[str, Any], dict[str, Any], str]] = []
        for name, entry in entries.items():
            where = f"{key}.{name}"
            if not isinstance(name, str) or not name.strip():
                raise ConfigError("server names must be non-empty strings", field=key)
            try:
                kind, raw = check_entry(name, entry, where)
            except ConfigError as exc:
                if strict:
                    raise ConfigError(exc.detail, field=exc.field, server=name) from None
                errors[name] = ConfigError(exc.detail, field=exc.field, source=source, server=name)
                shaped.append((name, "", {}, {}, where))  # (its place in the file's order)
                continue
            extra = {k: v for k, v in entry.items() if k not in KNOWN_KEYS and k not in KEY_ALIASES}
            shaped.append((name, kind, raw, extra, where))
    except ConfigError as exc:
        raise ConfigError(exc.detail, field=exc.field, source=source, server=exc.server) from None
    for name, kind, raw, extra, where in shaped:
        if name in errors:
            continue
        try:
            servers[name] = _resolve(name, kind, raw, extra, where, environ, source)
        except ConfigError as exc:
            errors[name] = exc
    return Config(servers, errors, source, order=[name for name, *_ in shaped])


def load_config(
    path: str | os.PathLike[str] | Mapping[str, Any], *, environ: Mapping[str, str] | None = None, strict: bool = False
) -> Config:
    """Read a configuration in the ``mcpServers`` format, from a file or a dict.

    The file may carry comments and trailing commas, as VS Code's ``.vscode/mcp.json``
    does (see :func:`strip_jsonc`).

    Args:
        path: the JSON file (``claude_desktop_config.json``, ``.cursor/mcp.json``,
            ``.vscode/mcp.json`` ...), or the configuration itself as a dict
            (``{"mcpServers": {...}}``).
        environ: where ``${VAR}`` values come from (default ``os.environ``).
        strict: a bad entry fails the file (default: that server only; see :func:`parse_config`).

    Raises:
        ConfigError: the file is missing, is not JSON, or its shape is wrong.

    Example:
        >>> cfg = load_config("mcp.json")                      # doctest: +SKIP
        >>> cfg["everything"].describe()                       # doctest: +SKIP
        'npx -y @modelcontextprotocol/server-everything'
    """
    if isinstance(path, Mapping):
        return parse_config(path, environ=environ, strict=strict)
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
    return parse_config(data, source=source, environ=environ, strict=strict)


# ----------------------------------------------------------------------------- clients


@dataclass(frozen=True)
class ClientPlan:
    """How to build the :class:`~mcpsync.Client` of one entry (what
    :meth:`Client.from_config <mcpsync.Client.from_config>` follows).

    Attributes:
        kind: the transport kind (see :mod:`mcpsync.transports._factory`).
        target: what the kind connects to: ``(command, args)`` for stdio, else the address.
        options: the constructor's keyword options (the transport's and the Client's,
            ``profile`` included unless spent on :attr:`make`).
        endpoints: a routed server's endpoints (their ``address`` is the target).
        make: for a routed server, builds a fresh transport for an endpoint
            (``None`` otherwise).
        region: the region to prefer among the endpoints.
    """

    kind: str
    target: Any
    options: dict[str, Any]
    endpoints: tuple[Endpoint, ...] = ()
    make: Callable[[Endpoint], Any] | None = None
    region: str | None = None


def client_plan(server: ServerConfig, *, allow_disabled: bool = False, **options: Any) -> ClientPlan:
    """The constructor and options of the Client for one configured server.

    stdio entries become ``Client.stdio(command, args, env=, cwd=)``; remote ones the
    constructor of their kind, with the entry's headers (gRPC: as metadata, and a
    ``grpcs://`` URL asks for TLS). The entry's ``timeout`` becomes
    ``Timeouts(request=...)`` unless ``timeouts`` is given; ``name`` defaults to the
    entry's name.

    Args:
        server: the entry.
        allow_disabled: build it even if the entry says ``"disabled": true``.
        **options: keyword options of the Client (``mode``, ``retry``, ``profile`` ...).

    Raises:
        ConfigError: the entry says ``"disabled": true`` (pass ``allow_disabled=True`` to
            build it anyway).
    """
    where = server.templates.get("_where", f"mcpServers.{server.name}")
    if server.disabled and not allow_disabled:
        raise ConfigError(
            f"server {server.name!r} is disabled in the configuration (\"disabled\": true); "
            "remove the flag, or pass allow_disabled=True to use it anyway",
            field=f"{where}.disabled",
            source=server.source,
            server=server.name,
        )
    options.setdefault("name", server.name)
    if server.timeout is not None and "timeouts" not in options:
        options["timeouts"] = replace(Timeouts.DEFAULT, request=server.timeout)
    if server.transport == "stdio":
        options.update(env=dict(server.env) or None, cwd=server.cwd)
        return ClientPlan("stdio", (server.command or "", list(server.args)), options)
    if server.headers:
        if server.transport == "grpc":  # a sequence of (key, value), keys lowercase
            options["metadata"] = [(k.lower(), v) for k, v in server.headers.items()]
        else:
            options["headers"] = dict(server.headers)
    for key, default in (("verify", True), ("cert", None), ("proxy", None)):
        if getattr(server, key) != default:
            options.setdefault(key, getattr(server, key))
    target = _target(server.transport, server.url or "", options)
    if not server.endpoints:
        return ClientPlan(server.transport, target, options)
    return _routed(server, options)


def open_client(client: Any, path: Any, name: str | None, options: dict[str, Any]) -> Any:
    """``Client.from_config`` (see there): ``client`` is the Client class, given by the
    caller so that configuration never imports it."""
    environ = options.pop("environ", None)
    if isinstance(path, ServerConfig):
        server = path
    elif name is None:
        raise TypeError("Client.from_config(path, name): name the server to connect to")
    else:
        server = load_config(path, environ=environ)[name]
    plan = client_plan(server, **options)
    if plan.make is not None:
        return client.routed(plan.endpoints, plan.make, region=plan.region, **plan.options)
    if plan.kind == "stdio":
        command, args = plan.target
        return client.stdio(command, args, **plan.options)
    build = {"http": client.http, "sse": client.sse, "websocket": client.websocket, "grpc": client.grpc, "local": client.local}
    return build[plan.kind](plan.target, **plan.options)


def _target(kind: str, url: str, options: dict[str, Any]) -> str:
    """What the transport takes: gRPC drops its ``grpc://`` scheme (``grpcs://`` asks for TLS)."""
    if kind == "grpc" and url.lower().startswith(("grpc://", "grpcs://")):
        if url.lower().startswith("grpcs://"):
            options.setdefault("secure", True)
        return url.split("://", 1)[1].rstrip("/")
    return url


def _routed(server: ServerConfig, options: dict[str, Any]) -> ClientPlan:
    """A routed Client over the entry's endpoints, each endpoint's transport made as
    the kind's constructor would make it (headers, auth, TLS, the profile's limits)."""
    profile = options.pop("profile", None)
    kind = server.transport
    if profile is not None:  # once, for the routed Client and its transports alike
        options, _flags = resolve(profile, kind, options)
    transport_options = {k: options.pop(k) for k in TRANSPORT_OPTIONS[kind] & options.keys()}
    timeouts = options.get("timeouts", Timeouts.DEFAULT)
    factories = {
        ep.name: build(kind, _target(kind, str(ep.address), dict(transport_options)), transport_options, timeouts=timeouts).factory
        for ep in server.endpoints
    }
    endpoints = tuple(replace(ep, address=_target(kind, str(ep.address), {})) for ep in server.endpoints)
    if kind in ("http", "sse"):
        options.setdefault("pool", PoolLimits.SINGLE)  # as Client.http: urllib3 pools the sockets
    return ClientPlan(kind, endpoints[0].address, options, endpoints, lambda ep: factories[ep.name](), server.region)
