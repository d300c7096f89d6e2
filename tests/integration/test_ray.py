"""Ray, for real: actors call tools through their per-process clients.

A local Ray instance (``ray.init(num_cpus=2)``, started by the test, bounded in time):
4 threaded actors × 8 threads, each actor with its own stdio server child built from a
:class:`~mcpsync.ClientSpec`. Every answer reaches the thread that asked; the counts add
up (issued = succeeded + failed; the server's log holds each succeeded call once and no
call twice); an actor killed mid-run (``ray.kill``) leaves no server process behind.
"""

from __future__ import annotations

import os
import shutil
import tempfile
import threading
import time
from collections import Counter
from pathlib import Path
from typing import Any, Iterator

import pytest

from mcpsync import ClientSpec, MCPError, Timeouts
from tests.conftest import ROOT, server_command
from tests.servers.chaos_support import is_gone, wait_gone

ray = pytest.importorskip("ray", reason="ray is not installed (pip install 'mcpsync[ray]')")

pytestmark = [pytest.mark.slow, pytest.mark.timeout(420)]

ACTORS = 4
THREADS = 8
CALLS = 25  # per thread, for the actors that run to the end
VICTIM_CALLS = 1500  # per thread of the actor killed mid-run (bounded; killed long before)
GET = 180.0


