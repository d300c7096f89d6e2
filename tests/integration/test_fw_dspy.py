"""MCP tools as DSPy tools, run by ``dspy.ReAct`` with DSPy's own ``DummyLM`` (issue 34):
what the model was shown (the prompt ReAct writes), what reached the servers (the official
SDK's and server-everything), what the agent saw (its trajectory). No model provider is
called (litellm's cost map stays local)."""

from __future__ import annotations

import json
import os
import threading
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import pytest

os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")  # before litellm is imported
dspy = pytest.importorskip("dspy")

from dspy.utils import DummyLM  # noqa: E402

from mcpsync import agent_message  # noqa: E402
from mcpsync._errors import RequestTimeout  # noqa: E402
from mcpsync.integrations.dspy import tools  # noqa: E402
from tests.helpers import wait_until  # noqa: E402
from tests.integration.agent_support import agent_server, two_servers  # noqa: E402

pytestmark = [pytest.mark.timeout(120)]


def _steps(*calls: tuple[str, dict[str, Any]], answer: str = "done") -> DummyLM:
    """A DummyLM that makes the given tool calls, one per ReAct step, then finishes."""
    answers = [{"next_thought": f"use {name}", "next_tool_name": name, "next_tool_args": args} for name, args in calls]
    answers.append({"next_thought": "done", "next_tool_name": "finish", "next_tool_args": {}})
    answers.append({"reasoning": "because", "answer": answer})
    return DummyLM(answers)


def _prompt(lm: DummyLM) -> str:
    return json.dumps([m for h in lm.history for m in h["messages"]])


def test_react_against_the_sdk_server(tmp_path):
    with agent_server(tmp_path) as (client, received):
        lm = _steps(
            ("search", {"query": "mcp", "mode": "deep", "filters": {"tags": ["sync"], "min_score": 0.2}}),
            ("add", {"a": 2, "b": 40}),
            ("fail", {"reason": "no luck"}),
        )
        with dspy.context(lm=lm):
            pred = dspy.ReAct("question -> answer", tools=tools(client), max_iters=6)(question="go")
        assert pred.answer == "done"

        # what the model was shown: each argument's schema, $ref inlined
        by_name = {t.name: t for t in tools(client)}
        search = by_name["search"].args
        assert search["mode"]["enum"] == ["fast", "deep"] and search["limit"]["default"] == 5
        assert "tags" in json.dumps(search["filters"]) and "$ref" not in json.dumps(search["filters"])
        prompt = _prompt(lm)
        assert "'enum': ['fast', 'deep']" in prompt and "min_score" in prompt

        # what reached the server
        assert received.of("search") == [{"query": "mcp", "limit": 5, "mode": "deep", "filters": {"tags": ["sync"], "min_score": 0.2}}]
        assert received.of("add") == [{"a": 2, "b": 40}]
        assert received.of("fail") == [{"reason": "no luck"}]

        # what the agent saw
        traj = pred.trajectory
        assert traj["observation_0"] == {"hits": ["mcp-0", "mcp-1", "mcp-2"], "mode": "deep"}
        assert traj["observation_1"] == {"result": 42}
        assert "Execution error in fail" in traj["observation_2"] and "no luck" in traj["observation_2"]


def test_a_failed_call_reaches_the_trajectory_as_agent_message(tmp_path):
    with agent_server(tmp_path) as (client, received):
        lm = _steps(("sleep_ms", {"ms": 3000}))
        with dspy.context(lm=lm):
            pred = dspy.ReAct("question -> answer", tools=tools(client, timeout=0.3), max_iters=3)(question="wait")
        assert agent_message(RequestTimeout("x"), tool="sleep_ms") in pred.trajectory["observation_0"]
        assert received.of("sleep_ms") == [{"ms": 3000}]


def test_tools_work_sync_and_async_from_eight_threads(tmp_path):
    import asyncio

    with agent_server(tmp_path) as (client, received):
        add = {t.name: t for t in tools(client)}["add"]
        start = threading.Barrier(8)

        def run(n: int) -> list[Any]:
            start.wait(30)
            return [add(a=n, b=k) for k in range(5)] + [asyncio.run(add.acall(a=n, b=99))]

        with ThreadPoolExecutor(8) as pool:
            seen = list(pool.map(run, range(8)))
        assert seen == [[{"result": n + k} for k in range(5)] + [{"result": n + 99}] for n in range(8)]
        assert len(received.of("add")) == 48

        def react(n: int) -> Any:
            with dspy.context(lm=_steps(("add", {"a": n, "b": 1}), answer=str(n + 1))):
                return dspy.ReAct("question -> answer", tools=[add], max_iters=3)(question="add").answer

        with ThreadPoolExecutor(8) as pool:
            assert list(pool.map(react, range(8))) == [str(n + 1) for n in range(8)]


def test_tools_follow_tools_list_changed(tmp_path):
    with agent_server(tmp_path, mode="legacy") as (client, received):
        changed = threading.Event()
        client.on_notification("notifications/tools/list_changed", lambda _p: changed.set())
        {t.name: t for t in tools(client)}["grow"]()
        assert changed.wait(10)
        assert wait_until(lambda: "shout" in {t.name for t in tools(client)}, timeout=10)
        with dspy.context(lm=_steps(("shout", {"text": "hey"}))):
            pred = dspy.ReAct("question -> answer", tools=tools(client), max_iters=3)(question="shout")
        assert pred.trajectory["observation_0"] == {"result": "HEY"}
        assert received.of("shout") == [{"text": "hey"}]


@pytest.mark.npm
def test_react_over_a_multiclient(tmp_path):
    with two_servers(tmp_path) as (multi, received):
        lm = _steps(("agent__add", {"a": 1, "b": 2}), ("everything__echo", {"message": "hi"}), ("everything__get-sum", {"a": 4, "b": 5}))
        with dspy.context(lm=lm):
            pred = dspy.ReAct("question -> answer", tools=tools(multi), max_iters=5)(question="go")
        traj = pred.trajectory
        assert traj["observation_0"] == {"result": 3}
        assert traj["observation_1"] == "Echo: hi"
        assert "9" in json.dumps(traj["observation_2"])
        assert received.of("add") == [{"a": 1, "b": 2}]
