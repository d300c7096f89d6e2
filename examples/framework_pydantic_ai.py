"""pydantic-ai: the demo server's tools as a toolset of a pydantic-ai agent.

Run: python examples/framework_pydantic_ai.py   (offline: pydantic-ai's FunctionModel plays
the LLM; use Agent("openai:gpt-4.1", ...) or any model instead)
"""

from __future__ import annotations

import sys

from pydantic_ai import Agent
from pydantic_ai.messages import ModelMessage, ModelResponse, TextPart, ToolCallPart
from pydantic_ai.models.function import AgentInfo, FunctionModel

from mcpsync import Client
from mcpsync.integrations.pydantic_ai import MCPToolset


def scripted(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
    """The first turn calls a tool the toolset offers; the second answers."""
    if len(messages) == 1:
        assert "word_count" in {t.name for t in info.function_tools}
        return ModelResponse(parts=[ToolCallPart("word_count", {"text": "to be or not to be"})])
    return ModelResponse(parts=[TextPart("6 words")])


def main() -> None:
    with Client.stdio(sys.executable, ["-m", "mcpsync.server.demo"]) as client:
        agent = Agent(FunctionModel(scripted), toolsets=[MCPToolset(client)])
        result = agent.run_sync("How many words in 'to be or not to be'?")
        for message in result.all_messages():
            for part in getattr(message, "parts", []):
                if part.part_kind == "tool-return":
                    print(f"tool {part.tool_name} -> {part.content}")
        print("agent:", result.output)


if __name__ == "__main__":
    main()
