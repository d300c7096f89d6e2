"""OpenTelemetry: a span per call with W3C trace context in ``_meta``, metrics, zero cost off.

Uses the SDK's in-memory span exporter and metric reader with private providers (the
global ones are left alone). The server echoes the ``_meta`` it received, so the test
sees the trace context that went over the wire.
"""

from __future__ import annotations

import subprocess
import sys

import pytest

from mcpsync import Client
from mcpsync._errors import MCPError, RequestTimeout
from mcpsync._metrics import MetricsRecorder, fan_out
from mcpsync._policies import BreakerPolicy, RetryPolicy
from tests.conftest import server_command

sdk = pytest.importorskip(
    "opentelemetry.sdk.trace", reason="opentelemetry-sdk is not installed (it belongs to the test extra: mcpsync[otel])"
)

from opentelemetry.sdk.trace import TracerProvider  # noqa: E402
from opentelemetry.trace import SpanKind, StatusCode  # noqa: E402

from mcpsync import _otel  # noqa: E402
from tests.otel_support import in_memory_otel  # noqa: E402


@pytest.fixture
def otel():
    with in_memory_otel() as o:
        o.tel.standalone = _otel.OTelRecorder(o.meter_provider)  # the Guard's sink alone (a Telemetry records durations itself)
        yield o.tel, o.exporter, o.reader, o.tracer_provider


@pytest.fixture(params=["legacy", "modern"])
def era(request):
    return request.param


def _client(era: str, record) -> Client:
    argv = server_command("counting_server.py")
    return Client.stdio(argv[0], argv[1:], mode=era, name="counting", record=record,
                        retry=RetryPolicy.NONE, breaker=BreakerPolicy.DISABLED)


def _points(reader, name):
    data = reader.get_metrics_data()
    out = []
    for rm in data.resource_metrics:
        for sm in rm.scope_metrics:
            for metric in sm.metrics:
                if metric.name == name:
                    out.extend(metric.data.data_points)
    return out


def test_span_per_call_and_trace_context_on_the_wire(otel, era):
    tel, exporter, reader, tp = otel
    rec = MetricsRecorder()
    with _client(era, fan_out(rec, tel.standalone)) as client:
        parent_tracer = tp.get_tracer("agent")
        with parent_tracer.start_as_current_span("agent-turn") as turn:
            with tel.call_span("counting", "meta") as span:
                result = client.call_tool("meta", meta=span.meta, timeout=10)
        seen = result.structured_content
        ctx = span.span.get_span_context()
        assert seen["traceparent"] == f"00-{ctx.trace_id:032x}-{ctx.span_id:016x}-{int(ctx.trace_flags):02x}"
        assert "tracestate" not in seen or isinstance(seen["tracestate"], str)

        with pytest.raises(MCPError):
            with tel.call_span("counting", "fail"):
                client.call_tool("fail", timeout=10)
        with pytest.raises(RequestTimeout):
            with tel.call_span("counting", "hang"):
                client.call_tool("hang", timeout=0.2)

    spans = {s.name: s for s in exporter.get_finished_spans()}
    call = spans["tools/call meta"]
    assert call.kind is SpanKind.CLIENT
    assert call.parent is not None and call.parent.span_id == turn.get_span_context().span_id
    assert call.attributes["gen_ai.tool.name"] == "meta"
    assert call.attributes["mcp.method.name"] == "tools/call"
    assert call.status.status_code is StatusCode.UNSET
    failed = spans["tools/call fail"]
    assert failed.status.status_code is StatusCode.ERROR and failed.events[0].name == "exception"
    assert spans["tools/call hang"].attributes["mcpsync.outcome"] == "timeout"

    durations = [p for p in _points(reader, "mcp.client.operation.duration") if p.attributes.get("gen_ai.tool.name")]
    by_tool = {p.attributes["gen_ai.tool.name"]: p for p in durations}
    assert by_tool["meta"].count == 1 and by_tool["meta"].sum > 0
    assert by_tool["hang"].attributes["error.type"] == "timeout"
    assert by_tool["fail"].attributes["error.type"] == "error"
    assert all(p.attributes["mcp.method.name"] != "request" for p in _points(reader, "mcp.client.operation.duration"))
    calls = {p.attributes.get("gen_ai.tool.name"): p.value for p in _points(reader, "mcpsync.client.calls")}
    assert calls["meta"] == calls["fail"] == calls["hang"] == 1


def test_cache_lookups_reach_otel(otel):
    from mcpsync._cache import ToolCache
    from mcpsync._messages import Tool

    tel, _, reader, _ = otel
    cache = ToolCache(metrics=tel.recorder)
    cache.put("s1", [Tool(name="a")])
    cache.lookup("s1", "a")
    cache.lookup("s1", "b")
    got = {p.attributes["hit"]: p.value for p in _points(reader, "mcpsync.tool_cache.lookups")}
    assert got == {True: 1, False: 1}
    assert sum(p.value for p in _points(reader, "mcpsync.tool_cache.discoveries")) == 1


def test_inject_current_context():
    from opentelemetry import trace

    tp = TracerProvider()
    with tp.get_tracer("t").start_as_current_span("outer") as span:
        meta = _otel.inject_trace_context({"progressToken": 3})
    ctx = span.get_span_context()
    assert meta["traceparent"] == f"00-{ctx.trace_id:032x}-{ctx.span_id:016x}-{int(ctx.trace_flags):02x}"
    assert meta["progressToken"] == 3
    # no current span: nothing is added
    assert _otel.inject_trace_context({"a": 1}) == {"a": 1}
    assert trace.get_current_span().get_span_context().is_valid is False


def test_absent_opentelemetry_costs_nothing(monkeypatch):
    monkeypatch.setattr(_otel, "_available", False)
    assert _otel.telemetry() is None
    assert _otel.inject_trace_context({"a": 1}) == {"a": 1}
    # importing mcpsync (and the module itself) does not import opentelemetry
    code = "import sys, mcpsync, mcpsync._otel, mcpsync._metrics, mcpsync._cache; print(any(m.startswith('opentelemetry') for m in sys.modules))"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert out.stdout.strip() == "False", out.stderr
