"""HTTP request headers: the encoding of MCP header values (``Mcp-Name``, and the
``Mcp-Param-*`` headers a tool's input schema asks for with ``x-mcp-header``, which the
tools layer, :mod:`mcpsync._tools`, learns and computes: no transport decodes a tool
listing), and the auth hook's headers and retries (DPoP nonce challenges included).
"""

from __future__ import annotations

import base64
import re
from types import MappingProxyType
from typing import Any, Mapping

from .._errors import AuthError, MCPError
from ._http_options import HeaderBlock, headers_problem

_HEADER_SAFE = re.compile(r"^[\x20-\x7E]*$")
_B64_SENTINEL = re.compile(r"^=\?base64\?.*\?=$")
_TOKEN = re.compile(r"^[!#$%&'*+\-.^_`|~0-9A-Za-z]+$")
_PRIMITIVE = ("string", "integer", "boolean")
_SUB_ONE = ("additionalProperties", "items", "contains", "not", "if", "then", "else", "propertyNames",
            "unevaluatedItems", "unevaluatedProperties", "contentSchema", "additionalItems")
_SUB_LIST = ("allOf", "anyOf", "oneOf", "prefixItems")
_SUB_MAP = ("patternProperties", "dependentSchemas", "$defs", "definitions")
_X_HEADER = "x-mcp-header"


def encode_header_value(value: str) -> str:
    """A header value as is when it is plain printable ASCII, else ``=?base64?…?=``."""
    if _HEADER_SAFE.match(value) and value == value.strip() and not _B64_SENTINEL.match(value):
        return value
    return "=?base64?" + base64.b64encode(value.encode("utf-8")).decode("ascii") + "?="


def _schema_positions(root: Any) -> list[tuple[tuple[str, ...] | None, dict[str, Any]]]:
    """Every subschema of ``root`` with its pure-``properties`` path (None when off that chain)."""
    out: list[tuple[tuple[str, ...] | None, dict[str, Any]]] = []
    stack: list[tuple[tuple[str, ...] | None, Any]] = [((), root)]
    budget = 10_000
    while stack and budget > 0:
        budget -= 1
        path, schema = stack.pop()
        if not isinstance(schema, dict):
            continue
        out.append((path, schema))
        for kw, val in schema.items():
            if kw == "properties" and isinstance(val, dict):
                for name, sub in val.items():
                    stack.append(((*path, name) if path is not None else None, sub))
            elif kw in _SUB_ONE:
                stack.append((None, val))
            elif kw in _SUB_LIST and isinstance(val, list):
                stack.extend((None, sub) for sub in val)
            elif kw in _SUB_MAP and isinstance(val, dict):
                stack.extend((None, sub) for sub in val.values())
    return out


def header_annotation_error(input_schema: Any) -> str | None:
    """Why the ``x-mcp-header`` annotations of a tool's input schema are invalid, or None.

    A valid annotation sits on a property reached from the root through ``properties``
    only, is an RFC 9110 token, annotates a string / integer / boolean property, and is
    unique (case-insensitively). Tools with an invalid annotation are dropped by the
    client.
    """
    seen: set[str] = set()
    for path, schema in _schema_positions(input_schema):
        if _X_HEADER not in schema:
            continue
        if not path:
            return "x-mcp-header outside a pure properties chain"
        token = schema[_X_HEADER]
        if not isinstance(token, str) or not _TOKEN.match(token):
            return f"x-mcp-header on {'.'.join(path)!r} is not an HTTP token"
        if schema.get("type") not in _PRIMITIVE:
            return f"x-mcp-header on {'.'.join(path)!r} is not on a string/integer/boolean property"
        if token.lower() in seen:
            return f"x-mcp-header {token!r} appears twice"
        seen.add(token.lower())
    return None


def header_annotations(input_schema: Any) -> dict[tuple[str, ...], str]:
    """Property path → header token, for a schema :func:`header_annotation_error` accepts."""
    return {
        path: schema[_X_HEADER]
        for path, schema in _schema_positions(input_schema)
        if path and isinstance(schema.get(_X_HEADER), str)
    }


