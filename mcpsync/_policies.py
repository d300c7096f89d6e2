"""Policies are values: frozen dataclasses with a ``DEFAULT``, changed with ``replace()``.

Example:
    >>> from dataclasses import replace
    >>> from mcpsync import Timeouts
    >>> fast = replace(Timeouts.DEFAULT, request=5.0)
    >>> fast.request, fast.connect
    (5.0, 10.0)
"""

from __future__ import annotations

import logging
import random as _random
from dataclasses import dataclass, field, replace
from typing import Any, Callable, ClassVar

from ._errors import (
    AuthError,
    Cancelled,
    CircuitOpen,
    InvalidParams,
    PermissionDenied,
    RemoteError,
    ServerUnavailable,
    ToolNotFound,
    TransientResult,
    is_transient,
    may_have_reached_server,
)

_log = logging.getLogger("mcpsync.guard")

__all__ = ["Timeouts", "RetryPolicy", "RetryThrottle", "BreakerPolicy", "PoolLimits", "ReconnectPolicy", "NEVER_RETRY",
           "replace"]

#: Errors that end a call at once: SPEC.md's four (ToolNotFound, InvalidParams,
#: AuthError, PermissionDenied), plus the caller's own cancellation and the client's
#: fail-fast states (retrying an open breaker or an unavailable server would only
#: spend the wait budget on a known answer).
NEVER_RETRY: tuple[type[BaseException], ...] = (
    ToolNotFound,
    InvalidParams,
    AuthError,
    PermissionDenied,
    Cancelled,
    CircuitOpen,
    ServerUnavailable,
)


def _jittered(base: float, jitter: float, rand: Callable[[], float]) -> float:
    if base <= 0 or jitter <= 0:
        return max(base, 0.0)
    return base * (1.0 + jitter * (2.0 * rand() - 1.0))


@dataclass(frozen=True, slots=True)
class Timeouts:
    """The three timeout layers of SPEC.md, in seconds.

    Attributes:
        connect: TCP connect plus the MCP handshake of a remote server (retried once
            after a timeout); a child process gets ``start`` instead (below).
        request: one call, server time included, and everything the call waits for
            (pool, connect, handshake, retries, backoff); on expiry the server is told
            to cancel.
        idle: a pooled connection idle longer than this is closed.
        keepalive: interval of the keepalive ping on long-lived connections.
        close: how long ``close()`` waits for a child to exit before each escalation.
        progress_cap: hard cap for calls whose timer is reset by progress notifications
            (``None``: ten times ``request``).
        start: the start budget: how long a server process that is alive but has not
            said anything yet may take to answer its handshake (a first ``npx -y`` or
            ``uvx`` run downloads the package first). It is not killed before; a
            process that exits fails at once. Calls never wait past their own timeout
            for it: the start goes on in the background.
    """

    connect: float = 10.0
    request: float = 30.0
    idle: float = 300.0
    keepalive: float = 60.0
    close: float = 2.0
    progress_cap: float | None = None
    start: float = 60.0
    DEFAULT: ClassVar["Timeouts"]

    def __post_init__(self) -> None:
        for name in ("connect", "request", "idle", "keepalive", "close", "start"):
            if getattr(self, name) <= 0:
                raise ValueError(f"Timeouts.{name} must be positive")


Timeouts.DEFAULT = Timeouts()


@dataclass(frozen=True, slots=True)
class RetryThrottle:
    """Retry throttling for one server, as gRPC's (gRFC A6): a bucket of ``max_tokens``
    tokens; each failed attempt the breaker would count takes one, each success gives
    ``token_ratio`` back; while the bucket is at or under half full, a failed call is not
    retried (first attempts always go). By default retries stop once failed attempts
    outnumber successes by 50, and start again as successes come back: many callers of a
    server that fails most of what it gets then add no retries to its load, while a burst
    of failures among many successes (one replica's failover behind a balancer) or a
    server failing a third of its calls keep their retries. The client's
    :class:`RetryPolicy` names it (``RetryPolicy.throttle``); the bucket is the server's.

    Attributes:
        max_tokens: the bucket's size (full at the start).
        token_ratio: tokens a success gives back (gRPC's examples use 0.1: retries then
            stop once failures pass a tenth of the successes).
        enabled: False: every failed call is retried per the policy.
    """

    max_tokens: float = 100.0
    token_ratio: float = 1.0
    enabled: bool = True
    DEFAULT: ClassVar["RetryThrottle"]
    DISABLED: ClassVar["RetryThrottle"]

    def __post_init__(self) -> None:
        if self.max_tokens <= 0 or self.token_ratio < 0:
            raise ValueError("RetryThrottle needs max_tokens > 0 and token_ratio >= 0")


