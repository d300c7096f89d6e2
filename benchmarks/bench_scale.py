"""Scale-out benchmark: Ray workers, each with its per-process client, against server
replicas behind nginx.

Run with (not part of the test suite; needs ray, nginx: ``bash tests/setup/50-balancers.sh``)::

    python -m pytest benchmarks/bench_scale.py --benchmark-enable -o python_files='bench_*.py' -s

Set-up (started by the module, torn down after it; 127.0.0.1 only):

* 3 official-SDK Streamable HTTP servers in stateless mode, answering with
  ``application/json`` (tests/servers/replica_server.py), behind nginx round-robin
  (HTTP/1.1 keep-alive upstreams, ``proxy_buffering off``: tests/servers/balancers.py);
* a local Ray instance, ``ray.init(num_cpus=2)``;
* ``N`` = 1, 2, 4 threaded Ray actors (the workers), each with ``THREADS`` threads calling
  the read-only tool ``whoami`` ``CALLS`` times through the one client of its process
  (``ClientSpec.http(...).client()``).

Group ``scale-ray``: one round = every worker's threads make all their calls (the work
grows with ``N``). Each benchmark's ``extra_info`` holds ``calls_per_s`` (calls / wall
time of the round, median round), and ``p50_ms`` / ``p99_ms`` of the per-call latency
seen by the workers over all rounds; a summary table is printed at the end.

The machine's limits bound what this shows: every process (Ray's raylet and GCS, the
workers, nginx, three Python servers) shares the machine's cores, so past the core count
the curve flattens and latency rises: the numbers say where *this* machine saturates,
and docs/scaling.md says how they extrapolate. Nothing here asserts a timing.
"""

from __future__ import annotations

import os
import shutil
import sys
import tempfile
import time
from pathlib import Path
from typing import Any, Iterator

import pytest

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from mcpsync import ClientSpec, Timeouts  # noqa: E402
from tests.servers.balancers import Replicas, binary, nginx, nginx_round_robin  # noqa: E402
from tests.servers.http_support import free_port  # noqa: E402

ray = pytest.importorskip("ray", reason="needs ray (pip install 'mcpsync[ray]')")
if binary("nginx") is None:
    pytest.skip("needs nginx (bash tests/setup/50-balancers.sh)", allow_module_level=True)

WORKERS = (1, 2, 4)
THREADS = 8
CALLS = 50
ROUNDS = 3
RESULTS: dict[int, dict[str, float]] = {}


def cpu_seconds(pids: list[int]) -> float:
    """User + system CPU time of ``pids`` so far (Linux /proc), in seconds."""
    total = 0
    for pid in pids:
        try:
            with open(f"/proc/{pid}/stat") as f:
                fields = f.read().rsplit(")", 1)[1].split()
            total += int(fields[11]) + int(fields[12])
        except (OSError, IndexError, ValueError):
            pass
    return total / os.sysconf("SC_CLK_TCK")


def _family(root: int) -> list[int]:
    """``root`` and its children (nginx's master and workers)."""
    pids = [root]
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                with open(f"/proc/{entry}/stat") as f:
                    if int(f.read().rsplit(")", 1)[1].split()[1]) == root:
                        pids.append(int(entry))
            except (OSError, ValueError, IndexError):
                pass
    return pids


class Fleet:
    def __init__(self, url: str, replicas: list[int], balancer: list[int]) -> None:
        self.url = url
        self.replicas = replicas
        self.balancer = balancer


@pytest.fixture(scope="module")
def fleet(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Fleet]:
    """Three stateless replicas behind nginx round-robin."""
    tmp = tmp_path_factory.mktemp("scale")
    port = free_port()
    with Replicas(3, tmp / "calls.log", stateless=True, json_response=True) as reps:
        with nginx(nginx_round_robin(reps.ports, port), port, tmp / "nginx"):
            master = int((tmp / "nginx" / "nginx.pid").read_text().split()[0])
            yield Fleet(f"http://127.0.0.1:{port}/mcp", [p.pid for p in reps.procs if p is not None], _family(master))


