"""Resilience for one server: circuit breaker, call retries, reconnection, metrics hook.

The pieces are pure logic with injectable clocks, sleeps and random sources, so that
tests drive them without waiting:

* :class:`CircuitBreaker` — CLOSED → OPEN → HALF_OPEN, per :class:`BreakerPolicy`.
* :func:`retry_call` — runs one attempt after another per :class:`RetryPolicy`; the
  per-attempt state is a new policy value whose ``history`` the final error carries as
  ``retry_history`` (and the earlier attempts' errors as ``retried_errors``).
* :class:`ReconnectSchedule` — counts connection failures per :class:`ReconnectPolicy`
  and holds the server *unavailable* until :meth:`ReconnectSchedule.reset`.
* :class:`Guard` — breaker + retries + availability + a ``record`` callback, for the
  calls to one server.

Example:
    >>> guard = Guard("everything")
    >>> guard.call(lambda: "ok", tool="echo", safe_to_retry=True)
    'ok'
    >>> guard.breaker.state
    <BreakerState.CLOSED: 'closed'>
"""

from __future__ import annotations

import enum
import logging
import os
import random as _random
import threading
import time
import weakref
from collections import deque
from dataclasses import dataclass
from typing import Any, Callable, TypeVar

from ._errors import (
    ConnectError,
    CircuitOpen,
    MCPError,
    RequestTimeout,
    ServerUnavailable,
    attach_fields,
    counts_as_breaker_failure,
    is_transient,
    may_have_reached_server,
)
from ._policies import BreakerPolicy, ReconnectPolicy, RetryPolicy

__all__ = [
    "BreakerState",
    "BreakerTicket",
    "CircuitBreaker",
    "ReconnectSchedule",
    "Guard",
    "Recorder",
    "retry_call",
    "outcome_of",
    "tool_is_retry_safe",
    "SUCCESS",
    "ERROR",
    "TIMEOUT",
]

log = logging.getLogger("mcpsync.guard")

T = TypeVar("T")

SUCCESS = "success"
ERROR = "error"
TIMEOUT = "timeout"

#: record(server, tool, start, end, outcome) — outcome is "success" | "error" | "timeout";
#: start and end come from the guard's clock (``time.monotonic`` by default).
Recorder = Callable[[str, "str | None", float, float, str], None]


# Objects whose ``_lock`` a forked child must replace: a thread of the parent may have
# held it at the moment of the fork, and would never release it in the child.
_FORK_LOCKED: "weakref.WeakSet[Any]" = weakref.WeakSet()


def _renew_locks_after_fork() -> None:
    for obj in list(_FORK_LOCKED):
        obj._lock = threading.Lock()
        if hasattr(obj, "_run_lock"):
            obj._run_lock = threading.Lock()


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_renew_locks_after_fork)


