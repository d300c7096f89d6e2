"""HTTP and gRPC statuses as mcpsync errors: the one table each, for every transport.

A transport that meets an HTTP status without a JSON-RPC message in it (Streamable HTTP,
HTTP+SSE, the WebSocket handshake) or a gRPC status asks :func:`error_from_http_status` /
:func:`error_from_grpc_status` for the error to raise; the tables (:data:`HTTP_STATUS_TABLE`,
:data:`GRPC_STATUS_TABLE`) may be changed in place. The error classes are
:mod:`mcpsync._errors`'s.
"""

from __future__ import annotations

import re
from typing import Any, Mapping

from ._errors import (
    INTERNAL_ERROR,
    INVALID_PARAMS,
    NOT_SENT_ERRORS,
    AuthError,
    ConnectError,
    ConnectionClosed,
    InvalidParams,
    MCPError,
    MessageTooLarge,
    NetworkError,
    PermissionDenied,
    ProtocolError,
    RemoteError,
    RequestTimeout,
    SessionExpired,
)

__all__ = [
    "HTTP_STATUS_TABLE", "GRPC_STATUS_TABLE", "RETRY_AFTER_STATUSES", "error_from_http_status",
    "error_from_grpc_status", "retry_after_seconds",
]


# --- HTTP ---------------------------------------------------------------------------

#: HTTP status → exception class. Statuses not listed fall back by class: other 4xx →
#: ProtocolError, other 5xx → NetworkError. Change it in place to map new statuses.
HTTP_STATUS_TABLE: dict[int, type[MCPError]] = {
    400: ProtocolError,  # malformed request, missing/invalid session header
    401: AuthError,
    403: PermissionDenied,
    404: SessionExpired,  # Streamable HTTP / HTTP+SSE: the session is gone (without one: ProtocolError)
    405: ProtocolError,  # method not allowed (e.g. no GET stream offered)
    406: ProtocolError,
    408: RequestTimeout,
    409: ProtocolError,
    413: MessageTooLarge,
    415: ProtocolError,
    422: ProtocolError,
    429: NetworkError,  # rate limited, the request did not run: sent=False, retry_after
    500: NetworkError,
    502: NetworkError,
    503: NetworkError,  # retry_after; may have run: only safe calls are retried
    504: RequestTimeout,
}

#: Statuses whose error always carries ``retry_after`` (None when the server named none).
RETRY_AFTER_STATUSES = frozenset({429, 503})


def retry_after_seconds(value: str | None, now: float | None = None) -> float | None:
    """Seconds to wait from a ``Retry-After`` value: delta-seconds or an HTTP-date.

    Returns None when ``value`` is absent or unreadable; a date in the past is 0.

    Example:
        >>> retry_after_seconds("7"), retry_after_seconds(None), retry_after_seconds("soon")
        (7.0, None, None)
        >>> retry_after_seconds("Wed, 21 Oct 2015 07:28:00 GMT", now=1445412480.0)
        0.0
    """
    if value is None:
        return None
    value = value.strip()
    if value.isdigit():
        return float(value)
    from email.utils import parsedate_to_datetime

    try:
        when = parsedate_to_datetime(value)
    except (TypeError, ValueError, IndexError):
        return None
    if when.tzinfo is None:
        return None  # RFC 9110 dates are GMT; one without a zone is not one
    import time

    return max(0.0, when.timestamp() - (time.time() if now is None else now))


def _header(headers: Mapping[str, str], name: str) -> str | None:
    value = headers.get(name)
    if value is None:
        value = headers.get(name.lower())
    return value


def _build(cls: type[MCPError], message: str, fields: dict[str, Any]) -> MCPError:
    if issubclass(cls, RemoteError):
        fields.setdefault("code", INVALID_PARAMS if issubclass(cls, InvalidParams) else INTERNAL_ERROR)
    return cls(message, **fields)


def _connect_phase(cls: type[MCPError]) -> tuple[type[MCPError], dict[str, Any]]:
    """During connect, timeouts and dead pipes are connect failures."""
    if issubclass(cls, RequestTimeout):
        return ConnectError, {"timeout": True}
    if issubclass(cls, (ConnectionClosed, NetworkError)) and not issubclass(cls, NOT_SENT_ERRORS):
        return ConnectError, {"timeout": False}
    return cls, {}


