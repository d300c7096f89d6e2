"""Guard: breaker + retries + availability + the metrics hook, for one server."""

from __future__ import annotations

import threading

import pytest

from mcpsync._errors import (
    CircuitOpen,
    ConnectError,
    ConnectionClosed,
    InvalidParams,
    PoolTimeout,
    RequestTimeout,
    ServerUnavailable,
)
from mcpsync._breaker import BreakerState, CircuitBreaker
from mcpsync._guard import Guard, outcome_of
from mcpsync._retry import ReconnectSchedule
from mcpsync._policies import BreakerPolicy, RetryPolicy
from tests.helpers import run_in_child


class FakeClock:
    def __init__(self) -> None:
        self.now = 0.0
        self.lock = threading.Lock()

    def __call__(self) -> float:
        return self.now

    def sleep(self, seconds: float) -> None:  # sleeping advances the fake time
        with self.lock:
            self.now += seconds


class Recorder:
    def __init__(self) -> None:
        self.rows: list[tuple[str, str | None, float, float, str]] = []
        self.lock = threading.Lock()

    def __call__(self, server: str, tool: str | None, start: float, end: float, outcome: str) -> None:
        with self.lock:
            self.rows.append((server, tool, start, end, outcome))


def attempts(*errors: BaseException, result: object = "ok"):
    queue = list(errors)
    calls: list[int] = []

    def fn() -> object:
        calls.append(1)
        if queue:
            raise queue.pop(0)
        return result

    fn.calls = calls  # type: ignore[attr-defined]
    return fn


@pytest.fixture()
def clock() -> FakeClock:
    return FakeClock()


@pytest.fixture()
def rec() -> Recorder:
    return Recorder()


def make(clock: FakeClock, rec: Recorder, **kw: object) -> Guard:
    kw.setdefault("rand", lambda: 0.5)
    return Guard("srv", clock=clock, sleep=clock.sleep, record=rec, **kw)  # type: ignore[arg-type]


def test_success_is_recorded_once_with_times(clock: FakeClock, rec: Recorder) -> None:
    guard = make(clock, rec)

    def fn() -> str:
        clock.now += 2.5
        return "result"

    assert guard.call(fn, tool="echo", safe_to_retry=True) == "result"
    assert rec.rows == [("srv", "echo", 0.0, 2.5, "success")]


def test_retries_then_success_is_one_call_in_metrics(clock: FakeClock, rec: Recorder) -> None:
    guard = make(clock, rec)
    fn = attempts(ConnectError("refused"), ConnectError("refused"), ConnectError("refused"))
    assert guard.call(fn, tool="add") == "ok"  # never left the client: retried even unsafe
    assert len(fn.calls) == 4
    assert rec.rows == [("srv", "add", 0.0, 3.0, "success")]  # waits 0 + 1 + 2 on the fake clock


def test_timeout_outcome_and_history(clock: FakeClock, rec: Recorder) -> None:
    guard = make(clock, rec, breaker=BreakerPolicy.DISABLED)
    fn = attempts(*(RequestTimeout("t") for _ in range(10)))
    with pytest.raises(RequestTimeout) as info:
        guard.call(fn, tool="slow", safe_to_retry=True)
    assert len(fn.calls) == 6
    assert [name for name, _ in info.value.retry_history] == ["RequestTimeout"] * 6
    assert rec.rows[-1][-1] == "timeout"


def test_unsafe_call_that_reached_the_server_is_not_repeated(clock: FakeClock, rec: Recorder) -> None:
    guard = make(clock, rec)
    fn = attempts(RequestTimeout("t"))
    with pytest.raises(RequestTimeout):
        guard.call(fn, tool="transfer_money", safe_to_retry=False)
    assert len(fn.calls) == 1


def test_errors_are_recorded_as_error(clock: FakeClock, rec: Recorder) -> None:
    guard = make(clock, rec)
    with pytest.raises(InvalidParams):
        guard.call(attempts(InvalidParams("bad")), tool="t")
    with pytest.raises(ValueError):
        guard.call(attempts(ValueError("bug")), tool="t")
    assert [r[-1] for r in rec.rows] == ["error", "error"]
    assert guard.breaker.state is BreakerState.CLOSED  # neither counts as a server failure


