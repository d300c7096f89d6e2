"""A server written with the official `mcp` SDK (MCPServer), over stdio or Streamable HTTP.

It answers both protocol eras over stdio (server/discover and initialize).
Usage: sdk_server.py [stdio | http PORT]
"""

from __future__ import annotations

import sys

from mcp.server.mcpserver import MCPServer

server = MCPServer("sdk-test-server", instructions="A test server for mcpsync.")


@server.tool()
def add(a: int, b: int) -> int:
    """Add two integers."""
    return a + b


@server.tool()
def echo(message: str) -> str:
    """Echo the message back."""
    return message


@server.tool()
def word_count(text: str) -> dict:
    """Count the words and characters of a text."""
    return {"words": len(text.split()), "chars": len(text)}


@server.tool()
def fail(reason: str = "asked to fail") -> str:
    """Always raises: its result has isError set."""
    raise ValueError(reason)


@server.tool()
def sleep_ms(ms: int) -> str:
    """Sleep, then answer."""
    import time

    time.sleep(ms / 1000)
    return f"slept {ms} ms"


@server.resource("test://greeting")
def greeting() -> str:
    """A static text resource."""
    return "hello from the SDK server"


@server.prompt()
def review(code: str) -> str:
    """Ask for a code review."""
    return f"Please review:\n{code}"


if __name__ == "__main__":
    if len(sys.argv) > 2 and sys.argv[1] == "http":
        server.run("streamable-http", host="127.0.0.1", port=int(sys.argv[2]))
    else:
        server.run("stdio")
