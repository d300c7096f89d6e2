"""Tasks as SEP-2663 specifies them (``io.modelcontextprotocol/tasks``, 2026-07-28 era),
against a server written to the SEP's text (tests/servers/tasks_server.py) over stdio and
Streamable HTTP: the extension declared on every request, ``call_tool`` following a task to
its end within its timeout (polls at ``pollIntervalMs``, results and errors inline,
``inputRequests`` answered once through the client's handlers with ``tasks/update``,
``tasks/cancel`` on timeout), the :class:`ToolTask` handle, and ``Mcp-Name`` over HTTP.
The 2025-11-25 flow behind the same API is tested against server-everything
(tests/integration/test_protocol_everything.py)."""

from __future__ import annotations

import threading
import time
from typing import Any, Iterator

import pytest

from mcpsync import (
    Cancelled,
    Client,
    Extension,
    InputRequestError,
    RemoteError,
    RequestTimeout,
    Task,
    ToolTask,
)
from tests.conftest import server_command
from tests.helpers import wait_until
from tests.servers.http_support import PYTHON, SERVERS, free_port, run_server

pytestmark = pytest.mark.timeout(90)
EXT = "io.modelcontextprotocol/tasks"
CAPS = "io.modelcontextprotocol/clientCapabilities"


class Handlers:
    def __init__(self) -> None:
        self.elicitations: list[dict[str, Any]] = []
        self.samplings: list[dict[str, Any]] = []
        self.lock = threading.Lock()

    def elicit(self, params: Any) -> dict[str, Any]:
        with self.lock:
            self.elicitations.append(dict(params))
            n = len(self.elicitations)
        return {"action": "accept", "content": {"name": f"user{n}"}}

    def sample(self, params: Any) -> dict[str, Any]:
        with self.lock:
            self.samplings.append(dict(params))
        return {"role": "assistant", "content": {"type": "text", "text": "hi there"}, "model": "test"}


@pytest.fixture(params=["stdio", "http"])
def transport(request: pytest.FixtureRequest) -> Iterator[str]:
    """What a client needs to reach a fresh tasks server: ``stdio`` or an HTTP URL."""
    if request.param == "stdio":
        yield "stdio"
        return
    port = free_port()
    with run_server([PYTHON, str(SERVERS / "tasks_server.py"), "--http", str(port)], port):
        yield f"http://127.0.0.1:{port}/mcp"


def client_for(where: str, handlers: Handlers | None = None, **options: Any) -> Client:
    if handlers is not None:
        options.setdefault("elicitation_handler", handlers.elicit)
        options.setdefault("sampling_handler", handlers.sample)
    if where == "stdio":
        cmd = server_command("tasks_server.py")
        return Client.stdio(cmd[0], cmd[1:], **options)
    return Client.http(where, sse_fallback=False, **options)


def log(client: Client) -> list[dict[str, Any]]:
    return client.request("test/log")["requests"]


def of_task(client: Client, task_id: str, method: str) -> list[dict[str, Any]]:
    return [r for r in log(client) if r["method"] == method and r["params"].get("taskId") == task_id]


def test_call_tool_follows_a_task_and_declares_the_extension(transport: str) -> None:
    with client_for(transport) as c:
        result = c.call_tool("slow", {"seconds": 0.3, "text": "x"}, timeout=20)
        assert result.text == "done: x" and not result.is_error
        requests = log(c)
        call = next(r for r in requests if r["method"] == "tools/call")
        assert call["params"]["_meta"][CAPS]["extensions"][EXT] == {}
        assert "task" not in call["params"]  # SEP-2663: the server alone decides
        gets = [r for r in requests if r["method"] == "tasks/get"]
        assert gets and all(r["params"]["_meta"][CAPS]["extensions"][EXT] == {} for r in gets)
        assert not any(r["method"] == "tasks/result" for r in requests)


