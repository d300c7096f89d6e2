"""Latency distributions per transport: mcpsync, the official SDK and the raw limits, drawn
to SVG (or PNG) with matplotlib.

The contestants are benchmarks/contestants.py's (the callgrind table's), each with its own
client and server, all alive at once and measured in interleaved rounds (``--batch``
calls each, in turn), so that what the machine does meanwhile falls on every contestant
alike. Every call is timed on its own; the plot (``mcpsync._bench.plot_results``, the one
that ``mcpsync bench --plot`` draws) shows the histogram on a log time axis and the
percentile curve. Pin the process for steadier numbers (``taskset -c 0``).

Usage::

    python benchmarks/plot.py --out docs/img          # latency-stdio.svg, latency-http.svg
    python benchmarks/plot.py --out /tmp/p --calls 500 --only raw-stdio,stdio-legacy

Needs matplotlib (``pip install 'mcpsync[bench]'``). ``python -m pytest benchmarks
--benchmark-enable --bench-plot DIR`` draws the pytest-benchmark groups the same way
(benchmarks/conftest.py).
"""

from __future__ import annotations

import argparse
import sys
import threading
import time
from pathlib import Path
from typing import Awaitable, Callable, Iterable, Mapping, Sequence

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from benchmarks.contestants import CONTESTANTS  # noqa: E402

#: the contestants each transport's plot shows
PLOTTED: dict[str, list[str]] = {
    "stdio": ["raw-stdio", "raw-stdio-modern", "stdio-legacy", "stdio-modern", "sdk-stdio", "sdk-stdio-modern"],
    "http": ["raw-http-socket", "raw-http-urllib3", "http-legacy", "http-modern", "sdk-http", "sdk-http-modern"],
}
#: the longest any contestant waits for its turn (a set-up or a round of another one)
TURN_TIMEOUT = 120.0


class Rounds:
    """Interleaved rounds: each contestant, once set up, makes ``batch`` timed calls when
    its turn comes, then hands the turn on; the order is the order of ``names``."""

    def __init__(self, names: Sequence[str], calls: int, warmup: int, batch: int) -> None:
        self.calls, self.warmup, self.batch = calls, warmup, batch
        self.active = list(names)
        self.pos = 0
        self.cond = threading.Condition()
        self.samples: dict[str, list[float]] = {n: [] for n in names}
        self.errors: dict[str, BaseException] = {}

    def measure(self, name: str) -> "_Turns":
        return _Turns(self, name)

    def wait_turn(self, name: str) -> None:
        with self.cond:
            if not self.cond.wait_for(lambda: self.active[self.pos] == name, timeout=TURN_TIMEOUT):
                raise TimeoutError(f"{name}: no turn within {TURN_TIMEOUT:g} s (waiting for {self.active[self.pos]})")

    def pass_turn(self, name: str) -> None:
        with self.cond:
            self.pos = (self.active.index(name) + 1) % len(self.active)
            self.cond.notify_all()

    def leave(self, name: str) -> None:
        with self.cond:
            if name in self.active:
                i = self.active.index(name)
                self.active.remove(name)
                if i < self.pos:
                    self.pos -= 1
                self.pos = self.pos % len(self.active) if self.active else 0
            self.cond.notify_all()

    def run(self, start: Callable[[str, "_Turns"], None]) -> None:
        """Each contestant on its own thread: ``start(name, measure)`` sets it up and runs it."""

        def one(name: str) -> None:
            try:
                start(name, self.measure(name))
            except BaseException as exc:  # noqa: BLE001  # reported, the others go on
                self.errors[name] = exc
            finally:
                self.leave(name)

        threads = [threading.Thread(target=one, args=(n,), name=f"bench-{n}", daemon=True) for n in list(self.active)]
        for t in threads:
            t.start()
        for t in threads:
            t.join(TURN_TIMEOUT * 4 + self.calls)
            if t.is_alive():
                raise TimeoutError(f"{t.name} did not finish")


