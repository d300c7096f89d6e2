"""An OpenTelemetry SDK wired to in-memory exporters, for the telemetry tests.

Import it after ``pytest.importorskip("opentelemetry.sdk.trace")``: opentelemetry-sdk belongs
to the test extra.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import NamedTuple

from opentelemetry.sdk.metrics import MeterProvider
from opentelemetry.sdk.metrics.export import InMemoryMetricReader
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from mcpsync import _otel


class InMemoryOTel(NamedTuple):
    tel: _otel.Telemetry
    exporter: InMemorySpanExporter
    reader: InMemoryMetricReader
    tracer_provider: TracerProvider
    meter_provider: MeterProvider


@contextmanager
def in_memory_otel() -> Iterator[InMemoryOTel]:
    """A client's Telemetry whose spans and metrics stay in memory; both providers shut down after."""
    exporter = InMemorySpanExporter()
    tp = TracerProvider()
    tp.add_span_processor(SimpleSpanProcessor(exporter))
    reader = InMemoryMetricReader()
    mp = MeterProvider(metric_readers=[reader])
    tel = _otel.telemetry(tracer_provider=tp, meter_provider=mp)
    assert tel is not None
    try:
        yield InMemoryOTel(tel, exporter, reader, tp, mp)
    finally:
        tp.shutdown()
        mp.shutdown()
