"""A pool of multiplexed connections to one server address.

A pooled connection is a JSON-RPC channel that carries many calls at once, so a borrow
does not take a connection away from everyone else: it picks the least-loaded live
connection still under ``max_in_flight``, else opens a new one while under ``max``,
else waits at most the borrow timeout and raises :class:`PoolTimeout`.

Waiting is fair: callers that must wait queue in arrival order, each blocked on a lock of
its own, and capacity that appears (a call returns, a connection opens, one is dropped so
another may be opened) is *handed* to the oldest waiter under the pool's lock, before any
thread can take it. While anyone waits, neither the fast path nor a newly arriving borrow
can take a slot ahead of the queue. (``Condition.notify`` would only let the oldest waiter
compete with every newcomer: under load a returning thread takes its slot back again.)

Not ``queue.LifoQueue`` as urllib3: a queue models *exclusive* checkout, here a connection
is shared by up to ``max_in_flight`` borrowers, chosen by load. urllib3's other lessons
hold: an explicit borrow timeout; LIFO among equally loaded connections (the surplus go
idle and are reaped); ``close()`` swaps the state out under the lock and closes after;
a ``weakref.finalize`` that holds the state, never the pool. A lone caller takes the idle
connection without the lock (:meth:`ConnectionPool.take_idle`).

Two ways to borrow, then: the lone caller's claim (:meth:`~ConnectionPool.take_idle`, given
back with :meth:`~ConnectionPool.give_back_idle`) and the general borrow, which may wait in
line (:meth:`~ConnectionPool.borrow_entry` and :meth:`~ConnectionPool.give_back`, or
:meth:`~ConnectionPool.borrow`'s :class:`Lease` around them, a context manager).

Example:
    >>> class Conn:
    ...     def alive(self): return True
    ...     def close(self): pass
    >>> pool = ConnectionPool(Conn, PoolLimits(min=1, max=2))
    >>> with pool.borrow() as conn:
    ...     isinstance(conn, Conn)
    True
    >>> s = pool.stats()
    >>> s.created, s.borrowed, s.returned, s.in_use
    (1, 1, 1, 0)
    >>> pool.close()
"""

from __future__ import annotations

import itertools
import logging
import os
import threading
import time
import weakref
from collections import deque
from typing import Any, Callable, Generic

from ._breaker import count_value
from ._errors import ConnectError, PoolClosed, PoolTimeout
from ._policies import PoolLimits, Timeouts
from ._pool_types import C, Counts, Entry, Lease, PoolableConnection, PoolState, PoolStats, Waiter, connection_is_broken
from ._speedups import IdleReturn
from ._weak import weak_method

__all__ = ["PoolableConnection", "ConnectionPool", "Lease", "PoolStats", "connection_is_broken"]

log = logging.getLogger("mcpsync.pool")


def _close_quietly(conn: PoolableConnection) -> None:
    try:
        conn.close()
    except Exception:
        log.debug("closing a pooled connection raised", exc_info=True)


def _finalize(state: PoolState[C]) -> None:
    state.stop.set()
    entries, state.entries, state.closed = state.entries, [], True
    for entry in entries:
        _close_quietly(entry.conn)


def _maintenance_loop(ref: "weakref.ref[ConnectionPool[C]]", stop: threading.Event, interval: float) -> None:
    while not stop.wait(interval):
        pool = ref()
        if pool is None:
            return
        try:
            pool.maintain()
        except Exception:
            log.exception("pool maintenance failed")
        del pool


#: Live pools, so that a forked child can drop what it inherited (see ``_after_fork``).
_LIVE_POOLS: "weakref.WeakSet[ConnectionPool[Any]]" = weakref.WeakSet()


def _after_fork_in_child() -> None:
    for pool in list(_LIVE_POOLS):
        pool._forget_after_fork()


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_after_fork_in_child)


