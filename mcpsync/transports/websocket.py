"""WebSocket transport: one JSON-RPC message per UTF-8 text frame, subprotocol ``mcp``.

WebSocket is not an official MCP transport; :mod:`mcpsync.server.bridge` serves any MCP
server over it, so the pair is deployable. Built on ``websocket-client``:

* the handshake offers the ``mcp`` subprotocol and carries extra headers (e.g.
  ``Authorization``); a server that does not answer with ``mcp`` is refused with
  :class:`~mcpsync.ConnectError`, an HTTP 401/403 becomes :class:`~mcpsync.AuthError`;
* one reader thread runs for the life of the connection, so pings from the server are
  answered promptly (websocket-client answers pongs only inside ``recv``) and a close
  frame is noticed even when nobody waits for a message;
* a ping frame is sent every ``ping_interval`` seconds (60 s) as the keepalive; when
  nothing at all (not even a pong) has arrived for 2.5 intervals the connection is
  declared dead (:class:`~mcpsync.ConnectionClosed`), which catches half-open TCP;
* a binary frame or a text frame that is not UTF-8 is a protocol violation: the
  connection is closed with 1003/1007 and :class:`~mcpsync.ProtocolError` is raised from
  :meth:`receive` (later calls raise :class:`~mcpsync.ConnectionClosed`);
* :meth:`close` is safe from any thread: it sends a close frame and aborts the socket,
  never calling ``WebSocket.close()`` under the reader's blocked ``recv``.

Example:
    >>> t = WebSocketTransport("ws://127.0.0.1:8765/", headers={"Authorization": "Bearer x"})
    >>> t.describe()
    'websocket ws://127.0.0.1:8765/'
"""

from __future__ import annotations

import socket
import ssl
import threading
import time
from typing import Any, Iterable, Mapping, Sequence

import websocket
from websocket import ABNF

from .._channel import MessageFacts
from .._errors import (
    ConnectError,
    ConnectionClosed,
    MessageTooLarge,
    ProtocolError,
    RequestTimeout,
)
from .._status_errors import error_from_http_status
from .._speedups import DEFAULT_MAX_MESSAGE_SIZE as _DEFAULT_MAX
from ._base import Transport
from ._http_errors import redact
from ._inbox import ENDED, Inbox

__all__ = ["WebSocketTransport", "SUBPROTOCOL", "DEFAULT_MAX_MESSAGE_SIZE"]

SUBPROTOCOL = "mcp"
#: Default largest message accepted, in bytes (the project-wide default, 16 MiB).
DEFAULT_MAX_MESSAGE_SIZE = _DEFAULT_MAX

_STATUS_UNSUPPORTED_DATA = 1003
_STATUS_INVALID_PAYLOAD = 1007
_HEAD = 256


