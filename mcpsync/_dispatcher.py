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
wakes no other thread. What the reader does with each message is :mod:`mcpsync._incoming`.

Ctrl-C never wedges a connection: every baton taken is given back on every exit, an
exception raised by a signal handler at any bytecode included (see :meth:`Dispatcher._lead`),
every wait is bounded, and a message the interrupted reader had in hand goes to the next.

Example:
    >>> d = Dispatcher(transport, name="demo")          # doctest: +SKIP
    >>> d.start()                                       # doctest: +SKIP
    >>> raw = d.request("tools/list", {}, timeout=5)    # doctest: +SKIP
"""

from __future__ import annotations

import functools
import itertools
import logging
import operator
import threading
import time
from typing import Any, Callable, Mapping

import msgspec

from ._breaker import count_value
from ._channel import MessageFacts, NotificationHandler, ProgressCallback, RequestHandler, message_facts
from ._errors import (
    AuthError, Cancelled, ConnectionClosed, MCPError, MessageTooLarge, NetworkError, RemoteError, RequestTimeout,
    may_have_reached_server, seconds,
)
from ._incoming import Incoming, Pending
from ._decoders import ANSWER_DECODERS
from ._messages import Request, decode_envelope_unchecked, encode
from ._speedups import IdleGate
from ._worker import Worker
from .transports._base import Transport

__all__ = ["Dispatcher"]

log = logging.getLogger("mcpsync.dispatcher")

_monotonic = time.monotonic
_any = msgspec.json.Decoder()

GRACE = 0.02  #: a caller inactive for this long lets the background thread take over reading
POLL = 0.5  #: the longest single wait on the transport, so deadlines and close are noticed


class Dispatcher(Incoming):
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
        #: or, where the transport has one, its list of the next message, and what fills it
        #: (see Transport.next_message): one attribute (see _on)
        self._reads: tuple[Callable[[float | None], bytes | None], list[bytes | None] | None, Callable[[float | None], bool]] = (
            transport.receive_alone, transport.next_message, transport.wait_first)
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
        self._pending: dict[Any, Pending] = {}
        self._waiters: list[Pending] = []
        # the right to read, popped to lead and put back to let go (atomic under the GIL: no lock)
        self._baton = [True]
        self._held: bytes | None = None  # the message the reader has in hand (see _lead)
        self._unread: list[bytes] = []  # messages read by a reader that a signal handler's exception cut short
        # the last activity, and wait_readable's watch, turned off by a caller after an idle
        # gap (see request, _lead): each end of a call is one C call
        self._gate = IdleGate(transport.idle_switch, GRACE, _monotonic)
        self._ids = itertools.count(1)
        self._dead: BaseException | None = None
        self._closed = False
        self._up = [True]  # emptied when _dead or _closed is set: a connection's alive() (one C call)
        self._stop = threading.Event()
        self._halt = threading.Lock()  # released once at stop: the background thread's cheap timed wait
        self._halt.acquire()
        self._bg: threading.Thread | None = None
        # (notification, request, notice) handlers: one attribute, as CPython 3.11 reads at most
        # 29 of an instance's attributes from its inline values (a 30th makes every read slower)
        self._on: tuple[NotificationHandler | None, RequestHandler | None, NotificationHandler | None] = (None, None, None)
        self._on_close: list[Callable[[BaseException], None]] = []
        self._sent, self._received, self._dropped = itertools.count(), itertools.count(), itertools.count()  # (stats)
        transport.set_failure_handler(self._fail_request)  # (exchanges that fail after send: HTTP)

    @property
    def stats(self) -> dict[str, int]:
        """Messages sent, received and dropped (unknown ids, invalid, oversized) so far, and
        requests waiting for their answer now
        (counted with ``next()`` on a count: atomic under the GIL, cheaper than ``+=``)."""
        c = count_value
        return {"sent": c(self._sent), "received": c(self._received), "dropped": c(self._dropped),
                "pending": len(self._pending)}

    # ------------------------------------------------------------------ lifecycle

    def start(self) -> "Dispatcher":
        """Start the background reader (idempotent)."""
        with self._mu:
            if self._bg is None and not self._closed:
                self._bg = threading.Thread(target=self._background, name=f"mcpsync-reader-{self.name}", daemon=True)
                self._bg.start()
        return self

    def set_handlers(
        self, on_notification: NotificationHandler | None = None, on_request: RequestHandler | None = None,
        on_notice: NotificationHandler | None = None,
    ) -> None:
        """``on_notification(method, params)`` and ``on_request(method, params)`` run on the
        worker (notifications in order on its bounded lane, see :mod:`mcpsync._worker`);
        ``on_notice(method, params)`` sees every notification as it is read, before the
        lane: for the owner's own bookkeeping (caches), quick, never user code."""
        self._on = (on_notification, on_request, on_notice)

    def add_close_callback(self, fn: Callable[[BaseException], None]) -> None:
        """``fn(reason)`` runs (on the worker) once when the connection dies or is closed."""
        self._on_close.append(fn)

    def alive(self) -> bool:
        return self._dead is None and not self._closed and self.transport.alive()

    def up_check(self) -> Callable[[], bool]:
        """A cheap ``alive()`` for a pool to ask on every call: one C call, no syscall,
        False once the connection died or was closed (its reader notices a dead peer)."""
        return functools.partial(operator.truth, self._up)

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
        if not self._up:  # (dead or closed)
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
        slot = Pending()
        slot.id = rid
        slot.method = method
        slot.timeout = timeout
        now = _monotonic()
        slot.deadline = now + timeout
        if progress is not None:  # (else no progress token: nothing resets the timer, Pending's defaults)
            cap = self.progress_cap if self.progress_cap is not None else timeout * 10
            slot.cap = now + (cap if cap > timeout else timeout)
            slot.progress = progress
        pending = self._pending
        # No lock to add the slot: _mark_dead and close set their flag before _fail_all
        # takes its list of slots, and the flags are read here after the slot is in. So
        # either _fail_all fails this slot, or this caller sees the flag and withdraws it.
        pending[rid] = slot
        if not self._up:  # (emptied with the flag, before _fail_all)
            pending.pop(rid, None)
            self._check_usable()
        self._gate.arrive(now)  # after an idle gap, the answer must not wake the background thread
        transmit = self._transmit  # (an attribute holding a method: read as one, see Session.request)
        try:
            transmit(data, timeout, message_facts(rid, method, params, _any.decode, headers) if self._facts else None)
        except BaseException as exc:
            pending.pop(rid, None)
            baton = self._baton
            if self._gate.paused and baton:  # nobody leads now: the idle watch back on
                try:
                    baton.pop()
                except IndexError:
                    pass
                else:
                    baton.append(True)
                    self._gate.leave()
            if isinstance(exc, ConnectionClosed) and not getattr(exc, "renewable", False):  # a lost session: the link lives
                self._mark_dead(exc)
            elif isinstance(exc, RequestTimeout) and may_have_reached_server(exc) and self._dead is None and not self._closed:
                # the answer was due with the send (an HTTP answer in JSON): the server may
                # be running the request; told as after any other timeout (see _abandon)
                self._send_cancelled(rid, "request timed out")
            raise
        next(self._sent)
        if cancel_event is None and self._baton:
            # Fast path: nobody reads, so this caller takes the baton and reads its own answer.
            # CPython runs signal handlers only at calls and backward jumps: an exception one
            # raises right after the pop is caught with the baton in hand and gives it back;
            # later ones meet the finally, which gives it back first.
            baton = self._baton
            try:
                baton.pop()
            except IndexError:  # taken meanwhile
                return self._wait(slot, cancel_event)
            except BaseException:
                baton.append(True)
                self._interrupted(slot)
                raise
            try:
                result = self._lead(slot)
            finally:
                baton.append(True)
                self._gate.leave()
                if self._waiters:
                    self._wake_follower()
            if result is not None:
                return result
            if slot.done and slot.error is None:
                return slot.result
        return self._wait(slot, cancel_event)

    # ------------------------------------------------------------------ waiting

    def _wait(self, slot: Pending, cancel_event: threading.Event | None) -> Any:
        mu = self._mu
        waiters = self._waiters
        baton = self._baton
        while True:
            lead = False
            try:
                with mu:
                    if slot.done:
                        break
                    waiters.append(slot)  # in the list before the try for the baton: see _wake_follower
                    try:  # (the baton as in request)
                        baton.pop()
                        lead = True
                    except IndexError:
                        if slot.lock is None:
                            slot.lock = threading.Lock()
                            slot.lock.acquire()
                        slot.waiting = True
                    except BaseException:
                        baton.append(True)
                        raise
                    if lead:
                        waiters.pop()  # (the last one in: nobody else adds while mu is held)
                if lead:
                    result = self._lead(slot)
                    if result is not None:
                        return result  # handed over: the slot is out of pending, its fields unset
                    if slot.done:
                        break
                else:
                    # each wait is bounded: a wake lost to a signal handler's exception costs one POLL
                    wait = min(slot.deadline - _monotonic(), POLL if cancel_event is None else 0.05)
                    lock = slot.lock
                    assert lock is not None
                    got = lock.acquire(True, wait) if wait > 0 else False
                    with mu:
                        slot.waiting = False
                        try:
                            waiters.remove(slot)
                        except ValueError:
                            pass
                        if not got and slot.signaled:
                            lock.acquire()  # consume a wake that raced the timeout
                        slot.signaled = False
                    if slot.done:
                        break
            except BaseException as exc:
                if not lead and not isinstance(exc, Exception):  # (a leader's _lead saw to it)
                    self._interrupted(slot)
                raise
            finally:
                if lead:
                    baton.append(True)
                    self._gate.leave()
                    if waiters:
                        self._wake_follower()
            if cancel_event is not None and cancel_event.is_set():
                if not self._abandon(slot, "cancelled by the caller"):
                    break
                raise Cancelled(f"{slot.method} was cancelled")
            if _monotonic() >= slot.deadline:
                if not self._abandon(slot, "request timed out"):
                    break
                raise RequestTimeout(f"{slot.method} got no answer from {self.name} within {seconds(slot.timeout)} s",
                                     method=slot.method, timeout=slot.timeout)
        if slot.error is not None:
            raise slot.error
        return slot.result

    def _interrupted(self, slot: Pending) -> None:
        """The caller left with an exception a signal handler raised (KeyboardInterrupt,
        SystemExit): its request is withdrawn (the server told), a wake meant for it goes
        to another follower."""
        with self._mu:
            answered = slot.done
            slot.done = True
            self._pending.pop(slot.id, None)
            slot.waiting = False
            try:
                self._waiters.remove(slot)
            except ValueError:
                pass
        if self._waiters and self._baton:
            self._wake_follower()
        if not answered and self._dead is None and not self._closed:
            self._send_cancelled(slot.id, "interrupted")

    def _abandon(self, slot: Pending, reason: str) -> bool:
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

    def _wake_follower(self) -> None:
        """Wake one waiting follower to take the baton (the leader let go). A follower joins
        the waiters, then tries for the baton; a leader puts the baton back, then looks for
        waiters: one of the two sees the other, so no follower is left waiting while nobody
        leads (and a follower waits at most POLL between looks, for a wake that a signal
        handler's exception kept from coming)."""
        with self._mu:
            for w in self._waiters:
                if not w.done and not w.signaled:
                    self._wake(w)
                    break

    def _lead(self, slot: Pending) -> Any:
        """Read the transport until ``slot`` is answered, its deadline passes or the
        connection fails, delivering every other message on the way. The caller holds the
        baton and gives it back.

        Returns the result when the answer read is the slot's own success, handed over
        here without a wake (the common case, no lock section); otherwise None, with the
        outcome, if any, on the slot.

        An exception a signal handler raises (KeyboardInterrupt) loses nothing read for
        others: CPython runs handlers only at calls and backward jumps, so a message read
        is kept in ``_held`` (no call between the read's return and the keeping) until it
        is handed on, where ``_held`` is cleared with no call between; the message held
        when such an exception comes goes back to ``_unread``, for the next reader. The
        caller's request is withdrawn (:meth:`_interrupted`).
        """
        receive, inbox, fill = self._reads
        rid = slot.id
        whole = ANSWER_DECODERS.get(slot.method)
        received = self._received
        pending = self._pending
        unread = self._unread
        data: bytes | None
        try:
            while not slot.done:
                if unread:
                    data = self._held = unread[0]
                    del unread[0]
                else:
                    remaining = slot.deadline - _monotonic()
                    if remaining <= 0.0:
                        return None
                    try:
                        if inbox is not None:
                            if not fill(remaining if remaining < POLL else POLL):  # (a signal after it: the message stays in)
                                continue
                            data = self._held = inbox[0]
                            inbox[0] = None  # taken, kept in _held: no call between
                            if data is None:  # (never: wait_first says True with one in)
                                continue
                        else:
                            data = receive(remaining if remaining < POLL else POLL)
                            if data is None:
                                continue
                            self._held = data
                    except MessageTooLarge as exc:
                        self._oversized(exc)
                        continue
                next(received)  # _handle, inline: this runs on every call
                # the usual answer in one decode, its result typed (ANSWER_DECODERS: None for
                # anything else, which the general path below decodes again, and reports)
                answer = None if whole is None else whole(data)
                if answer is not None and answer.id == rid:
                    result = answer.result
                else:
                    try:
                        env = decode_envelope_unchecked(data)
                    except (msgspec.ValidationError, msgspec.DecodeError) as exc:
                        self._held = None
                        self._drop_invalid(data, exc)
                        continue
                    if env.id != rid or env.method is not None or env.error is not None or not len(env.result):
                        self._deliver(env, data)  # (clears _held when it hands the message on)
                        continue
                    result = env.result
                # our own answer: out of pending (atomic: nobody else sees the slot)
                self._held = None
                if pending.pop(rid, None) is slot:
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
        except BaseException:  # a signal handler's: the message in hand goes to the next reader
            held = self._held
            if held is not None:
                unread[:0] = (held,)
                self._held = None
            self._interrupted(slot)
            raise

    def _halted(self, wait: float) -> bool:
        """Wait up to ``wait`` s (a timed acquire: far cheaper than ``Event.wait``); True once stopped."""
        return self._halt.acquire(True, wait) or self._stop.is_set()

    def _background(self) -> None:
        receive = self._reads[0]
        readable = self.transport.wait_readable  # (True at once where a transport cannot tell)
        baton, unread, gate = self._baton, self._unread, self._gate
        while not self._stop.is_set():
            if not unread:
                try:  # nothing held while nothing comes: a caller that comes leads itself
                    if not readable(POLL):
                        self._quiet()
                        continue
                except Exception:  # the reader below meets the same failure and reports it
                    pass
            if self._dead is not None or self._closed:
                return
            started = gate.last
            if not baton or _monotonic() - started < GRACE:  # a caller reads
                if self._halted(GRACE):
                    return
                continue
            try:
                baton.pop()
            except IndexError:
                continue
            data: bytes | None
            try:
                while not self._stop.is_set():
                    if unread:
                        data = unread[0]
                        del unread[0]
                    else:
                        try:
                            data = receive(POLL)
                        except MessageTooLarge as exc:
                            self._oversized(exc)
                            continue
                    if data is not None:
                        self._handle(data)
                    if gate.last != started or self._waiters or readable is not None:
                        break
            except MCPError as exc:
                self._mark_dead(exc)
            except Exception as exc:
                log.exception("reading from %s failed", self.name)
                self._mark_dead(ConnectionClosed(f"reading from {self.name} failed: {exc!r}"))
            finally:
                baton.append(True)  # (not gate.leave(): only callers' comings and goings restart the grace)
                if self._waiters:
                    self._wake_follower()

    def _quiet(self) -> None:
        """Nothing came for POLL s: an idle watch left off (a caller's pause whose end a
        signal handler's exception cut short) goes back on while nobody leads."""
        gate = self._gate
        switch = self.transport.idle_switch
        if switch is not None and self._baton and _monotonic() - gate.last >= POLL:
            gate.paused = False
            switch.turn(True)

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

