"""OpenTelemetry by the MCP semantic conventions, as an optional extra (``mcpsync[otel]``).

Nothing here imports ``opentelemetry`` until :func:`telemetry` (or one of the classes)
is asked for, and :func:`telemetry` returns ``None`` when the package is missing, so a
client without OpenTelemetry pays one ``is None`` test per call.

With ``Client(..., telemetry=True)`` (or a :class:`Telemetry` of your own providers)
every request the client sends follows the OpenTelemetry semantic conventions for MCP
(status: Development):

* one CLIENT span per request, named ``{mcp.method.name} {target}`` where the target
  is the tool name (``tools/call echo``) or the prompt name (``prompts/get review``),
  else just the method (``resources/read``: a URI is high-cardinality, so it goes in
  the span name only with ``uri_in_span_name=True``); attributes ``mcp.method.name``,
  ``gen_ai.tool.name`` and ``gen_ai.operation.name=execute_tool`` (tool calls),
  ``gen_ai.prompt.name``, ``mcp.resource.uri``, ``mcp.protocol.version``,
  ``mcp.session.id`` (only for sessions that have one: not in the 2026-07-28 era, not
  over stdio), ``network.transport`` (``pipe`` for stdio, ``tcp`` for HTTP, SSE,
  WebSocket and gRPC), ``network.protocol.name``, ``server.address``/``server.port``;
  on failure ``error.type`` (the JSON-RPC error code as a string, ``tool_error`` for a
  result with ``isError``, ``timeout``, else the error's class name),
  ``rpc.response.status_code`` (the JSON-RPC code) and an ERROR status;
* the caller's trace context injected into ``params._meta`` by the configured
  propagators (by default W3C ``traceparent``/``tracestate`` and ``baggage``, unprefixed
  as the conventions ask); keys the caller put in ``_meta`` win;
* the handshake of each connection as one more operation, named ``server/discover`` or
  ``initialize`` by the era it settled on;
* the histograms ``mcp.client.operation.duration`` (per request, retries included) and
  ``mcp.client.session.duration`` (per connection, from its handshake to its end), in
  seconds, with the conventions' bucket boundaries (:data:`DURATION_BUCKETS`).

:class:`OTelRecorder` is also the Guard's ``record(server, tool, start, end, outcome)``
sink (the counter ``mcpsync.client.calls``) and the tool cache's
(``mcpsync.tool_cache.lookups``).

Example:
    >>> tel = telemetry()                      # None without opentelemetry installed
    >>> client = Client.stdio("python", ["server.py"], telemetry=tel)  # doctest: +SKIP
"""

from __future__ import annotations

import importlib.util
import logging
import threading
import time
from typing import Any, Mapping, MutableMapping
from urllib.parse import urlsplit

__all__ = [
    "available",
    "telemetry",
    "Telemetry",
    "OTelRecorder",
    "OTelTracer",
    "CallSpan",
    "inject_trace_context",
    "TRACE_KEYS",
    "DURATION_BUCKETS",
    "error_type",
]

log = logging.getLogger("mcpsync.otel")

#: The ``_meta`` keys of W3C trace context and baggage.
TRACE_KEYS = ("traceparent", "tracestate", "baggage")

#: The explicit bucket boundaries (seconds) the MCP conventions give both client histograms.
DURATION_BUCKETS = (0.01, 0.02, 0.05, 0.1, 0.2, 0.5, 1.0, 2.0, 5.0, 10.0, 30.0, 60.0, 120.0, 300.0)

#: ``network.transport`` (and ``network.protocol.name``) per mcpsync transport kind.
_NETWORK = {
    "stdio": ("pipe", None),
    "http": ("tcp", "http"),
    "sse": ("tcp", "http"),
    "websocket": ("tcp", "websocket"),
    "grpc": ("tcp", "http"),
}
#: Methods whose ``params.uri`` is the resource (``mcp.resource.uri``).
_URI_METHODS = frozenset({"resources/read", "resources/subscribe", "resources/unsubscribe"})
_INSTRUMENTATION = "mcpsync"
_available: bool | None = None


