"""The minimal raw MCP server the benchmarks talk to (both eras, stdio).

It answers with canned bytes, so the client's own cost dominates what is measured.
tools/call of `echo` returns the message it was sent; `add` (listed with an
``outputSchema``) returns ``{"result": a + b}`` as structured content, for the clients
that check a result against its tool's schema. :func:`answer` is also what
benchmarks/servers/http_server.py answers with.
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



def listing(n: int) -> list:
    """``n`` tools as a real server lists them (``--tools N``: the listing benchmarks):
    each about 480 bytes of JSON, an input schema of four properties (enum, array,
    bounds, descriptions), an output schema on every fourth; none names
    ``x-mcp-header``. The first is ``echo``, so calls still work."""
    tools = []
    for i in range(n):
        tool = {
            "name": f"tool_{i}" if i else "echo",
            "description": f"Tool number {i}: searches the project's records and returns the matches.",
            "inputSchema": {
                "type": "object",
                "properties": {
                    "message": {"type": "string", "description": "what to echo"},
                    "limit": {"type": "integer", "minimum": 1, "maximum": 100},
                    "order": {"type": "string", "enum": ["newest", "oldest"]},
                    "labels": {"type": "array", "items": {"type": "string"}},
                },
                "required": ["message"],
            },
            "annotations": {"readOnlyHint": True, "idempotentHint": True},
        }
        if i % 4 == 3:
            tool["outputSchema"] = {"type": "object", "properties": {"count": {"type": "integer"}}, "required": ["count"]}
        tools.append(tool)
    return tools


#: listed after TOOLS when the server runs with ``--schema``
SCHEMA_TOOL = {
    "name": "add",
    "description": "Adds two integers; the sum comes back as structured content.",
    "inputSchema": {
        "type": "object",
        "properties": {"a": {"type": "integer"}, "b": {"type": "integer"}},
        "required": ["a", "b"],
    },
    "outputSchema": {
        "type": "object",
        "properties": {"result": {"type": "integer"}},
        "required": ["result"],
        "additionalProperties": False,
    },
    "annotations": {"readOnlyHint": True, "idempotentHint": True},
}

MODERN_KEY = "io.modelcontextprotocol/protocolVersion"
NOT_FOUND = {"code": -32601, "message": "Method not found"}


def answer(msg: dict, tools: list) -> tuple[str, object]:
    """``("result", value)`` or ``("error", value)`` for one request; a 2026-07-28 request
    (its ``_meta`` names the version) gets the ``resultType`` that era's results carry."""
    method = msg["method"]
    params = msg.get("params") or {}
    if MODERN_KEY in (params.get("_meta") or ()):
        kind, value = _answer(method, params, tools)
        if kind == "error":
            return kind, value
        value = {**value, "resultType": "complete"}
        if method == "tools/list":  # listings are cacheable for an hour in this era
            value.update(ttlMs=3_600_000, cacheScope="public")
        return kind, value
    return _answer(method, params, tools)


def _answer(method: str, params: dict, tools: list) -> tuple[str, object]:
    if method == "tools/call":
        args = params.get("arguments") or {}
        if params.get("name") == "add":
            total = args.get("a", 0) + args.get("b", 0)
            return "result", {"content": [{"type": "text", "text": str(total)}],
                              "structuredContent": {"result": total}, "isError": False}
        return "result", {"content": [{"type": "text", "text": args.get("message", "")}], "isError": False}
    if method == "initialize":
        return "result", {"protocolVersion": "2025-11-25", "capabilities": {"tools": {}}, "serverInfo": {"name": "fast", "version": "1"}}
    if method == "server/discover":
        return "result", {"supportedVersions": ["2026-07-28"], "capabilities": {"tools": {}}, "resultType": "complete", "ttlMs": 0, "cacheScope": "public"}
    if method == "tools/list":
        return "result", {"tools": tools}
    if method == "ping":
        return "result", {}
    return "error", NOT_FOUND


def main() -> None:
    argv = sys.argv[1:]
    tools = listing(int(argv[argv.index("--tools") + 1])) if "--tools" in argv else TOOLS
    if "--schema" in argv:
        tools = tools + [SCHEMA_TOOL]
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
        kind, value = answer(msg, tools)
        out.write(dumps({"jsonrpc": "2.0", "id": rid, kind: value}) + b"\n")
        out.flush()


if __name__ == "__main__":
    main()
