"""OpenTelemetry by the MCP semantic conventions, against real servers.

A client built with ``telemetry=`` traces every request by itself: span names
``{mcp.method.name} {target}``, the conventions' attributes, trace context (with
baggage) in ``params._meta`` as the server received it, and the two client histograms
with the conventions' bucket boundaries. The SDK's in-memory span exporter and metric
reader, on private providers, see what an exporter would; one test scrapes the metrics
through the OTel Prometheus exporter over HTTP on 127.0.0.1.
"""

from __future__ import annotations

import subprocess
import time
import urllib.request
from collections.abc import Iterator

import pytest

from mcpsync import Client
from mcpsync._errors import RemoteError
from mcpsync._policies import BreakerPolicy, RetryPolicy
from tests.conftest import free_port, server_command

pytest.importorskip("opentelemetry.sdk.trace", reason="opentelemetry-sdk belongs to the test extra")

from opentelemetry import baggage, trace  # noqa: E402
from opentelemetry import context as otel_context  # noqa: E402
from opentelemetry.sdk.metrics import MeterProvider  # noqa: E402
from opentelemetry.sdk.metrics.export import InMemoryMetricReader  # noqa: E402
from opentelemetry.sdk.trace import TracerProvider  # noqa: E402
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter  # noqa: E402
from opentelemetry.trace import SpanKind, StatusCode  # noqa: E402

from mcpsync import _otel  # noqa: E402
from tests.otel_support import in_memory_otel  # noqa: E402

BUCKETS = (0.01, 0.02, 0.05, 0.1, 0.2, 0.5, 1, 2, 5, 10, 30, 60, 120, 300)


@pytest.fixture
def otel() -> Iterator[tuple[_otel.Telemetry, InMemorySpanExporter, InMemoryMetricReader, TracerProvider]]:
    with in_memory_otel() as o:
        yield o.tel, o.exporter, o.reader, o.tracer_provider


def _points(reader: InMemoryMetricReader, name: str) -> list:
    out = []
    data = reader.get_metrics_data()
    for rm in data.resource_metrics if data else ():
        for sm in rm.scope_metrics:
            for metric in sm.metrics:
                if metric.name == name:
                    out.extend(metric.data.data_points)
    return out


def _sdk_stdio(tel: _otel.Telemetry, mode: str) -> Client:
    argv = server_command("sdk_server.py")
    return Client.stdio(argv[0], argv[1:], mode=mode, name="sdk", telemetry=tel,
                        retry=RetryPolicy.NONE, breaker=BreakerPolicy.DISABLED)


