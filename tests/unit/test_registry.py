"""The Local registry, the transport-free server core and the stdio server loop."""

from __future__ import annotations

import io
import json
from typing import Literal, Optional

import msgspec
import pytest

from mcpsync import CallToolResult, ImageContent, InvalidParams, ResourceNotFound, TextContent, ToolNotFound
from mcpsync._errors import MethodNotFound, UnsupportedProtocolVersion
from mcpsync.server import Context, Registry, ServerCore, serve_stdio
from mcpsync.server.demo import registry as demo

MODERN = {"io.modelcontextprotocol/protocolVersion": "2026-07-28"}


@pytest.fixture()
def reg() -> Registry:
    r = Registry("unit", "9.9", instructions="be nice")

    @r.tool()
    def add(a: int, b: int = 2) -> int:
        """Add two integers."""
        return a + b

    @r.tool(name="greet", title="Greeter", annotations={"readOnlyHint": True})
    def hello(name: str, polite: bool = False, tone: Literal["warm", "cold"] = "warm", nick: Optional[str] = None) -> str:
        return ("Dear " if polite else "") + (nick or name)

    @r.tool
    def stats(values: list[float]) -> dict:
        return {"n": len(values), "sum": sum(values)}

    @r.tool()
    def boom() -> str:
        raise ValueError("kaput")

    @r.tool()
    def picture() -> ImageContent:
        return ImageContent(data="aGk=", mime_type="image/png")

    @r.tool()
    def nothing() -> None:
        return None

    @r.tool()
    def steps(n: int, ctx: Context) -> str:
        for i in range(n):
            ctx.progress(i + 1, n, f"step {i + 1}")
        return "done"

    @r.tool()
    def anything(**kwargs: object) -> str:
        return ",".join(sorted(kwargs))

    @r.resource("mem://readme", mime_type="text/markdown")
    def readme() -> str:
        """The readme."""
        return "# hi"

    @r.resource("mem://blob", mime_type="application/octet-stream")
    def blob() -> bytes:
        return b"\x00\x01"

    @r.resource("mem://users/{user}/note")
    def note(user: str) -> str:
        return f"note of {user}"

    @r.prompt()
    def review(code: str, language: str = "python") -> str:
        """Review some code."""
        return f"Review this {language}: {code}"

    return r


def test_input_schema_comes_from_the_signature(reg: Registry) -> None:
    tools = {t.name: t for t in reg.list_tools()}
    assert list(tools) == ["add", "greet", "stats", "boom", "picture", "nothing", "steps", "anything"]
    add = tools["add"]
    assert add.description == "Add two integers."
    assert add.input_schema == {
        "type": "object",
        "properties": {"a": {"type": "integer"}, "b": {"type": "integer", "default": 2}},
        "required": ["a"],
    }
    assert add.output_schema == {"type": "object", "properties": {"result": {"type": "integer"}}, "required": ["result"]}
    greet = tools["greet"]
    assert greet.title == "Greeter" and greet.annotations is not None and greet.annotations.read_only_hint
    props = greet.input_schema["properties"]
    assert props["tone"] == {"enum": ["warm", "cold"], "default": "warm"}
    assert props["nick"] == {"type": "string", "default": None}
    assert tools["stats"].input_schema["properties"]["values"] == {"type": "array", "items": {"type": "number"}}
    assert "ctx" not in tools["steps"].input_schema["properties"]
    # the wire form uses MCP's camelCase names
    wire = json.loads(msgspec.json.encode(add))
    assert set(wire) >= {"name", "inputSchema", "outputSchema"}


def test_call_results(reg: Registry) -> None:
    r = reg.call_tool("add", {"a": 40})
    assert r.structured_content == {"result": 42} and r.text == "42" and not r.is_error
    assert reg.call_tool("greet", {"name": "Ada", "polite": True}).text == "Dear Ada"
    s = reg.call_tool("stats", {"values": [1, 2.5]})
    assert s.structured_content == {"n": 2, "sum": 3.5} and json.loads(s.text) == {"n": 2, "sum": 3.5}
    assert isinstance(reg.call_tool("picture").content[0], ImageContent)
    assert reg.call_tool("nothing").content == []
    assert reg.call_tool("anything", {"z": 1, "a": 2}).text == "a,z"


def test_a_raising_tool_is_an_error_result(reg: Registry) -> None:
    r = reg.call_tool("boom", {})
    assert isinstance(r, CallToolResult) and r.is_error
    assert r.content == [TextContent(text="ValueError: kaput")]


