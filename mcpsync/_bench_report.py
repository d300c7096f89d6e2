"""The reporting half of ``mcpsync bench``: latencies in readable units, the table, the
pytest-benchmark JSON layout, the latency plots and the live progress line.

Example:
    >>> human_duration(0.00042), human_rate(1234.5)
    ('420 µs', '1234')
"""

from __future__ import annotations

import math
import os
import platform
import statistics
import subprocess
from datetime import datetime, timezone
from typing import Any, Sequence

from ._bench_run import BenchProgress, BenchResult, percentile, stats_of
from ._errors import UsageError

__all__ = ["human_duration", "human_rate", "format_table", "report_json", "plot_results", "PLOT_FORMATS"]


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
