"""Client instructions per ``tools/call`` under valgrind's callgrind: a measure that does
not move with the machine.

Each contestant (benchmarks/contestants.py: raw loops, mcpsync, the official SDK, on
stdio and Streamable HTTP) runs in one client process under callgrind, its server outside
it. Instrumentation is off from the start (``--instr-atstart=no``); the process sets up,
makes ``--warmup`` calls, switches instrumentation on with callgrind's client request,
makes ``--calls`` calls, and switches it off again. Everything callgrind collects (every
thread of the client) is those calls: start-up, imports, warm-up and shutdown are not
in the count. Deterministic for the same build, inputs and environment, up to a few
tenths of a percent (the garbage collector's timing, the odd wake-up of a timed wait);
``--repeat N`` takes the median of N runs.

Usage::

    python benchmarks/callgrind.py --markdown --repeat 3        # the README's table
    python benchmarks/callgrind.py stdio-legacy raw-stdio         # some cases
    python benchmarks/callgrind.py --check --jobs 2               # the budgeted rows; exit 1 > 5 % over one

Needs valgrind (``apt-get install valgrind``) on x86-64 Linux. valgrind runs the real
interpreter (``sys.executable`` resolved), never a pyenv shim.
"""

from __future__ import annotations

import argparse
import ctypes
import gc
import mmap
import os
import platform
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Awaitable, Callable

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from benchmarks.contestants import CONTESTANTS  # noqa: E402

#: instructions per call (per listing for ``list-*``) a case must stay under with
#: ``--check`` (within :data:`TOLERANCE`): every row a user meets, so that no row gets
#: worse unseen (issue 35). Each is the row's figure at the commit that last lowered it;
#: lower it when you beat it. Raw loops and the SDK have no budget.
BUDGETS: dict[str, int] = {
    "stdio-legacy": 36_800,
    "stdio-modern": 40_700,
    "stdio-idle": 43_200,
    "stdio-schema": 53_700,
    "http-legacy": 47_300,  # the JSON lane (mcpsync/_speedups/_pyhttp.py, compiled)
    "http-modern": 52_100,
    "http-auth": 49_400,  # a bearer hook: the hook's call and one comparison of its headers over http-legacy
    "list-100": 1_662_000,
    "list-1000": 16_590_000,
    "threads-16": 59_000,  # sixteen threads under valgrind's scheduler, run alone (ALONE): 53.7-56.5 K measured
}

#: cases measured with no other run at once: sixteen threads' count depends on how soon the
#: server answers (how many callers find the right to read taken and wait), so a second
#: valgrind on the other CPU raises it (56.5 K a call alone on a quiet machine, 64-74 K beside
#: other work)
ALONE = frozenset({"threads-16"})

#: how far over its budget a case may go before ``--check`` fails it (callgrind's counts
#: repeat to a few tenths of a percent; the many-threads row's budget is its worst run)
TOLERANCE = 0.05

CALLS = 500
WARMUP = 50

# ----------------------------------------------------------------------------- client requests
# A callgrind client request is a magic no-op instruction sequence that valgrind's JIT
# recognises (valgrind.h, amd64): rotate rdi by 3, 13, 61 and 51 bits (128 in all: no
# change), then ``xchg rbx, rbx``; rax points at [request, arg1..arg5], the answer comes
# back in rdx (the default, 0 here, when not under valgrind). Built once as machine code
# in an executable page, called through ctypes: no compiler, no valgrind headers.
_REQUEST_CODE = bytes.fromhex(
    "4889f8"  # mov rax, rdi        (the argument block)
    "31d2"  # xor edx, edx          (the default answer)
    "48c1c703" "48c1c70d" "48c1c73d" "48c1c733"  # rol rdi, 3 / 13 / 61 / 51
    "4887db"  # xchg rbx, rbx       (the request)
    "4889d0"  # mov rax, rdx        (return the answer)
    "c3"  # ret
)
_TOOL_BASE = (ord("C") << 24) | (ord("T") << 16)  # VG_USERREQ_TOOL_BASE('C', 'T')
START_INSTRUMENTATION = _TOOL_BASE + 4
STOP_INSTRUMENTATION = _TOOL_BASE + 5
RUNNING_ON_VALGRIND = 0x1001
_request_fn: Callable[[ctypes.Array], int] | None = None
_page: mmap.mmap | None = None


