"""Per-server and per-tool call metrics: QPS, P50/P99 latency, error rate, cache hit rate.

:class:`MetricsRecorder` is the ``record(server, tool, start, end, outcome)`` callback of
:class:`~mcpsync._guard.Guard` (outcome ``"success"`` / ``"error"`` / ``"timeout"``) and
the ``metrics`` sink of :class:`~mcpsync._cache.ToolCache`. :meth:`MetricsRecorder.snapshot`
returns frozen values (what ``client.metrics()`` returns).

* **Latency** goes into a :class:`LatencyHistogram`: log-linear (HDR-style) buckets over
  integer microseconds, 64 linear sub-buckets per power of two, so every value is known
  to within 1/64 (1.6 %) of itself and a percentile is reported as its bucket's midpoint
  (at most 0.8 % off); values under 128 µs are exact to the microsecond. Memory is at
  most :data:`LatencyHistogram.BUCKETS` integers, whatever the number of calls.
* **QPS** is counted in a ring of one-second slots over a sliding ``window`` (60 s).
* **Error rate** = (errors + timeouts) / calls; ``timeouts`` is also given alone.
* **Cache hit rate** = hits / lookups of the tool cache (fed through
  :meth:`MetricsRecorder.record_cache`).
* **Discovery is not agent work**: records whose ``tool`` is a discovery method
  (:data:`DISCOVERY_METHODS`, e.g. ``"tools/list"``; MCP tool names cannot contain
  ``/``) or that come through :meth:`MetricsRecorder.record_discovery` are kept apart
  (:attr:`ServerMetrics.discovery`) and never enter the per-call numbers.

The clock of ``start``/``end`` must be the recorder's ``clock`` (``time.monotonic`` by
default, as for the Guard), since QPS windows end at "now".

Example:
    >>> rec = MetricsRecorder(clock=lambda: 10.0)
    >>> rec.record("s1", "echo", 9.0, 9.25, "success")
    >>> rec.record("s1", "echo", 9.5, 9.75, "timeout")
    >>> m = rec.snapshot()["s1"]
    >>> m.total.calls, m.total.timeouts, m.total.error_rate, round(m.tools["echo"].p50_ms)
    (2, 1, 0.5, 250)
"""

from __future__ import annotations

import bisect
import itertools
import logging
import math
import operator
import threading
import time
from collections import deque
from dataclasses import asdict, dataclass
from types import MappingProxyType
from typing import Any, Callable, Iterable, Iterator, Mapping

from ._speedups import BUCKETS, IMPLEMENTATION, CallQueue, CallTally, Histogram, fold_calls

__all__ = [
    "LatencyHistogram",
    "MetricsRecorder",
    "MetricsSnapshot",
    "ServerMetrics",
    "CallStats",
    "fan_out",
    "DISCOVERY_METHODS",
    "OTHER_TOOLS",
]

#: Requests that are discovery (harness overhead), when recorded as the ``tool``.
DISCOVERY_METHODS = frozenset(
    {"tools/list", "server/discover", "initialize", "prompts/list", "resources/list", "resources/templates/list"}
)
#: Where calls of tools beyond ``max_tools`` per server are summed.
OTHER_TOOLS = "(other)"
#: queued call records folded into the numbers at once (see MetricsRecorder.record)
BATCH = 256

_SUB_BITS = 6
_SUB = 1 << _SUB_BITS  # 64 linear sub-buckets per power of two


def _bounds(i: int) -> tuple[int, int]:
    """[low, high) of bucket ``i`` in microseconds (the inverse of ``_speedups.bucket_index``)."""
    if i < 2 * _SUB:
        return i, i + 1
    e = (i >> _SUB_BITS) + _SUB_BITS - 1
    sub = (i & (_SUB - 1)) + _SUB
    shift = e - _SUB_BITS
    return sub << shift, (sub + 1) << shift


_BUCKETS = BUCKETS


