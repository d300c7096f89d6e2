"""MCP tools as LangChain tools, run by LangGraph's prebuilt ReAct agent with LangChain's
own fake chat model (issue 34): whole agent runs against the official SDK's server and
server-everything, asserting what reached the servers and what the agent saw. No model
provider is called."""

from __future__ import annotations

import asyncio
import threading
import warnings
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import pytest

pytest.importorskip("langchain_core")
pytest.importorskip("langgraph.prebuilt")

from langchain_core.language_models.fake_chat_models import GenericFakeChatModel  # noqa: E402
from langchain_core.messages import AIMessage, ToolMessage  # noqa: E402
from langchain_core.utils.function_calling import convert_to_openai_tool  # noqa: E402

from mcpsync import agent_message  # noqa: E402
from mcpsync._errors import RequestTimeout  # noqa: E402
from mcpsync.integrations.langchain import MCPToolkit, tools  # noqa: E402
from tests.integration.agent_support import agent_server, assert_search_schema, two_servers  # noqa: E402

pytestmark = [pytest.mark.timeout(120)]


class ScriptedChatModel(GenericFakeChatModel):
    """LangChain's fake chat model, answering with scripted messages (tool calls
    included), that records the tool schemas an agent binds to it."""

    bound: list[dict[str, Any]] = []

    def bind_tools(self, tools: Any, **kwargs: Any) -> Any:
        self.bound.extend(convert_to_openai_tool(t) for t in tools)
        return self


def _react(model: Any, tools: list[Any]) -> Any:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # create_react_agent's move to `langchain.agents`
        from langgraph.prebuilt import create_react_agent

        return create_react_agent(model, tools)


def _call(name: str, args: dict[str, Any], call_id: str) -> dict[str, Any]:
    return {"name": name, "args": args, "id": call_id, "type": "tool_call"}


def test_react_agent_run_against_the_sdk_server(tmp_path):
    with agent_server(tmp_path) as (client, received):
        model = ScriptedChatModel(messages=iter([
            AIMessage(content="", tool_calls=[
                _call("search", {"query": "mcp", "mode": "deep", "filters": {"tags": ["sync"]}}, "c1"),
                _call("add", {"a": 2, "b": 40}, "c2"),
                _call("picture", {}, "c3"),
                _call("fail", {"reason": "no luck"}, "c4"),
            ]),
            AIMessage(content="all done"),
        ]), bound=[])
        agent = _react(model, MCPToolkit.from_source(client).get_tools())
        state = agent.invoke({"messages": [("user", "search, add, draw, fail")]})

        # what the model was shown: the schema as the server wrote it
        by_name = {t["function"]["name"]: t["function"] for t in model.bound}
        assert set(by_name) == {"search", "add", "picture", "fail", "sleep_ms", "grow"}
        assert_search_schema(by_name["search"]["parameters"])
        assert by_name["add"]["parameters"]["required"] == ["a", "b"]

        # what reached the server: the model's arguments, unchanged (no defaults invented)
        assert received.of("search") == [{"query": "mcp", "limit": 5, "mode": "deep", "filters": {"tags": ["sync"], "min_score": 0.5}}]
        assert received.of("add") == [{"a": 2, "b": 40}]
        assert received.of("fail") == [{"reason": "no luck"}]

        # what the agent saw
        msgs = {m.tool_call_id: m for m in state["messages"] if isinstance(m, ToolMessage)}
        assert msgs["c2"].content == "42" and msgs["c2"].status == "success"
        assert msgs["c2"].artifact.structured == {"result": 42}
        assert '"hits"' in msgs["c1"].content and msgs["c1"].artifact.structured["mode"] == "deep"
        image = [b for b in msgs["c3"].content if isinstance(b, dict) and b.get("type") == "image"]
        assert image and image[0]["mime_type"] == "image/png" and image[0]["base64"].startswith("iVBOR")
        assert msgs["c4"].status == "error" and "no luck" in msgs["c4"].content
        assert state["messages"][-1].content == "all done"


