"""The measuring half of ``mcpsync bench``: the statistics, the per-tool run, and sample
arguments built from a tool's input schema (the command line is in :mod:`mcpsync._bench`,
the table, JSON and plots in :mod:`mcpsync._bench_report`).

Example:
    >>> stats_of([1.0, 2.0, 3.0])["median"]
    2.0
"""

from __future__ import annotations

import math
import statistics
import threading
import time
from bisect import bisect_left, bisect_right
from dataclasses import dataclass, field
from typing import Any, Callable, Mapping, Sequence

__all__ = ["BenchResult", "BenchProgress", "run_bench", "stats_of", "percentile", "sample_arguments"]


# ----------------------------------------------------------------------------- statistics


def _quartiles(data: list[float]) -> tuple[float, float]:
    """Q1 and Q3 exactly as pytest-benchmark computes them (``Stats.q1`` / ``Stats.q3``)."""
    n = len(data)
    if n == 1:
        return data[0], data[0]
    if n % 2:
        k, q = n // 4, n % 4
        if q == 1:
            q1 = 0.25 * data[k - 1] + 0.75 * data[k]
            q3 = 0.75 * data[3 * k] + 0.25 * data[3 * k + 1]
        else:
            q1 = 0.75 * data[k] + 0.25 * data[k + 1]
            q3 = 0.25 * data[3 * k + 1] + 0.75 * data[3 * k + 2]
        return q1, q3
    return statistics.median(data[: n // 2]), statistics.median(data[n // 2 :])


def percentile(sorted_data: Sequence[float], p: float) -> float:
    """The ``p``-th percentile (0-100) by the nearest-rank method."""
    if not sorted_data:
        return math.nan
    rank = max(1, math.ceil(p / 100.0 * len(sorted_data)))
    return sorted_data[min(rank, len(sorted_data)) - 1]


def stats_of(data: Sequence[float]) -> dict[str, Any]:
    """pytest-benchmark's ``stats`` object for per-call durations (seconds).

    Every field pytest-benchmark's ``Stats`` has, computed the same way (``min``, ``max``,
    ``mean``, ``stddev``, ``rounds``, ``median``, ``iqr``, ``q1``, ``q3``,
    ``iqr_outliers``, ``stddev_outliers``, ``outliers``, ``ld15iqr``, ``hd15iqr``, ``ops``,
    ``total``), plus ``iterations`` (1) and ``data``.
    """
    values = [float(v) for v in data]
    if not values:
        raise ValueError("no data")
    s = sorted(values)
    n = len(s)
    mean = statistics.mean(values)
    stddev = statistics.stdev(values) if n > 1 else 0
    q1, q3 = _quartiles(s)
    iqr = q3 - q1
    if n == 1:
        ld15iqr = hd15iqr = values[0]
    else:
        ld15iqr = s[bisect_left(s, q1 - 1.5 * iqr)]
        pos = bisect_right(s, q3 + 1.5 * iqr)
        hd15iqr = s[-1] if pos == n else s[pos]
    iqr_outliers = sum(1 for v in values if v < q1 - 1.5 * iqr or v > q3 + 1.5 * iqr)
    stddev_outliers = sum(1 for v in values if v < mean - stddev or v > mean + stddev)
    total = sum(values)
    return {
        "min": s[0],
        "max": s[-1],
        "mean": mean,
        "stddev": stddev,
        "rounds": n,
        "median": statistics.median(values),
        "iqr": iqr,
        "q1": q1,
        "q3": q3,
        "iqr_outliers": iqr_outliers,
        "stddev_outliers": stddev_outliers,
        "outliers": f"{stddev_outliers};{iqr_outliers}",
        "ld15iqr": ld15iqr,
        "hd15iqr": hd15iqr,
        "ops": n / total if total else 0,
        "total": total,
        "data": values,
        "iterations": 1,
    }


# ----------------------------------------------------------------------------- running


@dataclass
class BenchResult:
    """One tool's run.

    Attributes:
        tool: the tool name.
        arguments: what each call sent.
        threads: concurrent callers.
        durations: seconds per successful call, in completion order.
        errors: calls that raised or returned ``isError``.
        wall: seconds from the first measured call to the last answer.
        first_error: the first error's text, if any.
        warmup_calls: unmeasured calls made first (all threads together).
        warmup_seconds: how long the warm-up took (not part of ``wall`` nor ``--duration``).
    """

    tool: str
    arguments: dict[str, Any]
    threads: int
    durations: list[float] = field(default_factory=list)
    errors: int = 0
    wall: float = 0.0
    first_error: str | None = None
    warmup_calls: int = 0
    warmup_seconds: float = 0.0

    @property
    def calls(self) -> int:
        return len(self.durations) + self.errors

    @property
    def calls_per_second(self) -> float:
        return len(self.durations) / self.wall if self.wall > 0 else 0.0

    def p(self, q: float) -> float:
        return percentile(sorted(self.durations), q)


@dataclass(frozen=True)
class BenchProgress:
    """Where one tool's run is, for a progress display.

    Attributes:
        tool: the tool.
        phase: ``"warmup"`` or ``"measure"``.
        done: calls finished in this phase.
        total: calls this phase makes at most.
        elapsed: seconds since the phase began.
        limit: seconds the phase may take at most.
        errors: failed calls so far (measured phase).
    """

    tool: str
    phase: str
    done: int
    total: int
    elapsed: float
    limit: float
    errors: int = 0


def run_bench(
    client: Any,
    tool: str,
    arguments: Mapping[str, Any] | None = None,
    *,
    threads: int = 1,
    calls: int = 200,
    duration: float = 10.0,
    warmup: int = 5,
    timeout: float | None = None,
    warmup_duration: float | None = None,
    progress: Callable[[BenchProgress], None] | None = None,
    progress_every: float = 0.25,
) -> BenchResult:
    """Call ``tool`` from ``threads`` threads until ``calls`` calls were made or
    ``duration`` seconds passed, whichever comes first, after an unmeasured warm-up.

    Args:
        client: a :class:`~mcpsync.Client` (shared by the threads).
        tool: the tool.
        arguments: its arguments.
        threads: concurrent callers (>= 1).
        calls: total calls (>= 1), warm-up not included.
        duration: seconds at most for the measured calls (the calls in flight then finish);
            the warm-up is not part of it.
        warmup: calls each thread makes first, not measured.
        timeout: seconds per call.
        warmup_duration: seconds at most for the warm-up (default: ``duration``).
        progress: called about every ``progress_every`` seconds (from a helper thread)
            and once at the end of each phase with a :class:`BenchProgress`.
        progress_every: seconds between progress reports.
    """
    if threads < 1 or calls < 1 or duration <= 0 or warmup < 0:
        raise ValueError("threads and calls must be >= 1, duration > 0, warmup >= 0")
    args = dict(arguments or {})
    kw = {"timeout": timeout} if timeout is not None else {}
    result = BenchResult(tool, args, threads)
    lock = threading.Lock()
    warm_limit = duration if warmup_duration is None else max(0.0, warmup_duration)
    warm_done = [0]

    def warm(deadline: float) -> None:
        for _ in range(warmup):
            if time.perf_counter() >= deadline:
                break
            try:
                client.call_tool(tool, args, **kw)
            except Exception:
                break
            finally:
                with lock:
                    warm_done[0] += 1

    def watch(phase: str, started: float, limit: float, total: int, done: Callable[[], tuple[int, int]],
              workers: list[threading.Thread]) -> None:
        """Wait for ``workers``, reporting progress meanwhile (bounded: they are bounded)."""
        finished = threading.Event()

        def report() -> None:
            n, errs = done()
            if progress is not None:
                try:
                    progress(BenchProgress(tool, phase, n, total, time.perf_counter() - started, limit, errs))
                except Exception:  # noqa: BLE001 - a display must not stop the run
                    pass

        def ticker() -> None:
            while not finished.wait(progress_every):
                report()

        tick = threading.Thread(target=ticker, daemon=True) if progress is not None else None
        if tick is not None:
            tick.start()
        for w in workers:
            w.join()
        finished.set()
        if tick is not None:
            tick.join(progress_every + 1.0)
        report()

    # warm up from every thread at once, so that the pool opens the connections the
    # measured run will use before the clock starts
    if warmup and warm_limit > 0:
        warm_start = time.perf_counter()
        warmers = [threading.Thread(target=warm, args=(warm_start + warm_limit,), daemon=True) for _ in range(threads)]
        for w in warmers:
            w.start()
        watch("warmup", warm_start, warm_limit, warmup * threads, lambda: (warm_done[0], 0), warmers)
        result.warmup_calls = warm_done[0]
        result.warmup_seconds = time.perf_counter() - warm_start
    remaining = [calls]
    finished_calls = [0, 0]  # done, failed
    start = time.perf_counter()
    deadline = start + duration
    last_end = [start]

    def worker() -> None:
        perf = time.perf_counter
        mine: list[float] = []
        errors = 0
        first: str | None = None
        while True:
            with lock:
                if remaining[0] <= 0:
                    break
                remaining[0] -= 1
            if perf() >= deadline:
                break
            t0 = perf()
            try:
                r = client.call_tool(tool, args, **kw)
                ok = not getattr(r, "is_error", False)
                if not ok and first is None:
                    from .adapters import result_text

                    first = f"isError: {result_text(r)[:200]}"
            except Exception as exc:
                ok = False
                if first is None:
                    first = f"{type(exc).__name__}: {exc}"
            t1 = perf()
            if ok:
                mine.append(t1 - t0)
            else:
                errors += 1
            finished_calls[0] += 1  # a display's count: a lost update now and then is harmless
            if not ok:
                finished_calls[1] += 1
        with lock:
            result.durations.extend(mine)
            result.errors += errors
            if first is not None and result.first_error is None:
                result.first_error = first
            last_end[0] = max(last_end[0], perf())

    workers = [threading.Thread(target=worker, name=f"mcpsync-bench-{i}", daemon=True) for i in range(threads)]
    for w in workers:
        w.start()
    watch("measure", start, duration, calls, lambda: (finished_calls[0], finished_calls[1]), workers)
    result.wall = last_end[0] - start
    return result


_SAMPLE = {"string": "bench", "integer": 1, "number": 1, "boolean": True, "array": [], "object": {}, "null": None}


def _sample(schema: Any) -> Any:
    if not isinstance(schema, Mapping):
        return "bench"
    if "const" in schema:
        return schema["const"]
    if schema.get("enum"):
        return schema["enum"][0]
    if "default" in schema:
        return schema["default"]
    if "examples" in schema and schema["examples"]:
        return schema["examples"][0]
    for key in ("anyOf", "oneOf"):
        if schema.get(key):
            return _sample(schema[key][0])
    kind = schema.get("type")
    if isinstance(kind, list):
        kind = next((k for k in kind if k != "null"), kind[0] if kind else "string")
    if kind == "object" or (kind is None and "properties" in schema):
        return sample_arguments(schema)
    if kind == "number" or kind == "integer":
        low = schema.get("minimum", schema.get("exclusiveMinimum"))
        if isinstance(low, (int, float)):
            return int(low) + 1 if kind == "integer" else low + 1
        return 1
    if kind == "string":
        n = schema.get("minLength")
        return "bench" if not isinstance(n, int) or n <= 5 else "b" * n
    if kind == "array":
        n = schema.get("minItems")
        return [_sample(schema.get("items"))] * n if isinstance(n, int) and n > 0 else []
    return _SAMPLE.get(str(kind), "bench")


def sample_arguments(input_schema: Any) -> dict[str, Any]:
    """Arguments for a tool from its input schema: each required property gets a simple
    value of its type (its ``const``, first ``enum`` value, ``default`` or example when it
    has one).

    Example:
        >>> sample_arguments({"type": "object", "properties": {"a": {"type": "number"},
        ...     "m": {"type": "string"}, "opt": {"type": "string"}}, "required": ["a", "m"]})
        {'a': 1, 'm': 'bench'}
    """
    if not isinstance(input_schema, Mapping):
        return {}
    props = input_schema.get("properties") or {}
    required = input_schema.get("required") or []
    return {name: _sample(props.get(name)) for name in required if isinstance(name, str)}
