"""LLM tool adapters: provider shapes (as JSON Schema), stable order, reversible names,
tool-use execution with agent messages."""

from __future__ import annotations

import json
import random
import threading

import jsonschema

from mcpsync import CallToolResult, ImageContent, TextContent, Tool
from mcpsync._errors import CircuitOpen, InvalidParams
from mcpsync.adapters import (
    NAME_PATTERN,
    ToolAdapter,
    anthropic_tools,
    openai_responses_tools,
    run_anthropic_tool_use,
    run_openai_tool_call,
    sanitize_name,
)

NAME = {"type": "string", "pattern": "^[a-zA-Z0-9_-]{1,64}$"}
OBJECT_SCHEMA = {
    "type": "object",
    "required": ["type"],
    "properties": {
        "type": {"const": "object"},
        "properties": {"type": "object"},
        "required": {"type": "array", "items": {"type": "string"}},
    },
}

# Anthropic Messages API, `tools[]` (custom tool): name, description, input_schema
ANTHROPIC_TOOL = {
    "type": "object",
    "required": ["name", "input_schema"],
    "properties": {
        "type": {"enum": ["custom"]},
        "name": NAME,
        "description": {"type": "string"},
        "input_schema": OBJECT_SCHEMA,
        "cache_control": {"type": ["object", "null"]},
    },
    "additionalProperties": False,
}
ANTHROPIC_TEXT = {
    "type": "object",
    "required": ["type", "text"],
    "properties": {"type": {"const": "text"}, "text": {"type": "string"}},
    "additionalProperties": False,
}
ANTHROPIC_IMAGE = {
    "type": "object",
    "required": ["type", "source"],
    "properties": {
        "type": {"const": "image"},
        "source": {
            "type": "object",
            "required": ["type", "media_type", "data"],
            "properties": {
                "type": {"const": "base64"},
                "media_type": {"enum": ["image/jpeg", "image/png", "image/gif", "image/webp"]},
                "data": {"type": "string"},
            },
            "additionalProperties": False,
        },
    },
    "additionalProperties": False,
}
# Anthropic `tool_result` content block (in a user message)
ANTHROPIC_TOOL_RESULT = {
    "type": "object",
    "required": ["type", "tool_use_id"],
    "properties": {
        "type": {"const": "tool_result"},
        "tool_use_id": {"type": "string"},
        "content": {"oneOf": [{"type": "string"}, {"type": "array", "items": {"oneOf": [ANTHROPIC_TEXT, ANTHROPIC_IMAGE]}}]},
        "is_error": {"type": "boolean"},
        "cache_control": {"type": ["object", "null"]},
    },
    "additionalProperties": False,
}
# OpenAI Chat Completions `tools[]`
OPENAI_TOOL = {
    "type": "object",
    "required": ["type", "function"],
    "properties": {
        "type": {"const": "function"},
        "function": {
            "type": "object",
            "required": ["name"],
            "properties": {
                "name": NAME,
                "description": {"type": "string"},
                "parameters": OBJECT_SCHEMA,
                "strict": {"type": ["boolean", "null"]},
            },
            "additionalProperties": False,
        },
    },
    "additionalProperties": False,
}
# OpenAI Chat Completions tool message
OPENAI_TOOL_MESSAGE = {
    "type": "object",
    "required": ["role", "tool_call_id", "content"],
    "properties": {
        "role": {"const": "tool"},
        "tool_call_id": {"type": "string"},
        "content": {
            "oneOf": [
                {"type": "string"},
                {"type": "array", "items": {"type": "object", "required": ["type", "text"], "properties": {"type": {"const": "text"}, "text": {"type": "string"}}}},
            ]
        },
    },
    "additionalProperties": False,
}
# OpenAI Responses API function tool (flat) and function_call_output item
RESPONSES_TOOL = {
    "type": "object",
    "required": ["type", "name", "parameters"],
    "properties": {
        "type": {"const": "function"},
        "name": NAME,
        "description": {"type": ["string", "null"]},
        "parameters": OBJECT_SCHEMA,
        "strict": {"type": ["boolean", "null"]},
    },
    "additionalProperties": False,
}
RESPONSES_OUTPUT = {
    "type": "object",
    "required": ["type", "call_id", "output"],
    "properties": {"type": {"const": "function_call_output"}, "call_id": {"type": "string"}, "output": {"type": "string"}},
    "additionalProperties": False,
}


def _validate(items, schema):
    for item in items:
        jsonschema.validate(item, schema)


def _tool(name, description="", props=None, **kw):
    schema = {"type": "object", "properties": props or {}}
    return Tool.build(name, description=description or None, input_schema=schema, **kw)