def mcp_param_headers(annotations: Mapping[tuple[str, ...], str], arguments: Any) -> dict[str, str]:
    """The ``Mcp-Param-<token>`` headers mirroring ``arguments`` (absent values omitted)."""
    headers: dict[str, str] = {}
    for path, token in annotations.items():
        node: Any = arguments
        for key in path:
            node = node.get(key) if isinstance(node, dict) else None
        if node is None:
            continue
        if isinstance(node, bool):
            rendered = "true" if node else "false"
        elif isinstance(node, (str, int, float)):
            rendered = str(node)
        else:
            continue
        headers["Mcp-Param-" + token] = encode_header_value(rendered)
    return headers


_NONE: Mapping[str, str] = MappingProxyType({})


def _checked(given: Mapping[str, str], url: str) -> dict[str, str]:
    """A copy of the hook's headers once they are known to go on the wire as they are."""
    headers = dict(given)
    problem = headers_problem(headers)
    if problem is not None:
        raise AuthError(f"the auth hook's headers for {url} cannot be sent: {problem}")
    return headers


def auth_send_headers(auth: Any, headers: Mapping[str, str], url: str, method: str) -> Mapping[str, str]:
    """``headers`` with the auth hook's over them, as one request sends them (never changed).

    The hook is asked every time. A :class:`~._http_options.HeaderBlock` (a kind of
    request's headers) keeps what it was last merged into (``HeaderBlock.authed``): while
    the hook gives the same headers, that merged block, checked and with its wire form
    kept by the fast path, is sent again, so a bearer token costs the hook's call and one
    dict comparison a request. Other headers (made per request) are merged anew.

    Raises:
        AuthError: the hook failed, or gave a header that cannot go on the wire (CR, LF,
            NUL … in a token: never sent, never quoted).
    """
    try:  # (the hook is asked on every request: one frame)
        given = auth.headers(url, method)
    except MCPError:
        raise
    except Exception as exc:  # the hook is user / OAuth code
        raise auth_failed(exc, url) from exc
    if type(headers) is not HeaderBlock:
        return {**headers, **_checked(given or _NONE, url)}
    last = headers.authed  # (hook, its headers, the merged block): stored and read as one
    if last is not None and last[0] is auth and last[1] == (given or _NONE):
        return last[2]
    return auth_merge(auth, headers, given, url)


def auth_failed(exc: Exception, url: str) -> MCPError:
    """What an auth hook that raised ``exc`` when asked for headers makes a request raise:
    an MCPError as it is, anything else an AuthError."""
    if isinstance(exc, MCPError):
        return exc
    return AuthError(f"the auth hook failed to provide headers for {url}: {exc}")


def auth_merge(auth: Any, headers: HeaderBlock, given: Mapping[str, str] | None, url: str) -> HeaderBlock:
    """``headers`` with the hook's ``given`` over them, kept as the block's last merge
    (``HeaderBlock.authed``) for the requests after it while the hook gives the same.

    Raises:
        AuthError: a header that cannot go on the wire (never sent, never quoted).
    """
    mine = _checked(given or _NONE, url)
    block = HeaderBlock({**headers, **mine})
    headers.authed = (auth, mine, block)  # (a copy: a hook may change the dict it gave)
    return block


#: DPoP nonce challenges answered per HTTP request (RFC 9449 §9), apart from the one auth retry.
MAX_DPOP_NONCE_RETRIES = 2
_USE_DPOP_NONCE = re.compile(r'\berror\s*=\s*"?use_dpop_nonce\b', re.IGNORECASE)


def dpop_nonce_challenge(status: int, headers: Mapping[str, str]) -> bool:
    """A 401 asking the client to put the server's ``DPoP-Nonce`` in its proof (RFC 9449 §9):
    a request to answer with the nonce, not a failed authorization."""
    return (
        status == 401
        and bool(headers.get("DPoP-Nonce"))
        and bool(_USE_DPOP_NONCE.search(headers.get("WWW-Authenticate") or ""))
    )


def auth_retry(auth: Any, url: str, method: str, status: int, headers: Mapping[str, str]) -> bool:
    """Ask the auth hook whether a 401/403 should be retried with fresh headers."""
    if auth is None or not hasattr(auth, "on_response"):
        return False
    try:
        return bool(auth.on_response(url, method, status, headers))
    except MCPError:
        raise
    except Exception as exc:
        raise AuthError(f"the auth hook failed on HTTP {status} from {url}: {exc}") from exc
