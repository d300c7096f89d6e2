"""A minimal, fast MCP server over stdio (both eras), with misbehaviours on demand.

Usage: raw_server.py [--era both|modern|legacy] [--misbehave MODE] [--tools N]

MODE (applied to ``tools/call`` of the tool named ``bad``; other tools behave):
  garbage      write non-JSON lines, then the right answer
  unknown-id   answer with an id nobody asked for, then the right answer
  truncate     write half of the answer, then exit
  oversize     answer with a result of 2 MiB (``--big`` bytes)
  exit         exit without answering
  silent       never answer (but keep reading)
  stderr       write 1 MiB to stderr, then answer
  jsonrpc-1.0  answer with "jsonrpc": "1.0" (not JSON-RPC 2.0)
  no-jsonrpc   answer without the "jsonrpc" member
``--reject-version N``: the first N modern requests get -32022 listing the version they sent.
Tool ``sleep`` sleeps ``seconds`` then answers; ``progress`` sends progress notifications;
``flood(count, rate=0, changed_at=0)`` (not listed) answers, then sends ``count``
notifications/message (``data``: 1..count), as fast as the pipe takes them or about ``rate``
a second, and a tools/list_changed around the ``changed_at``-th.
Counts of each method are kept and returned by tool ``stats``.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import threading
import time

MODERN = "2026-07-28"


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--era", default="both")
    ap.add_argument("--misbehave", default="")
    ap.add_argument("--tools", type=int, default=3)
    ap.add_argument("--big", type=int, default=2 * 1024 * 1024)
    ap.add_argument("--discover-ttl-ms", type=int, default=0)
    ap.add_argument("--reject-version", type=int, default=0,
                    help="answer the first N modern requests (of --reject-method, default any) with -32022 "
                         "listing the very version they sent, as the conformance suite's request-metadata does")
    ap.add_argument("--reject-method", default="")
    ap.add_argument("--discover-empty", action="store_true",
                    help="answer server/discover with an empty result, as a 2025-era server that answers "
                         "unknown methods with {} does (the conformance suite 0.1.16's mocks)")
    opts = ap.parse_args()

    out = sys.stdout.buffer
    lock = threading.Lock()
    counts: dict[str, int] = {}

    def write(obj: object) -> None:
        data = json.dumps(obj, separators=(",", ":")).encode() + b"\n"
        with lock:
            out.write(data)
            out.flush()

    tools = [
        {"name": "echo", "description": "Echo the message", "inputSchema": {"type": "object", "properties": {"message": {"type": "string"}}}},
        {"name": "add", "inputSchema": {"type": "object", "properties": {"a": {"type": "number"}, "b": {"type": "number"}}}},
        {"name": "bad", "inputSchema": {"type": "object"}},
        {"name": "sleep", "inputSchema": {"type": "object", "properties": {"seconds": {"type": "number"}}}},
        {"name": "progress", "inputSchema": {"type": "object", "properties": {"steps": {"type": "integer"}}}},
        {"name": "stats", "inputSchema": {"type": "object"}},
    ]
    for i in range(max(0, opts.tools - 3)):
        tools.append({"name": f"extra_{i}", "inputSchema": {"type": "object"}})

    def result(rid: object, res: dict) -> None:
        write({"jsonrpc": "2.0", "id": rid, "result": res})

    def text(s: str, **extra: object) -> dict:
        return {"content": [{"type": "text", "text": s}], "isError": False, **extra}

    def call(rid: object, params: dict, modern: bool) -> None:
        name = params.get("name")
        args = params.get("arguments") or {}
        extra = {"resultType": "complete"} if modern else {}
        if name == "echo":
            result(rid, text(str(args.get("message", "")), **extra))
        elif name == "add":
            s = args.get("a", 0) + args.get("b", 0)
            result(rid, text(str(s), structuredContent={"result": s}, **extra))
        elif name == "sleep":
            def later() -> None:
                time.sleep(float(args.get("seconds", 1)))
                result(rid, text("slept", **extra))
            threading.Thread(target=later, daemon=True).start()
        elif name == "progress":
            token = (params.get("_meta") or {}).get("progressToken")
            steps = int(args.get("steps", 3))
            for i in range(steps):
                if token is not None:
                    write({"jsonrpc": "2.0", "method": "notifications/progress", "params": {"progressToken": token, "progress": i + 1, "total": steps, "message": f"step {i + 1}"}})
                time.sleep(float(args.get("delay", 0.0)))
            result(rid, text("done", **extra))
        elif name == "stats":
            result(rid, text(json.dumps(counts), structuredContent=dict(counts), **extra))
        elif name == "flood":  # (not listed)
            result(rid, text("flooding", **extra))
            threading.Thread(target=flood, args=(int(args.get("count", 1000)), float(args.get("rate", 0)),
                                                 int(args.get("changed_at", 0))), daemon=True).start()
        elif name == "bad":
            misbehave(rid, extra)
        else:
            write({"jsonrpc": "2.0", "id": rid, "error": {"code": -32602, "message": f"Unknown tool: {name}"}})

    def flood(count: int, rate: float, changed_at: int) -> None:
        # notifications/message, numbered 1..count: as fast as the pipe takes them (rate 0),
        # else about ``rate`` a second, in writes of up to 500; a tools/list_changed after
        # the ``changed_at``-th (0: none)
        batch = 500 if rate <= 0 else max(1, min(500, int(rate / 100)))
        started = time.monotonic()
        sent = 0
        while sent < count:
            n = min(batch, count - sent)
            lines = b"".join(b'{"jsonrpc":"2.0","method":"notifications/message","params":{"level":"info","data":%d}}\n'
                             % (sent + i + 1) for i in range(n))
            if sent < changed_at <= sent + n:
                lines += b'{"jsonrpc":"2.0","method":"notifications/tools/list_changed"}\n'
            with lock:
                out.write(lines)
                out.flush()
            sent += n
            if rate > 0:
                ahead = started + sent / rate - time.monotonic()
                if ahead > 0:
                    time.sleep(ahead)

    def misbehave(rid: object, extra: dict) -> None:
        mode = opts.misbehave
        if mode == "garbage":
            with lock:
                out.write(b"this is not json\n{\"broken\": \n\x00\xff\xfe\n[1,2,3]\n")
                out.flush()
            result(rid, text("ok after garbage", **extra))
        elif mode == "unknown-id":
            result(987654321, text("nobody asked"))
            result(rid, text("ok after unknown id", **extra))
        elif mode == "truncate":
            data = json.dumps({"jsonrpc": "2.0", "id": rid, "result": text("x" * 1000)}).encode()
            with lock:
                out.write(data[: len(data) // 2])
                out.flush()
            os._exit(3)
        elif mode == "oversize":
            result(rid, text("x" * opts.big, **extra))
        elif mode == "exit":
            sys.stderr.write("raw_server: exiting on purpose\n")
            sys.stderr.flush()
            os._exit(4)
        elif mode == "silent":
            pass
        elif mode == "jsonrpc-1.0":
            write({"jsonrpc": "1.0", "id": rid, "result": text("taken as a result", **extra)})
        elif mode == "no-jsonrpc":
            write({"id": rid, "result": text("taken as a result", **extra)})
        elif mode == "result-and-error":  # both members: invalid JSON-RPC (a ProtocolError for the client)
            write({"jsonrpc": "2.0", "id": rid, "result": text("not taken", **extra),
                   "error": {"code": -32603, "message": "raw: result and error"}})
        elif mode == "extra-member":  # an unknown member beside the result: ignored
            write({"jsonrpc": "2.0", "id": rid, "result": text("extra ignored", **extra), "debug": {"n": 1}})
        elif mode == "id-last":  # the members in another order
            write({"result": text("id last", **extra), "jsonrpc": "2.0", "id": rid})
        elif mode == "empty-content":
            result(rid, {"content": [], "isError": False, **extra})
        elif mode == "unknown-content":
            result(rid, {"content": [{"type": "widget", "size": 3}, {"type": "text", "text": "and text"}], **extra})
        elif mode == "stderr":
            chunk = "e" * 1023 + "\n"
            for _ in range(1024):
                sys.stderr.write(chunk)
            sys.stderr.flush()
            result(rid, text("ok after stderr", **extra))
        else:
            result(rid, text("bad is fine", **extra))

    for line in sys.stdin.buffer:
        try:
            msg = json.loads(line)
        except ValueError:
            continue
        method = msg.get("method")
        rid = msg.get("id")
        if method is None:
            continue
        counts[method] = counts.get(method, 0) + 1
        params = msg.get("params") or {}
        modern = "io.modelcontextprotocol/protocolVersion" in (params.get("_meta") or {})
        if rid is None:
            continue  # notification
        if modern and opts.reject_version > 0 and opts.reject_method in ("", method):
            opts.reject_version -= 1
            sent = params["_meta"]["io.modelcontextprotocol/protocolVersion"]
            write({"jsonrpc": "2.0", "id": rid, "error": {"code": -32022, "message": f"raw: version {sent} refused (test)",
                                                          "data": {"supported": [MODERN], "requested": sent}}})
            continue
        if method == "server/discover":
            if opts.discover_empty:
                result(rid, {})
            elif opts.era == "legacy":
                write({"jsonrpc": "2.0", "id": rid, "error": {"code": -32601, "message": "Method not found"}})
            else:
                result(rid, {"supportedVersions": [MODERN], "capabilities": {"tools": {"listChanged": True}}, "resultType": "complete", "ttlMs": opts.discover_ttl_ms, "cacheScope": "public", "_meta": {"io.modelcontextprotocol/serverInfo": {"name": "raw", "version": "1"}}})
        elif method == "initialize":
            if opts.era == "modern":
                write({"jsonrpc": "2.0", "id": rid, "error": {"code": -32601, "message": "Method not found"}})
            else:
                result(rid, {"protocolVersion": "2025-11-25", "capabilities": {"tools": {"listChanged": True}}, "serverInfo": {"name": "raw", "version": "1"}})
        elif method == "ping":
            result(rid, {})
        elif method == "tools/list":
            result(rid, {"tools": tools, **({"resultType": "complete", "ttlMs": 0, "cacheScope": "public"} if modern else {})})
        elif method == "tools/call":
            call(rid, params, modern)
        else:
            write({"jsonrpc": "2.0", "id": rid, "error": {"code": -32601, "message": "Method not found"}})


if __name__ == "__main__":
    main()
