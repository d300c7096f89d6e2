"""A stdio MCP server (legacy era) whose tool list keeps changing, for the tool-cache race tests.

Usage: churn_server.py [--pad N]

``tools/list`` answers ``N`` padding tools (default 2000: a listing that takes a while to
write and read) and one tool named ``v<version>``. Each change bumps the version and then
sends ``notifications/tools/list_changed``.

Tools:
  churn(count, every_ms)   starts ``count`` changes, ``every_ms`` apart, on a thread of
                           its own; answers at once. While changes are left, each
                           ``tools/list`` also makes one (it counts among the ``count``)
                           between building its answer and sending it, 20 ms after the
                           change's notification: the answer arrives outdated, after the
                           change was announced. The last change always comes so.
  version()                the version now, and how many changes are still to come, as
                           structured content ``{"version": V, "left": L}`` (answered after
                           the notification of every change before it, on the same pipe)
  echo(message)            the message
"""

from __future__ import annotations

import argparse
import json
import sys
import threading
import time

LEGACY = "2025-11-25"


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--pad", type=int, default=2000)
    opts = ap.parse_args()
    out = sys.stdout.buffer
    lock = threading.Lock()
    state = {"version": 0, "left": 0}
    schema = {"type": "object", "properties": {"n": {"type": "integer"}}}
    pad = [{"name": f"pad{i}", "description": "padding", "inputSchema": schema} for i in range(opts.pad)]

    def write(obj: object) -> None:
        data = json.dumps(obj, separators=(",", ":")).encode() + b"\n"
        with lock:
            out.write(data)
            out.flush()

    def text(rid: object, value: str, structured: object = None) -> None:
        result: dict[str, object] = {"content": [{"type": "text", "text": value}]}
        if structured is not None:
            result["structuredContent"] = structured
        write({"jsonrpc": "2.0", "id": rid, "result": result})

    def change() -> None:  # under lock: the bump and its notification in one piece, so that an
        if state["left"] > 0:  # answer written after it comes after the notification too
            state["version"] += 1
            state["left"] -= 1
            out.write(b'{"jsonrpc":"2.0","method":"notifications/tools/list_changed"}\n')
            out.flush()

    def churn(every: float) -> None:
        while True:
            time.sleep(every)
            with lock:
                if state["left"] <= 1:  # the last change comes right behind a listing
                    return
                change()

    for line in sys.stdin.buffer:
        if not line.strip():
            continue
        msg = json.loads(line)
        rid, method, params = msg.get("id"), msg.get("method"), msg.get("params") or {}
        if rid is None:
            continue
        if method == "initialize":
            write({"jsonrpc": "2.0", "id": rid, "result": {
                "protocolVersion": LEGACY, "capabilities": {"tools": {"listChanged": True}},
                "serverInfo": {"name": "churn", "version": "1"}}})
        elif method == "ping":
            write({"jsonrpc": "2.0", "id": rid, "result": {}})
        elif method == "tools/list":
            with lock:
                version = state["version"]
            tools = [*pad, {"name": f"v{version}", "inputSchema": {"type": "object"}},
                     {"name": "churn", "inputSchema": {"type": "object"}},
                     {"name": "version", "inputSchema": {"type": "object"}},
                     {"name": "echo", "inputSchema": {"type": "object"}}]
            data = json.dumps({"jsonrpc": "2.0", "id": rid, "result": {"tools": tools}}, separators=(",", ":")).encode()
            with lock:
                changed = state["left"] > 0
                change()  # (while changes are left) after the answer was built, before it is sent
            if changed:
                time.sleep(0.02)
            with lock:
                out.write(data + b"\n")
                out.flush()
        elif method == "tools/call":
            name, args = params.get("name"), params.get("arguments") or {}
            if name == "churn":
                count = int(args.get("count", 100))
                with lock:
                    state["left"] += count
                threading.Thread(target=churn, args=(float(args.get("every_ms", 10)) / 1000.0,), daemon=True).start()
                text(rid, "churning")
            elif name == "version":
                with lock:
                    now = dict(state)
                text(rid, str(now["version"]), now)
            else:
                text(rid, str(args.get("message", "")))
        else:
            write({"jsonrpc": "2.0", "id": rid, "error": {"code": -32601, "message": f"no method {method}"}})


if __name__ == "__main__":
    main()