class LatencyHistogram(Histogram):
    """Bounded-memory latency histogram (not thread-safe: callers lock): the compiled
    :class:`~mcpsync._speedups.Histogram` (``record_us``, and its numbers) with
    percentiles.

    Example:
        >>> h = LatencyHistogram()
        >>> for ms in range(1, 101):
        ...     h.record(ms / 1000)
        >>> round(h.percentile(50) * 1000, 1), round(h.percentile(99) * 1000, 1)
        (49.9, 98.8)
    """

    #: the number of buckets (memory bound)
    BUCKETS = _BUCKETS
    #: the worst relative error of a reported percentile (half a bucket)
    PRECISION = 1.0 / (2 * _SUB)

    __slots__ = ()

    def record(self, seconds: float) -> None:
        self.record_us(int(seconds * 1e6 + 0.5))

    def merge(self, other: "LatencyHistogram") -> None:
        if not other.count:
            return
        self.counts = list(map(operator.add, self.counts, other.counts))
        self.count += other.count
        self.total_us += other.total_us
        self.max_us = max(self.max_us, other.max_us)
        if self.min_us < 0 or (0 <= other.min_us < self.min_us):
            self.min_us = other.min_us

    def copy(self) -> "LatencyHistogram":
        h = LatencyHistogram()
        h.counts = list(self.counts)
        h.count, h.total_us, h.min_us, h.max_us = self.count, self.total_us, self.min_us, self.max_us
        return h

    def percentile_us(self, q: float) -> float | None:
        """The ``q``-th percentile (0..100) in microseconds, or ``None`` when empty."""
        if not self.count:
            return None
        return self.percentiles_us((q,))[0]

    def percentiles_us(self, qs: Iterable[float]) -> list[float | None]:
        """Several percentiles at once (one pass over the buckets), in microseconds."""
        qs = list(qs)
        if not self.count:
            return [None] * len(qs)
        cumulative = list(itertools.accumulate(self.counts))
        out: list[float | None] = []
        for q in qs:
            rank = max(1, math.ceil(self.count * min(max(q, 0.0), 100.0) / 100.0))
            i = bisect.bisect_left(cumulative, rank)
            if i >= _BUCKETS - 1:
                out.append(float(self.max_us))  # the clamped overflow bucket
                continue
            lo, hi = _bounds(i)
            mid = lo if hi - lo == 1 else (lo + hi) / 2.0
            out.append(float(min(max(mid, self.min_us), self.max_us)))
        return out

    def percentile(self, q: float) -> float | None:
        """The ``q``-th percentile in seconds, or ``None`` when empty."""
        v = self.percentile_us(q)
        return None if v is None else v / 1e6


@dataclass(frozen=True, slots=True)
class CallStats:
    """Frozen numbers of one tool (or one server's total).

    Latencies are in milliseconds (``None`` before the first call); ``qps`` is over the
    recorder's sliding window; ``error_rate`` counts errors and timeouts.
    """

    calls: int = 0
    successes: int = 0
    errors: int = 0
    timeouts: int = 0
    error_rate: float = 0.0
    qps: float = 0.0
    p50_ms: float | None = None
    p90_ms: float | None = None
    p99_ms: float | None = None
    mean_ms: float | None = None
    min_ms: float | None = None
    max_ms: float | None = None
    cache_hits: int = 0
    cache_misses: int = 0
    cache_hit_rate: float = 0.0

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)


@dataclass(frozen=True, slots=True)
class ServerMetrics:
    """One server: its ``total``, each tool's numbers, and its discovery overhead."""

    server: str
    total: CallStats
    tools: Mapping[str, CallStats]
    discovery: CallStats

    def as_dict(self) -> dict[str, Any]:
        return {
            "server": self.server,
            "total": self.total.as_dict(),
            "tools": {k: v.as_dict() for k, v in self.tools.items()},
            "discovery": self.discovery.as_dict(),
        }


@dataclass(frozen=True, slots=True)
class MetricsSnapshot:
    """Every server's metrics at ``taken_at`` (the recorder's clock)."""

    servers: Mapping[str, ServerMetrics]
    taken_at: float
    window: float

    def __getitem__(self, server: str) -> ServerMetrics:
        return self.servers[server]

    def __contains__(self, server: object) -> bool:
        return server in self.servers

    def __iter__(self) -> Iterator[str]:
        return iter(self.servers)

    def __len__(self) -> int:
        return len(self.servers)

    def as_dict(self) -> dict[str, Any]:
        return {
            "taken_at": self.taken_at,
            "window": self.window,
            "servers": {k: v.as_dict() for k, v in self.servers.items()},
        }


