"""Metrics from real calls: a stdio server that sleeps per call, fails and hangs on demand.

The Client's Guard reports each call to a MetricsRecorder (``Client(record=...)``); the
same (start, end) pairs are kept beside it, so the recorder's percentiles are checked against the exact ones within the
histogram's precision (no wall-clock assertion beyond "a call lasts at least its sleep").
"""

from __future__ import annotations

import math
import threading

import pytest

from mcpsync import Client
from mcpsync._errors import MCPError, RequestTimeout
from mcpsync._metrics import LatencyHistogram, MetricsRecorder, fan_out
from mcpsync._policies import BreakerPolicy, RetryPolicy
from tests.conftest import server_command

SLEEPS_MS = [5] * 30 + [40] * 15 + [120] * 5  # p50 in the 5 ms calls, p99 in the 120 ms ones


@pytest.fixture(params=["legacy", "modern"])
def era(request):
    return request.param


def make_client(era: str, record) -> Client:
    argv = server_command("counting_server.py")
    return Client.stdio(
        argv[0], argv[1:], mode=era, name="counting", record=record,
        retry=RetryPolicy.NONE, breaker=BreakerPolicy.DISABLED,
    )


def exact(values: list[float], q: float) -> float:
    s = sorted(values)
    return s[max(1, math.ceil(len(s) * q / 100)) - 1]


def test_latencies_errors_and_timeouts(era):
    rec = MetricsRecorder()
    seen: list[tuple[str | None, float, str]] = []
    with make_client(era, fan_out(rec, lambda s, t, a, b, o: seen.append((t, b - a, o)))) as client:
        for ms in SLEEPS_MS:
            assert client.call_tool("sleep_ms", {"ms": ms}, timeout=10).text == "slept"
        for _ in range(7):
            with pytest.raises(MCPError):
                client.call_tool("fail", timeout=10)
        for _ in range(3):
            with pytest.raises(RequestTimeout):
                client.call_tool("hang", timeout=0.2)
        for _ in range(4):
            client.call_tool("echo", {"message": "x"}, timeout=10)

    m = rec.snapshot()["counting"]
    sleep = m.tools["sleep_ms"]
    durations = [d for t, d, _ in seen if t == "sleep_ms"]
    assert sleep.calls == len(SLEEPS_MS) == len(durations)
    for q, got in ((50, sleep.p50_ms), (99, sleep.p99_ms)):
        want = exact(durations, q) * 1000
        assert got == pytest.approx(want, rel=LatencyHistogram.PRECISION, abs=0.001), q
    assert sleep.p50_ms >= 5 and sleep.p99_ms >= 120  # a call lasts at least its sleep
    assert (m.tools["fail"].errors, m.tools["fail"].calls, m.tools["fail"].timeouts) == (7, 7, 0)
    assert (m.tools["hang"].timeouts, m.tools["hang"].errors) == (3, 0)
    assert m.tools["echo"].successes == 4 and m.tools["echo"].error_rate == 0.0
    total = m.total
    # the total may also hold the client's own requests recorded without a tool name
    # (connect, pings); every tool call is in it exactly once
    assert sum(t.calls for t in m.tools.values()) == len(SLEEPS_MS) + 7 + 3 + 4
    assert (total.errors, total.timeouts) == (7, 3)
    assert total.error_rate == pytest.approx(10 / total.calls)
    assert total.qps > 0


def test_concurrent_calls_count_exactly(era):
    rec = MetricsRecorder()
    errors: list[BaseException] = []
    with make_client(era, rec) as client:

        def work(i: int) -> None:
            for j in range(10):
                try:
                    if j % 5 == 4:
                        client.call_tool("fail", timeout=10)
                    else:
                        client.call_tool("sleep_ms", {"ms": 2}, timeout=10)
                except MCPError as exc:
                    if "asked to fail" not in str(exc):
                        errors.append(exc)

        ts = [threading.Thread(target=work, args=(i,)) for i in range(8)]
        for t in ts:
            t.start()
        for t in ts:
            t.join(60)
    assert not errors
    m = rec.snapshot()["counting"]
    assert m.tools["sleep_ms"].successes == 64
    assert m.tools["fail"].errors == 16
    assert sum(t.calls for t in m.tools.values()) == 80