class _Turns:
    """One contestant's side of :class:`Rounds` (a ``contestants.Measure``)."""

    def __init__(self, rounds: Rounds, name: str) -> None:
        self.rounds, self.name = rounds, name

    def _plan(self) -> list[int]:
        r = self.rounds
        full, rest = divmod(r.calls, r.batch)
        return [r.batch] * full + ([rest] if rest else [])

    def run(self, call: Callable[[], object]) -> None:
        r, clock, out = self.rounds, time.perf_counter, self.rounds.samples[self.name]
        for _ in range(r.warmup):
            call()
        for size in self._plan():
            r.wait_turn(self.name)
            try:
                for _ in range(size):
                    t0 = clock()
                    call()
                    out.append(clock() - t0)
            finally:
                r.pass_turn(self.name)

    async def arun(self, acall: Callable[[], Awaitable[object]]) -> None:
        r, clock, out = self.rounds, time.perf_counter, self.rounds.samples[self.name]
        for _ in range(r.warmup):
            await acall()
        for size in self._plan():
            r.wait_turn(self.name)  # blocks this contestant's own event loop only
            try:
                for _ in range(size):
                    t0 = clock()
                    await acall()
                    out.append(clock() - t0)
            finally:
                r.pass_turn(self.name)


def latencies(names: Iterable[str], calls: int, warmup: int = 50, batch: int = 50) -> tuple[dict[str, list[float]], dict[str, BaseException]]:
    """Seconds per call of each contestant, measured in interleaved rounds, and the errors
    of those that failed."""
    rounds = Rounds(list(names), calls, warmup, batch)
    rounds.run(lambda name, m: CONTESTANTS[name].body(m))
    return rounds.samples, rounds.errors


def draw(samples: Mapping[str, Sequence[float]], path: str | Path, title: str) -> None:
    """Draw each series' distribution into ``path`` (.svg or .png) with mcpsync's plot."""
    from mcpsync._bench import BenchResult, plot_results

    results = [BenchResult(tool=name, arguments={}, threads=1, durations=list(s)) for name, s in samples.items() if s]
    Path(path).parent.mkdir(parents=True, exist_ok=True)
    plot_results(results, str(path), title=title)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", default=str(ROOT / "docs" / "img"), help="directory for latency-<transport>.<format>")
    ap.add_argument("--format", choices=("svg", "png"), default="svg")
    ap.add_argument("--calls", type=int, default=3000, help="timed calls per contestant (default 3000)")
    ap.add_argument("--warmup", type=int, default=100)
    ap.add_argument("--batch", type=int, default=50, help="calls per turn of the interleaved rounds")
    ap.add_argument("--only", help="comma-separated contestants (default: each transport's PLOTTED set)")
    ap.add_argument("transports", nargs="*", help="stdio, http (default: both)")
    opts = ap.parse_args(argv)
    from mcpsync._bench import percentile

    if any(t not in PLOTTED for t in opts.transports):
        ap.error(f"transports are {', '.join(PLOTTED)}")
    chosen = opts.only.split(",") if opts.only else None
    unknown = [n for n in chosen or () if n not in CONTESTANTS]
    if unknown:
        ap.error(f"unknown contestant(s) {', '.join(unknown)}: choose from {', '.join(CONTESTANTS)}")
    status = 0
    for transport in opts.transports or list(PLOTTED):
        names = [n for n in (chosen or PLOTTED[transport]) if CONTESTANTS[n].transport == transport]
        if not names:
            continue
        samples, errors = latencies(names, opts.calls, opts.warmup, opts.batch)
        for name, exc in errors.items():
            print(f"{name}: failed: {exc!r}", file=sys.stderr)
            status = 1
        for name, series in samples.items():
            if series:
                p50, p99 = (percentile(sorted(series), q) * 1e6 for q in (50, 99))
                print(f"{transport:5s} {name:18s} p50 {p50:9.1f} us  p99 {p99:9.1f} us  ({len(series)} calls)")
        path = Path(opts.out) / f"latency-{transport}.{opts.format}"
        draw(samples, path, f"tools/call latency over {transport}: {opts.calls} calls each, interleaved rounds of {opts.batch}")
        print(f"wrote {path}")
    return status


if __name__ == "__main__":
    sys.exit(main())
