"""Quick start: one client, many threads, typed errors, policies as values.

Run: python examples/quickstart.py   (starts the bundled demo server over stdio)
"""

from __future__ import annotations

import sys
from concurrent.futures import ThreadPoolExecutor
from dataclasses import replace

from mcpsync import CallToolResult, Client, MCPError, PoolLimits, RetryPolicy, TextContent, Timeouts, Tool

DEMO = [sys.executable, "-m", "mcpsync.server.demo"]


def main() -> None:
    with Client.stdio(DEMO[0], DEMO[1:]) as client:
        tools: list[Tool] = client.list_tools()
        print("tools:", ", ".join(t.name for t in tools))
        result: CallToolResult = client.call_tool("echo", {"message": "hi"}, timeout=10)
        first = result.content[0]
        assert isinstance(first, TextContent)
        print(first.text, result.structured_content, result.is_error)

        # one client, many threads
        def add_one(i: int) -> str:
            return client.call_tool("add", {"a": i, "b": 1}).text

        with ThreadPoolExecutor(16) as pool:
            sums = list(pool.map(add_one, range(100)))
        assert sums[:3] == ["1", "2", "3"], sums[:3]

        # a tool that fails on its own returns is_error=True; it does not raise
        failed = client.call_tool("fail", {"message": "as planned"})
        assert failed.is_error
        print("fail ->", failed.text)

    # errors are typed, and an error that ends a retried call tells the attempts
    client = Client.stdio(
        DEMO[0],
        DEMO[1:],
        timeouts=replace(Timeouts.DEFAULT, request=5.0),
        retry=RetryPolicy(retries=3),
        pool=PoolLimits(min=1, max=4),
        mode="auto",
    )
    with client:
        try:
            client.call_tool("slow_count", {"to": 3, "delay": 1.0}, timeout=0.5)
        except MCPError as exc:
            history: tuple[tuple[str, float], ...] = exc.retry_history  # (error class, seconds waited) per attempt
            retried: tuple[MCPError, ...] = exc.retried_errors  # the earlier attempts' errors
            print(f"{type(exc).__name__}: {exc} (attempts: {len(history)}, earlier errors: {len(retried)})")
        else:
            raise AssertionError("a 0.5 s timeout on a 3 s call should have raised")


if __name__ == "__main__":
    main()