RetryThrottle.DEFAULT = RetryThrottle()
RetryThrottle.DISABLED = RetryThrottle(enabled=False)


@dataclass(frozen=True, slots=True)
class RetryPolicy:
    """Call retries: immediately, then ``backoff`` × 2ⁿ⁻¹ seconds, with ±``jitter``.

    Attributes:
        retries: retries after the first attempt (at most).
        backoff: the first non-immediate wait.
        max_wait: total seconds of waiting across all retries (at most).
        jitter: relative jitter applied to every wait (0.25 → ±25 %).
        fixed: every wait is ``backoff`` (the Minimal profile's fixed interval).
        history: the failed attempts so far, as (error class name, seconds waited before
            that attempt) pairs.
        never_retry: error classes that end the call at once (default :data:`NEVER_RETRY`).
        transient_codes: JSON-RPC error codes your servers answer for "busy, try again": an
            error answer with one of them is retried and counts towards the circuit breaker
            (any other error answer proves the server alive: raised at once, not counted).
        retry_result: ``retry_result(result)`` judges a result of a call that is safe to
            repeat (e.g. a tool's ``isError`` result saying "rate limited, retry after 20 s"):
            True retries it on the schedule, a number of seconds retries no sooner than
            that, False or None keeps it. When the retries or the call's time run out, the
            last result is returned. A hook that raises keeps the result (and is logged).
        throttle: the server's retry throttle (:class:`RetryThrottle`); the client's policy
            sets it, a per-call policy's is not used.

    Example:
        >>> p = RetryPolicy.DEFAULT.increment(TimeoutError())
        >>> p.attempts, p.next_wait(), p.increment(TimeoutError()).next_wait(lambda: 0.5)
        (1, 0.0, 1.0)
    """

    retries: int = 5
    backoff: float = 1.0
    max_wait: float = 30.0
    jitter: float = 0.25
    fixed: bool = False
    history: tuple[tuple[str, float], ...] = field(default=(), compare=False)
    never_retry: tuple[type[BaseException], ...] = field(default=NEVER_RETRY, repr=False)
    transient_codes: frozenset[int] = frozenset()
    retry_result: Callable[[Any], "bool | float | None"] | None = field(default=None, compare=False, repr=False)
    throttle: RetryThrottle = field(default=RetryThrottle.DEFAULT, repr=False)
    DEFAULT: ClassVar["RetryPolicy"]
    NONE: ClassVar["RetryPolicy"]

    def __post_init__(self) -> None:
        if not isinstance(self.transient_codes, frozenset):  # a set or list given: kept frozen
            object.__setattr__(self, "transient_codes", frozenset(self.transient_codes))

    def is_transient(self, error: BaseException) -> bool:
        """:func:`~mcpsync._errors.is_transient`, plus error answers whose code is in
        :attr:`transient_codes`."""
        if is_transient(error):
            return True
        code = getattr(error, "code", None)
        return isinstance(error, RemoteError) and isinstance(code, int) and code in self.transient_codes

    def judge(self, result: Any) -> TransientResult | None:
        """:attr:`retry_result`'s verdict on ``result``: a :class:`TransientResult` to retry
        it (``retry_after``: the seconds it asked for), None to keep it."""
        hook = self.retry_result
        if hook is None:
            return None
        try:
            verdict = hook(result)
        except Exception:  # a broken hook keeps the result: the call has one
            _log.exception("RetryPolicy.retry_result raised; the result is kept")
            return None
        if verdict is None or verdict is False:
            return None
        after = float(verdict) if not isinstance(verdict, bool) and isinstance(verdict, (int, float)) else None
        return TransientResult("the retry policy judged the result transient", result=result, retry_after=after)

    def base_delay(self, retry_number: int) -> float:
        """The un-jittered wait before retry ``retry_number`` (1-based)."""
        if self.fixed:
            return self.backoff
        if retry_number <= 1:
            return 0.0
        return float(self.backoff * (2 ** (retry_number - 2)))

    # -- per-attempt state (urllib3 ``Retry.increment`` style) --------------------

    @property
    def attempts(self) -> int:
        """Failed attempts recorded so far."""
        return len(self.history)

    @property
    def waited(self) -> float:
        """Seconds waited so far, across all retries."""
        return sum(wait for _, wait in self.history)

    def increment(self, error: BaseException, waited: float = 0.0) -> "RetryPolicy":
        """A new value with one more failed attempt in ``history``.

        Args:
            error: what the attempt raised.
            waited: the seconds waited before that attempt (0 for the first).
        """
        return replace(self, history=(*self.history, (type(error).__name__, float(waited))))

    def is_exhausted(self) -> bool:
        """True once every retry has been used."""
        return self.attempts > self.retries

    def should_retry(self, error: BaseException, *, safe: bool) -> bool:
        """Whether ``error`` may be retried at all (budget aside).

        Args:
            error: what the attempt raised.
            safe: the call has no side effects to duplicate (tool annotated
                ``readOnlyHint``/``idempotentHint``, or the caller opted in). When False,
                only attempts that never left the client are retried.
        """
        if isinstance(error, self.never_retry) or not self.is_transient(error):
            return False
        return safe or not may_have_reached_server(error)

    def next_wait(self, rand: Callable[[], float] = _random.random) -> float | None:
        """Seconds to wait before the next retry, or ``None`` when the retries are spent.

        The wait for retry ``n`` (``n`` = failed attempts so far) is
        ``base_delay(n)`` with ±``jitter``, clipped to what is left of ``max_wait``; a
        non-immediate retry with nothing left of ``max_wait`` is not made.

        Args:
            rand: a source of floats in [0, 1) for the jitter (inject for tests).
        """
        n = self.attempts
        if n < 1 or n > self.retries:
            return None
        base = self.base_delay(n)
        if base <= 0:
            return 0.0
        left = self.max_wait - self.waited
        if left <= 0:
            return None
        return min(_jittered(base, self.jitter, rand), left)


