"""What the agent-framework tests share (issue 34): the official-SDK agent server with a
log of what reached it, server-everything, and the expectations every framework meets."""

from __future__ import annotations

import json
import os
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from mcpsync import Client, MultiClient
from tests.conftest import SERVERS, everything_command

AGENT_SERVER = [sys.executable, str(SERVERS / "sdk_agent_server.py")]

#: the search tool's schema as the SDK server writes it: required, default, enum, a
#: nested object by $ref
SEARCH_REQUIRED = ["query"]


class Received:
    """The calls that reached the agent server (its JSON-lines log)."""

    def __init__(self, path: Path) -> None:
        self.path = path

    def all(self) -> list[dict[str, Any]]:
        if not self.path.exists():
            return []
        return [json.loads(line) for line in self.path.read_text().splitlines() if line.strip()]

    def of(self, tool: str) -> list[dict[str, Any]]:
        return [c["arguments"] for c in self.all() if c["tool"] == tool]


@contextmanager
def agent_server(tmp_path: Path, *, mode: str = "auto", name: str = "agent") -> Iterator[tuple[Client, Received]]:
    """A Client of the SDK agent server over stdio, and the log of what reached it."""
    log = tmp_path / f"{name}-received.jsonl"
    env = {"MCPSYNC_AGENT_LOG": str(log), "PYTHONPATH": os.environ.get("PYTHONPATH", "")}
    with Client.stdio(AGENT_SERVER[0], AGENT_SERVER[1:], env=env, mode=mode, name=name) as client:
        yield client, Received(log)


@contextmanager
def two_servers(tmp_path: Path) -> Iterator[tuple[MultiClient, Received]]:
    """A MultiClient over the SDK agent server ("agent") and server-everything ("everything")."""
    log = tmp_path / "multi-received.jsonl"
    env = {"MCPSYNC_AGENT_LOG": str(log), "PYTHONPATH": os.environ.get("PYTHONPATH", "")}
    every = everything_command("stdio")
    clients = {
        "agent": Client.stdio(AGENT_SERVER[0], AGENT_SERVER[1:], env=env, name="agent"),
        "everything": Client.stdio(every[0], every[1:], name="everything"),
    }
    with MultiClient(clients) as multi:
        yield multi, Received(log)


def assert_search_schema(schema: dict[str, Any]) -> None:
    """The search tool's input schema kept what the server wrote."""
    assert schema["required"] == SEARCH_REQUIRED
    props = schema["properties"]
    assert props["limit"]["default"] == 5 and props["limit"]["type"] == "integer"
    assert props["mode"]["enum"] == ["fast", "deep"] and props["mode"]["default"] == "fast"
    filters = props["filters"]
    # either the $ref with its $defs, or the reference inlined: the nested object survives
    text = json.dumps(filters)
    if "$ref" in text:
        assert schema["$defs"]["Filters"]["properties"]["tags"]["items"] == {"type": "string"}
    else:
        assert "tags" in text and "min_score" in text