@pytest.mark.parametrize(
    "args, field",
    [({}, "a"), ({"a": 1, "c": 3}, "c"), ({"a": "1"}, "a"), ({"a": True}, "a"), ({"a": 1.5}, "a")],
    ids=["missing", "unknown", "string-for-int", "bool-for-int", "float-for-int"],
)
def test_bad_arguments_raise_invalid_params(reg: Registry, args: dict, field: str) -> None:
    with pytest.raises(InvalidParams) as info:
        reg.call_tool("add", args)
    assert info.value.code == -32602 and info.value.data["field"] == field


def test_unknown_tool(reg: Registry) -> None:
    with pytest.raises(ToolNotFound):
        reg.call_tool("nope", {})


def test_context_reports_progress(reg: Registry) -> None:
    seen: list[tuple] = []
    r = reg.call_tool("steps", {"n": 3}, Context(progress=lambda *a: seen.append(a)))
    assert r.text == "done" and seen == [(1, 3, "step 1"), (2, 3, "step 2"), (3, 3, "step 3")]
    assert reg.call_tool("steps", {"n": 2}).text == "done"  # without a context: progress is dropped


def test_resources_and_templates(reg: Registry) -> None:
    assert [r["uri"] for r in reg.list_resources()] == ["mem://readme", "mem://blob"]
    assert reg.list_resource_templates() == [{"uriTemplate": "mem://users/{user}/note", "name": "note", "mimeType": "text/plain"}]
    assert reg.read_resource("mem://readme") == {"contents": [{"uri": "mem://readme", "mimeType": "text/markdown", "text": "# hi"}]}
    assert reg.read_resource("mem://blob")["contents"][0]["blob"] == "AAE="
    assert reg.read_resource("mem://users/ada/note")["contents"][0]["text"] == "note of ada"
    with pytest.raises(ResourceNotFound):
        reg.read_resource("mem://users/ada/other")


def test_prompts(reg: Registry) -> None:
    assert reg.list_prompts() == [{
        "name": "review", "description": "Review some code.",
        "arguments": [{"name": "code", "required": True}, {"name": "language", "required": False}],
    }]
    got = reg.get_prompt("review", {"code": "x = 1"})
    assert got["messages"] == [{"role": "user", "content": {"type": "text", "text": "Review this python: x = 1"}}]
    with pytest.raises(InvalidParams):
        reg.get_prompt("review", {})
    with pytest.raises(InvalidParams):
        reg.get_prompt("unknown", {})


def test_core_answers_both_eras(reg: Registry) -> None:
    core = ServerCore(reg)
    init = core.handle("initialize", {"protocolVersion": "2025-06-18", "capabilities": {}})
    assert init.protocol_version == "2025-06-18" and init.server_info.name == "unit"
    assert core.handle("initialize", {"protocolVersion": "1999-01-01"}).protocol_version == "2025-11-25"
    disc = core.handle("server/discover", {"_meta": MODERN})
    assert disc.supported_versions == ["2026-07-28"] and disc.result_type == "complete"
    assert disc.server_info.name == "unit" and disc.instructions == "be nice"
    assert core.modern_version({"_meta": MODERN}) == "2026-07-28"
    assert core.modern_version({"name": "x"}) is None
    with pytest.raises(UnsupportedProtocolVersion) as info:
        core.modern_version({"_meta": {"io.modelcontextprotocol/protocolVersion": "2030-01-01"}})
    assert info.value.code == -32022 and info.value.data["supported"] == ["2026-07-28"]
    with pytest.raises(MethodNotFound):
        core.handle("nope/nope", {})


def _serve(registry: Registry, *messages: object) -> list[dict]:
    lines = b"".join((m if isinstance(m, bytes) else json.dumps(m).encode()) + b"\n" for m in messages)
    out = io.BytesIO()
    serve_stdio(registry, stdin=io.BytesIO(lines), stdout=out)
    replies = [json.loads(line) for line in out.getvalue().splitlines()]
    return sorted(replies, key=lambda r: (str(r.get("id")), r.get("method", "")))


