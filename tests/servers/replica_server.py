"""One replica of an official-SDK (`mcp` 2.3.0) Streamable HTTP server, for the load
balancer tests: several of these run behind nginx or HAProxy, each named, each logging
the calls it executes.

Usage: replica_server.py --port PORT --name NAME --log PATH [--stateless] [--json]

Every executed ``tools/call`` of ``record`` / ``lookup`` appends one line
``<tool> <replica> <key>`` to PATH with a single O_APPEND write *before* answering, so a
call the client saw succeed is always logged, and a call executed twice (by one replica or
by two) is there twice. The log is shared by the replicas.

Tools:
    record(key, delay=0)   no annotations (side effects): logged, then answered after ``delay`` s
    lookup(key, delay=0)   ``readOnlyHint`` (safe to retry on another replica): likewise
    whoami()      ``readOnlyHint``: this replica's name
    heavy(n)      ``readOnlyHint``: this replica's name (a balancer may route it elsewhere)
    touch(uri)    sends ``notifications/resources/updated`` if this session subscribed ``uri``
    session()     a string naming this session (legacy era; "" when stateless)

Resources: ``test://doc`` (subscribable in the legacy era: per session).
"""

from __future__ import annotations

import argparse
import asyncio
import os
import warnings
from typing import Any

import uvicorn

from mcp.server.mcpserver import Context, MCPServer
from mcp_types import SubscribeRequestParams, ToolAnnotations, UnsubscribeRequestParams

warnings.simplefilter("ignore")

READ_ONLY = ToolAnnotations(readOnlyHint=True, idempotentHint=True)


def build(name: str, log: str) -> MCPServer:
    server = MCPServer(f"replica-{name}", version="1.0.0")
    subscribed: dict[str, set[str]] = {}

    def sid(ctx: Any) -> str:
        """The MCP session this request belongs to (its Mcp-Session-Id; "" when stateless)."""
        request = getattr(ctx, "request_context", ctx).request
        headers = getattr(request, "headers", None) or {}
        return str(headers.get("mcp-session-id") or "")

    def write(line: str) -> None:
        fd = os.open(log, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
        try:
            os.write(fd, line.encode() + b"\n")
        finally:
            os.close(fd)

    @server.tool()
    async def record(key: str, delay: float = 0.0) -> str:
        """Record ``key`` (a side effect), then take ``delay`` s to answer."""
        write(f"record {name} {key}")
        await asyncio.sleep(delay)
        return name

    @server.tool(annotations=READ_ONLY)
    async def lookup(key: str, delay: float = 0.0) -> str:
        """Look ``key`` up (no side effect), taking ``delay`` s to answer."""
        write(f"lookup {name} {key}")
        await asyncio.sleep(delay)
        return name

    @server.tool(annotations=READ_ONLY)
    def whoami() -> str:
        """This replica's name."""
        return name

    @server.tool(annotations=READ_ONLY)
    def heavy(n: int = 0) -> str:
        """A tool a balancer may send to its own pool; answers the replica's name."""
        return name

    @server.tool()
    async def touch(uri: str, ctx: Context) -> str:
        """Announce that ``uri`` changed, if this session subscribed it."""
        if uri in subscribed.get(sid(ctx), set()):
            await ctx.session.send_resource_updated(uri)
            return "sent"
        return "not subscribed"

    @server.tool(annotations=READ_ONLY)
    def session(ctx: Context) -> str:
        """Which session (of this replica) the call arrived on."""
        return f"{name}:{sid(ctx)}"

    @server.resource("test://doc", mime_type="text/plain")
    def doc() -> str:
        return f"doc from {name}"

    async def _subscribe(ctx: Any, params: SubscribeRequestParams) -> dict[str, Any]:
        subscribed.setdefault(sid(ctx), set()).add(str(params.uri))
        return {}

    async def _unsubscribe(ctx: Any, params: UnsubscribeRequestParams) -> dict[str, Any]:
        subscribed.get(sid(ctx), set()).discard(str(params.uri))
        return {}

    server._lowlevel_server.add_request_handler("resources/subscribe", SubscribeRequestParams, _subscribe)
    server._lowlevel_server.add_request_handler("resources/unsubscribe", UnsubscribeRequestParams, _unsubscribe)
    return server


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--port", type=int, required=True)
    ap.add_argument("--name", required=True)
    ap.add_argument("--log", required=True)
    ap.add_argument("--stateless", action="store_true")
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args()
    app = build(args.name, args.log).streamable_http_app(
        json_response=args.json, stateless_http=args.stateless, host="127.0.0.1"
    )
    uvicorn.run(app, host="127.0.0.1", port=args.port, log_level="warning", timeout_graceful_shutdown=1,
                timeout_keep_alive=75)


if __name__ == "__main__":
    main()
