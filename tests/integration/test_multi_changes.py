"""Tool-list changes reaching the MultiClient and the adapters from a real server.

``counting_server.py``'s ``change`` tool adds a tool and sends a real
``notifications/tools/list_changed``; ``stats`` tells how often the server was asked for
``tools/list``.
"""

from __future__ import annotations

import json
import sys

from mcpsync import Client
from mcpsync._multi import MultiClient
from mcpsync.adapters import ToolAdapter
from tests.conftest import server_command
from tests.helpers import wait_until

COUNTING = server_command("counting_server.py")
DEMO = [sys.executable, "-m", "mcpsync.server.demo"]


def _lists(client) -> int:
    return json.loads(client.call_tool("stats").content[0].text).get("tools/list", 0)


def test_list_changed_with_a_new_tool_reaches_the_multiclient_and_the_adapter():
    clients = {"count": Client.stdio(COUNTING[0], COUNTING[1:], name="count"), "demo": Client.stdio(DEMO[0], DEMO[1:], name="demo")}
    with MultiClient(clients, namespace="collisions") as multi:
        adapter = ToolAdapter(multi)
        before = adapter.openai()
        names = [t["function"]["name"] for t in before]
        assert "extra_0" not in names
        for _ in range(100):
            assert adapter.openai() is before  # cached: no relisting without a change
        assert multi.call_tool("change", {}).content[0].text == "changed"
        # the server's list_changed invalidates that server's tools; the next render relists
        assert wait_until(lambda: "extra_0" in [t["function"]["name"] for t in adapter.openai()])
        after = [t["function"]["name"] for t in adapter.openai()]
        assert set(after) - set(names) == {"extra_0"}
        assert [n for n in after if n != "extra_0"] == names  # everything else kept its order
        assert multi.route("extra_0") == ("count", "extra_0")


def test_multiclient_does_not_relist_without_a_change():
    with MultiClient({"count": Client.stdio(COUNTING[0], COUNTING[1:], name="count")}) as multi:
        multi.list_tools()
        client = multi.client("count")
        first = _lists(client)
        for _ in range(50):
            multi.list_tools()
            multi.route("echo")
        assert _lists(client) == first  # served from the MultiClient's cache


def test_list_changed_that_keeps_the_set_keeps_the_rendering():
    with Client.stdio(DEMO[0], DEMO[1:]) as client:
        adapter = ToolAdapter(client, fixed=[{"name": "calc", "input_schema": {"type": "object"}}])
        first = adapter.anthropic()
        frozen = json.dumps(first)
        for _ in range(100):
            assert json.dumps(adapter.anthropic()) == frozen
        # as if the server sent notifications/tools/list_changed with its set unchanged
        client._handlers.notification("notifications/tools/list_changed", None)
        assert adapter.anthropic() is first
        assert json.dumps(adapter.anthropic()) == frozen
