"""Configuration files with HTTP entries against real servers on 127.0.0.1: the official
SDK over Streamable HTTP and server-everything over HTTP+SSE, next to a stdio server,
in one MultiClient."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "servers"))

import http_support as hs  # noqa: E402

from mcpsync import Client, RetryPolicy  # noqa: E402
from mcpsync._multi import MultiClient  # noqa: E402
from tests.conftest import everything_command, server_command  # noqa: E402

pytestmark = [
    pytest.mark.npm,
    pytest.mark.timeout(90),
    pytest.mark.skipif(not (callable(getattr(Client, "http", None)) and callable(getattr(Client, "sse", None))), reason="Client.http / Client.sse not there yet"),
]

DEMO = [sys.executable, "-m", "mcpsync.server.demo"]


@pytest.fixture(scope="module")
def servers():
    sdk_port, ev_port = hs.free_port(), hs.free_port()
    with hs.run_server(server_command("sdk_server.py", "http", str(sdk_port)), sdk_port):
        with hs.run_server(everything_command("sse"), ev_port, env={"PORT": str(ev_port)}):
            yield f"http://127.0.0.1:{sdk_port}/mcp", f"http://127.0.0.1:{ev_port}/sse"


@pytest.fixture()
def config(tmp_path, servers):
    sdk_url, sse_url = servers
    path = tmp_path / "mcp.json"
    path.write_text(
        json.dumps(
            {
                "mcpServers": {
                    "local": {"command": DEMO[0], "args": DEMO[1:]},
                    "sdk": {"type": "streamable-http", "url": sdk_url, "headers": {"X-Api-Key": "${API_KEY:-dev}"}},
                    "everything": {"type": "sse", "url": sse_url},
                    "gone": {"type": "http", "url": "http://127.0.0.1:9/mcp"},
                }
            }
        )
    )
    return path


def test_http_entry(config):
    with Client.from_config(config, "sdk") as client:
        assert client.call_tool("add", {"a": 2, "b": 2}).structured_content == {"result": 4}


def test_sse_entry(config):
    with Client.from_config(config, "everything") as client:
        assert client.call_tool("echo", {"message": "over sse"}).content[0].text == "Echo: over sse"


def test_multiclient_over_stdio_http_and_sse(config):
    with MultiClient.from_config(config, namespace="collisions", list_timeout=20.0, retry=RetryPolicy.NONE) as multi:
        names = [t.name for t in multi.list_tools()]
        assert {"local__echo", "sdk__echo", "everything__echo", "get-sum"} <= set(names)
        assert multi.call_tool("everything__echo", {"message": "x"}).content[0].text == "Echo: x"
        assert multi.call_tool("sdk__echo", {"message": "y"}).content[0].text == "y"
        status = multi.status()
        assert [status[n].state for n in ("local", "sdk", "everything")] == ["ok", "ok", "ok"]
        assert status["gone"].state == "error"  # nothing listens on port 9