def error_from_http_status(
    status: int,
    message: str = "",
    *,
    connecting: bool = False,
    headers: Mapping[str, str] | None = None,
    session: bool = True,
    table: Mapping[int, type[MCPError]] | None = None,
    **fields: Any,
) -> MCPError:
    """Build the typed exception for an HTTP error status (not raised).

    This is the mapping the HTTP transports use. 429 and 503 carry ``retry_after``
    (seconds from the ``Retry-After`` header, None without one); a 429 also carries
    ``sent=False``: the server refused the request before running it, so even a call
    with side effects may be sent again. Other 4xx statuses are the client's own
    mistakes (:class:`ProtocolError` with ``status``: never retried, never counted by
    the breaker).

    Args:
        status: the HTTP status code (>= 400).
        message: text for the exception (default ``"HTTP <status>"``).
        connecting: the status answered the connection attempt itself (handshake); a
            timeout or gateway failure then becomes :class:`ConnectError`.
        headers: the response headers (``Retry-After`` is read from them).
        session: the request carried a session (``Mcp-Session-Id`` or an HTTP+SSE
            endpoint): a 404 then means the session is gone (:class:`SessionExpired`);
            without one it means the URL is wrong (:class:`ProtocolError`).
        table: the status table (default :data:`HTTP_STATUS_TABLE`).
        **fields: extra fields for the exception (they win over the ones above).

    Returns:
        The exception; it carries ``status``.

    Example:
        >>> type(error_from_http_status(401)).__name__, type(error_from_http_status(504)).__name__
        ('AuthError', 'RequestTimeout')
        >>> err = error_from_http_status(429, headers={"Retry-After": "3"})
        >>> type(err).__name__, err.retry_after, err.sent
        ('NetworkError', 3.0, False)
    """
    cls = (table if table is not None else HTTP_STATUS_TABLE).get(status)
    if cls is None:
        cls = NetworkError if status >= 500 else ProtocolError
    if status == 404 and not session and issubclass(cls, ConnectionClosed):
        cls = ProtocolError
    extra: dict[str, Any] = {}
    if connecting:
        cls, extra = _connect_phase(cls)
    if status in RETRY_AFTER_STATUSES:
        extra["retry_after"] = retry_after_seconds(_header(headers, "Retry-After")) if headers is not None else None
        if status == 429:
            extra["sent"] = False
    return _build(cls, message or f"HTTP {status}", {"status": status, **extra, **fields})


# --- gRPC ---------------------------------------------------------------------------

#: gRPC status name → exception class. The gRPC transport carries opaque JSON-RPC frames,
#: so these are transport-level statuses, not tool errors.
GRPC_STATUS_TABLE: dict[str, type[MCPError]] = {
    # the client's own cancellations never reach the mapper: a CANCELLED status is the
    # peer (or a proxy) ending the stream
    "CANCELLED": ConnectionClosed,
    "UNKNOWN": ConnectionClosed,  # every status ends its stream: for a session, the connection
    "INVALID_ARGUMENT": ProtocolError,
    "DEADLINE_EXCEEDED": RequestTimeout,
    "NOT_FOUND": ConnectError,  # no such service/method at that address
    "ALREADY_EXISTS": ProtocolError,
    "PERMISSION_DENIED": PermissionDenied,
    "RESOURCE_EXHAUSTED": NetworkError,  # quota / flow control: transient (a message over
    # the size limit, "larger than max", is MessageTooLarge: see error_from_grpc_status)
    "FAILED_PRECONDITION": ProtocolError,
    "ABORTED": ConnectionClosed,
    "OUT_OF_RANGE": ProtocolError,
    "UNIMPLEMENTED": ProtocolError,
    "INTERNAL": ConnectionClosed,  # e.g. a frame that does not deserialize
    "UNAVAILABLE": ConnectionClosed,
    "DATA_LOSS": ConnectionClosed,
    "UNAUTHENTICATED": AuthError,
}

_GRPC_CODE_NAMES = (
    "OK CANCELLED UNKNOWN INVALID_ARGUMENT DEADLINE_EXCEEDED NOT_FOUND ALREADY_EXISTS "
    "PERMISSION_DENIED RESOURCE_EXHAUSTED FAILED_PRECONDITION ABORTED OUT_OF_RANGE "
    "UNIMPLEMENTED INTERNAL UNAVAILABLE DATA_LOSS UNAUTHENTICATED"
).split()


_GRPC_TOO_LARGE = re.compile(r"(?i)larger than max|message too large|exceeds? the (?:maximum|limit)")


def _grpc_name(status: Any) -> str:
    name = getattr(status, "name", None)  # grpc.StatusCode
    if isinstance(name, str):
        return name
    if isinstance(status, int) and 0 <= status < len(_GRPC_CODE_NAMES):
        return _GRPC_CODE_NAMES[status]
    return str(status).upper().removeprefix("STATUSCODE.")


def error_from_grpc_status(
    status: Any,
    message: str = "",
    *,
    connecting: bool = False,
    table: Mapping[str, type[MCPError]] | None = None,
    **fields: Any,
) -> MCPError:
    """Build the typed exception for a gRPC status (not raised).

    Args:
        status: a ``grpc.StatusCode``, its name (``"UNAVAILABLE"``) or its number.
        message: the status details.
        connecting: the status ended the connection attempt (``UNAVAILABLE`` or
            ``DEADLINE_EXCEEDED`` then mean :class:`ConnectError`).
        table: the status table (default :data:`GRPC_STATUS_TABLE`).
        **fields: extra fields for the exception.

    Returns:
        The exception; it carries ``status`` (the status name, as the gRPC transport's
        own errors do).
    """
    name = _grpc_name(status)
    cls = (table if table is not None else GRPC_STATUS_TABLE).get(name, NetworkError)
    if name == "RESOURCE_EXHAUSTED" and _GRPC_TOO_LARGE.search(message):
        cls = MessageTooLarge  # grpc's own message-size limit, either side
    extra: dict[str, Any] = {}
    if connecting:
        cls, extra = _connect_phase(cls)
    return _build(cls, message or f"gRPC {name}", {"status": name, **extra, **fields})
