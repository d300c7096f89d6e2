"""The receiving half of the Streamable HTTP transport: response streams and the GET stream.

:class:`ResponseStreams` is a part that
:class:`~mcpsync.transports.streamable_http.StreamableHTTPTransport` builds and holds,
given its collaborators: the transport's :class:`~._http_exchange.HTTPExchange` (every
request it makes again), the hand-off to ``receive`` and the wake-up of a waiting
reader, the transport's request headers, its session id (read), and the forwarder of a
lost session. It holds what happens after a POST was answered:

* **Delivery** — every incoming message is queued for ``receive``; a response is
  matched to the request it answers (under its wire id when it was re-issued) and
  handed up under the original id. A request whose stream fails after ``send``
  returned goes to the failure handler (without one it is answered with a JSON-RPC
  error, code -32000, so that no caller waits forever).
* **Response streams** (``text/event-stream`` answers) — read on the transport's own
  threads to their answer. A modern request's broken stream is re-issued under a new
  id (twice at most) when its method is safe to resend, else failed as possibly sent;
  a ``subscriptions/listen`` stream is reopened under the same id with backoff; a
  legacy stream is resumed with ``Last-Event-ID`` after the server's ``retry``.
  Cancelling a request closes its stream.
* **The standalone GET stream** (legacy sessions) — (re)started when
  ``notifications/initialized`` goes out, reconnected with ``Last-Event-ID`` and
  backoff; 405 means not offered; a 404 after it had worked is told to the
  ``session_lost`` forwarder (the transport's ``on_session_lost``: renewing the
  session is the session layer's work).

What it reads of a message comes from :mod:`~mcpsync.transports._http_messages`.
"""

from __future__ import annotations

import itertools
import logging
import threading
from typing import Any, Callable

import msgspec
from msgspec import UNSET

from .._errors import ConnectionClosed, MCPError, MessageTooLarge, NetworkError, ProtocolError, RequestTimeout
from ._http_errors import read_body, redact, status_error, translate
from ._http_exchange import SSE, HTTPExchange, finish, sent_values, shutdown
from ._http_messages import Message, decode_any, encode, peek_in, reissued, with_id
from ._http_options import media_type
from ._http_pools import StreamThreads
from ._sse import Oversized, SSEParser

__all__ = ["ResponseStreams"]

log = logging.getLogger("mcpsync.http")

_RESUME_ATTEMPTS = 5
_REISSUE_ATTEMPTS = 2
_DRAIN_WAIT = 1.0

# ----------------------------------------------------------------- response streams


class _Awaited:
    """One request awaiting its response on an HTTP response stream."""

    __slots__ = ("msg", "wire_id", "resp", "done", "cancelled", "oversize", "reissues", "delivered")

    def __init__(self, msg: Message, resp: Any) -> None:
        self.msg = msg
        self.wire_id: Any = msg.id
        self.resp: Any = resp
        self.done = False
        self.cancelled = False
        self.oversize: MessageTooLarge | None = None
        self.reissues = 0
        self.delivered = 0


_NO_STREAM = object()  # a reopened stream that failed to open: nothing to read this round

#: ``headers(msg, method, accept=None)``: a request's headers, as the transport makes them
Headers = Callable[..., dict[str, str]]


