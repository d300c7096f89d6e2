"""Streamable HTTP and HTTP+SSE against @modelcontextprotocol/server-everything (TypeScript SDK).

The server runs under Node with the loopback preload (127.0.0.1 only), port from PORT.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any, Iterator

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "servers"))

import http_support as hs  # noqa: E402

from tests.conftest import everything_command  # noqa: E402
from tests.helpers import hammer  # noqa: E402
from mcpsync.transports.sse import SSETransport  # noqa: E402
from mcpsync.transports.streamable_http import StreamableHTTPTransport, forget_url, known_kind  # noqa: E402

pytestmark = [pytest.mark.npm, pytest.mark.usefixtures("http_path")]  # both HTTP paths: fast and urllib3

DOC = "demo://resource/static/document/architecture.md"


def _serve(mode: str) -> Iterator[str]:
    port = hs.free_port()
    with hs.run_server(everything_command(mode), port, env={"PORT": str(port)}):
        yield f"http://127.0.0.1:{port}"


@pytest.fixture(scope="module")
def streamable() -> Iterator[str]:
    yield from _serve("streamableHttp")


@pytest.fixture(scope="module")
def sse() -> Iterator[str]:
    yield from _serve("sse")


def _connect(transport: Any) -> hs.RawClient:
    transport.connect(5)
    return hs.RawClient(transport)


def _echo(c: hs.RawClient, text: str) -> str:
    return hs.text_of(c.request("tools/call", {"name": "echo", "arguments": {"message": text}}))


def test_streamable_legacy_session(streamable: str) -> None:
    c = _connect(StreamableHTTPTransport(f"{streamable}/mcp"))
    try:
        # the modern probe is refused with a JSON-RPC error (id null), handed up under our id
        refused = c.modern("server/discover")
        assert "error" in refused
        init = c.initialize()
        assert init["result"]["serverInfo"]["name"] == "mcp-servers/everything"
        assert c.t.session_info()["session_id"]
        assert _echo(c, "hello") == "Echo: hello"
        tools = {t["name"] for t in c.request("tools/list")["result"]["tools"]}
        assert {"echo", "get-sum", "toggle-subscriber-updates"} <= tools
        total = c.request("tools/call", {"name": "get-sum", "arguments": {"a": 2, "b": 3}})
        assert "5" in hs.text_of(total)
    finally:
        c.close()


def test_streamable_resource_update_on_the_get_stream(streamable: str) -> None:
    c = _connect(StreamableHTTPTransport(f"{streamable}/mcp"))
    try:
        c.initialize()
        assert c.request("resources/subscribe", {"uri": DOC})["result"] == {}
        c.request("tools/call", {"name": "toggle-subscriber-updates", "arguments": {}})
        note = c.wait_notification("notifications/resources/updated", 8)
        assert note["params"]["uri"] == DOC
        assert c.t.session_info()["get_stream"] is True
    finally:
        c.close()


def test_streamable_progress_notifications(streamable: str) -> None:
    c = _connect(StreamableHTTPTransport(f"{streamable}/mcp"))
    try:
        c.initialize()
        answer = c.request(
            "tools/call",
            {
                "name": "trigger-long-running-operation",
                "arguments": {"duration": 0.3, "steps": 3},
                "_meta": {"progressToken": "p"},
            },
            timeout=15,
        )
        assert "result" in answer
        assert len([n for n in c.notifications if n["method"] == "notifications/progress"]) == 3
    finally:
        c.close()


def test_streamable_sixteen_threads(streamable: str) -> None:
    c = _connect(StreamableHTTPTransport(f"{streamable}/mcp"))
    try:
        c.initialize()
        hammer(ask=lambda msg: _echo(c, msg), threads=16, calls=3, join=30)
    finally:
        c.close()


def test_sse_direct_with_resource_update(sse: str) -> None:
    c = _connect(SSETransport(f"{sse}/sse"))
    try:
        assert c.t.endpoint.startswith(f"{sse}/message")
        c.initialize()
        assert _echo(c, "over sse") == "Echo: over sse"
        c.request("resources/subscribe", {"uri": DOC})
        c.request("tools/call", {"name": "toggle-subscriber-updates", "arguments": {}})
        assert c.wait_notification("notifications/resources/updated", 8)["params"]["uri"] == DOC
    finally:
        c.close()


def test_sse_fallback_from_bare_url(sse: str) -> None:
    url = f"{sse}/sse"
    forget_url(url)
    c = _connect(StreamableHTTPTransport(url))
    try:
        c.initialize()
        assert c.t.session_info()["transport"] == "sse"
        assert known_kind(url) == "sse"
        assert _echo(c, "fell back") == "Echo: fell back"
    finally:
        c.close()
