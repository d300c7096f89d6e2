"""LlamaIndex: the demo server's tools as FunctionTools of a FunctionAgent.

Run: python examples/framework_llama_index.py   (offline: LlamaIndex's MockFunctionCallingLLM
plays the LLM; use any function-calling LLM instead)
"""

from __future__ import annotations

import asyncio
import sys
from collections.abc import Sequence
from typing import Any, cast

from llama_index.core.agent.workflow import FunctionAgent, ToolCallResult
from llama_index.core.base.llms.types import ToolCallBlock
from llama_index.core.llms import ChatMessage, MockFunctionCallingLLM

from mcpsync import Client
from mcpsync.integrations.llama_index import tools


def scripted(messages: Sequence[ChatMessage], **kwargs: Any) -> ChatMessage:
    """First a tool call, then (with the tool's answer in the history) the answer."""
    if any(m.role == "tool" for m in messages):
        return ChatMessage(role="assistant", content="the text has 6 words")
    call = ToolCallBlock(tool_call_id="call_1", tool_name="word_count", tool_kwargs={"text": "to be or not to be"})
    return ChatMessage(role="assistant", blocks=[call])


async def ask(agent: FunctionAgent) -> str:
    # (LlamaIndex lists its deprecated positional overload first, so a type checker flags any call)
    handler = agent.run(user_msg="How many words in 'to be or not to be'?")  # pyright: ignore[reportDeprecated]
    async for event in handler.stream_events():
        if isinstance(event, ToolCallResult):
            print(f"tool {event.tool_name} -> {event.tool_output.content}")
    return str(cast(object, await handler))


def main() -> None:
    with Client.stdio(sys.executable, ["-m", "mcpsync.server.demo"]) as client:
        agent = FunctionAgent(tools=tools(client), llm=MockFunctionCallingLLM(response_generator=scripted))
        print("agent:", asyncio.run(ask(agent)))


if __name__ == "__main__":
    main()
