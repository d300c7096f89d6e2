"""One client per worker process, from a ClientSpec, under multiprocessing (fork and spawn).

Each worker process builds one client on first use and its threads share it (one
stdio server child per worker, whatever the number of tasks and threads); every answer
reaches the thread that asked; when the workers end, so do their server children.
A forked child of a process that already has its client builds its own (never the
parent's pipes), and the parent's client goes on working.
"""

from __future__ import annotations

import multiprocessing
import os
import signal
import sys
import threading
from collections import Counter
from typing import Any

import pytest

from mcpsync import ClientSpec, Timeouts
from tests.conftest import server_command
from tests.servers.chaos_support import is_gone, wait_gone

pytestmark = pytest.mark.timeout(120)

THREADS = 8
CALLS = 5
JOIN = 60.0


def make_spec(log: str) -> ClientSpec:
    cmd = server_command("chaos_server.py", "--log", log)
    return ClientSpec.stdio(cmd[0], cmd[1:], mode="legacy", name="chaos",
                            timeouts=Timeouts(connect=20, request=20, close=1))


def worker_task(spec: ClientSpec, task: int) -> dict[str, Any]:
    """In a worker: THREADS threads call through the process's client; report what each saw."""
    seen: dict[int, list[Any]] = {}
    errors: list[BaseException] = []
    start = threading.Barrier(THREADS)

    def run(t: int) -> None:
        try:
            start.wait(30)
            client = spec.client()
            answers = [client.call_tool("echo", {"key": f"{task}-{t}-{i}"}).text for i in range(CALLS)]
            seen[t] = [id(client), answers]
        except BaseException as exc:  # noqa: BLE001 - reported to the parent
            errors.append(exc)

    threads = [threading.Thread(target=run, args=(t,)) for t in range(THREADS)]
    for th in threads:
        th.start()
    for th in threads:
        th.join(JOIN)
    client = spec.client()
    return {
        "pid": os.getpid(),
        "task": task,
        "client_ids": {v[0] for v in seen.values()} | {id(client)},
        "answers": {t: v[1] for t, v in seen.items()},
        "server_pid": int(client.call_tool("pid").text),
        "errors": [repr(e) for e in errors],
        "hung": [th.name for th in threads if th.is_alive()],
    }


@pytest.mark.parametrize("method", ["fork", "spawn"])
def test_each_worker_process_builds_one_client_that_its_threads_share(method: str, tmp_path) -> None:  # type: ignore[no-untyped-def]
    if method not in multiprocessing.get_all_start_methods():
        pytest.skip(f"start method {method} unavailable here")
    log = tmp_path / "calls.log"
    spec = make_spec(str(log))
    ctx = multiprocessing.get_context(method)
    pool = ctx.Pool(2)
    try:
        pending = pool.starmap_async(worker_task, [(spec, task) for task in range(4)])
        reports = pending.get(JOIN)
    finally:
        pool.close()
        pool.join()  # the workers leave: their clients close, their servers end
    for r in reports:
        assert not r["errors"] and not r["hung"], r
        assert len(r["client_ids"]) == 1, f"threads of one task saw several clients: {r}"
        for t, answers in r["answers"].items():  # every answer reached the thread that asked
            assert answers == [f"{r['task']}-{t}-{i}" for i in range(CALLS)]
    by_pid: dict[int, set[int]] = {}
    for r in reports:
        by_pid.setdefault(r["pid"], set()).add(r["server_pid"])
    assert all(len(servers) == 1 for servers in by_pid.values()), f"a worker started several servers: {by_pid}"
    starts = [line for line in log.read_text().splitlines() if line.startswith("start ")]
    assert len(starts) == len(by_pid), f"one server per worker process, saw {starts} for workers {sorted(by_pid)}"
    calls = Counter(line.split()[3] for line in log.read_text().splitlines() if line.startswith("call ") and " echo " in line)
    assert len(calls) == 4 * THREADS * CALLS and set(calls.values()) == {1}  # nothing lost or doubled
    servers = [s for servers in by_pid.values() for s in servers]
    assert wait_gone(servers, 15.0) == [], "a server child outlived its worker process"


