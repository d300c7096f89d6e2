"""Streamable HTTP: one POST per message, for both protocol eras, with HTTP+SSE fallback.

One transport serves both eras; which one a message belongs to is read from the
message itself:

* **2026-07-28 (modern)** — a request whose ``params._meta`` carries
  ``io.modelcontextprotocol/protocolVersion``. It is POSTed with
  ``MCP-Protocol-Version`` (that value), ``Mcp-Method``, ``Mcp-Name`` (for
  ``tools/call`` / ``prompts/get`` / ``resources/read``) and the extra headers its
  :class:`~mcpsync._channel.MessageFacts` carry (the ``Mcp-Param-*`` headers the tools
  layer computed from the tool's ``x-mcp-header`` annotations; it also answers a
  ``HeaderMismatch``). Cancelling (``notifications/cancelled``) closes the
  request's response stream; a stream that breaks before its response re-issues the
  request under a new id (the answer is handed up under the original id), twice at
  most. A ``subscriptions/listen`` stream is reopened whenever it ends, under the same
  id (its notifications carry that id as the subscription id), with backoff.
* **2025-03-26 … 2025-11-25 (legacy)** — ``initialize`` gives an ``Mcp-Session-Id``,
  echoed from then on with ``MCP-Protocol-Version`` (see :meth:`set_protocol_version`).
  Notifications and responses get 202 (any 2xx with an empty or ``null`` body is
  accepted). After ``notifications/initialized`` a standalone GET stream carries
  server messages (405 = not offered); a broken stream, standalone or per request, is
  resumed with ``Last-Event-ID`` after the server's ``retry``. A 404 (or a 400 that
  names the session) on a message that carried the session id raises
  :class:`~mcpsync._errors.SessionExpired` with ``renewable=True``, ``sent=False`` and
  the lost ``session_id``: re-initializing and sending again belong to the session
  layer (:meth:`mcpsync._handshake.Handshake.renew`); the new session's
  ``notifications/initialized`` restarts the GET stream. A GET stream that finds the
  session gone calls :attr:`~StreamableHTTPTransport.on_session_lost`. ``close()``
  sends DELETE.
* **HTTP+SSE (2024-11-05) fallback** — when the very first exchange with a URL gets
  400 / 404 / 405 without a JSON-RPC body, the transport switches to
  :class:`~mcpsync.transports.sse.SSETransport` for the rest of its life. The outcome
  is cached per URL (:func:`known_kind`), so later transports skip the probing (the
  era that worked is the handshake's to remember: :mod:`mcpsync._handshake`).

A 307 / 308 redirect within the URL's origin is followed and its target kept (e.g. a
trailing-slash redirect); one to another origin is refused. Other HTTP error statuses
map through :func:`mcpsync._status_errors.error_from_http_status` (429 / 503 carry
``retry_after``; a 429 was not sent); an error body is quoted only redacted and cut
short. A send has one deadline, its ``timeout``: waiting for a pooled connection,
connecting and reading the answer share it. Response streams are read on the
transport's own threads, which end when it closes. Responses are
``application/json`` (queued at once) or ``text/event-stream`` (read on
a background thread, so ``send`` returns and server requests inside the stream reach
the dispatcher while the stream is open). Errors are raised from ``send`` when the
HTTP exchange itself fails; a request whose stream fails later, after ``send``
returned, is reported to the handler given to :meth:`set_failure_handler` (without
one it is answered with a JSON-RPC error, code -32000, whose ``data`` names the
error class under ``"mcpsync/transportError"``, so that no caller waits forever).

The transport moves bytes: it reads what it needs of an outgoing message from the
:class:`~mcpsync._channel.MessageFacts` the layer above computed, never from the
bytes (only a direct caller that gives no facts has them read once), and it knows
no MCP method beyond the HTTP rules above. The transport is built from parts it
holds, each given what it needs at construction (bound methods, so that the hot path
looks nothing up):

* this module — sending: the POST, the headers of each era, the session id,
  status mapping, 202s, the HTTP+SSE fallback, ``receive`` and ``close()``;
* an :class:`~mcpsync.transports._http_exchange.HTTPExchange` — the URL, options and
  pools, and the one request loop (auth retries, cookies, redirects, the shared
  deadline) that the HTTP+SSE transport builds one of too;
* a :class:`~mcpsync.transports._http_streams.ResponseStreams` — receiving: delivery of
  what comes back after the POST, response streams (resume, re-issue, listen), the
  standalone GET stream. It is given the exchange, the receive queue's ``put``, a
  wake-up for a waiting reader, this transport's request headers, its session id and
  the forwarder to :attr:`~StreamableHTTPTransport.on_session_lost`;
* :mod:`mcpsync.transports._http_messages` — what is read of a message (its facts, an
  answer's id) without decoding it whole;
* a :class:`~mcpsync._speedups._pyhttp.JSONLane` (compiled, ``_chttp``) — the transport's
  ``send``: a request with an idle kept-alive socket and a kind of headers sent before is
  written, answered and delivered in one call when its answer is the common one (200,
  ``Content-Length``, JSON, whole in the first read); everything else goes this module's
  general way (``_send``), an answer it read but does not take handed on as it is.

Example:
    >>> t = StreamableHTTPTransport("http://127.0.0.1:8000/mcp")   # doctest: +SKIP
    >>> t.connect(10)                                               # doctest: +SKIP
    >>> t.send(b'{"jsonrpc":"2.0","id":1,"method":"initialize","params":{...}}')  # doctest: +SKIP
    >>> t.receive(5)                                                # doctest: +SKIP
    b'{"jsonrpc":"2.0","id":1,"result":{...}}'
"""

