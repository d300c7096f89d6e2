"""The JSON-RPC engine: deliberately not MCP-aware.

One :class:`Dispatcher` per connection. It correlates request ids with waiting callers,
enforces per-request timeouts (telling the server with ``notifications/cancelled``),
routes progress notifications to the caller's callback, hands other notifications and
server→client requests to a :class:`~mcpsync._worker.Worker` (never run on the reading
thread), and fails every pending call at once when the connection dies.

Reading uses a leader/follower scheme so that a lone caller never pays a thread hop:
the caller that finds nobody reading becomes the *leader* and reads the transport
itself until its own response arrives, delivering other callers' responses on the way;
when it is done it wakes one waiting *follower* to take over. A background thread
leads only when no caller has been active for a short grace period, so notifications
that arrive while the connection is idle are still read promptly. On a transport that
can wait for input without reading it (``wait_readable``, e.g. stdio) it waits there
and leads only while there is something to read; a call after an idle gap pauses that
watch (the transport's ``idle_switch``) until nobody leads, so the answer it reads
wakes no other thread.

Example:
    >>> d = Dispatcher(transport, name="demo")          # doctest: +SKIP
    >>> d.start()                                       # doctest: +SKIP
    >>> raw = d.request("tools/list", {}, timeout=5)    # doctest: +SKIP
"""

from __future__ import annotations

import itertools
import logging
import threading
import time
from typing import Any, Callable, Mapping

import msgspec

from ._breaker import count_value
from ._channel import MessageFacts, NotificationHandler, ProgressCallback, RequestHandler, message_facts
from ._errors import (
    INTERNAL_ERROR,
    INVALID_REQUEST,
    METHOD_NOT_FOUND,
    AuthError,
    Cancelled,
    ConnectionClosed,
    MCPError,
    MessageTooLarge,
    NetworkError,
    ProtocolError,
    RemoteError,
    RequestTimeout,
    error_from_code,
)
from ._messages import (
    ANSWER_DECODERS, Envelope, Request, decode_envelope_unchecked, decode_params, encode, envelope_error, error_reply,
    oversized_id, response_id,
)
from ._speedups import IdleGate
from ._worker import Worker
from .transports._base import Transport

__all__ = ["Dispatcher"]

log = logging.getLogger("mcpsync.dispatcher")

_monotonic = time.monotonic
_any = msgspec.json.Decoder()

GRACE = 0.02  #: a caller inactive for this long lets the background thread take over reading
POLL = 0.5  #: the longest single wait on the transport, so deadlines and close are noticed
_ANSWER_START = b'{"jsonrpc":"2.0","id":'  # how servers write an answer: worth the one-pass decode (22 bytes)


class _Pending:
    """A request waiting for its answer: ``_Pending()``, its fields set one by one (an
    ``__init__`` costs ~1,700 instructions; ``object.__new__(_Pending)`` ~300 more than this)."""

    id: int
    method: str
    timeout: float
    deadline: float
    cap: float
    progress: ProgressCallback | None
    lock: threading.Lock | None = None  # made when the caller must wait as a follower
    waiting = False
    signaled = False
    done = False
    result: Any = None
    error: BaseException | None = None


