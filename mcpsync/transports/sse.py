"""The HTTP+SSE transport of protocol revision 2024-11-05.

``connect`` GETs the stream URL (``text/event-stream``) and waits for the ``endpoint``
event, whose data names the URL to POST messages to. It is resolved against the stream
URL, and an endpoint on another origin is refused (a server must not send our messages
elsewhere). Every message is then POSTed there (the server answers 202); every message
from the server, responses included, arrives on the stream, read by one daemon thread.
The session lives as long as the stream: when it ends the transport is closed
(:class:`ConnectionClosed` from ``receive`` and ``send``).

Its requests go through the :class:`~mcpsync.transports._http_exchange.HTTPExchange`
it builds and holds (the request loop it shares with Streamable HTTP: auth retries,
cookies, same-origin redirects, one deadline); a redirected endpoint is kept.

Example:
    >>> t = SSETransport("http://127.0.0.1:3001/sse")   # doctest: +SKIP
    >>> t.connect(10)                                    # doctest: +SKIP
    >>> t.send(b'{"jsonrpc":"2.0","id":1,"method":"ping"}')  # doctest: +SKIP
    >>> t.receive(5)                                     # doctest: +SKIP
    b'{"jsonrpc":"2.0","id":1,"result":{}}'
"""

from __future__ import annotations

import logging
import threading
import time
from typing import Any, Callable, Mapping
from urllib.parse import urljoin


from .._channel import MessageFacts
from .._errors import ConnectError, ConnectionClosed, MCPError, ProtocolError
from ._http_errors import read_body, status_error, translate
from ._base import Transport
from ._http_exchange import ACCEPT_ENCODING, JSON, SSE, HTTPExchange, finish, http_options, sent_values
from ._http_options import HTTPOptions, media_type, origin_of, wire_url
from ._tls import Cert, Verify
from ._inbox import ENDED, Inbox
from ._http_pools import ClientConnections
from ._sse import Oversized, SSEParser

__all__ = ["SSETransport"]

log = logging.getLogger("mcpsync.http")