class Source:
    """A Client-like source: list_tools and call_tool, over in-memory tools."""

    def __init__(self, tools, name="srv"):
        self.tools = list(tools)
        self.name = name
        self.calls = []
        self.lists = 0

    def list_tools(self, **kw):
        self.lists += 1
        return list(self.tools)

    def call_tool(self, name, arguments=None, **kw):
        self.calls.append((name, arguments, kw))
        if name == "boom":
            raise CircuitOpen("open", retry_after=12.2)
        if name == "strict":
            raise InvalidParams("bad", data={"field": "query"})
        if name == "picture":
            return CallToolResult(content=[TextContent(text="a dot"), ImageContent(data="iVBORw0KGgo=", mime_type="image/png")])
        if name == "failing":
            return CallToolResult(content=[TextContent(text="it broke")], is_error=True)
        if name == "structured":
            return CallToolResult(content=[], structured_content={"n": 1})
        return CallToolResult(content=[TextContent(text=f"{name}:{json.dumps(arguments, sort_keys=True)}")])


class Entry:
    def __init__(self, server, name, tool):
        self.server, self.name, self.tool = server, name, tool


class MultiSource(Source):
    """A MultiClient-like source: tool_entries() with servers."""

    def __init__(self, entries):
        super().__init__([])
        self.entries = entries

    def tool_entries(self):
        return [Entry(*e) for e in self.entries]


TOOLS = [
    _tool("search", "Search the web", {"q": {"type": "string"}}),
    _tool("add", "Add", {"a": {"type": "number"}, "b": {"type": "number"}}),
    _tool("files.read", "Read a file"),
    _tool("get-sum"),
    _tool("x" * 80, "long"),
    _tool("weird name/with spaces"),
]
FIXED_ANTHROPIC = [{"name": "calculator", "description": "local", "input_schema": {"type": "object", "properties": {}}}]
FIXED_OPENAI = [{"type": "function", "function": {"name": "calculator", "parameters": {"type": "object", "properties": {}}}}]


# ------------------------------------------------------------------ shapes


def test_anthropic_shape():
    out = ToolAdapter(Source(TOOLS), fixed=FIXED_ANTHROPIC).anthropic()
    _validate(out, ANTHROPIC_TOOL)
    assert out[0] == FIXED_ANTHROPIC[0]
    add = next(t for t in out if t["name"] == "add")
    assert add == {"name": "add", "description": "Add", "input_schema": {"type": "object", "properties": {"a": {"type": "number"}, "b": {"type": "number"}}}}
    assert "description" not in next(t for t in out if t["name"] == "get-sum")  # none given: omitted


def test_openai_shapes():
    src = Source(TOOLS)
    chat = ToolAdapter(src, fixed=FIXED_OPENAI).openai()
    _validate(chat, OPENAI_TOOL)
    assert chat[0] == FIXED_OPENAI[0]
    responses = openai_responses_tools(src)
    _validate(responses, RESPONSES_TOOL)
    assert [t["name"] for t in responses] == [t["function"]["name"] for t in chat[1:]]


def test_schemaless_and_odd_schemas_become_object_schemas():
    tools = [Tool.build("a", input_schema={}), Tool.build("b", input_schema={"$schema": "http://json-schema.org/draft-07/schema#", "type": "object", "properties": {"x": {"type": "string"}}})]
    out = anthropic_tools(tools)
    _validate(out, ANTHROPIC_TOOL)
    assert out[0]["input_schema"] == {"type": "object", "properties": {}}
    assert "$schema" not in out[1]["input_schema"]


def test_the_tools_own_definitions_are_not_mutated():
    tool = _tool("a", "d", {"x": {"type": "string"}})
    before = json.dumps(tool.input_schema, sort_keys=True)
    out = anthropic_tools([tool])
    out[0]["input_schema"]["properties"]["y"] = {}
    assert json.dumps(tool.input_schema, sort_keys=True) == before


# ------------------------------------------------------------------ names


def test_names_are_sanitised_and_reversible():
    adapter = ToolAdapter(Source(TOOLS))
    out = adapter.anthropic()
    names = [t["name"] for t in out]
    assert all(NAME_PATTERN.match(n) for n in names)
    assert len(set(names)) == len(names)
    assert "files_read" in names and "get-sum" in names
    for tool in TOOLS:
        llm = adapter.llm_name(tool.name)
        assert adapter.resolve(llm) == ("srv", tool.name)


