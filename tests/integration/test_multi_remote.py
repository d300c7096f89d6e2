"""Configuration files with remote entries, against a real bridge on 127.0.0.1.

``mcpsync bridge`` serves the demo server over WebSocket and gRPC with a required bearer
token; the config file sends it as ``Authorization: Bearer ${BRIDGE_TOKEN}``. One
MultiClient then spans stdio + WebSocket + gRPC.
"""

from __future__ import annotations

import json
import os
import select
import signal
import subprocess
import sys
import time

import pytest

pytest.importorskip("websockets")
pytest.importorskip("grpc")

from mcpsync import Client, RetryPolicy
from mcpsync._config import ConfigError, load_config
from mcpsync._multi import MultiClient
from tests.conftest import ROOT

pytestmark = pytest.mark.timeout(90)

TOKEN = "bridge-token-for-tests"
DEMO = [sys.executable, "-m", "mcpsync.server.demo"]


@pytest.fixture(scope="module")
def bridge():
    argv = [sys.executable, "-m", "mcpsync.server.bridge", "--websocket", "127.0.0.1:0", "--grpc", "127.0.0.1:0", "--token", TOKEN, "-q", "--", *DEMO]
    proc = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, cwd=ROOT, start_new_session=True)
    ws = grpc_target = None
    buf = b""
    deadline = time.monotonic() + 20
    try:
        while time.monotonic() < deadline and not (ws and grpc_target and b"mcpsync-bridge: upstream" in buf):
            r, _, _ = select.select([proc.stdout], [], [], 0.5)
            if not r:
                if proc.poll() is not None:
                    break
                continue
            chunk = os.read(proc.stdout.fileno(), 4096)
            if not chunk:
                break
            buf += chunk
            for line in buf.decode().splitlines():
                if line.startswith("mcpsync-bridge: websocket "):
                    ws = line.split()[-1]
                elif line.startswith("mcpsync-bridge: grpc "):
                    grpc_target = line.split()[-1]
        if not (ws and grpc_target):
            raise AssertionError(f"the bridge did not start: {buf!r}")
        yield ws, grpc_target
    finally:
        try:
            os.killpg(proc.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        proc.wait(10)


@pytest.fixture()
def config(tmp_path, bridge):
    ws, target = bridge
    path = tmp_path / "mcp.json"
    path.write_text(
        json.dumps(
            {
                "mcpServers": {
                    "local": {"command": DEMO[0], "args": DEMO[1:]},
                    "ws": {"type": "websocket", "url": ws, "headers": {"Authorization": "Bearer ${BRIDGE_TOKEN}"}},
                    "rpc": {"type": "grpc", "url": f"grpc://{target}", "headers": {"Authorization": "Bearer ${BRIDGE_TOKEN}"}},
                    "ws-no-token": {"url": ws},
                }
            }
        )
    )
    return path


def _has(name: str) -> bool:
    return callable(getattr(Client, name, None))


@pytest.mark.skipif(not _has("websocket"), reason="Client.websocket not there yet")
def test_websocket_entry_with_expanded_header(config):
    env = {"BRIDGE_TOKEN": TOKEN}
    with Client.from_config(config, "ws", environ=env) as client:
        assert client.name == "ws"
        assert client.call_tool("add", {"a": 20, "b": 22}).structured_content == {"result": 42}
    assert TOKEN not in repr(load_config(config, environ=env)["ws"])


@pytest.mark.skipif(not _has("grpc"), reason="Client.grpc not there yet")
def test_grpc_entry_with_expanded_metadata(config):
    with Client.from_config(config, "rpc", environ={"BRIDGE_TOKEN": TOKEN}) as client:
        assert client.call_tool("echo", {"message": "over grpc"}).content[0].text == "over grpc"


@pytest.mark.skipif(not (_has("websocket") and _has("grpc")), reason="remote constructors not there yet")
def test_one_multiclient_over_stdio_websocket_and_grpc(config):
    with MultiClient.from_config(config, environ={"BRIDGE_TOKEN": TOKEN}, list_timeout=20.0, retry=RetryPolicy.NONE) as multi:
        names = [t.name for t in multi.list_tools()]
        # the same demo behind three transports: every tool is namespaced
        for server in ("local", "ws", "rpc"):
            assert f"{server}__echo" in names, [(n, st.state, st.error) for n, st in multi.status().items()]
        assert multi.call_tool("ws__echo", {"message": "a"}).content[0].text == "a"
        assert multi.call_tool("rpc__add", {"a": 1, "b": 2}).structured_content == {"result": 3}
        assert multi.call_tool("local__echo", {"message": "b"}).content[0].text == "b"
        status = multi.status()
        assert [status[n].state for n in ("local", "ws", "rpc")] == ["ok", "ok", "ok"]
        assert status["ws-no-token"].state == "error"
        assert status["ws-no-token"].error_type in ("AuthError", "ConnectError")


def test_unset_token_is_reported_not_sent(config):
    cfg = load_config(config, environ={})
    assert set(cfg.errors) == {"ws", "rpc"}
    with pytest.raises(ConfigError, match=r"mcpServers.ws.headers.Authorization: environment variable BRIDGE_TOKEN is not set"):
        Client.from_config(config, "ws", environ={})
