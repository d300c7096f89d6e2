"""``mcpsync bench`` (per-tool latency of any server) and ``mcpsync servers`` (a config file's servers).

``mcpsync bench`` calls each chosen tool from N threads, through one shared Client, and
reports per tool the calls made, errors, P50 / P99 latency and calls per second, as a
table and, with ``--json FILE``, in the JSON layout pytest-benchmark writes with
``--benchmark-json`` (so ``pytest-benchmark compare FILE`` and any tooling reading those
files accept it)::

    mcpsync bench -- python -m mcpsync.server.demo
    mcpsync bench --tool echo --args 'echo={"message": "hi"}' --threads 8 --calls 2000 \\
        --json bench.json -- npx -y @modelcontextprotocol/server-everything
    mcpsync bench --url http://127.0.0.1:8000/mcp --tool search --duration 5

By default only tools annotated ``readOnlyHint`` are benchmarked (calling a tool with side
effects thousands of times is rarely what one wants); choose tools with ``--tool NAME``: one
that is not annotated read-only runs only with ``--allow-side-effects`` (``--all`` runs every
tool and implies it). Arguments come from ``--args TOOL=JSON``, else from the tool's input
schema (required properties get a simple value of their type). Each tool first gets
``--warmup`` unmeasured calls (bounded by ``--warmup-duration`` seconds, reported apart),
then its measured run is bounded by ``--calls`` and ``--duration``, whichever ends first:
the warm-up never eats into ``--duration``. Failed calls are counted, not retried (the client
runs with ``RetryPolicy.NONE``).

On a terminal a live line on stderr shows each tool's progress (``--progress`` /
``--no-progress`` force it either way). Latencies are printed each in the unit that reads
best (``µs``, ``ms``, ``s``). ``--plot FILE.png`` (or ``.svg``) draws each tool's latency
distribution and percentile curve (matplotlib: ``pip install mcpsync[plot]``).

``mcpsync servers CONFIG`` lists what an ``mcpServers`` file defines and checks each server
(connect + ``tools/list``, concurrently, each bounded by ``--timeout``).

Exit status: 0 success, 2 bad usage or configuration, 3 a server (or every call of a
benchmarked tool) failed.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import platform
import statistics
import subprocess
import sys
import threading
import time
from bisect import bisect_left, bisect_right
from dataclasses import dataclass, field
from datetime import datetime, timezone
from typing import Any, Callable, Mapping, Sequence

from ._errors import UsageError

__all__ = [
    "main",
    "servers_main",
    "BenchResult",
    "run_bench",
    "stats_of",
    "report_json",
    "format_table",
    "sample_arguments",
    "BenchProgress",
    "human_duration",
    "human_rate",
    "plot_results",
]

EXIT_OK, EXIT_USAGE, EXIT_FAILURE = 0, 2, 3


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


# ----------------------------------------------------------------------------- reporting


def human_duration(seconds: float | None) -> str:
    """A duration in the unit that reads best, with three significant digits.

    Example:
        >>> human_duration(0.0000352), human_duration(0.01234), human_duration(10.010972)
        ('35.2 µs', '12.3 ms', '10.0 s')
    """
    if seconds is None or math.isnan(seconds):
        return "-"
    if seconds >= 60:
        return f"{seconds / 60:.1f} min"
    for limit, unit, scale in ((1e-6, "ns", 1e9), (1e-3, "µs", 1e6), (1.0, "ms", 1e3)):
        if seconds < limit:
            v = seconds * scale
            break
    else:
        unit, v = "s", seconds
    if v >= 100 or v == 0:
        return f"{v:.0f} {unit}"
    return f"{v:.1f} {unit}" if v >= 10 else f"{v:.2f} {unit}"


def human_rate(per_second: float) -> str:
    """Calls per second, readable: ``812``, ``12.3k``, ``1.25M``."""
    if per_second >= 1e6:
        return f"{per_second / 1e6:.2f}M"
    if per_second >= 1e4:
        return f"{per_second / 1e3:.1f}k"
    return f"{per_second:.0f}" if per_second >= 100 else f"{per_second:.1f}"


def format_table(results: Sequence[BenchResult]) -> str:
    """The results as a text table: per tool calls, errors, min, P50, P99, max, mean, calls/s.

    Each latency is printed in its own unit (``35.2 µs``, ``12.3 ms``, ``10.0 s``), so a
    slow tool next to a fast one reads as easily as either alone."""
    rows: list[tuple[BenchResult, float | None, float | None, float | None, float | None, float | None]] = []
    for r in results:
        if r.durations:
            s = sorted(r.durations)
            rows.append((r, s[0], percentile(s, 50), percentile(s, 99), s[-1], statistics.mean(s)))
        else:
            rows.append((r, None, None, None, None, None))
    head: tuple[str, ...] = ("tool", "threads", "calls", "errors", "min", "p50", "p99", "max", "mean", "calls/s")
    lines: list[tuple[str, ...]] = [head]
    for r, mn, p50, p99, mx, mean in rows:
        f = human_duration
        lines.append((r.tool, str(r.threads), str(r.calls), str(r.errors), f(mn), f(p50), f(p99), f(mx), f(mean),
                      human_rate(r.calls_per_second)))
    widths = [max(len(row[i]) for row in lines) for i in range(len(head))]
    out = []
    for j, row in enumerate(lines):
        cells = [row[0].ljust(widths[0])] + [c.rjust(widths[i]) for i, c in enumerate(row) if i]
        out.append("  ".join(cells).rstrip())
        if j == 0:
            out.append("  ".join("-" * w for w in widths))
    return "\n".join(out)


def _machine_info() -> dict[str, Any]:
    impl = platform.python_implementation()
    return {
        "node": platform.node(),
        "processor": platform.processor(),
        "machine": platform.machine(),
        "python_compiler": platform.python_compiler(),
        "python_implementation": impl,
        "python_implementation_version": platform.python_version(),
        "python_version": platform.python_version(),
        "python_build": list(platform.python_build()),
        "release": platform.release(),
        "system": platform.system(),
        "cpu": {"count": os.cpu_count(), "arch_string_raw": platform.machine(), "brand_raw": platform.processor()},
    }


def _git(*args: str) -> str | None:
    try:
        out = subprocess.run(["git", *args], capture_output=True, text=True, timeout=5, check=True)
    except (OSError, subprocess.SubprocessError):
        return None
    return out.stdout.strip() or None


def _commit_info() -> dict[str, Any]:
    commit = _git("rev-parse", "HEAD")
    if commit is None:
        return {"id": "unversioned", "time": None, "author_time": None, "dirty": False, "project": os.path.basename(os.getcwd()), "branch": "(unknown)"}
    top = _git("rev-parse", "--show-toplevel") or os.getcwd()
    return {
        "id": commit,
        "time": _git("show", "-s", "--pretty=format:%cI"),
        "author_time": _git("show", "-s", "--pretty=format:%aI"),
        "dirty": bool(_git("status", "--porcelain", "--untracked-files=no")),
        "project": os.path.basename(top),
        "branch": _git("rev-parse", "--abbrev-ref", "HEAD") or "(unknown)",
    }


def _producer_version() -> str:
    try:
        from importlib.metadata import version

        return version("pytest-benchmark")
    except Exception:
        return "5.0.0"


def report_json(
    results: Sequence[BenchResult],
    *,
    server: str,
    transport: str,
    group: str | None = None,
    duration: float | None = None,
    warmup: int = 0,
    include_data: bool = True,
) -> dict[str, Any]:
    """The results in pytest-benchmark's ``--benchmark-json`` layout.

    One benchmark per tool that had at least one successful call: ``name`` is
    ``bench[<tool>]``, ``group`` the server (or ``group``), ``params`` the tool and thread
    count, ``stats`` per :func:`stats_of`; ``extra_info`` adds P50, P99, calls/s, errors.
    Tools without a successful call are left out of ``benchmarks`` (pytest-benchmark
    leaves out failed benchmarks too) and listed in ``extra_info.failed`` of the report.
    """
    from . import __version__

    benchmarks = []
    failed = []
    for r in results:
        if not r.durations:
            failed.append({"tool": r.tool, "errors": r.errors, "error": r.first_error})
            continue
        stats = stats_of(r.durations)
        if not include_data:
            stats.pop("data")
        s = sorted(r.durations)
        benchmarks.append(
            {
                "group": group or server,
                "name": f"bench[{r.tool}]",
                "fullname": f"mcpsync-bench::{server}::bench[{r.tool}]",
                "params": {"tool": r.tool, "threads": r.threads},
                "param": r.tool,
                "extra_info": {
                    "server": server,
                    "transport": transport,
                    "tool": r.tool,
                    "arguments": r.arguments,
                    "threads": r.threads,
                    "calls": r.calls,
                    "errors": r.errors,
                    "first_error": r.first_error,
                    "p50": percentile(s, 50),
                    "p99": percentile(s, 99),
                    "calls_per_second": r.calls_per_second,
                    "wall": r.wall,
                    "warmup_calls": r.warmup_calls,
                    "warmup_seconds": r.warmup_seconds,
                },
                "options": {
                    "disable_gc": False,
                    "timer": "perf_counter",
                    "min_rounds": 1,
                    "max_time": duration,
                    "min_time": 0,
                    "warmup": warmup > 0,
                },
                "stats": stats,
            }
        )
    return {
        "machine_info": _machine_info(),
        "commit_info": _commit_info(),
        "benchmarks": benchmarks,
        "datetime": datetime.now(timezone.utc).isoformat(),
        "version": _producer_version(),
        "extra_info": {"producer": f"mcpsync {__version__} bench", "server": server, "failed": failed},
    }


# ----------------------------------------------------------------------------- plots

PLOT_FORMATS = (".png", ".svg")


def _check_plot(path: str) -> None:
    """Refuse a ``--plot`` target before the run, not after it."""
    ext = os.path.splitext(path)[1].lower()
    if ext not in PLOT_FORMATS:
        raise UsageError(f"--plot draws .png or .svg files, not {ext or 'a file without extension'!r}")
    try:
        import matplotlib  # noqa: F401
    except ImportError:
        raise UsageError("--plot needs matplotlib: pip install 'mcpsync[plot]'") from None


def plot_results(results: Sequence[BenchResult], path: str, *, title: str | None = None) -> None:
    """Draw each tool's latencies into ``path`` (``.png`` or ``.svg``): a histogram on a
    log time axis (the distribution's shape: modes, tails) and the percentile curve
    (latency against percentile, with P50 and P99 marked).

    Needs matplotlib (the ``plot`` extra). Tools without a successful call are left out.

    Raises:
        ValueError: ``path`` is not a .png or .svg file, or no tool has a measured call.
    """
    ext = os.path.splitext(path)[1].lower()
    if ext not in PLOT_FORMATS:
        raise ValueError(f"plots are .png or .svg, not {ext!r}")
    drawn = [r for r in results if r.durations]
    if not drawn:
        raise ValueError("no tool has a successful call to draw")
    import matplotlib

    matplotlib.use("Agg", force=False)
    from matplotlib.figure import Figure
    from matplotlib.ticker import FixedLocator, FuncFormatter, NullFormatter

    seconds = FuncFormatter(lambda v, _pos: human_duration(v))

    fig = Figure(figsize=(11, 4.5), layout="constrained")
    hist, curve = fig.subplots(1, 2)
    low = min(min(r.durations) for r in drawn)
    high = max(max(r.durations) for r in drawn)
    low, high = max(low, 1e-7), max(high, low * 1.01)
    bins = [low * (high / low) ** (i / 60) for i in range(61)]
    for r in drawn:
        s = sorted(r.durations)
        label = f"{r.tool} (p50 {human_duration(percentile(s, 50))}, p99 {human_duration(percentile(s, 99))})"
        hist.hist(s, bins=bins, histtype="step", linewidth=1.4, label=label)
        n = len(s)
        xs = [(i + 0.5) / n for i in range(n)]  # inside (0, 1), as the logit axis needs
        line = curve.plot(xs, s, linewidth=1.4, label=r.tool)[0]
        for q in (50, 99):
            curve.plot([q / 100], [percentile(s, q)], marker="o", color=line.get_color())
    hist.set_xscale("log")
    hist.xaxis.set_major_formatter(seconds)
    hist.xaxis.set_minor_formatter(NullFormatter())
    hist.set_xlabel("latency per call (log scale)")
    hist.set_ylabel("calls")
    hist.set_title("distribution")
    hist.legend(fontsize="small")
    # the tail is what matters: a logit axis gives 90, 99 and 99.9 % equal room
    curve.set_xscale("logit")
    marks = [m for m in (0.1, 0.5, 0.9, 0.99, 0.999, 0.9999) if m < 1 - 0.5 / max(len(r.durations) for r in drawn)]
    curve.xaxis.set_major_locator(FixedLocator(marks))
    curve.xaxis.set_major_formatter(FuncFormatter(lambda v, _pos: f"{100 * v:g}%"))
    curve.xaxis.set_minor_formatter(NullFormatter())
    curve.set_yscale("log")
    curve.yaxis.set_major_formatter(seconds)
    curve.set_xlabel("percentile")
    curve.set_ylabel("latency (log scale)")
    curve.set_title("percentile curve (dots: P50, P99)")
    curve.grid(True, which="both", alpha=0.3)
    threads = sorted({r.threads for r in drawn})
    fig.suptitle(title or f"mcpsync bench: {len(drawn)} tool(s), {'/'.join(map(str, threads))} thread(s)")
    fig.savefig(path, format=ext[1:])


class _LiveLine:
    """One line on a terminal, rewritten in place: the run's progress."""

    def __init__(self, stream: Any, index: int, count: int) -> None:
        self.stream = stream
        self.index = index
        self.count = count
        self._width = 0

    def __call__(self, p: BenchProgress) -> None:
        if p.phase == "warmup":
            text = f"[{self.index}/{self.count}] {p.tool}: warming up, {p.done}/{p.total} calls"
        else:
            pct = max(p.done / p.total if p.total else 0.0, min(p.elapsed / p.limit, 1.0) if p.limit else 0.0)
            errors = f", {p.errors} errors" if p.errors else ""
            text = (f"[{self.index}/{self.count}] {p.tool}: {p.done}/{p.total} calls, "
                    f"{p.elapsed:.1f}/{p.limit:g} s ({pct:4.0%}){errors}")
        pad = max(0, self._width - len(text))
        self._width = len(text)
        self.stream.write("\r" + text + " " * pad)
        self.stream.flush()

    def clear(self) -> None:
        self.stream.write("\r" + " " * self._width + "\r")
        self.stream.flush()


# ----------------------------------------------------------------------------- CLI


def _bench_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="mcpsync bench",
        description="Per-tool latency of an MCP server (P50/P99, calls/s, N threads). Put the server command after `--`.",
        epilog="Example: mcpsync bench --threads 4 --calls 500 --json bench.json -- python -m mcpsync.server.demo",
    )
    p.add_argument("--url", help="a remote server (Streamable HTTP, falling back to HTTP+SSE) instead of a command")
    p.add_argument("--header", action="append", default=[], metavar="NAME:VALUE", help="a header for --url (repeatable)")
    p.add_argument("--config", help="an mcpServers configuration file (with --server)")
    p.add_argument("--server", help="the server's name in --config")
    p.add_argument("--tool", action="append", default=[], metavar="NAME", help="a tool to benchmark (repeatable; default: the read-only tools)")
    p.add_argument("--all", action="store_true", help="benchmark every tool, side effects or not (implies --allow-side-effects)")
    p.add_argument("--allow-side-effects", action="store_true",
                   help="let --tool name tools that are not annotated read-only (they will be called many times)")
    p.add_argument("--args", action="append", default=[], metavar="TOOL=JSON", help="arguments for a tool (default: from its input schema)")
    p.add_argument("--threads", type=int, default=1, help="concurrent callers (default 1)")
    p.add_argument("--calls", type=int, default=200, help="calls per tool, at most (default 200)")
    p.add_argument("--duration", type=float, default=10.0, help="seconds per tool, at most (default 10)")
    p.add_argument("--warmup", type=int, default=5, help="unmeasured calls per thread first (default 5)")
    p.add_argument("--warmup-duration", type=float, default=None,
                   help="seconds the warm-up may take, apart from --duration (default: as --duration)")
    p.add_argument("--timeout", type=float, default=30.0, help="seconds per call (default 30)")
    p.add_argument("--mode", choices=["auto", "modern", "legacy"], default="auto", help="protocol era (default auto)")
    p.add_argument("--env", action="append", default=[], metavar="KEY=VALUE", help="environment for a stdio server")
    p.add_argument("--json", "--benchmark-json", dest="json", metavar="FILE", help="write a pytest-benchmark JSON report")
    p.add_argument("--group", help="the report's benchmark group (default: the server)")
    p.add_argument("--no-data", action="store_true", help="leave the per-call durations out of the JSON report")
    p.add_argument("-q", "--quiet", action="store_true", help="no table, no progress")
    p.add_argument("--progress", dest="progress", action="store_true", default=None,
                   help="show a live progress line on stderr (default: when stderr is a terminal)")
    p.add_argument("--no-progress", dest="progress", action="store_false", help="no progress line")
    p.add_argument("--plot", metavar="FILE", help="draw the latency distributions into FILE (.png or .svg; needs matplotlib)")
    return p


