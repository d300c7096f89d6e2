"""The bundled demo MCP server: a few small, useful tools, a resource and a prompt.

Nothing beyond mcpsync itself is needed, so it runs on a fresh machine::

    python -m mcpsync.server.demo          # an MCP server on stdio (both protocol eras)
    mcpsync demo                           # the same, through the CLI

In-process, through the Local transport::

    >>> from mcpsync.server.demo import registry
    >>> registry.call_tool("add", {"a": 2, "b": 3}).structured_content
    {'result': 5}
    >>> registry.call_tool("word_count", {"text": "to be or not to be"}).structured_content["words"]
    6
"""

from __future__ import annotations

import collections
import datetime as _dt
import re
import sys
import time
from typing import Any, Sequence

from .. import __version__ as _version
from ._registry import Context, Registry
from ._serve import serve_stdio

__all__ = ["registry", "main"]

registry = Registry(
    "mcpsync-demo",
    _version,
    title="mcpsync demo server",
    instructions=(
        "A demo server. Tools: echo, add, word_count, current_time, slow_count, fail. "
        "Resources: demo://about, demo://greeting/{name}. Prompt: summarize."
    ),
)


@registry.tool(annotations={"readOnlyHint": True})
def echo(message: str) -> str:
    """Return the message unchanged."""
    return message


@registry.tool(annotations={"readOnlyHint": True})
def add(a: float, b: float) -> float:
    """Add two numbers."""
    total = a + b
    return int(total) if isinstance(a, int) and isinstance(b, int) else total


@registry.tool(annotations={"readOnlyHint": True})
def word_count(text: str, top: int = 3) -> dict[str, Any]:
    """Count the characters, words and lines of a text, and its most common words."""
    words = re.findall(r"[\w']+", text.lower())
    common = collections.Counter(words).most_common(max(top, 0))
    return {
        "characters": len(text),
        "words": len(words),
        "lines": len(text.splitlines()) if text else 0,
        "top": [{"word": w, "count": c} for w, c in common],
    }


@registry.tool(annotations={"readOnlyHint": True})
def current_time(utc_offset_hours: float = 0.0) -> dict[str, Any]:
    """The current date and time, ISO 8601, at a UTC offset in hours (default UTC)."""
    if not -14 <= utc_offset_hours <= 14:
        raise ValueError("utc_offset_hours must be between -14 and 14")
    tz = _dt.timezone(_dt.timedelta(hours=utc_offset_hours))
    now = _dt.datetime.now(tz)
    return {"iso": now.isoformat(timespec="seconds"), "unix": round(now.timestamp(), 3)}


@registry.tool()
def slow_count(to: int = 3, delay: float = 0.1, ctx: Context | None = None) -> str:
    """Count to a number, reporting progress after each step (delay seconds each, at most 5 s in all)."""
    to = max(0, min(to, 100))
    step = max(0.0, min(delay, 5.0 / max(to, 1)))
    for i in range(1, to + 1):
        time.sleep(step)
        if ctx is not None:
            ctx.progress(i, to, f"counted {i}")
    return f"counted to {to}"


@registry.tool()
def fail(message: str = "this tool always fails") -> str:
    """Raise an error (to see how a failing tool is reported: an isError result)."""
    raise RuntimeError(message)


@registry.resource("demo://about", name="about", mime_type="text/markdown")
def about() -> str:
    """What this server is."""
    return (
        "# mcpsync demo server\n\n"
        f"Version {_version}. Tools: echo, add, word_count, current_time, slow_count, fail.\n"
        "Served by mcpsync.server over stdio, or in-process by the Local transport.\n"
    )


@registry.resource("demo://greeting/{name}", name="greeting", mime_type="text/plain")
def greeting(name: str) -> str:
    """A greeting for a name."""
    return f"Hello, {name}!"


@registry.prompt()
def summarize(text: str, style: str = "one paragraph") -> str:
    """Ask the model to summarise a text."""
    return f"Summarise the following text in {style}:\n\n{text}"


def main(argv: Sequence[str] | None = None) -> int:
    """Serve the demo registry over stdio until stdin closes. Returns the exit status."""
    args = list(sys.argv[1:] if argv is None else argv)
    if args and args[0] in ("-h", "--help"):
        print(__doc__.split("\n\n")[0] + "\n\nusage: python -m mcpsync.server.demo   (speaks MCP on stdin/stdout)")
        return 0
    if args:
        print(f"mcpsync demo: unexpected arguments: {' '.join(args)}", file=sys.stderr)
        return 2
    print(f"mcpsync demo server {_version}: speaking MCP on stdio (both protocol eras)", file=sys.stderr)
    try:
        serve_stdio(registry)
    except KeyboardInterrupt:
        return 0
    return 0


if __name__ == "__main__":
    sys.exit(main())
