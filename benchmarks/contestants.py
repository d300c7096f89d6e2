"""The contestants of the per-call benchmarks: one ``tools/call`` after another, each
client against the same minimal server, which answers at once.

One table, two measures: ``benchmarks/callgrind.py`` counts each contestant's client
instructions per call, ``benchmarks/plot.py`` times each call and draws the
distributions. A contestant sets up its client and server (outside the measure), then
hands the call it repeats to the measure (:class:`Measure`): ``run(call)`` for a sync
client, ``await arun(acall)`` for the official SDK's async one.

Servers: ``benchmarks/servers/fast_server.py`` over stdio, and
``benchmarks/servers/http_server.py`` (a raw asyncio HTTP/1.1 keep-alive server, no SDK
server time in the numbers) for Streamable HTTP. Both answer ``echo`` and, with
``--schema``, ``add`` with an ``outputSchema``.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import os
import select
import socket
import subprocess
import sys
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Awaitable, Callable, Iterator, Protocol

import orjson

ROOT = Path(__file__).resolve().parent.parent
SERVERS = ROOT / "benchmarks" / "servers"
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from benchmarks.peers import RawPipe  # noqa: E402

#: the idle gap before each call of the ``*-idle`` contestants (an agent thinking)
IDLE = 0.03
ECHO = {"message": "hi"}
ADD = {"a": 1, "b": 2}


class Measure(Protocol):
    """What a contestant hands its repeated call to."""

    def run(self, call: Callable[[], object]) -> None: ...

    async def arun(self, acall: Callable[[], Awaitable[object]]) -> None: ...


@dataclass(frozen=True)
class Contestant:
    name: str
    transport: str  # "stdio" or "http"
    who: str  # "raw", "mcpsync" or "sdk"
    era: str  # "legacy" (2025-11-25) or "modern" (2026-07-28)
    what: str  # one line for the tables
    limit: str | None  # the raw contestant this one is compared with
    body: Callable[[Measure], None]
    #: the measure repeats a costly call ``calls // scale`` times (a 1,000-tool listing)
    scale: int = 1
    #: ``tools/call``s (or listings) one repeated call makes (a round of many threads)
    per_round: int = 1

    def rounds(self, calls: int) -> int:
        """How many times the measure repeats this contestant's call for ``calls``."""
        return max(1, calls // self.scale)


CONTESTANTS: dict[str, Contestant] = {}


def contestant(transport: str, who: str, era: str, what: str, limit: str | None = None, *,
               scale: int = 1, per_round: int = 1):
    def register(body: Callable[[Measure], None]) -> Callable[[Measure], None]:
        name = body.__name__.replace("_", "-")
        CONTESTANTS[name] = Contestant(name, transport, who, era, what, limit, body, scale, per_round)
        return body

    return register


# ----------------------------------------------------------------------------- servers


def stdio_server(schema: bool = False, tools: int | None = None) -> list[str]:
    return [sys.executable, str(SERVERS / "fast_server.py"), *(["--schema"] if schema else []),
            *(["--tools", str(tools)] if tools else [])]


@contextlib.contextmanager
def http_server(schema: bool = False) -> Iterator[str]:
    """The raw HTTP server on a free port; yields its endpoint URL."""
    argv = [sys.executable, str(SERVERS / "http_server.py"), *(["--schema"] if schema else [])]
    proc = subprocess.Popen(argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE)
    try:
        port = int(proc.stdout.readline() or b"0")  # type: ignore[union-attr]
        if not port:
            raise RuntimeError("benchmarks/servers/http_server.py did not start")
        yield f"http://127.0.0.1:{port}/mcp"
    finally:
        proc.stdin.close()  # type: ignore[union-attr]  # the server ends when its stdin does
        try:
            proc.wait(10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(10)


def _idle(call: Callable[[], object]) -> Callable[[], object]:
    def after_a_pause() -> object:
        time.sleep(IDLE)
        return call()

    return after_a_pause


# ----------------------------------------------------------------------------- stdio


@contestant("stdio", "raw", "legacy", "orjson write / readline loop (2025-11-25)")
def raw_stdio(m: Measure) -> None:
    p = RawPipe(stdio_server())
    try:
        m.run(p.call)
    finally:
        p.close()


@contestant("stdio", "raw", "modern", "the same loop with the 2026-07-28 `_meta` in each request")
def raw_stdio_modern(m: Measure) -> None:
    p = RawPipe(stdio_server(), era="modern")
    try:
        m.run(p.call)
    finally:
        p.close()


@contestant("stdio", "raw", "modern", f"the same loop with {IDLE * 1000:g} ms idle before each call")
def raw_stdio_idle(m: Measure) -> None:
    p = RawPipe(stdio_server(), era="modern")
    try:
        m.run(_idle(p.call))
    finally:
        p.close()


@contestant("stdio", "raw", "modern", "the raw loop calling the tool with an `outputSchema` (unchecked)")
def raw_stdio_schema(m: Measure) -> None:
    p = RawPipe(stdio_server(schema=True), era="modern")
    try:
        m.run(functools.partial(p.request, "tools/call", {"name": "add", "arguments": ADD}))
    finally:
        p.close()


class SafePipe:
    """The least a correct thread-safe client does on stdio: an id per request matched to
    its answer, one lock, a bounded wait for the answer (2025-11-25 era)."""

    TIMEOUT = 30.0

    def __init__(self, argv: list[str]) -> None:
        self.proc = subprocess.Popen(argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE, bufsize=0)
        self.fd = self.proc.stdout.fileno()  # type: ignore[union-attr]
        self.buf = b""
        self.i = 0
        self.lock = threading.Lock()
        self.request("initialize", {"protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "safe", "version": "0"}})
        self.proc.stdin.write(b'{"jsonrpc":"2.0","method":"notifications/initialized"}\n')  # type: ignore[union-attr]

    def _line(self, deadline: float) -> bytes:
        while True:
            end = self.buf.find(b"\n")
            if end >= 0:
                line, self.buf = self.buf[:end], self.buf[end + 1:]
                return line
            left = deadline - time.monotonic()
            if left <= 0 or not select.select([self.fd], [], [], left)[0]:
                raise TimeoutError("no answer")
            chunk = os.read(self.fd, 65536)
            if not chunk:
                raise EOFError("server closed")
            self.buf += chunk

    def request(self, method: str, params: dict) -> Any:
        with self.lock:
            self.i += 1
            rid = self.i
            self.proc.stdin.write(orjson.dumps({"jsonrpc": "2.0", "id": rid, "method": method, "params": params}) + b"\n")  # type: ignore[union-attr]
            deadline = time.monotonic() + self.TIMEOUT
            while True:
                msg = orjson.loads(self._line(deadline))
                if msg.get("id") == rid:
                    return msg

    def call(self) -> Any:
        return self.request("tools/call", {"name": "echo", "arguments": ECHO})

    def close(self) -> None:
        self.proc.stdin.close()  # type: ignore[union-attr]
        self.proc.wait(5)


@contestant("stdio", "raw", "legacy", "a minimal correct thread-safe client: ids, one lock, a timeout", "raw-stdio")
def raw_stdio_safe(m: Measure) -> None:
    p = SafePipe(stdio_server())
    try:
        m.run(p.call)
    finally:
        p.close()


def _mcpsync_stdio(m: Measure, mode: str, *, schema: bool = False, idle: bool = False) -> None:
    from mcpsync import Client

    argv = stdio_server(schema)
    with Client.stdio(argv[0], argv[1:], mode=mode) as c:
        c.list_tools()
        call = functools.partial(c.call_tool, "add", ADD) if schema else functools.partial(c.call_tool, "echo", ECHO)
        m.run(_idle(call) if idle else call)


@contestant("stdio", "mcpsync", "legacy", "`Client.stdio(..., mode=\"legacy\").call_tool`", "raw-stdio")
def stdio_legacy(m: Measure) -> None:
    _mcpsync_stdio(m, "legacy")


@contestant("stdio", "mcpsync", "modern", "`Client.stdio(...).call_tool` (auto: 2026-07-28)", "raw-stdio-modern")
def stdio_modern(m: Measure) -> None:
    _mcpsync_stdio(m, "auto")


@contestant("stdio", "mcpsync", "modern", f"the same with {IDLE * 1000:g} ms idle before each call", "raw-stdio-idle")
def stdio_idle(m: Measure) -> None:
    _mcpsync_stdio(m, "auto", idle=True)


@contestant("stdio", "mcpsync", "modern", "`call_tool` of a tool with an `outputSchema` (checked)", "raw-stdio-schema")
def stdio_schema(m: Measure) -> None:
    _mcpsync_stdio(m, "auto", schema=True)


#: the many-threads rows: THREADS threads on one client, PER_THREAD calls each a round
THREADS = 16
PER_THREAD = 10


def _threaded(m: Measure, call: Callable[[], object]) -> None:
    """Rounds of THREADS threads making PER_THREAD calls each on one client (the measure's
    one call is a round): the workers live across rounds, started and ended by two C queues."""
    import queue

    go: queue.SimpleQueue[bool] = queue.SimpleQueue()
    done: queue.SimpleQueue[BaseException | None] = queue.SimpleQueue()

    def worker() -> None:
        while go.get():
            try:
                for _ in range(PER_THREAD):
                    call()
            except BaseException as exc:  # handed to the measuring thread
                done.put(exc)
            else:
                done.put(None)

    workers = [threading.Thread(target=worker, daemon=True) for _ in range(THREADS)]
    for w in workers:
        w.start()

    def round_() -> None:
        for _ in range(THREADS):
            go.put(True)
        for _ in range(THREADS):
            failed = done.get(timeout=60)
            if failed is not None:
                raise failed

    try:
        m.run(round_)
    finally:
        for _ in workers:
            go.put(False)
        for w in workers:
            w.join(10)


@contestant("stdio", "mcpsync", "legacy", f"{THREADS} threads on one `Client.stdio(..., mode=\"legacy\")`, "
            f"{PER_THREAD} calls each a round (instructions per call)", "raw-stdio-safe-16",
            scale=PER_THREAD, per_round=THREADS * PER_THREAD)
def threads_16(m: Measure) -> None:
    from mcpsync import Client

    argv = stdio_server()
    with Client.stdio(argv[0], argv[1:], mode="legacy") as c:
        c.list_tools()
        _threaded(m, functools.partial(c.call_tool, "echo", ECHO))


@contestant("stdio", "raw", "legacy", f"the minimal thread-safe client with {THREADS} threads, as threads-16",
            scale=PER_THREAD, per_round=THREADS * PER_THREAD)
def raw_stdio_safe_16(m: Measure) -> None:
    p = SafePipe(stdio_server())
    try:
        _threaded(m, p.call)
    finally:
        p.close()


def _raw_listing(m: Measure, tools: int) -> None:
    p = RawPipe(stdio_server(tools=tools), era="modern")
    try:
        m.run(functools.partial(p.request, "tools/list", {}))
    finally:
        p.close()


def _mcpsync_listing(m: Measure, tools: int) -> None:
    from mcpsync import Client

    argv = stdio_server(tools=tools)
    with Client.stdio(argv[0], argv[1:]) as c:
        m.run(functools.partial(c.list_tools, refresh=True))


@contestant("stdio", "raw", "modern", "`tools/list` of 100 tools (~47 KB), orjson to dicts", scale=10)
def raw_list_100(m: Measure) -> None:
    _raw_listing(m, 100)


@contestant("stdio", "mcpsync", "modern", "`list_tools(refresh=True)`, 100 tools (instructions per listing)",
            "raw-list-100", scale=10)
def list_100(m: Measure) -> None:
    _mcpsync_listing(m, 100)


@contestant("stdio", "raw", "modern", "`tools/list` of 1,000 tools (~0.5 MB), orjson to dicts", scale=100)
def raw_list_1000(m: Measure) -> None:
    _raw_listing(m, 1000)


@contestant("stdio", "mcpsync", "modern", "`list_tools(refresh=True)`, 1,000 tools (instructions per listing)",
            "raw-list-1000", scale=100)
def list_1000(m: Measure) -> None:
    _mcpsync_listing(m, 1000)


def _sdk(m: Measure, target: Any, mode: str, *, schema: bool = False) -> None:
    from mcp import Client as SdkClient

    async def main() -> None:
        async with SdkClient(target, mode=mode) as c:
            await c.list_tools()
            call = functools.partial(c.call_tool, "add", ADD) if schema else functools.partial(c.call_tool, "echo", ECHO)
            await m.arun(call)

    asyncio.run(main())


def _sdk_stdio(schema: bool = False) -> Any:
    from mcp.client.stdio import StdioServerParameters

    argv = stdio_server(schema)
    return StdioServerParameters(command=argv[0], args=argv[1:])


@contestant("stdio", "sdk", "legacy", "official SDK `mcp.Client(..., mode=\"legacy\").call_tool` (asyncio)", "raw-stdio")
def sdk_stdio(m: Measure) -> None:
    _sdk(m, _sdk_stdio(), "legacy")


@contestant("stdio", "sdk", "modern", "official SDK `mcp.Client(...).call_tool` (auto: 2026-07-28)", "raw-stdio-modern")
def sdk_stdio_modern(m: Measure) -> None:
    _sdk(m, _sdk_stdio(), "auto")


@contestant("stdio", "sdk", "modern", "official SDK, the tool with an `outputSchema` (checked)", "raw-stdio-schema")
def sdk_stdio_schema(m: Measure) -> None:
    _sdk(m, _sdk_stdio(schema=True), "auto", schema=True)


# ----------------------------------------------------------------------------- HTTP

_HEADERS = {"content-type": "application/json", "accept": "application/json, text/event-stream"}


class RawSocket:
    """The HTTP limit: HTTP/1.1 keep-alive on one plain socket, orjson both ways."""

    def __init__(self, url: str) -> None:
        host_port = url.split("/")[2]
        host, port = host_port.rsplit(":", 1)
        self.sock = socket.create_connection((host, int(port)))
        self.sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        self.r = self.sock.makefile("rb")
        self.head = (f"POST /mcp HTTP/1.1\r\nhost: {host_port}\r\ncontent-type: application/json\r\n"
                     f"accept: application/json, text/event-stream\r\nmcp-protocol-version: 2025-11-25\r\n").encode()
        self.i = 0

    def call(self) -> Any:
        self.i += 1
        body = orjson.dumps({"jsonrpc": "2.0", "id": self.i, "method": "tools/call",
                             "params": {"name": "echo", "arguments": ECHO}})
        self.sock.sendall(b"%scontent-length: %d\r\n\r\n%s" % (self.head, len(body), body))
        readline = self.r.readline
        status = readline()
        if b" 200 " not in status:
            raise RuntimeError(f"raw socket: {status!r}")
        length = 0
        while True:
            line = readline()
            if line == b"\r\n":
                break
            if line[:15].lower() == b"content-length:":
                length = int(line[15:])
        return orjson.loads(self.r.read(length))

    def close(self) -> None:
        self.r.close()
        self.sock.close()


@contestant("http", "raw", "legacy", "HTTP/1.1 keep-alive on a plain socket, orjson both ways")
def raw_http_socket(m: Measure) -> None:
    with http_server() as url:
        s = RawSocket(url)
        try:
            m.run(s.call)
        finally:
            s.close()


@contestant("http", "raw", "legacy", "urllib3 `HTTPConnectionPool.request` (one origin's pool), orjson both ways", "raw-http-socket")
def raw_http_urllib3(m: Measure) -> None:
    import urllib3

    with http_server() as url:
        host, port = url.split("/")[2].rsplit(":", 1)
        pool = urllib3.HTTPConnectionPool(host, int(port), maxsize=1)
        ids = iter(range(1, 1 << 62))

        def call() -> Any:
            body = orjson.dumps({"jsonrpc": "2.0", "id": next(ids), "method": "tools/call",
                                 "params": {"name": "echo", "arguments": ECHO}})
            return orjson.loads(pool.request("POST", "/mcp", body=body, headers=_HEADERS).data)

        try:
            m.run(call)
        finally:
            pool.close()


class BearerHook:
    """An auth hook as a user writes one: a bearer token, the headers made anew per request."""

    def __init__(self, token: str) -> None:
        self.token = token

    def headers(self, url: str, method: str) -> dict[str, str]:
        return {"Authorization": f"Bearer {self.token}"}


def _mcpsync_http(m: Measure, mode: str, path: str = "fast", auth: Any = None) -> None:
    from mcpsync import Client

    # the HTTP path is chosen when the client's pools are made (see _fasthttp.http_path)
    old = os.environ.pop("MCPSYNC_HTTP", None)
    if path == "urllib3":
        os.environ["MCPSYNC_HTTP"] = "urllib3"
    try:
        with http_server() as url, Client.http(url, mode=mode, auth=auth) as c:
            c.list_tools()
            m.run(functools.partial(c.call_tool, "echo", ECHO))
    finally:
        os.environ.pop("MCPSYNC_HTTP", None)
        if old is not None:
            os.environ["MCPSYNC_HTTP"] = old


@contestant("http", "mcpsync", "legacy", "`Client.http(..., mode=\"legacy\").call_tool` (JSON answers, keep-alive; the fast path)", "raw-http-socket")
def http_legacy(m: Measure) -> None:
    _mcpsync_http(m, "legacy")


@contestant("http", "mcpsync", "modern", "`Client.http(...).call_tool` (auto: 2026-07-28)", "raw-http-socket")
def http_modern(m: Measure) -> None:
    _mcpsync_http(m, "auto")


@contestant("http", "mcpsync", "legacy", "`http-legacy` with a bearer auth hook (`auth=`: a fresh header dict per request)",
            "raw-http-socket")
def http_auth(m: Measure) -> None:
    _mcpsync_http(m, "legacy", auth=BearerHook("t0k3n-0123456789abcdef"))


@contestant("http", "mcpsync", "legacy", "the same on the urllib3 path (`MCPSYNC_HTTP=urllib3`: proxies take it)", "raw-http-urllib3")
def http_legacy_urllib3(m: Measure) -> None:
    _mcpsync_http(m, "legacy", "urllib3")


@contestant("http", "sdk", "legacy", "official SDK `mcp.Client(url, mode=\"legacy\").call_tool` (httpx, asyncio)", "raw-http-socket")
def sdk_http(m: Measure) -> None:
    with http_server() as url:
        _sdk(m, url, "legacy")


@contestant("http", "sdk", "modern", "official SDK `mcp.Client(url).call_tool` (auto: 2026-07-28)", "raw-http-socket")
def sdk_http_modern(m: Measure) -> None:
    with http_server() as url:
        _sdk(m, url, "auto")