def _client_for(opts: argparse.Namespace, command: list[str]) -> tuple[Any, str, str]:
    """(client, server name, transport)."""
    from . import Client, RetryPolicy, Timeouts

    timeouts = Timeouts(request=opts.timeout)
    # a benchmark counts failures; retrying them would hide them in the latencies
    common = {"mode": opts.mode, "timeouts": timeouts, "retry": RetryPolicy.NONE}
    given = [bool(opts.url), bool(command), bool(opts.config)]
    if sum(given) != 1:
        raise UsageError("give exactly one server: a command after `--`, --url URL, or --config FILE --server NAME")
    if opts.config:
        from ._config import ConfigError, build_client, load_config

        if not opts.server:
            raise UsageError("--config needs --server NAME")
        try:
            cfg = load_config(opts.config)[opts.server]
            return build_client(cfg, **common), cfg.name, cfg.transport
        except ConfigError as exc:
            raise UsageError(str(exc)) from None
    if opts.header and not opts.url:
        raise UsageError("--header goes with --url")
    if opts.url:
        http = getattr(Client, "http", None)
        if http is None:
            raise UsageError("this build of mcpsync has no HTTP transport (Client.http)")
        headers = {}
        for item in opts.header:
            name, sep, value = item.partition(":")
            if not sep or not name.strip():
                raise UsageError(f"--header expects NAME:VALUE, got {name.strip() or item[:20]!r}...")
            headers[name.strip()] = value.strip()
        return http(opts.url, headers=headers or None, **common), opts.url, "http"
    env = {}
    for item in opts.env:
        if "=" not in item:
            raise UsageError(f"--env expects KEY=VALUE, got {item!r}")
        k, v = item.split("=", 1)
        env[k] = v
    client = Client.stdio(command[0], command[1:], env=env or None, **common)
    return client, os.path.basename(command[0]) if len(command) == 1 else " ".join(command[:3]), "stdio"


