"""The exception tree of mcpsync.

Every call ends in a result or one of these. The tree is shallow on purpose::

    MCPError
    ├── NetworkError                 the pipe failed (retryable in general)
    │   ├── ConnectError             could not start / reach / handshake the server
    │   ├── ConnectionClosed         the connection died (EOF, reset, process exit)
    │   ├── RequestTimeout           no answer within the request timeout
    │   ├── ServerUnavailable        marked unavailable after repeated reconnect failures
    │   └── CircuitOpen              the server's circuit breaker is open
    ├── ProtocolError                the peer broke JSON-RPC / MCP (bad frame, bad envelope)
    │   └── MessageTooLarge          a message exceeded the configured maximum size
    ├── RemoteError                  the server answered with a JSON-RPC error (code/message/data)
    │   ├── ToolError
    │   │   ├── ToolNotFound
    │   │   └── InvalidParams
    │   ├── ResourceError
    │   │   └── ResourceNotFound
    │   ├── MethodNotFound
    │   └── UnsupportedProtocolVersion
    ├── AuthError                    authentication / authorization failed (never retried)
    │   └── PermissionDenied
    └── Cancelled                    the call was cancelled by the caller

``RemoteError`` subclasses are chosen from the JSON-RPC error code by a configurable
table, :data:`ERROR_CODE_TABLE`; :func:`error_from_code` applies it.
"""

from __future__ import annotations

from typing import Any, Mapping

__all__ = [
    "MCPError",
    "NetworkError",
    "ConnectError",
    "ConnectionClosed",
    "RequestTimeout",
    "ServerUnavailable",
    "CircuitOpen",
    "ProtocolError",
    "MessageTooLarge",
    "RemoteError",
    "ToolError",
    "ToolNotFound",
    "InvalidParams",
    "ResourceError",
    "ResourceNotFound",
    "MethodNotFound",
    "UnsupportedProtocolVersion",
    "AuthError",
    "PermissionDenied",
    "Cancelled",
    "ERROR_CODE_TABLE",
    "error_from_code",
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


class MCPError(Exception):
    """Base of every error mcpsync raises."""

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


class ConnectionClosed(NetworkError):
    """The connection died while the call was pending (EOF, reset, child exit)."""


class RequestTimeout(NetworkError):
    """The server did not answer within the request timeout; the server was told to cancel."""


class ServerUnavailable(NetworkError):
    """The server was marked unavailable after repeated reconnection failures."""


class CircuitOpen(NetworkError):
    """The server's circuit breaker is open: calls fail fast until it cools down."""


class ProtocolError(MCPError):
    """The peer sent something that is not valid JSON-RPC / MCP."""


class MessageTooLarge(ProtocolError):
    """A message exceeded the configured maximum size and was dropped."""


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
