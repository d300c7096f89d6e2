"""The minimal raw MCP server the benchmarks talk to (both eras, stdio).

It answers with canned bytes, so the client's own cost dominates what is measured.
tools/call of `echo` returns the message it was sent.
"""

import sys

import orjson

TOOLS = [
    {
        "name": f"tool_{i}" if i else "echo",
        "description": f"Tool number {i}: does a thing with its arguments and returns text.",
        "inputSchema": {
            "type": "object",
            "properties": {"message": {"type": "string", "description": "what to echo"}, "count": {"type": "integer"}},
            "required": ["message"],
        },
        "annotations": {"readOnlyHint": True, "idempotentHint": True},
    }
    for i in range(50)
]


def main() -> None:
    read = sys.stdin.buffer.readline
    out = sys.stdout.buffer
    dumps, loads = orjson.dumps, orjson.loads
    while True:
        line = read()
        if not line:
            return
        msg = loads(line)
        rid = msg.get("id")
        if rid is None:
            continue
        method = msg["method"]
        params = msg.get("params") or {}
        if method == "tools/call":
            text = (params.get("arguments") or {}).get("message", "")
            res = {"content": [{"type": "text", "text": text}], "isError": False}
        elif method == "initialize":
            res = {"protocolVersion": "2025-11-25", "capabilities": {"tools": {}}, "serverInfo": {"name": "fast", "version": "1"}}
        elif method == "server/discover":
            res = {"supportedVersions": ["2026-07-28"], "capabilities": {"tools": {}}, "resultType": "complete", "ttlMs": 0, "cacheScope": "public"}
        elif method == "tools/list":
            res = {"tools": TOOLS}
        elif method == "ping":
            res = {}
        else:
            out.write(dumps({"jsonrpc": "2.0", "id": rid, "error": {"code": -32601, "message": "Method not found"}}) + b"\n")
            out.flush()
            continue
        out.write(dumps({"jsonrpc": "2.0", "id": rid, "result": res}) + b"\n")
        out.flush()


if __name__ == "__main__":
    main()
