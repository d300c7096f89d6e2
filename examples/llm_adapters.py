"""MCP tools for an LLM: tool definitions for Anthropic, OpenAI (Chat Completions and
Responses) and Gemini, and the model's tool calls run through mcpsync.

Run: python examples/llm_adapters.py
Offline by default: it renders the demo server's tools in every format and runs tool
calls shaped as each SDK returns them. With ANTHROPIC_API_KEY, OPENAI_API_KEY or
GEMINI_API_KEY set (and the SDK installed) it also runs one real agent turn there.
"""

from __future__ import annotations

import json
import os
import sys
from typing import TYPE_CHECKING, Any

from mcpsync import Client
from mcpsync.adapters import (
    AnthropicTool,
    AnthropicToolResult,
    GeminiFunctionDeclaration,
    GeminiFunctionResponse,
    OpenAITool,
    OpenAIToolMessage,
    ResponsesTool,
    ResponsesToolOutput,
    ToolAdapter,
)

if TYPE_CHECKING:
    import anthropic
    import openai
    from google import genai


def ask_claude(llm: anthropic.Anthropic, adapter: ToolAdapter, question: str) -> str:
    """One Claude turn that may use the server's tools."""
    from anthropic.types import MessageParam

    messages: list[MessageParam] = [{"role": "user", "content": question}]
    while True:
        reply = llm.messages.create(model="claude-sonnet-4-5", max_tokens=1024, tools=adapter.anthropic(cache_control=True), messages=messages)
        if reply.stop_reason != "tool_use":
            return "".join(b.text for b in reply.content if b.type == "text")
        results: list[AnthropicToolResult] = [adapter.run_anthropic(b) for b in reply.content if b.type == "tool_use"]
        messages.append({"role": "assistant", "content": reply.content})
        messages.append({"role": "user", "content": results})


def ask_gpt(llm: openai.OpenAI, adapter: ToolAdapter, question: str) -> str:
    """One Chat Completions turn that may use the server's tools."""
    from openai.types.chat import ChatCompletionMessageParam

    messages: list[ChatCompletionMessageParam] = [{"role": "user", "content": question}]
    while True:
        reply = llm.chat.completions.create(model="gpt-4.1", tools=adapter.openai(), messages=messages)
        message = reply.choices[0].message
        if not message.tool_calls:
            return message.content or ""
        calls = [c for c in message.tool_calls if c.type == "function"]
        messages.append(
            {
                "role": "assistant",
                "content": message.content,
                "tool_calls": [{"id": c.id, "type": "function", "function": {"name": c.function.name, "arguments": c.function.arguments}} for c in calls],
            }
        )
        messages += [adapter.run_openai(call) for call in calls]


def ask_gpt_responses(llm: openai.OpenAI, adapter: ToolAdapter, question: str) -> str:
    """One Responses API turn that may use the server's tools."""
    response = llm.responses.create(model="gpt-4.1", tools=adapter.openai_responses(), input=question)
    calls = [item for item in response.output if item.type == "function_call"]
    if not calls:
        return response.output_text
    follow = llm.responses.create(
        model="gpt-4.1",
        tools=adapter.openai_responses(),
        previous_response_id=response.id,
        input=[adapter.run_responses(c) for c in calls],
    )
    return follow.output_text


def ask_gemini(llm: genai.Client, adapter: ToolAdapter, question: str) -> str:
    """One Gemini turn that may use the server's tools."""
    from google.genai import types

    config: types.GenerateContentConfigDict = {"tools": [{"function_declarations": adapter.gemini()}]}
    contents: list[types.ContentUnionDict] = [{"role": "user", "parts": [{"text": question}]}]
    while True:
        reply = llm.models.generate_content(model="gemini-2.5-flash", contents=contents, config=config)
        calls = reply.function_calls or []
        if not calls:
            return reply.text or ""
        if reply.candidates and reply.candidates[0].content:
            contents.append(reply.candidates[0].content)
        answers: list[GeminiFunctionResponse] = [adapter.run_gemini(c) for c in calls]
        contents.append({"role": "user", "parts": [{"function_response": a} for a in answers]})


def offline(adapter: ToolAdapter) -> None:
    """Render every format, and run tool calls shaped as the SDKs return them."""
    anthropic_tools: list[AnthropicTool] = adapter.anthropic()
    openai_tools: list[OpenAITool] = adapter.openai()
    responses_tools: list[ResponsesTool] = adapter.openai_responses()
    gemini_tools: list[GeminiFunctionDeclaration] = adapter.gemini()
    print("tools:", [t["name"] for t in anthropic_tools])
    assert [t["function"]["name"] for t in openai_tools] == [t["name"] for t in responses_tools] == [d.get("name") for d in gemini_tools]

    result: AnthropicToolResult = adapter.run_anthropic({"type": "tool_use", "id": "toolu_1", "name": "add", "input": {"a": 2, "b": 40}})
    print("anthropic:", result.get("content"), result.get("is_error"))
    message: OpenAIToolMessage = adapter.run_openai({"id": "call_1", "type": "function", "function": {"name": "echo", "arguments": json.dumps({"message": "hi"})}})
    print("openai:", message["content"])
    output: ResponsesToolOutput = adapter.run_responses({"type": "function_call", "call_id": "call_2", "name": "word_count", "arguments": '{"text": "a b a"}'})
    print("responses:", output["output"])
    answer: GeminiFunctionResponse = adapter.run_gemini({"id": "fc_1", "name": "nope", "args": {}})
    print("gemini:", answer.get("response"))  # an unknown tool: {"error": "..."} for the model to read


def main() -> None:
    with Client.stdio(sys.executable, ["-m", "mcpsync.server.demo"]) as client:
        adapter = ToolAdapter(client)  # keep it across turns: the rendered list is reused
        offline(adapter)
        question = "What is 2 + 40? Use the add tool."
        live: dict[str, Any] = {}
        if os.environ.get("ANTHROPIC_API_KEY"):
            import anthropic

            live["claude"] = ask_claude(anthropic.Anthropic(), adapter, question)
        if os.environ.get("OPENAI_API_KEY"):
            import openai

            live["gpt"] = ask_gpt(openai.OpenAI(), adapter, question)
            live["gpt (responses)"] = ask_gpt_responses(openai.OpenAI(), adapter, question)
        if os.environ.get("GEMINI_API_KEY"):
            from google import genai

            live["gemini"] = ask_gemini(genai.Client(), adapter, question)
        for who, text in live.items():
            print(f"{who}: {text}")


if __name__ == "__main__":
    main()
