"""One server session: the connections of one Client and every request on them.

:class:`Session` owns the connection state (pool, guard with its breaker and reconnect
schedule, the *session connection* that carries subscriptions and listens, connections
being made in the background, the worker) and renews it in a child after ``os.fork()``.
A request borrows a pooled connection and runs under the breaker with retries within its
timeout; the modern era adds the per-request ``_meta`` (and a ``tools/call``'s
``Mcp-Param-*`` headers, from :mod:`mcpsync._tools`); an unsupported version is
renegotiated once, an expired HTTP session (:class:`SessionExpired`, ``renewable``)
renewed on the same connection and the request sent once more; ``input_required``
rounds are driven by :mod:`mcpsync._mrtr`. Discover/initialize and the era memory are
:mod:`mcpsync._handshake`.

The Client's constructor gives it what it needs and nothing more: its :class:`~mcpsync._settings.Settings`,
the transport factory, the :class:`~mcpsync._handlers.Handlers` that answer the server (and
hold the log level asked for), the tools part's :class:`~mcpsync._tools.ParamHeaders`, and
callbacks for what concerns other parts (the connection replaced, session state to restore,
the client closing). A routed client's :class:`~mcpsync._routing.Attempts` strategy puts each
attempt under its endpoint's breaker.
"""

from __future__ import annotations

import logging
import os
import threading
import time
import weakref
from dataclasses import replace
from typing import Any, Callable, Mapping

from ._channel import SAFE_METHODS  # the one table of requests safe to repeat
from ._channel import Channel, ProgressCallback
from ._dispatcher import Dispatcher
from ._errors import (
    AuthError,
    ConnectError,
    ConnectionClosed,
    MCPError,
    PoolClosed,
    ProtocolError,
    RemoteError,
    RequestTimeout,
    ServerUnavailable,
    SessionExpired,
    StartFailed,
    UnsupportedProtocolVersion,
    attach_fields,
)
from ._breaker import BreakerState, CircuitBreaker
from ._constants import META_LOG_LEVEL as _META_LOG
from ._handlers import Handlers
from ._handshake import Handshake, ServerSession, _Connection, _Opening, never_reached, wrong_endpoint
from ._decoders import decode_result
from ._messages import STRUCT_META
from ._metrics import DISCOVERY_METHODS
from ._mrtr import drive as _drive_input_rounds
from ._guard import Guard, Recorder
from ._losses import Losses, Renewal, SessionLost
from ._policies import PoolLimits, ReconnectPolicy, RetryPolicy, Timeouts
from ._pool import ConnectionPool
from ._retry import ReconnectSchedule, in_callers_time
from ._routing import Attempts
from ._settings import Settings
from ._tools import ParamHeaders
from ._weak import client_gone, close_here, watch, weak_method
from ._worker import Worker
from .transports._base import Transport

__all__ = ["Session", "SAFE_METHODS"]

log = logging.getLogger("mcpsync.client")


#: Every live Session, told when the process forks (their connections and threads are the parent's).
_SESSIONS: "weakref.WeakSet[Session]" = weakref.WeakSet()


def _after_fork_in_child() -> None:
    for session in list(_SESSIONS):
        session.forked = True


os.register_at_fork(after_in_child=_after_fork_in_child)