def test_stdio_loop_legacy_era(reg: Registry) -> None:
    replies = _serve(
        reg,
        {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {"protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "t", "version": "1"}}},
        {"jsonrpc": "2.0", "method": "notifications/initialized"},
        {"jsonrpc": "2.0", "id": 2, "method": "tools/call", "params": {"name": "add", "arguments": {"a": 1, "b": 2}}},
        {"jsonrpc": "2.0", "id": 3, "method": "tools/call", "params": {"name": "steps", "arguments": {"n": 2}, "_meta": {"progressToken": "p"}}},
        {"jsonrpc": "2.0", "id": 4, "method": "tools/call", "params": {"name": "nope"}},
        {"jsonrpc": "2.0", "id": 5, "method": "ping"},
        b"this is not json",
    )
    by_id = {r.get("id"): r for r in replies if "method" not in r}
    assert by_id[1]["result"]["protocolVersion"] == "2025-11-25"
    assert by_id[1]["result"]["serverInfo"] == {"name": "unit", "version": "9.9"}
    assert by_id[2]["result"] == {"content": [{"type": "text", "text": "3"}], "structuredContent": {"result": 3}}
    assert by_id[3]["result"]["content"][0]["text"] == "done"
    assert by_id[4]["error"]["code"] == -32602
    assert by_id[5]["result"] == {}
    assert by_id[None]["error"]["code"] == -32700
    progress = [r["params"] for r in replies if r.get("method") == "notifications/progress"]
    assert [p["progress"] for p in progress] == [1, 2] and all(p["progressToken"] == "p" for p in progress)


def test_stdio_loop_modern_era(reg: Registry) -> None:
    replies = _serve(
        reg,
        {"jsonrpc": "2.0", "id": "d", "method": "server/discover", "params": {"_meta": MODERN}},
        {"jsonrpc": "2.0", "id": "l", "method": "tools/list", "params": {"_meta": MODERN}},
        {"jsonrpc": "2.0", "id": "c", "method": "tools/call", "params": {"name": "boom", "_meta": MODERN}},
        {"jsonrpc": "2.0", "id": "v", "method": "tools/list", "params": {"_meta": {"io.modelcontextprotocol/protocolVersion": "2099-01-01"}}},
    )
    by_id = {r["id"]: r for r in replies}
    assert by_id["d"]["result"]["supportedVersions"] == ["2026-07-28"]
    assert by_id["d"]["result"]["_meta"]["io.modelcontextprotocol/serverInfo"]["name"] == "unit"
    assert by_id["l"]["result"]["resultType"] == "complete" and len(by_id["l"]["result"]["tools"]) == 8
    assert by_id["c"]["result"]["isError"] is True and by_id["c"]["result"]["resultType"] == "complete"
    assert by_id["v"]["error"]["code"] == -32022


def test_demo_registry_tools() -> None:
    names = [t.name for t in demo.list_tools()]
    assert names == ["echo", "add", "word_count", "current_time", "slow_count", "fail"]
    assert demo.call_tool("echo", {"message": "hi"}).text == "hi"
    assert demo.call_tool("add", {"a": 2, "b": 3}).structured_content == {"result": 5}
    assert demo.call_tool("add", {"a": 0.5, "b": 0.25}).structured_content == {"result": 0.75}
    wc = demo.call_tool("word_count", {"text": "to be or not to be\nthat is", "top": 2}).structured_content
    assert wc["words"] == 8 and wc["lines"] == 2 and wc["top"][0] == {"word": "to", "count": 2}
    now = demo.call_tool("current_time", {"utc_offset_hours": 2}).structured_content
    assert now["iso"].endswith("+02:00")
    assert demo.call_tool("current_time", {"utc_offset_hours": 99}).is_error
    assert demo.call_tool("fail", {}).is_error
    assert demo.call_tool("slow_count", {"to": 2, "delay": 0}).text == "counted to 2"
    assert "mcpsync demo server" in demo.read_resource("demo://about")["contents"][0]["text"]
    assert demo.read_resource("demo://greeting/Ada")["contents"][0]["text"] == "Hello, Ada!"
    assert "Summarise" in demo.get_prompt("summarize", {"text": "abc"})["messages"][0]["content"]["text"]


def test_registration_checks() -> None:
    r = Registry()
    with pytest.raises(ValueError):
        r.add_tool(lambda: "x", name="has space")
    with pytest.raises(TypeError, match="async"):

        @r.tool()
        async def later() -> str:
            return "x"

    @r.tool()
    def odd() -> object:
        return object()  # not JSON: reported as an error result, not a crash

    assert r.call_tool("odd", {}).is_error


@pytest.mark.parametrize("module", [
    "mcpsync.server", "mcpsync.server._registry", "mcpsync.server._upstream", "mcpsync.server.demo",
    "mcpsync.server.bridge", "mcpsync.transports.local", "mcpsync.transports.websocket", "mcpsync.transports.grpc",
])
def test_docstring_examples_run(module: str) -> None:
    import doctest
    import importlib

    result = doctest.testmod(importlib.import_module(module), optionflags=doctest.ELLIPSIS)
    assert result.failed == 0 and result.attempted > 0
