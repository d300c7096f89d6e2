"""DSPy: the demo server's tools as dspy.Tools of a ReAct module.

Run: python examples/framework_dspy.py   (offline: DSPy's DummyLM plays the LLM; configure
dspy.LM("openai/gpt-4.1") or any model instead)
"""

from __future__ import annotations

import os
import sys
from typing import cast

os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")  # offline: litellm's own cost map

import dspy  # type: ignore[import-untyped]  # noqa: E402
from dspy.utils import DummyLM  # type: ignore[import-untyped]  # noqa: E402

from mcpsync import Client  # noqa: E402
from mcpsync.integrations.dspy import tools  # noqa: E402


class Question(dspy.Signature):  # type: ignore[misc]
    """Answer the question, using the tools."""

    question: str = dspy.InputField()
    answer: str = dspy.OutputField()


def main() -> None:
    with Client.stdio(sys.executable, ["-m", "mcpsync.server.demo"]) as client:
        lm = DummyLM([
            {"next_thought": "add them", "next_tool_name": "add", "next_tool_args": {"a": 2, "b": 40}},
            {"next_thought": "done", "next_tool_name": "finish", "next_tool_args": {}},
            {"reasoning": "the tool said 42", "answer": "42"},
        ])
        with dspy.context(lm=lm):
            react = dspy.ReAct(Question, tools=tools(client), max_iters=3)
            prediction = react(question="What is 2 + 40?")
        trajectory = cast("dict[str, object]", prediction.trajectory)
        print("tool add ->", trajectory["observation_0"])
        print("agent:", cast(str, prediction.answer))


if __name__ == "__main__":
    main()