@pytest.mark.parametrize("mode", ["legacy", "modern"])
def test_every_method_is_a_span_named_by_the_conventions(otel, mode: str) -> None:
    tel, exporter, reader, _ = otel
    with _sdk_stdio(tel, mode) as client:
        client.list_tools(refresh=True)
        assert client.call_tool("echo", {"message": "hi"}, timeout=30).is_error is False
        assert client.call_tool("fail", {}, timeout=30).is_error is True
        client.get_prompt("review", {"code": "x = 1"}, timeout=30)
        client.read_resource("test://greeting", timeout=30)
        with pytest.raises(RemoteError) as bad:
            client.get_prompt("no-such-prompt", timeout=30)
        version = client.protocol_version

    spans = {s.name: s for s in exporter.get_finished_spans()}
    handshake = "server/discover" if mode == "modern" else "initialize"
    assert spans[handshake].attributes["mcp.method.name"] == handshake  # the session's own request
    assert {"tools/list", "tools/call echo", "tools/call fail", "prompts/get review", "resources/read",
            "prompts/get no-such-prompt"} <= set(spans), sorted(spans)
    for s in spans.values():
        assert s.kind is SpanKind.CLIENT
        assert s.attributes["mcp.method.name"] == s.name.split(" ")[0]
        assert s.attributes["network.transport"] == "pipe"
        assert s.attributes["mcp.protocol.version"] == version
        assert "mcp.session.id" not in s.attributes  # stdio has no session id
    echo = spans["tools/call echo"]
    assert echo.attributes["gen_ai.tool.name"] == "echo"
    assert echo.attributes["gen_ai.operation.name"] == "execute_tool"
    assert "error.type" not in echo.attributes and echo.status.status_code is StatusCode.UNSET
    fail = spans["tools/call fail"]
    assert fail.attributes["error.type"] == "tool_error" and fail.status.status_code is StatusCode.ERROR
    assert spans["prompts/get review"].attributes["gen_ai.prompt.name"] == "review"
    assert spans["resources/read"].attributes["mcp.resource.uri"] == "test://greeting"
    bad_span = spans["prompts/get no-such-prompt"]
    assert bad_span.attributes["error.type"] == str(bad.value.code)
    assert bad_span.attributes["rpc.response.status_code"] == str(bad.value.code)
    assert bad_span.status.status_code is StatusCode.ERROR

    ops = _points(reader, "mcp.client.operation.duration")
    methods = {p.attributes["mcp.method.name"] for p in ops}
    assert {"tools/list", "tools/call", "prompts/get", "resources/read", handshake} <= methods
    assert "request" not in methods
    by = {(p.attributes["mcp.method.name"], p.attributes.get("gen_ai.tool.name"), p.attributes.get("error.type")): p
          for p in ops}
    assert by[("tools/call", "echo", None)].count == 1
    assert by[("tools/call", "fail", "tool_error")].count == 1
    for p in ops:
        assert tuple(p.explicit_bounds) == BUCKETS
        assert p.attributes["mcpsync.server"] == "sdk"  # what tells two stdio servers apart
        assert p.attributes["network.transport"] == "pipe"
        assert "mcp.resource.uri" not in p.attributes  # opt-in on metrics: high cardinality
    sessions = _points(reader, "mcp.client.session.duration")
    assert sum(p.count for p in sessions) >= 1
    assert all(tuple(p.explicit_bounds) == BUCKETS for p in sessions)
    assert all(p.attributes["network.transport"] == "pipe" and "error.type" not in p.attributes for p in sessions)


@pytest.mark.parametrize("mode", ["legacy", "modern"])
def test_trace_context_and_baggage_reach_the_server(otel, mode: str) -> None:
    tel, exporter, _, tp = otel
    argv = server_command("counting_server.py")
    with Client.stdio(argv[0], argv[1:], mode=mode, name="counting", telemetry=tel,
                      retry=RetryPolicy.NONE, breaker=BreakerPolicy.DISABLED) as client:
        token = otel_context.attach(baggage.set_baggage("user.id", "alice"))
        try:
            with tp.get_tracer("agent").start_as_current_span("agent-turn") as turn:
                seen = client.call_tool("meta", meta={"mine": 1}, timeout=30).structured_content
        finally:
            otel_context.detach(token)
    call = next(s for s in exporter.get_finished_spans() if s.name == "tools/call meta")
    ctx = call.get_span_context()
    assert seen["traceparent"] == f"00-{ctx.trace_id:032x}-{ctx.span_id:016x}-{int(ctx.trace_flags):02x}"
    assert seen["baggage"] == "user.id=alice"
    assert seen["mine"] == 1  # the caller's own _meta is kept
    assert call.parent is not None and call.parent.span_id == turn.get_span_context().span_id
    assert trace.get_current_span().get_span_context().is_valid is False