def _read_only(tool: Any) -> bool:
    ann = getattr(tool, "annotations", None)
    return bool(getattr(ann, "read_only_hint", None))


def main(argv: Sequence[str] | None = None) -> int:
    """``mcpsync bench [options] -- CMD ARGS`` (or ``--url URL``). Returns the exit status."""
    from ._errors import MCPError

    from ._cmdline import split_command

    own, command = split_command(sys.argv[1:] if argv is None else argv)
    parser = _bench_parser()
    opts = parser.parse_args(own)
    try:
        if opts.threads < 1 or opts.calls < 1 or opts.duration <= 0 or opts.warmup < 0 or opts.timeout <= 0:
            raise UsageError("--threads and --calls must be >= 1; --duration and --timeout > 0; --warmup >= 0")
        if opts.warmup_duration is not None and opts.warmup_duration < 0:
            raise UsageError("--warmup-duration must be >= 0")
        if opts.plot:
            _check_plot(opts.plot)
        explicit: dict[str, dict[str, Any]] = {}
        for item in opts.args:
            name, sep, raw = item.partition("=")
            if not sep or not name:
                raise UsageError(f"--args expects TOOL=JSON, got {item!r}")
            try:
                value = json.loads(raw)
            except ValueError:
                raise UsageError(f"--args {name}=: not valid JSON") from None
            if not isinstance(value, dict):
                raise UsageError(f"--args {name}=: expected a JSON object")
            explicit[name] = value
        client, server, transport = _client_for(opts, command)
        with client:
            tools = {t.name: t for t in client.list_tools()}
            allow = opts.allow_side_effects or opts.all
            if opts.tool:
                unknown = [t for t in opts.tool if t not in tools]
                if unknown:
                    raise UsageError(f"no such tool: {', '.join(unknown)} (tools: {', '.join(sorted(tools)) or 'none'})")
                chosen = list(dict.fromkeys(opts.tool))
                risky = [n for n in chosen if not _read_only(tools[n])]
                if risky and not allow:
                    raise UsageError(
                        f"{', '.join(risky)} {'is' if len(risky) == 1 else 'are'} not annotated read-only: "
                        f"benchmarking calls {'it' if len(risky) == 1 else 'them'} up to {opts.calls} times, "
                        "side effects included; add --allow-side-effects to do so"
                    )
            elif opts.all:
                chosen = list(tools)
            else:
                chosen = [n for n, t in tools.items() if _read_only(t)]
                if not chosen:
                    names = ", ".join(sorted(tools)[:8]) or "none"
                    raise UsageError(
                        f"no tool of this server is annotated read-only (its tools: {names}); choose the tools "
                        "to call with --tool NAME (and --args NAME='{...}') and allow their side effects with "
                        "--allow-side-effects, or pass --all to call every tool"
                    )
            show = (sys.stderr.isatty() if opts.progress is None else opts.progress) and not opts.quiet
            results = []
            for i, name in enumerate(chosen, 1):
                args = explicit.get(name)
                if args is None:
                    args = sample_arguments(tools[name].input_schema)
                live = _LiveLine(sys.stderr, i, len(chosen)) if show else None
                try:
                    results.append(
                        run_bench(client, name, args, threads=opts.threads, calls=opts.calls, duration=opts.duration,
                                  warmup=opts.warmup, timeout=opts.timeout, warmup_duration=opts.warmup_duration,
                                  progress=live)
                    )
                finally:
                    if live is not None:
                        live.clear()
    except UsageError as exc:
        print(f"mcpsync bench: {exc}", file=sys.stderr)
        return EXIT_USAGE
    except MCPError as exc:
        print(f"mcpsync bench: {type(exc).__name__}: {exc}", file=sys.stderr)
        return EXIT_FAILURE
    if not opts.quiet:
        print(f"server: {server} ({transport}), {opts.threads} thread(s)")
        print(format_table(results))
        warm = [r for r in results if r.warmup_calls]
        if warm:
            spent = sum(r.warmup_seconds for r in warm)
            print(f"warm-up (not measured, not part of --duration): {sum(r.warmup_calls for r in warm)} calls "
                  f"in {human_duration(spent)}")
        for r in results:
            if r.first_error:
                print(f"  {r.tool}: {r.errors} error(s); first: {r.first_error}", file=sys.stderr)
    if opts.json:
        report = report_json(results, server=server, transport=transport, group=opts.group, duration=opts.duration, warmup=opts.warmup, include_data=not opts.no_data)
        with open(opts.json, "w", encoding="utf-8") as fh:
            json.dump(report, fh, indent=4)
            fh.write("\n")
        if not opts.quiet:
            print(f"wrote {opts.json} (pytest-benchmark JSON; see `pytest-benchmark compare {opts.json}`)")
    if opts.plot:
        try:
            plot_results(results, opts.plot, title=f"mcpsync bench: {server} ({transport}), {opts.threads} thread(s)")
        except ValueError as exc:
            print(f"mcpsync bench: no plot: {exc}", file=sys.stderr)
        else:
            if not opts.quiet:
                print(f"wrote {opts.plot}")
    return EXIT_FAILURE if any(not r.durations for r in results) else EXIT_OK


