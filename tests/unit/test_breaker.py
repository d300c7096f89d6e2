"""Circuit breaker transitions, driven by a fake clock."""

from __future__ import annotations

import random
import threading

import pytest

from mcpsync._errors import (
    AuthError,
    CircuitOpen,
    ConnectError,
    ConnectionClosed,
    InvalidParams,
    RequestTimeout,
    ToolNotFound,
    error_from_code,
)
from mcpsync._breaker import BreakerState, CircuitBreaker
from mcpsync._policies import BreakerPolicy

CLOSED, OPEN, HALF_OPEN = BreakerState.CLOSED, BreakerState.OPEN, BreakerState.HALF_OPEN


class FakeClock:
    def __init__(self, now: float = 1000.0) -> None:
        self.now = now

    def __call__(self) -> float:
        return self.now

    def advance(self, seconds: float) -> None:
        self.now += seconds


@pytest.fixture()
def clock() -> FakeClock:
    return FakeClock()


def make(clock: FakeClock, **policy: object) -> tuple[CircuitBreaker, list[tuple[BreakerState, BreakerState]]]:
    changes: list[tuple[BreakerState, BreakerState]] = []
    breaker = CircuitBreaker(
        BreakerPolicy(**policy),  # type: ignore[arg-type]
        clock=clock,
        on_change=lambda old, new: changes.append((old, new)),
        name="srv",
    )
    return breaker, changes


def fail(breaker: CircuitBreaker, exc: BaseException | None = None) -> None:
    breaker.release(breaker.acquire(), exc or ConnectionClosed("reset"))


def succeed(breaker: CircuitBreaker) -> None:
    breaker.release(breaker.acquire(), None)


def test_default_policy_numbers() -> None:
    p = BreakerPolicy.DEFAULT
    assert (p.threshold, p.window, p.cooldown, p.half_open_max) == (5, 60.0, 30.0, 3)


def test_opens_on_threshold_failures_within_window(clock: FakeClock) -> None:
    breaker, changes = make(clock)
    for _ in range(4):
        fail(breaker)
        clock.advance(10)
    assert breaker.state is CLOSED and breaker.failure_count() == 4
    fail(breaker)  # 5th within 60 s
    assert breaker.state is OPEN
    assert changes == [(CLOSED, OPEN)]


def test_window_slides_old_failures_expire(clock: FakeClock) -> None:
    breaker, changes = make(clock)
    for _ in range(4):
        fail(breaker)
        clock.advance(15)  # failures at t=0, 15, 30, 45
    clock.advance(1)  # t=61: the one at t=0 left the window
    fail(breaker)
    assert breaker.state is CLOSED and breaker.failure_count() == 4
    fail(breaker)
    assert breaker.state is OPEN
    assert changes == [(CLOSED, OPEN)]


def test_successes_do_not_reset_the_sliding_count(clock: FakeClock) -> None:
    breaker, _ = make(clock)
    for _ in range(4):
        fail(breaker)
        succeed(breaker)
    fail(breaker)
    assert breaker.state is OPEN


def test_open_fails_fast_with_seconds_until_retry(clock: FakeClock) -> None:
    breaker, _ = make(clock, threshold=1)
    fail(breaker)
    clock.advance(12.5)
    with pytest.raises(CircuitOpen) as info:
        breaker.acquire()
    assert info.value.retry_after == pytest.approx(17.5)
    assert info.value.server == "srv"
    assert breaker.retry_after() == pytest.approx(17.5)
    assert breaker.rejected == 1


def test_cooldown_then_half_open_success_closes(clock: FakeClock) -> None:
    breaker, changes = make(clock, threshold=1)
    fail(breaker)
    clock.advance(29.9)
    assert breaker.state is OPEN
    clock.advance(0.1)
    assert breaker.state is HALF_OPEN
    succeed(breaker)
    assert breaker.state is CLOSED
    assert breaker.failure_count() == 0
    assert changes == [(CLOSED, OPEN), (OPEN, HALF_OPEN), (HALF_OPEN, CLOSED)]


def test_half_open_failure_reopens_for_a_full_cooldown(clock: FakeClock) -> None:
    breaker, changes = make(clock, threshold=1)
    fail(breaker)
    clock.advance(30)
    fail(breaker)  # the trial fails
    assert breaker.state is OPEN
    assert breaker.retry_after() == pytest.approx(30)
    assert changes == [(CLOSED, OPEN), (OPEN, HALF_OPEN), (HALF_OPEN, OPEN)]


def test_half_open_admits_at_most_max_trials(clock: FakeClock) -> None:
    breaker, _ = make(clock, threshold=1)
    fail(breaker)
    clock.advance(30)
    tickets = [breaker.acquire() for _ in range(3)]
    assert all(t.trial for t in tickets)
    with pytest.raises(CircuitOpen) as info:
        breaker.acquire()
    assert info.value.retry_after == 0.0
    # a neutral outcome frees its slot without deciding
    breaker.release(tickets[0], InvalidParams("bad"))
    assert breaker.state is HALF_OPEN
    tickets.append(breaker.acquire())
    breaker.release(tickets[1], None)
    assert breaker.state is CLOSED
    # late trial results of the finished half-open phase do not move the breaker
    breaker.release(tickets[2], ConnectionClosed("late"))
    breaker.release(tickets[3], ConnectionClosed("late"))
    assert breaker.state is CLOSED and breaker.failure_count() == 0


