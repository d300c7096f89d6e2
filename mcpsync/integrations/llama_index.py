"""MCP tools as LlamaIndex ``FunctionTool`` s (``llama-index-core``), for its agents.

Each tool is a :class:`~llama_index.core.tools.FunctionTool` whose ``fn_schema`` reports
the server's JSON Schema as it is (LlamaIndex keeps its ``type``, ``properties``,
``required`` and ``$defs``), called synchronously by ``call`` and on a worker thread by
``acall``, so an agent's event loop never blocks. A result comes back as its text (with
its images as ``ImageBlock`` s) and its ``raw_output`` is the
:class:`~mcpsync.integrations.ToolOutput`; a tool error (``isError``) or a failed call
raises :class:`~mcpsync._errors.AgentToolError` with the text the model should read
(:func:`~mcpsync.agent_message`'s sentence for a failed call), which LlamaIndex's agents
turn into a tool output with ``is_error`` set.

Needs ``pip install 'mcpsync[llama-index]'``.

Example:
    >>> from llama_index.core.agent.workflow import FunctionAgent               # doctest: +SKIP
    >>> from mcpsync.integrations.llama_index import tools
    >>> agent = FunctionAgent(tools=tools(client), llm=llm)                      # doctest: +SKIP
"""

from __future__ import annotations

import asyncio
import copy
from collections.abc import Callable
from typing import Any

from llama_index.core.base.llms.types import ContentBlock, ImageBlock, TextBlock
from llama_index.core.tools import BaseTool, FunctionTool
from pydantic import BaseModel, ConfigDict

from .._errors import AgentToolError
from ._toolbox import Source, Toolbox, ToolOutput, ToolSpec

__all__ = ["function_tool", "tools"]



def _schema_model(spec: ToolSpec) -> type[BaseModel]:
    """A pydantic model whose JSON Schema is the tool's, as the server wrote it (LlamaIndex
    describes a tool by its ``fn_schema`` model); it accepts any arguments: the server
    checks them."""
    schema = spec.parameters

    class Arguments(BaseModel):
        model_config = ConfigDict(extra="allow")

        @classmethod
        def model_json_schema(cls, *args: Any, **kwargs: Any) -> dict[str, Any]:
            return copy.deepcopy(schema)

    Arguments.__name__ = Arguments.__qualname__ = f"{spec.name}_arguments"
    return Arguments


def _blocks(output: ToolOutput) -> str | list[ContentBlock]:
    images = [m for m in output.media if m.kind == "image"]
    if not images:
        return output.text
    blocks: list[ContentBlock] = [TextBlock(text=output.text)] if output.text else []
    blocks.extend(ImageBlock(image=m.data, image_mimetype=m.mime_type) for m in images)
    return blocks


def function_tool(toolbox: Toolbox, spec: ToolSpec) -> FunctionTool:
    """One tool of ``toolbox`` as a LlamaIndex ``FunctionTool``."""

    def call(**kwargs: Any) -> str | list[ContentBlock]:
        output = toolbox.call(spec.name, kwargs)
        if output.is_error:
            raise AgentToolError(output.text, tool=spec.name)
        return _blocks(output)

    async def acall(**kwargs: Any) -> str | list[ContentBlock]:
        return await asyncio.to_thread(call, **kwargs)

    return FunctionTool.from_defaults(fn=call, async_fn=acall, name=spec.name, description=spec.description or spec.name,
                                      fn_schema=_schema_model(spec))


def tools(source: Source | Toolbox, *, lang: str = "en", timeout: float | None = None) -> list[BaseTool | Callable[..., Any]]:
    """The tools of ``source`` (a Client, a MultiClient, or a Toolbox to share) as ``FunctionTool`` s.

    Args:
        source: where the tools are.
        lang: language of the error sentences the model reads (``"en"`` / ``"zh"``).
        timeout: seconds per tool call (default: the client's request timeout).

    Returns:
        ``FunctionTool`` s, typed as LlamaIndex agents' ``tools=`` parameter is, so the
        list goes straight into it. Asked again, it follows ``notifications/tools/list_changed``.
    """
    toolbox = source if isinstance(source, Toolbox) else Toolbox(source, lang=lang, timeout=timeout)
    return [function_tool(toolbox, s) for s in toolbox.specs()]
