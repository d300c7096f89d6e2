"""A small legacy-era MCP server over stdio whose process misbehaves on demand.

Usage: stdio_faults.py [--ignore-term] [--linger]

  --ignore-term   ignore SIGTERM (only SIGKILL ends it)
  --linger        keep running after stdin hits EOF (sleep), instead of exiting

Tools:
  pid             answers the process id (structuredContent {"pid": N})
  chatty          writes ``bytes`` bytes to stderr in lines of ``line`` bytes (0: one
                  line without a newline until the end), then answers "done"
  vanish          closes its stdout and keeps running (never answers)
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import sys
import time


def chatty(total: int, line: int) -> None:
    err = sys.stderr.buffer
    if line > 0:
        one = b"x" * (line - 1) + b"\n"
        block = one * max(1, (1 << 20) // line)
    else:
        block = b"y" * (1 << 20)
    written = 0
    while written < total:
        piece = block[: total - written]
        err.write(piece)
        written += len(piece)
    if line <= 0:
        err.write(b"\n")
    err.flush()


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--ignore-term", action="store_true")
    ap.add_argument("--linger", action="store_true")
    opts = ap.parse_args()
    if opts.ignore_term:
        signal.signal(signal.SIGTERM, signal.SIG_IGN)
    out = sys.stdout.buffer

    def write(obj: object) -> None:
        out.write(json.dumps(obj, separators=(",", ":")).encode() + b"\n")
        out.flush()

    def text(rid: object, s: str, **extra: object) -> None:
        write({"jsonrpc": "2.0", "id": rid, "result": {"content": [{"type": "text", "text": s}], "isError": False, **extra}})

    tools = [{"name": n, "inputSchema": {"type": "object"}} for n in ("pid", "chatty", "vanish")]
    for raw in sys.stdin.buffer:
        try:
            msg = json.loads(raw)
        except ValueError:
            continue
        rid, method = msg.get("id"), msg.get("method")
        if rid is None or method is None:
            continue
        params = msg.get("params") or {}
        if method == "initialize":
            write({"jsonrpc": "2.0", "id": rid, "result": {"protocolVersion": "2025-11-25", "capabilities": {"tools": {}}, "serverInfo": {"name": "faults", "version": "1"}}})
        elif method == "ping":
            write({"jsonrpc": "2.0", "id": rid, "result": {}})
        elif method == "tools/list":
            write({"jsonrpc": "2.0", "id": rid, "result": {"tools": tools}})
        elif method == "tools/call":
            name, args = params.get("name"), params.get("arguments") or {}
            if name == "pid":
                text(rid, str(os.getpid()), structuredContent={"pid": os.getpid()})
            elif name == "chatty":
                chatty(int(args.get("bytes", 1 << 20)), int(args.get("line", 100)))
                text(rid, "done")
            elif name == "vanish":
                sys.stderr.write("stdio_faults: closing stdout\n")
                sys.stderr.flush()
                os.close(1)
                time.sleep(3600)
            else:
                write({"jsonrpc": "2.0", "id": rid, "error": {"code": -32602, "message": f"Unknown tool: {name}"}})
        else:
            write({"jsonrpc": "2.0", "id": rid, "error": {"code": -32601, "message": "Method not found"}})
    if opts.linger:
        time.sleep(3600)


if __name__ == "__main__":
    main()