@pytest.mark.parametrize(
    "exc",
    [InvalidParams("bad"), ToolNotFound("nope"), AuthError("401"), CircuitOpen("x"), ValueError("bug"),
     error_from_code(-32603, "the handler raised"), error_from_code(-32001, "session not found")],
)
def test_non_failures_never_open_it(clock: FakeClock, exc: BaseException) -> None:
    breaker, changes = make(clock, threshold=2)
    for _ in range(10):
        fail(breaker, exc)
    assert breaker.state is CLOSED and changes == []
    assert breaker.neutral == 10 and breaker.failures == 0


@pytest.mark.parametrize("exc", [ConnectError("refused"), RequestTimeout("t"), ConnectionClosed("eof")])
def test_transport_errors_and_timeouts_count(clock: FakeClock, exc: BaseException) -> None:
    breaker, _ = make(clock, threshold=2)
    fail(breaker, exc)
    fail(breaker, exc)
    assert breaker.state is OPEN


def test_is_error_tool_results_are_successes(clock: FakeClock) -> None:
    breaker, _ = make(clock, threshold=1)
    result = breaker.call(lambda: {"isError": True, "content": []})
    assert result["isError"] is True
    assert breaker.state is CLOSED and breaker.successes == 1


def test_call_releases_on_every_path(clock: FakeClock) -> None:
    breaker, _ = make(clock, threshold=1)

    def boom() -> None:
        raise ConnectionClosed("eof")

    with pytest.raises(ConnectionClosed):
        breaker.call(boom)
    assert breaker.state is OPEN
    with pytest.raises(CircuitOpen):
        breaker.call(lambda: None)


def test_stale_tickets_from_before_opening_are_ignored(clock: FakeClock) -> None:
    breaker, _ = make(clock, threshold=2)
    slow = breaker.acquire()  # admitted while CLOSED
    fail(breaker)
    fail(breaker)
    assert breaker.state is OPEN
    breaker.release(slow, None)  # success of an old call does not close it
    assert breaker.state is OPEN
    clock.advance(30)
    assert breaker.state is HALF_OPEN
    stale = slow
    breaker.release(stale, ConnectionClosed("old"))  # nor does an old failure reopen it
    assert breaker.state is HALF_OPEN


def test_ticketless_failures(clock: FakeClock) -> None:
    breaker, _ = make(clock, threshold=2)
    breaker.release(None, ConnectionClosed("reader saw EOF"))
    breaker.release(None, ConnectionClosed("reader saw EOF"))
    assert breaker.state is OPEN
    clock.advance(30)
    assert breaker.state is HALF_OPEN
    breaker.release(None, ConnectionClosed("again"))
    assert breaker.state is OPEN


def test_disabled_policy_never_opens(clock: FakeClock) -> None:
    breaker = CircuitBreaker(BreakerPolicy.DISABLED, clock=clock)
    for _ in range(50):
        fail(breaker)
    assert breaker.state is CLOSED


def test_reset_closes(clock: FakeClock) -> None:
    breaker, changes = make(clock, threshold=1)
    fail(breaker)
    breaker.reset()
    assert breaker.state is CLOSED
    succeed(breaker)
    assert changes == [(CLOSED, OPEN), (OPEN, CLOSED)]


def test_listener_runs_outside_the_lock_and_may_reenter(clock: FakeClock) -> None:
    seen: list[tuple[BreakerState, bool, BreakerState]] = []
    breaker = CircuitBreaker(BreakerPolicy(threshold=1), clock=clock)

    def listener(old: BreakerState, new: BreakerState) -> None:
        seen.append((new, breaker._lock.locked(), breaker.state))  # re-entering would deadlock inside

    breaker.add_listener(listener)
    fail(breaker)
    assert seen == [(OPEN, False, OPEN)]


def test_listener_errors_do_not_break_calls(clock: FakeClock) -> None:
    def bad(old: BreakerState, new: BreakerState) -> None:
        raise RuntimeError("listener bug")

    breaker = CircuitBreaker(BreakerPolicy(threshold=1), clock=clock, on_change=bad)
    fail(breaker)
    assert breaker.state is OPEN


def test_sixteen_threads_counts_add_up(clock: FakeClock) -> None:
    lock = threading.Lock()
    changes: list[tuple[BreakerState, BreakerState]] = []
    breaker = CircuitBreaker(
        BreakerPolicy(threshold=5, window=60, cooldown=5, half_open_max=3),
        clock=clock,
        on_change=lambda o, n: changes.append((o, n)),
    )
    totals = {"calls": 0, "rejected": 0, "ok": 0, "failed": 0}
    errors = [ConnectionClosed("x"), RequestTimeout("t"), InvalidParams("p"), None, None, None]

    def worker(seed: int) -> None:
        rnd = random.Random(seed)
        counts = dict.fromkeys(totals, 0)
        for _ in range(500):
            counts["calls"] += 1
            try:
                ticket = breaker.acquire()
            except CircuitOpen:
                counts["rejected"] += 1
                with lock:
                    clock.advance(0.5)
                continue
            exc = rnd.choice(errors)
            breaker.release(ticket, exc)
            counts["ok" if exc is None else "failed"] += 1
        with lock:
            for k, v in counts.items():
                totals[k] += v

    threads = [threading.Thread(target=worker, args=(i,)) for i in range(16)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=60)
    assert not any(t.is_alive() for t in threads)
    assert totals["calls"] == 16 * 500
    assert breaker.admitted + breaker.rejected == totals["calls"]
    assert breaker.rejected == totals["rejected"]
    assert breaker.successes + breaker.failures + breaker.neutral == breaker.admitted
    assert breaker.successes == totals["ok"]
    chain = list(breaker.transitions)  # the latest 1024
    assert all(a[1] is b[0] for a, b in zip(chain, chain[1:]))  # each starts where the last ended
    assert len(changes) == breaker.transition_count >= len(chain)  # every transition reported once
    assert changes.count((CLOSED, OPEN)) >= 1
