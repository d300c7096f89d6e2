"""MCP tools as LangChain tools (``langchain-core``), usable in LangGraph's prebuilt agent.

Each tool is a :class:`~langchain_core.tools.BaseTool` whose ``args_schema`` is the
tool's JSON Schema as the server wrote it; ``invoke`` calls the server on the calling
thread, ``ainvoke`` on a worker thread (LangChain's own executor). A tool's
``ToolMessage`` carries the result's text (and its images as image content blocks) with
``status="error"`` for a tool error or a failed call (whose text is
:func:`~mcpsync.agent_message`'s sentence); its ``artifact`` is the
:class:`~mcpsync.integrations.ToolOutput` (structured content, media, the raw result).

Needs ``pip install 'mcpsync[langchain]'``.

Example:
    >>> from langgraph.prebuilt import create_react_agent                      # doctest: +SKIP
    >>> from mcpsync.integrations.langchain import MCPToolkit
    >>> toolkit = MCPToolkit.from_source(client)                                # doctest: +SKIP
    >>> agent = create_react_agent(model, toolkit.get_tools())                  # doctest: +SKIP

``toolkit.get_tools()`` follows ``notifications/tools/list_changed``: ask it again when
building the next agent (the same tool objects come back while nothing changed).
"""

from __future__ import annotations

import base64
import threading
from typing import Any

from langchain_core.callbacks import CallbackManagerForToolRun
from langchain_core.tools import BaseTool, BaseToolkit, ToolException
from pydantic import ConfigDict, PrivateAttr

from ._toolbox import Source, Toolbox, ToolOutput, ToolSpec

__all__ = ["MCPTool", "MCPToolkit", "tools"]


def _content(output: ToolOutput) -> str | list[str | dict[str, Any]]:
    images = [m for m in output.media if m.kind == "image"]
    if not images:
        return output.text
    blocks: list[str | dict[str, Any]] = [{"type": "text", "text": output.text}] if output.text else []
    for m in images:
        blocks.append({"type": "image", "base64": base64.b64encode(m.data).decode("ascii"), "mime_type": m.mime_type})
    return blocks


class MCPTool(BaseTool):
    """One MCP tool as a LangChain tool (built by :class:`MCPToolkit` or :func:`tools`)."""

    model_config = ConfigDict(arbitrary_types_allowed=True)

    _toolbox: Toolbox = PrivateAttr()

    @classmethod
    def from_spec(cls, toolbox: Toolbox, spec: ToolSpec) -> "MCPTool":
        tool = cls(
            name=spec.name,
            description=spec.description or spec.name,
            args_schema=spec.parameters,
            response_format="content_and_artifact",  # (text, the ToolOutput)
            handle_tool_error=True,  # a ToolException's text goes to the model, status "error"
        )
        tool._toolbox = toolbox
        return tool

    def _run(self, run_manager: CallbackManagerForToolRun | None = None, **kwargs: Any) -> tuple[Any, ToolOutput]:
        output = self._toolbox.call(self.name, kwargs)
        if output.is_error:
            raise ToolException(output.text)
        return _content(output), output


class MCPToolkit(BaseToolkit):
    """A Client's or MultiClient's tools as LangChain tools; thread-safe.

    Build it with :meth:`from_source`.
    """

    model_config = ConfigDict(arbitrary_types_allowed=True)

    _toolbox: Toolbox = PrivateAttr()
    _lock: threading.Lock = PrivateAttr(default_factory=threading.Lock)
    _specs: list[ToolSpec] | None = PrivateAttr(default=None)
    _tools: list[BaseTool] = PrivateAttr(default_factory=list)

    @classmethod
    def from_source(cls, source: Source, *, lang: str = "en", timeout: float | None = None) -> "MCPToolkit":
        """A toolkit over ``source`` (a Client or a MultiClient).

        Args:
            source: where the tools are.
            lang: language of the error sentences the model reads (``"en"`` / ``"zh"``).
            timeout: seconds per tool call (default: the client's request timeout).
        """
        kit = cls()
        kit._toolbox = Toolbox(source, lang=lang, timeout=timeout)
        return kit

    @property
    def toolbox(self) -> Toolbox:
        return self._toolbox

    def get_tools(self, *, refresh: bool = False) -> list[BaseTool]:
        """The tools, in a stable order; the same objects while the server's tools are unchanged.

        Args:
            refresh: ask the servers for their tools again first.
        """
        specs = self._toolbox.specs(refresh=refresh)
        with self._lock:
            if specs is self._specs:
                return list(self._tools)
        built: list[BaseTool] = [MCPTool.from_spec(self._toolbox, s) for s in specs]
        with self._lock:
            self._specs, self._tools = specs, built
            return list(built)


def tools(source: Source, *, lang: str = "en", timeout: float | None = None) -> list[BaseTool]:
    """The tools of ``source`` (a Client or a MultiClient) as LangChain tools.

    Example:
        >>> agent = create_react_agent(model, tools(client))            # doctest: +SKIP
    """
    return MCPToolkit.from_source(source, lang=lang, timeout=timeout).get_tools()
