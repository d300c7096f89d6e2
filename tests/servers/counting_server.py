"""An MCP server over stdio (both eras) that counts what it is asked.

Usage: counting_server.py [--count-file PATH] [--ttl-ms N] [--scope public|private]
                          [--era both|modern|legacy]

Every request method is counted; with ``--count-file`` each request also appends its
method name as one line to that file, so counts survive restarts (a test counts the
``tools/list`` lines across reconnections). Modern results carry ``ttlMs`` /
``cacheScope`` from the options (default 0 / public).

Tools:
  echo(message)        the message
  sleep_ms(ms)         answers after ``ms`` milliseconds (concurrently)
  fail()               a JSON-RPC error (-32603)
  hang()               never answers
  meta()               the request's ``_meta`` as structured content
  change()             adds a tool ``extra_<n>``, then sends notifications/tools/list_changed
  touch(uri)           sends notifications/resources/updated for ``uri`` (if subscribed)
  stats()              the counts of this process
  exit()               exits at once (the client must reconnect)
Resources: ``count://a`` and ``count://b`` (text: "<uri> v<version>"; ``touch`` bumps the
version), subscribable.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import threading
import time

MODERN = "2026-07-28"
LEGACY = "2025-11-25"


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--count-file", default="")
    ap.add_argument("--ttl-ms", type=int, default=0)
    ap.add_argument("--scope", default="public")
    ap.add_argument("--era", default="both")
    opts = ap.parse_args()

    out = sys.stdout.buffer
    lock = threading.Lock()
    counts: dict[str, int] = {}
    extra_tools: list[str] = []
    versions = {"count://a": 1, "count://b": 1}
    subscribed: set[str] = set()

    def write(obj: object) -> None:
        data = json.dumps(obj, separators=(",", ":")).encode() + b"\n"
        with lock:
            out.write(data)
            out.flush()

    def note(method: str) -> None:
        counts[method] = counts.get(method, 0) + 1
        if opts.count_file:
            with open(opts.count_file, "a") as f:
                f.write(method + "\n")

    def schema(**props: str) -> dict:
        return {"type": "object", "properties": {k: {"type": v} for k, v in props.items()}}

    def tool_list() -> list[dict]:
        base = [
            {"name": "echo", "inputSchema": schema(message="string")},
            {"name": "sleep_ms", "inputSchema": schema(ms="number"), "annotations": {"readOnlyHint": True}},
            {"name": "fail", "inputSchema": schema()},
            {"name": "hang", "inputSchema": schema()},
            {"name": "meta", "inputSchema": schema()},
            {"name": "change", "inputSchema": schema()},
            {"name": "touch", "inputSchema": schema(uri="string")},
            {"name": "stats", "inputSchema": schema()},
            {"name": "exit", "inputSchema": schema()},
        ]
        return base + [{"name": n, "inputSchema": schema()} for n in extra_tools]

    def hints(modern: bool) -> dict:
        return {"resultType": "complete", "ttlMs": opts.ttl_ms, "cacheScope": opts.scope} if modern else {}

    def result(rid: object, res: dict) -> None:
        write({"jsonrpc": "2.0", "id": rid, "result": res})

    def error(rid: object, code: int, message: str) -> None:
        write({"jsonrpc": "2.0", "id": rid, "error": {"code": code, "message": message}})

    def text(s: str, modern: bool, **extra: object) -> dict:
        return {"content": [{"type": "text", "text": s}], "isError": False, **extra, **({"resultType": "complete"} if modern else {})}

    def call(rid: object, params: dict, modern: bool) -> None:
        name = params.get("name")
        args = params.get("arguments") or {}
        if name == "echo":
            result(rid, text(str(args.get("message", "")), modern))
        elif name == "sleep_ms":
            def later() -> None:
                time.sleep(float(args.get("ms", 0)) / 1000.0)
                result(rid, text("slept", modern))
            threading.Thread(target=later, daemon=True).start()
        elif name == "fail":
            error(rid, -32603, "asked to fail")
        elif name == "hang":
            pass
        elif name == "meta":
            m = params.get("_meta") or {}
            result(rid, text(json.dumps(m), modern, structuredContent=m))
        elif name == "change":
            extra_tools.append(f"extra_{len(extra_tools)}")
            result(rid, text("changed", modern))
            write({"jsonrpc": "2.0", "method": "notifications/tools/list_changed"})
        elif name == "touch":
            uri = str(args.get("uri", ""))
            if uri in versions:
                versions[uri] += 1
            result(rid, text("touched", modern))
            if uri in subscribed:
                write({"jsonrpc": "2.0", "method": "notifications/resources/updated", "params": {"uri": uri}})
        elif name == "stats":
            result(rid, text(json.dumps(counts), modern, structuredContent=dict(counts)))
        elif name == "exit":
            os._exit(0)
        else:
            error(rid, -32602, f"Unknown tool: {name}")

    caps = {"tools": {"listChanged": True}, "resources": {"subscribe": True, "listChanged": False}}
    for line in sys.stdin.buffer:
        try:
            msg = json.loads(line)
        except ValueError:
            continue
        method = msg.get("method")
        rid = msg.get("id")
        if method is None or rid is None:
            continue
        note(method)
        params = msg.get("params") or {}
        modern = "io.modelcontextprotocol/protocolVersion" in (params.get("_meta") or {})
        if method == "server/discover":
            if opts.era == "legacy":
                error(rid, -32601, "Method not found")
            else:
                result(rid, {"supportedVersions": [MODERN], "capabilities": caps, **hints(True),
                             "_meta": {"io.modelcontextprotocol/serverInfo": {"name": "counting", "version": "1"}}})
        elif method == "initialize":
            if opts.era == "modern":
                error(rid, -32601, "Method not found")
            else:
                result(rid, {"protocolVersion": LEGACY, "capabilities": caps, "serverInfo": {"name": "counting", "version": "1"}})
        elif method == "ping":
            result(rid, {})
        elif method == "tools/list":
            result(rid, {"tools": tool_list(), **hints(modern)})
        elif method == "tools/call":
            call(rid, params, modern)
        elif method == "resources/list":
            result(rid, {"resources": [{"uri": u, "name": u.split("/")[-1], "mimeType": "text/plain"} for u in versions], **hints(modern)})
        elif method == "resources/read":
            uri = params.get("uri")
            if uri not in versions:
                error(rid, -32002, f"Resource not found: {uri}")
            else:
                result(rid, {"contents": [{"uri": uri, "mimeType": "text/plain", "text": f"{uri} v{versions[uri]}"}], **hints(modern)})
        elif method == "resources/subscribe":
            subscribed.add(str(params.get("uri")))
            result(rid, {})
        elif method == "resources/unsubscribe":
            subscribed.discard(str(params.get("uri")))
            result(rid, {})
        else:
            error(rid, -32601, "Method not found")


if __name__ == "__main__":
    main()