class ResponseStreams:
    """Delivery, response streams and the GET stream (see the module's docstring).

    Args:
        exchange: the transport's exchange: its URL, options and request loop.
        put: queue one received message (or an ``Oversized``) for ``receive``.
        poke: wake a waiting reader, whose request just failed through the failure handler.
        headers: ``headers(msg, method, accept=None)``, the transport's request headers.
        session_id: the transport's session id now (None: none, or a modern request).
        session_lost: told the lost session's id when the GET stream finds it gone (on
            the GET thread: it should only schedule the renewal).
        get_stream: open the standalone GET stream when asked to (:meth:`start_get_stream`).
        get_stream_idle: reconnect the GET stream after this many seconds of silence.
    """

    __slots__ = (
        "_exchange", "_options", "_put", "_poke", "_headers", "_session_id", "_session_lost", "failure_handler",
        "get_stream_enabled", "get_stream_idle", "_lock", "_closed", "_closed_event", "_ids", "_inflight",
        "_get_generation", "_get_resp", "_get_thread", "_get_last_id", "_threads", "_loose",
    )

    def __init__(
        self,
        exchange: HTTPExchange,
        *,
        put: Callable[[Any], None],
        poke: Callable[[], None],
        headers: Headers,
        session_id: Callable[[], str | None],
        session_lost: Callable[[str], None],
        get_stream: bool = True,
        get_stream_idle: float = 60.0,
    ) -> None:
        self._exchange = exchange
        self._options = exchange.options
        self._put = put
        self._poke = poke
        self._headers = headers
        self._session_id = session_id
        self._session_lost = session_lost
        #: ``handler(request_id, error)`` for a request whose stream failed after ``send``
        #: returned; None: it is answered with a JSON-RPC error (code -32000) instead
        self.failure_handler: Callable[[Any, MCPError], None] | None = None
        self.get_stream_enabled = get_stream
        self.get_stream_idle = get_stream_idle
        self._lock = threading.Lock()
        self._closed = False
        self._closed_event = threading.Event()
        self._ids = itertools.count(1)
        self._inflight: dict[Any, _Awaited] = {}
        self._get_generation = 0
        self._get_resp: Any = None
        self._get_thread: threading.Thread | None = None
        self._get_last_id: str | None = None
        self._threads = StreamThreads()
        self._loose: set[Any] = set()  # SSE answers to notifications being read

    # ------------------------------------------------------------- the transport's calls

    def follow(self, msg: Message, resp: Any) -> None:
        """Read ``resp``, the SSE answer to ``msg``, on a stream thread: to the request's
        answer (resumed / re-issued as needed), or to its end for a notification or a
        response.

        Raises:
            ConnectionClosed: closed meanwhile (``resp`` is dropped).
        """
        self._set_stream_timeout(resp)
        if not msg.is_request:
            self._spawn_or_drop(resp, self._loose_worker, resp)
            return
        awaited = _Awaited(msg, resp)
        with self._lock:
            self._inflight[msg.id] = awaited
        try:
            self._spawn_or_drop(resp, self._stream_worker, awaited)
        except ConnectionClosed:
            with self._lock:
                self._inflight.pop(msg.id, None)
            raise

    def deliver(self, data: bytes, msg: Message) -> None:
        """Queue the JSON answer to ``msg`` (one message, handed up under its own id).

        Raises:
            ProtocolError: a request's answer is malformed JSON.
        """
        self._deliver(data, None, msg)

    def deliver_json(self, body: bytes, msg: Message | None) -> None:
        """Queue a JSON body: one message or a batch of them, one at a time.

        Raises:
            ProtocolError: malformed JSON.
        """
        stripped = body.lstrip()
        if stripped[:1] == b"[":
            try:
                items = decode_any(body)
            except msgspec.DecodeError as exc:
                raise ProtocolError(f"malformed JSON from {self._exchange.url}: {exc}") from None
            for item in items:
                self._deliver(encode(item), None, msg)
            return
        self._deliver(body, None, msg)

    def cancel(self, msg: Message) -> bool:
        """Close the stream of the request ``msg`` cancels. True when nothing needs POSTing."""
        rid = msg.facts.cancels
        with self._lock:
            awaited = self._inflight.get(rid)
        if awaited is None:
            return msg.modern_version is not None
        awaited.cancelled = True
        shutdown(awaited.resp)
        # modern: closing the stream is the cancellation; legacy: tell the server as well
        return awaited.msg.modern_version is not None

    def stop(self) -> None:
        """Stop every stream (from any thread): nothing is read or reopened any more."""
        with self._lock:
            if self._closed:
                return
            self._closed = True
            inflight = list(self._inflight.values())
            loose = list(self._loose)
            get_resp = self._get_resp
        self._closed_event.set()
        for awaited in inflight:
            awaited.cancelled = True
            shutdown(awaited.resp)
        for resp in loose:
            shutdown(resp)
        shutdown(get_resp)

    def join(self, timeout: float) -> None:
        """After :meth:`stop`: wait (bounded) for the GET thread and the stream threads."""
        get_thread = self._get_thread
        if get_thread is not None and get_thread is not threading.current_thread():
            with self._lock:
                shutdown(self._get_resp)
            get_thread.join(1.0)
        if not self._threads.close(timeout):
            log.debug("stream threads for %s still running after close", self._exchange.url)

    def info(self) -> dict[str, Any]:
        """Whether the GET stream runs, and how many requests await their streams."""
        thread = self._get_thread
        return {"get_stream": thread is not None and thread.is_alive(), "inflight_streams": len(self._inflight)}

    # ------------------------------------------------------------- delivery

    def _fail(self, request_id: Any, error: MCPError) -> None:
        handler = self.failure_handler
        if handler is None:
            # no typed channel to the caller: answer with a JSON-RPC error so it does not hang
            log.warning("request %r to %s failed after send: %s", request_id, self._exchange.url, error)
            self._put(
                encode(
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
        self._poke()  # wake the reader so it sees the failed call at once

    def _deliver(self, data: bytes, awaited: _Awaited | None, msg: Message | None) -> bool:
        """Queue one incoming message. True when it is the response ``awaited``/``msg`` awaits."""
        if awaited is None and msg is not None:
            # the JSON answer to the request just sent, as servers write it (the id first,
            # then the result, one object): nothing to rewrite, so no decode here; the
            # dispatcher decodes it anyway (and reports it, should it still be malformed)
            rid = msg.id
            if (
                rid.__class__ is int
                and data.startswith(b'{"jsonrpc":"2.0","id":%d,"result":' % rid)
                and data.endswith(b"}")
            ):
                self._put(data)
                return True
        peek = peek_in(data)
        if peek is None:
            if msg is not None and msg.is_request and awaited is None:
                raise ProtocolError(
                    f"{self._exchange.url} answered {msg.method} with malformed JSON: {redact(data, limit=80)!r}"
                )
            self._put(data)  # the dispatcher reports it
            return False
        is_response = peek.method is None and peek.id is not UNSET
        answered = False
        if is_response:
            expected = awaited.wire_id if awaited is not None else (msg.id if msg is not None else None)
            original = awaited.msg.id if awaited is not None else expected
            if expected is not None and (peek.id == expected or peek.id is None):
                answered = True
                if peek.id != original:
                    data = with_id(data, original)
        self._put(data)
        return answered

    # ------------------------------------------------------------- response streams

    def _spawn_or_drop(self, resp: Any, target: Callable[..., None], *args: Any) -> None:
        """Read ``resp`` on a stream thread; closed meanwhile: drop it (ConnectionClosed)."""
        try:
            self._threads.spawn(target, *args)
        except ConnectionClosed:
            finish(resp, reusable=False)
            raise

    def _set_stream_timeout(self, resp: Any) -> None:
        # the dispatcher times the request; the stream itself may idle up to read_timeout
        try:
            sock = getattr(resp.connection, "sock", None)
            if sock is not None:
                sock.settimeout(self._options.read_timeout)
        except Exception:  # noqa: BLE001 - the POST's own read timeout stays
            pass

    def _loose_worker(self, resp: Any) -> None:
        """An SSE answer to a notification or response: deliver what comes, to its end."""
        with self._lock:
            if self._closed:
                shutdown(resp)
            self._loose.add(resp)
        try:
            self._read_get(resp, SSEParser(self._options.max_message_size))
        except Exception:  # noqa: BLE001
            log.exception("stream reader for %s failed", self._exchange.url)
        finally:
            with self._lock:
                self._loose.discard(resp)

    def _stream_worker(self, awaited: _Awaited) -> None:
        try:
            self._follow(awaited)
        except Exception:  # noqa: BLE001 - never let a stream thread die silently
            log.exception("stream reader for %s failed", self._exchange.url)
        finally:
            with self._lock:
                if self._inflight.get(awaited.msg.id) is awaited:
                    del self._inflight[awaited.msg.id]

    def _follow(self, awaited: _Awaited) -> None:
        """Read ``awaited``'s response stream to its answer, resuming / re-issuing as needed."""
        parser = SSEParser(self._options.max_message_size)
        resp = awaited.resp
        resumes = 0
        quiet = 0
        while True:
            error = self._read_stream(resp, parser, awaited) if resp is not _NO_STREAM else None
            if awaited.done or awaited.cancelled or self._closed:
                return
            if awaited.oversize is not None:
                self._fail(awaited.msg.id, awaited.oversize)
                return
            msg = awaited.msg
            if msg.method == "subscriptions/listen" and msg.modern_version:
                # a listen stream is meant to stay open: reopen it under the same id (its
                # notifications name that id), backing off while it delivers nothing
                quiet = 0 if awaited.delivered else quiet + 1
                awaited.delivered = 0
                delay = 1.0 if quiet == 0 else min(30.0, 2.0**quiet)
                log.info("listen stream %r ended (%s): reopening in %g s", msg.id, error, delay)
                if self._closed_event.wait(delay) or awaited.cancelled:
                    return
                resp = self._reissue(awaited, report=False)
                if resp is None:
                    if awaited.done:
                        return
                    resp = _NO_STREAM
                parser = SSEParser(self._options.max_message_size)
                continue
            if msg.modern_version and not msg.facts.safe_to_resend:
                # the server may already be acting on it: re-issuing could run a tool
                # twice. Fail it as possibly sent; the client's retry policy re-sends it
                # (with a new id) only when the tool is read-only, idempotent or opted in.
                self._fail(
                    msg.id,
                    NetworkError(
                        f"{self._exchange.url} broke the stream of {msg.method} before answering: {error}", sent=True
                    ),
                )
                return
            if msg.modern_version:
                if awaited.reissues >= _REISSUE_ATTEMPTS:
                    closed = ConnectionClosed(f"{self._exchange.url} closed the stream before answering")
                    self._fail(msg.id, error or closed)
                    return
                awaited.reissues += 1
                awaited.wire_id = f"mcpsync-reissue-{next(self._ids)}"
                log.info("stream for %r broke (%s): re-issuing as %s", msg.id, error, awaited.wire_id)
                resp = self._reissue(awaited)
                if resp is None:
                    return
                parser = SSEParser(self._options.max_message_size)
                continue
            # legacy: resume with Last-Event-ID if the server gave event ids
            if parser.last_event_id is None or self._session_id() is None or resumes >= _RESUME_ATTEMPTS:
                closed = ConnectionClosed(f"{self._exchange.url} closed the stream before answering")
                self._fail(msg.id, error or closed)
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
            awaited.resp = resp
            if awaited.cancelled or self._closed:
                shutdown(resp)
                finish(resp, reusable=False)
                return

    def _read_stream(self, resp: Any, parser: SSEParser, awaited: _Awaited | None) -> MCPError | None:
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
                    if isinstance(ev, Oversized):
                        self._put(ev)
                        if awaited is not None:
                            awaited.oversize = ev.error
                        continue
                    if ev.event != "message" or not ev.data.strip():
                        continue
                    if awaited is not None:
                        awaited.delivered += 1
                    if self._deliver(ev.data, awaited, None):
                        answered = True
                if answered and awaited is not None:
                    awaited.done = True
                    break
        except Exception as exc:  # noqa: BLE001 - translated below
            if not (awaited is not None and (awaited.cancelled or awaited.done)) and not self._closed:
                error = translate(exc, self._exchange.url, fatal=False)
        if awaited is not None and awaited.done and not eof:
            eof = self._drain(resp)
        finish(resp, reusable=eof and error is None)
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

    def _reissue(self, awaited: _Awaited, *, report: bool = True) -> Any:
        """POST ``awaited``'s request again under its wire id; None when no stream came of it
        (the answer came as JSON, or it failed: reported unless ``report`` is False)."""
        msg = awaited.msg
        body = msg.body if awaited.wire_id == msg.id else reissued(msg.body, msg.id, awaited.wire_id)
        headers = self._headers(awaited.msg, "POST")
        try:
            resp = self._exchange.request("POST", headers, body, self._options.read_timeout)
        except MCPError as exc:
            if report:
                self._fail(awaited.msg.id, exc)
            return None
        ctype = media_type(resp.headers.get("content-type"))
        if ctype == SSE and 200 <= resp.status < 300:
            awaited.resp = resp
            if awaited.cancelled or self._closed:
                shutdown(resp)
            return resp
        try:
            body = read_body(resp, self._options.max_message_size, self._exchange.url)
        except MCPError as exc:
            if report:
                self._fail(awaited.msg.id, exc)
            return None
        resp.release_conn()
        peek = peek_in(body)
        if peek is not None and (200 <= resp.status < 300 or peek.id is not UNSET):
            if self._deliver(body, awaited, None):
                awaited.done = True
                return None
        if report:
            session = awaited.msg.modern_version is None and self._session_id() is not None
            self._fail(
                awaited.msg.id,
                status_error(
                    resp.status, self._exchange.url, body, resp.headers, secrets=sent_values(resp), session=session
                ),
            )
        return None

    def _resume(self, last_event_id: str) -> Any:
        """GET with ``Last-Event-ID``; the response, or None when the server refuses."""
        headers = self._headers(None, "GET", accept=SSE)
        headers["Last-Event-ID"] = last_event_id
        resp = self._exchange.request("GET", headers, None, self._options.read_timeout)
        if 200 <= resp.status < 300 and media_type(resp.headers.get("content-type")) == SSE:
            return resp
        body = read_body(resp, 65536, self._exchange.url)
        resp.release_conn()
        raise status_error(resp.status, self._exchange.url, body, resp.headers, secrets=sent_values(resp))

    # ------------------------------------------------------------- standalone GET stream

    def start_get_stream(self, wait: float = 0.0) -> None:
        """(Re)start the standalone GET stream; wait up to ``wait`` s for the server's answer,
        so that server messages sent right after the handshake have a stream to go to."""
        if not self.get_stream_enabled or self._closed:
            return
        with self._lock:
            self._get_generation += 1
            generation = self._get_generation
            old = self._get_resp
        shutdown(old)
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
            log.exception("GET stream for %s failed", self._exchange.url)
        finally:
            answered.set()

    def _get_loop_inner(self, generation: int, answered: threading.Event) -> None:
        parser = SSEParser(self._options.max_message_size)
        failures = 0
        streamed = False
        while not self._closed and generation == self._get_generation:
            headers = self._headers(None, "GET", accept=SSE)
            if self._get_last_id is not None:
                headers["Last-Event-ID"] = self._get_last_id
            delivered = False
            try:
                resp = self._exchange.request("GET", headers, None, self.get_stream_idle, control=True)
            except MCPError as exc:
                log.debug("GET stream at %s: %s", self._exchange.url, exc)
                resp = None
            answered.set()
            if resp is not None:
                status = resp.status
                if status == 405:
                    log.debug("%s offers no GET stream", self._exchange.url)
                    finish(resp, reusable=False)
                    return
                lost = self._session_id() if status in (400, 404) else None
                if lost is not None:
                    finish(resp, reusable=False)
                    if not streamed:
                        log.debug("%s refuses the GET stream (HTTP %d)", self._exchange.url, status)
                        return
                    # it worked before, so the session is gone: tell the session layer,
                    # whose new session (notifications/initialized) restarts the stream
                    # (the next POST would find out too)
                    log.info("session %s at %s expired (GET stream: HTTP %d)", lost, self._exchange.url, status)
                    try:
                        self._session_lost(lost)
                    except Exception:  # pragma: no cover - the hook only schedules work
                        log.exception("on_session_lost hook of %s raised", self._exchange.url)
                    return
                elif 200 <= status < 300 and media_type(resp.headers.get("content-type")) == SSE:
                    streamed = True
                    with self._lock:
                        if generation != self._get_generation or self._closed:
                            shutdown(resp)
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
                    finish(resp, reusable=False)
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
                    if isinstance(ev, Oversized):
                        self._put(ev)
                        continue
                    if ev.event != "message" or not ev.data.strip():
                        continue
                    delivered = True
                    self._deliver(ev.data, None, None)
        except Exception as exc:  # noqa: BLE001
            error = translate(exc, self._exchange.url, fatal=False)
        finish(resp, reusable=False)
        return delivered, error