def available() -> bool:
    """Whether the OpenTelemetry API is importable (checked once, without importing it)."""
    global _available
    if _available is None:
        try:
            _available = importlib.util.find_spec("opentelemetry.trace") is not None
        except (ImportError, ValueError):
            _available = False
    return _available


def _version() -> str:
    try:
        from importlib.metadata import version

        return version("mcpsync")
    except Exception:  # pragma: no cover - not installed
        return "0"


def _discovery_methods() -> frozenset[str]:
    from ._metrics import DISCOVERY_METHODS

    return DISCOVERY_METHODS


def error_type(exc: BaseException) -> str:
    """``error.type`` of a failed request: the JSON-RPC code (``"-32602"``) when the
    server answered with an error, ``"timeout"`` for a timeout, else the error's class."""
    from ._errors import RemoteError, RequestTimeout

    if isinstance(exc, RemoteError) and isinstance(getattr(exc, "code", None), int):
        return str(exc.code)
    if isinstance(exc, RequestTimeout):
        return "timeout"
    return type(exc).__qualname__


class OTelRecorder:
    """Call metrics as OpenTelemetry instruments (the Guard's and the tool cache's sink).

    Args:
        meter_provider: where the instruments live (default: the global provider).
        operation_duration: also feed ``mcp.client.operation.duration`` from the Guard's
            records. A :class:`Telemetry` turns this off: it records every request itself,
            with the JSON-RPC error code the Guard does not see.

    Attributes per data point: ``mcp.method.name`` (``tools/call`` for tools, the method
    for discovery requests), ``gen_ai.tool.name``, ``mcpsync.server``,
    ``mcpsync.outcome`` and, for failures, ``error.type`` (``timeout`` or ``error``).
    Records of other requests (the Guard knows no method for them) only count.
    """

    def __init__(self, meter_provider: Any = None, *, operation_duration: bool = True) -> None:
        from opentelemetry import metrics

        meter = (meter_provider or metrics.get_meter_provider()).get_meter(_INSTRUMENTATION, _version())
        self._duration = (
            _operation_histogram(meter) if operation_duration else None
        )
        self._calls = meter.create_counter("mcpsync.client.calls", unit="{call}", description="Requests by outcome.")
        self._cache = meter.create_counter(
            "mcpsync.tool_cache.lookups", unit="{lookup}", description="Tool cache lookups (hit true/false)."
        )
        self._discovery = meter.create_counter(
            "mcpsync.tool_cache.discoveries", unit="{discovery}", description="Tool listings fetched (harness overhead)."
        )
        self._attrs: dict[tuple[str, Any, str], dict[str, Any]] = {}
        self._discovery_methods = _discovery_methods()

    def _attributes(self, server: str, tool: str | None, outcome: str) -> dict[str, Any]:
        key = (server, tool, outcome)
        a = self._attrs.get(key)
        if a is None:
            a = {"mcpsync.server": server, "mcpsync.outcome": outcome}
            if tool in self._discovery_methods:
                a["mcp.method.name"] = tool
            elif tool is not None:
                a["mcp.method.name"] = "tools/call"
                a["gen_ai.tool.name"] = tool
            if outcome != "success":
                a["error.type"] = outcome
            if len(self._attrs) < 10_000:
                self._attrs[key] = a
        return a

    def record(self, server: str, tool: str | None, start: float, end: float, outcome: str) -> None:
        """The Guard's ``Recorder`` signature."""
        a = self._attributes(server, tool, outcome)
        if self._duration is not None and "mcp.method.name" in a:
            self._duration.record(max(0.0, end - start), a)
        self._calls.add(1, a)

    __call__ = record

    def record_cache(self, server: str, hit: bool, tool: str | None = None) -> None:
        """Count one tool-cache lookup."""
        a: dict[str, Any] = {"mcpsync.server": server, "hit": bool(hit)}
        self._cache.add(1, a)

    def record_discovery(self, server: str, start: float | None = None, end: float | None = None,
                         outcome: str = "success") -> None:
        """Count one tool listing fetched for the cache."""
        self._discovery.add(1, {"mcpsync.server": server})


def _operation_histogram(meter: Any) -> Any:
    return meter.create_histogram(
        "mcp.client.operation.duration",
        unit="s",
        description="The duration of the MCP request or notification as observed on the sender "
        "from the time it was sent until the response or ack is received.",
        explicit_bucket_boundaries_advisory=DURATION_BUCKETS,
    )


