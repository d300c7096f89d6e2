"""OpenTelemetry, as an optional extra (``pip install mcpsync[otel]``).

Nothing here imports ``opentelemetry`` until :func:`telemetry` (or one of the classes)
is asked for, and :func:`telemetry` returns ``None`` when the package is missing, so a
client without OpenTelemetry pays one ``is None`` test per call.

* :class:`OTelRecorder` — the Guard's ``record(server, tool, start, end, outcome)``
  callback, feeding the histogram ``mcp.client.operation.duration`` (seconds; the MCP
  semantic conventions) and the counter ``mcpsync.client.calls``; ``record_cache`` feeds
  ``mcpsync.tool_cache.lookups``.
* :class:`OTelTracer` — one CLIENT span per tool call (``tools/call <tool>``), child of
  the caller's current span; its W3C trace context (``traceparent``, ``tracestate``) is
  put into the request's ``_meta``, where MCP servers that trace pick it up (the keys
  carry no prefix, as the convention for trace context in ``_meta`` has them).
* :class:`Telemetry` — both, built from optional tracer / meter providers (default: the
  global ones).

Example:
    >>> tel = telemetry()                      # None without opentelemetry installed
    >>> if tel is not None:                    # doctest: +SKIP
    ...     with tel.tracer.call_span("everything", "echo") as span:
    ...         params = {"name": "echo", "arguments": {}, "_meta": dict(span.meta)}
    ...         ...                            # send it; span.set_outcome("success")
"""

from __future__ import annotations

import importlib.util
import logging
from typing import Any, Mapping, MutableMapping

__all__ = [
    "available",
    "telemetry",
    "Telemetry",
    "OTelRecorder",
    "OTelTracer",
    "CallSpan",
    "inject_trace_context",
    "TRACE_KEYS",
]

log = logging.getLogger("mcpsync.otel")

#: The ``_meta`` keys of W3C trace context.
TRACE_KEYS = ("traceparent", "tracestate")

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


class OTelRecorder:
    """Call metrics as OpenTelemetry instruments.

    Args:
        meter_provider: where the instruments live (default: the global provider).

    Attributes per data point: ``mcp.method.name`` (``tools/call``), ``gen_ai.tool.name``,
    ``mcpsync.server``, ``mcpsync.outcome`` and, for failures, ``error.type``
    (``timeout`` or ``error``).
    """

    def __init__(self, meter_provider: Any = None) -> None:
        from opentelemetry import metrics

        meter = (meter_provider or metrics.get_meter_provider()).get_meter(_INSTRUMENTATION, _version())
        self._duration = meter.create_histogram(
            "mcp.client.operation.duration",
            unit="s",
            description="Duration of an MCP request as seen by the client, retries included.",
        )
        self._calls = meter.create_counter("mcpsync.client.calls", unit="{call}", description="Tool calls by outcome.")
        self._cache = meter.create_counter(
            "mcpsync.tool_cache.lookups", unit="{lookup}", description="Tool cache lookups (hit true/false)."
        )
        self._discovery = meter.create_counter(
            "mcpsync.tool_cache.discoveries", unit="{discovery}", description="Tool listings fetched (harness overhead)."
        )
        self._attrs: dict[tuple[str, Any, str], dict[str, Any]] = {}

    def _attributes(self, server: str, tool: str | None, outcome: str) -> dict[str, Any]:
        key = (server, tool, outcome)
        a = self._attrs.get(key)
        if a is None:
            a = {"mcp.method.name": "tools/call" if tool is not None else "request", "mcpsync.server": server,
                 "mcpsync.outcome": outcome}
            if tool is not None:
                a["gen_ai.tool.name"] = tool
            if outcome != "success":
                a["error.type"] = outcome
            if len(self._attrs) < 10_000:
                self._attrs[key] = a
        return a

    def record(self, server: str, tool: str | None, start: float, end: float, outcome: str) -> None:
        """The Guard's ``Recorder`` signature."""
        a = self._attributes(server, tool, outcome)
        self._duration.record(max(0.0, end - start), a)
        self._calls.add(1, a)

    __call__ = record

    def record_cache(self, server: str, hit: bool, tool: str | None = None) -> None:
        a: dict[str, Any] = {"mcpsync.server": server, "hit": bool(hit)}
        self._cache.add(1, a)

    def record_discovery(self, server: str, start: float | None = None, end: float | None = None,
                         outcome: str = "success") -> None:
        self._discovery.add(1, {"mcpsync.server": server})


class CallSpan:
    """One tool call's span: ``meta`` holds the trace context for the request's ``_meta``."""

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

            self.span.set_attribute("error.type", type(error).__name__ if error is not None else outcome)
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
    """Spans per tool call, with W3C trace context for ``_meta``.

    Args:
        tracer_provider: default the global provider.
        propagator: a ``TextMapPropagator`` (default W3C ``TraceContextTextMapPropagator``,
            which writes exactly ``traceparent`` and ``tracestate``).
    """

    def __init__(self, tracer_provider: Any = None, propagator: Any = None) -> None:
        from opentelemetry import trace
        from opentelemetry.trace.propagation.tracecontext import TraceContextTextMapPropagator

        self._trace = trace
        self._kind = trace.SpanKind.CLIENT
        self.tracer = (tracer_provider or trace.get_tracer_provider()).get_tracer(_INSTRUMENTATION, _version())
        self.propagator = propagator if propagator is not None else TraceContextTextMapPropagator()

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


class Telemetry:
    """Spans and metrics together: what a Client holds when OpenTelemetry is on.

    Attributes:
        tracer: the :class:`OTelTracer`.
        recorder: the :class:`OTelRecorder` (give it to the Guard, with
            :func:`mcpsync._metrics.fan_out` next to the :class:`MetricsRecorder`).
    """

    def __init__(self, tracer_provider: Any = None, meter_provider: Any = None, propagator: Any = None) -> None:
        self.tracer = OTelTracer(tracer_provider, propagator)
        self.recorder = OTelRecorder(meter_provider)

    def call_span(self, server: str, tool: str | None, **kw: Any) -> CallSpan:
        return self.tracer.call_span(server, tool, **kw)


def telemetry(tracer_provider: Any = None, meter_provider: Any = None, propagator: Any = None) -> Telemetry | None:
    """A :class:`Telemetry`, or ``None`` when OpenTelemetry is not installed."""
    if not available():
        return None
    return Telemetry(tracer_provider, meter_provider, propagator)


def inject_trace_context(meta: MutableMapping[str, Any] | None = None, propagator: Any = None) -> dict[str, Any]:
    """The caller's current trace context added to ``meta`` (a new dict).

    Without OpenTelemetry, or without a valid current span, ``meta`` comes back unchanged
    (copied). Keys already in ``meta`` are kept: a caller's own ``traceparent`` wins.
    """
    out = dict(meta or {})
    if not available():
        return out
    if propagator is None:
        from opentelemetry.trace.propagation.tracecontext import TraceContextTextMapPropagator

        propagator = TraceContextTextMapPropagator()
    carrier: dict[str, str] = {}
    propagator.inject(carrier)
    for k, v in carrier.items():
        out.setdefault(k, v)
    return out
