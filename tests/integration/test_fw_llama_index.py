"""MCP tools as LlamaIndex FunctionTools, run by its ``FunctionAgent`` with its own
``MockFunctionCallingLLM`` (issue 34): what the model was shown, what reached the servers
(the official SDK's and server-everything), what the agent saw. No model provider is called."""

from __future__ import annotations

import asyncio
import threading
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import pytest

pytest.importorskip("llama_index.core")

from llama_index.core.agent.workflow import FunctionAgent, ToolCallResult  # noqa: E402
from llama_index.core.base.llms.types import ImageBlock, ToolCallBlock  # noqa: E402
from llama_index.core.llms import ChatMessage, MockFunctionCallingLLM  # noqa: E402

from mcpsync import agent_message  # noqa: E402
from mcpsync._errors import RequestTimeout  # noqa: E402
from mcpsync.integrations.llama_index import tools  # noqa: E402
from tests.helpers import wait_until  # noqa: E402
from tests.integration.agent_support import agent_server, assert_search_schema, two_servers  # noqa: E402

pytestmark = [pytest.mark.timeout(120), pytest.mark.filterwarnings("ignore::DeprecationWarning")]  # LlamaIndex inspecting pydantic models


class Script:
    """A MockFunctionCallingLLM response generator: the given tool calls, then an answer."""

    def __init__(self, calls: list[tuple[str, dict[str, Any], str]], answer: str = "done") -> None:
        self.calls, self.answer = calls, answer
        self.shown: dict[str, Any] = {}

    def __call__(self, messages: Any, **kwargs: Any) -> ChatMessage:
        self.shown = {t.metadata.name: t.metadata.to_openai_tool()["function"] for t in kwargs.get("tools") or []}
        if any(m.role == "tool" for m in messages):
            return ChatMessage(role="assistant", content=self.answer)
        return ChatMessage(role="assistant", blocks=[ToolCallBlock(tool_call_id=cid, tool_name=n, tool_kwargs=a) for n, a, cid in self.calls])


def _run(agent_tools: list[Any], script: Script) -> tuple[str, dict[str, Any]]:
    agent = FunctionAgent(tools=agent_tools, llm=MockFunctionCallingLLM(response_generator=script))

    async def main() -> tuple[str, dict[str, Any]]:
        handler = agent.run(user_msg="go")
        results = {}
        async for event in handler.stream_events():
            if isinstance(event, ToolCallResult):
                results[event.tool_id] = event.tool_output
        return str(await handler), results

    return asyncio.run(main())


def test_function_agent_against_the_sdk_server(tmp_path):
    with agent_server(tmp_path) as (client, received):
        script = Script([
            ("search", {"query": "mcp", "filters": {"tags": ["sync"]}}, "c1"),
            ("add", {"a": 2, "b": 40}, "c2"),
            ("picture", {}, "c3"),
            ("fail", {"reason": "no luck"}, "c4"),
        ])
        answer, seen = _run(tools(client), script)
        assert answer == "done"
        assert set(script.shown) == {"search", "add", "picture", "fail", "sleep_ms", "grow"}
        assert_search_schema(script.shown["search"]["parameters"])

        assert received.of("search") == [{"query": "mcp", "limit": 5, "mode": "fast", "filters": {"tags": ["sync"], "min_score": 0.5}}]
        assert received.of("add") == [{"a": 2, "b": 40}]
        assert received.of("fail") == [{"reason": "no luck"}]

        assert seen["c2"].content == "42" and not seen["c2"].is_error
        assert '"hits"' in seen["c1"].content
        assert any(isinstance(b, ImageBlock) and b.image_mimetype == "image/png" for b in seen["c3"].blocks)
        assert seen["c4"].is_error and "no luck" in seen["c4"].content


def test_a_failed_call_reaches_the_agent_as_agent_message(tmp_path):
    with agent_server(tmp_path) as (client, received):
        _answer, seen = _run(tools(client, timeout=0.3), Script([("sleep_ms", {"ms": 3000}, "t1")]))
        assert seen["t1"].is_error
        assert seen["t1"].content == agent_message(RequestTimeout("x"), tool="sleep_ms")
        assert received.of("sleep_ms") == [{"ms": 3000}]


def test_eight_threads_call_tools_at_once(tmp_path):
    with agent_server(tmp_path) as (client, received):
        add = {t.metadata.name: t for t in tools(client)}["add"]
        start = threading.Barrier(8)

        def run(n: int) -> list[str]:
            start.wait(30)
            sync = [str(add.call(a=n, b=k).content) for k in range(4)]
            return sync + [str(asyncio.run(add.acall(a=n, b=99)).content)]

        with ThreadPoolExecutor(8) as pool:
            seen = list(pool.map(run, range(8)))
        assert seen == [[str(n + k) for k in range(4)] + [str(n + 99)] for n in range(8)]
        # and one agent step with eight calls at once
        _answer, results = _run([add], Script([("add", {"a": i, "b": 100}, f"p{i}") for i in range(8)]))
        assert {k: v.content for k, v in results.items()} == {f"p{i}": str(i + 100) for i in range(8)}
        assert len(received.of("add")) == 48


def test_tools_follow_tools_list_changed(tmp_path):
    with agent_server(tmp_path, mode="legacy") as (client, received):
        changed = threading.Event()
        client.on_notification("notifications/tools/list_changed", lambda _p: changed.set())
        {t.metadata.name: t for t in tools(client)}["grow"].call()
        assert changed.wait(10)
        assert wait_until(lambda: "shout" in {t.metadata.name for t in tools(client)}, timeout=10)
        _answer, seen = _run(tools(client), Script([("shout", {"text": "hey"}, "s")]))
        assert seen["s"].content == "HEY"
        assert received.of("shout") == [{"text": "hey"}]


@pytest.mark.npm
def test_function_agent_over_a_multiclient(tmp_path):
    with two_servers(tmp_path) as (multi, received):
        script = Script([("agent__add", {"a": 1, "b": 2}, "m1"), ("everything__echo", {"message": "hi"}, "m2"),
                         ("everything__get-tiny-image", {}, "m3")])
        _answer, seen = _run(tools(multi), script)
        assert seen["m1"].content == "3" and seen["m2"].content == "Echo: hi"
        assert any(isinstance(b, ImageBlock) for b in seen["m3"].blocks)
        assert received.of("add") == [{"a": 1, "b": 2}]