def client_request(request: int, *args: int) -> int:
    """Send one valgrind client request; 0 when not running under valgrind."""
    global _request_fn, _page
    if platform.machine() not in ("x86_64", "AMD64"):
        raise RuntimeError(f"callgrind client requests are written for x86-64, not {platform.machine()}")
    if _request_fn is None:
        _page = mmap.mmap(-1, mmap.PAGESIZE, prot=mmap.PROT_READ | mmap.PROT_WRITE | mmap.PROT_EXEC)
        _page.write(_REQUEST_CODE)
        address = ctypes.addressof(ctypes.c_char.from_buffer(_page))
        _request_fn = ctypes.CFUNCTYPE(ctypes.c_size_t, ctypes.c_void_p)(address)
    block = (ctypes.c_size_t * 6)(request, *args, *[0] * (5 - len(args)))
    return int(_request_fn(block))


class CallgrindMeasure:
    """Warm up, then count ``calls`` calls with instrumentation on (the child's side).

    The garbage collector's count of new objects is brought to zero before the counted
    calls (``gc.collect()``): a call that frees what it makes then triggers no collection,
    whereas one that the warm-up left just short of the collector's threshold would land
    a whole collection of the process's objects (1.8 M instructions, 3.6 K a call of
    500) in the count by the chance of where the threshold fell. Calls that leave
    garbage still trigger collections, and are counted with them.
    """

    def __init__(self, calls: int, warmup: int) -> None:
        self.calls, self.warmup, self.done = calls, warmup, False

    def run(self, call: Callable[[], object]) -> None:
        for _ in range(self.warmup):
            call()
        gc.collect()  # (see the class)
        client_request(START_INSTRUMENTATION)
        for _ in range(self.calls):
            call()
        client_request(STOP_INSTRUMENTATION)
        self.done = True

    async def arun(self, acall: Callable[[], Awaitable[object]]) -> None:
        for _ in range(self.warmup):
            await acall()
        gc.collect()  # (see the class)
        client_request(START_INSTRUMENTATION)
        for _ in range(self.calls):
            await acall()
        client_request(STOP_INSTRUMENTATION)
        self.done = True


