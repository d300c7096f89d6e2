"""The same protocol API over Streamable HTTP (server-everything, legacy era): server
requests ride the POST's SSE stream, resource updates the standalone GET stream."""

from __future__ import annotations

import sys
import threading
from pathlib import Path
from typing import Iterator

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "servers"))

import http_support as hs  # noqa: E402

from mcpsync import Client, PoolLimits  # noqa: E402
from tests.conftest import everything_command  # noqa: E402

pytestmark = [pytest.mark.timeout(60), pytest.mark.npm, pytest.mark.usefixtures("http_path")]  # both HTTP paths: fast and urllib3


@pytest.fixture(scope="module")
def http_everything() -> Iterator[Client]:
    port = hs.free_port()
    with hs.run_server(everything_command("streamableHttp"), port, env={"PORT": str(port)}):
        with Client.http(
            f"http://127.0.0.1:{port}/mcp",
            pool=PoolLimits.SINGLE,  # one session: subscriptions and updates are per session
            elicitation_handler=lambda p: {"action": "accept", "content": {"name": "Http"}},
            sampling_handler=lambda p: {"role": "assistant", "content": {"type": "text", "text": "via http"}, "model": "m"},
            roots=[{"uri": "file:///over/http", "name": "http-root"}],
        ) as c:
            yield c


def test_resources_prompts_completion(http_everything):
    c = http_everything
    assert c.era == "legacy"
    assert len(c.list_resources()) == 7
    assert c.read_resource("demo://resource/dynamic/text/1").text.startswith("Resource 1:")
    assert "simple prompt" in c.get_prompt("simple-prompt").text
    assert c.complete("completable-prompt", ("department", "E")).values == ["Engineering"]


def test_server_requests_reach_handlers(http_everything):
    c = http_everything
    assert "Http" in c.call_tool("trigger-elicitation-request", {}).text
    assert "via http" in c.call_tool("trigger-sampling-request", {"prompt": "p", "maxTokens": 5}).text
    assert "http-root" in c.call_tool("get-roots-list", {}).text


def test_subscription_over_the_get_stream(http_everything):
    c = http_everything
    got = threading.Event()
    with c.subscribe("demo://resource/static/document/features.md", lambda u: got.set()):
        c.call_tool("toggle-subscriber-updates", {})
        try:
            assert got.wait(10)
        finally:
            c.call_tool("toggle-subscriber-updates", {})


def test_task_tool(http_everything):
    r = http_everything.call_tool("simulate-research-query", {"topic": "http"}, timeout=30)
    assert "Research Report: http" in r.text


# ------------------------------------------------------------------ official SDK over HTTP, both eras


@pytest.fixture(scope="module")
def sdk_http_url() -> Iterator[str]:
    from tests.conftest import server_command

    port = hs.free_port()
    with hs.run_server(server_command("sdk_protocol_server.py", "http", str(port)), port):
        yield f"http://127.0.0.1:{port}/mcp"


@pytest.mark.parametrize("mode", ["modern", "legacy"])
def test_sdk_over_http(sdk_http_url, mode):
    """MRTR (modern) or server requests on the POST stream (legacy); subscriptions/listen
    as a long-lived POST (modern) or resources/subscribe + the GET stream (legacy). The
    default pool: over HTTP every connection reaches the same server."""
    with Client.http(
        sdk_http_url,
        mode=mode,
        elicitation_handler=lambda p: {"action": "accept", "content": {"name": "Web"}},
        sampling_handler=lambda p: {"role": "assistant", "content": {"type": "text", "text": "s"}, "model": "m"},
        roots=[{"uri": "file:///r"}],
    ) as c:
        assert c.era == mode
        assert c.read_resource("test://greeting").text == "hello from the SDK server"
        assert c.call_tool("greet", {}).text == "Hello, Web!"
        assert c.call_tool("sample", {}).text == "model m said: s"
        assert c.call_tool("roots", {}).text == "file:///r"
        got = threading.Event()
        with c.subscribe("test://greeting", lambda u: got.set()):
            c.call_tool("touch", {"uri": "test://greeting"})
            assert got.wait(10)
