"""Scale profiles: one word picks a whole configuration; single settings still override it.

Run: python examples/profiles.py
"""

from __future__ import annotations

import sys

from mcpsync import BreakerPolicy, Client, RetryPolicy

DEMO = [sys.executable, "-m", "mcpsync.server.demo"]


def main() -> None:
    with Client.stdio(DEMO[0], DEMO[1:], profile="minimal") as client:  # a fresh process per call
        print("minimal:", client.call_tool("add", {"a": 1, "b": 2}).text)
    with Client.stdio(DEMO[0], DEMO[1:], profile="enterprise", retry=RetryPolicy.NONE) as client:
        print("enterprise:", client.call_tool("add", {"a": 2, "b": 3}).text, client.breaker_state)
        print(client.metrics())
    with Client.stdio(DEMO[0], DEMO[1:], profile="professional", breaker=BreakerPolicy.DISABLED) as client:
        print("professional:", client.call_tool("echo", {"message": "hi"}).text)


if __name__ == "__main__":
    main()