def child(case: str, calls: int, warmup: int) -> int:
    """The process valgrind runs: one contestant, its calls counted."""
    if not client_request(RUNNING_ON_VALGRIND):
        print("callgrind.py --child runs under valgrind only", file=sys.stderr)
        return 2
    c = CONTESTANTS[case]
    m = CallgrindMeasure(c.rounds(calls), max(1, warmup // c.scale))
    c.body(m)
    if not m.done:
        print(f"{case}: the contestant never ran its calls", file=sys.stderr)
        return 1
    return 0


# ----------------------------------------------------------------------------- the parent


def python_binary() -> str:
    """The interpreter itself: valgrind cannot follow pyenv's shell shim."""
    exe = os.path.realpath(sys.executable)
    if "/shims/" in exe:
        raise RuntimeError(f"{exe} is a shim; run this script with the real interpreter")
    return exe


def under_callgrind(options: list[str], script: Path, child: list[str], name: str) -> str:
    """Run ``script --child ...`` (``child``) in valgrind's callgrind with ``options`` (the
    interpreter itself, hash seed fixed, this checkout first on the path): its stderr, where
    callgrind writes its totals."""
    with tempfile.TemporaryDirectory() as tmp:
        cmd = ["valgrind", "--tool=callgrind", *options, f"--callgrind-out-file={Path(tmp) / 'callgrind.out'}",
               python_binary(), str(script), "--child", *child]
        env = {**os.environ, "PYTHONHASHSEED": "0",
               "PYTHONPATH": os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")]))}
        done = subprocess.run(cmd, capture_output=True, text=True, timeout=1800, cwd=ROOT, env=env)
    if done.returncode != 0:
        raise RuntimeError(f"{name}: the client under callgrind failed ({done.returncode}):\n{done.stderr[-3000:]}")
    return done.stderr


def instructions_per_call(case: str, calls: int, warmup: int) -> float:
    """One callgrind run of ``case``: collected instructions per call (per listing) made.

    A costly contestant repeats its call ``calls // scale`` times; a round of many threads
    makes ``per_round`` calls (benchmarks/contestants.py)."""
    stderr = under_callgrind(["--instr-atstart=no", "--trace-children=no"], Path(__file__).resolve(),
                             [case, "--calls", str(calls), "--warmup", str(warmup)], case)
    match = re.search(r"Collected\s*:\s*(\d+)", stderr)
    if match is None:
        raise RuntimeError(f"{case}: no instruction count in:\n{stderr[-3000:]}")
    c = CONTESTANTS[case]
    return int(match.group(1)) / (c.rounds(calls) * c.per_round)


def measure(cases: list[str], calls: int, warmup: int, repeat: int, jobs: int) -> dict[str, float]:
    """The median instructions per call of each case over ``repeat`` runs; the cases in
    :data:`ALONE` after the others, one run at a time."""
    runs = [(case, i) for i in range(repeat) for case in cases if case not in ALONE]
    with ThreadPoolExecutor(max_workers=max(1, jobs)) as pool:
        counts = list(pool.map(lambda run: instructions_per_call(run[0], calls, warmup), runs))
    alone = [(case, i) for i in range(repeat) for case in cases if case in ALONE]
    runs += alone
    counts += [instructions_per_call(case, calls, warmup) for case, _ in alone]
    per_case: dict[str, list[float]] = {case: [] for case in cases}
    for (case, _), count in zip(runs, counts):
        per_case[case].append(count)
    return {case: statistics.median(values) for case, values in per_case.items()}


def over_budget(results: dict[str, float]) -> list[str]:
    """The cases more than :data:`TOLERANCE` over their budget."""
    return [case for case, count in results.items() if case in BUDGETS and count > BUDGETS[case] * (1 + TOLERANCE)]


def ratio(case: str, results: dict[str, float]) -> str:
    limit = CONTESTANTS[case].limit
    if limit is None or limit not in results:
        return "limit" if CONTESTANTS[case].who == "raw" else ""
    return f"{results[case] / results[limit]:.1f}× {limit}"


def table(results: dict[str, float], markdown: bool) -> str:
    rows = []
    for case, count in results.items():
        c = CONTESTANTS[case]
        budget = BUDGETS.get(case)
        mark = "" if budget is None else (f"≤ {budget:,}" + (" ✗" if case in over_budget({case: count}) else " ✓"))
        rows.append((case, c.transport, c.era, f"{count:,.0f}", ratio(case, results), mark, c.what))
    if markdown:
        out = ["| case | transport | era | instructions per call | against the raw limit | budget | what |",
               "|---|---|---|--:|---|---|---|"]
        out += ["| " + " | ".join(r) + " |" for r in rows]
        return "\n".join(out)
    return "\n".join(f"{r[0]:18s} {r[1]:5s} {r[2]:6s} {r[3]:>12s}  {r[4]:24s} {r[5]:14s}" for r in rows)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("cases", nargs="*", help=f"any of {', '.join(CONTESTANTS)} (default: all; with --check, the budgeted ones)")
    ap.add_argument("--calls", type=int, default=CALLS, help=f"calls counted per run (default {CALLS})")
    ap.add_argument("--warmup", type=int, default=WARMUP, help=f"uncounted calls first (default {WARMUP})")
    ap.add_argument("--repeat", type=int, default=1, metavar="N", help="runs per case; the median is reported")
    ap.add_argument("--jobs", type=int, default=1, help="callgrind runs at once (each takes a core)")
    ap.add_argument("--markdown", action="store_true", help="print the table in Markdown")
    ap.add_argument("--check", action="store_true",
                    help=f"exit 1 when a case is more than {TOLERANCE * 100:.0f} %% over its budget (BUDGETS)")
    ap.add_argument("--child", metavar="CASE", help=argparse.SUPPRESS)
    opts = ap.parse_args(argv)
    if opts.child:
        return child(opts.child, opts.calls, opts.warmup)
    unknown = [c for c in opts.cases if c not in CONTESTANTS]
    if unknown:
        ap.error(f"unknown case(s) {', '.join(unknown)}: choose from {', '.join(CONTESTANTS)}")
    if opts.calls < 1 or opts.repeat < 1:
        ap.error("--calls and --repeat must be at least 1")
    if shutil.which("valgrind") is None:
        print("callgrind.py needs valgrind: apt-get install valgrind", file=sys.stderr)
        return 2
    cases = opts.cases or list(BUDGETS if opts.check else CONTESTANTS)
    results = measure(cases, opts.calls, opts.warmup, opts.repeat, opts.jobs)
    print(f"client instructions per tools/call: callgrind, {opts.calls} calls after {opts.warmup} "
          f"of warm-up, median of {opts.repeat} run(s); Python {platform.python_version()}")
    print(table(results, opts.markdown))
    over = over_budget(results)
    if opts.check and over:
        print(f"over budget (by more than {TOLERANCE:.0%}): "
              + ", ".join(f"{c} {results[c]:,.0f} > {BUDGETS[c]:,}" for c in over), file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