def test_a_failed_call_reaches_the_agent_as_agent_message(tmp_path):
    with agent_server(tmp_path) as (client, received):
        toolkit = MCPToolkit.from_source(client, timeout=0.3)
        model = ScriptedChatModel(messages=iter([
            AIMessage(content="", tool_calls=[_call("sleep_ms", {"ms": 3000}, "t1")]),
            AIMessage(content="gave up"),
        ]), bound=[])
        state = _react(model, toolkit.get_tools()).invoke({"messages": [("user", "wait")]})
        msg = next(m for m in state["messages"] if isinstance(m, ToolMessage))
        assert msg.status == "error"
        assert msg.content == agent_message(RequestTimeout("x"), tool="sleep_ms")
        assert received.of("sleep_ms") == [{"ms": 3000}]  # it did reach the server


def test_ainvoke_runs_the_call_off_the_event_loop(tmp_path):
    with agent_server(tmp_path) as (client, received):
        add = {t.name: t for t in tools(client)}["add"]

        async def main() -> list[Any]:
            return await asyncio.gather(*(add.ainvoke({"a": i, "b": 1}) for i in range(8)))

        assert sorted(int(r) for r in asyncio.run(main())) == list(range(1, 9))
        assert len(received.of("add")) == 8


def test_eight_threads_call_tools_at_once(tmp_path):
    with agent_server(tmp_path) as (client, received):
        toolkit = MCPToolkit.from_source(client)
        start = threading.Barrier(8)

        def worker(n: int) -> list[str]:
            kit_tools = {t.name: t for t in toolkit.get_tools()}
            start.wait(30)
            return [kit_tools["add"].invoke({"a": n, "b": k}) for k in range(10)]

        with ThreadPoolExecutor(8) as pool:
            answers = list(pool.map(worker, range(8)))
        assert answers == [[str(n + k) for k in range(10)] for n in range(8)]
        assert len(received.of("add")) == 80

        # and a ReAct step with eight tool calls at once (ToolNode runs them in threads)
        calls = [_call("add", {"a": i, "b": 100}, f"p{i}") for i in range(8)]
        model = ScriptedChatModel(messages=iter([AIMessage(content="", tool_calls=calls), AIMessage(content="ok")]), bound=[])
        state = _react(model, toolkit.get_tools()).invoke({"messages": [("user", "add")]})
        seen = {m.tool_call_id: m.content for m in state["messages"] if isinstance(m, ToolMessage)}
        assert seen == {f"p{i}": str(i + 100) for i in range(8)}


def test_the_toolkit_follows_tools_list_changed(tmp_path):
    with agent_server(tmp_path, mode="legacy") as (client, received):
        toolkit = MCPToolkit.from_source(client)
        first = toolkit.get_tools()
        assert "shout" not in {t.name for t in first}
        assert toolkit.get_tools() == first  # the same tool objects while nothing changed
        changed = threading.Event()
        client.on_notification("notifications/tools/list_changed", lambda _p: changed.set())
        {t.name: t for t in first}["grow"].invoke({})
        assert changed.wait(10)
        from tests.helpers import wait_until

        wait_until(lambda: "shout" in {t.name for t in toolkit.get_tools()}, timeout=10)
        shout = {t.name: t for t in toolkit.get_tools()}["shout"]
        assert shout.invoke({"text": "hey"}) == "HEY"
        assert received.of("shout") == [{"text": "hey"}]


@pytest.mark.npm
def test_react_agent_over_a_multiclient(tmp_path):
    with two_servers(tmp_path) as (multi, received):
        kit = MCPToolkit.from_source(multi)
        names = [t.name for t in kit.get_tools()]
        assert "agent__add" in names and "everything__echo" in names and "everything__get-sum" in names
        model = ScriptedChatModel(messages=iter([
            AIMessage(content="", tool_calls=[
                _call("agent__add", {"a": 1, "b": 2}, "m1"),
                _call("everything__echo", {"message": "hi"}, "m2"),
                _call("everything__get-tiny-image", {}, "m3"),
            ]),
            AIMessage(content="both"),
        ]), bound=[])
        state = _react(model, kit.get_tools()).invoke({"messages": [("user", "go")]})
        seen = {m.tool_call_id: m for m in state["messages"] if isinstance(m, ToolMessage)}
        assert seen["m1"].content == "3"
        assert seen["m2"].content == "Echo: hi"
        assert any(isinstance(b, dict) and b.get("type") == "image" for b in seen["m3"].content)
        assert received.of("add") == [{"a": 1, "b": 2}]
