"""The ``mcpServers`` file formats: the keys a server entry may have, other editors'
spellings and misspellings of them, ``${VAR}`` expansion, JSON with comments, and the
shape checks of one entry (:mod:`mcpsync._config` turns the checked entries into
:class:`~mcpsync._config.ServerConfig` values; see it for the format itself).

Example:
    >>> expand("Bearer ${TOKEN}", {"TOKEN": "abc"})
    'Bearer abc'
"""

from __future__ import annotations

import os
import re
from typing import Any, Mapping

from ._errors import ConfigError

__all__ = ["ConfigError", "expand", "strip_jsonc", "TRANSPORTS", "EDITOR_KEYS", "KNOWN_KEYS", "KEY_ALIASES", "check_entry",
           "check_url", "describe", "expect_map", "mask_url"]

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

KNOWN_KEYS = {"type", "transport", "command", "args", "env", "cwd", "url", "headers", "timeout", "disabled", "endpoints", "region",
          "verify", "cert", "proxy"}
#: Keys only the HTTP transports (``http``, ``sse``) read: TLS trust, client certificate, proxy.
HTTP_KEYS = ("verify", "cert", "proxy")

#: Other editors' names for keys mcpsync reads, read as those keys: Windsurf's ``serverUrl``,
#: Gemini CLI's ``httpUrl`` (a Streamable HTTP URL), Cline's ``transportType``.
KEY_ALIASES = {"serverUrl": "url", "httpUrl": "url", "transportType": "type"}

#: Other spellings people write for the keys mcpsync reads: a key close to one of these
#: (or to a key in ``KNOWN_KEYS``) is reported as a typo, with the key meant.
_SYNONYMS = {
    "environment": "env", "environ": "env", "envs": "env", "env_vars": "env", "envvars": "env",
    "arguments": "args", "argv": "args", "cmd": "command", "executable": "command",
    "uri": "url", "endpoint": "url", "address": "url", "serverurl": "url", "server_url": "url",
    "header": "headers", "workingdirectory": "cwd", "working_directory": "cwd", "workdir": "cwd",
    "directory": "cwd", "timeoutseconds": "timeout", "timeout_seconds": "timeout",
    "disable": "disabled", "enabled": "disabled", "kind": "type",
    "ca": "verify", "cafile": "verify", "ca_bundle": "verify", "cabundle": "verify", "ssl_verify": "verify",
    "client_cert": "cert", "clientcert": "cert", "certificate": "cert", "http_proxy": "proxy", "https_proxy": "proxy",
}
#: Keys editors and other clients write that mcpsync does not use: never reported.
EDITOR_KEYS = frozenset({
    "autoApprove", "alwaysAllow", "autoapprove", "envFile", "description", "disabledTools", "enabledTools",
    "includeTools", "excludeTools", "trust", "gallery", "version", "dev", "roots", "oauth", "auth",
    "icon", "title", "note", "notes", "comment", "_comment", "id", "name",
})

_VAR = re.compile(r"\$\$\{|\$\{([^}]*)\}")
_NAME_OK = re.compile(r"[A-Za-z_][A-Za-z0-9_]*\Z")


def describe(value: Any) -> str:
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


def mask_url(url: str) -> str:
    # hide a password in user:password@host; the template itself is shown otherwise
    return re.sub(r"(://[^/@:]*):[^/@]*@", r"\1:***@", url)


# ----------------------------------------------------------------------------- parsing


def _expect_str(value: Any, where: str) -> str:
    if not isinstance(value, str):
        raise ConfigError(f"expected a string, got {describe(value)}", field=where)
    return value


def expect_map(value: Any, where: str) -> Mapping[str, Any]:
    if not isinstance(value, Mapping):
        raise ConfigError(f"expected an object, got {describe(value)}", field=where)
    return value


def _did_you_mean(key: str) -> str | None:
    """The key ``key`` was probably meant to be (a misspelling of one mcpsync reads)."""
    import difflib

    if not isinstance(key, str) or key in KNOWN_KEYS or key in EDITOR_KEYS or key in KEY_ALIASES:
        return None
    low = key.lower()
    if low in KNOWN_KEYS:
        return low
    if low in _SYNONYMS:
        return _SYNONYMS[low]
    candidates = {k: k for k in KNOWN_KEYS}
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
                f"(a server entry reads {', '.join(sorted(KNOWN_KEYS))})",
                field=f"{where}.{key}",
            )


