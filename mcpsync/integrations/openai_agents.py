"""MCP tools as OpenAI Agents SDK ``FunctionTool`` s (``openai-agents``).

Each tool is a :class:`agents.FunctionTool` declared with the server's JSON Schema as it
is (``strict_json_schema=False``: strict mode would demand every property be required and
``additionalProperties: false``, which MCP servers do not write), called on a worker thread
so the run's event loop never blocks. A result is its text (``ToolOutputText``) and its
images (``ToolOutputImage`` data URLs) and binary resources (``ToolOutputFileContent``); a
tool error (``isError``) or a failed call returns the text the model should read
(:func:`~mcpsync.agent_message`'s sentence for a failed call): the SDK's documented way for
a tool to report an error to the model without failing the run.

A tool the server no longer offers (``notifications/tools/list_changed``) is disabled
(``is_enabled``); :func:`function_tools` called again gives the new list.

Needs ``pip install 'mcpsync[openai-agents]'``.

Example:
    >>> from agents import Agent, Runner                                      # doctest: +SKIP
    >>> from mcpsync.integrations.openai_agents import function_tools
    >>> agent = Agent(name="helper", tools=function_tools(client))              # doctest: +SKIP
    >>> Runner.run_sync(agent, "What is 2 + 40?").final_output                 # doctest: +SKIP
"""

from __future__ import annotations

import asyncio
import base64
from typing import Any

from agents import FunctionTool, RunContextWrapper, Tool, ToolOutputFileContent, ToolOutputImage, ToolOutputText
from agents.agent import AgentBase
from agents.tool_context import ToolContext

from ._toolbox import Source, Toolbox, ToolOutput, ToolSpec

__all__ = ["function_tools", "function_tool"]

ToolOutputItem = ToolOutputText | ToolOutputImage | ToolOutputFileContent


def _output(output: ToolOutput) -> str | list[ToolOutputItem]:
    if output.is_error or not output.media:
        return output.text
    items: list[ToolOutputItem] = [ToolOutputText(text=output.text)] if output.text else []
    for m in output.media:
        data = base64.b64encode(m.data).decode("ascii")
        if m.kind == "image":
            items.append(ToolOutputImage(image_url=f"data:{m.mime_type};base64,{data}"))
        else:
            items.append(ToolOutputFileContent(file_data=f"data:{m.mime_type};base64,{data}", filename=m.uri.rsplit("/", 1)[-1] or None))
    return items


def function_tool(toolbox: Toolbox, spec: ToolSpec) -> FunctionTool:
    """One tool of ``toolbox`` as a :class:`agents.FunctionTool`."""

    async def invoke(_ctx: ToolContext[Any], arguments: str) -> str | list[ToolOutputItem]:
        return _output(await asyncio.to_thread(toolbox.call, spec.name, arguments))

    async def offered(_ctx: RunContextWrapper[Any], _agent: AgentBase) -> bool:
        return await asyncio.to_thread(toolbox.spec, spec.name) is not None

    return FunctionTool(
        name=spec.name,
        description=spec.description,
        params_json_schema=spec.parameters,
        on_invoke_tool=invoke,
        strict_json_schema=False,
        is_enabled=offered,
    )


def function_tools(source: Source | Toolbox, *, lang: str = "en", timeout: float | None = None) -> list[Tool]:
    """The tools of ``source`` (a Client, a MultiClient, or a Toolbox to share) as FunctionTools.

    Args:
        source: where the tools are.
        lang: language of the error sentences the model reads (``"en"`` / ``"zh"``).
        timeout: seconds per tool call (default: the client's request timeout).

    Returns:
        :class:`agents.FunctionTool` s, typed as the SDK's ``Tool`` so the list goes
        straight into ``Agent(tools=...)``.
    """
    toolbox = source if isinstance(source, Toolbox) else Toolbox(source, lang=lang, timeout=timeout)
    return [function_tool(toolbox, s) for s in toolbox.specs()]
