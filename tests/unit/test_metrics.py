"""MetricsRecorder and LatencyHistogram: precision, bounded memory, windows, exact counts."""

from __future__ import annotations

import dataclasses
import math
import random
import sys
import threading

import pytest

from mcpsync._errors import ConnectionClosed, RequestTimeout
from mcpsync._guard import Guard
from mcpsync._metrics import OTHER_TOOLS, LatencyHistogram, MetricsRecorder, fan_out
from mcpsync._policies import BreakerPolicy, RetryPolicy
from tests.helpers import while_reading


class Clock:
    def __init__(self) -> None:
        self.now = 5000.0

    def __call__(self) -> float:
        return self.now


def exact_percentile(values: list[float], q: float) -> float:
    s = sorted(values)
    return s[max(1, math.ceil(len(s) * q / 100)) - 1]


@pytest.mark.parametrize("dist", ["uniform", "lognormal", "bimodal"])
def test_percentiles_within_histogram_precision(dist):
    rnd = random.Random(42)
    if dist == "uniform":
        values = [rnd.uniform(0.0005, 2.0) for _ in range(20000)]
    elif dist == "lognormal":
        values = [rnd.lognormvariate(-4, 1.5) for _ in range(20000)]
    else:
        values = [rnd.choice([0.002, 0.150]) * rnd.uniform(0.9, 1.1) for _ in range(20000)]
    h = LatencyHistogram()
    for v in values:
        h.record(v)
    for q in (1, 25, 50, 90, 99, 99.9, 100):
        want = exact_percentile(values, q)
        got = h.percentile(q)
        # half a bucket, plus the microsecond rounding of each value
        assert abs(got - want) <= want * LatencyHistogram.PRECISION + 1e-6, (q, got, want)


def test_small_values_are_exact_to_the_microsecond():
    h = LatencyHistogram()
    for us in range(0, 128):
        h.record_us(us)
    assert h.percentile_us(100) == 127
    assert h.percentile_us(50) == 63
    assert h.min_us == 0


def test_memory_is_independent_of_call_count():
    h = LatencyHistogram()
    size = sys.getsizeof(h.counts)
    for i in range(200_000):
        h.record_us(i * 37)
    h.record(10 * 86400.0)  # ten days: clamped into the top bucket, max kept exactly
    assert len(h.counts) == LatencyHistogram.BUCKETS < 2100
    assert sys.getsizeof(h.counts) == size
    assert h.max_us == int(10 * 86400 * 1e6)
    assert h.percentile(100) == 10 * 86400.0


def test_merge_equals_recording_into_one():
    rnd = random.Random(1)
    a, b, both = LatencyHistogram(), LatencyHistogram(), LatencyHistogram()
    for i in range(5000):
        v = rnd.randint(0, 10**7)
        (a if i % 2 else b).record_us(v)
        both.record_us(v)
    a.merge(b)
    assert a.counts == both.counts and a.count == both.count
    assert (a.min_us, a.max_us, a.total_us) == (both.min_us, both.max_us, both.total_us)
    assert LatencyHistogram().percentile(50) is None


def test_counts_and_rates_exact():
    clock = Clock()
    rec = MetricsRecorder(clock=clock)
    for i in range(70):
        rec.record("s1", "echo", clock.now, clock.now + 0.010, "success")
    for i in range(20):
        rec.record("s1", "echo", clock.now, clock.now + 0.020, "error")
    for i in range(10):
        rec.record("s1", "slow", clock.now, clock.now + 30.0, "timeout")
    m = rec.snapshot()["s1"]
    echo, slow, total = m.tools["echo"], m.tools["slow"], m.total
    assert (echo.calls, echo.successes, echo.errors, echo.timeouts) == (90, 70, 20, 0)
    assert echo.error_rate == pytest.approx(20 / 90)
    assert (slow.calls, slow.timeouts, slow.error_rate) == (10, 10, 1.0)
    assert (total.calls, total.successes, total.errors, total.timeouts) == (100, 70, 20, 10)
    assert total.error_rate == pytest.approx(0.30)
    assert echo.p50_ms == pytest.approx(10.0, rel=LatencyHistogram.PRECISION)
    assert echo.p99_ms == pytest.approx(20.0, rel=LatencyHistogram.PRECISION)
    assert total.p99_ms == pytest.approx(30_000.0, rel=LatencyHistogram.PRECISION)
    assert total.max_ms == pytest.approx(30_000.0)


def test_qps_over_a_sliding_window():
    clock = Clock()
    rec = MetricsRecorder(window=10, clock=clock)
    for sec in range(20):  # 5 calls per second for 20 s
        for _ in range(5):
            rec.record("s1", "t", clock.now, clock.now, "success")
        clock.now += 1.0
    clock.now -= 0.5
    assert rec.snapshot()["s1"].tools["t"].qps == pytest.approx(5.0, rel=0.11)
    clock.now += 30  # nothing in the last window
    assert rec.snapshot()["s1"].total.qps == 0.0


def test_qps_before_a_full_window():
    clock = Clock()
    rec = MetricsRecorder(window=60, clock=clock)
    for _ in range(10):
        rec.record("s1", "t", clock.now, clock.now, "success")
    clock.now += 1.0
    for _ in range(10):
        rec.record("s1", "t", clock.now, clock.now, "success")
    # 20 calls over two seconds, not over 60
    assert rec.snapshot()["s1"].total.qps == pytest.approx(10.0, rel=0.01)


def test_discovery_is_kept_apart():
    clock = Clock()
    rec = MetricsRecorder(clock=clock)
    rec.record("s1", "tools/list", 1.0, 1.5, "success")
    rec.record("s1", None, 1.0, 1.1, "success")  # a non-tool request: in the total only
    rec.record_discovery("s1")
    m = rec.snapshot()["s1"]
    assert m.discovery.calls == 2 and m.discovery.p50_ms == pytest.approx(500, rel=0.01)
    assert m.total.calls == 1 and dict(m.tools) == {}


