"""Resilience for one server: breaker + retries + availability + a metrics hook.

:class:`Guard` puts together, for the calls to one server, the parts that live in
their own modules as pure logic with injectable clocks, sleeps and random sources:

* :class:`~mcpsync._breaker.CircuitBreaker` (:mod:`mcpsync._breaker`) — CLOSED → OPEN →
  HALF_OPEN, per :class:`BreakerPolicy`.
* :func:`~mcpsync._retry.retry_call` and :class:`~mcpsync._retry.ReconnectSchedule`
  (:mod:`mcpsync._retry`) — attempts per :class:`RetryPolicy`, connection failures per
  :class:`ReconnectPolicy`; :class:`~mcpsync._retry.RetryBudget`, the server's retry
  throttle (``RetryPolicy.throttle``): no retries while most attempts fail.

Example:
    >>> guard = Guard("everything")
    >>> guard.call(lambda: "ok", tool="echo", safe_to_retry=True)
    'ok'
    >>> guard.breaker.state
    <BreakerState.CLOSED: 'closed'>
"""

from __future__ import annotations

import logging
import random as _random
import time
from typing import Callable, TypeVar

from ._breaker import ERROR, SUCCESS, TIMEOUT, BreakerListener, BreakerState, CircuitBreaker
from ._errors import MCPError, RequestTimeout, TransientResult, attach_fields, counts_as_breaker_failure
from ._policies import BreakerPolicy, RetryPolicy
from ._retry import ReconnectSchedule, RetryBudget, retry_call
from ._speedups import Gate

__all__ = [
    "Guard",
    "Recorder",
    "outcome_of",
    "SUCCESS",
    "ERROR",
    "TIMEOUT",
]

log = logging.getLogger("mcpsync.guard")


def _recorder_raised() -> None:
    log.exception("metrics recorder raised")


T = TypeVar("T")

#: record(server, tool, start, end, outcome) — outcome is "success" | "error" | "timeout";
#: start and end come from the guard's clock (``time.monotonic`` by default).
Recorder = Callable[[str, "str | None", float, float, str], None]


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
        elif retry.transient_codes:  # the policy's transient codes count as the server's faults too
            self.breaker = CircuitBreaker(breaker, clock=clock, on_change=on_breaker_change, name=server,
                                          is_failure=lambda exc: counts_as_breaker_failure(exc) or retry.is_transient(exc))
        else:
            self.breaker = CircuitBreaker(breaker, clock=clock, on_change=on_breaker_change, name=server)
        self.reconnect = reconnect
        #: the server's retry throttle, fed by every attempt the breaker counts
        self.budget = RetryBudget(retry.throttle, lambda: self.breaker.successes)
        self._counts = self.breaker.is_failure
        self.record = record
        # a MetricsRecorder's compiled entry when it has one (one Python frame less per call)
        self._emit: Recorder | None = getattr(record, "queue_call", record)
        self._clock = clock
        self._sleep = sleep
        self._rand = rand
        fast = self.breaker.fast_path(None if reconnect is None else reconnect.gate, self._emit, server, clock,
                                      _recorder_raised)
        self._gates = (self.breaker.gate, Gate() if reconnect is None else reconnect.gate)
        #: Start a call whose first attempt the caller runs itself (its fast path): the
        #: start on the guard's clock when that attempt may run unguarded (the breaker is
        #: CLOSED and the server is not marked unavailable), else ``None``: go through
        #: :meth:`call`. After an unguarded attempt, report a success with
        #: :attr:`succeeded` or hand its exception to :meth:`after_first_failure`.
        self.begin: Callable[[], float | None] = fast.begin
        #: ``succeeded(tool, start)``: count a first attempt that succeeded on the fast
        #: path (``start`` from :attr:`begin`). Both are one call into C (compiled
        #: build): every call makes them (see :class:`~mcpsync._speedups.FastPath`).
        self.succeeded: Callable[[str | None, float], None] = fast.succeeded

    def _attempt(self, fn: Callable[[], T]) -> T:
        if self.reconnect is not None:
            self.reconnect.check()
        try:
            return self.breaker.call(fn)
        except BaseException as exc:
            self._spent(exc)
            raise

    def _spent(self, exc: BaseException) -> None:
        """A failed attempt: a token of the retry throttle, if the breaker counts it."""
        try:
            counts = self._counts(exc)
        except Exception:  # a broken predicate must not break the call path (the breaker logs it)
            counts = False
        if counts:
            self.budget.failed()

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
        # Fast path: a CLOSED breaker admits every call and a success changes none of
        # its state, so the first attempt runs without taking the breaker's lock.
        breaker_gate, reconnect_gate = self._gates
        if not breaker_gate.shut and not reconnect_gate.shut:
            try:
                result = fn()
                transient = self.judge(result, retry)
                if transient is not None:
                    raise transient
            except BaseException as exc:
                return self.after_first_failure(exc, fn, start, safe_to_retry=safe_to_retry, tool=tool,
                                                retry=retry, budget=budget)
            self.breaker.admit_fast(success=True)
            if self.record is not None:
                self._record(tool, start, None)
            return result
        return self._retrying(fn, start, None, safe_to_retry, tool, retry, budget)

    def judge(self, result: T, retry: RetryPolicy | None) -> TransientResult | None:
        """The retry policy's verdict on a first attempt's result (see ``RetryPolicy.judge``):
        a :class:`TransientResult` for :meth:`after_first_failure`, or None to keep it."""
        policy = self.retry if retry is None else retry
        return None if policy.retry_result is None else policy.judge(result)

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
        breaker.admit_fast()
        breaker.release(None, exc)
        self._spent(exc)
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
            if self.breaker.state is BreakerState.OPEN:
                return True
            if not self.budget.allows_retry():  # most attempts fail: retries would only add load
                log.debug("%s: retry throttled (%.1f tokens)", self.server, self.budget.tokens)
                attach_fields(exc, throttled=True)
                return True
            return False

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
            self._emit(self.server, tool, start, self._clock(), outcome)  # type: ignore[misc]
        except Exception:
            _recorder_raised()
