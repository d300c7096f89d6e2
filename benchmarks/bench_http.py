"""HTTP benchmarks: mcpsync against the official SDK client, same server, same run.

Run with::

    taskset -c 0 python -m pytest benchmarks/bench_http.py --benchmark-enable -q

One SDK server (tests/servers/http_sdk_server.py, Streamable HTTP under uvicorn on
127.0.0.1) serves every contestant. Groups:

* ``http-latency``: one ``tools/call echo`` round trip, sequential —
  mcpsync ``Client`` (modern era, auto-detected), the same in the legacy era,
  the official ``mcp.Client`` (async; driven from a sync thread through its event
  loop, which is how a sync agent harness has to use it), and the raw limit (one
  urllib3 POST with the same headers and a JSON-RPC body, answer read whole).
* ``http-throughput-16``: 16 threads × 10 calls through one shared mcpsync client;
  for the SDK, 160 calls as 16 concurrent tasks on its loop.
* ``sse-parse-*``: mcpsync's SSE parser against sseclient-py, both fed 64 KiB reads:
  1000 small events, and one 4 MiB event.

Both against the server answering with ``application/json`` and with SSE streams.

Groups are suffixed ``-json`` / ``-sse`` (how the server answers); the ratio table of
benchmarks/conftest.py compares each group against its ``raw`` entry (throughput
groups: against the fastest). Nothing here asserts a timing.
"""

from __future__ import annotations

import asyncio
import json
import sys
import threading
from concurrent.futures import Future
from pathlib import Path
from typing import Any, Callable, Iterator

import pytest

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tests" / "servers"))
sys.path.insert(0, str(ROOT))

import http_support as hs  # noqa: E402

from mcpsync._client import Client  # noqa: E402
from mcpsync.transports.streamable_http import StreamableHTTPTransport  # noqa: E402

THREADS = 16
PER_THREAD = 10


@pytest.fixture(scope="module", params=["json", "sse"])
def server(request: pytest.FixtureRequest) -> Iterator[tuple[str, str]]:
    """The SDK server answering with application/json, or with SSE streams (its default)."""
    port = hs.free_port()
    flags = ["--json"] if request.param == "json" else []
    with hs.run_server(hs.sdk_server_argv(port, *flags), port):
        yield f"http://127.0.0.1:{port}/mcp", request.param


class _SDKClient:
    """The official async client, owned by a loop thread, called from sync code."""

    def __init__(self, url: str) -> None:
        from mcp import Client as SDKClient

        self.loop = asyncio.new_event_loop()
        self._ready: Future[Any] = Future()
        self._stop: asyncio.Event | None = None
        self._thread = threading.Thread(target=self.loop.run_forever, daemon=True)
        self._thread.start()

        async def hold() -> None:
            self._stop = asyncio.Event()
            try:
                async with SDKClient(url) as client:
                    self._ready.set_result(client)
                    await self._stop.wait()
            except BaseException as exc:  # noqa: BLE001
                if not self._ready.done():
                    self._ready.set_exception(exc)
                raise

        self._holder = asyncio.run_coroutine_threadsafe(hold(), self.loop)
        self.client = self._ready.result(30)

    def run(self, coro: Any) -> Any:
        return asyncio.run_coroutine_threadsafe(coro, self.loop).result(30)

    def close(self) -> None:
        if self._stop is not None:
            self.loop.call_soon_threadsafe(self._stop.set)
        try:
            self._holder.result(10)
        except BaseException:  # noqa: BLE001
            pass
        self.loop.call_soon_threadsafe(self.loop.stop)
        self._thread.join(5)


@pytest.fixture(scope="module")
def sdk(server: tuple[str, str]) -> Iterator[_SDKClient]:
    client = _SDKClient(server[0])
    client.run(client.client.call_tool("echo", {"message": "warm"}))
    yield client
    client.close()


@pytest.fixture(scope="module", params=["auto", "legacy"])
def ours(server: tuple[str, str], request: pytest.FixtureRequest) -> Iterator[tuple[str, Client]]:
    url = server[0]
    client = Client(lambda: StreamableHTTPTransport(url), mode=request.param)
    client.call_tool("echo", {"message": "warm"})
    yield ("modern" if client.era == "modern" else "legacy"), client
    client.close()


def _threads(fn: Callable[[int], None]) -> None:
    threads = [threading.Thread(target=fn, args=(n,)) for n in range(THREADS)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)


# ------------------------------------------------------------------ latency


