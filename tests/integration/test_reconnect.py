"""After its stdio server is killed, the Client reconnects to a new process.

What a user would notice: the next call succeeds on a new server process; tools are
listed again from that process; notification handlers still fire; resource
subscriptions are re-established on the new session; and tool annotations learned from
the old process do not keep deciding retries against the new one.
"""

from __future__ import annotations

import os
import threading
from pathlib import Path
from typing import Any

import pytest

from mcpsync import BreakerPolicy, Client, ConnectionClosed, PoolLimits, ReconnectPolicy, RetryPolicy, Timeouts
from tests.conftest import server_command
from tests.helpers import wait_until
from tests.servers.chaos_support import ChaosLog, children_of, kill, noticed_dead, pool_pids, wait_gone

pytestmark = pytest.mark.timeout(60)


def make(tmp_path: Path, *extra: str, **options: Any) -> tuple[Client, Path]:
    log = tmp_path / "calls.log"
    cmd = server_command("chaos_server.py", "--log", str(log), *extra)
    options.setdefault("pool", PoolLimits(min=1, max=1))  # one connection: it is the session's
    client = Client.stdio(
        cmd[0], cmd[1:], mode="legacy", name="chaos",
        timeouts=Timeouts(connect=10, request=10, close=1), retry=RetryPolicy(backoff=0.01),
        reconnect=ReconnectPolicy(backoff=0.01), breaker=BreakerPolicy(threshold=100), **options,
    )
    return client, log


def kill_all(client: Client) -> list[int]:
    """SIGKILL every server of the pool; return once the client has noticed the deaths
    (a call racing the notice is test_call_that_never_reached_a_server_is_retried's case)."""
    pids = pool_pids(client)
    assert pids
    for pid in pids:
        kill(pid)
    assert not wait_gone(pids, 5)
    assert wait_until(lambda: noticed_dead(client, pids), 5), "the client never noticed the kill"
    return pids


def pid_of(client: Client) -> int:
    return int(client.call_tool("pid").text)


def test_next_call_after_kill_runs_on_a_new_process(tmp_path: Path) -> None:
    client, log = make(tmp_path)
    with client:
        first = pid_of(client)
        before = client.pool_stats()
        assert kill_all(client) == [first]
        assert client.call_tool("echo", {"key": "after"}).text == "after"  # not an error
        second = pid_of(client)
        assert second != first and second in children_of(os.getpid())
        after = client.pool_stats()
        assert after.created == before.created + 1 and after.discarded == before.discarded + 1
        assert not client.unavailable and not client.diagnostics().reconnect_history
        # tools are listed by the new process
        names = {t.name for t in client.list_tools()}
        assert {"echo", "lookup", "pid", "touch"} <= names
    calls = ChaosLog.read(log).calls
    assert [(pid, key) for pid, tool, key in calls if tool == "echo"] == [(second, "after")]
    assert ChaosLog.read(log).starts == [first, second]


def test_call_that_never_reached_a_server_is_retried(tmp_path: Path) -> None:
    client, log = make(tmp_path)
    with client:
        first = pid_of(client)
        assert client.call_tool("close_stdin").text == "closing stdin"
        assert wait_until(lambda: not os.path.exists(f"/proc/{first}/fd/0"), 5)
        # the pipe to the server is dead; the echo cannot have reached it: retry elsewhere
        assert client.call_tool("echo", {"key": "undelivered"}).text == "undelivered"
    assert [(pid, key) for pid, tool, key in ChaosLog.read(log).calls if tool == "echo"] != []


def test_tools_rediscovered_from_the_new_process(tmp_path: Path) -> None:
    """The new process lists its tools differently (no annotations): list_tools shows it."""
    flag = tmp_path / "unannotated"
    client, _ = make(tmp_path, "--unannotated", str(flag))
    with client:
        old = {t.name: t for t in client.list_tools()}
        assert old["lookup"].annotations is not None and old["lookup"].annotations.read_only_hint
        flag.touch()
        kill_all(client)
        assert client.call_tool("echo", {"key": "x"}).text == "x"  # reconnects to the new process
        new = {t.name: t for t in client.list_tools()}
        assert set(new) == set(old)
        assert new["lookup"].annotations is None


def test_stale_annotations_do_not_allow_a_duplicate_call(tmp_path: Path) -> None:
    """The new process no longer declares die_once read-only: a call that reaches it and
    kills it must not be re-sent on the strength of the old process's annotations."""
    flag = tmp_path / "unannotated"
    client, log = make(tmp_path, "--unannotated", str(flag))
    token = tmp_path / "token"
    with client:
        tools = {t.name: t for t in client.list_tools()}
        assert tools["die_once"].annotations.read_only_hint  # the first server: read-only
        flag.touch()  # its next version declares nothing
        kill_all(client)
        assert client.call_tool("echo", {"key": "reconnected"}).text == "reconnected"
        try:
            client.call_tool("die_once", {"token": str(token)})
        except ConnectionClosed:
            pass
    # the new server's die_once is not declared safe: it must have run once only
    assert ChaosLog.read(log).seen("die_once")[str(token)] == 1


