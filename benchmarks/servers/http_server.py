"""A raw Streamable HTTP MCP server: HTTP/1.1 keep-alive on plain asyncio, no SDK.

The HTTP benchmarks' "raw limit" server: it parses just enough HTTP (a request line,
headers, a ``Content-Length`` or chunked body) and answers each JSON-RPC request at
once with an ``application/json`` body (the answers of benchmarks/servers/fast_server.py),
so what a benchmark measures is the client, not the server. Notifications and client
responses get ``202 Accepted``; the optional GET stream is refused with ``405``, as the
transport allows; DELETE ends the (only nominal) session.

Usage: ``python benchmarks/servers/http_server.py [--port N] [--schema]``; it prints the
port it listens on (127.0.0.1) as its first line of output, then serves until killed or
until its stdin closes. The endpoint is ``http://127.0.0.1:PORT/mcp``.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import sys

import orjson

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from fast_server import SCHEMA_TOOL, TOOLS, answer  # noqa: E402

SESSION_ID = b"raw-bench-session"
REASONS = {200: b"OK", 202: b"Accepted", 400: b"Bad Request", 405: b"Method Not Allowed"}


def response(status: int, body: bytes = b"", extra: bytes = b"") -> bytes:
    head = b"HTTP/1.1 %d %s\r\ncontent-length: %d\r\n" % (status, REASONS[status], len(body))
    if body:
        head += b"content-type: application/json\r\n"
    return head + extra + b"\r\n" + body


async def read_body(reader: asyncio.StreamReader, headers: dict[bytes, bytes]) -> bytes:
    length = headers.get(b"content-length")
    if length is not None:
        return await reader.readexactly(int(length))
    if headers.get(b"transfer-encoding", b"").lower() == b"chunked":
        parts = []
        while True:
            size = int((await reader.readuntil(b"\r\n")).split(b";", 1)[0], 16)
            if size == 0:
                await reader.readuntil(b"\r\n")  # no trailers are sent to us
                return b"".join(parts)
            parts.append(await reader.readexactly(size))
            await reader.readexactly(2)
    return b""


def serve(tools: list):
    dumps, loads = orjson.dumps, orjson.loads

    async def handle(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            while True:
                head = await reader.readuntil(b"\r\n\r\n")
                lines = head.split(b"\r\n")
                method = lines[0].split(b" ", 1)[0]
                headers = {}
                for line in lines[1:]:
                    if line:
                        name, _, value = line.partition(b":")
                        headers[name.strip().lower()] = value.strip()
                body = await read_body(reader, headers)
                if method == b"POST":
                    try:
                        msg = loads(body)
                    except orjson.JSONDecodeError:
                        writer.write(response(400))
                        continue
                    if not isinstance(msg, dict) or "method" not in msg or msg.get("id") is None:
                        writer.write(response(202))  # a notification or a client's response
                    else:
                        kind, value = answer(msg, tools)
                        out = dumps({"jsonrpc": "2.0", "id": msg["id"], kind: value})
                        extra = b"mcp-session-id: " + SESSION_ID + b"\r\n" if msg["method"] == "initialize" else b""
                        writer.write(response(200, out, extra))
                elif method == b"DELETE":
                    writer.write(response(200))
                else:  # GET: no server-initiated stream here
                    writer.write(response(405, extra=b"allow: POST, DELETE\r\n"))
                if headers.get(b"connection", b"").lower() == b"close":
                    break
        except (asyncio.IncompleteReadError, asyncio.LimitOverrunError, ConnectionError, ValueError):
            pass
        finally:
            writer.close()

    return handle


async def main(port: int, tools: list) -> None:
    server = await asyncio.start_server(serve(tools), "127.0.0.1", port)
    print(server.sockets[0].getsockname()[1], flush=True)
    loop = asyncio.get_running_loop()
    # the parent closing our stdin (or dying) ends the server: no orphans
    await loop.run_in_executor(None, sys.stdin.buffer.read)
    server.close()


if __name__ == "__main__":
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--port", type=int, default=0)
    ap.add_argument("--schema", action="store_true", help="list the `add` tool with an outputSchema too")
    opts = ap.parse_args()
    asyncio.run(main(opts.port, TOOLS + [SCHEMA_TOOL] if opts.schema else TOOLS))