class Dispatcher:
    """JSON-RPC over one :class:`Transport`, safe to share between threads.

    Args:
        transport: a connected transport.
        name: the server's name, for logs and errors.
        worker: where handlers run (one is created if not given).
        request_timeout: default seconds per request.
        progress_cap: hard cap (seconds) for a request whose timer progress resets
            (default ten times the request timeout).
        code_table: JSON-RPC code → exception class (default ``ERROR_CODE_TABLE``).
    """

    def __init__(
        self, transport: Transport, *, name: str = "server", worker: Worker | None = None, request_timeout: float = 30.0,
        progress_cap: float | None = None, code_table: Mapping[int, type[RemoteError]] | None = None,
    ) -> None:
        self.transport = transport
        #: the leader's read, without the transport's reader lock where it can (leaders are alone)
        self._receive: Callable[[float | None], bytes | None] = transport.receive_alone
        self._transmit = transport.send
        #: whether each message's facts are worth computing: the transport reads them
        self._facts = transport.needs_facts
        self.name = name
        self._own_worker = worker is None
        self.worker = worker if worker is not None else Worker(f"mcpsync-{name}")
        self.request_timeout = request_timeout
        self.progress_cap = progress_cap
        self.code_table = code_table
        self._mu = threading.Lock()
        self._pending: dict[Any, _Pending] = {}
        self._waiters: list[_Pending] = []
        # the right to read, popped to lead and put back to let go (atomic under the GIL: no lock)
        self._baton = [True]
        # the last activity, and wait_readable's watch, turned off by a caller after an idle
        # gap (see request, _let_go): each end of a call is one C call
        self._gate = IdleGate(transport.idle_switch, GRACE, _monotonic)
        self._ids = itertools.count(1)
        self._dead: BaseException | None = None
        self._closed = False
        self._up = [True]  # emptied when _dead or _closed is set: a connection's alive() (one C call)
        self._stop = threading.Event()
        self._halt = threading.Lock()  # released once at stop: the background thread's cheap timed wait
        self._halt.acquire()
        self._bg: threading.Thread | None = None
        self._on_notification: NotificationHandler | None = None
        self._on_request: RequestHandler | None = None
        self._on_close: list[Callable[[BaseException], None]] = []
        self._sent, self._received, self._dropped = itertools.count(), itertools.count(), itertools.count()  # (stats)
        transport.set_failure_handler(self._fail_request)  # (exchanges that fail after send: HTTP)

    @property
    def stats(self) -> dict[str, int]:
        """Messages sent, received and dropped (unknown ids, invalid, oversized) so far
        (counted with ``next()`` on a count: atomic under the GIL, cheaper than ``+=``)."""
        c = count_value
        return {"sent": c(self._sent), "received": c(self._received), "dropped": c(self._dropped)}

    # ------------------------------------------------------------------ lifecycle

    def start(self) -> "Dispatcher":
        """Start the background reader (idempotent)."""
        with self._mu:
            if self._bg is None and not self._closed:
                self._bg = threading.Thread(target=self._background, name=f"mcpsync-reader-{self.name}", daemon=True)
                self._bg.start()
        return self

    def set_handlers(self, on_notification: NotificationHandler | None = None, on_request: RequestHandler | None = None) -> None:
        self._on_notification, self._on_request = on_notification, on_request

    def add_close_callback(self, fn: Callable[[BaseException], None]) -> None:
        """``fn(reason)`` runs (on the worker) once when the connection dies or is closed."""
        self._on_close.append(fn)

    def alive(self) -> bool:
        return self._dead is None and not self._closed and self.transport.alive()

    def close(self) -> None:
        """Fail pending calls, close the transport, stop the threads. Idempotent."""
        with self._mu:
            if self._closed:
                return
            self._closed = True
            self._up.clear()
            halt = self._dead is None  # else _mark_dead released it
        self._stop.set()
        if halt:
            self._halt.release()
        self._fail_all(ConnectionClosed(f"connection to {self.name} was closed by the client"))
        try:
            self.transport.close()
        finally:
            bg = self._bg
            if bg is not None and bg is not threading.current_thread():
                bg.join(2.0)
            if self._own_worker:
                self.worker.close()

    # ------------------------------------------------------------------ sending

    def _send(self, data: bytes, timeout: float | None = None, facts: MessageFacts | None = None) -> None:
        try:
            self._transmit(data, timeout, facts)
        except NetworkError as exc:
            if isinstance(exc, ConnectionClosed) and not getattr(exc, "renewable", False):  # a lost session: the link lives
                self._mark_dead(exc)
            raise
        next(self._sent)

    def notify(self, method: str, params: Mapping[str, Any] | None = None, timeout: float | None = None) -> None:
        """Send a notification (no answer expected)."""
        self._check_usable()
        msg: dict[str, Any] = {"jsonrpc": "2.0", "method": method}
        if params is not None:
            msg["params"] = params
        facts = message_facts(None, method, params, _any.decode) if self._facts else None
        self._send(encode(msg), timeout, facts)

    def request(  # no keyword-only parameters: their defaults cost a dict lookup each, every call
        self, method: str, params: Mapping[str, Any] | None = None, timeout: float | None = None,
        progress: ProgressCallback | None = None, cancel_event: threading.Event | None = None,
        headers: Mapping[str, str] | None = None,
    ) -> Any:  # msgspec.Raw, or a typed result (ANSWER_DECODERS)
        """Send a request and wait for its result: the undecoded ``result`` member, or for a
        method in ``ANSWER_DECODERS`` usually its typed result (decoded with the answer).

        ``timeout``: seconds (default ``request_timeout``; progress notifications reset the
        timer, up to the progress cap); ``progress(progress, total, message)`` runs on the
        worker; ``headers``: extra transport headers (in the message's
        :class:`~mcpsync._channel.MessageFacts`), e.g. ``Mcp-Param-*``.

        Raises:
            RemoteError: the server answered with an error (its typed subclass).
            RequestTimeout: no answer in time; ``notifications/cancelled`` was sent.
            ConnectionClosed: the connection died before the answer came.
            MessageTooLarge: the answer exceeded the transport's size limit.
        """
        if self._closed or self._dead is not None:
            self._check_usable()
        if timeout is None:
            timeout = self.request_timeout
        rid = next(self._ids)
        if progress is not None:
            p = dict(params or {})
            given = p.get("_meta")
            meta = dict((_any.decode(given) if type(given) is msgspec.Raw else given) or {})
            meta["progressToken"] = rid
            p["_meta"] = meta
            params = p
        data = encode(Request("2.0", rid, method, params))
        if progress is None:
            cap = timeout  # no progress token: nothing resets the timer
        else:
            cap = self.progress_cap if self.progress_cap is not None else timeout * 10
            if cap < timeout:
                cap = timeout
        slot = _Pending()
        slot.id = rid
        slot.method = method
        slot.timeout = timeout
        now = _monotonic()
        slot.deadline = now + timeout
        slot.cap = now + cap
        slot.progress = progress
        pending = self._pending
        # No lock to add the slot: _mark_dead and close set their flag before _fail_all
        # takes its list of slots, and the flags are read here after the slot is in. So
        # either _fail_all fails this slot, or this caller sees the flag and withdraws it.
        pending[rid] = slot
        if self._dead is not None or self._closed:
            pending.pop(rid, None)
            self._check_usable()
        self._gate.arrive(now)  # after an idle gap, the answer must not wake the background thread
        try:
            self._transmit(data, timeout, message_facts(rid, method, params, _any.decode, headers) if self._facts else None)
        except BaseException as exc:
            pending.pop(rid, None)
            if self._gate.paused and self._claim():  # nobody leads now: the idle watch back on
                self._let_go()
            if isinstance(exc, ConnectionClosed) and not getattr(exc, "renewable", False):  # a lost session: the link lives
                self._mark_dead(exc)
            raise
        next(self._sent)
        if cancel_event is None and self._baton:
            # Fast path: nobody reads, so this caller takes the baton and reads its own answer
            try:
                self._baton.pop()
            except IndexError:  # taken meanwhile
                return self._wait(slot, cancel_event)
            result = self._lead(slot)
            if result is not None:
                return result
            if slot.done and slot.error is None:
                return slot.result
        return self._wait(slot, cancel_event)

    # ------------------------------------------------------------------ waiting

    def _wait(self, slot: _Pending, cancel_event: threading.Event | None) -> Any:
        mu = self._mu
        waiters = self._waiters
        while True:
            with mu:
                if slot.done:
                    break
                waiters.append(slot)  # in the list before the try for the baton: see _let_go
                lead = self._claim()
                if lead:
                    waiters.pop()  # (the last one in: nobody else adds while mu is held)
                else:
                    if slot.lock is None:
                        slot.lock = threading.Lock()
                        slot.lock.acquire()
                    slot.waiting = True
            if lead:
                result = self._lead(slot)
                if result is not None:
                    return result  # handed over: the slot is out of pending, its fields unset
                if slot.done:
                    break
            else:
                remaining = slot.deadline - _monotonic()
                if cancel_event is not None:
                    remaining = min(remaining, 0.05)
                lock = slot.lock
                assert lock is not None
                got = lock.acquire(timeout=max(remaining, 0.0)) if remaining > 0 else False
                with mu:
                    slot.waiting = False
                    try:
                        self._waiters.remove(slot)
                    except ValueError:
                        pass
                    if not got and slot.signaled:
                        lock.acquire()  # consume a wake that raced the timeout
                    slot.signaled = False
                if slot.done:
                    break
            if cancel_event is not None and cancel_event.is_set():
                if not self._abandon(slot, "cancelled by the caller"):
                    break
                raise Cancelled(f"{slot.method} was cancelled")
            if _monotonic() >= slot.deadline:
                if not self._abandon(slot, "request timed out"):
                    break
                raise RequestTimeout(f"{slot.method} got no answer from {self.name} within {slot.timeout:g} s",
                                     method=slot.method, timeout=slot.timeout)
        if slot.error is not None:
            raise slot.error
        return slot.result

    def _abandon(self, slot: _Pending, reason: str) -> bool:
        """Stop waiting for ``slot`` and tell the server. False if it was answered meanwhile."""
        with self._mu:
            if slot.done:
                return False
            self._pending.pop(slot.id, None)  # a late answer now counts as an unknown id
        if self._dead is None and not self._closed:
            self._send_cancelled(slot.id, reason)
        return True

    def _send_cancelled(self, request_id: Any, reason: str) -> None:
        try:
            self.notify("notifications/cancelled", {"requestId": request_id, "reason": reason}, 1.0)
        except MCPError:
            pass

    def cancel(self, request_id: int, reason: str = "cancelled by the client") -> bool:
        """Abandon a pending request: its caller gets :class:`Cancelled`; the server is told."""
        with self._mu:
            slot = self._pending.pop(request_id, None)
            if slot is None:
                return False
            self._fail(slot, Cancelled(f"{slot.method} was cancelled: {reason}"))
        self._send_cancelled(request_id, reason)
        return True

    def _fail_request(self, request_id: Any, exc: BaseException) -> None:
        """Fail one pending request (its exchange broke) without killing the connection."""
        with self._mu:
            slot = self._pending.pop(request_id, None)
            if slot is not None:
                self._fail(slot, exc)

    def _fail(self, slot: _Pending, exc: BaseException) -> None:  # under self._mu: the call ends with exc
        slot.error = exc
        slot.done = True
        self._wake(slot)

    def _wake(self, slot: _Pending) -> None:  # under self._mu
        if slot.waiting and not slot.signaled:
            slot.signaled = True
            slot.lock.release()  # type: ignore[union-attr]  # waiting implies a lock

    def _claim(self) -> bool:
        try:  # take the baton (start leading) if nobody has it
            self._baton.pop()
            return True
        except IndexError:
            return False

    def _let_go(self) -> None:
        """The leader gives the baton back (not under mu) and wakes one waiting follower to
        take it. A follower joins the waiters, then tries for the baton; this puts the baton
        back, then looks for waiters: one of the two sees the other, so no follower is left
        waiting while nobody leads. The idle watch goes back on (IdleGate.leave): a caller
        pauses it with no lock, then sets paused; this clears paused, then resumes: never
        paused with paused false (the caller that paused leads, or waits for a leader that
        lets go after)."""
        self._gate.leave(self._baton)
        if self._waiters:
            with self._mu:
                for w in self._waiters:
                    if not w.done and not w.signaled:
                        self._wake(w)
                        break

    def _lead(self, slot: _Pending) -> Any:
        """Read the transport until ``slot`` is answered, its deadline passes or the
        connection fails, delivering every other message on the way.

        Returns the result when the answer read is the slot's own success, handed over
        here without a wake (the common case, no lock section); otherwise None, with the
        outcome, if any, on the slot.
        """
        receive = self._receive
        rid = slot.id
        whole = ANSWER_DECODERS.get(slot.method)
        received = self._received
        pending = self._pending
        handed_over = False
        try:
            while not slot.done:
                remaining = slot.deadline - _monotonic()
                if remaining <= 0:
                    return None
                try:
                    data = receive(remaining if remaining < POLL else POLL)
                except MessageTooLarge as exc:
                    self._oversized(exc)
                    continue
                if data is None:
                    continue
                next(received)  # _handle, inline: this runs on every call
                answer = None
                if whole is not None and data[:22] == _ANSWER_START:  # a slice: cheaper than startswith
                    try:  # the usual answer in one decode, its result typed (ANSWER_DECODERS)
                        answer = whole(data)
                    except (msgspec.ValidationError, msgspec.DecodeError):
                        pass  # the general path below decodes it again, and reports it
                if answer is not None and answer.id == rid:
                    result = answer.result
                else:
                    try:
                        env = decode_envelope_unchecked(data)
                    except (msgspec.ValidationError, msgspec.DecodeError) as exc:
                        self._drop_invalid(data, exc)
                        continue
                    if env.id != rid or env.method is not None or env.error is not None or not len(env.result):
                        self._deliver(env, data)
                        continue
                    result = env.result
                # our own answer: out of pending (atomic: nobody else sees the slot), then the
                # baton back, with no lock
                if pending.pop(rid, None) is slot:
                    handed_over = True
                    if self._waiters:
                        self._let_go()
                    else:  # _let_go with no follower to wake, inline
                        self._gate.leave(self._baton)
                    return result
                # cancelled or failed meanwhile: its outcome is already on the slot
            return None
        except MCPError as exc:  # the transport's own verdict: keep its type for the callers
            self._mark_dead(exc)
            return None
        except Exception as exc:  # a transport bug must not leave callers waiting
            log.exception("reading from %s failed", self.name)
            self._mark_dead(ConnectionClosed(f"reading from {self.name} failed: {exc!r}"))
            return None
        finally:
            if not handed_over:
                self._let_go()

    def _halted(self, wait: float) -> bool:
        """Wait up to ``wait`` s (a timed acquire: far cheaper than ``Event.wait``); True once stopped."""
        return self._halt.acquire(True, wait) or self._stop.is_set()

    def _background(self) -> None:
        receive = self._receive
        readable = self.transport.wait_readable
        while not self._stop.is_set():
            try:  # nothing held while nothing comes: a caller that comes leads itself
                if not readable(POLL):
                    continue
            except Exception:  # the reader below meets the same failure and reports it
                pass
            if self._dead is not None or self._closed:
                return
            started = self._gate.last
            if not self._baton or _monotonic() - started < GRACE or not self._claim():  # a caller reads
                if self._halted(GRACE):
                    return
                continue
            try:
                while not self._stop.is_set():
                    try:
                        data = receive(POLL)
                    except MessageTooLarge as exc:
                        self._oversized(exc)
                        continue
                    if data is not None:
                        self._handle(data)
                    if self._gate.last != started or self._waiters or readable is not None:
                        break
            except MCPError as exc:
                self._mark_dead(exc)
            except Exception as exc:
                log.exception("reading from %s failed", self.name)
                self._mark_dead(ConnectionClosed(f"reading from {self.name} failed: {exc!r}"))
            finally:
                self._let_go()

    # ------------------------------------------------------------------ incoming

    def _handle(self, data: bytes) -> None:
        """Count one message read and deliver it; an invalid one is logged and dropped."""
        next(self._received)
        try:
            env = decode_envelope_unchecked(data)
        except (msgspec.ValidationError, msgspec.DecodeError) as exc:
            self._drop_invalid(data, exc)
            return
        self._deliver(env, data)

    def _drop_invalid(self, data: bytes, exc: msgspec.ValidationError | msgspec.DecodeError) -> None:
        """Count and log a message that is not a valid JSON-RPC envelope. One shaped like an
        answer to a pending request (``"jsonrpc": "1.0"`` or none, or bytes that start like a
        response but do not parse) fails that request with :class:`ProtocolError` at once."""
        next(self._dropped)
        error = envelope_error(exc)
        rid = response_id(data)
        if isinstance(rid, str) and rid.isdigit():
            rid = int(rid)
        slot = None
        if rid is not None:
            with self._mu:
                slot = self._pending.pop(rid, None)
                if slot is not None:
                    self._fail(slot, ProtocolError(
                        f"{self.name} answered {slot.method} with an invalid JSON-RPC message: {error}",
                        code=getattr(error, "code", INVALID_REQUEST), method=slot.method))
        if slot is not None:
            log.warning("%s sent an invalid answer to %s: %s: %.200r", self.name, slot.method, error, data)
        else:
            log.warning("%s sent an invalid message (dropped): %s: %.200r", self.name, error, data)

    def _deliver(self, env: Envelope, data: bytes) -> None:
        if env.method is None:
            self._handle_response(env, data)
        elif env.id is None:
            self._handle_notification(env)
        else:
            self.worker.submit(self._serve_request, env)

    def _handle_response(self, env: Envelope, data: bytes) -> None:
        rid = env.id
        if isinstance(rid, str) and rid.isdigit():
            rid = int(rid)
        with self._mu:
            slot = self._pending.pop(rid, None) if rid is not None else None
            if slot is None:
                next(self._dropped)
            else:
                err = env.error
                if err is not None:
                    slot.error = error_from_code(err.code, err.message, err.data, method=slot.method, table=self.code_table)
                elif len(env.result) == 0:
                    slot.error = ProtocolError(f"response to {slot.method} has neither result nor error", code=-32600)
                else:
                    slot.result = env.result
                slot.done = True
                self._wake(slot)
                return
        if env.error is not None and rid is None:
            log.warning("%s reported an error: %s (%s)", self.name, env.error.message, env.error.code)
        else:
            log.warning("%s answered an unknown request id %r (dropped)", self.name, env.id)

    def _handle_notification(self, env: Envelope) -> None:
        method = env.method
        assert method is not None
        params = decode_params(env)
        if method == "notifications/progress" and isinstance(params, dict):
            token = params.get("progressToken")
            with self._mu:
                slot = self._pending.get(token)
                if slot is not None:
                    slot.deadline = min(_monotonic() + slot.timeout, slot.cap)
            if slot is not None and slot.progress is not None:
                self.worker.serial(slot.progress, params.get("progress", 0), params.get("total"), params.get("message"))
                return
        handler = self._on_notification
        if handler is not None:
            self.worker.serial(handler, method, params)

    def _serve_request(self, env: Envelope) -> None:
        handler = self._on_request
        method = env.method or ""
        try:
            if handler is None:
                raise RemoteError(f"method not supported by this client: {method}", code=METHOD_NOT_FOUND)
            result = handler(method, decode_params(env))
            reply: dict[str, Any] = {"jsonrpc": "2.0", "id": env.id, "result": result if result is not None else {}}
        except RemoteError as exc:
            reply = error_reply(env.id, exc.code, exc.message, exc.data)
        except Exception as exc:
            log.exception("handler for %s raised", method)
            reply = error_reply(env.id, INTERNAL_ERROR, f"client handler failed: {exc}")
        if self._dead is None and not self._closed:
            try:
                self._send(encode(reply), self.request_timeout)
            except MCPError as exc:
                log.warning("could not answer %s request from %s: %s", method, self.name, exc)

    def _oversized(self, exc: MessageTooLarge) -> None:
        rid = oversized_id(getattr(exc, "head", b"") or b"", getattr(exc, "tail", b"") or b"")
        with self._mu:
            slot = self._pending.pop(rid, None) if rid is not None else None
            if slot is not None:
                self._fail(slot, MessageTooLarge(f"the answer to {slot.method} from {self.name} was too large: {exc}"))
                return
        next(self._dropped)
        log.warning("%s sent an oversized message (dropped): %s", self.name, exc)

    # ------------------------------------------------------------------ failure

    def _check_usable(self) -> None:
        # nothing was sent: a retry on another connection cannot duplicate anything
        if self._closed:
            raise ConnectionClosed(f"connection to {self.name} is closed", sent=False)
        if self._dead is not None:
            raise ConnectionClosed(f"connection to {self.name} is dead: {self._dead}", sent=False)

    def _mark_dead(self, exc: BaseException) -> None:
        with self._mu:
            if self._dead is not None:
                return
            self._dead = exc
            self._up.clear()
            if not self._closed:
                self._halt.release()  # (close() releases it otherwise)
        self._stop.set()
        if isinstance(exc, (ConnectionClosed, AuthError)):
            self._fail_all(exc)
        else:
            self._fail_all(ConnectionClosed(f"connection to {self.name} failed: {exc}"))

    def _fail_all(self, exc: MCPError) -> None:
        cls = type(exc) if isinstance(exc, AuthError) else ConnectionClosed
        with self._mu:
            slots = list(self._pending.values())
            self._pending.clear()
            for slot in slots:
                self._fail(slot, cls(str(exc) or f"connection to {self.name} closed", method=slot.method))
            callbacks = list(self._on_close)
            self._on_close.clear()
        for cb in callbacks:
            self.worker.serial(cb, exc)