def test_sanitised_names_never_collide():
    tools = [_tool("a.b"), _tool("a_b"), _tool("a b"), _tool("calculator")]
    adapter = ToolAdapter(tools, fixed=FIXED_ANTHROPIC)
    names = [t["name"] for t in adapter.anthropic()]
    assert len(set(names)) == len(names) == 5
    assert "a_b" in names  # the tool really called a_b keeps its name
    assert names.count("calculator") == 1  # the fixed tool's name is reserved
    for tool in tools:
        assert adapter.resolve(adapter.llm_name(tool.name))[1] == tool.name


def test_sanitize_name_is_deterministic():
    assert sanitize_name("x" * 80) == sanitize_name("x" * 80) != sanitize_name("x" * 81)
    assert len(sanitize_name("é" * 100)) <= 64 and NAME_PATTERN.match(sanitize_name(""))


# ------------------------------------------------------------------ order


def test_fixed_first_then_sorted_by_server_then_name():
    entries = [
        ("zeta", "zeta__echo", _tool("echo")),
        ("alpha", "search", _tool("search")),
        ("alpha", "alpha__echo", _tool("echo")),
        ("beta", "add", _tool("add")),
    ]
    out = ToolAdapter(MultiSource(entries), fixed=FIXED_ANTHROPIC).anthropic()
    assert [t["name"] for t in out] == ["calculator", "alpha__echo", "search", "add", "zeta__echo"]


def test_order_is_stable_across_100_calls():
    src = Source(TOOLS)
    adapter = ToolAdapter(src, fixed=FIXED_ANTHROPIC)
    first = json.dumps(adapter.anthropic())
    for _ in range(100):
        assert json.dumps(adapter.anthropic()) == first
        assert json.dumps(ToolAdapter(src, fixed=FIXED_ANTHROPIC).anthropic()) == first  # fresh adapters agree


def test_order_is_stable_when_the_server_lists_the_same_set_differently():
    src = Source(TOOLS)
    adapter = ToolAdapter(src)
    first = adapter.openai()
    frozen = json.dumps(first)
    rng = random.Random(7)
    for _ in range(20):
        shuffled = list(TOOLS)
        rng.shuffle(shuffled)
        # same tools, listed in another order with their schema keys in another order
        src.tools = [Tool.build(t.name, description=t.description, input_schema=dict(reversed(list(t.input_schema.items())))) for t in shuffled]
        again = adapter.openai()
        assert json.dumps(again) == frozen
        assert again is first  # the cached rendering itself: the prompt prefix cannot move


def test_a_changed_set_changes_the_list_in_place():
    src = Source(TOOLS)
    adapter = ToolAdapter(src, fixed=FIXED_ANTHROPIC)
    before = [t["name"] for t in adapter.anthropic()]
    src.tools = TOOLS + [_tool("bbb", "new")]
    after = [t["name"] for t in adapter.anthropic()]
    assert after[0] == "calculator"
    assert after[1:] == [adapter.llm_name(n) for n in sorted(t.name for t in src.tools)]  # still sorted
    assert set(after) - set(before) == {"bbb"}