def test_polls_honour_the_servers_poll_interval(transport: str) -> None:
    with client_for(transport) as c:
        handle = c.call_tool_task("slow", {"seconds": 1.2, "poll_ms": 300})
        assert handle.wait(timeout=20).text == "done: "
        times = [r["t"] for r in of_task(c, handle.task_id, "tasks/get")]
        assert 1 <= len(times) <= 6  # ~4 at 300 ms over 1.2 s, never a busy loop
        gaps = [b - a for a, b in zip(times, times[1:])]
        assert all(g >= 0.25 for g in gaps), gaps  # (never sooner; a busy machine only makes them later)


def test_input_requests_are_answered_once_through_the_handlers(transport: str) -> None:
    handlers = Handlers()
    with client_for(transport, handlers) as c:
        # the server keeps showing an answered request for 0.3 s (eventually consistent):
        # later polls must neither ask the user again nor send the answer again
        result = c.call_tool("ask", {"rounds": 2, "lag": 0.3, "poll_ms": 30}, timeout=30)
        assert result.text == "Hello, user1 and user2"
        assert [e["message"] for e in handlers.elicitations] == ["Please enter name 1.", "Please enter name 2."]
        updates = [r for r in log(c) if r["method"] == "tasks/update"]
        assert [sorted(u["params"]["inputResponses"]) for u in updates] == [["name-1"], ["name-2"]]
        assert updates[0]["params"]["inputResponses"]["name-1"] == {"action": "accept", "content": {"name": "user1"}}
        polls = [r for r in log(c) if r["method"] == "tasks/get"]
        assert len(polls) > len(updates) + 1  # it did poll while the answers took effect


def test_a_sampling_request_inside_a_task(transport: str) -> None:
    handlers = Handlers()
    with client_for(transport, handlers) as c:
        assert c.call_tool("sample", {}, timeout=20).text == "the model said: hi there"
        assert len(handlers.samplings) == 1


def test_a_failed_task_raises_its_json_rpc_error(transport: str) -> None:
    with client_for(transport) as c:
        with pytest.raises(RemoteError) as info:
            c.call_tool("fail", {}, timeout=20)
        assert info.value.code == -32603 and info.value.message == "boom"
        assert isinstance(info.value.task_id, str)
        assert not of_task(c, info.value.task_id, "tasks/cancel")  # it ended: nothing to cancel


def test_a_tool_error_is_a_completed_task(transport: str) -> None:
    with client_for(transport) as c:
        result = c.call_tool("tool_error", {}, timeout=20)
        assert result.is_error and result.text == "bad input"


def test_a_call_timeout_cancels_the_task(transport: str) -> None:
    with client_for(transport) as c:
        c.connect()
        began = time.monotonic()
        with pytest.raises(RequestTimeout) as info:
            c.call_tool("forever", {}, timeout=0.8)
        assert time.monotonic() - began < 10  # bounded by the call's timeout, not by the task
        task_id = info.value.task_id
        assert "did not finish" in str(info.value)
        assert of_task(c, task_id, "tasks/cancel")  # sent within the call's time, before it returned
        assert c.task(task_id).poll().status == "cancelled"


def test_the_handle_polls_reports_status_and_waits(transport: str) -> None:
    with client_for(transport) as c:
        handle = c.call_tool_task("steps", {"steps": 3, "seconds": 0.25, "poll_ms": 40})
        assert isinstance(handle, ToolTask) and handle.modern and handle.task_id
        assert handle.status == "working" and not handle.done
        first = handle.poll()
        assert isinstance(first, Task) and first.task_id == handle.task_id and first.poll_interval_ms == 40
        messages: list[str | None] = []
        result = handle.wait(timeout=20, on_status=lambda t: messages.append(t.status_message))
        assert result.text == "3 steps" and handle.done and handle.status == "completed"
        assert [m for m in messages if m] == ["step 1/3", "step 2/3", "step 3/3"]


def test_the_handle_cancels(transport: str) -> None:
    with client_for(transport) as c:
        handle = c.call_tool_task("forever", {})
        handle.cancel()
        assert handle.poll().status == "cancelled"
        with pytest.raises(Cancelled):
            handle.wait(timeout=5)


