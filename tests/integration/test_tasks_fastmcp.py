"""Tasks (SEP-2663) against a real implementation of the extension: FastMCP 4.1.4 with
fastmcp-tasks 4.1.4 (tests/servers/fastmcp_tasks_server.py), over stdio and Streamable HTTP,
in an environment of its own (tests/setup/70-fastmcp-tasks.sh). ``call_tool`` follows the
server's tasks to their results, answers a task's input request through the elicitation
handler, and cancels a task whose call timed out; the handle polls and cancels."""

from __future__ import annotations

import os
from collections.abc import Iterator
from typing import Any

import pytest

from mcpsync import Client, RequestTimeout, ToolTask
from tests.helpers import wait_until
from tests.servers import http_support as hs

PYTHON = os.environ.get("MCPSYNC_FASTMCP_TASKS_PYTHON", "")
SERVER = str(hs.SERVERS / "fastmcp_tasks_server.py")
pytestmark = [
    pytest.mark.timeout(120),
    pytest.mark.skipif(not os.access(PYTHON, os.X_OK), reason="fastmcp-tasks not installed: tests/setup/70-fastmcp-tasks.sh"),
]


@pytest.fixture(params=["stdio", "http"])
def client(request: pytest.FixtureRequest) -> Iterator[Client]:
    names: list[str] = []

    def elicit(params: Any) -> dict[str, Any]:
        names.append(params.get("message"))
        return {"action": "accept", "content": {"name": "Ada"}}

    options: dict[str, Any] = {"mode": "modern", "elicitation_handler": elicit}
    if request.param == "stdio":
        with Client.stdio(PYTHON, [SERVER], **options) as c:
            yield c
        return
    port = hs.free_port()
    with hs.run_server([PYTHON, SERVER, "http", str(port)], port):
        with Client.http(f"http://127.0.0.1:{port}/mcp", sse_fallback=False, **options) as c:
            yield c


def test_call_tool_follows_fastmcp_tasks(client: Client) -> None:
    assert (client.capabilities.extensions or {}).get("io.modelcontextprotocol/tasks") == {}
    assert client.call_tool("slow", {"seconds": 0.3, "text": "x"}, timeout=30).text == "done: x"
    assert client.call_tool("ask", {}, timeout=30).text == "Hello, Ada"  # tasks/update with the answer
    failed = client.call_tool("boom", {}, timeout=30)
    assert failed.is_error and "boom" in failed.text  # a tool error: a completed task with isError


def test_a_timed_out_call_cancels_the_fastmcp_task(client: Client) -> None:
    with pytest.raises(RequestTimeout) as info:
        client.call_tool("forever", {}, timeout=1.5)
    handle = client.task(info.value.task_id)
    assert wait_until(lambda: handle.poll().status == "cancelled", 10)  # cancellation is eventually consistent


def test_the_handle_against_fastmcp(client: Client) -> None:
    handle = client.call_tool_task("slow", {"seconds": 0.5, "text": "h"})
    assert isinstance(handle, ToolTask) and handle.modern and handle.task_id
    assert handle.poll().poll_interval_ms == 100  # the tool's TaskConfig
    seen: list[str] = []
    assert handle.wait(timeout=30, on_status=lambda t: seen.append(t.status)).text == "done: h"
    assert seen[-1] == "completed"
    forever = client.call_tool_task("forever", {})
    forever.cancel()
    assert wait_until(lambda: forever.poll().status == "cancelled", 10)
