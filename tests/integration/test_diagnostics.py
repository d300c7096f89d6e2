"""``Client.diagnostics()``: what an operator sees of a live client, against real servers."""

from __future__ import annotations

import dataclasses
import os
import threading

import pytest

from mcpsync import BreakerState, Client, ConnectionDiagnostics, Diagnostics, PoolLimits
from tests.conftest import free_port, server_command
from tests.servers.http_support import run_server


def test_before_connecting_nothing_is_open_and_nothing_connects():
    cmd = server_command("sdk_server.py")
    c = Client.stdio(cmd[0], cmd[1:], name="diag")  # not entered: entering connects
    try:
        d = c.diagnostics()
        assert isinstance(d, Diagnostics)
        assert d.name == "diag" and not d.closed
        assert d.connections == () and d.primary is None and d.pids == ()
        assert d.era is None and d.protocol_version is None and d.session_id is None
        assert d.in_flight == 0 and d.pool.size == 0
        assert d.breaker is BreakerState.CLOSED and d.breaker_transitions == ()
        assert not d.unavailable and d.reconnect_failures == 0 and d.reconnect_history == ()
        assert d.cached_tools is None
        assert c.diagnostics().connections == ()  # asking did not connect
    finally:
        c.close()


@pytest.mark.parametrize("mode", ["legacy", "modern"])
def test_stdio_connection_process_session_and_tool_cache(mode):
    cmd = server_command("sdk_server.py")
    with Client.stdio(cmd[0], cmd[1:], mode=mode, name="diag", pool=PoolLimits.SINGLE) as c:
        assert c.call_tool("add", {"a": 2, "b": 3}).text == "5"
        c.list_tools()
        d = c.diagnostics()
        assert len(d.connections) == 1
        conn = d.primary
        assert isinstance(conn, ConnectionDiagnostics)
        assert conn is d.connections[0] and conn.alive and conn.transport == "stdio"
        assert conn.pid is not None and d.pids == (conn.pid,)
        os.kill(conn.pid, 0)  # a real process of ours
        assert conn.in_flight == 0 and conn.pending == 0 and conn.dropped == 0
        assert d.era == conn.era == mode and d.protocol_version == conn.protocol_version == c.protocol_version
        assert d.session_id is None  # stdio has no session id
        assert d.cached_tools is not None and "add" in d.cached_tools
        assert d.tool_cache.discoveries >= 1
        assert d.pool.created == 1 and d.in_flight == 0
        with pytest.raises(dataclasses.FrozenInstanceError):
            d.era = "other"  # type: ignore[misc]
    closed = c.diagnostics()
    assert closed.closed and closed.connections == ()


def test_in_flight_shows_a_call_under_way():
    cmd = server_command("sdk_server.py")
    with Client.stdio(cmd[0], cmd[1:], name="diag", pool=PoolLimits.SINGLE) as c:
        c.ping()
        done = threading.Event()
        t = threading.Thread(target=lambda: (c.call_tool("sleep_ms", {"ms": 3000}), done.set()), daemon=True)
        t.start()
        seen = None
        for _ in range(400):  # bounded poll: the call is sent from the other thread
            d = c.diagnostics()
            if d.in_flight == 1 and d.connections[0].pending == 1:
                seen = d
                break
            threading.Event().wait(0.01)
        assert seen is not None and seen.connections[0].in_flight == 1 and not done.is_set()
        t.join(30)
        assert done.is_set()
        after = c.diagnostics()
        assert after.in_flight == 0 and after.connections[0].pending == 0


def test_breaker_and_subscriptions_are_visible():
    cmd = server_command("sdk_server.py")
    with Client.stdio(cmd[0], cmd[1:], name="diag", mode="modern", pool=PoolLimits.SINGLE) as c:
        c.connect()
        with c.subscribe("test://nothing", lambda uri: None):
            d = c.diagnostics()
            assert d.subscriptions == ("test://nothing",)
            assert d.listening and d.listen_acknowledged and d.listen_acks >= 1
        d = c.diagnostics()
        assert d.subscriptions == () and not d.listening
        c.reconnect()  # resets the breaker: no transition from CLOSED
        assert c.diagnostics().breaker is BreakerState.CLOSED


@pytest.mark.parametrize("mode", ["legacy", "modern"])
def test_http_session_id(mode):
    port = free_port()
    with run_server(server_command("sdk_server.py", "http", str(port)), port):
        with Client.http(f"http://127.0.0.1:{port}/mcp", mode=mode, name="diag-http") as c:
            c.call_tool("add", {"a": 1, "b": 1}, timeout=30)
            d = c.diagnostics()
            assert d.pids == () and d.primary is not None and d.primary.pid is None
            if mode == "legacy":  # the SDK's stateful server gives a legacy session an id
                assert d.session_id and d.session_id == d.primary.session_id
            else:
                assert d.session_id is None
