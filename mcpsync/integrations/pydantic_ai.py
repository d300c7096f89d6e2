"""MCP tools as a pydantic-ai toolset (``pydantic-ai-slim``).

:class:`MCPToolset` is an :class:`~pydantic_ai.toolsets.AbstractToolset`: pass it in an
agent's ``toolsets=[...]``. Its tools are listed at each run step (through the clients'
tool caches, so a ``notifications/tools/list_changed`` shows in the next step), declared
with the server's JSON Schema unchanged, and called on a worker thread, so the agent's
event loop never blocks on the server. A result comes back as its structured content
(or its text), with images and binary resources as ``BinaryContent``; a tool error
(``isError``) or a failed call raises :class:`~pydantic_ai.ModelRetry` with the text the
model should read (:func:`~mcpsync.agent_message`'s sentence for a failed call), as
pydantic-ai's own MCP toolset does.

Needs ``pip install 'mcpsync[pydantic-ai]'``.

Example:
    >>> from pydantic_ai import Agent                                          # doctest: +SKIP
    >>> from mcpsync.integrations.pydantic_ai import MCPToolset
    >>> agent = Agent("openai:gpt-4.1", toolsets=[MCPToolset(client)])         # doctest: +SKIP
    >>> agent.run_sync("What is 2 + 40?").output                               # doctest: +SKIP
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, cast

import anyio.to_thread
from pydantic import TypeAdapter
from pydantic_ai import ModelRetry, RunContext
from pydantic_ai.messages import BinaryContent
from pydantic_ai.tools import ToolDefinition
from pydantic_ai.toolsets import AbstractToolset, ToolsetTool

from ._toolbox import Source, Toolbox, ToolOutput

if TYPE_CHECKING:
    from pydantic_core import SchemaValidator

__all__ = ["MCPToolset"]

# the arguments are checked by the server against its own schema: here, only "an object"
_ARGS_VALIDATOR = cast("SchemaValidator", TypeAdapter(dict[str, Any]).validator)


def _value(output: ToolOutput) -> Any:
    value: Any = output.structured if output.structured is not None else output.text
    binaries = [BinaryContent(data=m.data, media_type=m.mime_type) for m in output.media]
    return [value, *binaries] if binaries else value


class MCPToolset(AbstractToolset[Any]):
    """A Client's or MultiClient's tools as a pydantic-ai toolset; thread-safe.

    Args:
        source: a :class:`~mcpsync.Client` or a :class:`~mcpsync.MultiClient`.
        lang: language of the error sentences the model reads (``"en"`` / ``"zh"``).
        timeout: seconds per tool call (default: the client's request timeout).
        max_retries: how many times the model may retry a tool that failed (default:
            the agent's).
        id: the toolset's id (pydantic-ai uses it to tell toolsets apart).
    """

    def __init__(
        self,
        source: Source,
        *,
        lang: str = "en",
        timeout: float | None = None,
        max_retries: int | None = None,
        id: str | None = None,
    ) -> None:
        self.toolbox = Toolbox(source, lang=lang, timeout=timeout)
        self.max_retries = max_retries
        self._id = id

    @property
    def id(self) -> str | None:
        return self._id

    async def get_tools(self, ctx: RunContext[Any]) -> dict[str, ToolsetTool[Any]]:
        specs = await anyio.to_thread.run_sync(self.toolbox.specs)  # may list over the wire
        retries = self.max_retries if self.max_retries is not None else ctx.max_retries
        return {
            s.name: ToolsetTool(
                toolset=self,
                tool_def=ToolDefinition(
                    name=s.name,
                    description=s.description or None,
                    parameters_json_schema=s.parameters,
                    metadata={"server": s.server, "tool": s.tool},
                ),
                max_retries=retries,
                args_validator=_ARGS_VALIDATOR,
            )
            for s in specs
        }

    async def call_tool(self, name: str, tool_args: dict[str, Any], ctx: RunContext[Any], tool: ToolsetTool[Any]) -> Any:
        output = await anyio.to_thread.run_sync(self.toolbox.call, name, tool_args)
        if output.is_error:
            raise ModelRetry(output.text)
        return _value(output)
