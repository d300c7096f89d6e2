"""The OpenTelemetry instruments of :mod:`mcpsync._otel` that stand on their own: the metrics
sink of the Guard and the tool cache (:class:`OTelRecorder`), the hand-made call span
(:class:`CallSpan`, :class:`OTelTracer`), ``error.type`` and the operation histogram.

Imported only when OpenTelemetry is on (through :mod:`mcpsync._otel`, which re-exports them).
"""

from __future__ import annotations

from typing import Any, Mapping

__all__ = ["OTelRecorder", "OTelTracer", "CallSpan", "error_type", "operation_histogram", "DURATION_BUCKETS",
           "INSTRUMENTATION", "version"]

#: The explicit bucket boundaries (seconds) the MCP conventions give both client histograms.
DURATION_BUCKETS = (0.01, 0.02, 0.05, 0.1, 0.2, 0.5, 1.0, 2.0, 5.0, 10.0, 30.0, 60.0, 120.0, 300.0)
INSTRUMENTATION = "mcpsync"


def version() -> str:
    """mcpsync's version (the instrumentation scope's)."""
    try:
        from importlib.metadata import version as dist_version

        return dist_version("mcpsync")
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

        meter = (meter_provider or metrics.get_meter_provider()).get_meter(INSTRUMENTATION, version())
        self._duration = (
            operation_histogram(meter) if operation_duration else None
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


def operation_histogram(meter: Any) -> Any:
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
        self.tracer = (tracer_provider or trace.get_tracer_provider()).get_tracer(INSTRUMENTATION, version())
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