def tool_is_retry_safe(tool: Any, *, opt_in: bool = False) -> bool:
    """Whether a call of ``tool`` may be repeated without duplicating side effects.

    Args:
        tool: a :class:`~mcpsync._messages.Tool` (or anything with ``annotations``
            carrying ``read_only_hint`` / ``idempotent_hint``), or ``None``.
        opt_in: the caller declares the call safe to repeat.

    Returns:
        True for ``opt_in``, or a tool annotated read-only or idempotent. Annotations
        are hints from the server; an unannotated tool is assumed unsafe.
    """
    if opt_in:
        return True
    annotations = getattr(tool, "annotations", None)
    if annotations is None:
        return False
    if isinstance(annotations, dict):
        return bool(annotations.get("readOnlyHint") or annotations.get("idempotentHint"))
    return bool(getattr(annotations, "read_only_hint", None) or getattr(annotations, "idempotent_hint", None))


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
    it. OPEN: calls fail fast with :class:`CircuitOpen` (``retry_after`` = seconds left of
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
        self._is_failure = is_failure
        self._listeners: list[BreakerListener] = [on_change] if on_change is not None else []
        self._lock = threading.Lock()
        self._state = BreakerState.CLOSED
        self._generation = 0
        self._failures: deque[float] = deque()
        self._opened_at = 0.0
        self._trials = 0
        # counters, for tests and metrics
        self.admitted = 0
        self.rejected = 0
        self.successes = 0
        self.failures = 0
        self.neutral = 0
        #: the latest transitions, oldest first (bounded: a long-lived client flaps for months)
        self.transitions: deque[tuple[BreakerState, BreakerState]] = deque(maxlen=1024)
        self.transition_count = 0
        _FORK_LOCKED.add(self)

    # -- observation ------------------------------------------------------------

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
                self.admitted += 1
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
                outcome = ERROR if self._is_failure(error) else "neutral"
            except Exception:  # a broken predicate must not break the call path
                log.exception("breaker failure predicate raised")
                outcome = "neutral"
        with self._lock:
            now = self._clock()
            changes = self._tick(now)
            if outcome == SUCCESS:
                self.successes += 1
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
                        if len(self._failures) >= self.policy.threshold:
                            changes.append(self._move(BreakerState.OPEN, now))
                elif self._state is BreakerState.HALF_OPEN:
                    if trial:
                        self._trials -= 1
                    if outcome == ERROR:
                        changes.append(self._move(BreakerState.OPEN, now))
                    elif outcome == SUCCESS and trial:
                        changes.append(self._move(BreakerState.CLOSED, now))
        self._notify(changes)

    def _admit_fast(self, success: bool = False) -> None:
        """Count a call the guard ran while CLOSED without a ticket (its fast path)."""
        lock = self._lock
        lock.acquire()  # not ``with``: on CPython 3.11 that costs over twice as much
        self.admitted += 1
        if success:
            self.successes += 1
        lock.release()

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

    def _tick(self, now: float) -> list[tuple[BreakerState, BreakerState]]:
        if self._state is BreakerState.OPEN and now - self._opened_at >= self.policy.cooldown:
            return [self._move(BreakerState.HALF_OPEN, now)]
        return []

    def _move(self, new: BreakerState, now: float) -> tuple[BreakerState, BreakerState]:
        old = self._state
        self._state = new
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


def retry_call(
    fn: Callable[[], T],
    policy: RetryPolicy = RetryPolicy.DEFAULT,
    *,
    safe_to_retry: bool | Callable[[], bool] = False,
    sleep: Callable[[float], None] = time.sleep,
    rand: Callable[[], float] = _random.random,
    on_retry: Callable[[RetryPolicy, BaseException, float], None] | None = None,
    give_up: Callable[[BaseException, float], bool] | None = None,
    first_error: MCPError | None = None,
) -> T:
    """Call ``fn`` until it succeeds or the policy says stop.

    Args:
        fn: one attempt, no arguments. Only :class:`MCPError` subclasses are retried;
            anything else propagates at once.
        policy: the schedule; each failed attempt makes a new value with one more
            ``history`` entry (``policy`` itself is never changed).
        safe_to_retry: the call has no side effects to duplicate (read-only or
            idempotent tool, or opt-in). When False only attempts that never left the
            client (ConnectError, CircuitOpen, PoolTimeout, ``sent=False``) are retried.
            A callable is asked once, only when an attempt that may have reached the
            server failed (``call_tool`` learns a tool's annotations only then).
            An error's ``retry_after`` (seconds, from HTTP ``Retry-After``) lengthens
            the wait before the next attempt.
        sleep: waits between attempts (inject for tests).
        rand: jitter source in [0, 1).
        on_retry: called ``(policy, error, wait)`` before each wait.
        give_up: asked ``(error, wait)`` before each retry; True ends the call with this
            error (the guard stops as soon as its breaker opened, or when the wait would
            pass the call's budget).
        first_error: the error of a first attempt already made by the caller; the
            schedule continues from it instead of calling ``fn`` first.

    Returns:
        What ``fn`` returned.

    Raises:
        MCPError: the last attempt's error, with ``retry_history`` attached (the final
            policy's ``history``: one ``(error class name, seconds waited before it)``
            pair per attempt, so ``len(exc.retry_history)`` is the number of attempts)
            and ``retried_errors``: the errors of the attempts before it, oldest first
            (each one was retried, so for a call that is not safe to retry each of them
            never reached the server).

    Example:
        >>> from mcpsync._errors import ConnectError
        >>> calls = []
        >>> def flaky():
        ...     calls.append(1)
        ...     if len(calls) < 3:
        ...         raise ConnectError("refused")
        ...     return "ok"
        >>> retry_call(flaky, sleep=lambda s: None)
        'ok'
    """
    waited = 0.0
    pending = first_error
    retried: list[MCPError] = []
    safe: bool | None = safe_to_retry if isinstance(safe_to_retry, bool) else None
    while True:
        try:
            if pending is not None:
                exc, pending = pending, None
                raise exc
            return fn()
        except MCPError as exc:
            policy = policy.increment(exc, waited)
            if safe is None and is_transient(exc) and may_have_reached_server(exc):
                safe = bool(safe_to_retry())  # type: ignore[operator]  # asked once, when it matters
            wait = policy.next_wait(rand) if policy.should_retry(exc, safe=bool(safe)) else None
            retry_after = getattr(exc, "retry_after", None)
            if wait is not None and isinstance(retry_after, (int, float)) and retry_after > wait:
                wait = float(retry_after)  # the server said when (HTTP Retry-After)
            if wait is not None and give_up is not None and give_up(exc, wait):
                wait = None
            if wait is None:
                # (an attempt may re-raise an earlier attempt's error object: never its own)
                attach_fields(exc, retry_history=policy.history, retried_errors=tuple(e for e in retried if e is not exc))
                raise
            retried.append(exc)
            if on_retry is not None:
                on_retry(policy, exc, wait)
            log.debug("retry %d after %s in %.2f s", policy.attempts, type(exc).__name__, wait)
        if wait > 0:
            sleep(wait)
        waited = wait


class ReconnectSchedule:
    """Connection-failure bookkeeping for one server, per :class:`ReconnectPolicy`.

    Each :meth:`failure` returns the wait before the next attempt (0, 1, 2, 4, 8 s);
    the ``max_failures``-th marks the server unavailable: :meth:`check` then raises
    :class:`ServerUnavailable` until :meth:`reset`. :meth:`success` clears the count.
    Thread-safe; ``on_unavailable(error)`` runs once per marking, outside the lock.

    Args:
        policy: the schedule.
        name: the server id (on :class:`ServerUnavailable` as ``server``).
        on_unavailable: told when the server is marked unavailable.
        rand: jitter source.

    Example:
        >>> s = ReconnectSchedule()
        >>> [s.failure() for _ in range(6)], s.unavailable
        ([0.0, 1.0, 2.0, 4.0, 8.0, None], True)
    """

    def __init__(
        self,
        policy: ReconnectPolicy = ReconnectPolicy.DEFAULT,
        *,
        name: str = "",
        on_unavailable: Callable[[ServerUnavailable], None] | None = None,
        rand: Callable[[], float] = _random.random,
    ) -> None:
        self.policy = policy
        self.name = name
        self.on_unavailable = on_unavailable
        self._rand = rand
        self._lock = threading.Lock()
        self._run_lock = threading.Lock()  # one rebuild at a time: failures count once
        self._failures = 0
        self._unavailable: ServerUnavailable | None = None
        #: the latest failures as (error class name, delay before the next attempt or None)
        self.history: deque[tuple[str, float | None]] = deque(maxlen=64)
        _FORK_LOCKED.add(self)

    @property
    def failures(self) -> int:
        """Consecutive failures so far."""
        with self._lock:
            return self._failures

    @property
    def unavailable(self) -> bool:
        """True once the server was marked unavailable (until :meth:`reset`)."""
        with self._lock:
            return self._unavailable is not None

    def check(self) -> None:
        """Raise :class:`ServerUnavailable` if the server is marked unavailable."""
        with self._lock:
            marked = self._unavailable
        if marked is not None:
            raise ServerUnavailable(marked.message, server=self.name, failures=marked.failures)

    def failure(self, error: BaseException | None = None) -> float | None:
        """Record one failure.

        Returns:
            Seconds to wait before the next attempt, or ``None``: the server is now (or
            already was) unavailable, or ``error`` is never retried.
        """
        with self._lock:
            if self._unavailable is not None:
                return None
            if error is not None and isinstance(error, self.policy.never_retry):
                self.history.append((type(error).__name__, None))
                return None
            self._failures += 1
            delay = self.policy.delay_after(self._failures, self._rand)
            self.history.append((type(error).__name__ if error is not None else "failure", delay))
            marked = None
            if delay is None:
                marked = self._unavailable = ServerUnavailable(
                    f"{self.name or 'server'} is unavailable after {self._failures} failed connection attempts",
                    server=self.name,
                    failures=self._failures,
                )
        if marked is not None and self.on_unavailable is not None:
            try:
                self.on_unavailable(marked)
            except Exception:
                log.exception("on_unavailable callback raised")
        return delay

    def success(self) -> None:
        """A connection was (re)established: the count starts again."""
        with self._lock:
            self._failures = 0

    def reset(self) -> None:
        """Clear the unavailable mark and the count (an explicit ``reconnect()``)."""
        with self._lock:
            self._failures = 0
            self._unavailable = None

    def run(
        self,
        connect: Callable[[], T],
        *,
        lost: BaseException | None = None,
        sleep: Callable[[float], None] = time.sleep,
        deadline: float | None = None,
    ) -> T:
        """Connect on the schedule until it works or the server is marked unavailable.

        One thread runs the schedule at a time; the others wait for it (the wait is
        bounded by the schedule itself) and then find the server either reachable (they
        connect at once) or marked unavailable (they raise at once), so concurrent
        rebuilders never count one outage twice.

        Args:
            connect: one attempt (raises on failure).
            lost: the error that killed the previous connection; it is failure 1, so a
                rebuild gets attempts at 0, 1, 2, 4 and 8 s.
            sleep: waits between attempts (inject for tests).
            deadline: a ``time.monotonic()`` instant the caller cannot wait past (its
                borrow or request timeout). A wait that would end after it is not made:
                :class:`ConnectError` (``sent=False``) is raised instead and the failure
                count stays, so the next caller continues the schedule.

        Returns:
            What ``connect`` returned.

        Raises:
            ServerUnavailable: from the failure that marked it (``from`` the last
                error), or at once if it already was marked.
            AuthError: and the policy's other ``never_retry`` errors, as raised.
        """
        if deadline is None:
            with self._run_lock:
                return self._run(connect, lost, sleep, None)
        if not self._run_lock.acquire(timeout=max(0.0, deadline - time.monotonic())):
            raise ConnectError(f"{self.name or 'server'}: still reconnecting when the time ran out", sent=False)
        try:
            return self._run(connect, lost, sleep, deadline)
        finally:
            self._run_lock.release()

    def _run(
        self,
        connect: Callable[[], T],
        lost: BaseException | None,
        sleep: Callable[[float], None],
        deadline: float | None,
    ) -> T:
        self.check()
        delay = self.failure(lost) if lost is not None else 0.0
        while True:
            if delay is None:
                self.check()
                raise lost  # type: ignore[misc]  # never-retried ``lost``
            if delay > 0 and deadline is not None and time.monotonic() + delay > deadline:
                raise ConnectError(
                    f"{self.name or 'server'}: reconnecting; the next attempt is due in {delay:.1f} s, "
                    "after this call's time runs out",
                    sent=False,
                )
            if delay > 0:
                sleep(delay)
            try:
                result = connect()
            except BaseException as exc:
                if not isinstance(exc, Exception) or isinstance(exc, self.policy.never_retry):
                    raise
                delay = self.failure(exc)
                if delay is None:
                    try:
                        self.check()
                    except ServerUnavailable as unavailable:
                        raise unavailable from exc
                    raise
                continue
            self.success()
            return result


def outcome_of(error: BaseException | None) -> str:
    """The metrics outcome of a call: ``"success"``, ``"timeout"`` or ``"error"``."""
    if error is None:
        return SUCCESS
    if isinstance(error, RequestTimeout) or getattr(error, "timeout", False) is True:
        return TIMEOUT
    return ERROR


class Guard:
    """Breaker + retries + availability + metrics for the calls to one server.

    Each attempt passes the reconnect schedule's availability check and the breaker;
    failed attempts are retried per the policy, until the breaker opens (the call then
    ends with its last real error; later calls fail fast with :class:`CircuitOpen`);
    each call (not each attempt) is reported once to
    ``record(server, tool, start, end, outcome)``.

    Args:
        server: the server id (in errors and metrics).
        retry: the default retry policy (per call: ``call(..., retry=...)``).
        breaker: a policy (a breaker is built with ``clock``) or a shared
            :class:`CircuitBreaker`.
        reconnect: the server's :class:`ReconnectSchedule` (``None``: no availability
            check).
        record: the metrics callback; its exceptions are logged, never raised.
        clock: monotonic clock for the breaker and the metrics.
        sleep: waits between retries.
        rand: jitter source.
        on_breaker_change: ``(old, new)`` after each breaker transition.

    Example:
        >>> seen = []
        >>> g = Guard("s1", record=lambda *a: seen.append(a[-1]))
        >>> g.call(lambda: 42, tool="add")
        42
        >>> seen
        ['success']
    """

    def __init__(
        self,
        server: str,
        *,
        retry: RetryPolicy = RetryPolicy.DEFAULT,
        breaker: BreakerPolicy | CircuitBreaker = BreakerPolicy.DEFAULT,
        reconnect: ReconnectSchedule | None = None,
        record: Recorder | None = None,
        clock: Callable[[], float] = time.monotonic,
        sleep: Callable[[float], None] = time.sleep,
        rand: Callable[[], float] = _random.random,
        on_breaker_change: BreakerListener | None = None,
    ) -> None:
        self.server = server
        self.retry = retry
        if isinstance(breaker, CircuitBreaker):
            self.breaker = breaker
            if on_breaker_change is not None:
                breaker.add_listener(on_breaker_change)
        else:
            self.breaker = CircuitBreaker(breaker, clock=clock, on_change=on_breaker_change, name=server)
        self.reconnect = reconnect
        self.record = record
        self._clock = clock
        self._sleep = sleep
        self._rand = rand


    def _attempt(self, fn: Callable[[], T]) -> T:
        if self.reconnect is not None:
            self.reconnect.check()
        return self.breaker.call(fn)

    def call(
        self,
        fn: Callable[[], T],
        *,
        safe_to_retry: bool | Callable[[], bool] = False,
        tool: str | None = None,
        retry: RetryPolicy | None = None,
        budget: float | None = None,
    ) -> T:
        """Run ``fn`` (one attempt, no arguments) under the breaker with retries.

        Args:
            fn: the attempt: borrow a connection, send, wait for the answer.
            safe_to_retry: True for read-only / idempotent tools or on opt-in; False
                retries only attempts that never left the client.
            tool: the tool name, for metrics.
            retry: a per-call retry policy (default the guard's).
            budget: seconds for the whole call on the guard's clock; no retry is made
                whose wait would end past it (each attempt bounds itself with its own
                request timeout).

        Returns:
            What ``fn`` returned (an ``isError`` tool result is a success here).

        Raises:
            CircuitOpen: the breaker is open (not retried).
            ServerUnavailable: the server is marked unavailable.
            MCPError: the last attempt's error, carrying ``retry_history`` and
                ``retried_errors`` (see :func:`retry_call`).
        """
        start = self._clock() if self.record is not None or budget is not None else 0.0
        breaker = self.breaker
        reconnect = self.reconnect
        # Fast path: a CLOSED breaker admits every call and a success changes none of
        # its state, so the first attempt runs without taking the breaker's lock.
        if breaker._state is BreakerState.CLOSED and (reconnect is None or reconnect._unavailable is None):
            try:
                result = fn()
            except BaseException as exc:
                return self.after_first_failure(exc, fn, start, safe_to_retry=safe_to_retry, tool=tool,
                                                retry=retry, budget=budget)
            breaker._admit_fast(success=True)
            if self.record is not None:
                self._record(tool, start, None)
            return result
        return self._retrying(fn, start, None, safe_to_retry, tool, retry, budget)

    def ready(self) -> bool:
        """True when a first attempt may run unguarded: the breaker is CLOSED and the
        server is not marked unavailable (a caller's fast path; see :meth:`call`).
        A caller that runs the attempt itself reports a success with :meth:`succeeded`
        and hands an exception to :meth:`after_first_failure`."""
        reconnect = self.reconnect
        return self.breaker._state is BreakerState.CLOSED and (reconnect is None or reconnect._unavailable is None)

    def begin(self) -> float | None:
        """Start a call whose first attempt the caller runs itself (its fast path).

        Returns:
            The start on the guard's clock when the first attempt may run unguarded (the
            breaker is CLOSED and the server is not marked unavailable), else ``None``:
            go through :meth:`call`. After an unguarded attempt, report a success with
            :meth:`succeeded` or hand its exception to :meth:`after_first_failure`.
        """
        reconnect = self.reconnect
        if self.breaker._state is BreakerState.CLOSED and (reconnect is None or reconnect._unavailable is None):
            return self._clock()
        return None

    def succeeded(self, tool: str | None, start: float) -> None:
        """Count a first attempt that succeeded on the fast path (``start`` from the
        guard's clock, taken before it)."""
        breaker = self.breaker
        lock = breaker._lock
        lock.acquire()  # the breaker's _admit_fast(True), inline: this runs on every call
        breaker.admitted += 1
        breaker.successes += 1
        lock.release()
        record = self.record
        if record is not None:
            try:  # _record_outcome, inline: this runs on every call
                record(self.server, tool, start, self._clock(), SUCCESS)
            except Exception:
                log.exception("metrics recorder raised")

    def after_first_failure(
        self,
        exc: BaseException,
        fn: Callable[[], T],
        start: float,
        *,
        safe_to_retry: bool | Callable[[], bool] = False,
        tool: str | None = None,
        retry: RetryPolicy | None = None,
        budget: float | None = None,
    ) -> T:
        """Go on from a fast-path first attempt that raised ``exc``: the breaker counts
        it, an MCP error is retried per the policy (``fn`` is the next attempt), any
        other exception is recorded and re-raised."""
        breaker = self.breaker
        breaker._admit_fast()
        breaker.release(None, exc)
        if not isinstance(exc, MCPError):
            if self.record is not None:
                self._record(tool, start, exc)
            raise exc
        return self._retrying(fn, start, exc, safe_to_retry, tool, retry, budget)

    def _retrying(
        self,
        fn: Callable[[], T],
        start: float,
        first: MCPError | None,
        safe_to_retry: bool | Callable[[], bool],
        tool: str | None,
        retry: RetryPolicy | None,
        budget: float | None,
    ) -> T:
        error: BaseException | None = None

        def give_up(exc: BaseException, wait: float) -> bool:
            if budget is not None and self._clock() + wait - start > budget:
                return True
            return self.breaker.state is BreakerState.OPEN

        try:
            return retry_call(
                lambda: self._attempt(fn),
                retry if retry is not None else self.retry,
                safe_to_retry=safe_to_retry,
                sleep=self._sleep,
                rand=self._rand,
                give_up=give_up,
                first_error=first,
            )
        except BaseException as exc:
            error = exc
            raise
        finally:
            if self.record is not None:
                self._record(tool, start, error)

    def _record(self, tool: str | None, start: float, error: BaseException | None) -> None:
        self._record_outcome(tool, start, outcome_of(error))

    def _record_outcome(self, tool: str | None, start: float, outcome: str) -> None:
        try:
            self.record(self.server, tool, start, self._clock(), outcome)  # type: ignore[misc]
        except Exception:
            log.exception("metrics recorder raised")
