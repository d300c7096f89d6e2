"""What the Client needs from one connection to a server.

Two implementations exist: :class:`~mcpsync._dispatcher.Dispatcher` (JSON-RPC over a
byte :class:`~mcpsync.transports.Transport`) and the Local transport's in-process
channel, which calls registered Python functions with no serialisation.
"""

from __future__ import annotations

from typing import Any, Callable, Mapping, Protocol

__all__ = ["Channel", "ProgressCallback", "NotificationHandler", "RequestHandler"]

#: progress(progress, total, message)
ProgressCallback = Callable[[float, "float | None", "str | None"], None]
#: on_notification(method, params) — params as plain JSON (dict) or None
NotificationHandler = Callable[[str, "Mapping[str, Any] | None"], None]
#: on_request(method, params) -> result (JSON-compatible); raise RemoteError for an error reply
RequestHandler = Callable[[str, "Mapping[str, Any] | None"], Any]


class Channel(Protocol):
    """A connection as the Client sees it.

    ``request`` blocks until the response arrives and returns the undecoded result
    (``msgspec.Raw``) or an already-built Python object (Local transport); the Client
    decodes either with :func:`mcpsync._messages.decode_result`. It raises the typed
    errors of :mod:`mcpsync._errors` (RemoteError for an error response, RequestTimeout,
    ConnectionClosed, ...). Handlers registered with ``set_handlers`` are never called on
    the thread that reads the connection.
    """

    def request(
        self,
        method: str,
        params: Mapping[str, Any] | None,
        timeout: float | None = None,
        progress: ProgressCallback | None = None,
    ) -> Any: ...

    def notify(self, method: str, params: Mapping[str, Any] | None = None) -> None: ...

    def set_handlers(
        self,
        on_notification: NotificationHandler | None = None,
        on_request: RequestHandler | None = None,
    ) -> None: ...

    def alive(self) -> bool: ...

    def close(self) -> None: ...
