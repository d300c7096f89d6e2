"""The small server side of mcpsync.

* :class:`Registry` — tools, resources and prompts as decorated Python functions,
  served in-process by the Local transport (``Client.local(registry)``);
* :func:`serve_stdio` — the same registry as a stdio MCP server (both protocol eras);
* :mod:`mcpsync.server.bridge` — any MCP server over WebSocket / gRPC;
* :mod:`mcpsync.server.demo` — the bundled demo server (``python -m mcpsync.server.demo``).

Example:
    >>> from mcpsync.server import Registry
    >>> reg = Registry("notes")
    >>> @reg.tool()
    ... def shout(text: str) -> str:
    ...     return text.upper()
    >>> reg.call_tool("shout", {"text": "hi"}).text
    'HI'
"""

from ._registry import Context, Registry
from ._serve import ServerCore, serve_stdio

__all__ = ["Registry", "Context", "ServerCore", "serve_stdio"]
