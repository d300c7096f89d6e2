"""Retries within one call and the reconnection schedule of one server.

Pure logic with injectable sleeps and random sources, so that tests drive it without
waiting:

* :func:`retry_call` — runs one attempt after another per :class:`RetryPolicy`; the
  per-attempt state is a new policy value whose ``history`` the final error carries as
  ``retry_history`` (and the earlier attempts' errors as ``retried_errors``).
* :class:`ReconnectSchedule` — counts connection failures per :class:`ReconnectPolicy`
  and holds the server *unavailable* until :meth:`ReconnectSchedule.reset`.
* :func:`tool_is_retry_safe` — whether a tool's annotations allow repeating a call.
* :class:`RetryBudget` — the retry throttle of one server (:class:`RetryThrottle`).
"""

from __future__ import annotations

import logging
import random as _random
import threading
import time
from collections import deque
from typing import Any, Callable, TypeVar

from ._breaker import _FORK_LOCKED
from ._errors import (
    ConnectError,
    MCPError,
    ServerUnavailable,
    TransientResult,
    attach_fields,
    may_have_reached_server,
    seconds,
)
from ._policies import ReconnectPolicy, RetryPolicy, RetryThrottle
from ._speedups import Gate

__all__ = ["ReconnectSchedule", "RetryBudget", "retry_call", "tool_is_retry_safe", "in_callers_time"]

log = logging.getLogger("mcpsync.guard")

T = TypeVar("T")


def in_callers_time(exc: MCPError, timeout: float) -> None:
    """Restate a timeout that names what was left of a call's time (after waiting for a
    connection, or a retry's rest) with the call's own ``timeout``."""
    left = getattr(exc, "timeout", None)
    said = f"within {seconds(left)} s" if isinstance(left, (int, float)) else ""
    if said and seconds(left) != seconds(timeout) and said in exc.message:  # type: ignore[arg-type]
        exc.message = exc.message.replace(said, f"within the call's {seconds(timeout)} s")
        exc.args = (exc.message,)
        attach_fields(exc, timeout=timeout)


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
            the wait before the next attempt. A result the policy's ``retry_result``
            judges transient is retried like a failure; when no retry is left, it is
            returned.
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
            result = fn()
            if policy.retry_result is not None:  # a result judged transient is retried as a failure
                transient = policy.judge(result)
                if transient is not None:
                    raise transient
            return result
        except MCPError as exc:
            policy = policy.increment(exc, waited)
            if safe is None and policy.is_transient(exc) and may_have_reached_server(exc):
                safe = bool(safe_to_retry())  # type: ignore[operator]  # asked once, when it matters
            wait = policy.next_wait(rand) if policy.should_retry(exc, safe=bool(safe)) else None
            retry_after = getattr(exc, "retry_after", None)
            if wait is not None and isinstance(retry_after, (int, float)) and retry_after > wait:
                wait = float(retry_after)  # the server said when (HTTP Retry-After)
            if wait is not None and give_up is not None and give_up(exc, wait):
                wait = None
            if wait is None:
                if isinstance(exc, TransientResult):
                    return exc.result  # type: ignore[no-any-return]  # no retry left: the last result stands
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
        #: shut while the server is marked unavailable: what a guard's fast path reads
        self.gate = Gate()
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
                self.gate.shut = True
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
            self.gate.shut = False

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


class RetryBudget:
    """The retry throttle of one server: a bucket per :class:`RetryThrottle` (gRPC's
    retry throttling). :meth:`failed` takes a token for each failed attempt that counts;
    successes give ``token_ratio`` back, read from ``successes()`` (a running count kept
    elsewhere: the fast path is not slowed); :meth:`allows_retry` says whether the bucket
    is above half full. Thread-safe.

    Example:
        >>> ok = [0]
        >>> budget = RetryBudget(RetryThrottle(max_tokens=4, token_ratio=0.5), lambda: ok[0])
        >>> budget.failed(); budget.failed(); budget.allows_retry()
        False
        >>> ok[0] = 2
        >>> budget.allows_retry(), budget.tokens
        (True, 3.0)
    """

    def __init__(self, throttle: RetryThrottle, successes: Callable[[], int]) -> None:
        self.throttle = throttle
        self._successes = successes
        self._lock = threading.Lock()
        self._tokens = float(throttle.max_tokens)
        self._seen = successes()
        #: retries not made because the bucket was at or under half full
        self.throttled = 0
        _FORK_LOCKED.add(self)

    @property
    def tokens(self) -> float:
        with self._lock:
            self._refill()
            return self._tokens

    def failed(self) -> None:
        """One failed attempt (of those the breaker counts): one token less."""
        with self._lock:
            self._refill()
            self._tokens = max(self._tokens - 1.0, 0.0)

    def allows_retry(self) -> bool:
        """Whether a failed call may be retried now (counted in :attr:`throttled` if not)."""
        throttle = self.throttle
        if not throttle.enabled:
            return True
        with self._lock:
            self._refill()
            if self._tokens > throttle.max_tokens / 2.0:
                return True
            self.throttled += 1
        return False

    def _refill(self) -> None:
        now = self._successes()
        if now > self._seen:
            self._tokens = min(self._tokens + (now - self._seen) * self.throttle.token_ratio, float(self.throttle.max_tokens))
        self._seen = now