class CallSpan:
    """One span made by hand (:meth:`OTelTracer.call_span`); ``meta`` holds its trace
    context for a request's ``_meta``.

    A client with telemetry traces its requests by itself; this is for callers that
    send requests some other way.
    """

    __slots__ = ("span", "meta", "_outcome", "_ended")

    def __init__(self, span: Any, meta: dict[str, str]) -> None:
        self.span = span
        self.meta = meta
        self._outcome: str | None = None
        self._ended = False

    def set_outcome(self, outcome: str, error: BaseException | None = None) -> None:
        """Say how the call ended (``success`` / ``error`` / ``timeout``) before :meth:`end`."""
        self._outcome = outcome
        if outcome != "success":
            from opentelemetry.trace import Status, StatusCode

            self.span.set_attribute("error.type", error_type(error) if error is not None else outcome)
            self.span.set_status(Status(StatusCode.ERROR, str(error) if error is not None else outcome))
            if error is not None:
                self.span.record_exception(error)
        self.span.set_attribute("mcpsync.outcome", outcome)

    def set_tool_error(self) -> None:
        """The tool answered with ``isError``: an error of the tool, not of the call."""
        from opentelemetry.trace import Status, StatusCode

        self.span.set_attribute("error.type", "tool_error")
        self.span.set_status(Status(StatusCode.ERROR, "tool returned isError"))

    def end(self, end_time_ns: int | None = None) -> None:
        """End the span (once)."""
        if self._ended:
            return
        self._ended = True
        self.span.end(end_time=end_time_ns)

    def __enter__(self) -> "CallSpan":
        return self

    def __exit__(self, exc_type: Any, exc: BaseException | None, tb: Any) -> None:
        if exc is not None and self._outcome is None:
            from ._guard import outcome_of

            self.set_outcome(outcome_of(exc), exc)
        elif self._outcome is None:
            self.set_outcome("success")
        self.end()


class OTelTracer:
    """CLIENT spans named by the MCP conventions, with trace context for ``_meta``.

    Args:
        tracer_provider: default the global provider.
        propagator: a ``TextMapPropagator`` (default: the globally configured one, W3C
            trace context and baggage unless the application changed it).
    """

    def __init__(self, tracer_provider: Any = None, propagator: Any = None) -> None:
        from opentelemetry import trace

        self._trace = trace
        self._kind = trace.SpanKind.CLIENT
        self.tracer = (tracer_provider or trace.get_tracer_provider()).get_tracer(_INSTRUMENTATION, _version())
        self._propagator = propagator

    @property
    def propagator(self) -> Any:
        """The propagator that writes trace context into ``_meta``."""
        if self._propagator is not None:
            return self._propagator
        from opentelemetry import propagate

        return propagate.get_global_textmap()

    def call_span(
        self, server: str, tool: str | None, *, method: str = "tools/call", attributes: Mapping[str, Any] | None = None
    ) -> CallSpan:
        """Start the span of one call (a child of the current span) and its ``_meta``."""
        attrs: dict[str, Any] = {"mcp.method.name": method, "mcpsync.server": server}
        if tool is not None:
            attrs["gen_ai.tool.name"] = tool
            attrs["gen_ai.operation.name"] = "execute_tool"
        if attributes:
            attrs.update(attributes)
        name = f"{method} {tool}" if tool is not None else method
        span = self.tracer.start_span(name, kind=self._kind, attributes=attrs)
        meta: dict[str, str] = {}
        self.propagator.inject(meta, context=self._trace.set_span_in_context(span))
        return CallSpan(span, meta)


def _request_facts(method: str, params: Mapping[str, Any] | None) -> tuple[str | None, dict[str, Any], str | None]:
    """(span target, attributes from the request, resource uri) of one request."""
    attrs: dict[str, Any] = {"mcp.method.name": method}
    target = None
    uri = None
    if params:
        if method == "tools/call":
            name = params.get("name")
            if isinstance(name, str):
                target = name
                attrs["gen_ai.tool.name"] = name
            attrs["gen_ai.operation.name"] = "execute_tool"
        elif method == "prompts/get":
            name = params.get("name")
            if isinstance(name, str):
                target = name
                attrs["gen_ai.prompt.name"] = name
        elif method in _URI_METHODS:
            u = params.get("uri")
            if isinstance(u, str):
                uri = u
    elif method == "tools/call":
        attrs["gen_ai.operation.name"] = "execute_tool"
    return target, attrs, uri


