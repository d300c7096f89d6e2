"""The exception tree of mcpsync.

Every call ends in a result or one of these. The tree is shallow on purpose::

    MCPError
    ├── NetworkError                 the pipe failed (retryable in general)
    │   ├── ConnectError             could not start / reach / handshake the server
    │   │   └── StartFailed          the server cannot start (no such command, exited): not retried
    │   ├── ConnectionClosed         the connection died (EOF, reset, process exit)
    │   │   ├── SessionExpired       the server no longer knows the session (HTTP 404); renewable: not run
    │   │   └── PoolClosed           the connection pool was closed
    │   ├── RequestTimeout           no answer within the request timeout
    │   ├── ServerUnavailable        marked unavailable after repeated reconnect failures
    │   │   └── NoEndpointAvailable  every endpoint of a routed server is unavailable
    │   ├── CircuitOpen              the server's circuit breaker is open
    │   └── PoolTimeout              no pooled connection became free in time (never sent)
    ├── ProtocolError                the peer broke JSON-RPC / MCP (bad frame, bad envelope)
    │   ├── MessageTooLarge          a message exceeded the configured maximum size
    │   ├── SkillIntegrityError      a skill file differs from its listing (size/digest/frontmatter)
    │   ├── InputRequestError        a server asked for input this client could not give
    │   └── OutputSchemaError        structuredContent does not match the tool's outputSchema
    ├── RemoteError                  the server answered with a JSON-RPC error (code/message/data)
    │   ├── ToolError
    │   │   ├── ToolNotFound
    │   │   └── InvalidParams
    │   ├── ResourceError
    │   │   └── ResourceNotFound
    │   ├── MethodNotFound
    │   └── UnsupportedProtocolVersion
    ├── AuthError                    authentication / authorization failed (never retried)
    │   ├── PermissionDenied
    │   └── TokenEndpointError       the authorization server refused a token request
    └── Cancelled                    the call was cancelled by the caller

Outside :class:`MCPError`, for what goes wrong before any server is involved::

    ValueError
    ├── ConfigError                  a configuration file is malformed or unusable
    └── ProfileError                 an unknown profile, or a server it does not allow
    Exception
    └── UsageError                   a command line mcpsync cannot run (exit status 2)

Kept elsewhere on purpose: ``FrameTooLarge`` (``mcpsync._speedups``: the compiled
framer's own signal, which must not import the package; the stdio transport turns it
into :class:`MessageTooLarge`).

``RemoteError`` subclasses are chosen from the JSON-RPC error code by a configurable
table, :data:`ERROR_CODE_TABLE`; :func:`error_from_code` applies it.
"""

from __future__ import annotations

import re
from typing import Any, Mapping

__all__ = [
    "MCPError", "NetworkError", "ConnectError", "StartFailed", "ConnectionClosed", "SessionExpired",
    "RequestTimeout", "ServerUnavailable", "CircuitOpen", "ProtocolError", "MessageTooLarge",
    "SkillIntegrityError", "RemoteError", "ToolError", "ToolNotFound", "InvalidParams", "ResourceError",
    "ResourceNotFound", "MethodNotFound", "UnsupportedProtocolVersion", "AuthError", "PermissionDenied",
    "Cancelled", "ERROR_CODE_TABLE", "error_from_code",
]

# JSON-RPC 2.0 and MCP error codes.
PARSE_ERROR = -32700
INVALID_REQUEST = -32600
METHOD_NOT_FOUND = -32601
INVALID_PARAMS = -32602
INTERNAL_ERROR = -32603
RESOURCE_NOT_FOUND_OLD = -32002
UNSUPPORTED_VERSION = -32022
URL_ELICITATION_REQUIRED = -32042
REQUEST_TIMEOUT = -32001  # a request (or the client's own handler) did not answer in time
HEADER_MISMATCH = -32020  # 2026-07-28: the Mcp-* headers disagree with the body


class MCPError(Exception):
    """Base of every error mcpsync raises.

    Attributes:
        retry_history: set on the error that ends a call made through the retry loop:
            one ``(error class name, seconds waited before it)`` pair per attempt.
        retried_errors: set with ``retry_history``: the earlier attempts' errors,
            oldest first.
    """

    # for type checkers only: set on the instance when a retried call ends (_retry.retry_call)
    retry_history: tuple[tuple[str, float], ...]
    retried_errors: tuple[MCPError, ...]

    def __init__(self, message: str = "", **fields: Any) -> None:
        super().__init__(message)
        self.message = message
        for key, value in fields.items():
            setattr(self, key, value)
        self._fields = tuple(fields)

    def __reduce__(self) -> Any:
        fields = {name: getattr(self, name) for name in self._fields}
        return (_rebuild, (type(self), self.message, fields))

    def __str__(self) -> str:
        return self.message


