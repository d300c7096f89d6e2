"""Metrics overhead per call: the recorder alone, and a Guard call with and without it.

Groups (baseline = the ``raw`` benchmark of each):
* ``metrics-record`` — one ``record(server, tool, start, end, outcome)``: a no-op
  function (raw), :class:`MetricsRecorder`, and the OpenTelemetry recorder when the SDK
  is installed.
* ``metrics-guard-call`` — ``Guard.call`` of a trivial function without a recorder
  (raw) and with :class:`MetricsRecorder`: the difference is what a call pays.
* ``metrics-snapshot`` — ``snapshot()`` of 4 servers x 20 tools.

Run: ``taskset -c 0 python -m pytest benchmarks/bench_metrics.py --benchmark-enable -p no:randomly``
"""

from __future__ import annotations

import itertools
import threading
import time

import pytest

from mcpsync._guard import Guard
from mcpsync._metrics import LatencyHistogram, MetricsRecorder

_lat = itertools.cycle([0.0004, 0.003, 0.012, 0.080, 0.250])


def _noop(server, tool, start, end, outcome):
    return None


@pytest.mark.benchmark(group="metrics-record")
def test_record_raw_noop(benchmark):
    benchmark(_noop, "s1", "echo", 1.0, 1.012, "success")


@pytest.mark.benchmark(group="metrics-record")
def test_record_metrics_recorder(benchmark):
    rec = MetricsRecorder()
    t = time.monotonic()
    benchmark(rec.record, "s1", "echo", t, t + 0.012, "success")
    assert rec.snapshot()["s1"].total.calls > 0


@pytest.mark.benchmark(group="metrics-record")
def test_record_histogram_only(benchmark):
    h = LatencyHistogram()
    lock = threading.Lock()

    def record(v):
        with lock:
            h.record(v)

    benchmark(record, 0.012)


@pytest.mark.benchmark(group="metrics-record")
def test_record_opentelemetry(benchmark):
    pytest.importorskip("opentelemetry.sdk", reason="opentelemetry-sdk not installed (the otel extra)")
    from opentelemetry.sdk.metrics import MeterProvider
    from opentelemetry.sdk.metrics.export import InMemoryMetricReader

    from mcpsync._otel import OTelRecorder

    rec = OTelRecorder(meter_provider=MeterProvider(metric_readers=[InMemoryMetricReader()]))
    t = time.monotonic()
    benchmark(rec.record, "s1", "echo", t, t + 0.012, "success")


@pytest.mark.benchmark(group="metrics-guard-call")
def test_guard_call_raw_no_recorder(benchmark):
    g = Guard("s1")
    assert benchmark(g.call, lambda: 1, tool="echo") == 1


@pytest.mark.benchmark(group="metrics-guard-call")
def test_guard_call_with_metrics_recorder(benchmark):
    rec = MetricsRecorder()
    g = Guard("s1", record=rec)
    assert benchmark(g.call, lambda: 1, tool="echo") == 1
    assert rec.snapshot()["s1"].tools["echo"].calls > 0


@pytest.mark.benchmark(group="metrics-snapshot")
def test_snapshot_4_servers_20_tools(benchmark):
    rec = MetricsRecorder()
    for s in range(4):
        for t in range(20):
            for _ in range(50):
                rec.record(f"s{s}", f"tool{t}", 0.0, next(_lat), "success")
    snap = benchmark(rec.snapshot)
    assert len(snap) == 4