from __future__ import annotations

import logging
import queue
import threading
import time
from typing import Any, Callable, Mapping, Protocol

from msgspec import UNSET

from .._channel import MessageFacts
from .._constants import MODERN_FIRST
from .._speedups import JSONLane
from .._errors import ConnectionClosed, MCPError, ProtocolError, RequestTimeout, SessionExpired
from ._base import Transport
from ._http_errors import read_body, status_error, time_left
from ._fastconn import FastHeaders, FastResponse
from ._fasthttp import resume, wire_of
from ._http_exchange import ACCEPT_ENCODING, JSON, SSE, HTTPExchange, finish, http_options, sent_values, session_id
from ._http_headers import auth_failed, auth_merge, encode_header_value
from ._http_options import HeaderBlock, HTTPOptions, media_type
from ._tls import Cert, Verify
from ._http_pools import ClientConnections
from ._http_messages import ErrorPeek, Incoming, Message, peek_error, peek_in
from ._http_streams import ResponseStreams
from ._inbox import take_into
from ._sse import Oversized

__all__ = ["StreamableHTTPTransport", "known_kind", "forget_url"]

log = logging.getLogger("mcpsync.http")

_DELETE_TIMEOUT = 1.0
_THREADS_JOIN = 2.0  # close() waits this long, at most, for the stream threads to end
#: put in the receive queue to wake a waiting receiver: the transport's state changed
#: (closed, switched to HTTP+SSE, a call failed through the failure handler)
_WAKE: Any = object()
_dict_get = dict.get  # the fast path's headers' own lookups (a dict under lower-case names)

# ----------------------------------------------------------------- per-URL memory

_kind_cache: dict[str, str] = {}
_cache_lock = threading.Lock()


def known_kind(url: str) -> str | None:
    """``"streamable"`` or ``"sse"`` once a transport has learned what ``url`` speaks."""
    with _cache_lock:
        return _kind_cache.get(url)


def forget_url(url: str | None = None) -> None:
    """Forget what was learned about ``url`` (every URL when None)."""
    with _cache_lock:
        if url is None:
            _kind_cache.clear()
        else:
            _kind_cache.pop(url, None)


def _remember_kind(url: str, kind: str) -> None:
    if _kind_cache.get(url) == kind:  # the common case, every POST: no lock
        return
    with _cache_lock:
        _kind_cache[url] = kind


class _Send(Protocol):
    def __call__(self, message: bytes, timeout: float | None = None, facts: MessageFacts | None = None) -> None: ...


class _WaitFirst(Protocol):
    def __call__(self, timeout: float | None) -> bool: ...


