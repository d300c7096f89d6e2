"""Client instructions per call under valgrind's callgrind: a measure that does not move
with the machine.

Each case runs a client process twice under callgrind (the server runs outside it), once
with ``--small`` and once with ``--large`` calls; the difference of the two totals divided
by the difference of the call counts is the cost of one call, start-up and import cancel
out. Deterministic for the same build, inputs and environment.

Usage::

    python benchmarks/callgrind.py                  # every case
    python benchmarks/callgrind.py stdio-legacy raw-stdio --small 500 --large 2500

Cases: ``raw-stdio`` (an orjson write/readline loop), ``stdio-legacy`` and ``stdio-modern``
(mcpsync's ``call_tool`` against benchmarks/servers/fast_server.py).
"""

from __future__ import annotations

import argparse
import os
import re
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
SERVER = [sys.executable, str(ROOT / "benchmarks" / "servers" / "fast_server.py")]

_CLIENT = r'''
import sys, orjson
n, case = int(sys.argv[1]), sys.argv[2]
server = sys.argv[3:]
if case == "raw-stdio":
    import subprocess
    p = subprocess.Popen(server, stdin=subprocess.PIPE, stdout=subprocess.PIPE)
    w, r = p.stdin, p.stdout
    w.write(orjson.dumps({"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {"protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "raw", "version": "1"}}}) + b"\n"); w.flush(); r.readline()
    for i in range(1, n + 1):
        w.write(orjson.dumps({"jsonrpc": "2.0", "id": i, "method": "tools/call", "params": {"name": "echo", "arguments": {"message": "hi"}}}) + b"\n")
        w.flush()
        orjson.loads(r.readline())
    p.stdin.close(); p.wait()
else:
    from mcpsync import Client
    mode = "legacy" if case == "stdio-legacy" else "modern"
    with Client.stdio(server[0], server[1:], mode=mode) as c:
        c.list_tools()
        for i in range(n):
            c.call_tool("echo", {"message": "hi"})
'''

CASES = ("raw-stdio", "stdio-legacy", "stdio-modern")


def instructions(case: str, n: int) -> int:
    """Total instructions of one client process making ``n`` calls."""
    with tempfile.TemporaryDirectory() as tmp:
        out = Path(tmp) / "callgrind.out"
        script = Path(tmp) / "client.py"
        script.write_text(_CLIENT)
        cmd = [
            "valgrind", "--tool=callgrind", f"--callgrind-out-file={out}", "--trace-children=no",
            sys.executable, str(script), str(n), case, *SERVER,
        ]
        done = subprocess.run(cmd, capture_output=True, text=True, timeout=1800, cwd=ROOT,
                              env={**os.environ, "PYTHONHASHSEED": "0", "PYTHONPATH": str(ROOT)})
        if done.returncode != 0:
            raise RuntimeError(f"{case}: callgrind failed:\n{done.stderr[-2000:]}")
        match = re.search(r"Collected\s*:\s*(\d+)", done.stderr)
        if match is None:
            raise RuntimeError(f"{case}: no instruction count in:\n{done.stderr[-2000:]}")
        return int(match.group(1))


def per_call(case: str, small: int, large: int) -> float:
    return (instructions(case, large) - instructions(case, small)) / (large - small)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("cases", nargs="*", help=f"any of {', '.join(CASES)} (default: all)")
    ap.add_argument("--small", type=int, default=500)
    ap.add_argument("--large", type=int, default=2500)
    opts = ap.parse_args(argv)
    unknown = [c for c in opts.cases if c not in CASES]
    if unknown:
        ap.error(f"unknown case(s) {', '.join(unknown)}: choose from {', '.join(CASES)}")
    opts.cases = opts.cases or list(CASES)
    print(f"client instructions per call (slope {opts.small} -> {opts.large} calls)")
    for case in opts.cases:
        print(f"{case:14s} {per_call(case, opts.small, opts.large):12,.0f}", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