def test_latency_mcpsync(benchmark: Any, server: tuple[str, str], ours: tuple[str, Client]) -> None:
    era, client = ours
    benchmark.group = f"http-latency-{server[1]}"
    benchmark.extra_info["era"] = era
    result = benchmark(client.call_tool, "echo", {"message": "x"})
    assert result.text == "Echo: x"


def test_latency_sdk(benchmark: Any, server: tuple[str, str], sdk: _SDKClient) -> None:
    benchmark.group = f"http-latency-{server[1]}"

    def call() -> Any:
        return sdk.run(sdk.client.call_tool("echo", {"message": "x"}))

    result = benchmark(call)
    assert result.content[0].text == "Echo: x"


def test_latency_raw_urllib3(benchmark: Any, server: tuple[str, str]) -> None:
    import urllib3

    url = server[0]
    benchmark.group = f"http-latency-{server[1]}"
    http = urllib3.PoolManager(maxsize=2)
    body = json.dumps(
        {
            "jsonrpc": "2.0",
            "id": 1,
            "method": "tools/call",
            "params": {"name": "echo", "arguments": {"message": "x"}, "_meta": hs.modern_meta()},
        }
    ).encode()
    headers = {
        "Content-Type": "application/json",
        "Accept": "application/json, text/event-stream",
        "MCP-Protocol-Version": hs.MODERN,
        "Mcp-Method": "tools/call",
        "Mcp-Name": "echo",
    }

    def call() -> bytes:
        return http.request("POST", url, body=body, headers=headers).data

    assert b"Echo: x" in benchmark(call)


# ------------------------------------------------------------------ throughput


def test_throughput_mcpsync(benchmark: Any, server: tuple[str, str], ours: tuple[str, Client]) -> None:
    era, client = ours
    benchmark.group = f"http-throughput-16-{server[1]}"
    benchmark.extra_info["era"] = era
    errors: list[BaseException] = []

    def work(n: int) -> None:
        try:
            for i in range(PER_THREAD):
                assert client.call_tool("echo", {"message": f"{n}-{i}"}).text == f"Echo: {n}-{i}"
        except BaseException as exc:  # noqa: BLE001
            errors.append(exc)

    benchmark.pedantic(_threads, args=(work,), rounds=3, iterations=1)
    assert not errors
    benchmark.extra_info["calls_per_round"] = THREADS * PER_THREAD


def test_throughput_sdk(benchmark: Any, server: tuple[str, str], sdk: _SDKClient) -> None:
    benchmark.group = f"http-throughput-16-{server[1]}"

    async def burst() -> None:
        async def one(n: int) -> None:
            for i in range(PER_THREAD):
                r = await sdk.client.call_tool("echo", {"message": f"{n}-{i}"})
                assert r.content[0].text == f"Echo: {n}-{i}"

        await asyncio.gather(*(one(n) for n in range(THREADS)))

    benchmark.pedantic(lambda: sdk.run(burst()), rounds=3, iterations=1)
    benchmark.extra_info["calls_per_round"] = THREADS * PER_THREAD


# ------------------------------------------------------------------ SSE parsing

_SMALL = b'event: message\r\ndata: {"jsonrpc":"2.0","id":1,"result":{"content":[{"type":"text","text":"Echo: x"}]}}\r\n\r\n'
_SMALL_STREAM = [(_SMALL * 1000)[i : i + 65536] for i in range(0, len(_SMALL) * 1000, 65536)]
_BIG = b"data: " + b"x" * (4 * 1024 * 1024) + b"\n\n"
_BIG_STREAM = [_BIG[i : i + 65536] for i in range(0, len(_BIG), 65536)]


def _ours(chunks: list[bytes]) -> int:
    from mcpsync.transports._sse import SSEParser

    parser = SSEParser(max_size=8 * 1024 * 1024)
    return sum(len(parser.feed(c)) for c in chunks)


def _sseclient(chunks: list[bytes]) -> int:
    import sseclient

    return sum(1 for _ in sseclient.SSEClient(iter(chunks)).events())


@pytest.mark.parametrize("parser", [_ours, _sseclient], ids=["mcpsync", "sseclient-py"])
def test_parse_1000_small_events(benchmark: Any, parser: Callable[[list[bytes]], int]) -> None:
    benchmark.group = "sse-parse-1000-small"
    assert benchmark(parser, _SMALL_STREAM) == 1000


@pytest.mark.parametrize("parser", [_ours, _sseclient], ids=["mcpsync", "sseclient-py"])
def test_parse_one_4mib_event(benchmark: Any, parser: Callable[[list[bytes]], int]) -> None:
    benchmark.group = "sse-parse-4mib"
    assert benchmark(parser, _BIG_STREAM) == 1
