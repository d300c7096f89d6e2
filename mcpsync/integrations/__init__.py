"""mcpsync's MCP tools as the native tools of agent frameworks, one module each.

=========================================  ==============================================  ===============================
module                                     gives                                           extra
=========================================  ==============================================  ===============================
:mod:`mcpsync.integrations.langchain`      ``BaseTool`` s and a ``BaseToolkit`` (LangGraph)  ``mcpsync[langchain]``
:mod:`mcpsync.integrations.pydantic_ai`    a toolset (``AbstractToolset``)                 ``mcpsync[pydantic-ai]``
:mod:`mcpsync.integrations.smolagents`     ``Tool`` s and a ``ToolCollection``             ``mcpsync[smolagents]``
:mod:`mcpsync.integrations.openai_agents`  ``FunctionTool`` s                              ``mcpsync[openai-agents]``
:mod:`mcpsync.integrations.dspy`           ``dspy.Tool`` s                                 ``mcpsync[dspy]``
:mod:`mcpsync.integrations.llama_index`    ``FunctionTool`` s                              ``mcpsync[llama-index]``
=========================================  ==============================================  ===============================

Each takes a :class:`~mcpsync.Client` or a :class:`~mcpsync.MultiClient` and is only that
framework's shape: the schemas, results and errors come from one conversion,
:class:`~mcpsync.integrations.Toolbox`. Nothing here imports a framework until its own
module is imported, and ``import mcpsync`` imports none of them.
"""

from .._errors import AgentToolError
from ._toolbox import Media, ToolOutput, ToolSpec, Toolbox, inline_refs

__all__ = ["Toolbox", "ToolSpec", "ToolOutput", "Media", "inline_refs", "AgentToolError"]
