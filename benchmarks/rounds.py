"""Pinned, interleaved wall-clock rounds for the two measures the callgrind table cannot
give: a call after an idle gap, and many threads on one client.

``idle``: per era, rounds in which the raw loop and mcpsync (alternating which goes first)
each make 20 calls after a 30 ms sleep (the sleep untimed), then 200 back-to-back calls;
each round's ratio is mcpsync's median over the raw loop's median of the same round, and
the median of those ratios is reported (the machine's moods fall on both alike).
``http``: per era, rounds in which a plain keep-alive socket (``contestants.RawSocket``)
and mcpsync over Streamable HTTP (alternating which goes first) each make 200 back-to-back
calls to the same server; the median of the rounds' ratios of the medians.
``N`` (a number): rounds alternating the minimal thread-safe floor
(``contestants.SafePipe``) and mcpsync, ``N`` threads x ``--per`` calls each on one
client; calls per second, and the median of the rounds' ratios.

Usage::

    taskset -c 0 python benchmarks/rounds.py idle --rounds 10
    taskset -c 0 python benchmarks/rounds.py http --rounds 10
    taskset -c 0 python benchmarks/rounds.py 16 --rounds 10      # also unpinned: both CPUs

Prints one line per measure. Nothing here is asserted: the suite never asserts wall-clock.
"""

from __future__ import annotations

import argparse
import functools
import statistics
import sys
import threading
import time
from pathlib import Path
from typing import Callable

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from benchmarks.peers import RawPipe  # noqa: E402
from benchmarks.contestants import ECHO, IDLE, RawSocket, SafePipe, http_server, stdio_server  # noqa: E402

clock = time.perf_counter


def _median_ratio(ours: list[float], theirs: list[float]) -> float:
    return statistics.median(ours) / statistics.median(theirs)


def idle_rounds(rounds: int) -> None:
    from mcpsync import Client

    for era, mode in (("legacy", "legacy"), ("modern", "auto")):
        raw = RawPipe(stdio_server(), era=era)
        argv = stdio_server()
        try:
            with Client.stdio(argv[0], argv[1:], mode=mode) as c:
                c.list_tools()
                ours = functools.partial(c.call_tool, "echo", ECHO)
                for f in (raw.call, ours):
                    for _ in range(30):
                        f()
                idle, back = [], []
                for r in range(rounds):
                    after: dict[str, list[float]] = {"raw": [], "mcpsync": []}
                    b2b: dict[str, list[float]] = {"raw": [], "mcpsync": []}
                    order = [("raw", raw.call), ("mcpsync", ours)]
                    for name, f in order if r % 2 == 0 else order[::-1]:
                        for _ in range(20):
                            time.sleep(IDLE)
                            t0 = clock()
                            f()
                            after[name].append(clock() - t0)
                        for _ in range(200):
                            t0 = clock()
                            f()
                            b2b[name].append(clock() - t0)
                    idle.append(_median_ratio(after["mcpsync"], after["raw"]))
                    back.append(_median_ratio(b2b["mcpsync"], b2b["raw"]))
        finally:
            raw.close()
        print(f"{era}: p50 after {IDLE * 1000:g} ms idle / raw of the same round: median {statistics.median(idle):.2f} "
              f"(rounds {min(idle):.2f}-{max(idle):.2f}); back-to-back: median {statistics.median(back):.2f} "
              f"(rounds {min(back):.2f}-{max(back):.2f}); {rounds} rounds", flush=True)


def http_rounds(rounds: int) -> None:
    from mcpsync import Client

    with http_server() as url:
        raw = RawSocket(url)
        try:
            for era, mode in (("legacy", "legacy"), ("modern", "auto")):
                with Client.http(url, mode=mode) as c:
                    c.list_tools()
                    ours = functools.partial(c.call_tool, "echo", ECHO)
                    for f in (raw.call, ours):
                        for _ in range(100):
                            f()
                    ratios = []
                    for r in range(rounds):
                        times: dict[str, list[float]] = {"raw": [], "mcpsync": []}
                        order = [("raw", raw.call), ("mcpsync", ours)]
                        for name, f in order if r % 2 == 0 else order[::-1]:
                            for _ in range(200):
                                t0 = clock()
                                f()
                                times[name].append(clock() - t0)
                        ratios.append(_median_ratio(times["mcpsync"], times["raw"]))
                print(f"http {era}: p50 / a plain socket's of the same round: median {statistics.median(ratios):.2f} "
                      f"(rounds {min(ratios):.2f}-{max(ratios):.2f}); {rounds} rounds", flush=True)
        finally:
            raw.close()


def thread_rounds(threads: int, per: int, rounds: int) -> None:
    from mcpsync import Client

    floor = SafePipe(stdio_server())
    argv = stdio_server()
    try:
        with Client.stdio(argv[0], argv[1:], mode="legacy") as c:
            c.list_tools()
            ours = functools.partial(c.call_tool, "echo", ECHO)

            def rate(call: Callable[[], object]) -> float:
                start = threading.Barrier(threads + 1)

                def work() -> None:
                    start.wait(60)
                    for _ in range(per):
                        call()

                ts = [threading.Thread(target=work) for _ in range(threads)]
                for t in ts:
                    t.start()
                start.wait(60)
                t0 = clock()
                for t in ts:
                    t.join(120)
                return threads * per / (clock() - t0)

            rate(floor.call)
            rate(ours)
            theirs, mine = [], []
            for _ in range(rounds):
                theirs.append(rate(floor.call))
                mine.append(rate(ours))
    finally:
        floor.close()
    ratios = [m / t for m, t in zip(mine, theirs)]
    print(f"{threads} threads x {per} calls on one client: the floor {statistics.median(theirs):,.0f} calls/s, "
          f"mcpsync {statistics.median(mine):,.0f} calls/s; ratio median {statistics.median(ratios):.2f} "
          f"(rounds {min(ratios):.2f}-{max(ratios):.2f}); {rounds} rounds", flush=True)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("measure", help="idle, http, or a number of threads")
    ap.add_argument("--rounds", type=int, default=10)
    ap.add_argument("--per", type=int, default=100, help="calls per thread per round (threads)")
    opts = ap.parse_args(argv)
    if opts.measure == "idle":
        idle_rounds(opts.rounds)
    elif opts.measure == "http":
        http_rounds(opts.rounds)
    elif opts.measure.isdigit() and int(opts.measure) > 0:
        thread_rounds(int(opts.measure), opts.per, opts.rounds)
    else:
        ap.error("measure: idle, http, or a number of threads")
    return 0


if __name__ == "__main__":
    sys.exit(main())
