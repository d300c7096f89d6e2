"""Adding a server to a configuration never renames another server's tools, nor reorders
them in the LLM adapters' output (real servers over stdio; the configuration as a dict)."""

from __future__ import annotations

import pytest

from mcpsync import Client, MultiClient
from mcpsync.adapters import ToolAdapter
from tests.conftest import PYTHON, SERVERS

DEMO = {"command": PYTHON, "args": ["-m", "mcpsync.server.demo"]}
SDK = {"command": PYTHON, "args": [str(SERVERS / "sdk_server.py")]}


def _names(config: dict) -> tuple[list[str], list[str]]:
    with MultiClient.from_config(config, list_timeout=60.0) as multi:
        exposed = [t.name for t in multi.list_tools()]
        adapted = [t["function"]["name"] for t in ToolAdapter(multi).openai()]
        assert multi.call_tool("demo__echo", {"message": "hi"}).text.endswith("hi")
    return exposed, adapted


def test_adding_a_server_keeps_every_name_and_the_order() -> None:
    alone, alone_adapted = _names({"mcpServers": {"demo": DEMO}})
    assert "demo__echo" in alone and all(n.startswith("demo__") for n in alone)
    # a server that also offers echo joins, before and after the first one in the file
    for servers in ({"sdk": SDK, "demo": DEMO}, {"demo": DEMO, "sdk": SDK}):
        both, both_adapted = _names({"mcpServers": servers})
        assert "sdk__echo" in both
        assert [n for n in both if n.startswith("demo__")] == alone
        assert [n for n in both_adapted if n.startswith("demo__")] == alone_adapted


def test_a_bare_name_one_server_offers_still_routes() -> None:
    with MultiClient.from_config({"mcpServers": {"demo": DEMO, "sdk": SDK}}, list_timeout=60.0) as multi:
        assert multi.call_tool("sleep_ms", {"ms": 1}).text == "slept 1 ms"  # only the SDK server has it
        with pytest.raises(Exception, match="offered by several servers"):
            multi.call_tool("echo", {"message": "x"})


def test_client_from_a_dict() -> None:
    with Client.from_config({"mcpServers": {"demo": DEMO}}, "demo") as client:
        assert client.call_tool("echo", {"message": "dict"}).text.endswith("dict")