@pytest.fixture(scope="module")
def ray_local() -> Iterator[None]:
    temp = tempfile.mkdtemp(prefix="mcpsync-ray-", dir="/tmp")
    ray.init(address="local", num_cpus=2, include_dashboard=False, object_store_memory=80 * 1024 * 1024,
             _temp_dir=temp, log_to_driver=False,
             runtime_env={"env_vars": {"PYTHONPATH": str(ROOT)}})
    try:
        yield
    finally:
        ray.shutdown()
        shutil.rmtree(temp, ignore_errors=True)


@ray.remote(num_cpus=0, max_concurrency=THREADS)
class Worker:
    """A Ray worker process: its threads share the process's client."""

    def __init__(self, spec: ClientSpec) -> None:
        self.spec = spec

    def warm(self) -> str:
        return str(self.spec.client().call_tool("whoami").text)

    def cpu(self) -> float:
        return cpu_seconds([os.getpid()])

    def burst(self, calls: int) -> list[float]:
        client = self.spec.client()
        took = []
        for _ in range(calls):
            t0 = time.perf_counter()
            client.call_tool("whoami")
            took.append(time.perf_counter() - t0)
        return took


def _percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


@pytest.mark.benchmark(group="scale-ray")
@pytest.mark.parametrize("workers", WORKERS)
def test_ray_workers_against_nginx_replicas(benchmark: Any, fleet: Fleet, ray_local: None, workers: int) -> None:
    spec = ClientSpec.http(fleet.url, name="fleet", timeouts=Timeouts(request=30))
    actors = [Worker.remote(spec) for _ in range(workers)]
    ray.get([a.warm.remote() for a in actors], timeout=120)
    cpu0 = (sum(ray.get([a.cpu.remote() for a in actors], timeout=60)), cpu_seconds(fleet.replicas),
            cpu_seconds(fleet.balancer))
    latencies: list[float] = []
    walls: list[float] = []

    def round_() -> None:
        t0 = time.perf_counter()
        refs = [a.burst.remote(CALLS) for a in actors for _ in range(THREADS)]
        for took in ray.get(refs, timeout=300):
            latencies.extend(took)
        walls.append(time.perf_counter() - t0)

    benchmark.pedantic(round_, rounds=ROUNDS, iterations=1, warmup_rounds=0)
    cpu1 = (sum(ray.get([a.cpu.remote() for a in actors], timeout=60)), cpu_seconds(fleet.replicas),
            cpu_seconds(fleet.balancer))
    calls = workers * THREADS * CALLS
    wall = sorted(walls)[len(walls) // 2]
    done = calls * ROUNDS
    info = {
        "workers": workers,
        "calls_per_round": calls,
        "calls_per_s": round(calls / wall, 1),
        "p50_ms": round(_percentile(latencies, 0.50) * 1e3, 2),
        "p99_ms": round(_percentile(latencies, 0.99) * 1e3, 2),
        "cpus": os.cpu_count(),
        # CPU time per call, by component (user + system, /proc): what extrapolation needs
        "cpu_ms_per_call_workers": round((cpu1[0] - cpu0[0]) / done * 1e3, 3),
        "cpu_ms_per_call_replicas": round((cpu1[1] - cpu0[1]) / done * 1e3, 3),
        "cpu_ms_per_call_nginx": round((cpu1[2] - cpu0[2]) / done * 1e3, 3),
        "load_avg_1m": round(os.getloadavg()[0], 1),
    }
    benchmark.extra_info.update(info)
    RESULTS[workers] = info
    for a in actors:
        ray.kill(a, no_restart=True)


def teardown_module() -> None:
    if not RESULTS:
        return
    lines = [f"\nscale-ray: {THREADS} threads x {CALLS} calls per worker, {ROUNDS} rounds, "
             f"3 stateless replicas behind nginx, {os.cpu_count()} CPUs",
             f"{'workers':>8} {'calls/s':>10} {'p50 ms':>8} {'p99 ms':>8} {'CPU ms/call: workers':>21} "
             f"{'replicas':>9} {'nginx':>7} {'load 1m':>8}"]
    for n in sorted(RESULTS):
        r = RESULTS[n]
        lines.append(f"{n:>8} {r['calls_per_s']:>10} {r['p50_ms']:>8} {r['p99_ms']:>8} "
                     f"{r['cpu_ms_per_call_workers']:>21} {r['cpu_ms_per_call_replicas']:>9} "
                     f"{r['cpu_ms_per_call_nginx']:>7} {r['load_avg_1m']:>8}")
    print("\n".join(lines), file=sys.__stderr__)
