"""An official-SDK (`mcp` 2.3.0, MCPServer) server that is busy on demand, over stdio.

Tools (``key`` names a counter; ``times``: how many calls of that key are turned away first):
  limited(key, times)   an ``isError`` result "rate limited, retry after 0.1 s" for the first
                        ``times`` calls, then "ok after <n> calls" (a rate limit inside a result)
  busy(key, times)      the JSON-RPC error -32000 "busy, try again" for the first ``times``
                        calls, then "ok after <n> calls" (a transient error answer)
  unsafe_limited(key, times)  as ``limited``, without annotations (not safe to repeat)
  calls(key)            how many calls ``key`` has had
``limited`` and ``busy`` are annotated ``idempotentHint`` (safe to repeat).

Usage: sdk_busy_server.py
"""

from __future__ import annotations

import warnings

from mcp.server.mcpserver import MCPServer
from mcp.shared.exceptions import MCPError
from mcp_types import CallToolResult, TextContent, ToolAnnotations

warnings.simplefilter("ignore")
server = MCPServer("sdk-busy-server")
CALLS: dict[str, int] = {}
SAFE = ToolAnnotations(idempotentHint=True)


def _count(key: str) -> int:
    CALLS[key] = CALLS.get(key, 0) + 1
    return CALLS[key]


@server.tool(annotations=SAFE)
def limited(key: str, times: int) -> CallToolResult:
    """Rate limited (an isError result) for the first `times` calls of `key`."""
    n = _count(key)
    if n <= times:
        return CallToolResult(content=[TextContent(type="text", text="rate limited, retry after 0.1 s")], isError=True)
    return CallToolResult(content=[TextContent(type="text", text=f"ok after {n} calls")])


@server.tool(annotations=SAFE)
def busy(key: str, times: int) -> str:
    """A JSON-RPC error -32000 for the first `times` calls of `key`."""
    n = _count(key)
    if n <= times:
        raise MCPError(-32000, "busy, try again")
    return f"ok after {n} calls"


@server.tool()
def unsafe_limited(key: str, times: int) -> CallToolResult:
    """As ``limited``, without annotations: not safe to repeat."""
    return limited(key, times)


@server.tool()
def calls(key: str) -> int:
    """How many calls `key` has had."""
    return CALLS.get(key, 0)


if __name__ == "__main__":
    server.run("stdio")