def test_breaker_opens_through_the_guard_and_then_fails_fast(clock: FakeClock, rec: Recorder) -> None:
    changes: list[tuple[BreakerState, BreakerState]] = []
    guard = make(clock, rec, on_breaker_change=lambda o, n: changes.append((o, n)))
    fn = attempts(*(ConnectionClosed("reset") for _ in range(100)))
    with pytest.raises(ConnectionClosed) as info:
        guard.call(fn, tool="t", safe_to_retry=True)
    # five counted failures open it; the guard stops there instead of waiting to be refused
    assert len(fn.calls) == 5
    assert [n for n, _ in info.value.retry_history] == ["ConnectionClosed"] * 5
    assert clock.now == 7.0  # waited 0 + 1 + 2 + 4, not the 8 s before a sure refusal
    assert changes == [(BreakerState.CLOSED, BreakerState.OPEN)]
    calls_before = len(fn.calls)
    with pytest.raises(CircuitOpen) as again:
        guard.call(fn, tool="t", safe_to_retry=True)
    assert len(fn.calls) == calls_before  # fail fast, not retried
    assert again.value.retry_after == pytest.approx(30.0)  # opened just now, at t=7
    assert again.value.retry_history == (("CircuitOpen", 0.0),)
    clock.now += 30
    assert guard.call(attempts(), tool="t") == "ok"  # the half-open trial closes it
    assert guard.breaker.state is BreakerState.CLOSED
    assert [r[-1] for r in rec.rows] == ["error", "error", "success"]


def test_is_error_results_are_successes(clock: FakeClock, rec: Recorder) -> None:
    guard = make(clock, rec, breaker=BreakerPolicy(threshold=1))
    result = {"isError": True}
    for _ in range(5):
        assert guard.call(lambda: result, tool="t") is result
    assert guard.breaker.state is BreakerState.CLOSED
    assert {r[-1] for r in rec.rows} == {"success"}


def test_server_unavailable_is_immediate(clock: FakeClock, rec: Recorder) -> None:
    schedule = ReconnectSchedule(name="srv")
    for _ in range(6):
        schedule.failure()
    guard = make(clock, rec, reconnect=schedule)
    fn = attempts()
    with pytest.raises(ServerUnavailable):
        guard.call(fn, tool="t", safe_to_retry=True)
    assert fn.calls == []
    schedule.reset()
    assert guard.call(fn, tool="t") == "ok"


def test_per_call_retry_policy_and_shared_breaker(clock: FakeClock, rec: Recorder) -> None:
    shared = CircuitBreaker(BreakerPolicy(threshold=3), clock=clock, name="srv")
    g1 = make(clock, rec, breaker=shared)
    g2 = make(clock, rec, breaker=shared)
    assert g1.breaker is g2.breaker
    fn = attempts(*(PoolTimeout("busy") for _ in range(10)))
    with pytest.raises(PoolTimeout):
        g1.call(fn, tool="t", retry=RetryPolicy(retries=1))
    assert len(fn.calls) == 2
    assert shared.state is BreakerState.CLOSED  # pool saturation is not a server failure


def test_recorder_errors_never_reach_the_caller(clock: FakeClock) -> None:
    def bad(*args: object) -> None:
        raise RuntimeError("metrics backend down")

    guard = Guard("srv", clock=clock, sleep=clock.sleep, record=bad)
    assert guard.call(lambda: 1, tool="t") == 1


def test_keyboard_interrupt_propagates_and_is_recorded(clock: FakeClock, rec: Recorder) -> None:
    guard = make(clock, rec)

    def interrupted() -> None:
        raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        guard.call(interrupted, tool="t", safe_to_retry=True)
    assert rec.rows[-1][-1] == "error"
    assert guard.breaker.admitted == 1 and guard.breaker.neutral == 1


def test_outcome_of() -> None:
    assert outcome_of(None) == "success"
    assert outcome_of(RequestTimeout("t")) == "timeout"
    assert outcome_of(ConnectError("t", timeout=True)) == "timeout"
    assert outcome_of(ConnectError("refused", timeout=False)) == "error"
    assert outcome_of(CircuitOpen("open")) == "error"


def test_sixteen_threads_through_one_guard(clock: FakeClock, rec: Recorder) -> None:
    guard = make(clock, rec, breaker=BreakerPolicy(threshold=10_000))
    outcomes = {"ok": 0, "failed": 0}
    lock = threading.Lock()

    def worker(i: int) -> None:
        for j in range(100):
            fn = attempts(ConnectError("refused")) if (i + j) % 3 == 0 else attempts(InvalidParams("bad")) if (i + j) % 7 == 0 else attempts()
            try:
                guard.call(fn, tool=f"tool{i}")
                key = "ok"
            except InvalidParams:
                key = "failed"
            with lock:
                outcomes[key] += 1

    threads = [threading.Thread(target=worker, args=(i,)) for i in range(16)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=60)
    assert outcomes["ok"] + outcomes["failed"] == 1600 == len(rec.rows)
    assert sum(1 for r in rec.rows if r[-1] == "success") == outcomes["ok"]
    b = guard.breaker
    assert b.admitted == b.successes + b.failures + b.neutral
    assert b.successes == outcomes["ok"]


