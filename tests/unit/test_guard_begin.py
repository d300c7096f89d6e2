"""Guard.begin: the start of a caller-run first attempt, or None when the guard must run it."""

from __future__ import annotations

import pytest

from mcpsync import ConnectError, NetworkError, ServerUnavailable
from mcpsync._guard import Guard, ReconnectSchedule
from mcpsync._policies import BreakerPolicy, ReconnectPolicy


class Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def test_begin_gives_the_start_only_while_the_breaker_is_closed():
    clock = Clock()
    seen: list[str] = []
    guard = Guard("s", breaker=BreakerPolicy(threshold=1), clock=clock,
                  record=lambda *a: seen.append(a[-1]))
    start = guard.begin()
    assert start == 100.0
    clock.now = 101.0
    guard.succeeded("t", start)
    assert seen == ["success"] and guard.breaker.successes == 1
    breaker = guard.breaker
    breaker.release(breaker.acquire(), NetworkError("reset by peer"))
    assert guard.begin() is None  # open: the guard's own path decides (CircuitOpen)


def test_begin_is_none_while_the_server_is_unavailable():
    schedule = ReconnectSchedule(ReconnectPolicy(max_failures=1, backoff=0.0), name="s")
    guard = Guard("s", reconnect=schedule)
    assert guard.begin() is not None

    def refuse():
        raise ConnectError("refused", sent=False)

    with pytest.raises((ServerUnavailable, ConnectError)):
        schedule.run(refuse, sleep=lambda _s: None)
    assert schedule.unavailable
    assert guard.begin() is None


def test_a_recorder_that_raises_is_logged_and_the_success_still_counts(caplog):
    def broken(*_args: object) -> None:
        raise RuntimeError("recorder bug")

    guard = Guard("s", record=broken)
    start = guard.begin()
    assert start is not None
    with caplog.at_level("ERROR", logger="mcpsync.guard"):
        guard.succeeded("t", start)
    assert guard.breaker.successes == 1
    assert "metrics recorder raised" in caplog.text
