"""A busy server never floods the client (issue 31, defects 5 and 6).

raw_server.py's ``flood`` tool answers, then sends notifications/message as fast as the pipe
takes them (or at a given rate): with no call in flight the idle reader drains them as fast
as they come; with a slow handler the worker's lane stays bounded (the oldest dropped and
counted), memory stays flat, calls are answered, the caches still learn of a list change at
once, and nothing is delivered after ``close()`` returns.
"""

from __future__ import annotations

import threading
import time

import pytest

from mcpsync import Client
from tests.conftest import server_command
from tests.helpers import wait_until

pytestmark = pytest.mark.timeout(120)

RAW = server_command("raw_server.py")


def _rss_mib() -> float:
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    return 0.0


def test_a_burst_with_no_call_in_flight_is_drained_as_it_comes() -> None:
    n = 50_000
    got = [0]

    def handler(_params: object) -> None:
        got[0] += 1

    with Client.stdio(RAW[0], RAW[1:], mode="legacy", logging_handler=handler) as c:
        assert c.call_tool("flood", {"count": n}).text == "flooding"  # then no call is in flight
        started = time.monotonic()
        # every event is delivered or counted as dropped: on a quiet machine none is; on a
        # busy one the handler's thread may fall a whole lane (10,000) behind the reader for
        # a moment, and the oldest go, counted (CI saw 182 of 50,000 once)
        accounted = wait_until(lambda: got[0] + c.diagnostics().events_dropped == n, 60)
        took = time.monotonic() - started
        dropped = c.diagnostics().events_dropped
        assert accounted, f"{got[0]} delivered and {dropped} dropped of {n}"
    assert dropped < n // 10, dropped
    # the promise is a second (0.2 s here when the machine is quiet); at ~49 a second,
    # as before, this would take 17 minutes
    assert took < 5.0, took


def test_a_flood_with_a_slow_handler_keeps_memory_flat_and_ends_at_close() -> None:
    handled: list[float] = []

    def slow(_params: object) -> None:
        handled.append(time.monotonic())
        time.sleep(0.001)

    c = Client.stdio(RAW[0], RAW[1:], mode="legacy", logging_handler=slow)
    try:
        assert "echo" in [t.name for t in c.list_tools()]
        before = _rss_mib()
        # 50,000 a second for 4 s, a tools/list_changed a second in
        c.call_tool("flood", {"count": 200_000, "rate": 50_000, "changed_at": 50_000})
        assert wait_until(lambda: c.diagnostics().cached_tools is None, 10), "the list change waited behind the backlog"
        peak = before
        ends = time.monotonic() + 4.0
        while time.monotonic() < ends:
            started = time.monotonic()
            assert c.call_tool("echo", {"message": "through"}, timeout=10).text == "through"
            assert time.monotonic() - started < 2.0  # answers are not held up behind the backlog
            peak = max(peak, _rss_mib())
            threading.Event().wait(0.1)
        dropped = c.diagnostics().events_dropped
        assert dropped > 0  # counted (and warned about)
        assert peak - before < 40, (before, peak)  # (it grew 93-119 MiB before)
    finally:
        c.close()
    closed = time.monotonic()
    threading.Event().wait(0.5)
    assert not [t for t in handled if t > closed], "delivered after close() returned"
