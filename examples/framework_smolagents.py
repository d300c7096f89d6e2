"""smolagents: the demo server's tools as smolagents Tools of a ToolCallingAgent.

Run: python examples/framework_smolagents.py   (offline: a scripted Model plays the LLM;
use InferenceClientModel, LiteLLMModel ... instead)
"""

from __future__ import annotations

import sys
from typing import Any

from smolagents import ToolCallingAgent  # type: ignore[import-untyped]
from smolagents.models import ChatMessage, ChatMessageToolCall, ChatMessageToolCallFunction, MessageRole, Model  # type: ignore[import-untyped]

from mcpsync import Client
from mcpsync.integrations.smolagents import tool_collection


class ScriptedModel(Model):  # type: ignore[misc]
    """smolagents' model interface: first a tool call, then the final answer."""

    def __init__(self) -> None:
        super().__init__(model_id="scripted")
        self.turn = 0

    def generate(self, messages: Any, stop_sequences: Any = None, response_format: Any = None, tools_to_call_from: Any = None,
                 **kwargs: Any) -> ChatMessage:
        self.turn += 1
        name, args = ("add", {"a": 2, "b": 40}) if self.turn == 1 else ("final_answer", {"answer": "42"})
        call = ChatMessageToolCall(id=f"call_{self.turn}", type="function", function=ChatMessageToolCallFunction(name=name, arguments=args))
        return ChatMessage(role=MessageRole.ASSISTANT, content="", tool_calls=[call])


def main() -> None:
    with Client.stdio(sys.executable, ["-m", "mcpsync.server.demo"]) as client:
        tools = tool_collection(client).tools
        agent = ToolCallingAgent(tools=tools, model=ScriptedModel(), max_steps=3, verbosity_level=0)
        print("agent:", agent.run("What is 2 + 40?"))


if __name__ == "__main__":
    main()
