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
    ├── Cancelled                    the call was cancelled by the caller
    ├── TransientResult              a result ``RetryPolicy.retry_result`` judged transient (internal)
    └── AgentToolError               a tool error or failed call, raised to an agent framework

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

from typing import Any, Mapping

__all__ = [
    "MCPError", "NetworkError", "ConnectError", "StartFailed", "ConnectionClosed", "SessionExpired",
    "RequestTimeout", "ServerUnavailable", "CircuitOpen", "ProtocolError", "MessageTooLarge",
    "SkillIntegrityError", "RemoteError", "ToolError", "ToolNotFound", "InvalidParams", "ResourceError",
    "ResourceNotFound", "MethodNotFound", "UnsupportedProtocolVersion", "AuthError", "PermissionDenied",
    "Cancelled", "TransientResult", "AgentToolError", "ERROR_CODE_TABLE", "error_from_code",
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


class TransientResult(MCPError):
    """A result that ``RetryPolicy.retry_result`` judged transient: the retry loop's signal
    to try again (never raised to a caller: when the retries end, the result is returned).

    Attributes:
        result: the result. ``retry_after``: seconds to wait at least (None: the schedule's).
    """

    result: Any
    retry_after: float | None


class AgentToolError(MCPError):
    """A tool error or a failed call, raised where an agent framework's tool errors are
    exceptions (``mcpsync.integrations``): the message is the text the model reads."""


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
# Pool errors, error classification, and the mapping of
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
]

#: Errors raised before the request was written anywhere: retrying them can never
#: duplicate a side effect. An instance attribute ``sent`` (bool) overrides this.
NOT_SENT_ERRORS: tuple[type[MCPError], ...] = (ConnectError, CircuitOpen, ServerUnavailable, PoolTimeout, PoolClosed)


#: Deprecated: set ``RetryPolicy(transient_codes=...)``, where policies live. JSON-RPC error
#: codes that mark a *transient* fault for every client (retried, counted by the breaker);
#: still honoured, together with each policy's own. Empty by default.
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
    """A failure that another attempt may not repeat: transport errors, server faults and
    results judged transient (:class:`TransientResult`).

    Never transient: :class:`StartFailed` (the command cannot run), :class:`PoolClosed`
    (the client was closed: nothing may run after that), a :class:`ConnectError` marked
    ``unreached`` (refused or unresolved on a first contact: the reconnect schedule is for
    servers that were reached), :class:`AuthError`, :class:`Cancelled`, every JSON-RPC error
    answer whose code is not in :data:`TRANSIENT_CODES` (a policy adds its own:
    ``RetryPolicy.is_transient``), :class:`ProtocolError`.
    """
    if isinstance(exc, NetworkError):
        return not isinstance(exc, (StartFailed, PoolClosed)) and getattr(exc, "unreached", False) is not True
    return isinstance(exc, TransientResult) or is_server_error(exc)


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


# ----------------------------------------------------------------------------- OAuth (mcpsync.auth)


class TokenEndpointError(AuthError):
    """An OAuth authorization server answered a token, device or exchange request with an
    OAuth error (RFC 6749 §5.2). ``error`` keeps its code (``invalid_grant``,
    ``authorization_pending``, …), ``status`` the HTTP status."""

    error: str | None
    status: int


__all__ += ["TokenEndpointError"]  # drawn under AuthError in the tree above
