"""An MCP server built with the official ``mcp`` SDK, served over stdio.

The bridge tests put it behind ``mcpsync bridge`` (WebSocket and gRPC). Over stdio the
SDK answers both eras: ``server/discover`` (2026-07-28) and ``initialize``.

Tools:
    echo(message)      -> "Echo: <message>"
    add(a, b)          -> a + b (structured)
    progress(steps)    -> ``steps`` progress notifications, then "done"
    ask(question)      -> elicits an answer from the client (legacy era: a server→client request)
    big(size)          -> a text of ``size`` bytes
    sleep(seconds)     -> sleeps, then "slept"
"""

from __future__ import annotations

import asyncio

from pydantic import BaseModel

from mcp.server.mcpserver import Context, MCPServer


class Answer(BaseModel):
    answer: str


def build_server() -> MCPServer:
    server = MCPServer("mcpsync-bridge-sdk-test", version="1.0.0")

    @server.tool()
    def echo(message: str) -> str:
        """Echo the message back."""
        return f"Echo: {message}"

    @server.tool()
    def add(a: int, b: int) -> int:
        """Add two integers."""
        return a + b

    @server.tool()
    async def progress(steps: int, ctx: Context) -> str:
        """Report progress ``steps`` times."""
        for i in range(steps):
            await ctx.report_progress(i + 1, steps, f"step {i + 1}")
        return "done"

    @server.tool()
    async def ask(question: str, ctx: Context) -> str:
        """Ask the client a question through elicitation."""
        result = await ctx.elicit(question, Answer)
        if result.action == "accept" and result.data is not None:
            return f"answer: {result.data.answer}"
        return f"action: {result.action}"

    @server.tool()
    def big(size: int) -> str:
        """Return ``size`` bytes of text."""
        return "x" * size

    @server.tool()
    async def sleep(seconds: float) -> str:
        """Sleep, then answer."""
        await asyncio.sleep(min(seconds, 30.0))
        return "slept"

    return server


if __name__ == "__main__":
    build_server().run("stdio")
