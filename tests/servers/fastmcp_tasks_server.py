"""FastMCP 4.1.4 with fastmcp-tasks 4.1.4: the SEP-2663 tasks extension (``tasks/get``,
``tasks/update``, ``tasks/cancel``, ``resultType: "task"``) served by a real implementation,
in-memory backend, over stdio. Run with the interpreter of its own environment
(tests/setup/70-fastmcp-tasks.sh: fastmcp-tasks 4.1.4 needs fastmcp 4.1.4, not the 4.2.3 of
the test environment).

Tools (each may run as a task; ``required`` ones always do):
  slow(seconds, text)   sleeps, then "done: <text>"
  ask()                 asks the client its name (an input request of the task), then "Hello, <name>"
  forever()             sleeps an hour (cancel it)
  boom()                raises: the tool fails

Usage: <fastmcp-tasks python> fastmcp_tasks_server.py [http PORT]   (stdio by default)
"""

from __future__ import annotations

import asyncio
import sys
from datetime import timedelta

from fastmcp import Context, FastMCP
from fastmcp.utilities.tasks import TaskConfig
from fastmcp_tasks import TasksExtension
from mcp_types import ElicitRequest, ElicitRequestFormParams, InputRequiredResult

mcp = FastMCP("fastmcp-tasks")
mcp.add_extension(TasksExtension())
REQUIRED = TaskConfig(mode="required", poll_interval=timedelta(milliseconds=100))


@mcp.tool(task=REQUIRED)
async def slow(seconds: float = 0.3, text: str = "") -> str:
    await asyncio.sleep(seconds)
    return f"done: {text}"


@mcp.tool(task=REQUIRED)
async def ask(ctx: Context) -> InputRequiredResult | str:
    """The guard pattern fastmcp-tasks asks for: an input request from the task (the client
    answers it with tasks/update), then the task runs again with the answer."""
    answer = (ctx.input_responses or {}).get("name")
    if answer is None:
        return InputRequiredResult(input_requests={"name": ElicitRequest(
            method="elicitation/create",
            params=ElicitRequestFormParams(mode="form", message="What is your name?", requested_schema={
                "type": "object", "properties": {"name": {"type": "string"}}, "required": ["name"]}))})
    return f"Hello, {answer.content['name']}"


@mcp.tool(task=REQUIRED)
async def forever() -> str:
    await asyncio.sleep(3600)
    return "never"


@mcp.tool(task=REQUIRED)
async def boom() -> str:
    raise RuntimeError("boom")


if __name__ == "__main__":
    if len(sys.argv) > 2 and sys.argv[1] == "http":
        mcp.run("http", host="127.0.0.1", port=int(sys.argv[2]), show_banner=False, stateless_http=True)
    else:
        mcp.run("stdio", show_banner=False)