def _unalias(entry: Mapping[str, Any], where: str) -> Mapping[str, Any]:
    """Other editors' spellings (:data:`KEY_ALIASES`) read as the keys they stand for."""
    present = [k for k in KEY_ALIASES if k in entry]
    if not present:
        return entry
    out = dict(entry)
    for key in present:
        meant = KEY_ALIASES[key]
        if meant in out or (meant == "url" and "endpoints" in out):
            raise ConfigError(f"give either {meant!r} or {key!r}, not both", field=f"{where}.{key}")
        out[meant] = out.pop(key)
        if key == "httpUrl" and "type" not in out and "transport" not in out:
            out["type"] = "http"
    return out


def check_entry(name: str, entry: Any, where: str) -> tuple[str, dict[str, Any]]:
    """Validate the shape of one entry; return its transport and the raw templates."""
    entry = expect_map(entry, where)
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
        for key in ("url", "headers", *HTTP_KEYS):
            if key in entry:
                raise ConfigError(f"\"{key}\" belongs to remote servers, not to a stdio server", field=f"{where}.{key}")
        raw["command"] = _expect_str(entry["command"], f"{where}.command")
        if not raw["command"].strip():
            raise ConfigError("must not be empty", field=f"{where}.command")
        args = entry.get("args", [])
        if not isinstance(args, (list, tuple)):
            raise ConfigError(f"expected a list of strings, got {describe(args)}", field=f"{where}.args")
        raw["args"] = [_expect_str(a, f"{where}.args[{i}]") for i, a in enumerate(args)]
        env = expect_map(entry.get("env", {}) if entry.get("env") is not None else {}, f"{where}.env")
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
                check_url(kind, ep["url"].strip(), ep["url"], at)
        headers = expect_map(entry.get("headers", {}) if entry.get("headers") is not None else {}, f"{where}.headers")
        raw["headers"] = {}
        for k, v in headers.items():
            if not isinstance(k, str) or not k or any(c in k for c in ":\r\n "):
                raise ConfigError("header names must be non-empty, without spaces, colons or line breaks", field=f"{where}.headers")
            raw["headers"][k] = _expect_str(v, f"{where}.headers.{k}")
        for key in HTTP_KEYS:
            if entry.get(key) is not None:
                if kind not in ("http", "sse"):
                    raise ConfigError(f"\"{key}\" belongs to http and sse servers, not to a {kind} server",
                                      field=f"{where}.{key}")
                raw[key] = _check_http_key(key, entry[key], f"{where}.{key}")
    if "timeout" in entry and entry["timeout"] is not None:
        t = entry["timeout"]
        if isinstance(t, bool) or not isinstance(t, (int, float)):
            raise ConfigError(f"expected a number of seconds, got {describe(t)}", field=f"{where}.timeout")
        if t <= 0:
            raise ConfigError(f"must be positive, got {describe(t)}", field=f"{where}.timeout")
        raw["timeout"] = float(t)
    if "disabled" in entry:
        d = entry["disabled"]
        if not isinstance(d, bool):
            raise ConfigError(f"expected true or false, got {describe(d)}", field=f"{where}.disabled")
        raw["disabled"] = d
    raw["_where"] = where
    return kind, raw


def _check_http_key(key: str, value: Any, where: str) -> Any:
    """``verify``: true, false or a string (``"system"``, a CA file or directory);
    ``cert``: a PEM file's path, or ``[certfile, keyfile]``; ``proxy``: a URL string."""
    if key == "verify" and isinstance(value, bool):
        return value
    if key == "cert" and isinstance(value, (list, tuple)):
        if len(value) != 2:
            raise ConfigError(f"expected a file or [certfile, keyfile], got {describe(value)}", field=where)
        return [_expect_str(v, f"{where}[{i}]") for i, v in enumerate(value)]
    if not isinstance(value, str):
        expected = {"verify": "true, false or a string", "cert": "a string or [certfile, keyfile]", "proxy": "a string"}[key]
        raise ConfigError(f"expected {expected}, got {describe(value)}", field=where)
    return value


def _check_endpoints(value: Any, where: str) -> list[dict[str, Any]]:
    if not isinstance(value, (list, tuple)) or not value:
        raise ConfigError(f"expected a non-empty list of endpoints, got {describe(value)}", field=where)
    out: list[dict[str, Any]] = []
    names: set[str] = set()
    for i, item in enumerate(value):
        at = f"{where}[{i}]"
        item = expect_map(item, at)
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


def check_url(kind: str, url: str, template: str, where: str) -> str:
    low = url.lower()
    shown = mask_url(template)
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