def _child_uses_its_own(spec: ClientSpec, parent_client_id: int, parent_server: int, out: Any) -> None:
    client = spec.client()
    out.send((id(client) != parent_client_id, int(client.call_tool("pid").text) != parent_server,
              client.call_tool("echo", {"key": "child"}).text))
    out.close()


@pytest.mark.skipif(not hasattr(os, "fork"), reason="needs os.fork")
def test_a_forked_child_rebuilds_the_client_and_leaves_the_parents_alone(tmp_path) -> None:  # type: ignore[no-untyped-def]
    spec = make_spec(str(tmp_path / "calls.log"))
    parent = spec.client()
    try:
        parent_server = int(parent.call_tool("pid").text)
        ctx = multiprocessing.get_context("fork")
        here, there = ctx.Pipe()
        child = ctx.Process(target=_child_uses_its_own, args=(spec, id(parent), parent_server, there))
        child.start()
        assert here.poll(JOIN), "the forked child did not answer"
        assert here.recv() == (True, True, "child")
        child.join(JOIN)
        assert child.exitcode == 0
        assert spec.client() is parent
        assert parent.call_tool("echo", {"key": "parent"}).text == "parent"
        assert int(parent.call_tool("pid").text) == parent_server
    finally:
        parent.close()


def _start_then_wait(spec: ClientSpec, out: Any) -> None:
    client = spec.client()
    out.send(int(client.call_tool("pid").text))
    out.close()
    threading.Event().wait(120)  # until killed


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="PR_SET_PDEATHSIG is Linux's")
@pytest.mark.parametrize("method", ["fork", "spawn"])
def test_a_server_that_ignores_eof_dies_with_its_sigkilled_worker(method: str, tmp_path) -> None:  # type: ignore[no-untyped-def]
    """A worker killed outright runs no clean-up; its server child (one that lingers
    after its stdin closes, so EOF alone would not end it) must still die with it."""
    cmd = server_command("chaos_server.py", "--log", str(tmp_path / "calls.log"), "--linger")
    spec = ClientSpec.stdio(cmd[0], cmd[1:], mode="legacy", name="linger", timeouts=Timeouts(connect=20, request=20, close=1))
    ctx = multiprocessing.get_context(method)
    here, there = ctx.Pipe()
    worker = ctx.Process(target=_start_then_wait, args=(spec, there))
    worker.start()
    try:
        assert here.poll(JOIN), "the worker did not report its server"
        server = here.recv()
        # the connection was made on a short-lived thread, long gone: the server lives on
        assert not is_gone(server)
        os.kill(worker.pid, signal.SIGKILL)
        worker.join(JOIN)
        assert wait_gone([server], 15.0) == [], "the server child outlived its SIGKILLed worker"
    finally:
        if worker.is_alive():
            worker.kill()
            worker.join(JOIN)


def _worker_headers(spec: ClientSpec, url: str, expected: str, out: Any) -> None:
    auth = spec.oauth()
    out.send(auth.headers(url, "POST").get("Authorization") == expected)  # never the token itself
    out.close()


@pytest.mark.skipif(os.environ.get("PYTHON_KEYRING_BACKEND") != "keyring.backends.SecretService.Keyring",
                    reason="needs the gnome-keyring Secret Service (tests/setup/with-keyring.sh)")
def test_a_worker_takes_its_token_from_the_os_keyring_not_from_the_spec() -> None:
    import pickle
    import time
    import uuid

    from mcpsync.auth import KeyringTokenStore, TokenSet

    url = f"http://127.0.0.1:1/mcp-{uuid.uuid4().hex}"
    secret = "at-" + uuid.uuid4().hex
    store = KeyringTokenStore()
    store.save_tokens(url, TokenSet(access_token=secret, expires_at=time.time() + 3600, resource=url))
    try:
        spec = ClientSpec.http(url, oauth={"interactive": False})
        assert secret.encode() not in pickle.dumps(spec)
        ctx = multiprocessing.get_context("spawn")
        here, there = ctx.Pipe()
        worker = ctx.Process(target=_worker_headers, args=(spec, url, f"Bearer {secret}", there))
        worker.start()
        assert here.poll(JOIN) and here.recv() is True
        worker.join(JOIN)
    finally:
        store.delete_tokens(url)