@pytest.fixture
def http_sdk() -> Iterator[str]:
    import socket

    port = free_port()
    proc = subprocess.Popen(server_command("sdk_server.py", "http", str(port)),
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        deadline = time.monotonic() + 60
        while True:
            try:
                socket.create_connection(("127.0.0.1", port), 0.5).close()
                break
            except OSError:
                if proc.poll() is not None or time.monotonic() > deadline:
                    pytest.fail("the HTTP SDK server did not start")
                time.sleep(0.05)
        yield f"http://127.0.0.1:{port}/mcp"
    finally:
        proc.kill()
        proc.wait(10)


@pytest.mark.parametrize("mode", ["legacy", "modern"])
def test_http_session_id_only_where_a_session_has_one(otel, http_sdk: str, mode: str) -> None:
    tel, exporter, reader, _ = otel
    port = int(http_sdk.rsplit(":", 1)[1].split("/")[0])
    with Client.http(http_sdk, mode=mode, name="sdk-http", telemetry=tel) as client:
        client.call_tool("add", {"a": 2, "b": 3}, timeout=30)
        sid = client.diagnostics().session_id
    span = next(s for s in exporter.get_finished_spans() if s.name == "tools/call add")
    assert span.attributes["network.transport"] == "tcp"
    assert span.attributes["network.protocol.name"] == "http"
    assert span.attributes["server.address"] == "127.0.0.1" and span.attributes["server.port"] == port
    if mode == "legacy":
        assert sid and span.attributes["mcp.session.id"] == sid
    else:
        assert "mcp.session.id" not in span.attributes
    op = next(p for p in _points(reader, "mcp.client.operation.duration") if p.attributes.get("gen_ai.tool.name") == "add")
    assert op.attributes["network.transport"] == "tcp" and "mcp.session.id" not in op.attributes  # unbounded: spans only
    assert sum(p.count for p in _points(reader, "mcp.client.session.duration")) >= 1


def test_prometheus_scrape_of_the_conventions_metrics(otel) -> None:
    pytest.importorskip("opentelemetry.exporter.prometheus", reason="opentelemetry-exporter-prometheus: test extra")
    prometheus_client = pytest.importorskip("prometheus_client")
    from opentelemetry.exporter.prometheus import PrometheusMetricReader

    registry = prometheus_client.CollectorRegistry()
    reader = PrometheusMetricReader(registry=registry)
    mp = MeterProvider(metric_readers=[reader])
    tel = _otel.telemetry(tracer_provider=TracerProvider(), meter_provider=mp)
    port = free_port()
    server, thread = prometheus_client.start_http_server(port, addr="127.0.0.1", registry=registry)
    try:
        with _sdk_stdio(tel, "legacy") as client:
            client.call_tool("echo", {"message": "scrape me"}, timeout=30)
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=30) as resp:
            body = resp.read().decode()
    finally:
        server.shutdown()
        thread.join(10)
        mp.shutdown()
    lines = body.splitlines()
    echo = [ln for ln in lines if ln.startswith("mcp_client_operation_duration_seconds_bucket")
            and 'gen_ai_tool_name="echo"' in ln]
    assert echo, body
    assert any('le="0.01"' in ln for ln in echo) and any('le="300.0"' in ln for ln in echo)
    assert any('mcp_method_name="tools/call"' in ln and 'network_transport="pipe"' in ln for ln in echo)
    assert any(ln.startswith("mcp_client_session_duration_seconds_count") for ln in lines), body


@pytest.mark.parametrize("module, cls, target, protocol, address, port", [
    ("websocket", "WebSocketTransport", "wss://mcp.example.test/ws", "websocket", "mcp.example.test", 443),
    ("sse", "SSETransport", "http://127.0.0.1:3001/sse", "http", "127.0.0.1", 3001),
    ("grpc", "GrpcTransport", "127.0.0.1:50051", "http", "127.0.0.1", 50051),
])
def test_network_attributes_of_the_other_transports(otel, module: str, cls: str, target: str, protocol: str,
                                                    address: str, port: int) -> None:
    """The attributes each transport kind gets (its transport made, not connected)."""
    import importlib

    if module == "grpc":
        pytest.importorskip("grpc")
    tel = otel[0]
    t = getattr(importlib.import_module(f"mcpsync.transports.{module}"), cls)(target)

    class Conn:  # the two facts the telemetry reads of a connection
        transport = t
        session = type("S", (), {"protocol_version": "2025-11-25", "era": "legacy"})()

    attrs = tel._connection_attributes(None, Conn())
    assert attrs == {"mcp.protocol.version": "2025-11-25", "network.transport": "tcp",
                     "network.protocol.name": protocol, "server.address": address, "server.port": port}
    t.close()
