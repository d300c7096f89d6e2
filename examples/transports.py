"""Transports: a child process over stdio, and in-process tools with no serialisation.

Run: python examples/transports.py
"""

from __future__ import annotations

import sys
import tempfile

from mcpsync import Client
from mcpsync.server import Registry

tools = Registry("mine")


@tools.tool()
def add(a: int, b: int) -> int:
    """Add two numbers."""
    return a + b


def main() -> None:
    # stdio: a child process, with its own environment and working directory
    with Client.stdio(sys.executable, ["-m", "mcpsync.server.demo"], env={"KEY": "v"}, cwd=tempfile.gettempdir()) as client:
        print(client.server_info.name, client.era, client.protocol_version)
        client.ping(timeout=5)

    # in-process (Local): the same API over plain function calls
    with Client.local(tools) as client:
        assert client.call_tool("add", {"a": 1, "b": 2}).text == "3"
        print("local add ->", client.call_tool("add", {"a": 1, "b": 2}).text)


if __name__ == "__main__":
    main()
