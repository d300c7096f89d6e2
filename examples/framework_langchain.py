"""LangChain: the demo server's tools as LangChain tools, bound to a chat model, their
calls answered with ToolMessages (LangGraph's prebuilt agent takes the same tools:
``create_react_agent(model, toolkit.get_tools())``).

Run: python examples/framework_langchain.py   (offline: LangChain's fake chat model plays the
LLM; put any chat model with tool calling in its place)
"""

from __future__ import annotations

import sys
from collections.abc import Callable, Sequence
from typing import Any

from langchain_core.language_models import LanguageModelInput
from langchain_core.language_models.fake_chat_models import GenericFakeChatModel
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage
from langchain_core.runnables import Runnable
from langchain_core.tools import BaseTool

from mcpsync import Client
from mcpsync.integrations.langchain import MCPToolkit


class ScriptedModel(GenericFakeChatModel):
    """LangChain's fake chat model, which accepts tools (a real model would use them)."""

    def bind_tools(self, tools: Sequence[dict[str, Any] | type | Callable[..., Any] | BaseTool], *, tool_choice: str | None = None,
                   **kwargs: Any) -> Runnable[LanguageModelInput, AIMessage]:
        return self


def main() -> None:
    with Client.stdio(sys.executable, ["-m", "mcpsync.server.demo"]) as client:
        toolkit = MCPToolkit.from_source(client)  # keep it: get_tools() follows tools/list_changed
        tools = {t.name: t for t in toolkit.get_tools()}
        model = ScriptedModel(messages=iter([
            AIMessage(content="", tool_calls=[{"name": "add", "args": {"a": 2, "b": 40}, "id": "call_1", "type": "tool_call"}]),
            AIMessage(content="2 + 40 = 42"),
        ])).bind_tools(list(tools.values()))
        history: list[BaseMessage] = [HumanMessage("What is 2 + 40?")]
        while True:
            reply = model.invoke(history)
            history.append(reply)
            if not reply.tool_calls:
                break
            for call in reply.tool_calls:
                message = tools[call["name"]].invoke(call)  # a ToolMessage (status "error" when it failed)
                print(f"tool {call['name']} -> {message.content} ({message.status})")
                history.append(message)
        print("agent:", reply.content)


if __name__ == "__main__":
    main()
