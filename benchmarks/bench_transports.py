"""Per-call latency of every transport mcpsync ships, side by side in one run.

Run with::

    python -m pytest benchmarks/bench_transports.py --benchmark-enable -q -s

Every contestant calls ``echo`` on the bundled demo registry (``mcpsync.server.demo``)
through one mcpsync ``Client`` (legacy era, so no per-request ``_meta``), sequentially:

* ``local-channel``: the Local transport's channel alone (the raw in-process limit);
* ``local``: ``Client`` over the Local transport (no serialisation, no thread hop);
* ``stdio``: ``Client`` over stdio to ``python -m mcpsync.server.demo``;
* ``websocket`` / ``grpc`` / ``grpc-call``: ``Client`` → the mcpsync bridge (in this
  process, on 127.0.0.1) → the same demo server over stdio. These pay one more hop
  than stdio (the bridge's relay), as they do in deployment.
* ``function``: calling the Python function directly, the floor.

At the end the ratios to stdio are printed (``-s``) and stored in ``extra_info``.
Nothing here asserts a timing.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any, Callable, Iterator

import pytest

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from mcpsync import Client  # noqa: E402
from mcpsync._decoders import decode_result  # noqa: E402
from mcpsync._messages import EmptyResult  # noqa: E402
from mcpsync.server._upstream import upstream_factory  # noqa: E402
from mcpsync.server.bridge import Bridge  # noqa: E402
from mcpsync.server.demo import echo, registry  # noqa: E402
from mcpsync.transports.local import LocalChannel  # noqa: E402

DEMO = [sys.executable, "-m", "mcpsync.server.demo"]
ARGS = {"message": "x"}
_means: dict[str, float] = {}


def _local_client_works() -> bool:
    try:
        return isinstance(decode_result("ping", EmptyResult()), EmptyResult)
    except Exception:  # noqa: BLE001
        return False


@pytest.fixture(scope="module")
def bridge() -> Iterator[Bridge]:
    with Bridge(upstream_factory(DEMO)) as b:
        yield b


def _factories(bridge: Bridge) -> dict[str, Callable[[], Any]]:
    from mcpsync.transports.grpc import GrpcTransport
    from mcpsync.transports.stdio import StdioTransport
    from mcpsync.transports.websocket import WebSocketTransport

    ws = bridge.serve_websocket("127.0.0.1", 0)
    g = bridge.serve_grpc("127.0.0.1", 0)
    return {
        "stdio": lambda: StdioTransport(DEMO[0], DEMO[1:]),
        "websocket": lambda: WebSocketTransport(ws.url),
        "grpc": lambda: GrpcTransport(g.target),
        "grpc-call": lambda: GrpcTransport(g.target, scope="request"),
        "local": lambda: LocalChannel(registry),
    }


@pytest.fixture(scope="module")
def factories(bridge: Bridge) -> dict[str, Callable[[], Any]]:
    return _factories(bridge)


def _record(benchmark: Any, name: str) -> None:
    stats = getattr(benchmark, "stats", None)
    mean = getattr(getattr(stats, "stats", None), "mean", None)
    if mean:
        _means[name] = mean
        benchmark.extra_info["mean_us"] = round(mean * 1e6, 2)
        base = _means.get("stdio")
        if base:
            benchmark.extra_info["ratio_to_stdio"] = round(mean / base, 3)


@pytest.fixture(scope="module", autouse=True)
def _report() -> Iterator[None]:
    yield
    base = _means.get("stdio")
    if _means:
        lines = [f"  {name:14s} {mean * 1e6:9.2f} µs" + (f"  ({mean / base:.3g}× stdio)" if base else "")
                 for name, mean in sorted(_means.items(), key=lambda kv: kv[1])]
        print("\ntransport latency, one sequential tools/call echo (mean):\n" + "\n".join(lines))


@pytest.mark.benchmark(group="transport-latency")
@pytest.mark.parametrize("name", ["stdio", "websocket", "grpc", "grpc-call", "local"])
def test_latency(benchmark: Any, factories: dict[str, Callable[[], Any]], name: str) -> None:
    if name == "local" and not _local_client_works():
        pytest.skip("the Client does not yet take in-process results from the Local channel")
    mode = "modern" if name == "grpc-call" else "legacy"
    with Client(factories[name], mode=mode) as client:
        client.connect()
        result = benchmark(client.call_tool, "echo", ARGS)
    assert result.text == "x"
    _record(benchmark, name)


@pytest.mark.benchmark(group="transport-latency")
def test_latency_local_channel(benchmark: Any) -> None:
    chan = LocalChannel(registry)
    params = {"name": "echo", "arguments": ARGS}
    assert benchmark(chan.request, "tools/call", params).text == "x"
    _record(benchmark, "local-channel")


@pytest.mark.benchmark(group="transport-latency")
def test_latency_function(benchmark: Any) -> None:
    assert benchmark(echo, **ARGS) == "x"
    _record(benchmark, "function")