class Session:
    """The connections and requests of one Client (see the module's docstring).

    Args:
        settings: the Client's settings.
        factory: makes a fresh transport (or channel) per connection.
        handlers: answer the server's requests and take its notifications; the log level
            asked for goes in each modern request's ``_meta``.
        param_headers: a modern ``tools/call``'s ``Mcp-Param-*`` headers (the tools part learns them).
        replaced: the session connection was replaced: what was cached of the old one is stale.
        restore: ``restore(first)``, on the worker: session-scoped state (subscriptions,
            listens) restored on a new session connection (``first``: the first one).
        closing: the client is closing, before its connections go (listen streams, resources).
        attempts: a routed client's strategy (:class:`~mcpsync._routing.Attempts`), or None.
        record: the metrics sink of every request.
        owner: the object whose collection, unclosed, closes this session (the Client).
    """

    def __init__(
        self, settings: Settings, factory: Callable[[], Transport | Channel], handlers: Handlers, *,
        param_headers: ParamHeaders, replaced: Callable[[], None], restore: Callable[[bool], None],
        closing: Callable[[], None], reconnect: ReconnectPolicy, record: Recorder | None,
        on_breaker_change: Callable[[BreakerState, BreakerState], None] | None,
        on_unavailable: Callable[[ServerUnavailable], None] | None, telemetry: Any,
        on_session_lost: Callable[[SessionLost], None] | None = None, attempts: Attempts | None = None,
        owner: object = None,
    ) -> None:
        self.name = name = settings.name
        self.handlers = handlers
        self.param_headers = param_headers
        self._replaced = replaced
        self._restore = restore
        self._closing = closing
        self._handshake = Handshake(settings, handlers, telemetry, self)
        limits, timeouts = settings.pool, settings.timeouts
        self.factory = factory
        self.timeouts: Timeouts = timeouts
        self.telemetry = telemetry
        #: most ``InputRequiredResult`` rounds one call may take (``Client.max_input_rounds``)
        self.max_input_rounds = 8
        self.lock = threading.Lock()
        self.closed = False
        self.forked = False  # set in a child after os.fork(): cheaper to test than getpid() per call
        self.primary: _Connection | None = None  # the session connection
        self.ever_connected = False
        self.openings: list[_Opening] = []  # connections being made in the background
        self.stopping = threading.Event()  # set by close(): background waits end at once
        self.closers: list[threading.Thread] = []  # connections being closed off the caller's thread
        self.worker = Worker(f"mcpsync-{name}")
        self.reconnect = ReconnectSchedule(reconnect, name=name, on_unavailable=on_unavailable)
        self.guard = Guard(name, retry=settings.retry, breaker=settings.breaker, reconnect=self.reconnect, record=record)
        if on_breaker_change is not None:
            self.guard.breaker.add_listener(on_breaker_change)
        self.pool: ConnectionPool[_Connection] = ConnectionPool(  # (weak: the pool's thread must not hold the client)
            weak_method(self.open_pooled, client_gone),
            replace(limits, idle=min(limits.idle, timeouts.idle)),
            address=name,
            keepalive=weak_method(self.keepalive),
            keepalive_interval=timeouts.keepalive,
            default_timeout=timeouts.request,
            connect_retries=0,  # _open retries the connect once itself
            maintenance_interval=min(timeouts.keepalive, timeouts.idle) / 4,
        )
        self.borrow_wait = limits.borrow_timeout  # None: each call waits up to its own timeout
        self.judges = settings.retry.retry_result is not None  # the fast path asks the policy of each result
        #: a routed client's strategy: each attempt under its endpoint's breaker (mcpsync._routing)
        self.attempts = attempts
        #: replaced processes and sessions, announced; legacy sessions renewed (mcpsync._losses)
        # (weakly: a connection's close callback holds the Losses, and the reader thread the
        # connection; an unclosed client must stay collectable, see _weak.watch)
        submit = weak_method(self._submit)
        self.losses = Losses(name, on_session_lost, submit=submit)
        self.renewal = Renewal(
            name, self._handshake.renew, self.losses, submit=submit,
            current=lambda conn: not self.closed and self.primary is conn, replaced=self.primary_replaced,
            connect_timeout=timeouts.connect,
        )
        _SESSIONS.add(self)
        # a client nobody closed (mcpsync._weak): ``owner`` collected, this session's threads end
        self.unclosed = watch(self if owner is None else owner, name, self.pool, self.worker, self.openings)

    @property
    def per_call(self) -> bool:
        """``PoolLimits.per_call``: each connection a first contact, unwatched; ``primary`` the newest."""
        return self.pool.limits.per_call

    def check_usable(self) -> None:
        """Raise if closed; after ``os.fork()``, renew the lock, the worker, the session
        connection and the openings in the child (the pool forgets the parent's by itself)."""
        if self.closed:
            raise ConnectionClosed(f"client for {self.name} is closed")
        if self.forked:
            self.forked = False
            self.lock = threading.Lock()
            self.worker = Worker(f"mcpsync-{self.name}")
            self.primary = None
            self.openings = []

    def close(self) -> None:
        """``Client.close``: every connection closed, the client's threads stopped. Idempotent."""
        self.unclosed.detach()
        with self.lock:
            if self.closed:
                return
            self.closed = True
            self.stopping.set()
            self.primary = None
            openings, self.openings = self.openings, []
        for opening in openings:
            made = opening.made  # a start still under way ends now, not at its timeout
            if made is not None and not opening.done.is_set():
                try:
                    made.close()
                except Exception:  # pragma: no cover - close is best effort
                    log.debug("closing the connection being made to %s failed", self.name, exc_info=True)
        try:
            self._closing()
        except Exception:  # pragma: no cover - close is best effort
            log.debug("stopping the listen stream of %s failed", self.name, exc_info=True)
        if self.telemetry is not None:  # the sessions end now (mcp.client.session.duration)
            self.telemetry.client_closed(self)
        self.pool.close()
        for opening in openings:
            if opening.thread is not None and opening.thread is not threading.current_thread():
                opening.thread.join(self.timeouts.close + 1.0)
            with self.lock:
                left, opening.conn = opening.conn, None
            if left is not None:  # made just before close(): never handed out
                left.close()
        # every connection closes at once, each on its own thread: wait for all, bounded by
        # one stdio escalation (stdin closed, SIGTERM, SIGKILL), not one per connection
        ends = time.monotonic() + 2 * self.timeouts.close + 2.0
        with self.lock:
            closers, self.closers = self.closers, []
        for thread in closers:
            thread.join(max(ends - time.monotonic(), 0.0))
        self.worker.close()

    def facts(self) -> ServerSession:
        """``Client.session``: the session connection's facts, re-discovered once their ``ttlMs`` ran out."""
        conn = self.primary_connection()
        facts = conn.session
        if facts is not None and facts.fresh_until is not None and time.monotonic() >= facts.fresh_until:
            try:
                self._handshake.discover(conn, min(self.timeouts.request, 10.0))
            except MCPError as exc:  # keep the facts we have; try again next time
                log.info("%s: refreshing server/discover failed: %s", self.name, exc)
                facts.fresh_until = time.monotonic() + 5.0
            facts = conn.session
        return facts  # type: ignore[return-value]

    def primary_connection(self, timeout: float | None = None) -> _Connection:
        """The pool connection that carries session-scoped state (subscriptions, listens);
        when it dies or is reclaimed, the next use picks another and restores that state."""
        self.check_usable()
        conn: _Connection | None = self.primary
        if conn is not None and (conn.alive() or self.per_call):
            return conn
        bound = self.timeouts.request if timeout is None else timeout
        deadline = time.monotonic() + bound
        lease = self.guard.call(
            lambda: self.pool.borrow(self._left(deadline)), safe_to_retry=True, tool="initialize", budget=bound
        )
        new: _Connection = lease.connection
        lease.release()
        if self.per_call:  # (already closed: its facts are what the session knows)
            return new
        with self.lock:
            old, self.primary = self.primary, new
        if old is not new:
            self._watch_primary(new)
        if old is None:
            self.worker.submit(self._restore, True)  # listens asked for before the first connect
        elif old is not new:
            self.primary_replaced(new)
        return new

    def primary_replaced(self, conn: _Connection) -> None:
        """The session connection was replaced (the server may have restarted): tools are
        rediscovered, cached resources turn STALE, subscriptions and listens are restored."""
        self._replaced()
        self.worker.submit(self._restore, False)

    def open_pooled(self) -> _Connection:
        """The pool's factory, on a borrower's thread: wait, until the borrower's deadline,
        for a connection made on a thread of its own (:meth:`_make`) and claimed by one
        borrower at a time. Time out first: :class:`ConnectError` (``pending``, not counted
        by the breaker) naming the phase; the attempt goes on for the next borrower."""
        deadline = self.pool.creation_deadline()
        if deadline is None:
            deadline = time.monotonic() + self.timeouts.request
        with self.lock:
            if self.closed:
                raise PoolClosed(f"client for {self.name} is closed")
            openings = self.openings
            # a stale failure helps nobody: a new attempt replaces it
            openings[:] = [o for o in openings if not (o.done.is_set() and o.conn is None)]
            opening = next((o for o in openings if not o.claimed and o.conn is not None), None) or next(
                (o for o in openings if not o.claimed), None
            )
            if opening is None:
                opening = _Opening()
                openings.append(opening)
                opening.thread = threading.Thread(
                    target=self._make, args=(opening,), name=f"mcpsync-connect-{self.name}", daemon=True
                )
                opening.thread.start()
            opening.claimed = True
        finished = opening.done.wait(max(deadline - time.monotonic(), 0.0))
        with self.lock:
            opening.claimed = False
            if finished:
                if opening in self.openings:
                    self.openings.remove(opening)
                conn, opening.conn = opening.conn, None  # exactly one borrower gets it
                if conn is not None:
                    return conn
        if not finished:
            waited = time.monotonic() - opening.started
            last = f"; its last try failed: {opening.last}" if opening.last is not None else ""
            raise ConnectError(
                f"MCP server {self.name}: {opening.phase} ({waited:.1f} s so far{last}); the call's time ran out, "
                "the connection goes on in the background",
                timeout=True, sent=False, pending=True, phase=opening.phase,
            )
        error = opening.error
        if error is None:  # pragma: no cover - done without a connection means an error
            error = ConnectError(f"MCP server {self.name}: connecting failed", sent=False)
        raise error

    def _make(self, opening: _Opening) -> None:
        """The background attempt: a first connect tries once (retried once after a
        timeout); after a connection was lost, reconnection follows the backoff schedule.
        ``close()`` ends it at once."""
        conn: _Connection | None = None
        error: BaseException | None = None
        try:
            if not self.ever_connected or self.per_call:
                conn = self._open(opening)
            else:
                conn = self.reconnect.run(lambda: opening.attempt(self._open), sleep=self.stopping.wait)  # type: ignore[arg-type]
        except BaseException as exc:  # delivered to the waiting callers
            error = exc
        if conn is not None:
            with self.lock:
                closed = self.closed
                if not closed:
                    self.ever_connected = True
                    opening.conn = conn
            if closed:
                conn.close()
                error = PoolClosed(f"client for {self.name} is closed")
            else:
                self.losses.replaced_by(conn)  # a new process or session in place of one that died: said
                self._connected(conn)
        opening.error = error
        opening.done.set()

    def _connected(self, conn: _Connection) -> None:
        """A connection was made: if the session's connection was lost, this one takes
        its place, and what the session held (the tool list, subscriptions, cached
        resources) is renewed. Per call, the newest is the session's (for its facts)."""
        if self.per_call:
            self.primary = conn
            return
        primary = self.primary
        if primary is None or primary.alive():
            return
        with self.lock:
            replaced = self.primary is primary
            if replaced:
                self.primary = conn
        if replaced:
            self._watch_primary(conn)
            self.primary_replaced(conn)

    def _watch_primary(self, conn: _Connection) -> None:
        """Replace the session connection at once when it dies (subscriptions restored)."""
        add = getattr(conn.channel, "add_close_callback", None)
        if add is not None:
            add(lambda _reason, lost=weak_method(self._primary_lost): lost(conn))

    def _primary_lost(self, conn: _Connection) -> None:
        if self.closed or self.primary is not conn:
            return
        try:
            self.primary_connection()
        except MCPError as exc:  # the next use tries again
            log.info("%s: replacing the lost session connection failed: %s", self.name, exc)

    def _submit(self, fn: Callable[..., Any], *args: Any) -> None:
        """Run ``fn(*args)`` on the session's worker (the one of the moment: a fork makes a new one)."""
        self.worker.submit(fn, *args)

    def keepalive(self, conn: _Connection) -> None:
        if not conn.healthy():
            raise ConnectionClosed(f"connection to {self.name} died")
        if conn.meta is None and conn.session is not None:  # the legacy era has ping
            try:
                conn.channel.request("ping", None, self.timeouts.request)
            except SessionExpired as exc:  # the connection is fine: renew its session
                if not exc.renewable:
                    raise
                self.renewal.renew(conn, exc, time.monotonic() + self.timeouts.request)

    def _open(self, opening: _Opening) -> _Connection:
        """Start a connection and handshake (on the connecting thread). A child process alive
        but silent is *starting* (budget ``timeouts.start``); otherwise the connect timeout,
        retried once after a timeout. A process that exited fails at once (:class:`StartFailed`)."""
        errors: list[BaseException] = []
        for _attempt in range(2):
            if self.closed:
                raise PoolClosed(f"client for {self.name} is closed")
            conn: _Connection | None = None
            made: Transport | Channel | None = None
            try:
                opening.phase = "starting the server" if _attempt == 0 else "starting the server again"
                made = opening.made = self.factory()
                if self.closed:  # close() may have run before ``made`` was known
                    raise PoolClosed(f"client for {self.name} is closed")
                conn = self._start(made, time.monotonic() + self.timeouts.connect)
                if self.closed:  # close() ran while the transport started: it must not live on
                    raise PoolClosed(f"client for {self.name} is closed")
                starting = conn.transport is not None and conn.transport.starting()
                budget = self.timeouts.start if starting else self.timeouts.connect
                opening.phase = (
                    "waiting for the server process to answer its handshake (it is alive, still starting)"
                    if starting
                    else "waiting for the server to answer its handshake"
                )
                if self.telemetry is not None:  # the handshake's span; the session's clock starts
                    self.telemetry.handshake(self, conn, lambda: self._handshake.run(conn, time.monotonic() + budget, starting))
                else:
                    self._handshake.run(conn, time.monotonic() + budget, starting)
                if not self.per_call:  # (closed after its call, by design: nothing is lost)
                    self.losses.watch(conn)
                return conn
            except MCPError as exc:
                failure = None
                if isinstance(made, Transport) and not isinstance(exc, (RemoteError, AuthError, StartFailed)):
                    try:
                        failure = made.start_failure(1.0)
                    except Exception:  # pragma: no cover - best effort
                        failure = None
                if conn is not None:
                    conn.close()
                elif made is not None:
                    try:
                        made.close()
                    except Exception:
                        pass
                if failure is not None:
                    raise failure from exc
                if isinstance(exc, (RemoteError, AuthError, StartFailed, PoolClosed)) or self.closed:
                    raise  # the server answered, or cannot run: a fresh start would fare the same
                wrong = wrong_endpoint(exc, getattr(made, "url", None) or self.name)
                if wrong is not None:
                    raise wrong from exc  # an HTTP 4xx: the URL is wrong, not the server unwell
                errors.append(exc)
                if not getattr(exc, "timeout", isinstance(exc, RequestTimeout)):
                    break  # SPEC: a connect is retried once after a *timeout*
        last = errors[-1]
        how = "did not respond" if getattr(last, "timeout", isinstance(last, RequestTimeout)) else "could not be reached"
        if not never_reached(last):
            raise ConnectError(f"MCP server {self.name} {how}: {last}", attempts=len(errors)) from last
        # refused, unknown host, no route: on a first contact, said at once (not retried within
        # the call); once reached, a lost server is the reconnect schedule's
        raise ConnectError(f"MCP server {self.name} could not be reached: {last}", attempts=len(errors),
                           unreached=not self.ever_connected) from last

    def _stream_lost(self, conn: _Connection, session_id: str) -> None:
        """The GET stream of ``conn`` found its session gone (on the transport's thread,
        which holds this weakly: a client nobody closed is still collected)."""
        self.renewal.stream_found_it_gone(conn, session_id, lambda: self.closed)

    def _start(self, made: Transport | Channel, deadline: float) -> _Connection:
        if isinstance(made, Transport):
            made.connect(max(deadline - time.monotonic(), 0.001))
            disp = Dispatcher(
                made,
                name=self.name,
                worker=self.worker,
                request_timeout=self.timeouts.request,
                progress_cap=self.timeouts.progress_cap,
            )
            h = self.handlers  # (weak: the reader thread must not hold the client)
            disp.set_handlers(weak_method(h.notification), weak_method(h.on_request), weak_method(h.notice))
            disp.start()
            conn = _Connection(disp, made, made.describe())
            conn.closer = weak_method(self._close_in_background, close_here)
            lost = weak_method(self._stream_lost)  # (Streamable HTTP: its GET stream found the session gone)
            made.set_session_lost_handler(lambda session_id: lost(conn, session_id))
            return conn
        chan = made
        chan.set_handlers(self.handlers.notification, self.handlers.on_request)
        return _Connection(chan, None, getattr(chan, "describe", lambda: repr(chan))())

    def _close_in_background(self, close: Callable[[], None], what: str) -> None:
        """Close one connection on a tracked thread of its own (:meth:`close` waits for all,
        bounded); at interpreter exit here, since a daemon thread would die half-way."""
        if not threading.main_thread().is_alive():
            close()
            return
        thread = threading.Thread(target=close, name=f"mcpsync-close-{self.name}", daemon=True)
        with self.lock:
            self.closers = [t for t in self.closers if t.is_alive()]
            self.closers.append(thread)
        thread.start()

    def request(
        self,
        method: str,
        params: Mapping[str, Any] | None = None,
        timeout: float | None = None,
        progress: ProgressCallback | None = None,
        safe_to_retry: bool | Callable[[], bool] | None = None,
        tool: str | None = None,
        retry: RetryPolicy | None = None,
    ) -> Any:
        """``Client.request`` (see there; ``safe_to_retry`` may also be asked only after a failure)."""
        if self.closed or self.forked:
            self.check_usable()  # clears ``forked`` after renewing what the fork left behind
        tel = self.telemetry
        if tel is not None and not tel.inside():  # one span and one duration per request
            return tel.request(self, method, params, timeout=timeout, progress=progress,
                               safe_to_retry=safe_to_retry, tool=tool, retry=retry)
        t = self.timeouts.request if timeout is None else timeout
        if tool is None and method in DISCOVERY_METHODS:
            tool = method  # kept apart from agent calls in the metrics
        guard = self.guard
        begin = guard.begin  # (attributes holding C methods: read so, specialized; as method lookups, not)
        start = begin() if self.attempts is None else None
        if start is None:
            return self._guarded(method, params, t, progress, safe_to_retry, tool, retry)
        # the healthy common case, flattened (no closure in this frame: its cells would
        # cost every call): the first attempt runs here, on the idle connection when there
        # is one (_attempt's lone-caller path, inline); an error goes on to the guard
        pool = self.pool
        entry = pool.take_idle()
        try:
            if entry is None:
                result = self._attempt(method, params, t, progress, False)
            else:
                result = self.request_on(entry.conn, method, params, t, progress)
        except BaseException as exc:
            if entry is not None:
                pool.give_back_idle(entry, broken=not entry.conn.alive())
            return self._guarded(method, params, t, progress, safe_to_retry, tool, retry, start, exc)
        if entry is not None:
            pool.give_back_idle(entry)
        if (retry is not None or self.judges) and (transient := guard.judge(result, retry)) is not None:
            return self._guarded(method, params, t, progress, safe_to_retry, tool, retry, start, transient)
        succeeded = guard.succeeded
        succeeded(tool, start)
        return result

    def _guarded(
        self, method: str, params: Mapping[str, Any] | None, t: float, progress: ProgressCallback | None,
        safe_to_retry: bool | Callable[[], bool] | None, tool: str | None, retry: RetryPolicy | None,
        start: float | None = None, first: BaseException | None = None,
    ) -> Any:
        """A request on the guard's own path (``first``: the fast path's attempt raised it).
        A timeout it ends with names the call's ``t``, not what was left of it."""
        guard = self.guard
        safe = (method in SAFE_METHODS) if safe_to_retry is None else safe_to_retry
        try:
            if first is not None and start is not None:
                deadline = start + t  # the guard's clock is time.monotonic
                return guard.after_first_failure(
                    first, lambda: self._retry_attempt(method, params, deadline, t, progress), start,
                    safe_to_retry=safe, tool=tool, retry=retry, budget=t,
                )
            deadline = time.monotonic() + t
            tries = [True]

            def attempt() -> Any:
                if tries[0]:
                    tries[0] = False
                    return self._attempt(method, params, t, progress)
                return self._retry_attempt(method, params, deadline, t, progress)

            return guard.call(attempt, safe_to_retry=safe, tool=tool, retry=retry, budget=t)
        except RequestTimeout as exc:
            in_callers_time(exc, t)
            raise

    @staticmethod
    def _left(deadline: float) -> float:
        """Seconds left until ``deadline``; :class:`RequestTimeout` (never sent) if none."""
        left = deadline - time.monotonic()
        if left <= 0.0:
            raise RequestTimeout("the call's time ran out before this attempt", sent=False, truncated=True)
        return left

    def _retry_attempt(
        self, method: str, params: Mapping[str, Any] | None, deadline: float, t: float, progress: ProgressCallback | None
    ) -> Any:
        """A retry gets only what is left of its call's time; when that is less than a
        whole timeout, its timeout is the call's, not a sign of an unwell server
        (``truncated``: the breaker does not count it)."""
        if self.closed:
            raise PoolClosed(f"client for {self.name} is closed")
        left = self._left(deadline)
        try:
            return self._attempt(method, params, left, progress)
        except RequestTimeout as exc:
            if left < t:
                attach_fields(exc, truncated=True)
            raise

    def _attempt(self, method: str, params: Mapping[str, Any] | None, t: float, progress: ProgressCallback | None, idle: bool = True) -> Any:
        if self.attempts is not None:  # a routed client: under its endpoint's breaker
            return self.attempts.run(self, t, lambda conn: self.request_on(conn, method, params, t, progress))
        pool = self.pool
        # no Lease: this frame gives it back on every path; waiting for a connection spends the call's time
        entry = pool.take_idle() if idle else None  # (not ``idle``: the caller's claim just failed)
        give_back = pool.give_back_idle
        if entry is None:
            began = time.monotonic()
            entry = pool.borrow_entry(t if self.borrow_wait is None else self.borrow_wait)
            give_back = pool.give_back
            t -= time.monotonic() - began
            if t <= 0.0:
                give_back(entry)
                raise RequestTimeout(
                    f"{self.name}: the call's time ran out while it waited for a connection", sent=False, truncated=True
                )
        conn = entry.conn
        try:
            result = self.request_on(conn, method, params, t, progress)
        except BaseException:
            give_back(entry, broken=not conn.alive())
            raise
        give_back(entry)
        return result

    def request_on(
        self, conn: _Connection, method: str, params: Mapping[str, Any] | None, t: float,
        progress: ProgressCallback | None, again: bool = False,
    ) -> Any:
        """One request on ``conn`` (``again``: sent a second time, after a renegotiation or a renewal: final)."""
        sent: Any = params
        base = conn.meta
        headers = None
        if base is not None:
            level = self.handlers.log_level
            if level is not None and base.get(_META_LOG) != level:
                base = conn.meta = {**base, _META_LOG: level}
            extra = params.get("_meta") if params else None
            known, wire = conn.wire_cache  # conn.wire_meta(base)'s cached case, inline: every call
            meta = {**base, **extra} if extra else wire if known is base else conn.wire_meta(base)
            sent = params.copy() if type(params) is dict else dict(params or ())  # (copy: half a {**params}'s price)
            sent["_meta"] = meta
            if self.param_headers.annotations and method == "tools/call" and params and conn.transport is not None:
                headers = self.param_headers.headers(params)  # the tool's Mcp-Param-* headers
        try:
            if headers is None:
                raw = conn.channel.request(method, sent, t, progress)
            else:
                raw = conn.channel.request(method, sent, t, progress, headers=headers)
        except UnsupportedProtocolVersion as exc:
            if again or conn.meta is None or not self._handshake.renegotiate(conn, exc):
                raise
            return self.request_on(conn, method, params, t, progress, True)
        except SessionExpired as exc:
            if not exc.renewable:
                raise
            return self._after_expiry(conn, exc, again, method, params, t, progress)
        if type(type(raw)) is STRUCT_META:  # typed with its answer, so complete (see ANSWER_DECODERS)
            return raw
        result = decode_result(method, raw)
        rt = result.get("resultType") if type(result) is dict else getattr(result, "result_type", None)
        if rt is None or rt == "complete" or (rt == "task" and method == "tools/call"):
            return result  # (a task, SEP-2663: the tools layer follows it, mcpsync._tasks)
        if rt != "input_required":
            raise ProtocolError(
                f"{self.name} answered {method} with resultType {rt!r}, which this client cannot handle", code=-32600
            )
        return self._input_rounds(conn, method, params, raw, t, progress)

    def _after_expiry(self, conn: _Connection, exc: SessionExpired, again: bool, method: str,
                      params: Mapping[str, Any] | None, t: float, progress: ProgressCallback | None) -> Any:
        """The request sent again on the renewed session (the closure here: in
        :meth:`request_on` its cells would cost every call)."""
        resend = lambda left: self.request_on(conn, method, params, left, progress, True)  # noqa: E731
        return self.renewal.after_expiry(conn, exc, again, t, resend)

    def _input_rounds(
        self, conn: _Connection, method: str, params: Mapping[str, Any] | None, raw: Any, t: float,
        progress: ProgressCallback | None,
    ) -> Any:
        """MRTR rounds, on the same connection: a server may seal requestState per process."""
        return _drive_input_rounds(
            self.name, method, params, raw, answer=self.handlers.answer, max_rounds=self.max_input_rounds,
            send=lambda round_params: self.request_on(conn, method, round_params, t, progress),
        )

    def notify(self, method: str, params: Mapping[str, Any] | None = None) -> None:
        """Send a notification to the server (on the session-scoped connection; with
        telemetry, as a span); one that meets an expired session is sent again on the renewed one."""
        conn = self.primary_connection()
        if self.telemetry is not None:
            self.telemetry.notify(self, method, params, lambda sent: self._notify_on(conn, method, sent), conn)
        else:
            self._notify_on(conn, method, params)

    def _notify_on(self, conn: _Connection, method: str, params: Mapping[str, Any] | None) -> None:
        try:
            conn.channel.notify(method, params)
        except SessionExpired as exc:
            if not exc.renewable:
                raise
            self.renewal.renew(conn, exc, time.monotonic() + self.timeouts.request)
            conn.channel.notify(method, params)
