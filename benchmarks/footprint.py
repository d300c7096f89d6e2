"""What a call touches from memory when the caches are cold: the measure behind "a call after
an idle gap", which wall-clock rounds give only through this VM's noise.

A call after 30 ms idle costs 6-10 times its back-to-back time on every layer, the raw loop's
too (``rounds.py idle``): what ran meanwhile emptied the caches, so each cache line the call
needs comes from memory again. This counts those lines: under callgrind's cache simulation
(32 KiB L1s, a 4 MiB last level, 64-byte lines), each counted call comes right after a sweep of
16 MiB that evicts everything, and the last level's misses in the call (``ILmr`` code, ``DLmr``
+ ``DLmw`` data) are its cold footprint. Deterministic, like the instruction counts.

Usage::

    python benchmarks/footprint.py              # raw and mcpsync, both eras, 20 calls each
    python benchmarks/footprint.py --calls 50

Prints, per contestant, the lines per call (code, data) and the ratio to the raw loop of its
era. Each count includes the same few hundred lines of the client request that toggles the
count (ctypes), on both sides. Nothing here is asserted.
"""

from __future__ import annotations

import argparse
import functools
import re
import sys
from pathlib import Path
from typing import Callable

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from benchmarks.callgrind import _TOOL_BASE, RUNNING_ON_VALGRIND, client_request, under_callgrind  # noqa: E402

TOGGLE_COLLECT = _TOOL_BASE + 2  # VG_USERREQ__TOGGLE_COLLECT (callgrind.h)
SWEEP = 16 << 20  # bytes read before each counted call: four times the simulated last level
CACHES = ["--I1=32768,8,64", "--D1=32768,8,64", "--LL=4194304,16,64"]
CONTESTANTS = ("raw-legacy", "mcpsync-legacy", "raw-modern", "mcpsync-modern")


def child(contestant: str, calls: int) -> int:
    """The process valgrind runs: warm up, then ``calls`` calls each after a sweep."""
    if not client_request(RUNNING_ON_VALGRIND):
        print("footprint.py --child runs under valgrind only", file=sys.stderr)
        return 2
    from benchmarks.contestants import ECHO, stdio_server
    from benchmarks.peers import RawPipe

    who, era = contestant.split("-")
    call: Callable[[], object]
    close: Callable[[], object]
    if who == "raw":
        raw = RawPipe(stdio_server(), era=era)
        call, close = raw.call, raw.close
    else:
        from mcpsync import Client

        argv = stdio_server()
        client = Client.stdio(argv[0], argv[1:], mode="legacy" if era == "legacy" else "auto")
        client.connect()
        client.list_tools()
        call, close = functools.partial(client.call_tool, "echo", ECHO), client.close
    for _ in range(30):
        call()
    junk = bytearray(SWEEP)
    import gc

    gc.collect()
    for _ in range(calls):
        bytes(junk)  # evicts the simulated caches: data, and code through the shared last level
        client_request(TOGGLE_COLLECT)
        call()
        client_request(TOGGLE_COLLECT)
    close()
    return 0


def cold_lines(contestant: str, calls: int) -> tuple[float, float]:
    """(code lines, data lines) from memory per call."""
    stderr = under_callgrind(["--cache-sim=yes", "--collect-atstart=no", *CACHES], Path(__file__).resolve(),
                             [contestant, "--calls", str(calls)], contestant)
    code = re.search(r"LLi misses:\s*([\d,]+)", stderr)
    data = re.search(r"LLd misses:\s*([\d,]+)", stderr)
    if code is None or data is None:
        raise RuntimeError(f"{contestant}: no cache counts in:\n{stderr[-3000:]}")
    return int(code.group(1).replace(",", "")) / calls, int(data.group(1).replace(",", "")) / calls


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--calls", type=int, default=20, help="calls counted, each after a sweep (default 20)")
    ap.add_argument("--child", help=argparse.SUPPRESS)
    opts = ap.parse_args(argv)
    if opts.child:
        return child(opts.child, opts.calls)
    results = {name: cold_lines(name, opts.calls) for name in CONTESTANTS}
    print(f"cache lines from memory per stdio tools/call after a {SWEEP >> 20} MiB sweep "
          f"(callgrind's cache simulation, {opts.calls} calls):")
    for name, (code, data) in results.items():
        raw = results["raw-" + name.split("-")[1]]
        ratio = (code + data) / (raw[0] + raw[1])
        print(f"  {name:15s} code {code:7.0f}  data {data:7.0f}  all {code + data:7.0f}  {ratio:.2f}x raw")
    return 0


if __name__ == "__main__":
    sys.exit(main())
