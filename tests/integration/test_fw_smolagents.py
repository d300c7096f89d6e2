"""MCP tools as smolagents Tools, run by a ``ToolCallingAgent`` whose model is a scripted
subclass of smolagents' own ``Model`` (issue 34): what the model was shown (the tool
schemas smolagents renders for it), what reached the servers (the official SDK's and
server-everything), what the agent saw. No model provider is called."""

from __future__ import annotations

import threading
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import pytest

pytest.importorskip("smolagents")

from smolagents import ToolCallingAgent  # noqa: E402
from smolagents.agent_types import AgentImage  # noqa: E402
from smolagents.memory import ActionStep  # noqa: E402
from smolagents.models import ChatMessage, ChatMessageToolCall, ChatMessageToolCallFunction, MessageRole, Model  # noqa: E402

from mcpsync import agent_message  # noqa: E402
from mcpsync._errors import RequestTimeout  # noqa: E402
from mcpsync.integrations.smolagents import tool_collection, tools  # noqa: E402
from tests.helpers import wait_until  # noqa: E402
from tests.integration.agent_support import agent_server, two_servers  # noqa: E402

pytestmark = [pytest.mark.timeout(120)]


class ScriptedModel(Model):
    """smolagents' Model interface: the first step makes the given tool calls, the next
    one calls final_answer. It records the tool schemas smolagents sent it."""

    def __init__(self, calls: list[tuple[str, dict[str, Any], str]], answer: str = "done") -> None:
        super().__init__(model_id="scripted")
        self.calls, self.answer = calls, answer
        self.shown: list[dict[str, Any]] = []

    def generate(self, messages: Any, stop_sequences: Any = None, response_format: Any = None, tools_to_call_from: Any = None, **kwargs: Any) -> ChatMessage:
        kw = self._prepare_completion_kwargs(messages=messages, tools_to_call_from=tools_to_call_from)
        self.shown.append({t["function"]["name"]: t["function"] for t in kw.get("tools", [])})
        if len(self.shown) == 1:
            todo = self.calls
        else:
            todo = [("final_answer", {"answer": self.answer}, "final")]
        return ChatMessage(role=MessageRole.ASSISTANT, content="", tool_calls=[
            ChatMessageToolCall(id=cid, type="function", function=ChatMessageToolCallFunction(name=name, arguments=args))
            for name, args, cid in todo
        ])


def _observations(agent: Any) -> str:
    return "\n".join(s.observations or "" for s in agent.memory.steps if isinstance(s, ActionStep))


def _errors(agent: Any) -> list[str]:
    return [str(s.error) for s in agent.memory.steps if isinstance(s, ActionStep) and s.error is not None]


def test_tool_calling_agent_against_the_sdk_server(tmp_path):
    with agent_server(tmp_path) as (client, received):
        model = ScriptedModel([
            ("search", {"query": "mcp", "mode": "deep", "filters": {"tags": ["sync"], "min_score": 0.1}}, "c1"),
            ("add", {"a": 2, "b": 40}, "c2"),
            ("picture", {}, "c3"),
        ])
        agent = ToolCallingAgent(tools=tool_collection(client).tools, model=model, max_steps=4, verbosity_level=0)
        assert agent.run("search, add, draw") == "done"

        shown = model.shown[0]
        assert {"search", "add", "picture", "fail", "sleep_ms", "grow"} <= set(shown)
        search = shown["search"]["parameters"]
        assert search["required"] == ["query"]
        assert search["properties"]["mode"]["enum"] == ["fast", "deep"]
        assert search["properties"]["limit"]["default"] == 5
        filters = search["properties"]["filters"]  # the $ref inlined: the nested object is there
        assert filters["type"] == "object" and filters["nullable"] is True and "filters" not in search["required"]
        assert filters["properties"]["tags"]["items"] == {"type": "string"}

        assert received.of("search") == [{"query": "mcp", "limit": 5, "mode": "deep", "filters": {"tags": ["sync"], "min_score": 0.1}}]
        assert received.of("add") == [{"a": 2, "b": 40}]

        seen = _observations(agent)
        assert "'result': 42" in seen and "'mode': 'deep'" in seen
        assert isinstance(agent.state.get("image.png"), AgentImage)  # the image, kept as smolagents keeps images


def test_errors_reach_the_model(tmp_path):
    with agent_server(tmp_path) as (client, received):
        kit = tools(client, timeout=0.3)
        agent = ToolCallingAgent(tools=kit, model=ScriptedModel([("sleep_ms", {"ms": 3000}, "t1")]), max_steps=3, verbosity_level=0)
        agent.run("wait")
        assert agent_message(RequestTimeout("x"), tool="sleep_ms") in _errors(agent)[0]
        model = ScriptedModel([("fail", {"reason": "no luck"}, "t2")])
        agent = ToolCallingAgent(tools=kit, model=model, max_steps=3, verbosity_level=0)
        agent.run("fail")
        assert "no luck" in _errors(agent)[0]
        assert received.of("fail") == [{"reason": "no luck"}]


def test_eight_tool_threads_and_eight_agents_at_once(tmp_path):
    with agent_server(tmp_path) as (client, received):
        kit = tools(client)
        calls = [("add", {"a": i, "b": 100}, f"p{i}") for i in range(8)]
        agent = ToolCallingAgent(tools=kit, model=ScriptedModel(calls), max_steps=3, max_tool_threads=8, verbosity_level=0)
        agent.run("add")
        assert all(f"'result': {i + 100}" in _observations(agent) for i in range(8))
        start = threading.Barrier(8)

        def run(n: int) -> list[Any]:
            start.wait(30)
            return [kit_by_name["add"](a=n, b=k) for k in range(5)]

        kit_by_name = {t.name: t for t in kit}
        with ThreadPoolExecutor(8) as pool:
            seen = list(pool.map(run, range(8)))
        assert seen == [[{"result": n + k} for k in range(5)] for n in range(8)]
        assert len(received.of("add")) == 8 + 40


def test_tool_collection_follows_tools_list_changed(tmp_path):
    with agent_server(tmp_path, mode="legacy") as (client, received):
        changed = threading.Event()
        client.on_notification("notifications/tools/list_changed", lambda _p: changed.set())
        {t.name: t for t in tools(client)}["grow"]()
        assert changed.wait(10)
        assert wait_until(lambda: "shout" in {t.name for t in tool_collection(client).tools}, timeout=10)
        agent = ToolCallingAgent(tools=tool_collection(client).tools, model=ScriptedModel([("shout", {"text": "hey"}, "s")]), max_steps=3, verbosity_level=0)
        agent.run("shout")
        assert "HEY" in _observations(agent)
        assert received.of("shout") == [{"text": "hey"}]


@pytest.mark.npm
def test_agent_over_a_multiclient(tmp_path):
    with two_servers(tmp_path) as (multi, received):
        names = {t.name for t in tools(multi)}
        assert {"agent__add", "everything__echo", "everything__get_sum"} <= names  # identifiers
        model = ScriptedModel([
            ("agent__add", {"a": 1, "b": 2}, "m1"),
            ("everything__echo", {"message": "hi"}, "m2"),
            ("everything__get_sum", {"a": 4, "b": 5}, "m3"),
        ])
        agent = ToolCallingAgent(tools=tools(multi), model=model, max_steps=3, verbosity_level=0)
        agent.run("go")
        seen = _observations(agent)
        assert "'result': 3" in seen and "Echo: hi" in seen and "9" in seen
        assert received.of("add") == [{"a": 1, "b": 2}]
