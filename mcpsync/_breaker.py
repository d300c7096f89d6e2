"""The circuit breaker of one server: CLOSED → OPEN → HALF_OPEN, per :class:`BreakerPolicy`.

Pure logic with an injectable clock, so that tests drive it without waiting. The
:class:`~mcpsync._guard.Guard` puts it together with the retry schedule of
:mod:`mcpsync._retry`.

This module is also the home of the after-fork lock renewal shared by the breaker
and :class:`~mcpsync._retry.ReconnectSchedule` (``_FORK_LOCKED``).

Example:
    >>> b = CircuitBreaker(BreakerPolicy(threshold=1, cooldown=10))
    >>> b.state
    <BreakerState.CLOSED: 'closed'>
"""

from __future__ import annotations

import enum
import itertools
import logging
import os
import threading
import time
import weakref
from collections import deque
from dataclasses import dataclass
from typing import Any, Callable, TypeVar

from ._errors import CircuitOpen, counts_as_breaker_failure
from ._policies import BreakerPolicy
from ._speedups import FastPath, Gate

__all__ = [
    "BreakerListener",
    "BreakerState",
    "BreakerTicket",
    "CircuitBreaker",
    "SUCCESS",
    "ERROR",
    "TIMEOUT",
]

log = logging.getLogger("mcpsync.guard")

T = TypeVar("T")

#: The outcomes of a call, as the breaker and the metrics count them.
SUCCESS = "success"
ERROR = "error"
TIMEOUT = "timeout"

# Objects whose ``_lock`` a forked child must replace: a thread of the parent may have
# held it at the moment of the fork, and would never release it in the child.
_FORK_LOCKED: "weakref.WeakSet[Any]" = weakref.WeakSet()


def count_value(count: "itertools.count[int]") -> int:
    """What ``next(count)`` would give, without taking it (its repr is ``count(N)``)."""
    return int(repr(count)[6:-1])


def _renew_locks_after_fork() -> None:
    for obj in list(_FORK_LOCKED):
        obj._lock = threading.Lock()
        if hasattr(obj, "_run_lock"):
            obj._run_lock = threading.Lock()


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_renew_locks_after_fork)

#: a mark of the window's successes is taken at every 16th (FastPath.succeeded's too)
_MARK_EVERY = 16


class BreakerState(str, enum.Enum):
    """The three states of a circuit breaker."""

    CLOSED = "closed"
    OPEN = "open"
    HALF_OPEN = "half_open"


@dataclass(frozen=True, slots=True)
class BreakerTicket:
    """Admission to one call, handed back to :meth:`CircuitBreaker.release`.

    Attributes:
        generation: the breaker's state generation when admitted; results of calls
            admitted in an earlier generation do not move the breaker.
        trial: the call is one of the HALF_OPEN trial calls.
    """

    generation: int
    trial: bool = False


#: on_change(old, new) — called outside the breaker's lock, on the thread that caused it.
BreakerListener = Callable[[BreakerState, BreakerState], None]