class _Stats(CallTally):
    """The numbers of one (server, tool): the call numbers (a :class:`CallTally`:
    histogram, outcomes, QPS ring) are folded in under the recorder's ``_drain_lock``
    or, compiled, added at once (see CallQueue) and read with ``numbers()``; the cache
    counters are under ``lock``."""

    __slots__ = ("lock", "cache_hits", "cache_misses")

    def __init__(self, slots: int) -> None:
        super().__init__(slots)
        self.lock = threading.Lock()
        self.cache_hits = 0
        self.cache_misses = 0


class MetricsRecorder:
    """Thread-safe metrics sink: the Guard's ``record`` callback and the cache's counter.

    Args:
        window: seconds of the sliding QPS window (default 60).
        clock: the monotonic clock the ``start``/``end`` values come from.
        max_tools: distinct tool names kept per server; further names are summed under
            :data:`OTHER_TOOLS` (memory stays bounded whatever names callers invent).

    Example:
        >>> from mcpsync._guard import Guard
        >>> rec = MetricsRecorder()
        >>> Guard("s1", record=rec).call(lambda: "ok", tool="echo")
        'ok'
        >>> rec.snapshot()["s1"].tools["echo"].calls
        1
    """

    def __init__(
        self, *, window: float = 60.0, clock: Callable[[], float] = time.monotonic, max_tools: int = 1024
    ) -> None:
        if window <= 0:
            raise ValueError("window must be positive")
        self.window = float(window)
        self._slots = max(1, int(math.ceil(window)))
        self._clock = clock
        self.max_tools = max_tools
        self._lock = threading.Lock()
        self._stats: dict[tuple[str, str | None], _Stats] = {}
        self._discovery: dict[str, _Stats] = {}
        self._server_cache: dict[str, list[int]] = {}  # server → [hits, misses] of listing lookups
        self._tools_per_server: dict[str, int] = {}
        self._queue: deque[tuple[str, str | None, float, float, str]] = deque()
        self._drain_lock = threading.Lock()
        #: :meth:`record` as a compiled callable: what the Guard calls (no Python frame per call);
        #: compiled, it adds a call to its tally at once, or hands it to _fold (see CallQueue)
        direct = IMPLEMENTATION == "c-extension"
        self._calls = CallQueue(self._queue, BATCH, self._drain, self._stats if direct else None, self._fold if direct else None)
        self.queue_call: Callable[[str, str | None, float, float, str], None] = self._calls.record

    # ------------------------------------------------------------------ recording

    def _new(self, server: str, tool: str | None) -> _Stats:
        with self._lock:
            s = self._stats.get((server, tool))
            if s is not None:
                return s
            n = self._tools_per_server.get(server, 0)
            if tool is not None and n >= self.max_tools:
                key = (server, OTHER_TOOLS)
                s = self._stats.get(key)
                if s is None:
                    s = self._stats[key] = _Stats(self._slots)
                return s
            s = self._stats[(server, tool)] = _Stats(self._slots)
            self._tools_per_server[server] = n + 1
            return s

    def record(self, server: str, tool: str | None, start: float, end: float, outcome: str) -> None:
        """Record one finished call (the Guard's ``Recorder`` signature).

        The call's path stays short: the record is queued (an append, no lock) and
        folded into the numbers in batches of :data:`BATCH`, or before they are read.
        """
        q = self._queue
        q.append((server, tool, start, end, outcome))
        if len(q) >= BATCH:
            self._drain(wait=False)

    __call__ = record

    def _drain(self, wait: bool = True) -> None:
        """Fold the queued records in. ``wait=False``: a thread that finds another
        folding leaves its record to it or to the next drain."""
        if not self._drain_lock.acquire(blocking=wait):
            return
        try:
            self._fold_queued()
        finally:
            self._drain_lock.release()

    def _fold_queued(self) -> None:
        # under _drain_lock: one folder at a time, oldest record first, so each QPS
        # ring sees its records in order and the numbers need no lock of their own;
        # the loop is compiled (_speedups.fold_calls), a new key comes back to _fold
        fold_calls(self._queue.popleft, self._stats, self._fold)

    def _fold(self, server: str, tool: str | None, start: float, end: float, outcome: str) -> None:
        # under _drain_lock, or (compiled) from the recorder: its adds are whole under the GIL
        if tool is not None and tool in DISCOVERY_METHODS:
            self._add_discovery(server, start, end, outcome)
            return
        s = self._stats.get((server, tool))
        if s is None:
            s = self._new(server, tool)
        s.add(start, end, outcome, True)

    def record_discovery(
        self, server: str, start: float | None = None, end: float | None = None, outcome: str = "success"
    ) -> None:
        """Record one discovery (``tools/list`` …): harness overhead, not an agent call.

        Without ``start``/``end`` only the count is kept (what the tool cache reports).
        """
        with self._drain_lock:
            self._add_discovery(server, start, end, outcome)

    def _add_discovery(self, server: str, start: float | None, end: float | None, outcome: str) -> None:
        s = self._discovery.get(server)
        if s is None:
            with self._lock:
                s = self._discovery.setdefault(server, _Stats(self._slots))
        if start is None or end is None:
            now = self._clock()
            s.add(now, now, outcome, False)
        else:
            s.add(start, end, outcome, True)

    def record_cache(self, server: str, hit: bool, tool: str | None = None) -> None:
        """Count one tool-cache lookup (``tool`` None: a lookup of the whole listing)."""
        if tool is None:
            c = self._server_cache.get(server)
            if c is None:
                with self._lock:
                    c = self._server_cache.setdefault(server, [0, 0])
            with self._lock:
                c[0 if hit else 1] += 1
            return
        s = self._stats.get((server, tool))
        if s is None:
            s = self._new(server, tool)
        with s.lock:
            if hit:
                s.cache_hits += 1
            else:
                s.cache_misses += 1

    def reset(self) -> None:
        """Forget everything recorded."""
        with self._drain_lock, self._lock:
            self._queue.clear()
            self._stats.clear()  # in place: the compiled recorder holds this dict
            self._calls.forget()  # and the tally of its last record
            self._discovery = {}
            self._server_cache = {}
            self._tools_per_server = {}

    # ------------------------------------------------------------------ reading

    def snapshot(self) -> MetricsSnapshot:
        """Frozen numbers of every server and tool, now."""
        with self._drain_lock:  # every record so far folded in, none folding meanwhile
            self._fold_queued()
            return self._snapshot()

    def _snapshot(self) -> MetricsSnapshot:
        now = self._clock()
        with self._lock:
            items = list(self._stats.items())
            discovery = dict(self._discovery)
            server_cache = {k: list(v) for k, v in self._server_cache.items()}
        per_server: dict[str, dict[str | None, _Frozen]] = {}
        for (server, tool), s in items:
            per_server.setdefault(server, {})[tool] = _freeze(s, now, self.window, self._slots)
        for server in list(discovery) + list(server_cache):
            per_server.setdefault(server, {})
        out: dict[str, ServerMetrics] = {}
        for server, tools in per_server.items():
            total = _Frozen.empty()
            for f in tools.values():
                total.merge(f)
            hits, misses = server_cache.get(server, [0, 0])
            total.cache_hits += hits
            total.cache_misses += misses
            d = discovery.get(server)
            out[server] = ServerMetrics(
                server=server,
                total=total.stats(),
                tools=MappingProxyType({t: f.stats() for t, f in tools.items() if t is not None}),
                discovery=_freeze(d, now, self.window, self._slots).stats() if d is not None else CallStats(),
            )
        return MetricsSnapshot(servers=MappingProxyType(out), taken_at=now, window=self.window)

    def server(self, server: str) -> ServerMetrics | None:
        """One server's metrics (``None`` if nothing was recorded for it)."""
        return self.snapshot().servers.get(server)


