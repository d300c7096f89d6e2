"""Local transport: a registry's functions called in-process, no serialisation.

:class:`LocalChannel` implements the :class:`~mcpsync._channel.Channel` protocol the
Client talks to, directly: no bytes, no JSON, no reader thread, no thread hop. A
``tools/call`` runs the registered function on the calling thread and returns a typed
:class:`~mcpsync.CallToolResult`; an exception raised by the tool becomes a result with
``is_error=True``; an unknown tool or bad arguments raise :class:`~mcpsync.ToolNotFound`
/ :class:`~mcpsync.InvalidParams`, exactly as a remote server's errors would.

Because the tool runs on the caller's thread, a request ``timeout`` cannot interrupt
it (a Local tool is trusted code); progress callbacks run on that thread too.

Example:
    >>> from mcpsync.server import Registry
    >>> reg = Registry("calc")
    >>> @reg.tool()
    ... def add(a: int, b: int) -> int:
    ...     return a + b
    >>> chan = LocalChannel(reg)
    >>> chan.request("tools/call", {"name": "add", "arguments": {"a": 2, "b": 3}}).structured_content
    {'result': 5}
"""

from __future__ import annotations

from typing import Any, Mapping

from .._channel import NotificationHandler, ProgressCallback, RequestHandler
from .._errors import ConnectionClosed

__all__ = ["LocalChannel"]


class LocalChannel:
    """An in-process :class:`~mcpsync._channel.Channel` over a :class:`mcpsync.server.Registry`.

    Args:
        registry: the tools, resources and prompts to serve; anything with a
            ``local_handle()`` (see :meth:`mcpsync.server.Registry.local_handle`) and a ``name``.
    """

    kind = "local"

    def __init__(self, registry: Any) -> None:
        self.registry = registry
        self._handle = registry.local_handle()
        self._closed = False
        self._on_notification: NotificationHandler | None = None
        self._on_request: RequestHandler | None = None

    def request(
        self,
        method: str,
        params: Mapping[str, Any] | None,
        timeout: float | None = None,
        progress: ProgressCallback | None = None,
    ) -> Any:
        if self._closed:
            raise ConnectionClosed(f"{self.describe()}: channel is closed")
        if method == "tools/call" and params is not None:
            name = params.get("name")
            if isinstance(name, str):
                log = self._log if self._on_notification is not None else None
                if progress is None and log is None:
                    return self._handle.call_tool(name, params.get("arguments"))
                return self._handle.call_tool(name, params.get("arguments"), progress, self._log, params.get("_meta"))
        return self._handle.handle(method, params)

    def _log(self, level: str, data: Any) -> None:
        handler = self._on_notification
        if handler is not None:
            handler("notifications/message", {"level": level, "logger": self.registry.name, "data": data})

    def notify(self, method: str, params: Mapping[str, Any] | None = None) -> None:
        if self._closed:
            raise ConnectionClosed(f"{self.describe()}: channel is closed")

    def set_handlers(
        self,
        on_notification: NotificationHandler | None = None,
        on_request: RequestHandler | None = None,
        on_notice: NotificationHandler | None = None,  # (a registry sends log messages only: nothing to notice)
    ) -> None:
        self._on_notification = on_notification
        self._on_request = on_request

    def alive(self) -> bool:
        return not self._closed

    def close(self) -> None:
        self._closed = True

    def describe(self) -> str:
        return f"local {self.registry.name}"