@pytest.fixture(scope="module")
def ray_local() -> Iterator[None]:
    """A private local Ray instance: 2 CPUs, no dashboard, a small object store."""
    temp = tempfile.mkdtemp(prefix="mcpsync-ray-", dir="/tmp")  # short: Ray's socket paths
    try:
        ray.init(
            address="local",
            num_cpus=2,
            include_dashboard=False,
            object_store_memory=80 * 1024 * 1024,
            _temp_dir=temp,
            log_to_driver=False,
            runtime_env={"env_vars": {"PYTHONPATH": os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")]))}},
        )
    except Exception as exc:  # noqa: BLE001 - the reason is the skip message
        shutil.rmtree(temp, ignore_errors=True)
        pytest.skip(f"a local Ray instance could not start here: {type(exc).__name__}: {exc}")
    try:
        yield
    finally:
        ray.shutdown()
        shutil.rmtree(temp, ignore_errors=True)


@ray.remote(num_cpus=0, max_concurrency=THREADS)
class Agent:
    """A threaded actor: THREADS of its methods run at once, sharing one client."""

    def __init__(self, spec: ClientSpec) -> None:
        self.spec = spec

    def pids(self) -> tuple[int, int]:
        client = self.spec.client()
        return os.getpid(), int(client.call_tool("pid").text)

    def work(self, actor: int, thread: int, calls: int) -> dict[str, Any]:
        client = self.spec.client()
        ok: list[tuple[str, str]] = []
        failed: list[tuple[str, str]] = []
        for i in range(calls):
            key = f"a{actor}-t{thread}-{i}"
            try:
                ok.append((key, client.call_tool("echo", {"key": key}).text))
            except MCPError as exc:
                failed.append((key, type(exc).__name__))
        return {"thread": thread, "issued": calls, "ok": ok, "failed": failed, "client": id(client),
                "ident": threading.get_ident()}


def _logged(log: Path) -> list[str]:
    return [line.split()[3] for line in log.read_text().splitlines() if line.startswith("call ") and " echo " in line]


def test_actors_share_one_client_per_process_and_leave_no_server_behind(ray_local: None, tmp_path: Path) -> None:
    log = tmp_path / "calls.log"
    log.touch()
    # --linger: the server ignores EOF on its stdin, so only its tie to the worker's life
    # (PR_SET_PDEATHSIG, mcpsync/transports/_spawn.py) ends it when ray.kill SIGKILLs the worker
    cmd = server_command("chaos_server.py", "--log", str(log), "--linger")
    spec = ClientSpec.stdio(cmd[0], cmd[1:], mode="legacy", name="chaos",
                            timeouts=Timeouts(connect=30, request=30, close=1))
    actors = [Agent.remote(spec) for _ in range(ACTORS)]
    pids = ray.get([a.pids.remote() for a in actors], timeout=GET)
    assert len({w for w, _ in pids}) == ACTORS and len({s for _, s in pids}) == ACTORS
    victim = ACTORS - 1
    refs = {
        (a, t): actors[a].work.remote(a, t, VICTIM_CALLS if a == victim else CALLS)
        for a in range(ACTORS)
        for t in range(THREADS)
    }
    # kill the victim mid-run: once its calls are reaching its server
    deadline = time.monotonic() + GET
    while sum(1 for k in _logged(log) if k.startswith(f"a{victim}-")) < 50:
        assert time.monotonic() < deadline, "the victim's calls never reached its server"
        time.sleep(0.05)
    ray.kill(actors[victim], no_restart=True)
    worker_pid, server_pid = pids[victim]
    assert wait_gone([worker_pid], 30.0) == [], "ray.kill left the actor's worker process running"
    assert wait_gone([server_pid], 15.0) == [], "the killed actor's server child outlived its worker"

    issued = succeeded = failed = 0
    for (a, t), ref in refs.items():
        if a == victim:
            with pytest.raises(ray.exceptions.RayActorError):
                ray.get(ref, timeout=GET)
            continue
        r = ray.get(ref, timeout=GET)
        assert r["thread"] == t
        assert r["issued"] == CALLS
        assert len(r["ok"]) + len(r["failed"]) == r["issued"], r
        for key, text in r["ok"]:  # each answer reached the thread that asked
            assert text == key and key.startswith(f"a{a}-t{t}-"), (key, text)
        issued += r["issued"]
        succeeded += len(r["ok"])
        failed += len(r["failed"])
    assert issued == succeeded + failed == (ACTORS - 1) * THREADS * CALLS
    assert failed == 0, "no call should fail against a healthy server"
    counts = Counter(_logged(log))
    assert all(n == 1 for n in counts.values()), [k for k, n in counts.items() if n > 1][:5]
    survivors = {k for k in counts if not k.startswith(f"a{victim}-")}
    assert len(survivors) == succeeded

    # the survivors' clients are one per process: each actor kept its one server
    assert ray.get([a.pids.remote() for a in actors[:victim]], timeout=GET) == pids[:victim]
    for a in actors[:victim]:
        ray.kill(a, no_restart=True)
    assert wait_gone([p for pair in pids[:victim] for p in pair], 30.0) == []
    assert all(is_gone(s) for _, s in pids)


@ray.remote(num_cpus=1)
def _task(spec: ClientSpec, n: int) -> tuple[int, int, int, str]:
    """A Ray task: Ray reuses worker processes, so the process's client outlives the task."""
    client = spec.client()
    return os.getpid(), id(client), int(client.call_tool("pid").text), client.call_tool("echo", {"key": f"task-{n}"}).text


def test_tasks_reuse_their_worker_process_client(ray_local: None, tmp_path: Path) -> None:
    cmd = server_command("chaos_server.py", "--log", str(tmp_path / "calls.log"), "--linger")
    spec = ClientSpec.stdio(cmd[0], cmd[1:], mode="legacy", name="chaos", timeouts=Timeouts(connect=30, request=30, close=1))
    results = ray.get([_task.remote(spec, n) for n in range(24)], timeout=GET)
    assert [r[3] for r in results] == [f"task-{n}" for n in range(24)]
    by_worker: dict[int, set[tuple[int, int]]] = {}
    for pid, client, server, _ in results:
        by_worker.setdefault(pid, set()).add((client, server))
    assert all(len(v) == 1 for v in by_worker.values()), f"a worker process built several clients: {by_worker}"
    assert sum(len(v) for v in by_worker.values()) < 24, "no worker process was reused: nothing was shared"