def test_a_handle_waits_without_cancelling_when_asked(transport: str) -> None:
    with client_for(transport) as c:
        handle = c.call_tool_task("slow", {"seconds": 1.0})
        with pytest.raises(RequestTimeout):
            handle.wait(timeout=0.2, cancel_on_timeout=False)
        assert handle.wait(timeout=20).text == "done: "  # still running, then done
        assert not of_task(c, handle.task_id, "tasks/cancel")


def test_a_task_resumed_from_its_id_on_another_client(transport: str) -> None:
    if transport == "stdio":
        pytest.skip("a stdio server's tasks live in its own process: one client")
    with client_for(transport) as first:
        task_id = first.call_tool_task("slow", {"seconds": 0.5, "text": "later"}).task_id
    with client_for(transport) as second:
        handle = second.task(task_id, tool="slow")
        assert handle.wait(timeout=20).text == "done: later"


def test_the_server_may_answer_without_a_task(transport: str) -> None:
    with client_for(transport) as c:
        assert c.call_tool("quick", {}).text == "quick"
        assert c.call_tool("quick", {}, task=True).text == "quick"  # run as a task: its result, not a handle
        handle = c.call_tool_task("quick", {})
        assert handle.task is None and handle.done and handle.poll() is None
        assert handle.wait().text == "quick"


def test_an_input_request_the_client_cannot_answer_ends_the_call_and_the_task(transport: str) -> None:
    with client_for(transport) as c:  # no elicitation handler
        with pytest.raises(InputRequestError):
            c.call_tool("ask", {}, timeout=20)
        call = [r for r in log(c) if r["method"] == "tasks/get"][-1]
        task_id = call["params"]["taskId"]
        assert of_task(c, task_id, "tasks/cancel")  # before the call returned


def test_without_the_extension_the_server_makes_no_task(transport: str) -> None:
    with client_for(transport, extensions=[]) as c:
        assert "extensions" not in c.client_capabilities()
        with pytest.raises(RemoteError) as info:
            c.call_tool("slow", {})
        assert info.value.code == -32021
        assert info.value.data["requiredCapabilities"]["extensions"] == {EXT: {}}
        assert c.call_tool("quick", {}).text == "quick"


def test_declared_extensions_are_what_the_client_was_given(transport: str) -> None:
    audit = Extension("com.example/audit", {"level": "full"})
    with client_for(transport, extensions=[*Extension.DEFAULTS, audit]) as c:
        c.call_tool("quick", {})
        call = next(r for r in log(c) if r["method"] == "tools/call")
        declared = call["params"]["_meta"][CAPS]["extensions"]
        assert declared == {EXT: {}, "io.modelcontextprotocol/skills": {}, "com.example/audit": {"level": "full"}}


def test_tasks_requests_name_their_task_over_http(transport: str) -> None:
    if transport == "stdio":
        pytest.skip("headers are an HTTP matter")
    handlers = Handlers()
    with client_for(transport, handlers) as c:
        c.call_tool("ask", {}, timeout=20)
        with pytest.raises(RequestTimeout):
            c.call_tool("forever", {}, timeout=0.5)
        assert wait_until(lambda: any(r["method"] == "tasks/cancel" for r in log(c)), 10)
        tasks = [r for r in log(c) if r["method"].startswith("tasks/")]
        assert {r["method"] for r in tasks} == {"tasks/get", "tasks/update", "tasks/cancel"}
        for r in tasks:
            assert not r.get("refused")
            assert r["headers"]["mcp-name"] == r["params"]["taskId"]
            assert r["headers"]["mcp-method"] == r["method"]


def test_closing_the_client_ends_a_wait(transport: str) -> None:
    c = client_for(transport)
    c.connect()
    handle = c.call_tool_task("forever", {"poll_ms": 5000})
    failure: list[BaseException] = []

    def wait() -> None:
        try:
            handle.wait(timeout=60)
        except BaseException as exc:  # noqa: BLE001 - reported below
            failure.append(exc)

    t = threading.Thread(target=wait)
    t.start()
    c.close()  # the waiter meets it between two polls (5 s apart) or on its next request
    t.join(10)
    assert not t.is_alive() and failure and "closed" in str(failure[0])