class CircuitBreaker:
    """A thread-safe circuit breaker for one server.

    CLOSED: calls pass; ``threshold`` counted failures within the sliding ``window`` open
    it, when they are also ``failure_rate`` of the window's calls once it holds
    ``min_calls`` (see :class:`BreakerPolicy`). OPEN: calls fail fast with :class:`CircuitOpen` (``retry_after`` = seconds left of
    the cooldown) for ``cooldown`` seconds. HALF_OPEN: at most ``half_open_max`` trial
    calls at a time; the first trial success closes it, a trial failure reopens it.
    Which errors count is decided by ``is_failure`` (default
    :func:`~mcpsync._errors.counts_as_breaker_failure`); other outcomes are neutral.

    Args:
        policy: the numbers (``BreakerPolicy.DISABLED``: always admits, never opens).
        clock: a monotonic clock in seconds (inject a fake for tests).
        on_change: called ``(old, new)`` after each transition, outside the lock.
        is_failure: the predicate that decides whether an exception counts.
        name: the server id, put on :class:`CircuitOpen` as ``server``.

    Example:
        >>> from mcpsync._errors import ConnectionClosed
        >>> now = [0.0]
        >>> b = CircuitBreaker(BreakerPolicy(threshold=1, cooldown=10), clock=lambda: now[0])
        >>> b.release(b.acquire(), ConnectionClosed("gone"))
        >>> b.state, round(b.retry_after(), 1)
        (<BreakerState.OPEN: 'open'>, 10.0)
        >>> now[0] = 10.0
        >>> b.state
        <BreakerState.HALF_OPEN: 'half_open'>
    """

    def __init__(
        self,
        policy: BreakerPolicy = BreakerPolicy.DEFAULT,
        *,
        clock: Callable[[], float] = time.monotonic,
        on_change: BreakerListener | None = None,
        is_failure: Callable[[BaseException], bool] = counts_as_breaker_failure,
        name: str = "",
    ) -> None:
        self.policy = policy
        self.name = name
        self._clock = clock
        #: whether an exception counts as the server's fault (the policy's predicate)
        self.is_failure = is_failure
        self._listeners: list[BreakerListener] = [on_change] if on_change is not None else []
        self._lock = threading.Lock()
        self._state = BreakerState.CLOSED
        #: shut while not CLOSED: what a guard's fast path reads (see :meth:`fast_path`)
        self.gate = Gate()
        self._generation = 0
        self._failures: deque[float] = deque()
        self._opened_at = 0.0
        self._trials = 0
        # counters, for tests and metrics (admitted, successes: properties below)
        self._admitted = 0
        self._successes = 0
        #: calls the guard ran and saw succeed on its fast path: ``next()`` on a count is
        #: atomic under the GIL, so they are counted without the lock
        self._fast_ok = itertools.count()
        self.rejected = 0
        self.failures = 0
        self.neutral = 0
        #: the latest transitions, oldest first (bounded: a long-lived client flaps for months)
        self.transitions: deque[tuple[BreakerState, BreakerState]] = deque(maxlen=1024)
        self.transition_count = 0
        #: (time, successes so far), at most 64 a window, taken at failures and every 16th
        #: success (the fast path counts the others without a clock): the window's successes
        #: are read between the two marks around its start
        self._marks: deque[tuple[float, int]] = deque([(clock(), 0)], maxlen=128)
        _FORK_LOCKED.add(self)

    # -- observation ------------------------------------------------------------

    @property
    def admitted(self) -> int:
        """Calls let through so far (the guard's fast-path ones included)."""
        return self._admitted + count_value(self._fast_ok)

    @property
    def successes(self) -> int:
        """Admitted calls that succeeded so far."""
        return self._successes + count_value(self._fast_ok)

    def add_listener(self, listener: BreakerListener) -> None:
        """Call ``listener(old, new)`` after every transition (outside the lock)."""
        with self._lock:
            self._listeners.append(listener)

    @property
    def state(self) -> BreakerState:
        """The current state (an elapsed cooldown turns OPEN into HALF_OPEN here)."""
        with self._lock:
            changes = self._tick(self._clock())
            state = self._state
        self._notify(changes)
        return state

    def retry_after(self) -> float:
        """Seconds until the breaker admits calls again (0 unless OPEN)."""
        with self._lock:
            if self._state is not BreakerState.OPEN:
                return 0.0
            return max(0.0, self._opened_at + self.policy.cooldown - self._clock())

    def failure_count(self) -> int:
        """Counted failures inside the current sliding window (CLOSED state)."""
        with self._lock:
            self._trim(self._clock())
            return len(self._failures)

    def window_calls(self) -> tuple[int, int]:
        """(counted failures, successes) inside the sliding window; the successes are
        estimated between the breaker's marks (exact at each slow-path event)."""
        with self._lock:
            now = self._clock()
            self._trim(now)
            return len(self._failures), self._window_successes(now)

    # -- the call protocol --------------------------------------------------------

    def acquire(self) -> BreakerTicket:
        """Admit one call or raise.

        Returns:
            The ticket to pass to :meth:`release` when the call ends, on every path.

        Raises:
            CircuitOpen: the breaker is OPEN (``retry_after`` = seconds of cooldown
                left), or HALF_OPEN with every trial slot taken (``retry_after`` = 0).
        """
        if not self.policy.enabled:
            return BreakerTicket(-1)
        with self._lock:
            now = self._clock()
            changes = self._tick(now)
            state = self._state
            if state is BreakerState.CLOSED:
                ticket: BreakerTicket | None = BreakerTicket(self._generation)
            elif state is BreakerState.HALF_OPEN and self._trials < self.policy.half_open_max:
                self._trials += 1
                ticket = BreakerTicket(self._generation, trial=True)
            else:
                ticket = None
            if ticket is None:
                self.rejected += 1
                retry_after = (
                    max(0.0, self._opened_at + self.policy.cooldown - now) if state is BreakerState.OPEN else 0.0
                )
            else:
                self._admitted += 1
        self._notify(changes)
        if ticket is None:
            raise CircuitOpen(
                f"circuit breaker for {self.name or 'the server'} is {state.value}",
                retry_after=retry_after,
                server=self.name,
                state=state.value,
            )
        return ticket

    def release(self, ticket: BreakerTicket | None, error: BaseException | None = None) -> None:
        """Report how an admitted call ended.

        Args:
            ticket: from :meth:`acquire`; ``None`` reports a failure seen outside a call
                (a connection that died under no call), which counts like one from a
                call admitted now.
            error: ``None`` for success, else what the call raised.
        """
        if not self.policy.enabled or (ticket is not None and ticket.generation < 0):
            return
        if error is None:
            outcome = SUCCESS
        else:
            try:
                outcome = ERROR if self.is_failure(error) else "neutral"
            except Exception:  # a broken predicate must not break the call path
                log.exception("breaker failure predicate raised")
                outcome = "neutral"
        with self._lock:
            now = self._clock()
            changes = self._tick(now)
            if outcome == SUCCESS:
                self._successes += 1
                if not self._successes % _MARK_EVERY:
                    self._mark(now)
            elif outcome == ERROR:
                self.failures += 1
            else:
                self.neutral += 1
            current = ticket is None or ticket.generation == self._generation
            trial = ticket is not None and ticket.trial
            if current:
                if self._state is BreakerState.CLOSED:
                    if outcome == ERROR:
                        self._trim(now)
                        self._failures.append(now)
                        if len(self._failures) >= self.policy.threshold and self._rate_reached(now):
                            changes.append(self._move(BreakerState.OPEN, now))
                        self._mark(now)
                elif self._state is BreakerState.HALF_OPEN:
                    if trial:
                        self._trials -= 1
                    if outcome == ERROR:
                        changes.append(self._move(BreakerState.OPEN, now))
                    elif outcome == SUCCESS and trial:
                        changes.append(self._move(BreakerState.CLOSED, now))
        self._notify(changes)

    def admit_fast(self, success: bool = False) -> None:
        """Count a call a guard ran while CLOSED without a ticket (its fast path)."""
        with self._lock:  # (not acquire() ... release(): a KeyboardInterrupt between them keeps the lock)
            self._admitted += 1
            if success:
                self._successes += 1
                if not self._successes % _MARK_EVERY:
                    self._mark(self._clock())

    def _mark_now(self) -> None:
        """A mark of the window's successes (the compiled fast path's every 16th success)."""
        with self._lock:
            self._mark(self._clock())

    def fast_path(
        self,
        reconnect_gate: Gate | None,
        record: Callable[[str, str | None, float, float, str], object] | None,
        server: str,
        clock: Callable[[], float],
        failed: Callable[[], object],
    ) -> FastPath:
        """A guard's fast path over this breaker: ``begin()`` admits a first attempt
        without the lock while this breaker is CLOSED (and ``reconnect_gate``, the server's
        unavailable mark, is open); ``succeeded(tool, start)`` counts its success here and
        records it with ``record(server, tool, start, end, "success")`` (``failed()`` is told
        when the recorder raises). Both are one call into C in the compiled build."""
        return FastPath(self.gate, Gate() if reconnect_gate is None else reconnect_gate, self._fast_ok,
                        self._mark_now, record, server, clock, SUCCESS, failed)

    def call(self, fn: Callable[[], T]) -> T:
        """Run ``fn`` under the breaker: acquire, call, release on every path."""
        ticket = self.acquire()
        try:
            result = fn()
        except BaseException as exc:
            self.release(ticket, exc)
            raise
        self.release(ticket, None)
        return result

    def reset(self) -> None:
        """Force CLOSED with an empty window (e.g. after an explicit reconnect)."""
        with self._lock:
            changes = [self._move(BreakerState.CLOSED, self._clock())] if self._state is not BreakerState.CLOSED else []
            self._failures.clear()
        self._notify(changes)

    # -- internals (called with the lock held) ------------------------------------

    def _trim(self, now: float) -> None:
        horizon = now - self.policy.window
        while self._failures and self._failures[0] <= horizon:
            self._failures.popleft()

    def _mark(self, now: float) -> None:
        """Note the successes so far (not within a 64th of the window of the last mark);
        keep one mark at or before the window's start."""
        marks = self._marks
        if now - marks[-1][0] < self.policy.window / 64.0:
            return
        marks.append((now, self._successes + count_value(self._fast_ok)))
        horizon = now - self.policy.window
        while len(marks) > 2 and marks[1][0] <= horizon:
            marks.popleft()

    def _window_successes(self, now: float) -> int:
        """Successes since ``now - window``: those after the first mark past its start,
        and of those between that mark and the one before, a share by time when the marks
        are close (a steady load spreads them evenly). Marks far apart mean the successes
        stopped: a 16th success a 64th of the window after a mark makes the next mark, so
        they came right after the earlier one (at most 30 later: not counted)."""
        total = self._successes + count_value(self._fast_ok)
        spacing = self.policy.window / 64.0
        start = now - self.policy.window
        t0, c0 = self._marks[0]
        if t0 >= start:
            return total - c0
        for t1, c1 in self._marks:
            if t1 > start:
                break
            t0, c0 = t1, c1
        else:
            t1, c1 = now, total
        between = c1 - c0
        late = between * ((t1 - start) / (t1 - t0)) if t1 > t0 else 0.0
        if start - t0 >= spacing:
            late = 0.0
        return max(int(total - c1 + late), 0)

    def _rate_reached(self, now: float) -> bool:
        """Whether the window's failures are also ``failure_rate`` of its calls (or the
        window holds too few calls to ask: then the count alone decides)."""
        policy = self.policy
        if policy.failure_rate <= 0.0:
            return True
        failures = len(self._failures)
        calls = failures + self._window_successes(now)
        if calls < policy.min_calls:
            return True
        if failures >= policy.failure_rate * calls:
            return True
        log.debug("circuit breaker %s: %d failures are %.0f %% of %d calls: stays closed",
                  self.name, failures, 100.0 * failures / calls, calls)
        return False

    def _tick(self, now: float) -> list[tuple[BreakerState, BreakerState]]:
        if self._state is BreakerState.OPEN and now - self._opened_at >= self.policy.cooldown:
            return [self._move(BreakerState.HALF_OPEN, now)]
        return []

    def _move(self, new: BreakerState, now: float) -> tuple[BreakerState, BreakerState]:
        old = self._state
        self._state = new
        self.gate.shut = new is not BreakerState.CLOSED
        self._generation += 1
        self._trials = 0
        self._failures.clear()
        if new is BreakerState.OPEN:
            self._opened_at = now
        self.transitions.append((old, new))
        self.transition_count += 1
        return old, new

    def _notify(self, changes: list[tuple[BreakerState, BreakerState]]) -> None:
        if not changes:
            return
        with self._lock:
            listeners = list(self._listeners)
        for old, new in changes:
            log.info("circuit breaker %s: %s -> %s", self.name, old.value, new.value)
            for listener in listeners:
                try:
                    listener(old, new)
                except Exception:
                    log.exception("circuit breaker listener raised")