def _rebuild(cls: type[MCPError], message: str, fields: dict[str, Any]) -> MCPError:
    return cls(message, **fields)


class NetworkError(MCPError):
    """The connection to the server failed; the call may be retried."""


class ConnectError(NetworkError):
    """The server could not be started, reached or initialised within the connect timeout."""


class StartFailed(ConnectError):
    """The server cannot be started, and trying again would not change that.

    Raised at once, never retried: the command does not exist or cannot be run, or the
    process exited before it answered its handshake. The message names the command,
    the exit code and the last lines the process wrote to stderr.

    Attributes:
        command: the command line (as given).
        exit_code: the process's exit status (``None``: it never ran).
        stderr_tail: the last lines of its stderr (may be empty).
    """


class ConnectionClosed(NetworkError):
    """The connection died while the call was pending (EOF, reset, child exit)."""


class SessionExpired(ConnectionClosed):
    """The server no longer knows this session (Streamable HTTP 404, or a 400 that names
    the session): a session error, not a server fault (the breaker does not count it).

    The Streamable HTTP transport raises it ``renewable`` (and ``sent=False``: the request
    was not processed) with the lost session's id: the session layer re-initializes on
    the same connection and sends the request once more. Lost again right after that, it
    reaches the caller without ``renewable``; the connection is replaced on the reconnect
    schedule.

    Attributes:
        renewable: the request was not processed and a new session may be started on
            the same connection.
        session_id: the session id the failed request carried (None when unknown).
    """

    renewable: bool = False
    session_id: str | None = None


class RequestTimeout(NetworkError):
    """The server did not answer within the request timeout; the server was told to cancel."""


class ServerUnavailable(NetworkError):
    """The server was marked unavailable after repeated reconnection failures
    (``failures``: how many in a row)."""

    failures: int


class CircuitOpen(NetworkError):
    """The server's circuit breaker is open: calls fail fast until it cools down."""


class ProtocolError(MCPError):
    """The peer sent something that is not valid JSON-RPC / MCP."""


class MessageTooLarge(ProtocolError):
    """A message exceeded the configured maximum size and was dropped."""


class SkillIntegrityError(ProtocolError):
    """A skill file the server served differs from what its skills listing declared (size,
    digest or frontmatter; SEP-2640), or is not in that listing. Its content is not used.

    Attributes:
        uri: the file's URI.
        check: which check failed: ``size``, ``digest``, ``frontmatter`` or ``manifest``.
        expected: the declared value; ``actual``: what was served.
    """


class RemoteError(MCPError):
    """The server answered with a JSON-RPC error object.

    Attributes:
        code: the JSON-RPC error code.
        data: the error's ``data`` member, if any.
    """

    code: int
    data: Any

    def __init__(self, message: str = "", code: int = INTERNAL_ERROR, data: Any = None, **fields: Any) -> None:
        super().__init__(message, code=code, data=data, **fields)


class ToolError(RemoteError):
    """A tool call failed at the protocol level."""


class ToolNotFound(ToolError):
    """The named tool does not exist on the server."""


class InvalidParams(ToolError):
    """The request's parameters were rejected (-32602)."""


class ResourceError(RemoteError):
    """A resource operation failed."""


class ResourceNotFound(ResourceError):
    """The resource does not exist (-32602 in current revisions, -32002 in older ones)."""


class MethodNotFound(RemoteError):
    """The server does not implement the method (-32601)."""


class UnsupportedProtocolVersion(RemoteError):
    """The server does not support the protocol version asked for (-32022)."""


class AuthError(MCPError):
    """Authentication failed or no valid token could be obtained. Never retried."""


class PermissionDenied(AuthError):
    """The credentials are valid but not allowed to do this."""


class Cancelled(MCPError):
    """The call was cancelled by the caller."""


#: JSON-RPC error code → exception class. Change it in place to map new codes.
ERROR_CODE_TABLE: dict[int, type[RemoteError]] = {
    METHOD_NOT_FOUND: MethodNotFound,
    INVALID_PARAMS: InvalidParams,
    RESOURCE_NOT_FOUND_OLD: ResourceNotFound,
    UNSUPPORTED_VERSION: UnsupportedProtocolVersion,
}


