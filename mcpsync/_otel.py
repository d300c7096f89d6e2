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
  ``initialize`` by the era it settled on; the connection's attributes (protocol version,
  transport, server) go on every span of the client, whichever connection carried it;
* notifications: a CLIENT span ``{mcp.method.name}`` for each one the client sends (trace
  context in its ``_meta`` too; timed into ``mcp.client.operation.duration``), a SERVER
  span for each notification or request the server sends (its parent the trace context in
  its ``_meta``, when it has one; the client's handlers run inside it), and the event
  ``notifications/cancelled`` on a request span that timed out (the server was told);
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
import weakref
from typing import Any, Callable, Mapping, MutableMapping
from urllib.parse import urlsplit

from ._otel_instruments import (
    DURATION_BUCKETS,
    INSTRUMENTATION as _INSTRUMENTATION,
    CallSpan,
    OTelRecorder,
    OTelTracer,
    error_type,
    operation_histogram as _operation_histogram,
    version as _version,
)

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
        #: client → its latest connection that finished a handshake: the facts of a
        #: client's spans when its session connection is not set (a call off the pool)
        self._latest: "weakref.WeakKeyDictionary[Any, Any]" = weakref.WeakKeyDictionary()

    def call_span(self, server: str, tool: str | None, **kw: Any) -> CallSpan:
        """A span made by hand (see :meth:`OTelTracer.call_span`)."""
        return self.tracer.call_span(server, tool, **kw)

    # ------------------------------------------------------------------ requests

    def inside(self) -> bool:
        """True while this thread runs a request this telemetry is tracing."""
        return getattr(self._local, "active", False)

    def request(self, owner: Any, method: str, params: Mapping[str, Any] | None, **kw: Any) -> Any:
        """Send ``owner.request(method, params, **kw)`` as one traced, timed operation."""
        target, attrs, uri = _request_facts(method, params)
        if uri is not None:
            attrs["mcp.resource.uri"] = uri
            if self.uri_in_span_name:
                target = uri
        attrs["mcpsync.server"] = owner.name
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
        progress = kw.get("progress")
        if progress is not None:  # each progress notification: a SERVER span under this request's
            kw["progress"] = lambda p, total, message: self.received(
                owner, "notifications/progress", None, lambda: progress(p, total, message), ctx)
        token = self._context.attach(ctx)
        self._local.active = True
        failure: str | None = None
        code: int | None = None
        start = time.perf_counter()
        try:
            result = owner.request(method, params, **kw)
        except BaseException as exc:
            failure, code = self._failed(span, exc)
            if failure == "timeout" and getattr(exc, "sent", None) is not False:
                span.add_event("notifications/cancelled", {"mcp.method.name": "notifications/cancelled"})
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
            common = self._connection_attributes(owner)
            # the URI is opt-in on metrics (unbounded); the server's name stays, as for stdio
            # it is the only thing that tells two servers apart
            metric_attrs = {k: v for k, v in attrs.items() if k != "mcp.resource.uri"}
            metric_attrs.update(common)
            failed = _error_attributes(failure, code)
            metric_attrs.update(failed)
            span_attrs = dict(common)
            session_id = self._session_id(owner)
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

    def handshake(self, owner: Any, conn: Any, run: Any) -> None:
        """Run a connection's handshake (``run()``) as one traced, timed operation, named
        by the method that made the session (``server/discover`` in the 2026-07-28 era,
        ``initialize`` before it), then start the session's clock."""
        span = self.tracer.tracer.start_span("initialize", kind=self._trace.SpanKind.CLIENT,
                                             attributes={"mcpsync.server": owner.name})
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
            attrs = {"mcp.method.name": method, "mcpsync.server": owner.name}
            attrs.update(self._connection_attributes(owner, conn))
            attrs.update(_error_attributes(failure, code))
            span_attrs = dict(attrs)
            session_id = self._session_id(owner, conn) if failure is None else None
            if session_id is not None:
                span_attrs["mcp.session.id"] = session_id
            span.set_attributes(span_attrs)
            span.end()
            try:
                self._operation.record(elapsed, attrs)
            except Exception:  # noqa: BLE001 - metrics never break a connection
                log.debug("recording the handshake's duration failed", exc_info=True)
        self.session_opened(owner, conn)

    # ------------------------------------------------------------------ notifications

    def notify(self, owner: Any, method: str, params: Mapping[str, Any] | None, send: Callable[[Any], None],
               conn: Any = None) -> None:
        """Send one notification (``send(params)``) as a CLIENT span ``{method}``, its trace
        context in ``params._meta``, timed into ``mcp.client.operation.duration``."""
        attrs: dict[str, Any] = {"mcp.method.name": method, "mcpsync.server": owner.name}
        attrs.update(self._connection_attributes(owner, conn))
        span = self.tracer.tracer.start_span(method, kind=self._trace.SpanKind.CLIENT, attributes=attrs)
        carrier: dict[str, str] = {}
        try:
            self.tracer.propagator.inject(carrier, context=self._trace.set_span_in_context(span))
        except Exception:  # noqa: BLE001 - a broken propagator must not break the notification
            log.debug("injecting trace context failed", exc_info=True)
        session_id = self._session_id(owner, conn)
        if session_id is not None:
            span.set_attribute("mcp.session.id", session_id)
        failure: str | None = None
        start = time.perf_counter()
        try:
            send(_with_meta(params, carrier) if carrier else params)
        except BaseException as exc:
            failure, _code = self._failed(span, exc)
            span.set_attribute("error.type", failure)
            raise
        finally:
            span.end()
            attrs.update(_error_attributes(failure, None))
            try:
                self._operation.record(time.perf_counter() - start, attrs)
            except Exception:  # noqa: BLE001 - metrics never break a notification
                log.debug("recording a notification's duration failed", exc_info=True)

    def received(self, owner: Any, method: str, params: Mapping[str, Any] | None, run: Callable[[], Any],
                 parent: Any = None) -> Any:
        """Handle a notification or request from the server (``run()``) inside a SERVER span
        ``{method}``, a child of the trace context in its ``_meta`` (else of ``parent``, else
        of the current one)."""
        meta = params.get("_meta") if isinstance(params, Mapping) else None
        if isinstance(meta, Mapping) and any(k in meta for k in ("traceparent", "baggage")):
            try:
                parent = self.tracer.propagator.extract(carrier={k: v for k, v in meta.items() if isinstance(v, str)})
            except Exception:  # noqa: BLE001 - a broken carrier is no parent
                parent = None
        attrs: dict[str, Any] = {"mcp.method.name": method, "mcpsync.server": owner.name}
        attrs.update(self._connection_attributes(owner))
        session_id = self._session_id(owner)
        if session_id is not None:
            attrs["mcp.session.id"] = session_id
        span = self.tracer.tracer.start_span(method, context=parent, kind=self._trace.SpanKind.SERVER,
                                             attributes=attrs)
        token = self._context.attach(self._trace.set_span_in_context(span, parent))
        try:
            return run()
        except BaseException as exc:
            failure, code = self._failed(span, exc)
            span.set_attributes(_error_attributes(failure, code))
            raise
        finally:
            self._context.detach(token)
            span.end()

    # ------------------------------------------------------------------ sessions

    def _connection(self, owner: Any) -> Any:
        """The connection whose facts a span of ``owner`` (a client's :class:`~mcpsync._session.Session`)
        carries: its session connection,
        else its latest connection that finished a handshake."""
        conn = getattr(owner, "primary", None)
        alive = getattr(conn, "alive", None)
        if conn is not None and (alive is None or alive()):
            return conn
        try:
            return self._latest.get(owner) or conn
        except TypeError:  # not weakly referable: no memory of it
            return conn

    def _connection_attributes(self, owner: Any, conn: Any = None) -> dict[str, Any]:
        """``mcp.protocol.version``, ``network.*`` and ``server.*`` of the client's session."""
        if conn is None:
            conn = self._connection(owner)
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

    def _session_id(self, owner: Any, conn: Any = None) -> str | None:
        """``mcp.session.id``: only a session that has one (not the 2026-07-28 era)."""
        if conn is None:
            conn = self._connection(owner)
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

    def session_opened(self, owner: Any, conn: Any) -> None:
        """A connection finished its handshake: its session's clock starts."""
        attrs = self._connection_attributes(owner, conn)
        attrs["mcpsync.server"] = owner.name
        clock = _SessionClock(time.monotonic(), attrs)
        with self._lock:
            self._sessions[id(conn)] = (owner, conn, clock)
            try:
                self._latest[owner] = conn
            except TypeError:  # not weakly referable
                pass
        add = getattr(conn.channel, "add_close_callback", None)
        if add is not None:
            add(lambda reason: self._session_ended(conn, reason))

    def _session_ended(self, conn: Any, reason: BaseException | None) -> None:
        with self._lock:
            entry = self._sessions.pop(id(conn), None)
        if entry is None or entry[1] is not conn:
            return
        owner, _, clock = entry
        attrs = dict(clock.attrs)
        if reason is not None and not getattr(owner, "closed", False) and "closed by the client" not in str(reason):
            attrs["error.type"] = type(reason).__qualname__
        try:
            self._session.record(max(0.0, time.monotonic() - clock.start), attrs)
        except Exception:  # noqa: BLE001 - metrics never break a close
            log.debug("recording mcp.client.session.duration failed", exc_info=True)

    def client_closed(self, owner: Any) -> None:
        """The client closed (``owner``: its session): every session of it still open ends now."""
        with self._lock:
            mine = [entry[1] for entry in self._sessions.values() if entry[0] is owner]
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
