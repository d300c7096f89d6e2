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
map through :func:`mcpsync._errors.error_from_http_status` (429 / 503 carry
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

Example:
    >>> t = StreamableHTTPTransport("http://127.0.0.1:8000/mcp")   # doctest: +SKIP
    >>> t.connect(10)                                               # doctest: +SKIP
    >>> t.send(b'{"jsonrpc":"2.0","id":1,"method":"initialize","params":{...}}')  # doctest: +SKIP
    >>> t.receive(5)                                                # doctest: +SKIP
    b'{"jsonrpc":"2.0","id":1,"result":{...}}'
"""

from __future__ import annotations

import collections
import itertools
import logging
import threading
import time
from typing import Any, Callable, Mapping, Union

import msgspec
import urllib3
from msgspec import UNSET, Raw, Struct, UnsetType

from .._channel import MessageFacts, message_facts
from .._constants import MODERN_FIRST
from .._errors import (
    ConnectionClosed,
    NetworkError,
    MCPError,
    MessageTooLarge,
    ProtocolError,
    RequestTimeout,
    SessionExpired,
)
from ._base import Transport
from ._http_errors import (
    MAX_REDIRECTS,
    read_body,
    redact,
    redirect_target,
    request_timeout,
    sent_secrets,
    status_error,
    translate,
)
from ._http_headers import (
    auth_retry,
    call_auth_headers,
    dpop_nonce_challenge,
    encode_header_value,
    MAX_DPOP_NONCE_RETRIES,
)
from ._http_options import HTTPOptions, media_type
from ._http_pools import acquire_pool, Pools, release_pool, StreamThreads
from ._sse import _Oversized, SSEParser

__all__ = ["StreamableHTTPTransport", "known_kind", "forget_url"]

log = logging.getLogger("mcpsync.http")

_JSON = "application/json"
_SSE = "text/event-stream"
_RESUME_ATTEMPTS = 5
_REISSUE_ATTEMPTS = 2
_DRAIN_WAIT = 1.0
_DELETE_TIMEOUT = 1.0
_THREADS_JOIN = 2.0  # close() waits this long, at most, for the stream threads to end

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


# ----------------------------------------------------------------- message peeking


class _In(Struct):
    id: Union[int, str, None, UnsetType] = UNSET
    method: Union[str, None] = None
    result: Raw = Raw()
    error: Raw = Raw()


class _ErrorPeek(Struct):
    code: int = 0
    message: str = ""


_in_decoder = msgspec.json.Decoder(_In)
_error_decoder = msgspec.json.Decoder(_ErrorPeek)
_any_decoder = msgspec.json.Decoder()
_encoder = msgspec.json.Encoder()


class _Message:
    """What the transport needs to know about one outgoing message: its bytes and the
    :class:`~mcpsync._channel.MessageFacts` the layer above computed when it encoded
    them (decoded from the bytes only when a caller gave none)."""

    __slots__ = ("body", "facts", "id", "method", "modern_version", "kind")

    def __init__(self, body: bytes, facts: MessageFacts | None = None) -> None:
        self.body = body
        if facts is None:
            facts = _facts_of(body)
        self.facts = facts
        self.id = facts.id
        self.method = facts.method
        self.modern_version = facts.modern_version
        if facts.method is not None:
            self.kind = "request" if facts.id is not None else "notification"
        else:
            self.kind = "response"

    @property
    def is_request(self) -> bool:
        return self.kind == "request"


def _facts_of(body: bytes) -> MessageFacts:
    """Facts for bytes that came without them (a direct caller, an internal replay)."""
    try:
        obj = _any_decoder.decode(body)
    except (msgspec.ValidationError, msgspec.DecodeError):
        obj = None
    if not isinstance(obj, dict):
        return MessageFacts()
    method = obj.get("method")
    facts = message_facts(obj.get("id"), method if isinstance(method, str) else None, obj.get("params"))
    return facts if facts is not None else MessageFacts(obj.get("id"), method if isinstance(method, str) else None)


def _with_id(body: bytes, new_id: Any) -> bytes:
    obj = _any_decoder.decode(body)
    obj["id"] = new_id
    return _encoder.encode(obj)


def _peek_error(raw: Raw) -> _ErrorPeek | None:
    try:
        return _error_decoder.decode(raw)
    except (msgspec.ValidationError, msgspec.DecodeError):
        return None


def _peek_in(data: bytes) -> _In | None:
    try:
        return _in_decoder.decode(data)
    except (msgspec.ValidationError, msgspec.DecodeError):
        return None


# ----------------------------------------------------------------- exchanges


class _Exchange:
    """One request awaiting its response on an HTTP response stream."""

    __slots__ = ("msg", "wire_id", "resp", "done", "cancelled", "oversize", "reissues", "delivered")

    def __init__(self, msg: _Message) -> None:
        self.msg = msg
        self.wire_id: Any = msg.id
        self.resp: Any = None
        self.done = False
        self.cancelled = False
        self.oversize: MessageTooLarge | None = None
        self.reissues = 0
        self.delivered = 0


_NO_STREAM = object()  # a reopened stream that failed to open: nothing to read this round


def _shutdown(resp: Any) -> None:
    """Unblock a thread reading ``resp`` (from any thread)."""
    if resp is None:
        return
    try:
        resp.shutdown()
    except Exception:  # noqa: BLE001 - already released / closed
        pass


def _left(deadline: float | None) -> float | None:
    """What is left of ``deadline`` (monotonic), in seconds; None without one."""
    if deadline is None:
        return None
    left = deadline - time.monotonic()
    if left <= 0:
        raise RequestTimeout("the call's time ran out")
    return left


def _secrets(resp: Any) -> tuple[str, ...]:
    """The values of the headers ``resp``'s request carried (never quoted in errors)."""
    sent = getattr(resp, "_mcpsync_sent", None)
    return sent_secrets(sent) if sent else ()


def _finish(resp: Any, *, reusable: bool) -> None:
    """Give ``resp``'s connection back (reusable) or close it."""
    try:
        if not reusable:
            resp.close()
        resp.release_conn()
    except Exception:  # noqa: BLE001
        pass


class StreamableHTTPTransport(Transport):
    """The Streamable HTTP transport (both eras), falling back to HTTP+SSE.

    Args:
        url: the MCP endpoint, e.g. ``https://example.com/mcp``.
        headers: static headers for every request.
        auth: an auth hook (``headers(url, method)`` / ``on_response(...)``).
        verify: TLS verification (True, False or a CA bundle path).
        connect_timeout: TCP connect timeout in seconds (retried once).
        read_timeout: the longest silence tolerated on a response or stream.
        pool_size: pooled connections per origin.
        max_message_size: the largest message accepted, in bytes.
        sse_fallback: switch to HTTP+SSE (2024-11-05) when the URL does not take POSTs.
        get_stream: open the standalone GET stream after a legacy session starts.
        get_stream_idle: reconnect the GET stream after this many seconds of silence.
        options: the HTTP options as one :class:`HTTPOptions` (then the individual
            HTTP arguments above are ignored).

    Example:
        >>> with StreamableHTTPTransport("http://127.0.0.1:8000/mcp") as t:  # doctest: +SKIP
        ...     t.connect(10)
    """

    kind = "http"

    def __init__(
        self,
        url: str,
        *,
        headers: Mapping[str, str] | None = None,
        auth: Any = None,
        verify: bool | str = True,
        connect_timeout: float = 10.0,
        read_timeout: float = 300.0,
        pool_size: int = 10,
        max_message_size: int | None = None,
        sse_fallback: bool = True,
        get_stream: bool = True,
        get_stream_idle: float = 60.0,
        options: HTTPOptions | None = None,
    ) -> None:
        if not url.lower().startswith(("http://", "https://")):
            raise ValueError(f"not an http(s) URL: {url!r}")
        if options is None:
            kwargs: dict[str, Any] = {
                "headers": dict(headers or {}),
                "auth": auth,
                "verify": verify,
                "connect_timeout": connect_timeout,
                "read_timeout": read_timeout,
                "pool_size": pool_size,
            }
            if max_message_size is not None:
                kwargs["max_message_size"] = max_message_size
            options = HTTPOptions(**kwargs)
        self.url = url
        self.options = options
        self.sse_fallback = sse_fallback
        self.get_stream_enabled = get_stream
        self.get_stream_idle = get_stream_idle
        self.request_scoped = False

        self._lock = threading.Lock()
        self._cond = threading.Condition(threading.Lock())
        self._queue: collections.deque[Any] = collections.deque()
        self._closed = False
        self._dead: MCPError | None = None
        self._closed_event = threading.Event()
        self._pool_key: Any = None
        self._pool: Pools | None = None
        self._delegate: Transport | None = None
        self._succeeded = False

        self._session_id: str | None = None
        self._protocol_version: str | None = None
        #: called with the lost session's id when the standalone GET stream finds that the
        #: server no longer knows the session (on the GET thread: it should only schedule
        #: the renewal, which belongs to the session layer)
        self.on_session_lost: Callable[[str], None] | None = None
        self._ids = itertools.count(1)

        self._inflight: dict[Any, _Exchange] = {}

        self._get_generation = 0
        self._get_resp: Any = None
        self._get_thread: threading.Thread | None = None
        self._get_last_id: str | None = None

        self._failure_handler: Callable[[Any, MCPError], None] | None = None
        self._poked = False
        self._threads = StreamThreads()
        self._loose: set[Any] = set()  # SSE answers to notifications being read

    # ------------------------------------------------------------- Transport API

    def connect(self, timeout: float) -> None:
        """Get the shared pool for the URL's origin (no request is made yet).

        When the URL is already known to speak HTTP+SSE only, the SSE stream is opened
        here. Raises :class:`ConnectError` on failure.
        """
        if self._closed:
            raise ConnectionClosed("transport is closed")
        if self._pool is None:
            self._pool_key, self._pool = acquire_pool(self.url, self.options)
        if self.sse_fallback and known_kind(self.url) == "sse" and self._delegate is None:
            self._switch_to_sse(timeout)

    #: the dispatcher passes each message's :class:`~mcpsync._channel.MessageFacts`
    takes_facts = True

    def send(self, message: bytes, timeout: float | None = None, facts: MessageFacts | None = None) -> None:
        """POST one message; its answer (if any) becomes available from :meth:`receive`.

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
        if self._pool is None:
            self.connect(self.options.connect_timeout)
        if message[:1] == b"[" or message.lstrip()[:1] == b"[":
            raise ProtocolError("JSON-RPC batches are never sent over Streamable HTTP")
        msg = _Message(message, facts)
        if msg.method == "notifications/cancelled" and self._cancel(msg):
            return
        deadline = None if timeout is None else time.monotonic() + timeout
        self._post(msg, deadline)

    def receive(self, timeout: float | None) -> bytes | None:
        """The next message, ``None`` after ``timeout``; ConnectionClosed at the end.

        Returns ``None`` early, once, right after a request was failed through the
        failure handler, so that a reader waiting for that request notices.
        """
        deadline = None if timeout is None else time.monotonic() + timeout
        with self._cond:
            while not self._queue:
                if self._delegate is not None:
                    break
                if self._poked:
                    self._poked = False
                    return None
                if self._closed or self._dead is not None:
                    raise ConnectionClosed(
                        "transport is closed" if self._closed else f"session is gone: {self._dead}"
                    )
                if deadline is None:
                    self._cond.wait()
                else:
                    left = deadline - time.monotonic()
                    if left <= 0:
                        return None
                    self._cond.wait(left)
            else:
                item = self._queue.popleft()
                if isinstance(item, _Oversized):
                    raise item.error
                return item  # type: ignore[no-any-return]
        delegate = self._delegate
        assert delegate is not None
        rest = None if deadline is None else max(0.0, deadline - time.monotonic())
        return delegate.receive(rest)

    def close(self) -> None:
        """End the session (DELETE), stop every stream, release the pool. Idempotent."""
        with self._lock:
            if self._closed:
                return
            self._closed = True
            inflight = list(self._inflight.values())
            get_resp = self._get_resp
            session = self._session_id
            loose = list(self._loose)
        self._closed_event.set()
        for exch in inflight:
            exch.cancelled = True
            _shutdown(exch.resp)
        for resp in loose:
            _shutdown(resp)
        _shutdown(get_resp)
        if self._delegate is not None:
            self._delegate.close()
        elif session is not None and self._pool is not None:
            try:
                headers = self._headers(None, "DELETE")
                resp = self._pool.control.request(
                    "DELETE",
                    self.url,
                    headers=headers,
                    timeout=urllib3.Timeout(connect=_DELETE_TIMEOUT, read=_DELETE_TIMEOUT),
                    retries=False,
                    redirect=False,
                )
                resp.release_conn()
            except Exception as exc:  # noqa: BLE001 - best effort on the way out
                log.debug("DELETE of session at %s failed: %s", self.url, exc)
        get_thread = self._get_thread
        if get_thread is not None and get_thread is not threading.current_thread():
            with self._lock:
                _shutdown(self._get_resp)
            get_thread.join(1.0)
        if not self._threads.close(_THREADS_JOIN):
            log.debug("stream threads for %s still running after close", self.url)
        if self._pool_key is not None:
            release_pool(self._pool_key)
            self._pool_key = None
        with self._cond:
            self._cond.notify_all()

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
        if self._delegate is not None:
            self._delegate.set_protocol_version(version)

    def set_failure_handler(self, handler: Callable[[Any, MCPError], None] | None) -> None:
        """``handler(request_id, error)`` is called when a request's response stream
        fails after ``send`` returned (it cannot be resumed or re-issued). Without a
        handler the failure is logged and the request runs into its timeout."""
        self._failure_handler = handler
        delegate = self._delegate
        if delegate is not None and hasattr(delegate, "set_failure_handler"):
            delegate.set_failure_handler(handler)

    def describe(self) -> str:
        if self._delegate is not None:
            return self._delegate.describe()
        return f"http {self.url}"

    def session_info(self) -> dict[str, Any]:
        if self._delegate is not None:
            info = dict(self._delegate.session_info())
            return info
        return {
            "transport": "streamable-http",
            "url": self.url,
            "session_id": self._session_id,
            "protocol_version": self._protocol_version,
            "get_stream": self._get_thread is not None and self._get_thread.is_alive(),
            "inflight_streams": len(self._inflight),
        }

    # ------------------------------------------------------------- queue

    def _put(self, item: Any) -> None:
        with self._cond:
            self._queue.append(item)
            self._cond.notify()

    def _fail(self, request_id: Any, error: MCPError) -> None:
        handler = self._failure_handler
        if handler is None:
            # no typed channel to the caller: answer with a JSON-RPC error so it does not hang
            log.warning("request %r to %s failed after send: %s", request_id, self.url, error)
            self._put(
                _encoder.encode(
                    {
                        "jsonrpc": "2.0",
                        "id": request_id,
                        "error": {
                            "code": -32000,
                            "message": str(error) or type(error).__name__,
                            "data": {"mcpsync/transportError": type(error).__name__},
                        },
                    }
                )
            )
            return
        try:
            handler(request_id, error)
        except Exception:  # noqa: BLE001 - the handler belongs to the dispatcher
            log.exception("failure handler raised")
        with self._cond:  # wake the reader so it sees the failed call at once
            self._poked = True
            self._cond.notify_all()

    # ------------------------------------------------------------- HTTP plumbing

    def _headers(self, msg: _Message | None, method: str, *, accept: str | None = None) -> dict[str, str]:
        h: dict[str, str] = {"User-Agent": self.options.user_agent}
        h.update(self.options.headers)
        if method == "POST":
            h["Content-Type"] = _JSON
            h["Accept"] = f"{_JSON}, {_SSE}"
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
        return h

    def _open(
        self,
        method: str,
        headers: dict[str, str],
        body: bytes | None,
        read_timeout: float,
        *,
        control: bool = False,
        deadline: float | None = None,
    ) -> Any:
        """One HTTP exchange up to the response headers, with the auth hook's single retry.

        Requests wait for a free connection of the main pool; ``control`` exchanges
        (streams, replies, notifications) never wait. A failed connect is retried once.
        With a ``deadline`` (monotonic: the caller's timeout, set when the send began)
        the pool wait, each connect and the read of the answer get only what is left of
        it, and both connect attempts fit in it; without one each read may take
        ``read_timeout``.
        """
        connect = self.options.connect_timeout
        if deadline is None:
            deadline = time.monotonic() + read_timeout if not control else None
        else:
            connect = max(0.05, min(connect, (deadline - time.monotonic()) / 2))
        pools = self._pool
        if pools is None:
            raise ConnectionClosed("transport is closed")
        pool = pools.control if control else pools.main
        auth = self.options.auth
        retried = False
        nonces = 0
        redirects = 0
        while True:
            send_headers = dict(headers)
            send_headers.update(call_auth_headers(auth, self.url, method))
            extra, pool_wait = request_timeout(deadline, connect, read_timeout)
            if not control:
                extra["pool_timeout"] = pool_wait
            try:
                resp = pool.request(
                    method,
                    self.url,
                    body=body,
                    headers=send_headers,
                    preload_content=False,
                    redirect=False,
                    **extra,
                )
            except Exception as exc:
                if self._closed:
                    raise ConnectionClosed("transport is closed") from exc
                raise translate(exc, self.url, connecting=True) from exc
            resp._mcpsync_sent = send_headers  # quoted nowhere
            target = redirect_target(self.url, resp)
            if target is not None:
                redirects += 1
                if redirects > MAX_REDIRECTS:
                    raise ProtocolError(f"{self.url}: too many redirects", status=resp.status)
                log.info("%s redirects to %s (HTTP %d): using that from now on", self.url, target, resp.status)
                self.url = target
                continue
            if resp.status in (401, 403):
                data = read_body(resp, 65536, self.url)
                resp.release_conn()
                nonce = dpop_nonce_challenge(resp.status, resp.headers)
                allowed = nonces < MAX_DPOP_NONCE_RETRIES if nonce else not retried
                if allowed and auth_retry(auth, self.url, method, resp.status, resp.headers):
                    if nonce:
                        nonces += 1  # a DPoP nonce challenge is answered, not counted as the auth retry
                    else:
                        retried = True
                    continue
                raise status_error(resp.status, self.url, data, resp.headers, secrets=sent_secrets(send_headers))
            return resp

    def _read_timeout(self, timeout: float | None) -> float:
        if timeout is None:
            return self.options.read_timeout
        return max(0.001, min(timeout, self.options.read_timeout))

    # ------------------------------------------------------------- POST

    def _post(self, msg: _Message, deadline: float | None) -> None:
        sent_session = None if msg.modern_version or msg.method == "initialize" else self._session_id
        headers = self._headers(msg, "POST")
        resp = self._open(
            "POST", headers, msg.body, self._read_timeout(_left(deadline)), control=not msg.is_request, deadline=deadline
        )
        status = resp.status
        ctype = media_type(resp.headers.get("content-type"))

        if 200 <= status < 300:
            new_session = resp.headers.get("mcp-session-id")
            if msg.method == "initialize" and msg.is_request:
                self._session_id = new_session or None
            if msg.method == "notifications/initialized" and not msg.modern_version:
                self._start_get_stream(wait=min(2.0, self.options.connect_timeout))
            if ctype == _SSE:
                self._succeeded = True
                _remember_kind(self.url, "streamable")
                # the dispatcher times the request; the stream itself may idle up to read_timeout
                self._set_stream_timeout(resp)
                if not msg.is_request:
                    self._spawn_or_drop(resp, self._loose_worker, resp)
                    return
                exch = _Exchange(msg)
                exch.resp = resp
                with self._lock:
                    self._inflight[msg.id] = exch
                try:
                    self._spawn_or_drop(resp, self._stream_worker, exch)
                except ConnectionClosed:
                    with self._lock:
                        self._inflight.pop(msg.id, None)
                    raise
                return
            body = read_body(resp, self.options.max_message_size, self.url, deadline)
            resp.release_conn()
            self._succeeded = True
            _remember_kind(self.url, "streamable")
            stripped = body.strip()
            if stripped and stripped != b"null":
                if ctype not in (_JSON, _SSE) and not ctype.endswith("+json"):
                    raise ProtocolError(
                        f"{self.url} answered {msg.method or 'a message'} with content type "
                        f"{ctype or 'none'!r}, not JSON or SSE",
                        status=status,
                    )
                self._deliver_json(body, msg)
            elif msg.is_request:
                raise ProtocolError(f"{self.url} sent no response to {msg.method} (HTTP {status})", status=status)
            return

        body = read_body(resp, self.options.max_message_size, self.url, deadline)
        resp.release_conn()
        jsonrpc = _peek_in(body) if media_type(resp.headers.get("content-type")) == _JSON or body[:1] == b"{" else None
        is_jsonrpc = jsonrpc is not None and (jsonrpc.id is not UNSET or len(jsonrpc.error) > 0)
        error = _peek_error(jsonrpc.error) if jsonrpc is not None and len(jsonrpc.error) else None

        # an expired session: the server did not process the message; renewing the
        # session (initialize again, then send once more) is the session layer's work
        if sent_session is not None and self._looks_expired(status, jsonrpc, error, msg):
            log.info("session %s at %s expired (HTTP %d)", sent_session, self.url, status)
            raise SessionExpired(
                f"session {sent_session} at {self.url} expired (HTTP {status}): "
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
            raise status_error(status, self.url, body, resp.headers, secrets=_secrets(resp))

        if is_jsonrpc and msg.is_request:
            self._succeeded = True
            self._deliver_json(body, msg)
            return

        if (
            self.sse_fallback
            and not self._succeeded
            and sent_session is None
            and status in (400, 404, 405)
            and not is_jsonrpc
            and msg.is_request
        ):
            log.info("%s refuses POST (HTTP %d): falling back to HTTP+SSE", self.url, status)
            left = _left(deadline)
            self._switch_to_sse(left if left is not None else self.options.connect_timeout)
            assert self._delegate is not None
            self._delegate.send(msg.body, _left(deadline))
            return

        raise status_error(
            status, self.url, body, resp.headers, secrets=_secrets(resp), session=sent_session is not None
        )

    def _looks_expired(self, status: int, jsonrpc: _In | None, error: _ErrorPeek | None, msg: _Message) -> bool:
        if jsonrpc is not None and jsonrpc.id is not UNSET and jsonrpc.id is not None and jsonrpc.id == msg.id:
            return False  # a real answer to this request (e.g. method not found)
        if status == 404:
            return True
        if status == 400 and error is not None and "session" in error.message.lower():
            return True
        return False

    def _deliver_json(self, body: bytes, msg: _Message | None) -> None:
        stripped = body.lstrip()
        if stripped[:1] == b"[":
            try:
                items = _any_decoder.decode(body)
            except msgspec.DecodeError as exc:
                raise ProtocolError(f"malformed JSON from {self.url}: {exc}") from None
            for item in items:
                self._deliver(_encoder.encode(item), None, msg)
            return
        self._deliver(body, None, msg)

    def _deliver(self, data: bytes, exch: _Exchange | None, msg: _Message | None) -> bool:
        """Queue one incoming message. True when it is the response ``exch``/``msg`` awaits."""
        peek = _peek_in(data)
        if peek is None:
            if msg is not None and msg.is_request and exch is None:
                raise ProtocolError(f"{self.url} answered {msg.method} with malformed JSON: {redact(data, limit=80)!r}")
            self._put(data)  # the dispatcher reports it
            return False
        is_response = peek.method is None and peek.id is not UNSET
        answered = False
        if is_response:
            expected = exch.wire_id if exch is not None else (msg.id if msg is not None else None)
            original = exch.msg.id if exch is not None else expected
            if expected is not None and (peek.id == expected or peek.id is None):
                answered = True
                if peek.id != original:
                    data = _with_id(data, original)
        self._put(data)
        return answered

    # ------------------------------------------------------------- response streams

    def _spawn(self, target: Callable[..., None], *args: Any) -> None:
        self._threads.spawn(target, *args)

    def _spawn_or_drop(self, resp: Any, target: Callable[..., None], *args: Any) -> None:
        """Read ``resp`` on a stream thread; closed meanwhile: drop it (ConnectionClosed)."""
        try:
            self._threads.spawn(target, *args)
        except ConnectionClosed:
            _finish(resp, reusable=False)
            raise

    def _set_stream_timeout(self, resp: Any) -> None:
        try:
            sock = getattr(resp.connection, "sock", None)
            if sock is not None:
                sock.settimeout(self.options.read_timeout)
        except Exception:  # noqa: BLE001 - the POST's own read timeout stays
            pass

    def _loose_worker(self, resp: Any) -> None:
        """An SSE answer to a notification or response: deliver what comes, to its end."""
        with self._lock:
            if self._closed:
                _shutdown(resp)
            self._loose.add(resp)
        try:
            self._read_get(resp, SSEParser(self.options.max_message_size))
        except Exception:  # noqa: BLE001
            log.exception("stream reader for %s failed", self.url)
        finally:
            with self._lock:
                self._loose.discard(resp)

    def _stream_worker(self, exch: _Exchange) -> None:
        try:
            self._follow(exch)
        except Exception:  # noqa: BLE001 - never let a stream thread die silently
            log.exception("stream reader for %s failed", self.url)
        finally:
            with self._lock:
                if self._inflight.get(exch.msg.id) is exch:
                    del self._inflight[exch.msg.id]

    def _follow(self, exch: _Exchange) -> None:
        """Read ``exch``'s response stream to its answer, resuming / re-issuing as needed."""
        parser = SSEParser(self.options.max_message_size)
        resp = exch.resp
        resumes = 0
        quiet = 0
        while True:
            error = self._read_stream(resp, parser, exch) if resp is not _NO_STREAM else None
            if exch.done or exch.cancelled or self._closed:
                return
            if exch.oversize is not None:
                self._fail(exch.msg.id, exch.oversize)
                return
            msg = exch.msg
            if msg.method == "subscriptions/listen" and msg.modern_version:
                # a listen stream is meant to stay open: reopen it under the same id (its
                # notifications name that id), backing off while it delivers nothing
                quiet = 0 if exch.delivered else quiet + 1
                exch.delivered = 0
                delay = 1.0 if quiet == 0 else min(30.0, 2.0**quiet)
                log.info("listen stream %r ended (%s): reopening in %g s", msg.id, error, delay)
                if self._closed_event.wait(delay) or exch.cancelled:
                    return
                resp = self._reissue(exch, report=False)
                if resp is None:
                    if exch.done:
                        return
                    resp = _NO_STREAM
                parser = SSEParser(self.options.max_message_size)
                continue
            if msg.modern_version and not msg.facts.safe_to_resend:
                # the server may already be acting on it: re-issuing could run a tool
                # twice. Fail it as possibly sent; the client's retry policy re-sends it
                # (with a new id) only when the tool is read-only, idempotent or opted in.
                self._fail(
                    msg.id,
                    NetworkError(f"{self.url} broke the stream of {msg.method} before answering: {error}", sent=True),
                )
                return
            if msg.modern_version:
                if exch.reissues >= _REISSUE_ATTEMPTS:
                    self._fail(msg.id, error or ConnectionClosed(f"{self.url} closed the stream before answering"))
                    return
                exch.reissues += 1
                exch.wire_id = f"mcpsync-reissue-{next(self._ids)}"
                log.info("stream for %r broke (%s): re-issuing as %s", msg.id, error, exch.wire_id)
                resp = self._reissue(exch)
                if resp is None:
                    return
                parser = SSEParser(self.options.max_message_size)
                continue
            # legacy: resume with Last-Event-ID if the server gave event ids
            if parser.last_event_id is None or self._session_id is None or resumes >= _RESUME_ATTEMPTS:
                self._fail(msg.id, error or ConnectionClosed(f"{self.url} closed the stream before answering"))
                return
            resumes += 1
            log.info("stream for %r broke (%s): resuming after event %s", msg.id, error, parser.last_event_id)
            delay = (parser.retry if parser.retry is not None else 1000) / 1000.0
            if self._closed_event.wait(min(delay * resumes, 30.0)):
                return
            try:
                resp = self._resume(parser.last_event_id)
            except MCPError as exc:
                error = exc
                resp = None
            if resp is None:
                if resumes >= _RESUME_ATTEMPTS:
                    self._fail(msg.id, error or ConnectionClosed("stream could not be resumed"))
                    return
                continue
            exch.resp = resp
            if exch.cancelled or self._closed:
                _shutdown(resp)
                _finish(resp, reusable=False)
                return

    def _read_stream(self, resp: Any, parser: SSEParser, exch: _Exchange | None) -> MCPError | None:
        """Deliver events from ``resp`` until the awaited answer, EOF or an error."""
        error: MCPError | None = None
        eof = False
        try:
            while True:
                chunk = resp.read1(65536)
                if not chunk:
                    eof = True
                    break
                answered = False
                for ev in parser.feed(chunk):
                    if isinstance(ev, _Oversized):
                        self._put(ev)
                        if exch is not None:
                            exch.oversize = ev.error
                        continue
                    if ev.event != "message" or not ev.data.strip():
                        continue
                    if exch is not None:
                        exch.delivered += 1
                    if self._deliver(ev.data, exch, None):
                        answered = True
                if answered and exch is not None:
                    exch.done = True
                    break
        except Exception as exc:  # noqa: BLE001 - translated below
            if not (exch is not None and (exch.cancelled or exch.done)) and not self._closed:
                error = translate(exc, self.url, fatal=False)
        if exch is not None and exch.done and not eof:
            eof = self._drain(resp)
        _finish(resp, reusable=eof and error is None)
        return error

    def _drain(self, resp: Any) -> bool:
        """After the answer: wait briefly for the server to end the stream (keeps the connection)."""
        try:
            sock = getattr(resp.connection, "sock", None)
            if sock is not None:
                sock.settimeout(_DRAIN_WAIT)
            for _ in range(16):
                if not resp.read1(65536):
                    return True
        except Exception:  # noqa: BLE001 - the connection is closed instead
            pass
        return False

    def _reissue(self, exch: _Exchange, *, report: bool = True) -> Any:
        """POST ``exch``'s request again under its wire id; None when no stream came of it
        (the answer came as JSON, or it failed: reported unless ``report`` is False)."""
        body = exch.msg.body if exch.wire_id == exch.msg.id else _with_id(exch.msg.body, exch.wire_id)
        headers = self._headers(exch.msg, "POST")
        try:
            resp = self._open("POST", headers, body, self.options.read_timeout)
        except MCPError as exc:
            if report:
                self._fail(exch.msg.id, exc)
            return None
        ctype = media_type(resp.headers.get("content-type"))
        if ctype == _SSE and 200 <= resp.status < 300:
            exch.resp = resp
            if exch.cancelled or self._closed:
                _shutdown(resp)
            return resp
        try:
            body = read_body(resp, self.options.max_message_size, self.url)
        except MCPError as exc:
            if report:
                self._fail(exch.msg.id, exc)
            return None
        resp.release_conn()
        peek = _peek_in(body)
        if peek is not None and (200 <= resp.status < 300 or peek.id is not UNSET):
            if self._deliver(body, exch, None):
                exch.done = True
                return None
        if report:
            session = exch.msg.modern_version is None and self._session_id is not None
            self._fail(
                exch.msg.id,
                status_error(resp.status, self.url, body, resp.headers, secrets=_secrets(resp), session=session),
            )
        return None

    def _resume(self, last_event_id: str) -> Any:
        """GET with ``Last-Event-ID``; the response, or None when the server refuses."""
        headers = self._headers(None, "GET", accept=_SSE)
        headers["Last-Event-ID"] = last_event_id
        resp = self._open("GET", headers, None, self.options.read_timeout)
        if 200 <= resp.status < 300 and media_type(resp.headers.get("content-type")) == _SSE:
            return resp
        body = read_body(resp, 65536, self.url)
        resp.release_conn()
        raise status_error(resp.status, self.url, body, resp.headers, secrets=_secrets(resp))

    def _cancel(self, msg: _Message) -> bool:
        """Close the stream of the cancelled request. True when nothing needs POSTing."""
        rid = msg.facts.cancels
        with self._lock:
            exch = self._inflight.get(rid)
        if exch is None:
            return msg.modern_version is not None
        exch.cancelled = True
        _shutdown(exch.resp)
        # modern: closing the stream is the cancellation; legacy: tell the server as well
        return exch.msg.modern_version is not None

    # ------------------------------------------------------------- standalone GET stream

    def _start_get_stream(self, wait: float = 0.0) -> None:
        """(Re)start the standalone GET stream; wait up to ``wait`` s for the server's answer,
        so that server messages sent right after the handshake have a stream to go to."""
        if not self.get_stream_enabled or self._closed:
            return
        with self._lock:
            self._get_generation += 1
            generation = self._get_generation
            old = self._get_resp
        _shutdown(old)
        answered = threading.Event()
        thread = threading.Thread(
            target=self._get_loop, args=(generation, answered), name="mcpsync-http-get", daemon=True
        )
        self._get_thread = thread
        thread.start()
        if wait > 0:
            answered.wait(wait)

    def _get_loop(self, generation: int, answered: threading.Event) -> None:
        try:
            self._get_loop_inner(generation, answered)
        except Exception:  # noqa: BLE001 - never let the GET thread die silently
            log.exception("GET stream for %s failed", self.url)
        finally:
            answered.set()

    def _get_loop_inner(self, generation: int, answered: threading.Event) -> None:
        parser = SSEParser(self.options.max_message_size)
        failures = 0
        streamed = False
        while not self._closed and generation == self._get_generation:
            headers = self._headers(None, "GET", accept=_SSE)
            if self._get_last_id is not None:
                headers["Last-Event-ID"] = self._get_last_id
            delivered = False
            try:
                resp = self._open("GET", headers, None, self.get_stream_idle, control=True)
            except MCPError as exc:
                log.debug("GET stream at %s: %s", self.url, exc)
                resp = None
            answered.set()
            if resp is not None:
                status = resp.status
                if status == 405:
                    log.debug("%s offers no GET stream", self.url)
                    _finish(resp, reusable=False)
                    return
                if status in (400, 404) and self._session_id is not None:
                    _finish(resp, reusable=False)
                    if not streamed:
                        log.debug("%s refuses the GET stream (HTTP %d)", self.url, status)
                        return
                    # it worked before, so the session is gone: tell the session layer,
                    # whose new session (notifications/initialized) restarts the stream
                    # (the next POST would find out too)
                    lost = self._session_id
                    log.info("session %s at %s expired (GET stream: HTTP %d)", lost, self.url, status)
                    hook = self.on_session_lost
                    if hook is not None:
                        try:
                            hook(lost)
                        except Exception:  # pragma: no cover - the hook only schedules work
                            log.exception("on_session_lost hook of %s raised", self.url)
                    return
                elif 200 <= status < 300 and media_type(resp.headers.get("content-type")) == _SSE:
                    streamed = True
                    with self._lock:
                        if generation != self._get_generation or self._closed:
                            _shutdown(resp)
                        self._get_resp = resp
                    delivered, error = self._read_get(resp, parser)
                    with self._lock:
                        if self._get_resp is resp:
                            self._get_resp = None
                    if parser.last_event_id is not None:
                        self._get_last_id = parser.last_event_id
                    if isinstance(error, RequestTimeout):
                        failures = 0
                        continue  # just idle: reconnect at once
                    failures = 0 if delivered else failures + 1
                else:
                    _finish(resp, reusable=False)
                    failures += 1
            else:
                failures += 1
            base = (parser.retry if parser.retry is not None else 1000) / 1000.0
            delay = min(base * (2 ** max(0, failures - 1)), 30.0) if failures else base
            if self._closed_event.wait(delay):
                return

    def _read_get(self, resp: Any, parser: SSEParser) -> tuple[bool, MCPError | None]:
        delivered = False
        error: MCPError | None = None
        try:
            while True:
                chunk = resp.read1(65536)
                if not chunk:
                    break
                for ev in parser.feed(chunk):
                    if isinstance(ev, _Oversized):
                        self._put(ev)
                        continue
                    if ev.event != "message" or not ev.data.strip():
                        continue
                    delivered = True
                    self._deliver(ev.data, None, None)
        except Exception as exc:  # noqa: BLE001
            error = translate(exc, self.url, fatal=False)
        _finish(resp, reusable=False)
        return delivered, error

    # ------------------------------------------------------------- HTTP+SSE fallback

    def _switch_to_sse(self, timeout: float) -> None:
        from .sse import SSETransport

        delegate = SSETransport(self.url, options=self.options)
        if self._failure_handler is not None:
            delegate.set_failure_handler(self._failure_handler)
        delegate.connect(timeout)
        if self._protocol_version is not None:
            delegate.set_protocol_version(self._protocol_version)
        _remember_kind(self.url, "sse")
        self._delegate = delegate
        with self._cond:
            self._cond.notify_all()
