"""In-process transport: a server object of the official ``mcp`` SDK (or FastMCP's) run in
this process, so users can test their own server with mcpsync in a plain pytest function.

The server runs on a private event loop on its own thread (an anyio blocking portal),
connected through the SDK's own in-memory transport (the one its tests use), so it is
the real server code, protocol handling included, with no process and no socket. The
client side is an ordinary byte :class:`~mcpsync.transports.Transport`: messages cross
as JSON, exactly as they would over stdio, and the Client's dispatcher, retries and
timeouts work as for any server. :meth:`SDKServerTransport.close` ends the server (the
SDK gives it 2 s to finish its teardown, then cancels it) and stops the loop's thread.

:class:`mcpsync.Client` uses it when :meth:`~mcpsync.Client.local` is given such an
object::

    from mcp.server.mcpserver import MCPServer
    from mcpsync import Client

    server = MCPServer("calc")

    @server.tool()
    def add(a: int, b: int) -> int:
        return a + b

    def test_add():
        with Client.local(server) as client:
            assert client.call_tool("add", {"a": 2, "b": 3}).structured_content == {"result": 5}

Accepted: ``mcp.server.mcpserver.MCPServer``, the SDK's low-level ``mcp.server.Server``,
and a FastMCP server (``fastmcp.FastMCP``, through the low-level server it wraps).
"""

from __future__ import annotations

import logging
import threading
from typing import Any, Callable

from .._channel import MessageFacts
from .._errors import ConnectionClosed, ConnectError, RequestTimeout
from ._base import Transport
from ._inbox import ENDED, Inbox

__all__ = ["SDKServerTransport", "is_sdk_server", "sdk_server_factory"]

log = logging.getLogger("mcpsync.transports.inprocess")


def _lowlevel(server: Any) -> Any:
    """The SDK server the in-memory transport can run, or None."""
    module = type(server).__module__ or ""
    if module.startswith("mcp.server"):
        return server
    if module.startswith("fastmcp"):
        inner = getattr(server, "_mcp_server", None)
        if inner is not None and (type(inner).__module__ or "").startswith(("mcp.server", "fastmcp")):
            return inner
    return None


def is_sdk_server(obj: Any) -> bool:
    """Whether ``obj`` is a server object of the official SDK or of FastMCP."""
    return _lowlevel(obj) is not None


def sdk_server_factory(server: Any) -> Callable[[], "SDKServerTransport"] | None:
    """A transport factory for ``server`` (None when it is not an SDK/FastMCP server)."""
    if _lowlevel(server) is None:
        return None
    return lambda: SDKServerTransport(server)


class SDKServerTransport(Transport):
    """A byte transport to an SDK (or FastMCP) server object run in this process.

    Args:
        server: the server object (``MCPServer``, a low-level ``Server``, ``FastMCP``).
    """

    kind = "inprocess"

    def __init__(self, server: Any) -> None:
        self.server = server
        self.name = str(getattr(server, "name", None) or type(server).__name__)
        self._incoming = Inbox()
        self.next_message = self._incoming.first  # (see Transport.next_message)
        self._portal_cm: Any = None
        self._portal: Any = None
        self._streams_cm: Any = None
        self._write: Any = None
        self._closed = False
        self._eof = False
        self._lock = threading.Lock()
        #: the event loop's thread (for tests: it has ended once close() returned)
        self.loop_thread: threading.Thread | None = None

    # ------------------------------------------------------------------ life

    def connect(self, timeout: float) -> None:
        from anyio.from_thread import start_blocking_portal

        try:
            from mcp.client._memory import InMemoryTransport
        except ImportError as exc:  # pragma: no cover - the SDK moved it
            raise ConnectError(f"the installed mcp SDK has no in-memory transport: {exc}") from exc
        with self._lock:
            if self._closed:
                raise ConnectionClosed(f"in-process server {self.name} was closed")
            target = self.server
            if (type(target).__module__ or "").startswith("fastmcp"):
                target = _lowlevel(target)
            self._portal_cm = start_blocking_portal(backend="asyncio")
            self._portal = self._portal_cm.__enter__()
        try:
            self.loop_thread = self._portal.call(threading.current_thread)
            self._streams_cm = self._portal.wrap_async_context_manager(InMemoryTransport(target))
            read, write = self._streams_cm.__enter__()
            self._write = write
            self._portal.start_task_soon(self._pump, read)
        except BaseException:
            self.close()
            raise

    async def _pump(self, read: Any) -> None:
        put = self._incoming.put
        try:
            async for item in read:
                if isinstance(item, Exception):
                    log.warning("in-process server %s: %s", self.name, item)
                    continue
                put(item.message.model_dump_json(by_alias=True, exclude_unset=True).encode())
        except Exception:  # noqa: BLE001 - the stream ended under us: that is EOF
            log.debug("in-process server %s: reading ended", self.name, exc_info=True)
        finally:
            self._incoming.end()

    def close(self) -> None:
        with self._lock:
            if self._closed:
                return
            self._closed = True
            streams, self._streams_cm = self._streams_cm, None
            portal_cm, self._portal_cm = self._portal_cm, None
        try:
            if streams is not None:
                streams.__exit__(None, None, None)  # EOF to the server; bounded by the SDK (2 s)
        except Exception:  # noqa: BLE001 - close is best effort
            log.debug("closing in-process server %s failed", self.name, exc_info=True)
        finally:
            if portal_cm is not None:
                try:
                    portal_cm.__exit__(None, None, None)  # stops the loop; joins its thread
                except Exception:  # noqa: BLE001
                    log.debug("stopping the loop of %s failed", self.name, exc_info=True)
            self._incoming.end()

    def alive(self) -> bool:
        return not self._closed and not self._eof

    def describe(self) -> str:
        return f"in-process {self.name}"

    # ------------------------------------------------------------------ messages

    def send(self, message: bytes, timeout: float | None = None, facts: MessageFacts | None = None) -> None:
        if self._closed or self._eof:
            raise ConnectionClosed(f"in-process server {self.name} is closed")
        from mcp import types
        from mcp.shared.message import SessionMessage

        parsed = types.jsonrpc_message_adapter.validate_json(message, by_name=False)
        portal = self._portal
        if portal is None:
            raise ConnectionClosed(f"in-process server {self.name} is not connected")
        try:
            portal.call(self._send, SessionMessage(parsed), timeout)
        except TimeoutError:
            raise RequestTimeout(f"in-process server {self.name} did not take the message in {timeout} s",
                                 sent=False) from None
        except Exception as exc:  # the loop or the stream is gone
            if isinstance(exc, (ConnectionClosed, RequestTimeout)):
                raise
            raise ConnectionClosed(f"in-process server {self.name} is closed: {type(exc).__name__}") from exc

    async def _send(self, message: Any, timeout: float | None) -> None:
        import anyio

        with anyio.fail_after(timeout):
            await self._write.send(message)

    def wait_first(self, timeout: float | None) -> bool:
        if not self._incoming.fill(timeout):
            return False
        if self._incoming.first[0] is ENDED:  # (the mark stays first, for every later reader)
            self._eof = True
            raise ConnectionClosed(f"in-process server {self.name} ended")
        return True
