"""The types of :mod:`mcpsync._pool`, its seam with the rest of the package: what a pooled
connection must offer (:class:`PoolableConnection`), the stats snapshot, one borrow
(:class:`Lease`) and what it needs of its pool (:class:`Lender`); and the records the pool
keeps under its lock (:class:`Entry` per connection, :class:`Waiter` per queued borrower,
:class:`PoolState`, :class:`Counts`), which only the pool changes.

Example:
    >>> PoolStats(created=1, closed=0, borrowed=1, returned=1, in_use=0, size=1, idle=1,
    ...           discarded=0, reaped=0, timeouts=0, keepalives=0).in_use
    0
"""

from __future__ import annotations

import threading
from collections import deque
from dataclasses import dataclass
from types import TracebackType
from typing import Any, Generic, Protocol, TypeVar

from ._errors import ConnectionClosed

__all__ = ["PoolableConnection", "PoolStats", "Lease", "Lender", "connection_is_broken", "Counts", "Entry", "PoolState", "Waiter"]


class PoolableConnection(Protocol):
    """What the pool needs of a connection (a :class:`~mcpsync._channel.Channel` has it)."""

    def alive(self) -> bool: ...

    def close(self) -> None: ...


C = TypeVar("C", bound=PoolableConnection)


def connection_is_broken(exc: BaseException) -> bool:
    """Default verdict on a call's error: the connection itself died."""
    return isinstance(exc, ConnectionClosed)


@dataclass(slots=True)
class Counts:
    """The pool's running counts behind :class:`PoolStats` (changed under its lock), kept
    apart so that the pool has fewer attributes than CPython keeps inline (30)."""

    created: int = 0
    closed: int = 0
    borrowed: int = 0
    returned: int = 0
    discarded: int = 0
    reaped: int = 0
    timeouts: int = 0
    keepalives: int = 0


@dataclass(frozen=True, slots=True)
class PoolStats:
    """A snapshot of the pool's counters.

    Attributes:
        created: connections opened.
        closed: connections closed (reaped, discarded or at ``close()``).
        borrowed: successful borrows.
        returned: leases given back.
        in_use: leases not yet given back (``borrowed - returned``).
        size: connections in the pool now.
        idle: connections with no call in flight.
        discarded: connections dropped as dead or broken.
        reaped: idle connections closed by :meth:`ConnectionPool.reap`.
        timeouts: borrows that gave up after the borrow timeout.
        keepalives: keepalive calls made.
        waiting: borrowers queued for capacity now.
    """

    created: int
    closed: int
    borrowed: int
    returned: int
    in_use: int
    size: int
    idle: int
    discarded: int
    reaped: int
    timeouts: int
    keepalives: int
    waiting: int = 0


class Entry(Generic[C]):
    """A pooled connection. ``in_flight``: calls on it by the pool's lock; ``claims``: the
    lone caller's hold on it, taken without the lock (see ConnectionPool.take_idle)."""

    __slots__ = ("conn", "in_flight", "claims", "last_used", "last_keepalive", "dead", "seq", "retiring")

    def __init__(self, conn: C, now: float, seq: int) -> None:
        self.conn = conn
        self.retiring = False  # out of the pool; closed when its last call returns
        self.in_flight = 0
        #: one item per claim: ``append``/``pop``/``len`` are each atomic under the GIL, so a
        #: claimant that finds its claim alone (and ``in_flight`` 0) holds the connection (a
        #: deque: no reallocation as it goes from empty to one and back, which a list does)
        self.claims: deque[None] = deque()
        self.last_used = now
        self.last_keepalive = now
        self.dead = False
        self.seq = seq

    def load(self) -> int:
        """Calls on it, by the lock and by claim."""
        return self.in_flight + len(self.claims)

    def reserve(self, limit: int) -> bool:
        """Under the pool's lock: take a slot if the load stays within ``limit`` (a claim
        made without the lock since the caller looked counts: the slot goes back)."""
        self.in_flight += 1
        if self.load() <= limit:
            return True
        self.in_flight -= 1
        return False


class PoolState(Generic[C]):
    """Everything ``close()`` swaps out; the finalizer holds this, never the pool."""

    __slots__ = ("entries", "closed", "stop")

    def __init__(self) -> None:
        self.entries: list[Entry[C]] = []
        self.closed = False
        self.stop = threading.Event()


class Waiter(Generic[C]):
    """A borrower in the queue: blocked on ``lock`` (held from birth) until it is released
    with ``entry`` (a slot reserved on it), ``create`` (the right to open a connection) or
    ``closed`` set. The fields are written under the pool's lock."""

    __slots__ = ("lock", "entry", "create", "closed")

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.lock.acquire()
        self.entry: Entry[C] | None = None
        self.create = False
        self.closed = False


class Lender(Protocol[C]):
    """What a :class:`Lease` needs of its pool (a :class:`~mcpsync._pool.ConnectionPool`)."""

    epoch: int

    def is_broken(self, exc: BaseException) -> bool: ...

    def give_back(self, entry: Entry[C], broken: bool = False, retire: bool = False) -> None: ...


class Lease(Generic[C]):
    """One borrow: the connection bound to one call until :meth:`release`.

    A context manager: leaving the block returns the connection on every path (result,
    error, timeout, cancellation, ``KeyboardInterrupt``). An error the pool judges
    fatal for the connection (``ConnectionClosed`` by default), a connection no longer
    ``alive()``, or :meth:`mark_broken` discards the connection instead.
    """

    __slots__ = ("_pool", "_entry", "_once", "_broken", "_epoch")

    def __init__(self, pool: Lender[C], entry: Entry[C]) -> None:
        self._pool = pool
        self._entry = entry
        self._once = [None]  # the first release pops it (atomic under the GIL)
        self._broken = False
        self._epoch = pool.epoch

    @property
    def connection(self) -> C:
        """The borrowed connection."""
        return self._entry.conn

    def mark_broken(self) -> None:
        """Have the connection discarded (and later replaced) when the lease ends."""
        self._broken = True

    def release(self, broken: bool = False, retire: bool = False) -> None:
        """Give the connection back (idempotent: a second call does nothing).

        Args:
            broken: the connection is unusable; close and drop it.
            retire: the connection works but should no longer be used (e.g. its
                endpoint is no longer the one to use): no new call gets it, and it is
                closed once the calls still running on it have returned.
        """
        try:
            self._once.pop()
        except IndexError:
            return
        pool = self._pool
        if self._epoch == pool.epoch:  # (else borrowed before a fork, from the parent's connections)
            pool.give_back(self._entry, broken or self._broken, retire)

    def __enter__(self) -> C:
        return self._entry.conn

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        broken = self._broken
        if exc is not None and not broken:
            try:
                broken = self._pool.is_broken(exc) or not self._entry.conn.alive()
            except Exception:
                broken = True
        self.release(broken)
