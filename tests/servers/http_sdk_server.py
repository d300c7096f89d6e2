"""An MCP server built with the official ``mcp`` SDK, served over HTTP on 127.0.0.1.

Used by the HTTP transport tests as a real peer. Run as::

    python http_sdk_server.py --port 8123 [--transport streamable|sse|stdio] [--json]
        [--stateless] [--event-store] [--retry-ms 100] [--tls CERT KEY [--client-ca CA]] [--log PATH]

``--client-ca``: TLS that requires a client certificate signed by CA (mTLS).

Tools:
    echo(message)          -> "Echo: <message>"
    add(a, b)              -> a + b (structured)
    progress(steps)        -> reports ``steps`` progress notifications, then "done"
    drop_stream()          -> sends one log message, closes its SSE stream (resumption
                              with Last-Event-ID brings the rest), then "resumed"
    ask(question)          -> elicits an answer from the client (server→client request)
    sleep(seconds)         -> "slept", after ``seconds``
    finish(seconds, key)   -> appends "start <key>" to the ``--log`` file, sleeps ``seconds``, appends
                              "end <key>" and answers "finished": a cancelled call has no end line
    big(size)              -> a text of ``size`` bytes
    headers()              -> the HTTP request headers it saw, as JSON
    touch(uri)             -> sends notifications/resources/updated for ``uri``
    routed(region, n)      -> "<region>:<n>"; ``region`` is mirrored as Mcp-Param-Region

Custom routes:
    POST /admin/expire     forget every session (the next request with one gets 404)
    GET  /admin/health     200 "ok"
"""

from __future__ import annotations

import argparse
import asyncio
import itertools
import json
from typing import Annotated, Any

import uvicorn
from pydantic import BaseModel, Field
from starlette.requests import Request
from starlette.responses import PlainTextResponse, Response

from mcp.server.mcpserver import Context, MCPServer
from mcp.server.streamable_http import EventMessage, EventStore


class MemoryEventStore(EventStore):
    """Every event kept in memory, in order, so any stream can be replayed."""

    def __init__(self) -> None:
        self._events: list[tuple[str, str, Any]] = []
        self._ids = itertools.count(1)

    async def store_event(self, stream_id: Any, message: Any) -> str:
        event_id = f"e{next(self._ids)}"
        self._events.append((event_id, stream_id, message))
        return event_id

    async def replay_events_after(self, last_event_id: str, send_callback: Any) -> Any:
        index = next((i for i, (eid, _, _) in enumerate(self._events) if eid == last_event_id), None)
        if index is None:
            return None
        stream_id = self._events[index][1]
        for event_id, sid, message in self._events[index + 1 :]:
            if sid == stream_id and message is not None:
                await send_callback(EventMessage(message, event_id))
        return stream_id


class Answer(BaseModel):
    answer: str


def _note(path: str | None, line: str) -> None:
    if path:
        with open(path, "a") as f:  # one short write per line (O_APPEND)
            f.write(line + "\n")


