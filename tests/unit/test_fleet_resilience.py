"""A breaker that protects a fleet instead of disabling it, and retries that do not multiply
a struggling server's load (pure logic, a fake clock). The real-balancer test is
tests/integration/test_balancers.py (nginx over 3 replicas, one killed)."""

from __future__ import annotations

import pytest

from mcpsync import BreakerPolicy, RetryPolicy, RetryThrottle
from mcpsync._breaker import BreakerState, CircuitBreaker
from mcpsync._errors import ConnectError, NetworkError
from mcpsync._guard import Guard
from mcpsync._retry import RetryBudget

CLOSED, OPEN = BreakerState.CLOSED, BreakerState.OPEN


class Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now

    def sleep(self, seconds: float) -> None:
        self.now += seconds


def _ok(b: CircuitBreaker, n: int, clock: Clock, every: float) -> None:
    """``n`` successes ``every`` s apart, counted as the guard's (compiled) fast path counts them."""
    fast = b.fast_path(None, None, "s", clock, lambda: None)
    for _ in range(n):
        start = fast.begin()
        assert start is not None
        fast.succeeded(None, start)
        clock.now += every


def _fail(b: CircuitBreaker, n: int) -> None:
    for _ in range(n):
        b.release(None, NetworkError("HTTP 502", status=502))


def test_a_lone_server_at_agent_volume_opens_after_five_failures_as_before():
    clock = Clock()
    b = CircuitBreaker(BreakerPolicy(), clock=clock)
    _ok(b, 8, clock, 3.0)  # an agent: a call every few seconds
    _fail(b, 4)
    assert b.state is CLOSED
    _fail(b, 1)
    assert b.state is OPEN  # 5 failures in 60 s, 13 calls: under min_calls, the count decides


def test_a_burst_among_many_successes_does_not_open_the_default_breaker():
    clock = Clock()
    b = CircuitBreaker(BreakerPolicy(), clock=clock)
    _ok(b, 400, clock, 0.02)  # 8 threads through a balancer: 50 calls a second
    _fail(b, 8)  # one replica dies: its in-flight requests come back 502
    assert b.state is CLOSED
    assert b.window_calls() == (8, 400)
    _ok(b, 400, clock, 0.02)
    assert b.state is CLOSED


def test_a_dead_fleet_still_opens_it():
    clock = Clock()
    b = CircuitBreaker(BreakerPolicy(), clock=clock)
    _ok(b, 100, clock, 0.02)
    for _ in range(200):  # then every call fails: the share passes a half
        _fail(b, 1)
        clock.now += 0.02
        if b.state is OPEN:
            break
    assert b.state is OPEN


def test_successes_older_than_the_window_do_not_count():
    clock = Clock()
    b = CircuitBreaker(BreakerPolicy(window=60.0), clock=clock)
    _ok(b, 1000, clock, 0.01)  # 10 s of traffic...
    clock.now += 120.0  # ...two minutes ago
    _fail(b, 5)
    assert b.state is OPEN  # nothing else in the window: 5 of 5 calls failed


def test_the_rate_can_be_turned_off_and_the_fleet_preset():
    clock = Clock()
    b = CircuitBreaker(BreakerPolicy(failure_rate=0.0), clock=clock)
    _ok(b, 400, clock, 0.02)
    _fail(b, 5)
    assert b.state is OPEN  # SPEC's count alone
    fleet = BreakerPolicy.FLEET
    assert (fleet.threshold, fleet.window, fleet.cooldown, fleet.failure_rate, fleet.min_calls) == (20, 10.0, 5.0, 0.5, 20)
    assert (BreakerPolicy().threshold, BreakerPolicy().window, BreakerPolicy().cooldown, BreakerPolicy().half_open_max) == (5, 60.0, 30.0, 3)
    with pytest.raises(ValueError):
        BreakerPolicy(failure_rate=1.5)


def test_the_retry_budget_drains_on_failures_and_refills_on_successes():
    ok = [0]
    budget = RetryBudget(RetryThrottle(max_tokens=10, token_ratio=1.0), lambda: ok[0])
    for _ in range(5):
        budget.failed()
    assert budget.tokens == 5.0 and not budget.allows_retry() and budget.throttled == 1
    ok[0] += 1
    assert budget.allows_retry()
    ok[0] += 100
    assert budget.tokens == 10.0  # capped
    assert RetryBudget(RetryThrottle.DISABLED, lambda: 0).allows_retry()


def test_many_callers_of_a_failing_server_stop_retrying():
    """400 calls to a server that refuses everything: without a throttle each would be
    tried 6 times (2,400 attempts); with the default one, retries stop after the first ~50."""
    clock = Clock()
    guard = Guard("struggling", clock=clock, sleep=clock.sleep, rand=lambda: 0.5,
                  breaker=BreakerPolicy.DISABLED, retry=RetryPolicy(max_wait=1e9))
    attempts = [0]

    def refuse() -> None:
        attempts[0] += 1
        raise ConnectError("refused", sent=False)

    throttled = 0
    for _ in range(400):
        with pytest.raises(ConnectError) as info:
            guard.call(refuse, safe_to_retry=True)
        throttled += bool(getattr(info.value, "throttled", False))
    assert attempts[0] < 400 + 60, attempts[0]
    assert throttled >= 390 and guard.budget.throttled >= 390
    unthrottled = Guard("s", clock=clock, sleep=clock.sleep, rand=lambda: 0.5, breaker=BreakerPolicy.DISABLED,
                        retry=RetryPolicy(max_wait=1e9, throttle=RetryThrottle.DISABLED))
    attempts[0] = 0
    for _ in range(20):
        with pytest.raises(ConnectError):
            unthrottled.call(refuse, safe_to_retry=True)
    assert attempts[0] == 20 * 6


def test_a_third_of_attempts_failing_keeps_its_retries():
    clock = Clock()
    guard = Guard("flaky", clock=clock, sleep=clock.sleep, rand=lambda: 0.5, breaker=BreakerPolicy.DISABLED)
    n = [0]

    def flaky() -> str:
        n[0] += 1
        if n[0] % 3 == 0:
            raise ConnectError("reset", sent=False)
        return "ok"

    assert all(guard.call(flaky, safe_to_retry=True) == "ok" for _ in range(3000))
    assert guard.budget.throttled == 0


def test_a_long_lived_client_under_steady_load_keeps_an_honest_window():
    clock = Clock()
    b = CircuitBreaker(BreakerPolicy(), clock=clock)
    _ok(b, 20_000, clock, 0.05)  # 1,000 s of traffic at 20 calls a second
    _fail(b, 8)
    assert b.state is CLOSED
    failures, successes = b.window_calls()
    assert failures == 8 and 1150 <= successes <= 1210, successes  # the last 60 s: ~1,200
    assert len(b._marks) <= 128
