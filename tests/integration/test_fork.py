"""A Client used in a parent, then in forked children (multiprocessing, fork start method).

Each child must get correct answers on connections of its own (a server process it
started itself, never the parent's pipes), and the parent must keep working on its
own connections afterwards, untouched by the children's use and exit. Every join is
bounded; a hung child fails the test with its name.
"""

from __future__ import annotations

import multiprocessing
import os
import threading
import traceback
from pathlib import Path
from typing import Any

import pytest

from mcpsync import Client, MCPError, PoolLimits, Timeouts
from tests.conftest import server_command
from tests.servers.chaos_support import ChaosLog, is_gone, pool_pids, wait_gone

pytestmark = [
    pytest.mark.timeout(90),
    pytest.mark.skipif(not hasattr(os, "fork"), reason="needs os.fork"),
]

CTX = multiprocessing.get_context("fork")
JOIN = 30.0


def make_client(log: Path, **options: Any) -> Client:
    cmd = server_command("chaos_server.py", "--log", str(log))
    return Client.stdio(cmd[0], cmd[1:], mode="legacy", name="chaos",
                        timeouts=Timeouts(connect=10, request=10, close=1), **options)


def server_pid(client: Client) -> int:
    return int(client.call_tool("pid").text)


def child_main(client: Client, conn: Any, n: int, close: bool) -> None:
    """In the child: call tools, report what was seen, exit without cleaning up unless ``close``."""
    report: dict[str, Any] = {"pid": os.getpid()}
    try:
        spid = server_pid(client)
        report["server_pid"] = spid
        try:
            with open(f"/proc/{spid}/stat") as f:
                report["server_ppid"] = int(f.read().rsplit(")", 1)[1].split()[1])
        except OSError:
            report["server_ppid"] = None
        report["answers"] = [client.call_tool("echo", {"key": f"child{n}-{i}"}).text for i in range(20)]
        report["lookup"] = client.call_tool("lookup", {"key": f"child{n}-ro"}).text
        report["tools"] = sorted(t.name for t in client.list_tools())
        report["pool_pids"] = pool_pids(client)
        if close:
            client.close()
    except BaseException as exc:  # noqa: BLE001 - reported to the parent
        report["error"] = f"{exc!r}\n{traceback.format_exc()}"
    conn.send(report)
    conn.close()


def run_children(client: Client, count: int, *, close: bool) -> list[dict[str, Any]]:
    procs = []
    for n in range(count):
        parent_end, child_end = CTX.Pipe(duplex=False)
        p = CTX.Process(target=child_main, args=(client, child_end, n, close), name=f"fork-child-{n}", daemon=True)
        p.start()
        child_end.close()
        procs.append((p, parent_end))
    reports = []
    try:
        for p, end in procs:
            if not end.poll(JOIN):
                raise AssertionError(f"{p.name} sent no report within {JOIN} s (hung)")
            reports.append(end.recv())
            p.join(JOIN)
            assert not p.is_alive(), f"{p.name} did not exit within {JOIN} s"
            assert p.exitcode == 0, f"{p.name} exited with {p.exitcode}"
    finally:
        for p, _ in procs:
            if p.is_alive():
                p.kill()
                p.join(5)
    return reports


def check_child(report: dict[str, Any], n: int, parent_servers: set[int]) -> None:
    assert "error" not in report, report.get("error")
    assert report["answers"] == [f"child{n}-{i}" for i in range(20)]
    assert report["lookup"] == f"child{n}-ro"
    assert {"echo", "lookup", "pid"} <= set(report["tools"])
    assert report["server_pid"] not in parent_servers, "the child talked to the parent's server"
    assert report["server_ppid"] == report["pid"], "the child's server is not the child's own process"
    assert set(report["pool_pids"]).isdisjoint(parent_servers)


