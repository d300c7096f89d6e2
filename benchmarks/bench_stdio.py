"""stdio: mcpsync next to the official SDK client and the raw pipe limit, same server.

Each group's table row "ratio" is the median relative to the raw limit. Every
comparison is within one protocol era: the SDK client (and so the plain ``raw_pipe``
and ``ours``) speaks 2025-11-25; the ``-modern`` groups put mcpsync's default, the
2026-07-28 era with its per-request ``_meta``, next to a raw loop that sends that
``_meta`` too.
"""

from __future__ import annotations

import asyncio
import os
import statistics
import subprocess
import sys
import tempfile
import threading
import time

import orjson
import pytest

THREADS = 16
PER_THREAD = 50


ERAS = {  # era → (raw loop fixture, mcpsync fixture, benchmark group)
    "legacy": ("raw_pipe", "ours", "stdio-roundtrip"),
    "modern": ("raw_pipe_modern", "ours_modern", "stdio-roundtrip-modern"),
}


@pytest.mark.parametrize("era", list(ERAS))
def test_roundtrip_raw_pipe(benchmark, request, era):
    benchmark.group = ERAS[era][2]
    benchmark(request.getfixturevalue(ERAS[era][0]).call)


@pytest.mark.parametrize("era", list(ERAS))
def test_roundtrip_mcpsync(benchmark, request, era):
    benchmark.group = ERAS[era][2]
    r = benchmark(request.getfixturevalue(ERAS[era][1]).call_tool, "echo", {"message": "hi"})
    assert r.text == "hi"


@pytest.mark.benchmark(group="stdio-roundtrip")
def test_roundtrip_sdk_run_until_complete(benchmark, sdk_client):
    r = benchmark(sdk_client.call)
    assert r.content[0].text == "hi"


INTERLEAVED_CALLS = 500
INTERLEAVED_ROUNDS = 16


@pytest.mark.parametrize("era", list(ERAS))
@pytest.mark.benchmark(group="stdio-roundtrip-interleaved")
def test_roundtrip_interleaved_raw_and_mcpsync(benchmark, request, era):
    """One round = 500 raw-pipe calls and 500 mcpsync calls, each timed alone.

    The two alternate in every round of one test (raw first in even rounds, mcpsync
    first in odd ones), so drift in the machine (CPU frequency, neighbours, which core
    is free) falls on both alike. Two ratios go to extra_info and the summary: the
    ratio of the medians over all rounds, and the median over the rounds of each
    round's own ratio (its two blocks ran back to back, so a change of the machine's
    state between rounds does not skew it). Both are steadier than the ratio of the
    two round-trip benchmarks above, which run one after the other.
    """
    raw_pipe = request.getfixturevalue(ERAS[era][0])
    ours = request.getfixturevalue(ERAS[era][1])
    samples: dict[str, list[float]] = {"raw": [], "mcpsync": []}
    per_round: list[float] = []
    clock = time.perf_counter

    def mcpsync_call():
        return ours.call_tool("echo", {"message": "hi"})

    def block(call):
        out = []
        for _ in range(INTERLEAVED_CALLS):
            t0 = clock()
            call()
            out.append(clock() - t0)
        return out

    def round_():
        pair = [("raw", raw_pipe.call), ("mcpsync", mcpsync_call)]
        if len(per_round) % 2:
            pair.reverse()
        got = {name: block(call) for name, call in pair}
        for name, out in got.items():
            samples[name].extend(out)
        per_round.append(statistics.median(got["mcpsync"]) / statistics.median(got["raw"]))

    round_()  # warm-up, not counted
    for out in samples.values():
        out.clear()
    per_round.clear()
    benchmark.pedantic(round_, rounds=INTERLEAVED_ROUNDS, iterations=1)
    raw_p50 = statistics.median(samples["raw"])
    ours_p50 = statistics.median(samples["mcpsync"])
    benchmark.extra_info.update(
        era=era,
        raw_p50_us=round(raw_p50 * 1e6, 2),
        mcpsync_p50_us=round(ours_p50 * 1e6, 2),
        p50_ratio=round(ours_p50 / raw_p50, 3),
        paired_ratio=round(statistics.median(per_round), 3),
        round_ratios=[round(r, 3) for r in per_round],
    )