class WebSocketTransport(Transport):
    """A client WebSocket carrying JSON-RPC text frames.

    Args:
        url: ``ws://`` or ``wss://`` URL of the server (e.g. an mcpsync bridge).
        headers: extra handshake headers, e.g. ``{"Authorization": "Bearer …"}``.
        token: shorthand for an ``Authorization: Bearer <token>`` header.
        ping_interval: seconds between keepalive ping frames (``None`` or 0: none).
        max_message_size: larger incoming messages raise :class:`MessageTooLarge`.
        sslopt: websocket-client TLS options (``{"cert_reqs": ssl.CERT_NONE}``,
            ``{"ca_certs": path}``, ...), for ``wss://`` URLs.
        subprotocols: subprotocols offered; the server must choose ``mcp``.
        io_timeout: a write blocked this long (the peer stopped reading) fails the
            connection with :class:`RequestTimeout`.
    """

    kind = "websocket"

    def __init__(
        self,
        url: str,
        *,
        headers: Mapping[str, str] | None = None,
        token: str | None = None,
        ping_interval: float | None = 60.0,
        max_message_size: int = DEFAULT_MAX_MESSAGE_SIZE,
        sslopt: Mapping[str, Any] | None = None,
        subprotocols: Sequence[str] = (SUBPROTOCOL,),
        io_timeout: float = 30.0,
    ) -> None:
        self.url = url
        self._headers = dict(headers or {})
        if token is not None:
            self._headers["Authorization"] = f"Bearer {token}"
        self._ping_interval = ping_interval
        self.max_message_size = max_message_size
        self._sslopt = dict(sslopt or {})
        self._subprotocols = list(subprotocols)
        self._io_timeout = io_timeout
        self._ws: Any = None  # a websocket.WebSocket (websocket-client is untyped)
        self._inbox = Inbox()
        self.next_message = self._inbox.first  # (see Transport.next_message)
        self._state_lock = threading.Lock()
        self._closed = threading.Event()
        self._stop = threading.Event()  # the pinger's: set by close() and when the reader ends
        self._fault: str | None = None  # why the stream ended
        self._protocol_fault: str | None = None  # reported once by receive()
        self._reader: threading.Thread | None = None
        self._pinger: threading.Thread | None = None
        #: pong frames received (answers to the keepalive pings)
        self.pongs = 0
        self._last_seen = time.monotonic()

    # ------------------------------------------------------------------ lifecycle

    def connect(self, timeout: float) -> None:
        if self._ws is not None:
            raise ConnectError("WebSocketTransport.connect() called twice")
        origin = next((v for k, v in self._headers.items() if k.lower() == "origin"), None)
        header = [f"{k}: {v}" for k, v in self._headers.items() if k.lower() != "origin"]
        if self._subprotocols:
            header.append("Sec-WebSocket-Protocol: " + ", ".join(self._subprotocols))
        ws: Any = websocket.WebSocket(enable_multithread=True, sslopt=self._sslopt or None)  # websocket-client is untyped
        try:
            ws.settimeout(timeout)
            options: dict[str, Any] = {"origin": origin} if origin is not None else {}
            ws.connect(self.url, header=header, timeout=timeout, **options)
        except websocket.WebSocketBadStatusException as exc:
            ws.shutdown()
            raise _handshake_error(self.url, exc, self._headers.values()) from exc
        except (websocket.WebSocketTimeoutException, socket.timeout, TimeoutError) as exc:
            ws.shutdown()
            raise ConnectError(f"{self.describe()}: no handshake within {timeout:g} s") from exc
        except (websocket.WebSocketException, OSError, ssl.SSLError, ValueError) as exc:
            ws.shutdown()
            raise ConnectError(f"{self.describe()}: cannot connect: {exc}") from exc
        chosen = (ws.getheaders() or {}).get("sec-websocket-protocol")
        if self._subprotocols and (chosen or "").strip().lower() != SUBPROTOCOL:
            try:
                ws.send_close(1002, b"the mcp subprotocol is required")
            finally:
                ws.shutdown()
            raise ConnectError(
                f"{self.describe()}: the server did not agree to the '{SUBPROTOCOL}' "
                f"subprotocol (it answered {chosen!r}); is it an MCP WebSocket endpoint?"
            )
        # Reads time out now and then (the reader just carries on: websocket-client keeps a
        # partly read frame); a write that cannot finish in io_timeout fails the connection.
        ws.settimeout(self._io_timeout)
        self._ws = ws
        self._reader = threading.Thread(target=self._read_loop, name="mcpsync-ws-reader", daemon=True)
        self._reader.start()
        if self._ping_interval:
            self._pinger = threading.Thread(target=self._ping_loop, name="mcpsync-ws-ping", daemon=True)
            self._pinger.start()

    def close(self) -> None:
        with self._state_lock:
            if self._closed.is_set():
                return
            self._closed.set()
        self._stop.set()
        ws = self._ws
        if ws is not None:
            try:
                ws.send_close()
            except Exception:  # noqa: BLE001 - the peer may be gone already
                pass
            reader = self._reader
            other = reader if reader is not None and reader is not threading.current_thread() else None
            if other is not None and self._fault is None:
                other.join(1.0)  # the server's close frame ends the reader cleanly
            _abort(ws)  # or this wakes it, blocked in recv
            if other is not None:
                other.join(2.0)
            ws.shutdown()
        self._inbox.end()

    def alive(self) -> bool:
        return self._ws is not None and not self._closed.is_set() and self._fault is None

    def describe(self) -> str:
        return f"websocket {self.url}"

    def session_info(self) -> dict[str, Any]:
        ws = self._ws
        return {"subprotocol": SUBPROTOCOL if ws is not None else None, "url": self.url}

    # ------------------------------------------------------------------ I/O

    def send(self, message: bytes, timeout: float | None = None, facts: MessageFacts | None = None) -> None:
        ws = self._ws
        if ws is None or self._closed.is_set() or self._fault is not None:
            raise ConnectionClosed(self._fault or f"{self.describe()}: connection is closed")
        try:
            text = message.decode("utf-8") if isinstance(message, (bytes, bytearray, memoryview)) else message
        except UnicodeDecodeError as exc:
            raise ProtocolError("a JSON-RPC message must be UTF-8") from exc
        try:
            ws.send(text, ABNF.OPCODE_TEXT)
        except (websocket.WebSocketTimeoutException, socket.timeout) as exc:
            # part of a frame may have gone out: the stream cannot be trusted any more
            self._fault = f"{self.describe()}: a write did not finish within {self._io_timeout:g} s"
            _abort(ws)
            raise RequestTimeout(self._fault) from exc
        except (websocket.WebSocketException, OSError, AttributeError) as exc:
            raise ConnectionClosed(f"{self.describe()}: send failed: {exc}") from exc

    def wait_first(self, timeout: float | None) -> bool:
        inbox = self._inbox
        if self._closed.is_set() and inbox.empty():
            raise ConnectionClosed(f"{self.describe()}: connection is closed")
        if not inbox.fill(timeout):
            return False
        first = inbox.first
        item = first[0]
        if item is not ENDED:
            if len(item) > self.max_message_size:
                first[0] = None
                raise MessageTooLarge(
                    f"{self.describe()}: a {len(item)}-byte message exceeds the "
                    f"{self.max_message_size}-byte limit",
                    size=len(item),
                    head=item[:_HEAD],
                    tail=item[-_HEAD:],
                )
            return True
        # end of stream (the mark stays first, for every later reader)
        with self._state_lock:
            fault, self._protocol_fault = self._protocol_fault, None
        if fault is not None:
            raise ProtocolError(fault)
        raise ConnectionClosed(self._fault or f"{self.describe()}: connection closed")

    # ------------------------------------------------------------------ threads

    def _read_loop(self) -> None:
        ws = self._ws
        assert ws is not None
        try:
            while not self._closed.is_set():
                try:
                    opcode, frame = ws.recv_data_frame(control_frame=True)
                    self._last_seen = time.monotonic()
                except websocket.WebSocketTimeoutException:
                    continue  # nothing for io_timeout seconds; the keepalive watches liveness
                except websocket.WebSocketPayloadException:
                    self._violation(_STATUS_INVALID_PAYLOAD, "the server sent a text frame that is not UTF-8")
                    return
                except websocket.WebSocketProtocolException as exc:
                    self._violation(1002, f"WebSocket protocol error: {exc}")
                    return
                except (websocket.WebSocketException, OSError, AttributeError, ValueError) as exc:
                    if not self._closed.is_set() and self._fault is None:
                        self._fault = f"{self.describe()}: connection lost: {exc or type(exc).__name__}"
                    return
                if opcode == ABNF.OPCODE_TEXT:
                    self._inbox.put(bytes(frame.data))
                elif opcode == ABNF.OPCODE_BINARY:
                    self._violation(
                        _STATUS_UNSUPPORTED_DATA,
                        "the server sent a binary frame; MCP over WebSocket uses text frames only",
                    )
                    return
                elif opcode == ABNF.OPCODE_CLOSE:
                    # recv_data_frame already answered the close frame: end the TCP side too
                    self._fault = f"{self.describe()}: the server closed the connection{_close_reason(frame.data)}"
                    _abort(ws)
                    return
                elif opcode == ABNF.OPCODE_PONG:
                    self.pongs += 1
                # ping frames were answered inside recv_data_frame
        finally:
            self._stop.set()
            self._inbox.end()

    def _violation(self, status: int, text: str) -> None:
        self._fault = f"{self.describe()}: closed after a protocol violation: {text}"
        self._protocol_fault = f"{self.describe()}: {text}"
        ws = self._ws
        if ws is not None:
            try:
                ws.send_close(status, text[:120].encode())
            except Exception:  # noqa: BLE001
                pass
            _abort(ws)

    def _ping_loop(self) -> None:
        interval = float(self._ping_interval or 0)
        while not self._stop.wait(interval):
            ws = self._ws
            if ws is None or self._fault is not None:
                return
            if time.monotonic() - self._last_seen > 2.5 * interval:
                # two pings went unanswered: the peer or the path is dead (half-open TCP)
                self._fault = f"{self.describe()}: no answer to keepalive pings for {2.5 * interval:g} s"
                _abort(ws)
                return
            try:
                ws.ping()
            except Exception:  # noqa: BLE001 - the reader reports the failure
                return