def build_server(log: str | None = None) -> MCPServer:
    server = MCPServer("mcpsync-http-test", version="1.0.0")

    @server.tool()
    async def finish(seconds: float, key: str) -> str:
        """Log the start, sleep, log the end: whether a call ran to its end."""
        _note(log, f"start {key}")
        await asyncio.sleep(seconds)
        _note(log, f"end {key}")
        return "finished"

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
    async def drop_stream(ctx: Context) -> str:
        """Close this request's SSE stream mid-way; the answer comes after resumption."""
        await ctx.info("before drop")
        await asyncio.sleep(0.05)
        await ctx.close_sse_stream()
        await asyncio.sleep(0.3)
        await ctx.info("after drop")
        return "resumed"

    @server.tool()
    async def ask(question: str, ctx: Context) -> str:
        """Ask the client a question through elicitation."""
        result = await ctx.elicit(question, Answer)
        if result.action == "accept" and result.data is not None:
            return f"answer: {result.data.answer}"
        return f"action: {result.action}"

    @server.tool()
    async def sleep(seconds: float, ctx: Context, tick: bool = False) -> str:
        """Sleep, then answer; with ``tick`` a progress notification goes out first (so SSE starts)."""
        if tick:
            await ctx.report_progress(0, None, "sleeping")
        await asyncio.sleep(seconds)
        await ctx.info("woke")
        return "slept"

    @server.tool()
    def big(size: int) -> str:
        """Return ``size`` bytes of text."""
        return "x" * size

    @server.tool()
    def headers(ctx: Context) -> str:
        """The HTTP request headers this call carried."""
        return json.dumps(dict(ctx.headers or {}))

    @server.tool()
    async def touch(uri: str, ctx: Context) -> str:
        """Tell the client ``uri`` changed (legacy: on the session; modern: to listeners)."""
        if (ctx.protocol_version or "") >= "2026-07-28":
            await ctx.notify_resource_updated(uri)
        else:
            await ctx.session.send_resource_updated(uri)
        return "touched"

    @server.tool()
    def routed(region: Annotated[str, Field(json_schema_extra={"x-mcp-header": "Region"})], n: int = 0) -> str:
        """A tool whose ``region`` argument is mirrored in an Mcp-Param header."""
        return f"{region}:{n}"

    @server.resource("test://greeting")
    def greeting() -> str:
        return "hello"

    @server.custom_route("/admin/expire", methods=["POST"])
    async def expire(request: Request) -> Response:
        manager = server.session_manager
        instances = getattr(manager, "_server_instances", {})
        count = len(instances)
        for transport in list(instances.values()):
            try:
                await transport.terminate()
            except Exception:  # noqa: BLE001 - best effort in a test server
                pass
        instances.clear()
        return PlainTextResponse(str(count))

    @server.custom_route("/admin/health", methods=["GET"])
    async def health(request: Request) -> Response:
        return PlainTextResponse("ok")

    return server


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--port", type=int, default=0)
    parser.add_argument("--transport", choices=["streamable", "sse", "stdio"], default="streamable")
    parser.add_argument("--json", action="store_true", help="JSON responses instead of SSE")
    parser.add_argument("--stateless", action="store_true")
    parser.add_argument("--event-store", action="store_true")
    parser.add_argument("--retry-ms", type=int, default=None)
    parser.add_argument("--idle-timeout", type=float, default=None)
    parser.add_argument("--tls", nargs=2, metavar=("CERT", "KEY"), default=None)
    parser.add_argument("--client-ca", default=None, help="require a client certificate signed by this CA")
    parser.add_argument("--log", default=None, help="where the finish tool logs its start and end")
    args = parser.parse_args()

    server = build_server(args.log)
    if args.transport == "stdio":  # the same tools over stdio (both eras)
        server.run("stdio")
        return
    if args.transport == "sse":
        app = server.sse_app(host="127.0.0.1")
    else:
        kwargs: dict[str, Any] = {}
        if args.idle_timeout is not None:
            kwargs["session_idle_timeout"] = args.idle_timeout
        app = server.streamable_http_app(
            json_response=args.json,
            stateless_http=args.stateless,
            event_store=MemoryEventStore() if args.event_store else None,
            retry_interval=args.retry_ms,
            host="127.0.0.1",
            **kwargs,
        )
    tls: dict[str, Any] = {"ssl_certfile": args.tls[0], "ssl_keyfile": args.tls[1]} if args.tls else {}
    if args.client_ca:
        import ssl

        tls.update(ssl_cert_reqs=ssl.CERT_REQUIRED, ssl_ca_certs=args.client_ca)
    uvicorn.run(app, host="127.0.0.1", port=args.port, log_level="warning", timeout_graceful_shutdown=1, **tls)


if __name__ == "__main__":
    main()