@pytest.mark.benchmark(group="stdio-16-threads")
def test_throughput_mcpsync_16_threads(benchmark, ours):
    """One round = 16 threads x 50 calls on one shared Client."""

    def round_():
        errors = []

        def work(t):
            for i in range(PER_THREAD):
                m = f"{t}-{i}"
                if ours.call_tool("echo", {"message": m}).text != m:
                    errors.append(m)

        ts = [threading.Thread(target=work, args=(t,)) for t in range(THREADS)]
        for t in ts:
            t.start()
        for t in ts:
            t.join()
        assert not errors

    benchmark.pedantic(round_, rounds=10, iterations=1, warmup_rounds=1)
    benchmark.extra_info["calls_per_round"] = THREADS * PER_THREAD


@pytest.mark.benchmark(group="stdio-16-threads")
def test_throughput_sdk_16_tasks(benchmark, sdk_client):
    """One round = 16 concurrent tasks x 50 calls on one ClientSession."""

    async def work(t):
        for i in range(PER_THREAD):
            m = f"{t}-{i}"
            r = await sdk_client.session.call_tool("echo", {"message": m})
            assert r.content[0].text == m

    async def all_():
        await asyncio.gather(*(work(t) for t in range(THREADS)))

    benchmark.pedantic(lambda: sdk_client.run(all_()), rounds=10, iterations=1, warmup_rounds=1)
    benchmark.extra_info["calls_per_round"] = THREADS * PER_THREAD


def _tools_list_json() -> bytes:
    from benchmarks.servers.fast_server import TOOLS

    return orjson.dumps({"tools": TOOLS})


@pytest.mark.benchmark(group="codec-tools-list-50")
def test_decode_tools_list_raw_orjson(benchmark):
    data = _tools_list_json()
    benchmark(orjson.loads, data)


@pytest.mark.benchmark(group="codec-tools-list-50")
def test_decode_tools_list_mcpsync_msgspec(benchmark):
    from mcpsync._decoders import decode_result

    data = _tools_list_json()
    r = benchmark(decode_result, "tools/list", data)
    assert len(r.tools) == 50


def _decode_and_read_schemas(data: bytes):
    from mcpsync._decoders import decode_result

    r = decode_result("tools/list", data)
    for t in r.tools:
        t.input_schema, t.output_schema
    return r


@pytest.mark.benchmark(group="codec-tools-list-50")
def test_decode_tools_list_mcpsync_reading_every_schema(benchmark):
    # the schemas are decoded on first access; this is the cost when a caller reads all
    r = benchmark(_decode_and_read_schemas, _tools_list_json())
    assert r.tools[0].input_schema["type"] == "object"


@pytest.mark.benchmark(group="codec-tools-list-50")
def test_decode_tools_list_sdk_pydantic(benchmark):
    from mcp.types import ListToolsResult

    data = _tools_list_json()
    r = benchmark(ListToolsResult.model_validate_json, data)
    assert len(r.tools) == 50


# A fresh interpreter importing a package, as an installed one is imported: with its
# bytecode cached (pip compiles it at install time). An environment that sets
# PYTHONDONTWRITEBYTECODE would otherwise have every round compile every module of the
# package from source; the untimed warm-up round fills a private cache instead.
_IMPORT_ENV = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
_IMPORT_ENV["PYTHONPYCACHEPREFIX"] = tempfile.mkdtemp(prefix="mcpsync-bench-pyc-")


def _import_time(module: str) -> None:
    subprocess.run([sys.executable, "-c", f"import {module}"], check=True, env=_IMPORT_ENV)


def _bench_import(benchmark, module: str) -> None:
    benchmark.pedantic(_import_time, args=(module,), rounds=7, iterations=1, warmup_rounds=1)


@pytest.mark.benchmark(group="import")
def test_import_raw_python(benchmark):
    _bench_import(benchmark, "sys")


@pytest.mark.benchmark(group="import")
def test_import_mcpsync(benchmark):
    _bench_import(benchmark, "mcpsync")


@pytest.mark.benchmark(group="import")
def test_import_sdk_client(benchmark):
    _bench_import(benchmark, "mcp.client.session")