def test_notification_handlers_still_fire_after_reconnect(tmp_path: Path) -> None:
    client, _ = make(tmp_path)
    got: list[str] = []
    arrived = threading.Event()

    def handler(params: Any) -> None:
        got.append(params["key"])
        arrived.set()

    with client:
        client.on_notification("notifications/chaos/shout", handler)
        client.call_tool("shout", {"key": "one"})
        assert arrived.wait(5)
        arrived.clear()
        kill_all(client)
        client.call_tool("shout", {"key": "two"})
        assert arrived.wait(5), "a handler registered before the reconnect no longer fires"
    assert got == ["one", "two"]


def _subscribed_client(tmp_path: Path) -> tuple[Client, Path, threading.Event, list[str]]:
    client, log = make(tmp_path)
    updates: list[str] = []
    updated = threading.Event()

    def on_update(uri: str) -> None:
        updates.append(uri)
        updated.set()

    client.subscribe("chaos://a", on_update)
    assert client.call_tool("touch", {"uri": "chaos://a"}).text == "sent"
    assert updated.wait(5), "no update before the reconnect"
    updated.clear()
    return client, log, updated, updates


def test_subscription_restored_after_reconnect(tmp_path: Path) -> None:
    """The session connection dies; the next session-scoped use reconnects and the
    subscription is re-made on the new process: updates from it reach the callback."""
    client, log, updated, updates = _subscribed_client(tmp_path)
    with client:
        old = kill_all(client)
        client.ping()  # a session-scoped request: the session connection is replaced
        new = pool_pids(client)
        assert new and set(new).isdisjoint(old)
        assert wait_until(lambda: (new[0], "chaos://a") in ChaosLog.read(log).subscribes, 5), \
            "the subscription was not re-made on the new process"
        assert client.call_tool("touch", {"uri": "chaos://a"}).text == "sent"
        assert updated.wait(5), "the callback did not hear the new process"
    assert updates == ["chaos://a", "chaos://a"]


def test_subscription_restored_when_only_tools_are_called(tmp_path: Path) -> None:
    """One connection, killed; the client then only calls tools: the new connection's
    handshake re-makes the subscription (no session-scoped call needed)."""
    client, log, updated, _ = _subscribed_client(tmp_path)
    with client:
        kill_all(client)
        assert client.call_tool("echo", {"key": "reconnected"}).text == "reconnected"
        new = pool_pids(client)
        assert wait_until(lambda: (new[0], "chaos://a") in ChaosLog.read(log).subscribes, 5)
        assert client.call_tool("touch", {"uri": "chaos://a"}).text == "sent"
        assert updated.wait(5)


def test_subscription_restored_when_the_session_connection_alone_dies(tmp_path: Path) -> None:
    client, log = make(tmp_path, pool=PoolLimits(min=2, max=2))
    updated = threading.Event()
    with client:
        calls = [threading.Thread(target=client.call_tool, args=("sleep", {"seconds": 0.3})) for _ in range(2)]
        for th in calls:
            th.start()
        for th in calls:
            th.join(10)
        assert len(pool_pids(client)) == 2
        client.subscribe("chaos://a", lambda uri: updated.set())
        session_pid = client.diagnostics().primary.pid
        survivor = [p for p in pool_pids(client) if p != session_pid]
        kill(session_pid)
        assert not wait_gone([session_pid], 5)
        # the session connection is replaced at once by the surviving one
        assert wait_until(lambda: (p := client.diagnostics().primary) is not None and p.pid != session_pid, 5)
        for i in range(5):
            assert client.call_tool("echo", {"key": f"k{i}"}).text == f"k{i}"
        assert pool_pids(client) == survivor
        restored = wait_until(lambda: (survivor[0], "chaos://a") in ChaosLog.read(log).subscribes, 3)
        assert restored, "the subscription was not re-made on the surviving connection"
        assert client.call_tool("touch", {"uri": "chaos://a"}).text == "sent"
        assert updated.wait(5)


def test_session_is_renewed_after_reconnect(tmp_path: Path) -> None:
    """client.session describes the live connection, not the dead one."""
    client, _ = make(tmp_path)
    with client:
        s1 = client.session
        old = kill_all(client)
        s2 = client.session
        assert s2 is not s1 and s2.server_info.name == "chaos"
        new = pool_pids(client)
        assert pid_of(client) in new and set(new).isdisjoint(old)
    assert not wait_gone(new, 5), "close() left the new server running"