class SSETransport(Transport):
    """HTTP+SSE (2024-11-05): one GET stream for server messages, POSTs to its endpoint.

    Args:
        url: the SSE stream URL, e.g. ``http://127.0.0.1:3001/sse``.
        headers: static headers for every request.
        auth: an auth hook (``headers(url, method)`` / ``on_response(...)``).
        verify: whom TLS trusts (as for :class:`~.streamable_http.StreamableHTTPTransport`).
        cert: a client certificate: a PEM file with its key, or ``(certfile, keyfile)``.
        proxy: a forward proxy URL for every request (None: ``HTTP(S)_PROXY`` / ``NO_PROXY``).
        connect_timeout: TCP connect timeout in seconds (retried once).
        read_timeout: the longest silence tolerated on the stream (servers ping).
        pool_size: pooled connections per origin.
        max_message_size: the largest message accepted, in bytes.
        options: all of the above as one :class:`HTTPOptions` (overrides them).
        connections: the client's pools and cookies (None: its own).
    """

    kind = "sse"

    def __init__(
        self,
        url: str,
        *,
        headers: Mapping[str, str] | None = None,
        auth: Any = None,
        verify: Verify = True,
        cert: Cert = None,
        proxy: str | None = None,
        connect_timeout: float = 10.0,
        read_timeout: float = 300.0,
        pool_size: int = 10,
        max_message_size: int | None = None,
        options: HTTPOptions | None = None,
        connections: ClientConnections | None = None,
    ) -> None:
        url, self.options = http_options(
            url, options, headers=headers, auth=auth, verify=verify, cert=cert, proxy=proxy,
            connect_timeout=connect_timeout, read_timeout=read_timeout, pool_size=pool_size,
            max_message_size=max_message_size,
        )
        self.endpoint: str | None = None
        self._lock = threading.Lock()
        self._inbox = Inbox()
        self.next_message = self._inbox.first  # (see Transport.next_message)
        self._closed = False
        self._ended: MCPError | None = None
        self._exchange = HTTPExchange(url, self.options, connections, on_redirect=self._redirected)
        self._stream: Any = None
        self._reader: threading.Thread | None = None
        self._protocol_version: str | None = None
        self._failure_handler: Callable[[Any, MCPError], None] | None = None

    # ------------------------------------------------------------- Transport API

    def connect(self, timeout: float) -> None:
        """Open the stream and wait (at most ``timeout`` s) for the ``endpoint`` event.

        Raises:
            ConnectError: unreachable, not an SSE stream, no endpoint in time, or an
                endpoint on another origin.
            AuthError / PermissionDenied: a final 401 / 403.
        """
        if self._closed:
            raise ConnectionClosed("transport is closed")
        if self._reader is not None:
            return
        self._exchange.acquire()
        deadline = time.monotonic() + timeout
        headers = self._headers({"Accept": SSE, "Cache-Control": "no-cache"})
        resp = self._exchange.request("GET", headers, None, max(0.01, timeout), control=True, deadline=deadline)
        if not 200 <= resp.status < 300:
            body = read_body(resp, 65536, self.url, deadline)
            resp.release_conn()
            err = status_error(resp.status, self.url, body, resp.headers, secrets=sent_values(resp), session=False)
            if resp.status in (401, 403):
                raise err
            raise ConnectError(f"no SSE stream at {self.url}: {err}", status=resp.status)
        ctype = media_type(resp.headers.get("content-type"))
        if ctype != SSE:
            finish(resp)
            raise ConnectError(f"{self.url} answered with {ctype or 'no content type'!r}, not an SSE stream")
        parser = SSEParser(self.options.max_message_size)
        pending: list[Any] = []
        endpoint: str | None = None
        try:
            while endpoint is None:
                if time.monotonic() > deadline:
                    raise ConnectError(f"{self.url} sent no endpoint event within {timeout:g} s")
                chunk = resp.read1(65536)
                if not chunk:
                    raise ConnectError(f"{self.url} closed the stream before the endpoint event")
                for ev in parser.feed(chunk):
                    if endpoint is None and not isinstance(ev, Oversized) and ev.event == "endpoint":
                        endpoint = ev.data.decode("utf-8", "replace").strip()
                    else:
                        pending.append(ev)
        except MCPError:
            finish(resp)
            raise
        except Exception as exc:
            finish(resp)
            raise ConnectError(f"waiting for the endpoint event from {self.url}: {translate(exc, self.url)}") from exc
        try:
            resolved, _ = wire_url(urljoin(self.url, endpoint))  # never the endpoint's userinfo
        except ValueError as exc:
            finish(resp)
            raise ConnectError(f"{self.url} named an endpoint that cannot be used: {exc}") from None
        if origin_of(resolved) != origin_of(self.url):
            finish(resp)
            raise ConnectError(f"{self.url} named an endpoint on another origin ({resolved}); refused")
        self.endpoint = resolved
        # the stream's later silences are bounded by the read timeout, not the connect timeout
        try:
            sock = getattr(resp.connection, "sock", None)
            if sock is not None:
                sock.settimeout(self.options.read_timeout)
        except Exception:  # noqa: BLE001
            pass
        self._stream = resp
        for ev in pending:
            self._take(ev)
        self._reader = threading.Thread(
            target=self._read_loop, args=(resp, parser), name="mcpsync-sse-reader", daemon=True
        )
        self._reader.start()

    def send(self, message: bytes, timeout: float | None = None, facts: MessageFacts | None = None) -> None:
        """POST one message to the endpoint; the answer arrives on the stream.

        Raises:
            ConnectionClosed: closed, or the stream / session has ended.
            ConnectError: the server cannot be reached.
            AuthError / PermissionDenied: a final 401 / 403.
            ProtocolError: the server refused the message.
        """
        if self._closed:
            raise ConnectionClosed("transport is closed")
        if self._ended is not None:
            raise ConnectionClosed(f"SSE session ended: {self._ended}")
        if self.endpoint is None:
            raise ConnectionClosed("SSE transport is not connected")
        if message.lstrip()[:1] == b"[":
            raise ProtocolError("JSON-RPC batches are never sent")
        headers = self._headers({"Content-Type": JSON, "Accept": f"{JSON}, {SSE}"})
        deadline = None if timeout is None else time.monotonic() + timeout
        exchange = self._exchange
        read_timeout = exchange.read_timeout(timeout)
        resp = exchange.request("POST", headers, message, read_timeout, deadline=deadline, url=self.endpoint)
        body = read_body(resp, 65536, self.endpoint, deadline)
        resp.release_conn()
        if 200 <= resp.status < 300:
            return
        # a 404: the endpoint no longer knows the session (SessionExpired)
        raise status_error(resp.status, self.endpoint, body, resp.headers, secrets=sent_values(resp))

    def wait_first(self, timeout: float | None) -> bool:
        """Wait up to ``timeout`` s for the stream's next message in :attr:`next_message`
        (True), or False; ConnectionClosed at the stream's end."""
        inbox = self._inbox
        if self._closed and inbox.empty():
            raise ConnectionClosed("transport is closed")
        if not inbox.fill(timeout):
            return False
        first = inbox.first
        item = first[0]
        if item is ENDED:  # (the mark stays first, for every later reader)
            if self._closed:
                raise ConnectionClosed("transport is closed")
            raise ConnectionClosed(f"SSE stream ended: {self._ended}")
        if isinstance(item, Oversized):
            first[0] = None
            raise item.error
        return True

    def close(self) -> None:
        """Stop the stream and release the pool. Idempotent, never blocks long."""
        with self._lock:
            if self._closed:
                return
            self._closed = True
            stream = self._stream
        self._exchange.close()
        if stream is not None:
            try:
                stream.shutdown()
            except Exception:  # noqa: BLE001
                pass
        if self._reader is not None and self._reader is not threading.current_thread():
            self._reader.join(2.0)
        self._exchange.release()
        self._inbox.end()

    def alive(self) -> bool:
        return not self._closed and self._ended is None

    def set_protocol_version(self, version: str) -> None:
        self._protocol_version = version

    def set_failure_handler(self, handler: Callable[[Any, MCPError], None] | None) -> None:
        """Accepted for symmetry with Streamable HTTP; stream failures end the session here."""
        self._failure_handler = handler

    def describe(self) -> str:
        return f"sse {self.url}"

    def session_info(self) -> dict[str, Any]:
        return {"transport": "sse", "url": self.url, "endpoint": self.endpoint, "era_hint": "legacy"}

    # ------------------------------------------------------------- internals

    def _headers(self, headers: dict[str, str]) -> dict[str, str]:
        """Every request's headers: the user agent, the static ones, the protocol version."""
        base = {"User-Agent": self.options.user_agent, "Accept-Encoding": ACCEPT_ENCODING, **self.options.headers, **headers}
        if self._protocol_version is not None:
            base["MCP-Protocol-Version"] = self._protocol_version
        return base

    @property
    def exchange(self) -> HTTPExchange:
        """What this transport's requests go through: its URL, options and the client's pools."""
        return self._exchange

    @property
    def url(self) -> str:
        """The stream's URL (its same-origin redirect target once one was followed)."""
        return self._exchange.url

    def _redirected(self, old: str, new: str) -> None:
        """A request to ``old`` (not the stream's URL) was redirected: the endpoint moved."""
        if old == self.endpoint:
            self.endpoint = new

    def _take(self, ev: Any) -> None:
        if isinstance(ev, Oversized):
            self._inbox.put(ev)
        elif ev.event == "message" and ev.data.strip():
            self._inbox.put(ev.data)
        elif ev.event == "endpoint":
            log.debug("%s sent another endpoint event; ignored", self.url)

    def _read_loop(self, resp: Any, parser: SSEParser) -> None:
        reason: MCPError
        try:
            while True:
                chunk = resp.read1(65536)
                if not chunk:
                    reason = ConnectionClosed(f"{self.url} closed the SSE stream")
                    break
                for ev in parser.feed(chunk):
                    self._take(ev)
        except Exception as exc:  # noqa: BLE001 - translated
            reason = translate(exc, self.url)
        finish(resp)
        self._ended = reason
        self._inbox.end()
