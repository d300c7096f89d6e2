"""A Streamable HTTP MCP server (official SDK) whose tool calls leave a trace, for chaos tests.

Usage: chaos_http_server.py PORT LOG

Tools:
    note(key, ms=0)  appends ``<pid> note <key>`` to LOG (one O_APPEND write) as soon as
                     the call arrives, sleeps ``ms``, then answers ``key``: a call cut
                     after it reached the server is in the log even though the client
                     never saw an answer, and a re-sent call is there twice.
    echo(message)    answers ``message``.
"""

from __future__ import annotations

import asyncio
import os
import sys

from mcp.server.mcpserver import MCPServer

server = MCPServer("chaos-http")
LOG_FD = -1


@server.tool()
async def note(key: str, ms: int = 0) -> str:
    """Record the call, wait ``ms``, answer ``key`` (no annotations: side effects)."""
    os.write(LOG_FD, f"{os.getpid()} note {key}\n".encode())
    await asyncio.sleep(ms / 1000)
    return key


@server.tool()
def echo(message: str) -> str:
    """Echo the message back."""
    return message


if __name__ == "__main__":
    port, log = int(sys.argv[1]), sys.argv[2]
    LOG_FD = os.open(log, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
    server.run("streamable-http", host="127.0.0.1", port=port)