RetryPolicy.DEFAULT = RetryPolicy()
RetryPolicy.NONE = RetryPolicy(retries=0)


@dataclass(frozen=True, slots=True)
class BreakerPolicy:
    """Circuit breaker: ``threshold`` failures within ``window`` s open it for ``cooldown`` s;
    then at most ``half_open_max`` trial calls decide between closing and reopening.

    Once the window holds ``min_calls`` calls or more, its failures must also be at least
    ``failure_rate`` of them (as resilience4j's failure-rate threshold and Envoy's outlier
    detection do): behind a load balancer, the burst of 502s of one replica's death among
    many successes is no reason to fail every call to the healthy rest. Below ``min_calls``
    (one agent and a lone server) the count alone decides: 5 failures in 60 s.

    Attributes:
        threshold: counted failures within ``window`` that open the circuit.
        window: the sliding window, seconds.
        cooldown: seconds the circuit stays open.
        half_open_max: trial calls at a time once the cooldown is over.
        failure_rate: the share of the window's calls (successes and counted failures)
            its failures must reach too (0: the count alone decides).
        min_calls: the calls the window needs before the share is asked for.
        enabled: False: the breaker admits every call.

    :attr:`FLEET` is a preset for a fleet of replicas behind one URL: a 10 s window, 20
    failures that are also half the window's calls, 5 s open.
    """

    threshold: int = 5
    window: float = 60.0
    cooldown: float = 30.0
    half_open_max: int = 3
    enabled: bool = True
    failure_rate: float = 0.5
    min_calls: int = 20
    DEFAULT: ClassVar["BreakerPolicy"]
    DISABLED: ClassVar["BreakerPolicy"]
    FLEET: ClassVar["BreakerPolicy"]

    def __post_init__(self) -> None:
        if not 0.0 <= self.failure_rate <= 1.0 or self.min_calls < 0:
            raise ValueError("BreakerPolicy needs 0 <= failure_rate <= 1 and min_calls >= 0")


BreakerPolicy.DEFAULT = BreakerPolicy()
BreakerPolicy.DISABLED = BreakerPolicy(enabled=False)
BreakerPolicy.FLEET = BreakerPolicy(threshold=20, window=10.0, cooldown=5.0)


