"""A replaced server process or session is never silent: a WARNING naming the server and
what was lost, a count in ``diagnostics()``, and the client's ``on_session_lost`` callback.
And ``diagnostics()`` tells a working client's era, protocol version and session id on
every transport (not only once a session connection was needed)."""

from __future__ import annotations

import logging
import os
import signal
import sys
import threading
from typing import Iterator

import pytest

import tests.servers.http_support as hs
from mcpsync import Client, SessionLost
from mcpsync.server import Registry
from tests.conftest import server_command
from tests.helpers import wait_until
from tests.servers.chaos_support import wait_gone

pytestmark = pytest.mark.timeout(120)


def test_a_stdio_server_started_again_is_announced(caplog: pytest.LogCaptureFixture):
    events: list[SessionLost] = []
    seen = threading.Event()

    def lost(event: SessionLost) -> None:
        events.append(event)
        seen.set()

    cmd = server_command("chaos_server.py")
    with caplog.at_level(logging.WARNING, logger="mcpsync.client"), \
            Client.stdio(cmd[0], cmd[1:], mode="legacy", name="chaos", on_session_lost=lost) as client:
        first = int(client.call_tool("pid", timeout=30).text)
        assert client.diagnostics().sessions_lost == 0
        os.kill(first, signal.SIGKILL)
        assert wait_gone([first], 10) == []
        assert wait_until(lambda: not client.diagnostics().pids, 10)  # the client noticed
        second = int(client.call_tool("pid", timeout=30).text)  # (a read-only tool: retried on a new process)
        assert second != first
        assert seen.wait(10), "on_session_lost was not called"
        d = client.diagnostics()
    assert events == [SessionLost("chaos", "process", f"pid {first}", f"pid {second}", "killed by signal 9")]
    assert d.sessions_lost == 1 and d.last_session_lost == events[0]
    warnings = [r for r in caplog.records if r.levelno == logging.WARNING and "is lost" in r.getMessage()]
    assert len(warnings) == 1 and "chaos" in warnings[0].getMessage() and f"pid {first}" in warnings[0].getMessage()


def test_closing_a_working_client_loses_nothing(caplog: pytest.LogCaptureFixture):
    events: list[SessionLost] = []
    cmd = server_command("chaos_server.py")
    with caplog.at_level(logging.WARNING, logger="mcpsync.client"):
        client = Client.stdio(cmd[0], cmd[1:], mode="legacy", name="calm", on_session_lost=events.append)
        client.call_tool("pid", timeout=30)
        client.close()
    assert events == [] and not [r for r in caplog.records if "is lost" in r.getMessage()]


@pytest.fixture(scope="module")
def sdk_http() -> Iterator[str]:
    port = hs.free_port()
    with hs.run_server(hs.sdk_server_argv(port), port):
        yield f"http://127.0.0.1:{port}/mcp"


@pytest.fixture(scope="module")
def sdk_sse() -> Iterator[str]:
    port = hs.free_port()
    with hs.run_server(hs.sdk_server_argv(port, "--transport", "sse"), port):
        yield f"http://127.0.0.1:{port}/sse"


def _registry() -> Registry:
    reg = Registry("local")

    @reg.tool()
    def echo(message: str) -> str:
        return message

    return reg


@pytest.mark.parametrize("kind", ["stdio", "http-legacy", "http-modern-probe", "sse", "local"])
def test_diagnostics_tell_the_session_of_a_working_client(kind: str, request: pytest.FixtureRequest):
    if kind == "stdio":
        client = Client.stdio(sys.executable, ["-m", "mcpsync.server.demo"], mode="legacy")
    elif kind == "http-legacy":
        client = Client.http(request.getfixturevalue("sdk_http"), mode="legacy")
    elif kind == "http-modern-probe":
        client = Client.http(request.getfixturevalue("sdk_http"))
    elif kind == "sse":
        client = Client.sse(request.getfixturevalue("sdk_sse"))
    else:
        client = Client.local(_registry())
    try:  # (no ``with``: its connect() opens the session connection at once)
        client.request("tools/list", timeout=30)  # a plain request: no session connection needed
        d = client.diagnostics()
        assert d.era in ("legacy", "modern") and d.protocol_version, d
        if kind == "http-legacy":
            assert d.session_id and d.session_id == d.connections[0].session_id, d
        assert (d.era, d.protocol_version) == (client.era, client.protocol_version)
    finally:
        client.close()