class _Frozen:
    """A consistent copy of one _Stats taken under its lock, mergeable into totals."""

    __slots__ = ("hist", "successes", "errors", "timeouts", "recent", "span", "cache_hits", "cache_misses")

    def __init__(self, hist: "LatencyHistogram | None" = None) -> None:
        self.hist = hist if hist is not None else LatencyHistogram()
        self.successes = self.errors = self.timeouts = self.recent = 0
        self.cache_hits = self.cache_misses = 0
        self.span = 0.0

    @classmethod
    def empty(cls) -> "_Frozen":
        return cls()

    def merge(self, o: "_Frozen") -> None:
        self.hist.merge(o.hist)
        self.successes += o.successes
        self.errors += o.errors
        self.timeouts += o.timeouts
        self.recent += o.recent
        self.span = max(self.span, o.span)
        self.cache_hits += o.cache_hits
        self.cache_misses += o.cache_misses

    def stats(self) -> CallStats:
        h = self.hist
        calls = self.successes + self.errors + self.timeouts
        lookups = self.cache_hits + self.cache_misses

        p50, p90, p99 = (None if v is None else v / 1000.0 for v in h.percentiles_us((50, 90, 99)))

        return CallStats(
            calls=calls,
            successes=self.successes,
            errors=self.errors,
            timeouts=self.timeouts,
            error_rate=(self.errors + self.timeouts) / calls if calls else 0.0,
            qps=self.recent / self.span if self.span > 0 else 0.0,
            p50_ms=p50,
            p90_ms=p90,
            p99_ms=p99,
            mean_ms=h.total_us / h.count / 1000.0 if h.count else None,
            min_ms=h.min_us / 1000.0 if h.count else None,
            max_ms=h.max_us / 1000.0 if h.count else None,
            cache_hits=self.cache_hits,
            cache_misses=self.cache_misses,
            cache_hit_rate=self.cache_hits / lookups if lookups else 0.0,
        )


