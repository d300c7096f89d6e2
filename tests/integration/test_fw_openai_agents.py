"""MCP tools as OpenAI Agents SDK FunctionTools, run by ``Runner`` with a scripted model
that implements the SDK's own ``Model`` interface (issue 34): what the model was shown,
what reached the servers (the official SDK's and server-everything), what the agent saw.
Tracing is off and no model provider is called."""

from __future__ import annotations

import json
import threading
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import pytest

pytest.importorskip("agents")

from agents import Agent, Model, ModelResponse, RunConfig, Runner, Usage  # noqa: E402
from agents.items import ToolCallOutputItem  # noqa: E402
from openai.types.responses import ResponseFunctionToolCall, ResponseOutputMessage, ResponseOutputText  # noqa: E402

from mcpsync import agent_message  # noqa: E402
from mcpsync._errors import RequestTimeout  # noqa: E402
from mcpsync.integrations.openai_agents import function_tools  # noqa: E402
from tests.helpers import wait_until  # noqa: E402
from tests.integration.agent_support import agent_server, assert_search_schema, two_servers  # noqa: E402

pytestmark = [pytest.mark.timeout(120)]

NO_TRACING = RunConfig(tracing_disabled=True)


@pytest.fixture(autouse=True)
def _offline(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OPENAI_AGENTS_DISABLE_TRACING", "1")
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)


class ScriptedModel(Model):
    """The SDK's Model interface, answering with scripted function calls, then a message."""

    def __init__(self, calls: list[tuple[str, dict[str, Any], str]], answer: str = "done") -> None:
        self.calls, self.answer = calls, answer
        self.turns: list[dict[str, Any]] = []  # per turn: tool name -> the tool the model was given

    async def get_response(self, system_instructions: Any, input: Any, model_settings: Any, tools: Any, output_schema: Any,
                           handoffs: Any, tracing: Any, **kwargs: Any) -> ModelResponse:
        self.turns.append({t.name: t for t in tools})
        if len(self.turns) == 1:
            output: list[Any] = [
                ResponseFunctionToolCall(type="function_call", name=name, arguments=json.dumps(args), call_id=cid, id=f"fc_{cid}")
                for name, args, cid in self.calls
            ]
        else:
            text = ResponseOutputText(type="output_text", text=self.answer, annotations=[])
            output = [ResponseOutputMessage(id="msg", type="message", role="assistant", status="completed", content=[text])]
        return ModelResponse(output=output, usage=Usage(), response_id=None)

    def stream_response(self, *args: Any, **kwargs: Any) -> Any:
        raise NotImplementedError


def _outputs(result: Any) -> dict[str, Any]:
    return {item.raw_item["call_id"]: item.output for item in result.new_items if isinstance(item, ToolCallOutputItem)}


def test_runner_against_the_sdk_server(tmp_path):
    with agent_server(tmp_path) as (client, received):
        model = ScriptedModel([
            ("search", {"query": "mcp", "mode": "deep", "filters": {"tags": ["sync"]}}, "c1"),
            ("add", {"a": 2, "b": 40}, "c2"),
            ("picture", {}, "c3"),
            ("fail", {"reason": "no luck"}, "c4"),
        ])
        agent = Agent(name="t", model=model, tools=function_tools(client))
        result = Runner.run_sync(agent, "search, add, draw, fail", run_config=NO_TRACING)
        assert result.final_output == "done"

        shown = model.turns[0]
        assert set(shown) == {"search", "add", "picture", "fail", "sleep_ms", "grow"}
        assert shown["search"].strict_json_schema is False
        assert_search_schema(shown["search"].params_json_schema)

        assert received.of("search") == [{"query": "mcp", "limit": 5, "mode": "deep", "filters": {"tags": ["sync"], "min_score": 0.5}}]
        assert received.of("add") == [{"a": 2, "b": 40}]
        assert received.of("fail") == [{"reason": "no luck"}]

        seen = _outputs(result)
        assert seen["c2"] == "42"
        assert json.loads(seen["c1"])["mode"] == "deep"
        images = [o for o in seen["c3"] if getattr(o, "type", None) == "image"]
        assert images and images[0].image_url.startswith("data:image/png;base64,iVBOR")
        assert "no luck" in seen["c4"]


def test_a_failed_call_reaches_the_model_as_agent_message(tmp_path):
    with agent_server(tmp_path) as (client, received):
        model = ScriptedModel([("sleep_ms", {"ms": 3000}, "t1")], "gave up")
        agent = Agent(name="t", model=model, tools=function_tools(client, timeout=0.3))
        result = Runner.run_sync(agent, "wait", run_config=NO_TRACING)
        assert _outputs(result)["t1"] == agent_message(RequestTimeout("x"), tool="sleep_ms")
        assert received.of("sleep_ms") == [{"ms": 3000}]
        assert result.final_output == "gave up"


def test_eight_threads_run_agents_at_once(tmp_path):
    with agent_server(tmp_path) as (client, received):
        tools = function_tools(client)
        start = threading.Barrier(8)

        def run(n: int) -> dict[str, Any]:
            model = ScriptedModel([("add", {"a": n, "b": k}, f"{n}-{k}") for k in range(4)])
            start.wait(30)
            return _outputs(Runner.run_sync(Agent(name=f"a{n}", model=model, tools=tools), "add", run_config=NO_TRACING))

        with ThreadPoolExecutor(8) as pool:
            seen = list(pool.map(run, range(8)))
        assert seen == [{f"{n}-{k}": str(n + k) for k in range(4)} for n in range(8)]
        assert len(received.of("add")) == 32


def test_tools_follow_tools_list_changed(tmp_path):
    with agent_server(tmp_path, mode="legacy") as (client, received):
        tools = function_tools(client)
        changed = threading.Event()
        client.on_notification("notifications/tools/list_changed", lambda _p: changed.set())
        Runner.run_sync(Agent(name="g", model=ScriptedModel([("grow", {}, "g")]), tools=tools), "grow", run_config=NO_TRACING)
        assert changed.wait(10)
        assert wait_until(lambda: "shout" in {t.name for t in function_tools(client)}, timeout=10)
        model = ScriptedModel([("shout", {"text": "hey"}, "s")])
        result = Runner.run_sync(Agent(name="s", model=model, tools=function_tools(client)), "shout", run_config=NO_TRACING)
        assert _outputs(result)["s"] == "HEY"
        assert received.of("shout") == [{"text": "hey"}]


@pytest.mark.npm
def test_runner_over_a_multiclient(tmp_path):
    with two_servers(tmp_path) as (multi, received):
        model = ScriptedModel([
            ("agent__add", {"a": 1, "b": 2}, "m1"),
            ("everything__echo", {"message": "hi"}, "m2"),
            ("everything__get-tiny-image", {}, "m3"),
        ])
        result = Runner.run_sync(Agent(name="m", model=model, tools=function_tools(multi)), "go", run_config=NO_TRACING)
        seen = _outputs(result)
        assert seen["m1"] == "3" and seen["m2"] == "Echo: hi"
        assert any(getattr(o, "type", None) == "image" for o in seen["m3"])
        assert received.of("add") == [{"a": 1, "b": 2}]
