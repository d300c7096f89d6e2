"""MCP tools as a pydantic-ai toolset, run by pydantic-ai agents with its own test models
(``TestModel``, ``FunctionModel``) against the official SDK's server and server-everything
(issue 34): what the model was shown, what reached the server, what the agent saw. No model
provider is called."""

from __future__ import annotations

import threading
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import pytest

pytest.importorskip("pydantic_ai")

from pydantic_ai import Agent  # noqa: E402
from pydantic_ai.messages import (  # noqa: E402
    BinaryContent,
    ModelMessage,
    ModelRequest,
    ModelResponse,
    RetryPromptPart,
    TextPart,
    ToolCallPart,
    ToolReturnPart,
)
from pydantic_ai.models.function import AgentInfo, FunctionModel  # noqa: E402
from pydantic_ai.models.test import TestModel  # noqa: E402

from mcpsync import agent_message  # noqa: E402
from mcpsync._errors import RequestTimeout  # noqa: E402
from mcpsync.integrations.pydantic_ai import MCPToolset  # noqa: E402
from tests.helpers import wait_until  # noqa: E402
from tests.integration.agent_support import agent_server, assert_search_schema, two_servers  # noqa: E402

pytestmark = [pytest.mark.timeout(120)]


class Script:
    """A FunctionModel function: the first turn makes the given tool calls, then it answers."""

    def __init__(self, calls: list[ToolCallPart], answer: str = "done") -> None:
        self.calls, self.answer = calls, answer
        self.shown: dict[str, Any] = {}
        self.turns: list[set[str]] = []  # the tool names shown at each turn

    def __call__(self, messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        self.shown = {t.name: t for t in info.function_tools}
        self.turns.append(set(self.shown))
        if len(messages) == 1:
            return ModelResponse(parts=list(self.calls))
        return ModelResponse(parts=[TextPart(self.answer)])


def _returns(messages: list[ModelMessage]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for m in messages:
        if isinstance(m, ModelRequest):
            for p in m.parts:
                if isinstance(p, (ToolReturnPart, RetryPromptPart)):
                    out[p.tool_call_id] = p
    return out


def _retried(part: Any) -> bool:
    """pydantic-ai's own mark of a tool error (ModelRetry): a retry prompt, or (2.x) a tool
    return whose outcome is "retried"."""
    return isinstance(part, RetryPromptPart) or getattr(part, "outcome", None) == "retried"


def test_function_model_run_against_the_sdk_server(tmp_path):
    with agent_server(tmp_path) as (client, received):
        script = Script([
            ToolCallPart("search", {"query": "mcp", "filters": {"tags": ["sync"]}}, tool_call_id="c1"),
            ToolCallPart("add", {"a": 2, "b": 40}, tool_call_id="c2"),
            ToolCallPart("picture", {}, tool_call_id="c3"),
            ToolCallPart("fail", {"reason": "no luck"}, tool_call_id="c4"),
        ])
        agent = Agent(FunctionModel(script), toolsets=[MCPToolset(client)], retries=2)
        result = agent.run_sync("search, add, draw, fail")
        assert result.output == "done"

        # what the model was shown: the server's schema, unchanged
        assert set(script.shown) == {"search", "add", "picture", "fail", "sleep_ms", "grow"}
        assert_search_schema(script.shown["search"].parameters_json_schema)
        assert script.shown["search"].metadata == {"server": "agent", "tool": "search"}

        # what reached the server
        assert received.of("search") == [{"query": "mcp", "limit": 5, "mode": "fast", "filters": {"tags": ["sync"], "min_score": 0.5}}]
        assert received.of("add") == [{"a": 2, "b": 40}]
        assert received.of("fail") == [{"reason": "no luck"}]

        # what the agent saw
        seen = _returns(result.all_messages())
        assert seen["c1"].content == {"hits": ["mcp-0", "mcp-1", "mcp-2"], "mode": "fast"}
        assert seen["c2"].content == {"result": 42}
        pic = seen["c3"].content
        assert isinstance(pic, list) and isinstance(pic[1], BinaryContent) and pic[1].media_type == "image/png"
        assert pic[1].data.startswith(b"\x89PNG")
        assert _retried(seen["c4"]) and "no luck" in str(seen["c4"].content)
        assert not _retried(seen["c2"])


def test_test_model_calls_every_tool_from_its_schema(tmp_path):
    # TestModel makes up arguments from each tool's JSON Schema: valid ones reach the server
    with agent_server(tmp_path) as (client, received):
        agent = Agent(TestModel(call_tools=["search", "add", "picture"]), toolsets=[MCPToolset(client)])
        result = agent.run_sync("go")
        assert len(received.of("search")) == 1 and len(received.of("add")) == 1 and len(received.of("picture")) == 1
        assert set(received.of("search")[0]) == {"query", "limit", "mode", "filters"}
        assert "search" in result.output and "add" in result.output


def test_a_failed_call_reaches_the_model_as_agent_message(tmp_path):
    with agent_server(tmp_path) as (client, received):
        script = Script([ToolCallPart("sleep_ms", {"ms": 3000}, tool_call_id="t1")], "gave up")
        agent = Agent(FunctionModel(script), toolsets=[MCPToolset(client, timeout=0.3)], retries=2)
        result = agent.run_sync("wait")
        part = _returns(result.all_messages())["t1"]
        assert _retried(part)
        assert part.content == agent_message(RequestTimeout("x"), tool="sleep_ms")
        assert received.of("sleep_ms") == [{"ms": 3000}]


def test_eight_threads_run_agents_at_once(tmp_path):
    with agent_server(tmp_path) as (client, received):
        toolset = MCPToolset(client)
        start = threading.Barrier(8)

        def run(n: int) -> dict[str, Any]:
            calls = [ToolCallPart("add", {"a": n, "b": k}, tool_call_id=f"{n}-{k}") for k in range(4)]
            agent = Agent(FunctionModel(Script(calls)), toolsets=[toolset])
            start.wait(30)
            return {k: p.content for k, p in _returns(agent.run_sync("add").all_messages()).items()}

        with ThreadPoolExecutor(8) as pool:
            seen = list(pool.map(run, range(8)))
        assert seen == [{f"{n}-{k}": {"result": n + k} for k in range(4)} for n in range(8)]
        assert len(received.of("add")) == 32


def test_the_toolset_follows_tools_list_changed(tmp_path):
    with agent_server(tmp_path, mode="legacy") as (client, received):
        toolset = MCPToolset(client)
        changed = threading.Event()
        client.on_notification("notifications/tools/list_changed", lambda _p: changed.set())
        first = Script([ToolCallPart("grow", {}, tool_call_id="g")])
        Agent(FunctionModel(first), toolsets=[toolset]).run_sync("grow")
        assert "shout" not in first.turns[0]
        assert changed.wait(10)
        assert wait_until(lambda: "shout" in {s.name for s in toolset.toolbox.specs()}, timeout=10)
        second = Script([ToolCallPart("shout", {"text": "hey"}, tool_call_id="s")])
        result = Agent(FunctionModel(second), toolsets=[toolset]).run_sync("shout")
        assert "shout" in second.shown
        assert _returns(result.all_messages())["s"].content == {"result": "HEY"}
        assert received.of("shout") == [{"text": "hey"}]


@pytest.mark.npm
def test_function_model_over_a_multiclient(tmp_path):
    with two_servers(tmp_path) as (multi, received):
        script = Script([
            ToolCallPart("agent__add", {"a": 1, "b": 2}, tool_call_id="m1"),
            ToolCallPart("everything__echo", {"message": "hi"}, tool_call_id="m2"),
            ToolCallPart("everything__get-tiny-image", {}, tool_call_id="m3"),
        ])
        result = Agent(FunctionModel(script), toolsets=[MCPToolset(multi)]).run_sync("go")
        seen = _returns(result.all_messages())
        assert seen["m1"].content == {"result": 3}
        assert seen["m2"].content == "Echo: hi"
        assert any(isinstance(b, BinaryContent) and b.media_type == "image/png" for b in seen["m3"].content)
        assert script.shown["everything__echo"].metadata == {"server": "everything", "tool": "everything__echo"}
        assert received.of("add") == [{"a": 1, "b": 2}]