def _freeze(s: _Stats, now: float, window: float, slots: int) -> _Frozen:
    horizon = int(now) - slots  # slots strictly after it are inside the window
    h = LatencyHistogram()
    f = _Frozen(h)
    # one copy of the call numbers (the compiled recorder may add meanwhile), the cache
    # counters under their lock
    h.counts, h.count, h.total_us, h.min_us, h.max_us, f.successes, f.errors, f.timeouts, ring_t, ring_n, first = (
        s.numbers()
    )
    with s.lock:
        f.cache_hits, f.cache_misses = s.cache_hits, s.cache_misses
    f.recent = sum(n for t, n in zip(ring_t, ring_n) if t > horizon)
    # the rate is over the window, or over the time since the first call if shorter
    f.span = window if first is None else max(1.0, min(window, now - first + 1.0))
    return f


def fan_out(*recorders: Any) -> Any:
    """One sink that forwards to each of ``recorders`` (``None`` skipped).

    The result is callable as the Guard's ``record(server, tool, start, end, outcome)``
    and has ``record_cache`` / ``record_discovery`` for the tool cache, forwarded to
    the recorders that have them (a plain function receives only ``record``). A
    recorder that raises is logged and skipped for that event; the others still run.
    With a single recorder, that recorder itself is returned.

    Example:
        >>> seen = []
        >>> both = fan_out(MetricsRecorder(), lambda *a: seen.append(a[-1]), None)
        >>> both("s1", "echo", 0.0, 0.1, "success"); both.record_cache("s1", True, "echo")
        >>> seen
        ['success']
    """
    live = tuple(r for r in recorders if r is not None)
    if len(live) == 1:
        return live[0]
    return _FanOut(live)


class _FanOut:
    __slots__ = ("_record", "_cache", "_discovery")

    def __init__(self, sinks: tuple[Any, ...]) -> None:
        self._record = tuple(getattr(r, "record", r) for r in sinks)
        self._cache = tuple(r.record_cache for r in sinks if hasattr(r, "record_cache"))
        self._discovery = tuple(r.record_discovery for r in sinks if hasattr(r, "record_discovery"))

    @staticmethod
    def _each(fns: tuple[Any, ...], *args: Any) -> None:
        for fn in fns:
            try:
                fn(*args)
            except Exception:  # noqa: BLE001 - one sink must not break another
                logging.getLogger("mcpsync.metrics").exception("metrics recorder raised")

    def record(self, server: str, tool: str | None, start: float, end: float, outcome: str) -> None:
        self._each(self._record, server, tool, start, end, outcome)

    __call__ = record

    def record_cache(self, server: str, hit: bool, tool: str | None = None) -> None:
        self._each(self._cache, server, hit, tool)

    def record_discovery(self, server: str, start: float | None = None, end: float | None = None,
                         outcome: str = "success") -> None:
        self._each(self._discovery, server, start, end, outcome)
