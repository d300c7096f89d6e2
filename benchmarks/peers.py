"""The peers the benchmarks compare against: the raw limit (a blocking orjson write /
readline loop) and the official SDK's client driven from sync code. Shared by the
pytest-benchmark suites (conftest.py), the callgrind contestants and the wall-clock rounds.
"""

from __future__ import annotations

import asyncio
import contextlib
import subprocess
import sys
from pathlib import Path

import orjson

HERE = Path(__file__).resolve().parent
FAST_SERVER = [sys.executable, str(HERE / "servers" / "fast_server.py")]


#: the per-request ``_meta`` a 2026-07-28 (modern era) client sends; the modern raw loop
#: sends it too, so that both sides of a modern comparison carry the same wire bytes
MODERN_META = {
    "io.modelcontextprotocol/protocolVersion": "2026-07-28",
    "io.modelcontextprotocol/clientCapabilities": {},
    "io.modelcontextprotocol/clientInfo": {"name": "mcpsync", "version": "0.1.0"},
}


class RawPipe:
    """The raw limit: a blocking orjson write / readline loop against the same server.

    ``era="legacy"`` (default) speaks 2025-11-25, as the SDK client does: one
    ``initialize`` handshake, then bare requests. ``era="modern"`` has no handshake and
    puts :data:`MODERN_META` in every request, as a 2026-07-28 client must.
    """

    def __init__(self, argv: list[str], era: str = "legacy") -> None:
        self.proc = subprocess.Popen(argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE, bufsize=0)
        self.w = self.proc.stdin
        self.r = open(self.proc.stdout.fileno(), "rb", closefd=False)  # buffered reader for readline
        self.i = 0
        self.meta = MODERN_META if era == "modern" else None
        if self.meta is None:
            self.request("initialize", {"protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "raw", "version": "0"}})
            self.w.write(b'{"jsonrpc":"2.0","method":"notifications/initialized"}\n')

    def request(self, method: str, params: dict) -> dict:
        self.i += 1
        if self.meta is not None:
            params = {**params, "_meta": self.meta}
        self.w.write(orjson.dumps({"jsonrpc": "2.0", "id": self.i, "method": method, "params": params}) + b"\n")
        return orjson.loads(self.r.readline())

    def call(self, message: str = "hi") -> dict:
        return self.request("tools/call", {"name": "echo", "arguments": {"message": message}})

    def close(self) -> None:
        self.w.close()
        self.proc.wait(5)


class SdkClient:
    """The official SDK's ClientSession over stdio, driven from sync code by one event loop."""

    def __init__(self, argv: list[str]) -> None:
        from mcp.client.session import ClientSession
        from mcp.client.stdio import StdioServerParameters, stdio_client

        self.loop = asyncio.new_event_loop()
        self.stack = contextlib.AsyncExitStack()

        async def start():
            read, write = await self.stack.enter_async_context(
                stdio_client(StdioServerParameters(command=argv[0], args=argv[1:]))
            )
            session = await self.stack.enter_async_context(ClientSession(read, write))
            await session.initialize()
            return session

        self.session = self.loop.run_until_complete(start())

    def run(self, coro):
        return self.loop.run_until_complete(coro)

    def call(self, message: str = "hi"):
        return self.run(self.session.call_tool("echo", {"message": message}))

    def close(self) -> None:
        try:
            self.run(self.stack.aclose())
        except RuntimeError:
            pass  # anyio refuses to exit its cancel scope from run_until_complete's task
        self.loop.close()