def _abort(ws: websocket.WebSocket) -> None:
    """Shut the socket down both ways, waking a thread blocked in ``recv``.

    ``WebSocket.abort()`` does nothing once ``send_close()`` has run (it clears
    ``connected``), so the socket is shut down here directly.
    """
    sock = ws.sock
    if sock is not None:
        try:
            sock.shutdown(socket.SHUT_RDWR)
        except OSError:
            pass


def _close_reason(data: bytes) -> str:
    if len(data) >= 2:
        code = int.from_bytes(data[:2], "big")
        reason = data[2:].decode("utf-8", "replace")
        return f" (code {code}{': ' + reason if reason else ''})"
    return ""


def _handshake_error(url: str, exc: websocket.WebSocketBadStatusException, secrets: Iterable[str] = ()) -> Exception:
    """The HTTP status that refused the handshake, through the one status mapping
    (401 → AuthError, 403 → PermissionDenied, other 4xx → ProtocolError, 5xx and timeouts →
    ConnectError), its body redacted (never the request's own header values)."""
    status = exc.status_code
    detail = redact(exc.resp_body or b"", secrets=list(secrets)).strip()
    text = f"websocket {url}: handshake refused with HTTP {status}" + (f": {detail}" if detail else "")
    headers = getattr(exc, "resp_headers", None) or {}
    return error_from_http_status(status, text, connecting=True, headers=headers, session=False)
