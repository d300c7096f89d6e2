"""The worker's ordered lane (mcpsync._worker): bounded, in order, counted, quiet after close."""

from __future__ import annotations

import threading

from mcpsync._worker import Worker
from tests.helpers import wait_until


def test_every_event_is_delivered_in_order_or_counted_as_dropped() -> None:
    w = Worker("lane-test", lane_limit=64)
    seen: list[int] = []
    try:
        for i in range(5_000):
            w.serial(seen.append, i)
        assert wait_until(lambda: len(seen) + w.dropped == 5_000, 10), (len(seen), w.dropped)
        assert seen == sorted(seen)  # the order kept; what went, went oldest first
        assert not w.dropped or seen[-1] == 4_999
    finally:
        w.close()


def test_a_slow_callback_keeps_the_lane_bounded_and_the_oldest_go() -> None:
    w = Worker("lane-test", lane_limit=16)
    started, release = threading.Event(), threading.Event()
    seen: list[int] = []

    def slow(i: int) -> None:
        started.set()
        release.wait(10)
        seen.append(i)

    try:
        w.serial(slow, -1)
        assert started.wait(10)
        for i in range(1_000):  # the lane thread is held: none of these runs yet
            w.serial(seen.append, i)
        assert w.dropped >= 1_000 - 16 - 64  # at most the lane and one batch are kept
        release.set()
        assert wait_until(lambda: seen and seen[-1] == 999, 10)
        assert seen == sorted(seen) and len(seen) + w.dropped == 1_001
    finally:
        release.set()
        w.close()


def test_nothing_runs_after_close_returns() -> None:
    w = Worker("lane-test", lane_limit=1_000)
    inside, release = threading.Event(), threading.Event()
    seen: list[int] = []

    def first(_i: int) -> None:
        inside.set()
        release.wait(10)

    w.serial(first, 0)
    assert inside.wait(10)
    for i in range(1, 100):  # taken with the first one, or still in the lane
        w.serial(seen.append, i)
    closer = threading.Thread(target=w.close, kwargs={"timeout": 10})
    closer.start()
    assert wait_until(lambda: w._closed, 10)  # close() is waiting for the running callback
    release.set()  # the callback running ends; close() waits for it, then nothing more runs
    closer.join(10)
    assert not closer.is_alive()
    after = len(seen)
    threading.Event().wait(0.05)
    assert len(seen) == after == 0, seen