def test_rendering_is_thread_safe():
    adapter = ToolAdapter(Source(TOOLS))
    expected = json.dumps(adapter.anthropic())
    seen = []

    def worker():
        for _ in range(50):
            seen.append(json.dumps(adapter.anthropic()))

    threads = [threading.Thread(target=worker) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(10)
    assert seen and all(s == expected for s in seen)


# ------------------------------------------------------------------ execution


def test_anthropic_tool_use_round_trip():
    src = Source(TOOLS + [_tool("picture"), _tool("failing"), _tool("structured")])
    adapter = ToolAdapter(src)
    adapter.anthropic()
    r = adapter.run_anthropic({"type": "tool_use", "id": "toolu_01", "name": "files_read", "input": {"path": "/a"}})
    _validate([r], ANTHROPIC_TOOL_RESULT)
    assert r == {"type": "tool_result", "tool_use_id": "toolu_01", "content": [{"type": "text", "text": 'files.read:{"path": "/a"}'}], "is_error": False}
    assert src.calls[-1][0] == "files.read"  # the original name reached the server
    pic = adapter.run_anthropic({"type": "tool_use", "id": "t2", "name": "picture", "input": {}})
    _validate([pic], ANTHROPIC_TOOL_RESULT)
    assert pic["content"][1] == {"type": "image", "source": {"type": "base64", "media_type": "image/png", "data": "iVBORw0KGgo="}}
    bad = adapter.run_anthropic({"type": "tool_use", "id": "t3", "name": "failing", "input": {}})
    assert bad["is_error"] is True and bad["content"] == [{"type": "text", "text": "it broke"}]
    st = adapter.run_anthropic({"type": "tool_use", "id": "t4", "name": "structured", "input": {}})
    assert st["content"] == [{"type": "text", "text": '{"n": 1}'}]


def test_sdk_style_objects_are_accepted():
    class Block:
        type = "tool_use"
        id = "toolu_9"
        name = "add"
        input = {"a": 1, "b": 2}

    r = run_anthropic_tool_use(Source(TOOLS), Block())
    assert r["tool_use_id"] == "toolu_9" and r["is_error"] is False


def test_errors_become_agent_messages():
    src = Source(TOOLS + [_tool("boom"), _tool("strict")])
    a = ToolAdapter(src)
    r = a.run_anthropic({"type": "tool_use", "id": "t", "name": "boom", "input": {}})
    _validate([r], ANTHROPIC_TOOL_RESULT)
    assert r["is_error"] is True
    assert r["content"][0]["text"] == "tool boom is temporarily disabled: its server failed repeatedly; retried automatically in 13 s"
    r = a.run_anthropic({"type": "tool_use", "id": "t", "name": "strict", "input": {}})
    assert r["content"][0]["text"] == "tool strict got bad arguments: field query is malformed"
    r = a.run_anthropic({"type": "tool_use", "id": "t", "name": "nope", "input": {}})
    assert r["content"][0]["text"] == "tool nope does not exist: check the tool name and the server configuration"
    zh = ToolAdapter(src, lang="zh").run_anthropic({"type": "tool_use", "id": "t", "name": "nope", "input": {}})
    assert zh["content"][0]["text"] == "工具 nope 不存在：请检查工具名称和 Server 配置"


def test_openai_tool_call_round_trip():
    src = Source(TOOLS + [_tool("boom")])
    a = ToolAdapter(src)
    call = {"id": "call_1", "type": "function", "function": {"name": "add", "arguments": '{"a": 1, "b": 2}'}}
    msg = a.run_openai(call)
    _validate([msg], OPENAI_TOOL_MESSAGE)
    assert msg == {"role": "tool", "tool_call_id": "call_1", "content": 'add:{"a": 1, "b": 2}'}
    bad_json = a.run_openai({"id": "call_2", "type": "function", "function": {"name": "add", "arguments": "{nope"}})
    assert bad_json["content"] == "tool add got bad arguments: field arguments is malformed"
    not_object = run_openai_tool_call(src, {"id": "c", "function": {"name": "add", "arguments": "[1]"}})
    assert not_object["content"] == "tool add got bad arguments: field arguments is malformed"
    empty = a.run_openai({"id": "c", "function": {"name": "search", "arguments": ""}})
    assert empty["content"] == "search:{}"
    boom = a.run_openai({"id": "c", "function": {"name": "boom", "arguments": "{}"}})
    assert boom["content"].startswith("tool boom is temporarily disabled")
    out = a.run_responses({"type": "function_call", "call_id": "fc_1", "name": "get-sum", "arguments": "{}"})
    _validate([out], RESPONSES_OUTPUT)
    assert out == {"type": "function_call_output", "call_id": "fc_1", "output": "get-sum:{}"}


def test_multi_source_calls_use_the_exposed_name():
    entries = [("alpha", "alpha__echo", _tool("echo")), ("zeta", "zeta__echo", _tool("echo"))]
    src = MultiSource(entries)
    a = ToolAdapter(src)
    assert [t["name"] for t in a.anthropic()] == ["alpha__echo", "zeta__echo"]
    a.run_anthropic({"type": "tool_use", "id": "t", "name": "zeta__echo", "input": {"m": 1}})
    assert src.calls[-1][0] == "zeta__echo"  # the MultiClient routes it


def test_timeout_is_passed_through():
    src = Source(TOOLS)
    ToolAdapter(src, timeout=4.0).run_anthropic({"type": "tool_use", "id": "t", "name": "add", "input": {}})
    assert src.calls[-1][2] == {"timeout": 4.0}


def test_anthropic_cache_breakpoint_on_the_last_tool():
    adapter = ToolAdapter(Source(TOOLS), fixed=FIXED_ANTHROPIC)
    plain = adapter.anthropic()
    cached = adapter.anthropic(cache_control=True)
    _validate(cached, ANTHROPIC_TOOL)
    assert cached[-1]["cache_control"] == {"type": "ephemeral"}
    assert all("cache_control" not in t for t in cached[:-1]) and all("cache_control" not in t for t in plain)
    assert [t["name"] for t in cached] == [t["name"] for t in plain]
    assert adapter.anthropic(cache_control=True) is cached