def error_from_code(
    code: int,
    message: str,
    data: Any = None,
    *,
    method: str | None = None,
    table: Mapping[int, type[RemoteError]] | None = None,
) -> RemoteError:
    """Build the typed exception for a JSON-RPC error object.

    Args:
        code: the error code.
        message: the error message.
        data: the error data.
        method: the request method, used to refine generic codes (an invalid-params
            error on ``resources/read`` is a missing resource; on ``tools/call`` naming an
            unknown tool it is :class:`ToolNotFound`).
        table: the code table (default :data:`ERROR_CODE_TABLE`).

    Returns:
        The exception, not raised.
    """
    cls = (table if table is not None else ERROR_CODE_TABLE).get(code, RemoteError)
    if code == INVALID_PARAMS and method is not None:
        low = message.lower()
        if method == "resources/read" and ("not found" in low or "unknown" in low):
            cls = ResourceNotFound
        elif method == "tools/call" and ("not found" in low or "unknown tool" in low):
            cls = ToolNotFound
    return cls(message, code=code, data=data)


# ---------------------------------------------------------------------------------------
# Resilience additions (issue 7): pool errors, error classification, and the mapping of
# HTTP statuses and gRPC statuses onto the tree above. (Lower-layer exceptions are
# translated where they are caught, by each transport: transports/_http_errors.translate.)
# ---------------------------------------------------------------------------------------

class PoolTimeout(NetworkError):
    """No pooled connection became free within the pool's borrow timeout.

    The request never left the client, so it is always safe to retry.
    """


class PoolClosed(ConnectionClosed):
    """The connection pool was closed; no connection can be borrowed from it."""


class InputRequestError(ProtocolError):
    """A modern-era server asked for input (``InputRequiredResult``) that this client could
    not give: no handler for it, the handler failed or timed out, or too many rounds."""


class OutputSchemaError(ProtocolError):
    """A tool's ``structuredContent`` does not match its declared ``outputSchema``.

    Attributes:
        tool: the tool's name.
        path: JSON pointer-like path of the first failing location ("" for the root).
        code: -32602 (the result is invalid for the declared schema).
    """


class NoEndpointAvailable(ServerUnavailable):
    """Every endpoint of the server is unavailable (or behind an open breaker)."""


# --- not MCPError: a wrong configuration or command line, before any server is involved


class ConfigError(ValueError):
    """A configuration file is malformed, or names something that cannot be used.

    Attributes:
        field: the dotted path of the bad field (``mcpServers.everything.args[2]``), or
            ``None`` for errors of the whole file.
        source: the file, when the configuration came from one.
        server: the server entry concerned, when there is one.
    """

    def __init__(self, message: str, *, field: str | None = None, source: str | None = None, server: str | None = None) -> None:
        self.field = field
        self.source = source
        self.server = server
        self.detail = message
        text = f"{field}: {message}" if field else message
        if source:
            text = f"{source}: {text}"
        super().__init__(text)

    def __reduce__(self) -> Any:
        return (_rebuild_config_error, (self.detail, self.field, self.source, self.server))


def _rebuild_config_error(message: str, field: str | None, source: str | None, server: str | None) -> ConfigError:
    return ConfigError(message, field=field, source=source, server=server)


class ProfileError(ValueError):
    """An unknown profile, or a server the chosen profile does not allow."""


class UsageError(Exception):
    """A command line that ``mcpsync`` (or ``mcpsync bench``) cannot run: exit status 2."""


__all__ += [
    "PoolTimeout", "PoolClosed", "InputRequestError", "OutputSchemaError", "NoEndpointAvailable",
    "ConfigError", "ProfileError", "UsageError", "NOT_SENT_ERRORS", "TRANSIENT_CODES", "attach_fields", "seconds",
    "may_have_reached_server", "is_server_error", "is_transient", "counts_as_breaker_failure",
    "HTTP_STATUS_TABLE", "GRPC_STATUS_TABLE", "error_from_http_status", "error_from_grpc_status",
    "retry_after_seconds",
]

#: Errors raised before the request was written anywhere: retrying them can never
#: duplicate a side effect. An instance attribute ``sent`` (bool) overrides this.
NOT_SENT_ERRORS: tuple[type[MCPError], ...] = (ConnectError, CircuitOpen, ServerUnavailable, PoolTimeout, PoolClosed)


#: JSON-RPC error codes that mark a *transient* fault: an error answer with one of these
#: is retried (per the retry policy) and counts towards the circuit breaker. Every other
#: error answer proves the server alive: it is raised at once and counts for nothing.
#: Empty by default (an SDK server answers a handler that raised with -32603, which a
#: retry would only repeat); add the codes your servers use for "busy, try again".
TRANSIENT_CODES: set[int] = set()