def _with_meta(params: Mapping[str, Any] | None, carrier: Mapping[str, str]) -> dict[str, Any]:
    p = dict(params) if params else {}
    meta = p.get("_meta")
    p["_meta"] = {**carrier, **meta} if isinstance(meta, Mapping) else dict(carrier)
    return p


class _SessionClock:
    __slots__ = ("start", "attrs")

    def __init__(self, start: float, attrs: dict[str, Any]) -> None:
        self.start = start
        self.attrs = attrs


class Telemetry:
    """Spans and metrics by the MCP semantic conventions: what a Client holds when
    OpenTelemetry is on (``Client(..., telemetry=True)`` builds one on the global
    providers).

    Args:
        tracer_provider: where spans go (default: the global provider).
        meter_provider: where the histograms live (default: the global provider).
        propagator: what writes trace context into ``params._meta`` (default: the
            globally configured propagators).
        uri_in_span_name: name ``resources/read`` spans ``resources/read {uri}`` (off by
            default, as the conventions advise: URIs are high-cardinality).

    Attributes:
        tracer: the :class:`OTelTracer`.
        recorder: the :class:`OTelRecorder` (the Guard's and tool cache's sink).
    """

    def __init__(
        self,
        tracer_provider: Any = None,
        meter_provider: Any = None,
        propagator: Any = None,
        *,
        uri_in_span_name: bool = False,
    ) -> None:
        from opentelemetry import context as otel_context
        from opentelemetry import metrics, trace
        from opentelemetry.trace import Status, StatusCode

        self.tracer = OTelTracer(tracer_provider, propagator)
        self.recorder = OTelRecorder(meter_provider, operation_duration=False)
        meter = (meter_provider or metrics.get_meter_provider()).get_meter(_INSTRUMENTATION, _version())
        self._operation = _operation_histogram(meter)
        self._session = meter.create_histogram(
            "mcp.client.session.duration",
            unit="s",
            description="The duration of the MCP session as observed on the MCP client.",
            explicit_bucket_boundaries_advisory=DURATION_BUCKETS,
        )
        self.uri_in_span_name = uri_in_span_name
        self._trace = trace
        self._context = otel_context
        self._status = (Status, StatusCode)
        self._local = threading.local()
        self._lock = threading.Lock()
        self._sessions: dict[int, tuple[Any, Any, _SessionClock]] = {}

    def call_span(self, server: str, tool: str | None, **kw: Any) -> CallSpan:
        """A span made by hand (see :meth:`OTelTracer.call_span`)."""
        return self.tracer.call_span(server, tool, **kw)

    # ------------------------------------------------------------------ requests

    def inside(self) -> bool:
        """True while this thread runs a request this telemetry is tracing."""
        return getattr(self._local, "active", False)

    def request(self, client: Any, method: str, params: Mapping[str, Any] | None, **kw: Any) -> Any:
        """Send ``client.request(method, params, **kw)`` as one traced, timed operation."""
        target, attrs, uri = _request_facts(method, params)
        if uri is not None:
            attrs["mcp.resource.uri"] = uri
            if self.uri_in_span_name:
                target = uri
        attrs["mcpsync.server"] = client.name
        span = self.tracer.tracer.start_span(
            f"{method} {target}" if target else method, kind=self._trace.SpanKind.CLIENT, attributes=attrs
        )
        ctx = self._trace.set_span_in_context(span)
        carrier: dict[str, str] = {}
        try:
            self.tracer.propagator.inject(carrier, context=ctx)
        except Exception:  # noqa: BLE001 - a broken propagator must not break the call
            log.debug("injecting trace context failed", exc_info=True)
        if carrier:
            params = _with_meta(params, carrier)
        token = self._context.attach(ctx)
        self._local.active = True
        failure: str | None = None
        code: int | None = None
        start = time.perf_counter()
        try:
            result = client.request(method, params, **kw)
        except BaseException as exc:
            failure, code = self._failed(span, exc)
            raise
        else:
            if method == "tools/call" and getattr(result, "is_error", False) is True:
                failure = "tool_error"
                span.set_status(self._status[0](self._status[1].ERROR, "the tool returned isError"))
            return result
        finally:
            elapsed = time.perf_counter() - start
            self._local.active = False
            self._context.detach(token)
            common = self._connection_attributes(client)
            # the URI is opt-in on metrics (unbounded); the server's name stays, as for stdio
            # it is the only thing that tells two servers apart
            metric_attrs = {k: v for k, v in attrs.items() if k != "mcp.resource.uri"}
            metric_attrs.update(common)
            failed = _error_attributes(failure, code)
            metric_attrs.update(failed)
            span_attrs = dict(common)
            session_id = self._session_id(client)
            if session_id is not None:
                span_attrs["mcp.session.id"] = session_id
            span_attrs.update(failed)
            span.set_attributes(span_attrs)
            span.end()
            try:
                self._operation.record(elapsed, metric_attrs)
            except Exception:  # noqa: BLE001 - metrics never break a call
                log.debug("recording mcp.client.operation.duration failed", exc_info=True)

    def _failed(self, span: Any, exc: BaseException) -> tuple[str, int | None]:
        """Mark ``span`` failed by ``exc``: its ``error.type`` and, for an error answer,
        its JSON-RPC code."""
        failure = error_type(exc)
        code = getattr(exc, "code", None) if failure.lstrip("-").isdigit() else None
        span.record_exception(exc)
        span.set_status(self._status[0](self._status[1].ERROR, str(exc) or failure))
        return failure, code

    def handshake(self, client: Any, conn: Any, run: Any) -> None:
        """Run a connection's handshake (``run()``) as one traced, timed operation, named
        by the method that made the session (``server/discover`` in the 2026-07-28 era,
        ``initialize`` before it), then start the session's clock."""
        span = self.tracer.tracer.start_span("initialize", kind=self._trace.SpanKind.CLIENT,
                                             attributes={"mcpsync.server": client.name})
        start = time.perf_counter()
        failure: str | None = None
        code: int | None = None
        try:
            run()
        except BaseException as exc:
            failure, code = self._failed(span, exc)
            raise
        finally:
            elapsed = time.perf_counter() - start
            session = getattr(conn, "session", None)
            method = "server/discover" if getattr(session, "era", None) == "modern" else "initialize"
            span.update_name(method)
            attrs = {"mcp.method.name": method, "mcpsync.server": client.name}
            attrs.update(self._connection_attributes(client, conn))
            attrs.update(_error_attributes(failure, code))
            span_attrs = dict(attrs)
            session_id = self._session_id(client, conn) if failure is None else None
            if session_id is not None:
                span_attrs["mcp.session.id"] = session_id
            span.set_attributes(span_attrs)
            span.end()
            try:
                self._operation.record(elapsed, attrs)
            except Exception:  # noqa: BLE001 - metrics never break a connection
                log.debug("recording the handshake's duration failed", exc_info=True)
        self.session_opened(client, conn)

    # ------------------------------------------------------------------ sessions

    @staticmethod
    def _connection(client: Any) -> Any:
        return getattr(getattr(client, "_session", None), "primary", None)

    def _connection_attributes(self, client: Any, conn: Any = None) -> dict[str, Any]:
        """``mcp.protocol.version``, ``network.*`` and ``server.*`` of the client's session."""
        if conn is None:
            conn = self._connection(client)
        if conn is None:
            return {}
        session = getattr(conn, "session", None)
        version = getattr(session, "protocol_version", None)
        cached = getattr(conn, "_otel_attrs", None)
        if cached is not None and cached[0] == version:
            return dict(cached[1])
        out: dict[str, Any] = {}
        if version:
            out["mcp.protocol.version"] = version
        transport = getattr(conn, "transport", None)
        kind = getattr(transport, "kind", None) if transport is not None else None
        net = _NETWORK.get(kind or "")
        if net is not None:
            out["network.transport"] = net[0]
            if net[1] is not None:
                out["network.protocol.name"] = net[1]
            out.update(_address(transport))
        try:
            conn._otel_attrs = (version, out)
        except AttributeError:  # pragma: no cover - a connection with slots
            pass
        return dict(out)

    def _session_id(self, client: Any, conn: Any = None) -> str | None:
        """``mcp.session.id``: only a session that has one (not the 2026-07-28 era)."""
        if conn is None:
            conn = self._connection(client)
        if conn is None or conn.transport is None:
            return None
        session = getattr(conn, "session", None)
        if session is None or getattr(session, "era", None) == "modern":
            return None
        try:
            sid = conn.transport.session_info().get("session_id")
        except Exception:  # noqa: BLE001 - facts only
            return None
        return sid if isinstance(sid, str) and sid else None

    def session_opened(self, client: Any, conn: Any) -> None:
        """A connection finished its handshake: its session's clock starts."""
        attrs = self._connection_attributes(client, conn)
        attrs["mcpsync.server"] = client.name
        clock = _SessionClock(time.monotonic(), attrs)
        with self._lock:
            self._sessions[id(conn)] = (client, conn, clock)
        add = getattr(conn.channel, "add_close_callback", None)
        if add is not None:
            add(lambda reason: self._session_ended(conn, reason))

    def _session_ended(self, conn: Any, reason: BaseException | None) -> None:
        with self._lock:
            entry = self._sessions.pop(id(conn), None)
        if entry is None or entry[1] is not conn:
            return
        client, _, clock = entry
        attrs = dict(clock.attrs)
        if reason is not None and not getattr(client, "closed", False) and "closed by the client" not in str(reason):
            attrs["error.type"] = type(reason).__qualname__
        try:
            self._session.record(max(0.0, time.monotonic() - clock.start), attrs)
        except Exception:  # noqa: BLE001 - metrics never break a close
            log.debug("recording mcp.client.session.duration failed", exc_info=True)

    def client_closed(self, client: Any) -> None:
        """The client closed: every session of it still open ends now."""
        with self._lock:
            mine = [entry[1] for entry in self._sessions.values() if entry[0] is client]
        for conn in mine:
            self._session_ended(conn, None)


