"""The Local transport (in-process registry) and the demo server over real stdio."""

from __future__ import annotations

import json
import subprocess
import sys
import threading
from concurrent.futures import ThreadPoolExecutor

import pytest

from mcpsync import CallToolResult, Client, ConnectionClosed, InvalidParams, ToolNotFound
from mcpsync._decoders import decode_result
from mcpsync._messages import EmptyResult
from mcpsync.server import Context, Registry
from mcpsync.server.demo import registry as demo
from mcpsync.transports.local import LocalChannel
from tests.helpers import hammer, wait_until

pytestmark = pytest.mark.timeout(60)


def _client_takes_local_results() -> bool:
    try:
        return isinstance(decode_result("ping", EmptyResult()), EmptyResult)
    except Exception:  # noqa: BLE001
        return False


needs_client = pytest.mark.skipif(
    not _client_takes_local_results(),
    reason="the Client's decode_result does not yet pass in-process (already typed) results through",
)


def test_channel_calls_functions_in_the_calling_thread() -> None:
    reg = Registry("t")
    seen: list[int] = []

    @reg.tool()
    def where() -> str:
        seen.append(threading.get_ident())
        return "here"

    chan = LocalChannel(reg)
    r = chan.request("tools/call", {"name": "where", "arguments": {}})
    assert isinstance(r, CallToolResult) and r.text == "here"
    assert seen == [threading.get_ident()]  # no thread hop


def test_channel_errors_and_error_results() -> None:
    chan = LocalChannel(demo)
    assert chan.request("tools/call", {"name": "fail", "arguments": {"message": "no"}}).is_error
    with pytest.raises(ToolNotFound):
        chan.request("tools/call", {"name": "missing", "arguments": {}})
    with pytest.raises(InvalidParams):
        chan.request("tools/call", {"name": "add", "arguments": {"a": 1}})
    assert chan.request("resources/read", {"uri": "demo://greeting/x"})["contents"][0]["text"] == "Hello, x!"
    assert chan.describe() == "local mcpsync-demo" and chan.alive()
    chan.close()
    assert not chan.alive()
    with pytest.raises(ConnectionClosed):
        chan.request("tools/list", None)


def test_channel_progress_and_log_callbacks() -> None:
    reg = Registry("p")

    @reg.tool()
    def work(ctx: Context) -> str:
        ctx.progress(1, 2, "half")
        ctx.log("info", "working")
        ctx.progress(2, 2, "done")
        return "ok"

    chan = LocalChannel(reg)
    notes: list[tuple] = []
    chan.set_handlers(on_notification=lambda m, p: notes.append((m, p)))
    prog: list[tuple] = []
    assert chan.request("tools/call", {"name": "work"}, progress=lambda *a: prog.append(a)).text == "ok"
    assert prog == [(1, 2, "half"), (2, 2, "done")]
    assert notes == [("notifications/message", {"level": "info", "logger": "p", "data": "working"})]


def test_sixteen_threads_on_one_channel() -> None:
    chan = LocalChannel(demo)

    def call(i: int) -> str:
        return chan.request("tools/call", {"name": "add", "arguments": {"a": i, "b": 1}}).text

    with ThreadPoolExecutor(16) as pool:
        got = dict(zip(range(320), pool.map(call, range(320), timeout=20)))
    assert got == {i: str(i + 1) for i in range(320)}


@needs_client
@pytest.mark.parametrize("mode", ["auto", "modern", "legacy"])
def test_client_over_local(mode: str) -> None:
    with Client(lambda: LocalChannel(demo), mode=mode) as client:
        assert client.server_info.name == "mcpsync-demo"
        assert [t.name for t in client.list_tools()][:2] == ["echo", "add"]
        assert client.call_tool("add", {"a": 1, "b": 2}).structured_content == {"result": 3}
        assert client.call_tool("fail", {}).is_error
        with pytest.raises(ToolNotFound):
            client.call_tool("nope", {})
        assert [r.uri for r in client.list_resources()] == ["demo://about"]
        assert client.read_resource("demo://greeting/Ada").text == "Hello, Ada!"
        assert [p.name for p in client.list_prompts()] == ["summarize"]
        assert "Summarise" in client.get_prompt("summarize", {"text": "t"}).messages[0].content.text


@needs_client
def test_sixteen_threads_on_one_local_client() -> None:
    with Client(lambda: LocalChannel(demo)) as client:
        hammer(client, threads=16, calls=10, expect=lambda msg: msg, timeout=20, join=20)


def _demo() -> subprocess.Popen[bytes]:
    return subprocess.Popen([sys.executable, "-m", "mcpsync.server.demo"], stdin=subprocess.PIPE,
                            stdout=subprocess.PIPE, stderr=subprocess.DEVNULL)


def _exchange(messages: list[dict]) -> dict:
    proc = _demo()
    data = "".join(json.dumps(m) + "\n" for m in messages).encode()
    out, _ = proc.communicate(data, timeout=30)
    assert proc.returncode == 0
    return {r.get("id"): r for r in map(json.loads, out.splitlines())}


def test_demo_process_speaks_the_legacy_era() -> None:
    got = _exchange([
        {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {"protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "t", "version": "1"}}},
        {"jsonrpc": "2.0", "method": "notifications/initialized"},
        {"jsonrpc": "2.0", "id": 2, "method": "tools/list"},
        {"jsonrpc": "2.0", "id": 3, "method": "tools/call", "params": {"name": "word_count", "arguments": {"text": "a b a"}}},
    ])
    assert got[1]["result"]["serverInfo"]["name"] == "mcpsync-demo"
    assert "echo" in [t["name"] for t in got[2]["result"]["tools"]]
    assert got[3]["result"]["structuredContent"]["words"] == 3


def test_demo_process_speaks_the_modern_era() -> None:
    meta = {"io.modelcontextprotocol/protocolVersion": "2026-07-28", "io.modelcontextprotocol/clientCapabilities": {},
            "io.modelcontextprotocol/clientInfo": {"name": "t", "version": "1"}}
    got = _exchange([
        {"jsonrpc": "2.0", "id": 1, "method": "server/discover", "params": {"_meta": meta}},
        {"jsonrpc": "2.0", "id": 2, "method": "tools/call", "params": {"name": "echo", "arguments": {"message": "m"}, "_meta": meta}},
    ])
    assert got[1]["result"]["supportedVersions"] == ["2026-07-28"]
    assert got[2]["result"] == {"content": [{"type": "text", "text": "m"}], "resultType": "complete"}


@pytest.mark.parametrize("mode", ["modern", "legacy"])
def test_client_over_the_demo_process(mode: str) -> None:
    with Client.stdio(sys.executable, ["-m", "mcpsync.server.demo"], mode=mode) as client:
        assert client.era == mode and client.server_info.name == "mcpsync-demo"
        assert client.call_tool("add", {"a": 2, "b": 2}).structured_content == {"result": 4}
        prog: list[tuple] = []
        assert client.call_tool("slow_count", {"to": 3, "delay": 0.01}, progress=lambda *a: prog.append(a)).text == "counted to 3"
        assert wait_until(lambda: len(prog) == 3, 5) and [p[0] for p in prog] == [1, 2, 3]
        assert client.call_tool("fail", {}).is_error
