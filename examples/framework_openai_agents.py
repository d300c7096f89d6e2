"""OpenAI Agents SDK: the demo server's tools as FunctionTools of an agent.

Run: python examples/framework_openai_agents.py   (offline: a scripted Model plays the LLM
and tracing is off; drop model= to use OpenAI's)
"""

from __future__ import annotations

import sys
from collections.abc import AsyncIterator
from typing import Any

from agents import Agent, Model, ModelResponse, RunConfig, Runner, Usage
from agents.items import TResponseStreamEvent
from openai.types.responses import ResponseFunctionToolCall, ResponseOutputMessage, ResponseOutputText

from mcpsync import Client
from mcpsync.integrations.openai_agents import function_tools


class ScriptedModel(Model):
    """The SDK's model interface: first a function call, then an answer."""

    def __init__(self) -> None:
        self.turn = 0

    async def get_response(self, *args: Any, **kwargs: Any) -> ModelResponse:
        self.turn += 1
        if self.turn == 1:
            call = ResponseFunctionToolCall(type="function_call", name="echo", arguments='{"message": "hi"}', call_id="call_1")
            return ModelResponse(output=[call], usage=Usage(), response_id=None)
        text = ResponseOutputText(type="output_text", text="the server said hi", annotations=[])
        message = ResponseOutputMessage(id="msg_1", type="message", role="assistant", status="completed", content=[text])
        return ModelResponse(output=[message], usage=Usage(), response_id=None)

    def stream_response(self, *args: Any, **kwargs: Any) -> AsyncIterator[TResponseStreamEvent]:
        raise NotImplementedError


def main() -> None:
    with Client.stdio(sys.executable, ["-m", "mcpsync.server.demo"]) as client:
        agent = Agent(name="helper", model=ScriptedModel(), tools=function_tools(client))
        result = Runner.run_sync(agent, "Say hi through the echo tool.", run_config=RunConfig(tracing_disabled=True))
        for item in result.new_items:
            if item.type == "tool_call_output_item":
                print("tool echo ->", item.output)
        print("agent:", result.final_output)


if __name__ == "__main__":
    main()
