"""Telemetry on every span of a connection, and notifications as spans (the MCP semantic
conventions), with the SDK's in-memory exporter against the official SDK's protocol server
(tests/servers/sdk_protocol_server.py) over stdio and Streamable HTTP, in both eras.

A client used without ``with``/``connect()`` sends its calls on pooled connections, never
making a session connection: every span must still carry the connection's protocol version,
transport and server (before, only the handshake's did). Notifications the client sends are
CLIENT spans; notifications and requests from the server are SERVER spans, inside which the
client's handlers run; a request that timed out carries the ``notifications/cancelled`` event.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from typing import Any

import pytest

from mcpsync import Client, RequestTimeout
from mcpsync._policies import BreakerPolicy, RetryPolicy
from tests.conftest import server_command
from tests.servers import http_support as hs

pytest.importorskip("opentelemetry.sdk.trace", reason="opentelemetry-sdk belongs to the test extra")

from opentelemetry import trace  # noqa: E402
from opentelemetry.sdk.metrics.export import InMemoryMetricReader  # noqa: E402
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter  # noqa: E402
from opentelemetry.trace import SpanKind  # noqa: E402

from mcpsync import _otel  # noqa: E402
from tests.otel_support import in_memory_otel  # noqa: E402

pytestmark = pytest.mark.timeout(120)


@pytest.fixture
def otel() -> Iterator[tuple[_otel.Telemetry, InMemorySpanExporter, InMemoryMetricReader]]:
    with in_memory_otel() as o:
        yield o.tel, o.exporter, o.reader


@pytest.fixture(params=["stdio", "http"])
def where(request: pytest.FixtureRequest) -> Iterator[str]:
    if request.param == "stdio":
        yield "stdio"
        return
    port = hs.free_port()
    with hs.run_server(server_command("sdk_protocol_server.py", "http", str(port)), port):
        yield f"http://127.0.0.1:{port}/mcp"


class Seen:
    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.spans: list[tuple[str, Any]] = []  # (what ran, the span current while it ran)
        self.logged = threading.Event()

    def elicit(self, params: Any) -> dict[str, Any]:
        with self.lock:
            self.spans.append(("elicit", trace.get_current_span()))
        return {"action": "accept", "content": {"name": "Grace"}}

    def log(self, params: Any) -> None:
        with self.lock:
            self.spans.append(("log", trace.get_current_span()))
        if params.get("level") == "error":
            self.logged.set()


def client_for(where: str, tel: _otel.Telemetry, mode: str, seen: Seen) -> Client:
    options: dict[str, Any] = dict(mode=mode, name="sdk", telemetry=tel, retry=RetryPolicy.NONE,
                                   breaker=BreakerPolicy.DISABLED, elicitation_handler=seen.elicit,
                                   logging_handler=seen.log, roots=[{"uri": "file:///srv", "name": "srv"}])
    if where == "stdio":
        cmd = server_command("sdk_protocol_server.py")
        return Client.stdio(cmd[0], cmd[1:], **options)
    return Client.http(where, sse_fallback=False, **options)


@pytest.mark.parametrize("mode", ["legacy", "modern"])
def test_every_span_carries_the_connections_facts_and_notifications_are_spans(otel, where: str, mode: str) -> None:
    tel, exporter, reader = otel
    seen = Seen()
    client = client_for(where, tel, mode, seen)  # no `with`: calls go on pooled connections
    try:
        client.list_tools()
        assert client.call_tool("greet", {}, timeout=30).text  # elicitation: a server request or MRTR
        client.set_log_level("debug")
        assert client.call_tool("log_things", {}, timeout=30).text == "logged"
        assert seen.logged.wait(10)
        client.set_roots([{"uri": "file:///other", "name": "other"}])
        steps: list[float] = []
        assert client.call_tool("slow", {"steps": 3}, timeout=30, progress=lambda p, *_: steps.append(p)).text
        assert steps == [1, 2, 3]
        with pytest.raises(RequestTimeout):
            client.call_tool("slow", {"steps": 50}, timeout=0.5)
        version, sid = client.protocol_version, client.diagnostics().session_id
    finally:
        client.close()

    spans = exporter.get_finished_spans()
    client_spans = [s for s in spans if s.kind is SpanKind.CLIENT]
    names = {s.name for s in client_spans}
    assert {"tools/list", "tools/call greet", "tools/call log_things", "tools/call slow"} <= names, names
    transport = "pipe" if where == "stdio" else "tcp"
    for s in spans:  # every span of the connection, client and server kind alike
        assert s.attributes["mcp.protocol.version"] == version, s.name
        assert s.attributes["network.transport"] == transport, s.name
        if where != "stdio":
            assert s.attributes["server.address"] == "127.0.0.1" and s.attributes["network.protocol.name"] == "http"
        if where != "stdio" and mode == "legacy":
            assert s.attributes["mcp.session.id"] == sid, s.name
        else:
            assert "mcp.session.id" not in s.attributes

    server_spans = {s.name for s in spans if s.kind is SpanKind.SERVER}
    assert "notifications/message" in server_spans  # the server's log lines
    progress = [s for s in spans if s.name == "notifications/progress"]
    slow, timed_out = [s for s in client_spans if s.name == "tools/call slow"]
    assert len(progress) == 3
    assert all(s.kind is SpanKind.SERVER and s.parent.span_id == slow.context.span_id for s in progress)
    logs = [span for what, span in seen.spans if what == "log"]
    assert logs and all(span.name == "notifications/message" for span in logs)  # handlers run inside
    if mode == "legacy":
        assert {"notifications/initialized", "notifications/roots/list_changed"} <= names
        assert "elicitation/create" in server_spans  # a server→client request
        assert [span.name for what, span in seen.spans if what == "elicit"] == ["elicitation/create"]
        sent = next(s for s in client_spans if s.name == "notifications/roots/list_changed")
        assert sent.attributes["mcp.method.name"] == "notifications/roots/list_changed"
    assert [e.name for e in timed_out.events] == ["exception", "notifications/cancelled"]
    assert not [e.name for e in slow.events]

    data = reader.get_metrics_data()
    ops = [p for rm in data.resource_metrics for sm in rm.scope_metrics for m in sm.metrics
           if m.name == "mcp.client.operation.duration" for p in m.data.data_points]
    assert all(p.attributes["network.transport"] == transport for p in ops)
    if mode == "legacy":
        assert any(p.attributes["mcp.method.name"] == "notifications/roots/list_changed" for p in ops)


def test_a_notifications_trace_context_parents_its_span(otel) -> None:
    """A notification from the server whose ``_meta`` carries ``traceparent`` is a child of it."""
    tel, exporter, _ = otel

    class Fake:  # the two facts the telemetry reads of a client's session
        name = "fake"
        primary = None

    parent_trace, parent_span = "4bf92f3577b34da6a3ce929d0e0e4736", "00f067aa0ba902b7"
    meta = {"traceparent": f"00-{parent_trace}-{parent_span}-01"}
    assert tel.received(Fake(), "notifications/message", {"_meta": meta, "level": "info"}, lambda: 42) == 42
    span = exporter.get_finished_spans()[-1]
    assert span.kind is SpanKind.SERVER and span.name == "notifications/message"
    assert f"{span.context.trace_id:032x}" == parent_trace and f"{span.parent.span_id:016x}" == parent_span