# ----------------------------------------------------------------------------- servers


def servers_main(argv: Sequence[str] | None = None) -> int:
    """``mcpsync servers CONFIG [--no-check] [--json] [--timeout S]``: list and check."""
    from ._config import ConfigError, load_config

    p = argparse.ArgumentParser(prog="mcpsync servers", description="List the servers an mcpServers file defines, and check each.")
    p.add_argument("config", help="the configuration file (claude_desktop_config.json, .cursor/mcp.json, ...)")
    p.add_argument("--no-check", action="store_true", help="only list; do not start or contact the servers")
    p.add_argument("--timeout", type=float, default=15.0, help="seconds each server gets to answer (default 15)")
    p.add_argument("--json", action="store_true", help="print JSON")
    opts = p.parse_args(list(sys.argv[1:] if argv is None else argv))
    if opts.timeout <= 0:
        print("mcpsync servers: --timeout must be positive", file=sys.stderr)
        return EXIT_USAGE
    try:
        config = load_config(opts.config)
    except ConfigError as exc:
        print(f"mcpsync servers: {exc}", file=sys.stderr)
        return EXIT_USAGE
    rows: list[dict[str, Any]] = []
    for name in config.names:
        if name in config.errors:
            rows.append({"name": name, "transport": None, "target": None, "state": "config-error", "error": config.errors[name].detail})
            continue
        s = config[name]
        rows.append({"name": name, "transport": s.transport, "target": s.describe(), "state": "disabled" if s.disabled else "unchecked"})
    status_ok = True
    if not opts.no_check:
        from dataclasses import replace

        from ._multi import MultiClient
        from ._policies import RetryPolicy, Timeouts

        timeouts = replace(Timeouts.DEFAULT, connect=min(Timeouts.DEFAULT.connect, opts.timeout), request=opts.timeout)
        with MultiClient.from_config(opts.config, list_timeout=opts.timeout, timeouts=timeouts, retry=RetryPolicy.NONE) as multi:
            statuses = multi.status(check=True, timeout=opts.timeout)
            by_server = multi.tools_by_server() if any(st.ok for st in statuses.values()) else {}
        for row in rows:
            st = statuses.get(row["name"])
            if st is None or row["state"] in ("config-error", "disabled"):
                continue
            row["state"] = st.state
            if st.ok:
                row["tools"] = [t.name for t in by_server.get(row["name"], [])]
            else:
                row["error"] = f"{st.error_type}: {st.error}" if st.error_type else st.error
        status_ok = all(r["state"] in ("ok", "disabled") for r in rows)
    else:
        status_ok = all(r["state"] != "config-error" for r in rows)
    if opts.json:
        print(json.dumps({"config": opts.config, "servers": rows}, indent=2, ensure_ascii=False))
    else:
        if not rows:
            print(f"{opts.config}: no servers defined")
        width = max((len(r["name"]) for r in rows), default=4)
        for r in rows:
            state = r["state"]
            detail = r.get("target") or ""
            if "tools" in r:
                state = f"ok, {len(r['tools'])} tools"
            print(f"{r['name']:<{width}}  {r['transport'] or '-':<9}  {state:<14}  {detail}")
            if r.get("error"):
                print(f"{'':<{width}}  error: {r['error']}")
    return EXIT_OK if status_ok else EXIT_FAILURE


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