@pytest.mark.parametrize("close", [True, False], ids=["child-closes", "child-exits-without-close"])
def test_parent_then_children_then_parent(tmp_path: Path, close: bool) -> None:
    log = tmp_path / "calls.log"
    with make_client(log) as client:
        assert client.call_tool("echo", {"key": "parent-before"}).text == "parent-before"
        first = server_pid(client)
        parent_servers = set(pool_pids(client))
        assert first in parent_servers
        reports = run_children(client, 3, close=close)
        for n, report in enumerate(reports):
            check_child(report, n, parent_servers)
        # the children's servers end with the children (closed, or stdin EOF at exit)
        child_servers = [r["server_pid"] for r in reports]
        assert len(set(child_servers)) == len(child_servers)
        assert not wait_gone(child_servers, 10), "a child's server outlived its child"
        # the parent: same server processes, still answering
        assert all(not is_gone(pid) for pid in parent_servers), "a child's exit ended a parent server"
        assert server_pid(client) in parent_servers
        assert client.call_tool("echo", {"key": "parent-after"}).text == "parent-after"
        assert client.pool_stats().in_use == 0
    assert not wait_gone(list(parent_servers), 10)
    # every child call reached a server started by that child
    seen = ChaosLog.read(log)
    by_key = {key: pid for pid, tool, key in seen.calls if tool == "echo"}
    for n, report in enumerate(reports):
        assert {by_key[f"child{n}-{i}"] for i in range(20)} == {report["server_pid"]}


def test_fork_while_parent_threads_are_calling(tmp_path: Path) -> None:
    """Fork while 8 parent threads have calls in flight (locks held, pipes busy)."""
    log = tmp_path / "calls.log"
    stop = threading.Event()
    errors: list[BaseException] = []
    done = [0]

    with make_client(log, pool=PoolLimits(min=2, max=4)) as client:
        client.call_tool("echo", {"key": "warm"})

        def hammer(t: int) -> None:
            i = 0
            while not stop.is_set() and i < 100_000:
                key = f"p{t}-{i}"
                try:
                    if client.call_tool("echo", {"key": key}).text != key:
                        errors.append(AssertionError(f"wrong answer for {key}"))
                except MCPError as exc:
                    errors.append(exc)
                done[0] += 1
                i += 1

        threads = [threading.Thread(target=hammer, args=(t,), daemon=True) for t in range(8)]
        for th in threads:
            th.start()
        try:
            reports = []
            for _round in range(3):  # fork at different moments of the traffic
                parent_servers = set(pool_pids(client))
                reports += run_children(client, 2, close=False)
        finally:
            stop.set()
            for th in threads:
                th.join(20)
        assert not [th for th in threads if th.is_alive()], "a parent caller hung"
        assert not errors, errors[:3]
        assert done[0] > 0
        all_parent = set(pool_pids(client)) | parent_servers
        for report in reports:
            assert "error" not in report, report.get("error")
            assert report["server_ppid"] == report["pid"]
            assert report["server_pid"] not in all_parent
        assert client.call_tool("echo", {"key": "parent-after"}).text == "parent-after"
        assert client.pool_stats().in_use == 0
    assert not wait_gone([r["server_pid"] for r in reports], 10)


def _idle_child(ready: Any, release: Any) -> None:
    ready.set()
    release.wait(JOIN)


def test_live_child_does_not_hold_the_parents_pipes(tmp_path: Path) -> None:
    """The parent closes its client while a forked child is alive: its server must see EOF
    on stdin and exit by itself (exit code 0), not be terminated (-SIGTERM)."""
    client = make_client(tmp_path / "calls.log")
    procs = []
    try:
        client.call_tool("echo", {"key": "parent"})
        transports = [e.conn.transport for e in client._session.pool._state.entries]
        ready, release = CTX.Event(), CTX.Event()
        p = CTX.Process(target=_idle_child, args=(ready, release), daemon=True)
        p.start()
        procs.append(p)
        assert ready.wait(JOIN), "the child did not start"
        client.close()
        codes = [t.returncode for t in transports]
    finally:
        client.close()
        for p in procs:
            release.set()
            p.join(JOIN)
            if p.is_alive():
                p.kill()
                p.join(5)
    assert codes == [0] * len(transports), f"server exit codes {codes} (negative: killed by a signal)"