def test_snapshot_is_frozen_and_plain():
    rec = MetricsRecorder()
    rec.record("s1", "a", 0.0, 0.001, "success")
    snap = rec.snapshot()
    with pytest.raises(dataclasses.FrozenInstanceError):
        snap["s1"].total.calls = 5  # type: ignore[misc]
    with pytest.raises(TypeError):
        snap["s1"].tools["b"] = None  # type: ignore[index]
    rec.record("s1", "a", 0.0, 0.001, "success")
    assert snap["s1"].total.calls == 1  # a snapshot does not move
    d = snap.as_dict()
    assert d["servers"]["s1"]["tools"]["a"]["calls"] == 1
    assert "s1" in snap and list(snap) == ["s1"] and len(snap) == 1


def test_tool_names_are_bounded():
    rec = MetricsRecorder(max_tools=5)
    for i in range(50):
        rec.record("s1", f"tool{i}", 0.0, 0.001, "success")
    m = rec.snapshot()["s1"]
    assert len(m.tools) == 6
    assert m.tools[OTHER_TOOLS].calls == 45
    assert m.total.calls == 50


def test_exact_counts_under_threads():
    rec = MetricsRecorder()
    outcomes = ["success", "error", "timeout", "success"]

    def work(t):
        for i in range(1000):
            rec.record(f"s{t % 2}", f"tool{i % 3}", 0.0, 0.001 * (i % 7), outcomes[i % 4])

    ts = [threading.Thread(target=work, args=(t,)) for t in range(8)]
    for t in ts:
        t.start()
    for t in ts:
        t.join(30)
    snap = rec.snapshot()
    for s in ("s0", "s1"):
        tot = snap[s].total
        assert (tot.calls, tot.successes, tot.errors, tot.timeouts) == (4000, 2000, 1000, 1000)


def test_queued_records_stay_bounded_and_are_all_counted():
    from mcpsync._metrics import BATCH

    rec = MetricsRecorder()
    for i in range(10 * BATCH + 3):
        rec.record("s1", "echo", 0.0, 0.001, "success")
        assert len(rec._queue) < BATCH  # folded in batches: memory does not grow with calls
    assert rec.snapshot()["s1"].total.calls == 10 * BATCH + 3
    assert len(rec._queue) == 0


def test_as_the_guards_recorder():
    clock = Clock()
    rec = MetricsRecorder(clock=clock)
    guard = Guard("s1", record=rec, clock=clock, sleep=lambda s: None, retry=RetryPolicy.NONE,
                  breaker=BreakerPolicy.DEFAULT)

    def ok():
        clock.now += 0.040
        return "ok"

    def times_out():
        clock.now += 2.0
        raise RequestTimeout("slow")

    def closed():
        clock.now += 0.001
        raise ConnectionClosed("gone")

    for _ in range(3):
        guard.call(ok, tool="echo")
    with pytest.raises(RequestTimeout):
        guard.call(times_out, tool="sleep")
    with pytest.raises(ConnectionClosed):
        guard.call(closed, tool="echo")
    m = rec.snapshot()["s1"]
    assert m.tools["echo"].successes == 3
    assert m.tools["echo"].errors == 1
    assert m.tools["sleep"].timeouts == 1
    assert m.tools["echo"].p50_ms == pytest.approx(40.0, rel=LatencyHistogram.PRECISION)


def test_fan_out_isolates_failing_sinks():
    got = []

    def bad(*a):
        raise RuntimeError("sink down")

    rec = fan_out(bad, None, lambda *a: got.append(a[-1]))
    rec("s", "t", 0.0, 1.0, "success")
    assert got == ["success"]
    one = MetricsRecorder()
    assert fan_out(None, one) is one


def test_fan_out_forwards_cache_events_to_sinks_that_take_them():
    a, b = MetricsRecorder(), MetricsRecorder()
    calls = []
    both = fan_out(a, b, lambda *args: calls.append(args))
    both("s1", "t", 0.0, 0.002, "success")
    both.record_cache("s1", True, "t")
    both.record_discovery("s1")
    for rec in (a, b):
        m = rec.snapshot()["s1"]
        assert (m.tools["t"].calls, m.tools["t"].cache_hits, m.discovery.calls) == (1, 1, 1)
    assert len(calls) == 1


def test_exact_counts_under_threads_on_the_guards_path():
    """``queue_call`` (what the Guard calls; compiled, it adds to a known tally at once)
    from many threads, with snapshots taken meanwhile: all counted, every snapshot whole
    (a call's latency counted with its outcome)."""
    rec = MetricsRecorder()
    outcomes = ["success", "error", "timeout", "success"]
    torn = []

    def read_once():
        for m in rec.snapshot().servers.values():
            for st in m.tools.values():
                if (st.calls > 0) != (st.mean_ms is not None):
                    torn.append(st)

    def work(t):
        for i in range(3000):
            rec.queue_call(f"s{t % 2}", f"tool{i % 3}", 0.0, 0.001 * (i % 7), outcomes[i % 4])

    while_reading(read_once, work)
    assert not torn
    snap = rec.snapshot()
    for s in ("s0", "s1"):
        tot = snap[s].total
        assert (tot.calls, tot.successes, tot.errors, tot.timeouts) == (12000, 6000, 3000, 3000)
    rec.reset()
    rec.queue_call("s0", "tool0", 0.0, 0.001, "success")  # the reset kept the recorder's dict
    assert rec.snapshot()["s0"].total.calls == 1
