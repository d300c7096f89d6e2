"""MCP tools as smolagents ``Tool`` s, for its ``ToolCallingAgent`` and ``CodeAgent``.

smolagents describes a tool by one schema per argument (``inputs``): each is the
argument's own JSON Schema from the server (``$ref`` s inlined, so nested objects and
enums survive), with ``nullable`` on the optional ones, as smolagents marks them. Names
are Python identifiers (a ``CodeAgent`` calls tools as functions): ``get-sum`` becomes
``get_sum``. A call returns the result's structured content (a dict) or its text, or an
``AgentImage`` when the result is only an image; a tool error (``isError``) or a failed
call raises :class:`~mcpsync._errors.AgentToolError` with the text the model should read
(:func:`~mcpsync.agent_message`'s sentence for a failed call), which smolagents shows the
model as the step's error.

Tools are plain objects with no per-call state: an agent may run them on its tool
threads (``max_tool_threads``). :func:`tool_collection` asked again follows
``notifications/tools/list_changed``.

Needs ``pip install 'mcpsync[smolagents]'``.

Example:
    >>> from smolagents import ToolCallingAgent                               # doctest: +SKIP
    >>> from mcpsync.integrations.smolagents import tool_collection
    >>> agent = ToolCallingAgent(tools=tool_collection(client).tools, model=model)  # doctest: +SKIP
"""

from __future__ import annotations

from typing import Any

from smolagents import Tool, ToolCollection  # type: ignore[import-untyped]
from smolagents.agent_types import AgentImage  # type: ignore[import-untyped]

from .._errors import AgentToolError
from ._toolbox import Source, Toolbox, ToolOutput, ToolSpec

__all__ = ["MCPTool", "tools", "tool_collection"]



def _input(schema: dict[str, Any], required: bool) -> dict[str, Any]:
    out = dict(schema)
    options = out.get("anyOf")
    if isinstance(options, list) and "type" not in out:
        real = [o for o in options if isinstance(o, dict) and o.get("type") != "null"]
        if len(real) == 1 and len(real) < len(options):
            # "X or null" (an optional nested object, enum ...): X itself, nullable, so that
            # smolagents' renderer (which keeps only each option's type) shows X whole
            out.pop("anyOf")
            out = {**real[0], **out, "nullable": True}
            options = None
    if "type" not in out:
        kinds = [o.get("type") for o in options] if isinstance(options, list) else []
        if kinds and all(isinstance(k, str) for k in kinds):
            if "null" in kinds:
                out["nullable"] = True
            real = [k for k in kinds if k != "null"]
            out["type"] = real[0] if len(real) == 1 else real
        else:
            out["type"] = "any"  # a schema smolagents' per-argument types cannot say
            out.pop("anyOf", None)
    out["description"] = str(out.get("description") or out.get("title") or "")  # smolagents requires one
    if not required:
        out["nullable"] = True
    return out


def _value(output: ToolOutput) -> Any:
    result = output.result
    if result is not None and output.media and not result.text and output.media[0].kind == "image":
        return AgentImage(output.media[0].data)
    return output.structured if output.structured is not None else output.text


class MCPTool(Tool):  # type: ignore[misc]
    """One MCP tool as a smolagents Tool (built by :func:`tools`)."""

    skip_forward_signature_validation = True  # forward(**kwargs): the inputs are the schema's

    def __init__(self, toolbox: Toolbox, spec: ToolSpec) -> None:
        self.name = spec.name
        self.description = spec.description or spec.name
        required = set(spec.required)
        self.inputs = {k: _input(v, k in required) for k, v in spec.properties().items()}
        self.output_type = "any"
        self.toolbox = toolbox
        self.spec = spec
        super().__init__()

    def forward(self, **kwargs: Any) -> Any:
        output = self.toolbox.call(self.name, kwargs)
        if output.is_error:
            raise AgentToolError(output.text, tool=self.name)
        return _value(output)


def tools(source: Source | Toolbox, *, lang: str = "en", timeout: float | None = None) -> list[MCPTool]:
    """The tools of ``source`` (a Client, a MultiClient, or a Toolbox to share) as smolagents Tools.

    Args:
        source: where the tools are.
        lang: language of the error sentences the model reads (``"en"`` / ``"zh"``).
        timeout: seconds per tool call (default: the client's request timeout).
    """
    toolbox = source if isinstance(source, Toolbox) else Toolbox(source, names="identifier", lang=lang, timeout=timeout)
    return [MCPTool(toolbox, s) for s in toolbox.specs()]


def tool_collection(source: Source | Toolbox, *, lang: str = "en", timeout: float | None = None) -> ToolCollection:
    """:func:`tools` as a smolagents ``ToolCollection`` (its ``.tools`` go in an agent's ``tools=``)."""
    collected: list[Tool] = list(tools(source, lang=lang, timeout=timeout))
    return ToolCollection(collected)