def _address(transport: Any) -> dict[str, Any]:
    url = getattr(transport, "url", None)
    host: str | None = None
    port: int | None = None
    if isinstance(url, str) and "://" in url:
        parts = urlsplit(url)
        host = parts.hostname
        try:
            port = parts.port or (443 if parts.scheme in ("https", "wss") else 80)
        except ValueError:
            port = None
    else:
        target = getattr(transport, "target", None)
        if isinstance(target, str) and ":" in target:
            h, _, p = target.rpartition(":")
            host = h.strip("[]")
            port = int(p) if p.isdigit() else None
    out: dict[str, Any] = {}
    if host:
        out["server.address"] = host
        if port is not None:
            out["server.port"] = port
    return out


def telemetry(
    tracer_provider: Any = None, meter_provider: Any = None, propagator: Any = None, **options: Any
) -> Telemetry | None:
    """A :class:`Telemetry`, or ``None`` when OpenTelemetry is not installed."""
    if not available():
        return None
    return Telemetry(tracer_provider, meter_provider, propagator, **options)


def inject_trace_context(meta: MutableMapping[str, Any] | None = None, propagator: Any = None) -> dict[str, Any]:
    """The caller's current trace context added to ``meta`` (a new dict).

    Without OpenTelemetry, or without a valid current span, ``meta`` comes back unchanged
    (copied). Keys already in ``meta`` are kept: a caller's own ``traceparent`` wins.
    """
    out = dict(meta or {})
    if not available():
        return out
    if propagator is None:
        from opentelemetry import propagate

        propagator = propagate.get_global_textmap()
    carrier: dict[str, str] = {}
    propagator.inject(carrier)
    for k, v in carrier.items():
        out.setdefault(k, v)
    return out


def _error_attributes(failure: str | None, code: int | None) -> dict[str, str]:
    """``error.type`` and, for an error answer, ``rpc.response.status_code`` (nothing for a success)."""
    if failure is None:
        return {}
    if code is None:
        return {"error.type": failure}
    return {"error.type": failure, "rpc.response.status_code": str(code)}