class ConnectionPool(Generic[C]):
    """Connections to one server address, created lazily, shared up to ``max_in_flight``.

    Fork-safe: in a child after ``os.fork()`` the pool forgets the parent's connections
    without closing them (closing would end the parent's child processes and sessions)
    and opens its own on the next borrow.

    Args:
        factory: opens one connection (raises :class:`ConnectError` on failure); called
            outside the pool's lock.
        limits: ``min`` (kept by the reaper, kept alive, and the count up to which a
            concurrent call gets a fresh connection rather than sharing one), ``max``,
            ``max_in_flight``, ``borrow_timeout``, ``idle``.
        address: the server address (in errors).
        clock: monotonic clock for idle and keepalive bookkeeping (inject for tests;
            the borrow timeout itself always waits in real time).
        keepalive: ``keepalive(conn)`` keeps a long-lived connection alive (``ping``, a
            liveness check); it raising discards the connection.
        keepalive_interval: seconds of inactivity before a kept connection is pinged.
        default_timeout: the borrow timeout when ``limits.borrow_timeout`` is ``None``
            (the request timeout).
        is_broken: decides from a call's error whether its connection is dead.
        connect_retries: a connect that times out (``ConnectError.timeout``) is retried
            this many times (SPEC.md: once).
        maintenance_interval: if set, a daemon thread (started by the first borrow) runs
            :meth:`maintain` this often; otherwise the owner calls :meth:`maintain` /
            :meth:`reap` itself.
    """

    def __init__(
        self,
        factory: Callable[[], C],
        limits: PoolLimits = PoolLimits.DEFAULT,
        *,
        address: str = "",
        clock: Callable[[], float] = time.monotonic,
        keepalive: Callable[[C], None] | None = None,
        keepalive_interval: float = Timeouts.DEFAULT.keepalive,
        default_timeout: float = Timeouts.DEFAULT.request,
        is_broken: Callable[[BaseException], bool] = connection_is_broken,
        connect_retries: int = 1,
        maintenance_interval: float | None = None,
    ) -> None:
        self.limits = limits
        self.address = address
        self._factory = factory
        self._clock = clock
        self._keepalive = keepalive
        self._keepalive_interval = keepalive_interval
        self._default_timeout = default_timeout
        #: the verdict on a call's error: True when the connection itself died (discard it)
        self.is_broken = is_broken
        self._connect_retries = connect_retries
        self._lock = threading.Lock()
        # Borrowers waiting for capacity, oldest first. Invariant (under the lock): while
        # it is non-empty, no entry has a free slot and no connection may be opened, since
        # every change that makes room calls _dispatch. take_idle relies on it.
        self._waiters: deque[Waiter[C]] = deque()
        self._hot: Entry[C] | None = None  # the entry returned last (the fast path's pick)
        self._local = threading.local()  # .deadline: the borrow a factory call serves
        self._state: PoolState[C] = PoolState()
        self._creating = 0
        self._seq = itertools.count()
        self._counts = Counts()
        self._fast_taken, self._fast_returned = itertools.count(), itertools.count()  # next(): atomic
        #: ``give_back_idle(entry, broken=False)``: end a call bound to ``entry`` by :meth:`take_idle`
        #: (``broken``: discard it); one call into C in the compiled build (speedups.IdleReturn)
        self.give_back_idle: Callable[..., None] = self._idle_return()
        self._finalizer = weakref.finalize(self, _finalize, self._state)
        self._maintenance_interval = maintenance_interval
        self._thread: threading.Thread | None = None
        #: bumped in a forked child: leases of the parent then count for nothing
        self.epoch = 0
        _LIVE_POOLS.add(self)

    def _start_maintenance(self) -> None:
        with self._lock:
            if self._thread is not None or self._state.closed or self._maintenance_interval is None:
                return
            self._thread = threading.Thread(
                target=_maintenance_loop,
                args=(weakref.ref(self), self._state.stop, self._maintenance_interval),
                name=f"mcpsync-pool-{self.address or id(self)}",
                daemon=True,
            )
            self._thread.start()

    def _forget_after_fork(self) -> None:
        """In a forked child: drop the inherited state without touching its connections."""
        self._finalizer.detach()  # the child's exit must not close the parent's connections
        closed = self._state.closed
        self._lock = threading.Lock()  # a parent thread may have held it
        self._waiters = deque()  # the parent's waiting threads do not exist here
        self._hot = None
        self._state = PoolState()
        self._state.closed = closed
        self._creating = 0
        self._counts = Counts()
        self._fast_taken, self._fast_returned = itertools.count(), itertools.count()
        self.give_back_idle = self._idle_return()
        self._thread = None
        self.epoch += 1
        self._finalizer = weakref.finalize(self, _finalize, self._state)

    # -- borrowing ------------------------------------------------------------------

    def _pick(self) -> Entry[C] | None:
        best: Entry[C] | None = None
        best_key: tuple[int, float, int] | None = None
        limit = self.limits.max_in_flight
        for entry in self._state.entries:
            load = entry.load()
            if entry.dead or load >= limit:
                continue
            key = (load, -entry.last_used, -entry.seq)  # least loaded, then returned last
            if best_key is None or key < best_key:
                best, best_key = entry, key
        return best

    def borrow(self, timeout: float | None = None) -> Lease[C]:
        """Bind a connection to one call.

        Args:
            timeout: seconds to wait for capacity (default ``limits.borrow_timeout``,
                else the request timeout).

        Returns:
            A :class:`Lease`; release it on every path, or use it as a context manager:
            ``with pool.borrow() as conn:``.

        Raises:
            PoolTimeout: no connection had room within ``timeout``.
            PoolClosed: the pool is closed.
            ConnectError: opening a new connection failed.
        """
        return Lease(self, self.borrow_entry(timeout))

    def borrow_entry(self, timeout: float | None = None) -> Entry[C]:
        """:meth:`borrow` without a :class:`Lease`, for a caller that gives the connection
        back itself: the entry (``entry.conn``), for :meth:`give_back` on every path, exactly
        once. Raises as :meth:`borrow`."""
        if timeout is None:
            timeout = self.limits.borrow_timeout if self.limits.borrow_timeout is not None else self._default_timeout
        if self._thread is None and self._maintenance_interval is not None:
            self._start_maintenance()
        deadline = time.monotonic() + timeout
        front = False
        while True:
            entry = self._reserve(deadline, front)
            if entry is None:  # the right to open one
                self._local.deadline = deadline
                try:
                    return self._open_new()
                finally:
                    self._local.deadline = None
            try:
                alive = entry.conn.alive()
            except Exception:
                alive = False
            if alive:
                return entry
            self._drop(entry, undo_borrow=True)
            front = True  # it was this caller's turn: it keeps its place in the queue

    def _grant(self) -> Entry[C] | bool:
        """Under the lock: reserve a slot (the entry), the right to open a connection
        (True), or False when neither is possible now."""
        state = self._state
        if state.closed:
            return False
        limits = self.limits
        entry = None if limits.per_call else self._pick()  # (per call: every call opens its own)
        total = len(state.entries) + self._creating
        if entry is not None and (entry.load() == 0 or total >= limits.min) and entry.reserve(limits.max_in_flight):
            self._counts.borrowed += 1
            return entry
        if total < limits.min or ((self._creating == 0 or limits.per_call) and total < limits.max):
            self._creating += 1
            return True
        return False

    def _dispatch(self) -> None:
        """Under the lock: hand whatever room there is to the waiters, oldest first.

        Called after every change that can make room (a slot freed, a connection opened,
        dropped or not opened after all), so that a slot goes to the queue before any
        other thread can see it free.
        """
        waiters = self._waiters
        while waiters:
            grant = self._grant()
            if grant is False:
                return
            waiter = waiters.popleft()
            if isinstance(grant, Entry):
                waiter.entry = grant
            else:
                waiter.create = True
            waiter.lock.release()

    def _reserve(self, deadline: float, front: bool = False) -> Entry[C] | None:
        """Take a slot on an entry (returned), or the right to open a connection (None),
        waiting in line for it.

        Args:
            deadline: ``time.monotonic()`` at which to give up with :class:`PoolTimeout`.
            front: join the queue at its head (a borrower whose granted connection
                turned out dead keeps its turn).
        """
        lock = self._lock
        with lock:
            if self._state.closed:
                raise PoolClosed(f"the connection pool for {self.address or 'the server'} is closed")
            if not self._waiters:  # no one is ahead of this caller
                grant = self._grant()
                if isinstance(grant, Entry):
                    return grant
                if grant:
                    return None
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                self._counts.timeouts += 1
                raise self._timeout_error()
            waiter: Waiter[C] = Waiter()
            if front:
                self._waiters.appendleft(waiter)
            else:
                self._waiters.append(waiter)
            # a lone caller's claim, given up without the lock since _grant looked, is
            # seen here, or its holder sees this waiter (see give_back_idle)
            self._dispatch()
        try:
            served = waiter.lock.acquire(True, min(remaining, threading.TIMEOUT_MAX))
        except BaseException:  # interrupted (KeyboardInterrupt): leave the queue
            self._leave(waiter)
            raise
        if not served:
            raise self._leave(waiter)
        if waiter.closed:
            raise PoolClosed(f"the connection pool for {self.address or 'the server'} is closed")
        if waiter.create:
            return None
        return waiter.entry

    def _leave(self, waiter: Waiter[C]) -> PoolTimeout | PoolClosed:
        """A waiter gives up: out of the queue, and whatever was handed to it in the
        meantime passes on to the next waiter.

        Returns:
            The error the borrow ends with.
        """
        to_close = None
        with self._lock:
            entry = waiter.entry
            if entry is not None:
                entry.in_flight -= 1  # undo the reservation, as if it had never been made
                self._counts.borrowed -= 1
                if entry.retiring and entry.load() == 0:
                    entry.retiring = False
                    to_close = entry.conn
            elif waiter.create:
                self._creating -= 1
            elif not waiter.closed:
                self._waiters.remove(waiter)
            waiter.entry, waiter.create = None, False
            if not waiter.closed:
                self._counts.timeouts += 1
            self._dispatch()
        if to_close is not None:
            _close_quietly(to_close)
        if waiter.closed:
            return PoolClosed(f"the connection pool for {self.address or 'the server'} is closed")
        return self._timeout_error()

    def _timeout_error(self) -> PoolTimeout:
        return PoolTimeout(
            f"no connection to {self.address or 'the server'} became free within the pool timeout",
            address=self.address,
        )

    def creation_deadline(self) -> float | None:
        """In the factory: the ``time.monotonic()`` deadline of the borrow it serves."""
        return getattr(self._local, "deadline", None)

    def _connect(self) -> C:
        attempt = 0
        while True:
            try:
                return self._factory()
            except ConnectError as exc:
                if attempt >= self._connect_retries or getattr(exc, "timeout", False) is not True:
                    raise
                attempt += 1
                log.info("connect to %s timed out; retrying (%d)", self.address, attempt)

    def _open_new(self) -> Entry[C]:
        try:
            conn = self._connect()
        except BaseException:
            with self._lock:
                self._creating -= 1
                self._dispatch()  # the next waiter may try to open one
            raise
        with self._lock:
            self._creating -= 1
            closed = self._state.closed
            if not closed:
                entry = Entry(conn, self._clock(), next(self._seq))
                entry.in_flight = 1
                self._state.entries.append(entry)
                self._counts.created += 1
                self._counts.borrowed += 1
                self._dispatch()  # a new connection has room for others too
            else:
                self._counts.created += 1
                self._counts.closed += 1
        if closed:
            _close_quietly(conn)
            raise PoolClosed(f"the connection pool for {self.address or 'the server'} is closed")
        return entry

    # -- returning --------------------------------------------------------------------

    def take_idle(self) -> Entry[C] | None:
        """The lone caller's borrow, without the lock or a :class:`Lease`: the connection
        returned last, when nothing runs on it, nobody waits in line, and it is alive.

        The caller claims it (``entry.claims``); a claim found alone with no call on the
        connection holds it. The lock's side counts claims in every load and gives a slot
        up to a claim made meanwhile (``_grant``). Returns the entry (hand it to
        :meth:`give_back_idle` on every path, exactly once) or None (use :meth:`borrow`)."""
        hot = self._hot
        if hot is None or self._thread is None:
            return None
        claims = hot.claims
        claims.append(None)
        if len(claims) == 1 and hot.in_flight == 0 and not hot.dead and not self._waiters and not self._state.closed:
            if hot.conn.alive():
                next(self._fast_taken)
                return hot
            self._drop(hot)  # out of the pool while the claim still holds it
            claims.pop()
            return None
        claims.pop()
        if self._waiters:  # the claim may have kept a slot from a borrower who queued meanwhile
            self._after_claim(hot)
        return None

    def _idle_return(self) -> Callable[..., None]:
        # give_back_idle: compiled (speedups.IdleReturn), over this pool's clock, count and
        # queue (weakly: the pool must stay collectable)
        return IdleReturn(self._clock, self._fast_returned, self._waiters, weak_method(self._after_claim)).give_back

    def _after_claim(self, entry: Entry[C], broken: bool = False) -> None:
        # the queue gets the room; a broken connection goes, a retiring one after its last call
        with self._lock:
            to_close = False
            if broken and not entry.dead:
                to_close = self._remove(entry)
            elif entry.retiring and entry.load() == 0:
                entry.retiring = False
                to_close = True
            self._dispatch()
        if to_close:
            log.info("%s a connection to %s", "discarding a broken" if broken else "retiring", self.address)
            _close_quietly(entry.conn)

    def give_back(self, entry: Entry[C], broken: bool = False, retire: bool = False) -> None:
        """End a call bound to ``entry`` by :meth:`borrow_entry` (``broken``/``retire`` as
        in :meth:`Lease.release`, which calls this)."""
        to_close = False
        # (with, not acquire() then try: CPython runs a signal handler as a call returns, so a
        # KeyboardInterrupt between the two would keep the lock, and wedge every caller)
        with self._lock:
            entry.in_flight -= 1
            self._counts.returned += 1
            entry.last_used = self._clock()
            self._hot = entry
            if (broken or self.limits.per_call) and not entry.dead:
                to_close = self._remove(entry, ended=not broken)
                self._dispatch()  # a waiter may open its replacement
            elif retire and not entry.dead:
                entry.retiring = self._remove(entry)
                to_close = entry.retiring and entry.load() == 0
                self._dispatch()
            elif entry.retiring and entry.load() == 0:
                entry.retiring = False
                to_close = True
            elif self._waiters:
                self._dispatch()  # the freed slot goes to the oldest waiter, not to a newcomer
        if to_close:
            if not broken and self.limits.per_call:
                log.debug("closing the connection of a call to %s", self.address)
            else:
                log.info("%s a connection to %s", "retiring" if retire or not broken else "discarding a broken", self.address)
            _close_quietly(entry.conn)

    def _remove(self, entry: Entry[C], *, reaped: bool = False, ended: bool = False) -> bool:
        """Under the lock: take ``entry`` out; True if the caller must close it. Counted as
        reaped, as ended (its call is over, per-call limits), else as discarded."""
        entry.dead = True
        if self._hot is entry:
            self._hot = None
        try:
            self._state.entries.remove(entry)
        except ValueError:
            return False  # already swapped out by close()
        self._counts.closed += 1
        if reaped:
            self._counts.reaped += 1
        elif not ended:
            self._counts.discarded += 1
        return True

    def _drop(self, entry: Entry[C], *, undo_borrow: bool = False) -> None:
        with self._lock:
            if undo_borrow:
                entry.in_flight -= 1
                self._counts.borrowed -= 1
            to_close = not entry.dead and self._remove(entry)
            self._dispatch()
        if to_close:
            _close_quietly(entry.conn)

    # -- upkeep ------------------------------------------------------------------------

    def reap(self, now: float | None = None) -> int:
        """Close idle connections above ``min`` idle for ``limits.idle`` s, and dead ones.

        Args:
            now: the clock's current reading (default: ask the clock).

        Returns:
            How many connections were closed.
        """
        now = self._clock() if now is None else now
        with self._lock:
            entries = self._state.entries
            idle = sorted((e for e in entries if e.load() == 0), key=lambda e: (e.last_used, e.seq))
            excess = len(entries) - self.limits.min
            victims = []
            for entry in [e for e in idle if now - e.last_used >= self.limits.idle][: max(0, excess)]:
                entry.claims.append(None)  # claimed like a lone caller does: never under one
                if len(entry.claims) == 1 and entry.in_flight == 0:
                    self._remove(entry, reaped=True)  # (the claim stays: nobody takes it now)
                    victims.append(entry)
                else:
                    entry.claims.pop()
            survivors = [e for e in idle if not e.dead]
            self._dispatch()
        for entry in victims:
            _close_quietly(entry.conn)
        dead = []
        for entry in survivors:
            try:
                if not entry.conn.alive():
                    dead.append(entry)
            except Exception:
                dead.append(entry)
        for entry in dead:
            self._drop(entry)
        return len(victims) + len(dead)

    def keepalive(self, now: float | None = None) -> int:
        """Run the keepalive hook on the kept (``min`` most recently used) connections
        with no activity for ``keepalive_interval`` seconds.

        A hook that raises discards its connection (the next borrow opens a new one).

        Returns:
            How many keepalives were made.
        """
        if self._keepalive is None:
            return 0
        now = self._clock() if now is None else now
        with self._lock:
            kept = sorted(self._state.entries, key=lambda e: (e.last_used, e.seq), reverse=True)[: self.limits.min]
            due = []
            for e in kept:  # the hook holds a slot, like a call
                if (now - max(e.last_used, e.last_keepalive) >= self._keepalive_interval
                        and e.reserve(self.limits.max_in_flight)):
                    e.last_keepalive = now
                    due.append(e)
        made = 0
        for entry in due:
            ok = True
            try:
                self._keepalive(entry.conn)
                made += 1
            except Exception as exc:
                log.info("keepalive to %s failed: %r; discarding the connection", self.address, exc)
                ok = False
            with self._lock:
                entry.in_flight -= 1
                self._counts.keepalives += 1
                to_close = not ok and not entry.dead and self._remove(entry)
                self._dispatch()
            if to_close:
                _close_quietly(entry.conn)
        return made

    def maintain(self, now: float | None = None) -> None:
        """One upkeep round: :meth:`reap`, then :meth:`keepalive`."""
        now = self._clock() if now is None else now
        self.reap(now)
        self.keepalive(now)

    # -- lifecycle & observation -----------------------------------------------------------

    def close(self) -> None:
        """Close every connection (in-flight calls on them fail with ConnectionClosed).

        Idempotent. The state is swapped out under the lock; the connections are closed
        after releasing it. Later borrows raise :class:`PoolClosed`.
        """
        with self._lock:
            state = self._state
            if state.closed:
                return
            entries, state.entries, state.closed = state.entries, [], True
            for entry in entries:
                entry.dead = True
            self._counts.closed += len(entries)
            state.stop.set()
            waiters = list(self._waiters)  # (emptied in place: give_back_idle reads this queue)
            self._waiters.clear()
            for waiter in waiters:
                waiter.closed = True
                waiter.lock.release()
        for entry in entries:
            _close_quietly(entry.conn)
        self._finalizer.detach()
        thread = self._thread
        if thread is not None and thread is not threading.current_thread():
            thread.join(timeout=1.0)

    @property
    def closed(self) -> bool:
        return self._state.closed

    def __len__(self) -> int:
        with self._lock:
            return len(self._state.entries)

    def lent(self) -> list[tuple[C, int]]:
        """Every pooled connection with the calls it carries now, oldest first (a snapshot)."""
        with self._lock:
            entries = sorted(self._state.entries, key=lambda e: e.seq)
            return [(e.conn, e.load()) for e in entries]

    def stats(self) -> PoolStats:
        """A consistent snapshot of the counters."""
        with self._lock:
            entries = self._state.entries
            n = self._counts
            returned = n.returned + count_value(self._fast_returned)  # before the taken: in_use >= 0
            borrowed = n.borrowed + count_value(self._fast_taken)
            return PoolStats(
                created=n.created,
                closed=n.closed,
                borrowed=borrowed,
                returned=returned,
                in_use=borrowed - returned,
                size=len(entries),
                idle=sum(1 for e in entries if e.load() == 0),
                discarded=n.discarded,
                reaped=n.reaped,
                timeouts=n.timeouts,
                keepalives=n.keepalives,
                waiting=len(self._waiters),
            )

    def loads(self) -> list[int]:
        """In-flight calls per connection, in creation order (for tests and metrics)."""
        with self._lock:
            return [e.load() for e in sorted(self._state.entries, key=lambda e: e.seq)]

    def __enter__(self) -> "ConnectionPool[C]":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __repr__(self) -> str:
        s = self.stats()
        return f"<ConnectionPool {self.address!r} size={s.size} in_use={s.in_use} closed={self.closed}>"
