"""A server written with the official `mcp` SDK for the agent-framework tests (issue 34).

Its tools exercise what a framework must carry faithfully: required arguments, defaults,
enums, a nested object given by ``$ref`` (a pydantic model), structured content, an image,
a tool error (``isError``), and a tool list that changes (``grow`` adds a tool and sends
``notifications/tools/list_changed``, legacy era). Every call's arguments are appended,
one JSON line each, to the file named by ``MCPSYNC_AGENT_LOG`` (when set): what reached
the server, for the tests to read.

Usage: sdk_agent_server.py [stdio | http PORT]
"""

from __future__ import annotations

import base64
import json
import os
import sys
import threading
from typing import Literal, Optional

from mcp.server.mcpserver import Context, MCPServer
from mcp.server.mcpserver.exceptions import ToolError
from mcp.server.mcpserver.utilities.types import Image
from pydantic import BaseModel, Field

server = MCPServer("sdk-agent-server")
_LOG = os.environ.get("MCPSYNC_AGENT_LOG")
_log_lock = threading.Lock()
# a 1x1 PNG
PNG = base64.b64decode(
    "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mP8z8BQDwAEhQGAhKmMIQAAAABJRU5ErkJggg=="
)


def _record(tool: str, arguments: dict) -> None:
    if _LOG:
        with _log_lock, open(_LOG, "a", encoding="utf-8") as f:
            f.write(json.dumps({"tool": tool, "arguments": arguments}, sort_keys=True) + "\n")


class Filters(BaseModel):
    """Narrow a search."""

    tags: list[str] = Field(default_factory=list, description="tags every hit must have")
    min_score: float = Field(0.5, description="lowest score kept")


class Hits(BaseModel):
    hits: list[str]
    mode: str


@server.tool()
def search(
    query: str,
    limit: int = 5,
    mode: Literal["fast", "deep"] = "fast",
    filters: Optional[Filters] = None,
) -> Hits:
    """Search the catalogue."""
    args = {"query": query, "limit": limit, "mode": mode, "filters": filters.model_dump() if filters else None}
    _record("search", args)
    return Hits(hits=[f"{query}-{i}" for i in range(min(limit, 3))], mode=mode)


@server.tool()
def add(a: int, b: int) -> int:
    """Add two integers."""
    _record("add", {"a": a, "b": b})
    return a + b


@server.tool()
def picture() -> Image:
    """A tiny PNG image."""
    _record("picture", {})
    return Image(data=PNG, format="png")


@server.tool()
def fail(reason: str = "asked to fail") -> str:
    """Always fails: its result has isError set."""
    _record("fail", {"reason": reason})
    raise ToolError(reason)  # its message reaches the client (a ValueError is hidden)


@server.tool()
def sleep_ms(ms: int) -> str:
    """Sleep, then answer."""
    import time

    _record("sleep_ms", {"ms": ms})
    time.sleep(ms / 1000)
    return f"slept {ms} ms"


@server.tool()
async def grow(ctx: Context) -> str:
    """Add the tool ``shout`` and announce the change."""
    _record("grow", {})

    def shout(text: str) -> str:
        """Upper-case the text."""
        _record("shout", {"text": text})
        return text.upper()

    if "shout" not in {t.name for t in await server.list_tools()}:
        server.add_tool(shout)
    await ctx.session.send_tool_list_changed()
    return "grown"


if __name__ == "__main__":
    if len(sys.argv) > 2 and sys.argv[1] == "http":
        server.run("streamable-http", host="127.0.0.1", port=int(sys.argv[2]))
    else:
        server.run("stdio")