class StreamableHTTPTransport(Transport):
    """The Streamable HTTP transport (both eras), falling back to HTTP+SSE.

    Args:
        url: the MCP endpoint, e.g. ``https://example.com/mcp``.
        headers: static headers for every request.
        auth: an auth hook (``headers(url, method)`` / ``on_response(...)``).
        verify: whom TLS trusts: True, False, ``"system"``, a CA bundle file or directory,
            or an ``ssl.SSLContext`` (see :class:`HTTPOptions`).
        cert: a client certificate: a PEM file with its key, or ``(certfile, keyfile)``.
        proxy: a forward proxy URL for every request (None: ``HTTP(S)_PROXY`` / ``NO_PROXY``).
        connect_timeout: TCP connect timeout in seconds (retried once).
        read_timeout: the longest silence tolerated on a response or stream.
        pool_size: pooled connections per origin.
        max_message_size: the largest message accepted, in bytes.
        sse_fallback: switch to HTTP+SSE (2024-11-05) when the URL does not take POSTs.
        get_stream: open the standalone GET stream after a legacy session starts.
        get_stream_idle: reconnect the GET stream after this many seconds of silence.
        options: the HTTP options as one :class:`HTTPOptions` (then the individual
            HTTP arguments above are ignored).
        connections: the client's :class:`~._http_pools.ClientConnections` (its pools and
            cookies), shared with the other transports of the same client; None: its own.

    Example:
        >>> with StreamableHTTPTransport("http://127.0.0.1:8000/mcp") as t:  # doctest: +SKIP
        ...     t.connect(10)
    """

    kind = "http"
    #: POST one message (:meth:`_send` tells how): the JSON lane's own ``send``, set per instance
    send: _Send
    wait_first: _WaitFirst
    # slots: every call reads a dozen of these, and CPython keeps at most 30 attributes in
    # an instance's own values (past that each access goes through a dict)
    __slots__ = (
        "options", "sse_fallback", "request_scoped", "on_session_lost", "_exchange", "_request", "_streams", "_lock",
        "_queue", "_put", "_closed", "_dead", "_delegate", "_session_id", "_protocol_version",
        "_header_blocks", "_poked", "_lane", "send", "wait_first", "next_message",
    )

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
        sse_fallback: bool = True,
        get_stream: bool = True,
        get_stream_idle: float = 60.0,
        options: HTTPOptions | None = None,
        connections: ClientConnections | None = None,
    ) -> None:
        url, self.options = http_options(
            url, options, headers=headers, auth=auth, verify=verify, cert=cert, proxy=proxy,
            connect_timeout=connect_timeout, read_timeout=read_timeout, pool_size=pool_size,
            max_message_size=max_message_size,
        )
        self.sse_fallback = sse_fallback
        self.request_scoped = False
        #: called with the lost session's id when the standalone GET stream finds that the
        #: server no longer knows the session (on the GET thread: it should only schedule
        #: the renewal, which belongs to the session layer)
        self.on_session_lost: Callable[[str], None] | None = None

        self._lock = threading.Lock()
        # received messages for ``receive``, in order, and _WAKE marks (see _poke); the
        # next one is moved into next_message by wait_first (see Transport.next_message)
        self._queue: queue.SimpleQueue[Any] = queue.SimpleQueue()
        self._put = self._queue.put  # the hand-off: the queue's own (C) method
        self.next_message: list[Any] = [None]
        self._closed = False
        self._dead: MCPError | None = None
        self._delegate: Transport | None = None
        self._poked = False

        self._session_id: str | None = None
        self._protocol_version: str | None = None
        self._header_blocks: dict[tuple[Any, ...], HeaderBlock] = {}  # see _headers

        self._exchange = HTTPExchange(url, self.options, connections)
        self._request = self._exchange.request  # bound once: every POST calls it
        self._streams = ResponseStreams(
            self._exchange,
            put=self._put,
            poke=self._poke,
            headers=self._headers,
            session_id=self._current_session,
            session_lost=self._session_lost,
            get_stream=get_stream,
            get_stream_idle=get_stream_idle,
        )
        #: the common request, sent and answered in one call (compiled); the rest goes _send's way
        self._lane = JSONLane(
            self._exchange, self.options, self._put, _kind_cache, _remember_kind, self._header_blocks, self._send,
            self._answered, self._delivered, resume, auth_failed, auth_merge, wire_of, self.next_message,
            self._queue.get, self._wait_slow,
        )
        # (an instance's slot: a request the lane serves runs no Python frame of this transport's)
        self.send = self._lane.send
        self.wait_first = self._lane.wait_first  # (in C: the dispatcher's leader reads with it)

    # ------------------------------------------------------------- Transport API

    def connect(self, timeout: float) -> None:
        """Get the client's pools for the URL's origin (no request is made yet).

        When the URL is already known to speak HTTP+SSE only, the SSE stream is opened
        here. Raises :class:`ConnectError` on failure.
        """
        if self._closed:
            raise ConnectionClosed("transport is closed")
        self._exchange.acquire()
        if self.sse_fallback and known_kind(self._exchange.url) == "sse" and self._delegate is None:
            self._switch_to_sse(timeout)

    needs_facts = True  # (see Transport.needs_facts)

    def _send(self, message: bytes, timeout: float | None = None, facts: MessageFacts | None = None) -> None:
        """POST one message; its answer (if any) becomes available from :meth:`receive`
        (``send``: the JSON lane's, which sends the common request itself, the rest here).

        ``facts`` (from the layer that encoded ``message``) spare the transport decoding
        it; without them the transport reads them from the bytes.

        Raises:
            ConnectionClosed: the transport is closed or the session is gone.
            ConnectError: the server cannot be reached.
            RequestTimeout: no HTTP response within ``timeout``.
            AuthError / PermissionDenied: a final 401 / 403.
            ProtocolError: the server answered with something that is not MCP.
            MessageTooLarge: the JSON response exceeded the size limit.
        """
        delegate = self._delegate
        if delegate is not None:
            delegate.send(message, timeout)
            return
        if self._closed:
            raise ConnectionClosed("transport is closed")
        if self._dead is not None:
            raise ConnectionClosed(f"session is gone: {self._dead}")
        if self._exchange.pools is None:
            self.connect(self.options.connect_timeout)
        if message[:1] != b"{" and message.lstrip()[:1] == b"[":
            raise ProtocolError("JSON-RPC batches are never sent over Streamable HTTP")
        msg = Message(message, facts)
        if msg.method == "notifications/cancelled" and self._streams.cancel(msg):
            return
        deadline = None if timeout is None else time.monotonic() + timeout
        self._post(msg, deadline)

    def _wait_slow(self, timeout: float | None) -> bool:
        """:meth:`wait_first` past its first step (the lane's): what is in ``next_message``
        when it is not a plain message (a :data:`_WAKE` mark, an oversized message), or the
        wait for the next one; every take goes straight into the box (:func:`take_into`).

        Returns False early, once, right after a request was failed through the failure
        handler, so that a reader waiting for that request notices.
        """
        deadline = None if timeout is None else time.monotonic() + timeout
        q = self._queue
        first = self.next_message
        while True:
            item = first[0]
            if item is _WAKE:
                # a mark: the state changed (closed, switched to HTTP+SSE, a failed call);
                # the state is read below. Messages queued behind it come first; the last
                # mark of a transport that ended stays, for every other and later waiter
                first[0] = None
                if not q.empty():
                    take_into(first, q.get, False, None)
                    continue
                if self._closed or self._dead is not None or self._delegate is not None:
                    q.put(_WAKE)
            elif item is not None:
                if isinstance(item, Oversized):
                    first[0] = None
                    raise item.error
                return True
            if self._delegate is not None:
                break
            if self._poked:
                self._poked = False
                return False
            if self._closed or self._dead is not None:
                raise ConnectionClosed("transport is closed" if self._closed else f"session is gone: {self._dead}")
            try:
                if deadline is None:
                    take_into(first, q.get, True, None)
                else:
                    left = deadline - time.monotonic()
                    if left <= 0:
                        return False
                    take_into(first, q.get, True, left)
            except queue.Empty:
                return False
        delegate = self._delegate
        assert delegate is not None and delegate.next_message is not None
        rest = None if deadline is None else max(0.0, deadline - time.monotonic())
        if not delegate.wait_first(rest):
            return False
        box = delegate.next_message
        first[0] = box[0]  # moved whole: no call between
        box[0] = None
        return True

    def close(self) -> None:
        """End the session (DELETE), stop every stream, release the pool. Idempotent."""
        with self._lock:
            if self._closed:
                return
            self._closed = True
            session = self._session_id
        self._exchange.close()
        self._streams.stop()
        self._lane.open = False
        if self._delegate is not None:
            self._delegate.close()
        elif session is not None and self._exchange.pools is not None:
            try:
                self._exchange.request_once("DELETE", self._headers(None, "DELETE"), _DELETE_TIMEOUT)
            except Exception as exc:  # noqa: BLE001 - best effort on the way out
                log.debug("DELETE of session at %s failed: %s", self._exchange.url, exc)
        self._streams.join(_THREADS_JOIN)
        self._exchange.release()
        self._queue.put(_WAKE)  # wakes the waiting receivers (the mark stays: see receive)

    @property
    def exchange(self) -> HTTPExchange:
        """What this transport's requests go through: its URL, options and the client's pools."""
        return self._exchange

    @property
    def url(self) -> str:
        """The endpoint's URL (its same-origin redirect target once one was followed)."""
        return self._exchange.url

    @property
    def connections(self) -> ClientConnections:
        """The client's connections (pools per origin, cookies) this transport uses."""
        return self._exchange.connections

    @property
    def session_id(self) -> str | None:
        """The legacy era's ``Mcp-Session-Id`` (from the ``initialize`` response), or None."""
        return self._session_id

    def alive(self) -> bool:
        if self._delegate is not None:
            return self._delegate.alive()
        return not self._closed and self._dead is None

    def set_protocol_version(self, version: str) -> None:
        """Send ``MCP-Protocol-Version: version`` on every later request without its own.

        From 2026-07-28 on the transport is request-scoped (no session state).
        """
        self._protocol_version = version
        self.request_scoped = version >= MODERN_FIRST
        self._lane.legacy = ("L", self._session_id, version, False)  # (_headers' key of the era's POSTs)
        if self._delegate is not None:
            self._delegate.set_protocol_version(version)

    def set_session_lost_handler(self, handler: Callable[[str], None] | None) -> None:
        self.on_session_lost = handler

    def set_failure_handler(self, handler: Callable[[Any, MCPError], None] | None) -> None:
        """``handler(request_id, error)`` is called when a request's response stream
        fails after ``send`` returned (it cannot be resumed or re-issued). Without a
        handler the failure is logged and the request runs into its timeout."""
        self._streams.failure_handler = handler
        delegate = self._delegate
        if delegate is not None:
            delegate.set_failure_handler(handler)

    def describe(self) -> str:
        if self._delegate is not None:
            return self._delegate.describe()
        return f"http {self._exchange.url}"

    def session_info(self) -> dict[str, Any]:
        if self._delegate is not None:
            info = dict(self._delegate.session_info())
            return info
        return {
            "transport": "streamable-http",
            "url": self._exchange.url,
            "session_id": self._session_id,
            "protocol_version": self._protocol_version,
            **self._streams.info(),
        }

    # ------------------------------------------------------------- the streams' collaborators

    def _poke(self) -> None:
        """Wake a waiting reader: a request failed through the failure handler."""
        self._poked = True
        self._queue.put(_WAKE)

    def _current_session(self) -> str | None:
        return self._session_id

    def _session_lost(self, session: str) -> None:
        hook = self.on_session_lost
        if hook is not None:
            hook(session)

    # ------------------------------------------------------------- HTTP plumbing

    def _headers(self, msg: Message | None, method: str, *, accept: str | None = None) -> dict[str, str]:
        # a POST's headers repeat from request to request: made once per kind, as a
        # read-only HeaderBlock (the fast path keeps its wire form); not those with
        # headers of the call's own (Mcp-Param-*, from its arguments)
        key: tuple[Any, ...] | None = None
        if method == "POST" and msg is not None:
            if msg.modern_version is None:
                key = ("L", self._session_id, self._protocol_version, msg.method == "initialize")
            elif not msg.facts.headers:
                key = ("M", msg.modern_version, msg.method, msg.facts.name)
            if key is not None:
                block = self._header_blocks.get(key)
                if block is not None:
                    return block
        h: dict[str, str] = {"User-Agent": self.options.user_agent, "Accept-Encoding": ACCEPT_ENCODING}
        h.update(self.options.headers)
        if method == "POST":
            h["Content-Type"] = JSON
            h["Accept"] = f"{JSON}, {SSE}"
        elif accept:
            h["Accept"] = accept
        modern = msg.modern_version if msg is not None else None
        if modern is not None:
            h["MCP-Protocol-Version"] = modern
            if msg is not None and msg.method is not None:
                facts = msg.facts
                h["Mcp-Method"] = msg.method
                if facts.name is not None:
                    h["Mcp-Name"] = encode_header_value(facts.name)
                if facts.headers:  # e.g. a tool's Mcp-Param-* headers, computed by the tools layer
                    h.update(facts.headers)
        else:
            if self._session_id is not None and not (msg is not None and msg.method == "initialize"):
                h["Mcp-Session-Id"] = self._session_id
            if self._protocol_version is not None and not (msg is not None and msg.method == "initialize"):
                h["MCP-Protocol-Version"] = self._protocol_version
        if key is not None:
            if len(self._header_blocks) >= 64:
                self._header_blocks.clear()
            block = self._header_blocks[key] = HeaderBlock(h)
            return block
        return h

    # ------------------------------------------------------------- POST

    def _post(self, msg: Message, deadline: float | None) -> None:
        sent_session = None if msg.modern_version or msg.method == "initialize" else self._session_id
        headers = self._headers(msg, "POST")
        read_timeout = self.options.read_timeout  # the exchange's read_timeout(time_left(deadline)), inline
        if deadline is not None:
            rest = deadline - time.monotonic()
            if rest <= 0:
                raise RequestTimeout("the call's time ran out")
            if rest < read_timeout:
                read_timeout = rest if rest > 0.001 else 0.001
        resp = self._request("POST", headers, msg.body, read_timeout, control=msg.kind != "request", deadline=deadline)
        self._answer(msg, resp, deadline, sent_session)

    def _answered(
        self, message: bytes, facts: MessageFacts, deadline: float, read_timeout: float, headers: HeaderBlock,
        sent: Mapping[str, str], resp: FastResponse,
    ) -> None:
        """The general path of a request the JSON lane sent with the headers ``sent`` (the
        kind's ``headers`` and the auth hook's), from its answer ``resp`` on: one it does
        not take (a redirect, an auth challenge, an error, a stream, another shape)."""
        msg = Message(message, facts)
        sent_session = None if msg.modern_version else self._session_id
        resp = self._request("POST", headers, message, read_timeout, deadline=deadline, answer=resp, sent=sent)
        self._answer(msg, resp, deadline, sent_session)

    def _delivered(self, message: bytes, facts: MessageFacts, body: bytes) -> None:
        """A 200 JSON answer the JSON lane read that is not its request's plain result (an
        error, a batch, another id): delivered as the general path does."""
        self._deliver_body(Message(message, facts), body, JSON, 200, self._exchange.url)

    def _answer(self, msg: Message, resp: Any, deadline: float | None, sent_session: str | None) -> None:
        """What the answer ``resp`` to ``msg`` is: delivered, followed (a stream), or raised."""
        url = self._exchange.url  # (a redirect followed just now is kept)
        try:  # the answer's socket goes back (or is closed) however this ends
            status = resp.status
            rh = resp.headers
            # the fast path's headers are a dict under lower-case names: read as one
            ctype = _dict_get(rh, "content-type") if rh.__class__ is FastHeaders else rh.get("content-type")
            if ctype != JSON:  # the common answer needs no parsing
                ctype = media_type(ctype)

            if 200 <= status < 300:
                if msg.method == "initialize" and msg.is_request:
                    self._session_id = session_id(resp.headers.get("mcp-session-id"), url)
                    self._lane.legacy = ("L", self._session_id, self._protocol_version, False)
                if msg.method == "notifications/initialized" and not msg.modern_version:
                    self._streams.start_get_stream(wait=min(2.0, self.options.connect_timeout))
                if ctype == SSE:
                    self._lane.succeeded = True
                    _remember_kind(url, "streamable")
                    self._streams.follow(msg, resp)
                    return
                # a small answer has come whole with its head: taken as it is (read_body's first step)
                body = resp.whole(self.options.max_message_size) if resp.__class__ is FastResponse else None
                if body is None:
                    body = read_body(resp, self.options.max_message_size, url, deadline)
                resp.release_conn()
                self._lane.succeeded = True
                if _kind_cache.get(url) != "streamable":  # _remember_kind's own test, inline: every POST
                    _remember_kind(url, "streamable")
                rid = msg.id
                if (
                    ctype == JSON
                    and rid.__class__ is int
                    and body.startswith(b'{"jsonrpc":"2.0","id":%d,"result":' % rid)
                    and body.endswith(b"}")
                ):
                    self._put(body)  # the answer to this request: the streams' deliver's first case, inline
                    return
                self._deliver_body(msg, body, ctype, status, url)
                return

            body = read_body(resp, self.options.max_message_size, url, deadline)
            resp.release_conn()
            jsonrpc = peek_in(body) if media_type(resp.headers.get("content-type")) == JSON or body[:1] == b"{" else None
            is_jsonrpc = jsonrpc is not None and (jsonrpc.id is not UNSET or len(jsonrpc.error) > 0)
            error = peek_error(jsonrpc.error) if jsonrpc is not None and len(jsonrpc.error) else None

            # an expired session: the server did not process the message; renewing the
            # session (initialize again, then send once more) is the session layer's work
            if sent_session is not None and self._looks_expired(status, jsonrpc, error, msg):
                log.info("session %s at %s expired (HTTP %d)", sent_session, url, status)
                raise SessionExpired(
                    f"session {sent_session} at {url} expired (HTTP {status}): "
                    f"{msg.method or 'the message'} was not processed",
                    status=status,
                    sent=False,
                    renewable=True,
                    session_id=sent_session,
                )

            # 429 and 5xx say what happened (rate limited, server unwell) even when the body is
            # a JSON-RPC error: unless that error answers this very request, the status counts
            if (status >= 500 or status == 429) and not (
                jsonrpc is not None and jsonrpc.id is not UNSET and jsonrpc.id is not None and jsonrpc.id == msg.id
            ):
                raise status_error(status, url, body, resp.headers, secrets=sent_values(resp))

            if is_jsonrpc and msg.is_request:
                self._lane.succeeded = True
                self._streams.deliver_json(body, msg)
                return

            if (
                self.sse_fallback
                and not self._lane.succeeded
                and sent_session is None
                and status in (400, 404, 405)
                and not is_jsonrpc
                and msg.is_request
            ):
                log.info("%s refuses POST (HTTP %d): falling back to HTTP+SSE", url, status)
                left = time_left(deadline)
                self._switch_to_sse(left if left is not None else self.options.connect_timeout)
                assert self._delegate is not None
                self._delegate.send(msg.body, time_left(deadline))
                return

            raise status_error(
                status, url, body, resp.headers, secrets=sent_values(resp), session=sent_session is not None
            )
        except BaseException:
            finish(resp, reusable=False)
            raise

    def _deliver_body(self, msg: Message, body: bytes, ctype: str, status: int, url: str) -> None:
        """A 2xx answer's whole body (of media type ``ctype``) delivered: each message to
        its caller; nothing (or ``null``) for a notification or a response."""
        stripped = body.strip()
        if stripped and stripped != b"null":
            if ctype not in (JSON, SSE) and not ctype.endswith("+json"):
                raise ProtocolError(
                    f"{url} answered {msg.method or 'a message'} with content type "
                    f"{ctype or 'none'!r}, not JSON or SSE",
                    status=status,
                )
            if stripped[:1] == b"[":
                self._streams.deliver_json(body, msg)  # a batch: one message at a time
            else:
                self._streams.deliver(body, msg)
        elif msg.is_request:
            raise ProtocolError(f"{url} sent no response to {msg.method} (HTTP {status})", status=status)

    def _looks_expired(self, status: int, jsonrpc: Incoming | None, error: ErrorPeek | None, msg: Message) -> bool:
        if jsonrpc is not None and jsonrpc.id is not UNSET and jsonrpc.id is not None and jsonrpc.id == msg.id:
            return False  # a real answer to this request (e.g. method not found)
        if status == 404:
            return True
        if status == 400 and error is not None and "session" in error.message.lower():
            return True
        return False

    # ------------------------------------------------------------- HTTP+SSE fallback

    def _switch_to_sse(self, timeout: float) -> None:
        from .sse import SSETransport

        url = self._exchange.url
        delegate = SSETransport(url, options=self.options, connections=self._exchange.connections)
        if self._streams.failure_handler is not None:
            delegate.set_failure_handler(self._streams.failure_handler)
        delegate.connect(timeout)
        if self._protocol_version is not None:
            delegate.set_protocol_version(self._protocol_version)
        _remember_kind(url, "sse")
        self._delegate = delegate
        self._lane.open = False
        self._queue.put(_WAKE)  # a waiting receiver goes to the delegate