def test_tool_is_retry_safe() -> None:
    from mcpsync._retry import tool_is_retry_safe
    from mcpsync._messages import Tool, ToolAnnotations

    assert tool_is_retry_safe(Tool(name="read", annotations=ToolAnnotations(read_only_hint=True)))
    assert tool_is_retry_safe(Tool(name="put", annotations=ToolAnnotations(idempotent_hint=True)))
    assert not tool_is_retry_safe(Tool(name="send", annotations=ToolAnnotations(destructive_hint=True)))
    assert not tool_is_retry_safe(Tool(name="bare"))
    assert not tool_is_retry_safe(None)
    assert tool_is_retry_safe(None, opt_in=True)
    assert tool_is_retry_safe(type("T", (), {"annotations": {"readOnlyHint": True}})())


def test_breaker_lock_is_renewed_in_a_forked_child(clock: FakeClock) -> None:
    breaker = CircuitBreaker(BreakerPolicy(threshold=1), clock=clock)
    schedule = ReconnectSchedule()
    breaker._lock.acquire()  # as if another thread held it at the moment of the fork
    schedule._lock.acquire()

    def child() -> bytes:
        breaker.release(breaker.acquire(), ConnectionClosed("x"))  # would deadlock on the old lock
        schedule.failure()
        return b"ok" if breaker.state is BreakerState.OPEN and schedule.failures == 1 else b"bad"

    answer = run_in_child(child)
    breaker._lock.release()
    schedule._lock.release()
    assert answer == b"ok"


def test_budget_bounds_the_whole_call(clock: FakeClock, rec: Recorder) -> None:
    guard = make(clock, rec, breaker=BreakerPolicy.DISABLED)

    def slow_failure() -> None:
        clock.now += 2.0  # each attempt takes 2 s before failing
        raise ConnectError("refused")

    with pytest.raises(ConnectError) as info:
        guard.call(slow_failure, tool="t", budget=10.0)
    # t=2 fail, retry at once; t=4 fail, wait 1; t=7 fail; a 2 s wait would end at 9 <= 10: t=11 fail; stop
    assert [w for _, w in info.value.retry_history] == [0.0, 0.0, 1.0, 2.0]
    assert rec.rows[-1][3] == 11.0


def test_guard_over_a_pool_sixteen_threads_nothing_lost_or_doubled() -> None:
    """The Client's shape: guard.call(lambda: with pool.borrow() as c: c.request(...))."""
    import random

    from mcpsync._pool import ConnectionPool
    from mcpsync._policies import PoolLimits

    class Chan:
        def __init__(self) -> None:
            self.dead = False
            self.closed = False
            self.served = 0

        def alive(self) -> bool:
            return not self.dead and not self.closed

        def close(self) -> None:
            self.closed = True

        def request(self, rnd: random.Random) -> str:
            if self.dead or self.closed:
                raise ConnectionClosed("EOF")
            roll = rnd.random()
            if roll < 0.03:
                self.dead = True  # the server process was killed
                raise ConnectionClosed("EOF")
            if roll < 0.06:
                raise RequestTimeout("no answer")
            if roll < 0.08:
                raise InvalidParams("bad", data={"field": "x"})
            self.served += 1
            return "ok"

    made: list[Chan] = []
    made_lock = threading.Lock()

    def factory() -> Chan:
        chan = Chan()
        with made_lock:
            made.append(chan)
        return chan

    pool = ConnectionPool(factory, PoolLimits(min=2, max=6, max_in_flight=4, borrow_timeout=30.0))
    guard = Guard("srv", breaker=BreakerPolicy(threshold=10_000), sleep=lambda s: None)
    tally = {"issued": 0, "ok": 0, "failed": 0}
    lock = threading.Lock()

    def worker(seed: int) -> None:
        rnd = random.Random(seed)
        local = dict.fromkeys(tally, 0)
        for _ in range(200):
            local["issued"] += 1

            def attempt() -> str:
                with pool.borrow() as chan:
                    return chan.request(rnd)

            try:
                guard.call(attempt, safe_to_retry=True, tool="echo")
                local["ok"] += 1
            except (ConnectionClosed, RequestTimeout, InvalidParams):
                local["failed"] += 1
        with lock:
            for k, v in local.items():
                tally[k] += v

    threads = [threading.Thread(target=worker, args=(i,)) for i in range(16)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=120)
    assert not any(t.is_alive() for t in threads)
    assert tally["issued"] == 3200 == tally["ok"] + tally["failed"]
    assert sum(c.served for c in made) == tally["ok"]  # each success served exactly once
    s = pool.stats()
    assert s.in_use == 0 and s.borrowed == s.returned
    assert s.discarded >= 1 and all(c.closed for c in made if c.dead)
    assert s.created - s.closed == s.size
    pool.close()
