"""The receiving half of the Streamable HTTP transport: response streams and the GET stream.

:class:`ResponseStreams` is the base of
:class:`~mcpsync.transports.streamable_http.StreamableHTTPTransport`; it holds what
happens after a POST was answered:

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
  backoff; 405 means not offered; a 404 after it had worked calls
  ``on_session_lost`` (renewing the session is the session layer's work).

Also the message peeking the transport needs (id, method, error code), without
decoding whole messages.
"""

from __future__ import annotations

import itertools
import logging
import queue
import threading
from typing import Any, Callable, Union

import msgspec
from msgspec import UNSET, Raw, Struct, UnsetType

from .._channel import MessageFacts, message_facts
from .._errors import ConnectionClosed, MCPError, MessageTooLarge, NetworkError, ProtocolError, RequestTimeout
from ._http_errors import read_body, redact, status_error, translate
from ._http_exchange import _SSE, HTTPExchange, _finish, _secrets, _shutdown
from ._http_options import media_type
from ._http_pools import StreamThreads
from ._sse import _Oversized, SSEParser

__all__ = ["ResponseStreams"]

log = logging.getLogger("mcpsync.http")

_RESUME_ATTEMPTS = 5
_REISSUE_ATTEMPTS = 2
_DRAIN_WAIT = 1.0

#: put in the receive queue to wake a waiting receiver: the transport's state changed
_WAKE: Any = object()

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


def _reissued(body: bytes, old_id: Any, new_id: Any) -> bytes:
    """An outgoing request's bytes under ``new_id``: spliced when the body starts as the
    dispatcher encodes it (no decode on the way out), else rewritten."""
    prefix = b'{"jsonrpc":"2.0","id":' + _encoder.encode(old_id) + b","
    if body.startswith(prefix):
        return b'{"jsonrpc":"2.0","id":' + _encoder.encode(new_id) + b"," + body[len(prefix):]
    return _with_id(body, new_id)


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


# ----------------------------------------------------------------- response streams


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


class ResponseStreams(HTTPExchange):
    """Delivery, response streams and the GET stream (see the module's docstring)."""

    get_stream_enabled: bool
    get_stream_idle: float
    on_session_lost: Callable[[str], None] | None
    _lock: threading.Lock
    _queue: queue.SimpleQueue[Any]
    #: queue one received message (or an _Oversized) for ``receive``: the queue's own
    #: ``put``. A :data:`_WAKE` mark in the queue tells a waiting receiver to look at the
    #: state again (closed, switched to HTTP+SSE, a call failed through the handler)
    _put: Callable[[Any], None]
    _closed_event: threading.Event
    _session_id: str | None
    _ids: itertools.count[int]
    _inflight: dict[Any, _Exchange]
    _get_generation: int
    _get_resp: Any
    _get_thread: threading.Thread | None
    _get_last_id: str | None
    _failure_handler: Callable[[Any, MCPError], None] | None
    _poked: bool
    _threads: StreamThreads
    _loose: set[Any]

    def _headers(self, msg: _Message | None, method: str, *, accept: str | None = None) -> dict[str, str]:
        raise NotImplementedError

    # ------------------------------------------------------------- delivery

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
        self._poked = True  # wake the reader so it sees the failed call at once
        self._queue.put(_WAKE)

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
        if exch is None and msg is not None:
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
        body = exch.msg.body if exch.wire_id == exch.msg.id else _reissued(exch.msg.body, exch.msg.id, exch.wire_id)
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