def seconds(t: float) -> str:
    """A timeout as a message states it: as the caller wrote it, not what was left of it
    after some microseconds went elsewhere (``seconds(1.99995) == "2"``)."""
    return f"{t:.3g}" if t < 100 else f"{t:.0f}"


def attach_fields(exc: BaseException, **fields: Any) -> BaseException:
    """Set extra attributes on ``exc`` so that they survive pickling.

    For an :class:`MCPError` the names join the ones ``__reduce__`` carries; for any
    other exception they are plain attributes.

    Example:
        >>> err = attach_fields(ConnectionClosed("gone"), retry_history=(("ConnectionClosed", 0.0),))
        >>> err.retry_history
        (('ConnectionClosed', 0.0),)
    """
    for key, value in fields.items():
        setattr(exc, key, value)
    if isinstance(exc, MCPError):
        exc._fields = tuple(dict.fromkeys((*exc._fields, *fields)))
    return exc


def may_have_reached_server(exc: BaseException) -> bool:
    """Whether the failed attempt may have been seen by the server (side effects possible).

    ``exc.sent`` (a bool set by the raiser) decides when present; otherwise the
    :data:`NOT_SENT_ERRORS` classes are known never to have left the client.
    """
    sent = getattr(exc, "sent", None)
    if isinstance(sent, bool):
        return sent
    return not isinstance(exc, NOT_SENT_ERRORS)


def is_server_error(exc: BaseException) -> bool:
    """A JSON-RPC error answer whose code :data:`TRANSIENT_CODES` marks transient.

    Any other error answer proves the server alive and answering on purpose: it is
    never retried and never counts towards the circuit breaker.
    """
    if not isinstance(exc, RemoteError):
        return False
    code = getattr(exc, "code", None)
    return isinstance(code, int) and code in TRANSIENT_CODES


def is_transient(exc: BaseException) -> bool:
    """A failure that another attempt may not repeat: transport errors and server faults.

    Never transient: :class:`StartFailed` (the command cannot run), :class:`PoolClosed`
    (the client was closed: nothing may run after that), :class:`AuthError`,
    :class:`Cancelled`, every JSON-RPC error answer whose code is not in
    :data:`TRANSIENT_CODES`, :class:`ProtocolError`.
    """
    if isinstance(exc, NetworkError):
        return not isinstance(exc, (StartFailed, PoolClosed))
    return is_server_error(exc)


def counts_as_breaker_failure(exc: BaseException) -> bool:
    """Whether ``exc`` is evidence that the *server* is unwell (the breaker counts it).

    Counted: transport errors and timeouts (``NetworkError``, which includes HTTP 5xx
    and 429), except the client's own fail-fast errors (``CircuitOpen``,
    ``ServerUnavailable``, ``PoolTimeout``, ``PoolClosed``), start failures (the command
    cannot run: the breaker cannot help), lost sessions (:class:`SessionExpired`), a
    connection still being made when the caller's time ran out (``pending``) and a
    retry that timed out on the remainder of its call's time (``truncated``);
    protocol garbage (``ProtocolError`` except ``MessageTooLarge`` and errors for an
    HTTP 4xx status, which are the client's own mistakes); error answers whose code is
    in :data:`TRANSIENT_CODES`. Not counted: every other JSON-RPC error answer (the
    server is alive), ``isError`` tool results (results, not exceptions), AuthError,
    Cancelled.
    """
    if isinstance(exc, (CircuitOpen, ServerUnavailable, PoolTimeout, PoolClosed, StartFailed, SessionExpired)):
        return False
    if isinstance(exc, NetworkError):
        # ``pending``: the caller's time ran out while the connection was still being
        # made (a server still starting is not a failing one); ``truncated``: a retry
        # that timed out on what was left of its call's time, not on a whole timeout
        return getattr(exc, "pending", False) is not True and getattr(exc, "truncated", False) is not True
    if isinstance(exc, ProtocolError):
        status = getattr(exc, "status", None)
        if isinstance(status, int) and 400 <= status < 500:
            return False
        return not isinstance(exc, MessageTooLarge)
    return is_server_error(exc)


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
# ----------------------------------------------------------------------------- OAuth (mcpsync.auth)


class TokenEndpointError(AuthError):
    """An OAuth authorization server answered a token, device or exchange request with an
    OAuth error (RFC 6749 §5.2). ``error`` keeps its code (``invalid_grant``,
    ``authorization_pending``, …), ``status`` the HTTP status."""

    error: str | None
    status: int


__all__ += ["TokenEndpointError"]  # drawn under AuthError in the tree above
