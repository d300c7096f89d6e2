"""HTTP benchmarks: mcpsync against the official SDK client, same server, same run.

Run with::

    python -m pytest benchmarks/bench_http.py --benchmark-enable -q

One SDK server (tests/servers/http_sdk_server.py, Streamable HTTP under uvicorn on
127.0.0.1) serves every contestant. Groups:

* ``http-latency``: one ``tools/call echo`` round trip, sequential —
  mcpsync ``Client`` (modern era, auto-detected), the same in the legacy era,
  the official ``mcp.Client`` (async; driven from a sync thread through its event
  loop, which is how a sync agent harness has to use it), and the raw limit (one
  urllib3 POST with the same headers and a JSON-RPC body, answer read whole).
* ``http-throughput-16``: 16 threads × 10 calls through one shared mcpsync client;
  for the SDK, 160 calls as 16 concurrent tasks on its loop.

Both against the server answering with ``application/json`` and with SSE streams.

At the end the ratios to the SDK are printed (``-s`` to see them); they are also in
each benchmark's ``extra_info``. Nothing here asserts a timing.
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
_means: dict[str, float] = {}


@pytest.fixture(scope="module", params=["json", "sse"])
def server(request: pytest.FixtureRequest) -> Iterator[str]:
    """The SDK server answering with application/json, or with SSE streams (its default)."""
    port = hs.free_port()
    flags = ["--json"] if request.param == "json" else []
    _means.clear()
    with hs.run_server(hs.sdk_server_argv(port, *flags), port):
        yield f"http://127.0.0.1:{port}/mcp"
    _report(request.param)


def _report(kind: str) -> None:
    lines = []
    for group in ("latency", "throughput"):
        sdk = _means.get(f"sdk-{group}")
        for name, mean in sorted(_means.items()):
            if name.endswith(group) and sdk:
                lines.append(f"  {name:32s} {mean * 1e6:10.1f} µs   x{mean / sdk:5.2f} of the SDK")
    if lines:
        print(f"\nHTTP benchmark ratios, {kind} responses (mean time; lower is better):\n" + "\n".join(lines))


def _record(benchmark: Any, name: str) -> None:
    stats = getattr(benchmark, "stats", None)
    mean = None
    if stats is not None:
        inner = getattr(stats, "stats", stats)
        mean = getattr(inner, "mean", None)
    if mean:
        _means[name] = mean
        benchmark.extra_info["mean_us"] = round(mean * 1e6, 1)


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
def sdk(server: str) -> Iterator[_SDKClient]:
    client = _SDKClient(server)
    client.run(client.client.call_tool("echo", {"message": "warm"}))
    yield client
    client.close()


@pytest.fixture(scope="module", params=["auto", "legacy"])
def ours(server: str, request: pytest.FixtureRequest) -> Iterator[tuple[str, Client]]:
    client = Client(lambda: StreamableHTTPTransport(server), mode=request.param)
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


@pytest.mark.benchmark(group="http-latency")
def test_latency_mcpsync(benchmark: Any, ours: tuple[str, Client]) -> None:
    era, client = ours
    result = benchmark(client.call_tool, "echo", {"message": "x"})
    assert result.text == "Echo: x"
    _record(benchmark, f"mcpsync-{era}-latency")


@pytest.mark.benchmark(group="http-latency")
def test_latency_sdk(benchmark: Any, sdk: _SDKClient) -> None:
    def call() -> Any:
        return sdk.run(sdk.client.call_tool("echo", {"message": "x"}))

    result = benchmark(call)
    assert result.content[0].text == "Echo: x"
    _record(benchmark, "sdk-latency")


@pytest.mark.benchmark(group="http-latency")
def test_latency_raw_urllib3(benchmark: Any, server: str) -> None:
    import urllib3

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
        return http.request("POST", server, body=body, headers=headers).data

    assert b"Echo: x" in benchmark(call)
    _record(benchmark, "raw-urllib3-latency")


# ------------------------------------------------------------------ throughput


@pytest.mark.benchmark(group="http-throughput-16")
def test_throughput_mcpsync(benchmark: Any, ours: tuple[str, Client]) -> None:
    era, client = ours
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
    _record(benchmark, f"mcpsync-{era}-throughput")


@pytest.mark.benchmark(group="http-throughput-16")
def test_throughput_sdk(benchmark: Any, sdk: _SDKClient) -> None:
    async def burst() -> None:
        async def one(n: int) -> None:
            for i in range(PER_THREAD):
                r = await sdk.client.call_tool("echo", {"message": f"{n}-{i}"})
                assert r.content[0].text == f"Echo: {n}-{i}"

        await asyncio.gather(*(one(n) for n in range(THREADS)))

    benchmark.pedantic(lambda: sdk.run(burst()), rounds=3, iterations=1)
    benchmark.extra_info["calls_per_round"] = THREADS * PER_THREAD
    _record(benchmark, "sdk-throughput")