@dataclass(frozen=True, slots=True)
class PoolLimits:
    """Connections per server address.

    By default (:attr:`SESSION`) a Client holds **one** connection per server: one child
    process for stdio, one WebSocket or gRPC stream, one Streamable HTTP session (whose
    requests urllib3 spreads over its own keep-alive sockets), with every thread's calls
    multiplexed on it by JSON-RPC id. A server keeps its state per session (a stdio
    server's memory is its state), so more than one connection splits that state: ask
    for it (``PoolLimits(min=2, max=10)``) only for servers that keep none, e.g. a
    stateless stdio server under heavy load. :attr:`PER_CALL` (the ``"minimal"`` profile's)
    keeps none: every call gets a connection of its own (a new process, for stdio), closed
    when the call ends.

    Attributes:
        min: connections kept open (and kept alive) once the pool is in use.
        max: connections at most.
        max_in_flight: concurrent calls per connection before another one is opened.
        borrow_timeout: how long a call waits for a connection (``None``: up to the call's own
            timeout, ``Timeouts.request`` unless the call passes one).
        idle: idle connections above ``min`` are closed after this many seconds.
        per_call: a connection per call, closed when it ends (``max`` at once, one call on
            each, ``min`` 0): nothing lasts between calls, so neither does anything that
            needs a lasting session (subscriptions, list-change listeners, tasks).
    """

    min: int = 2
    max: int = 10
    max_in_flight: int = 16
    borrow_timeout: float | None = None
    idle: float = 300.0
    per_call: bool = False
    DEFAULT: ClassVar["PoolLimits"]
    SINGLE: ClassVar["PoolLimits"]
    #: one session per server, up to 64 calls in flight on it (the Client's default)
    SESSION: ClassVar["PoolLimits"]
    #: a connection (a process, for stdio) per call, up to 10 at once (the ``"minimal"`` profile's)
    PER_CALL: ClassVar["PoolLimits"]

    def __post_init__(self) -> None:
        if self.min < 0 or self.max < 1 or self.min > self.max:
            raise ValueError("PoolLimits needs 0 <= min <= max and max >= 1")
        if self.per_call and (self.min != 0 or self.max_in_flight != 1):
            raise ValueError("PoolLimits(per_call=True) keeps no connection and runs one call on each: "
                             "it needs min=0 and max_in_flight=1")


PoolLimits.DEFAULT = PoolLimits()
PoolLimits.SINGLE = PoolLimits(min=1, max=1)
PoolLimits.SESSION = PoolLimits(min=1, max=1, max_in_flight=64)
PoolLimits.PER_CALL = PoolLimits(min=0, max=10, max_in_flight=1, per_call=True)


@dataclass(frozen=True, slots=True)
class ReconnectPolicy:
    """Rebuilding a dead connection: after failure 1 at once, then 1 s, 2 s, 4 s, 8 s;
    failure ``max_failures`` (6) marks the server unavailable.

    The loss of the connection itself is failure 1, so a dead
    connection gets five rebuild attempts; a first connect that fails gets six.

    Attributes:
        max_failures: the failure that marks the server unavailable.
        backoff: the first non-immediate wait.
        jitter: relative jitter on every wait (0: the exact schedule).
        never_retry: errors that stop reconnecting at once (authentication failures).

    Example:
        >>> [ReconnectPolicy.DEFAULT.delay_after(n) for n in range(1, 7)]
        [0.0, 1.0, 2.0, 4.0, 8.0, None]
    """

    max_failures: int = 6
    backoff: float = 1.0
    jitter: float = 0.0
    never_retry: tuple[type[BaseException], ...] = (AuthError,)
    DEFAULT: ClassVar["ReconnectPolicy"]

    def __post_init__(self) -> None:
        if self.max_failures < 1 or self.backoff < 0 or not 0 <= self.jitter < 1:
            raise ValueError("ReconnectPolicy needs max_failures >= 1, backoff >= 0, 0 <= jitter < 1")

    def delay_after(self, failures: int, rand: Callable[[], float] = _random.random) -> float | None:
        """Seconds to wait before the next attempt after ``failures`` failures, or ``None``
        when the server is to be marked unavailable."""
        if failures >= self.max_failures:
            return None
        if failures <= 1:
            return 0.0
        return _jittered(self.backoff * (2 ** (failures - 2)), self.jitter, rand)

    def schedule(self) -> tuple[float, ...]:
        """The un-jittered waits, in order: ``(0.0, 1.0, 2.0, 4.0, 8.0)`` by default."""
        return tuple(
            0.0 if n <= 1 else self.backoff * (2 ** (n - 2)) for n in range(1, self.max_failures)
        )


ReconnectPolicy.DEFAULT = ReconnectPolicy()
