"""MCP tools as DSPy tools (``dspy.Tool``), for ``dspy.ReAct`` and any module that takes tools.

Each tool is a ``dspy.Tool`` whose ``args`` are the arguments' own JSON Schemas from the
server (``$ref`` s inlined: DSPy validates each argument against its schema and shows them
to the model), and whose function calls the server synchronously: no async session, no
event loop, so ``tool(...)`` and ``await tool.acall(...)`` both work. A call returns the
result's structured content (a dict) or its text; a tool error (``isError``) or a failed
call raises :class:`~mcpsync._errors.AgentToolError` with the text the model should read
(:func:`~mcpsync.agent_message`'s sentence for a failed call), which ``ReAct`` writes into
its trajectory as the observation.

Needs ``pip install 'mcpsync[dspy]'``.

Example:
    >>> import dspy                                                          # doctest: +SKIP
    >>> from mcpsync.integrations.dspy import tools
    >>> react = dspy.ReAct("question -> answer", tools=tools(client))         # doctest: +SKIP
"""

from __future__ import annotations

from typing import Any

import dspy  # type: ignore[import-untyped]

from .._errors import AgentToolError
from ._toolbox import Source, Toolbox, ToolSpec

__all__ = ["tool", "tools"]

_TYPES: dict[str, type] = {"string": str, "integer": int, "number": float, "boolean": bool, "array": list, "object": dict}



def tool(toolbox: Toolbox, spec: ToolSpec) -> Any:
    """One tool of ``toolbox`` as a ``dspy.Tool``."""
    args = spec.properties()
    required = set(spec.required)

    def call(**kwargs: Any) -> Any:
        output = toolbox.call(spec.name, kwargs)
        if output.is_error:
            raise AgentToolError(output.text, tool=spec.name)
        return output.structured if output.structured is not None else output.text

    arg_types = {k: _TYPES.get(str(v.get("type")), Any) for k, v in args.items()}
    arg_desc = {k: str(v.get("description") or v.get("title") or "") + (" (Required)" if k in required else "") for k, v in args.items()}
    return dspy.Tool(call, name=spec.name, desc=spec.description, args=args, arg_types=arg_types, arg_desc=arg_desc)


def tools(source: Source | Toolbox, *, lang: str = "en", timeout: float | None = None) -> list[Any]:
    """The tools of ``source`` (a Client, a MultiClient, or a Toolbox to share) as ``dspy.Tool`` s.

    Args:
        source: where the tools are.
        lang: language of the error sentences the model reads (``"en"`` / ``"zh"``).
        timeout: seconds per tool call (default: the client's request timeout).

    Asked again, it follows ``notifications/tools/list_changed``.
    """
    toolbox = source if isinstance(source, Toolbox) else Toolbox(source, lang=lang, timeout=timeout)
    return [tool(toolbox, s) for s in toolbox.specs()]
