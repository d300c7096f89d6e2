"""A MultiClient shows its partial state (real stdio servers).

- A server slower to start than ``list_timeout`` is said to be starting (a WARNING, status
  ``"starting"``) and is listed as soon as it answers, not ``relist_after`` later.
- A failed server is said in a WARNING with its reason; a call of a tool of a starting or
  failed server is answered by the adapters with a sentence that says so.
- Resources and prompts are listed across servers.
"""

from __future__ import annotations

import logging
import shlex
import sys
import time
from pathlib import Path

import pytest

from mcpsync import Client, MultiClient, Timeouts, ToolNotFound
from mcpsync.adapters import ToolAdapter
from tests.conftest import server_command
from tests.helpers import wait_until

pytestmark = pytest.mark.timeout(120)

DEMO = [sys.executable, "-m", "mcpsync.server.demo"]


def _late(seconds: float, argv: list[str]) -> tuple[str, list[str]]:
    """A real server that takes ``seconds`` to start (alive and silent meanwhile, as a first
    ``npx -y`` is while it downloads)."""
    return "sh", ["-c", f"sleep {seconds}; exec {' '.join(shlex.quote(a) for a in argv)}"]


def test_a_late_server_is_listed_as_soon_as_it_answers(caplog: pytest.LogCaptureFixture):
    late = _late(4.0, DEMO)
    clients = {
        "demo": Client.stdio(DEMO[0], DEMO[1:], name="demo", mode="legacy"),
        "late": Client.stdio(*late, name="late", mode="legacy", timeouts=Timeouts(start=60)),
    }
    with caplog.at_level(logging.WARNING, logger="mcpsync.multi"), \
            MultiClient(clients, list_timeout=1.0, relist_after=300.0) as multi:
        began = time.monotonic()
        names = [t.name for t in multi.list_tools()]
        assert names and all(n.startswith("demo__") for n in names)
        assert multi.status()["late"].state == "starting"
        said = [r.getMessage() for r in caplog.records if "late" in r.getMessage()]
        assert any("left out of the tool list: it is still starting" in m for m in said), said
        # a call of one of its tools says so at once (the adapters turn it into a sentence)
        adapter = ToolAdapter(multi)
        reply = adapter.run_openai({"id": "1", "type": "function", "function": {"name": "late__echo", "arguments": "{}"}})
        assert reply["content"] == "tool late__echo is not available yet: its server is still starting; try again shortly"
        # it answers at ~4 s: listed then, not relist_after (300 s) later
        assert wait_until(lambda: "late__echo" in [t.name for t in multi.list_tools()], 30.0)
        assert time.monotonic() - began < 20.0
        assert multi.status()["late"].state == "ok"
        assert multi.call_tool("late__echo", {"message": "hi"}, timeout=30).text == "hi"
        assert any("server late answered" in r.getMessage() for r in caplog.records)
        assert "late__echo" in [t["function"]["name"] for t in adapter.openai()]


def test_a_failed_server_is_said_and_its_tools_get_a_sentence_that_says_so(caplog: pytest.LogCaptureFixture,
                                                                          tmp_path: Path):
    clients = {
        "demo": Client.stdio(DEMO[0], DEMO[1:], name="demo", mode="legacy"),
        "dead": Client.stdio(sys.executable, ["-c", "import sys; sys.exit('cannot open the database')"], name="dead"),
    }
    with caplog.at_level(logging.WARNING, logger="mcpsync.multi"), MultiClient(clients) as multi:
        multi.list_tools()
        multi.list_tools()
        status = multi.status()
        assert status["dead"].state == "error" and status["dead"].error_type == "StartFailed"
        said = [r.getMessage() for r in caplog.records if "dead" in r.getMessage()]
        assert len(said) == 1 and "cannot open the database" in said[0], said  # once, with the reason
        adapter = ToolAdapter(multi)
        reply = adapter.run_openai({"id": "1", "type": "function", "function": {"name": "dead__query", "arguments": "{}"}})
        assert reply["content"].startswith("tool dead__query is unavailable: its server could not be started or reached")
        assert "cannot open the database" in reply["content"]
        with pytest.raises(ToolNotFound) as info:
            multi.call_tool("query", {})  # a bare name: maybe it was the dead server's
        assert info.value.server_state == "failed" and "dead" in str(info.value)


def test_resources_and_prompts_across_servers():
    sdk = server_command("sdk_server.py")
    clients = {
        "demo": Client.stdio(DEMO[0], DEMO[1:], name="demo", mode="legacy"),
        "sdk": Client.stdio(sdk[0], sdk[1:], name="sdk"),
        "dead": Client.stdio("/nonexistent/server", name="dead"),
    }
    with MultiClient(clients) as multi:
        uris = [r.uri for r in multi.list_resources()]
        assert "demo://about" in uris and "test://greeting" in uris
        assert multi.read_resource("test://greeting").contents[0].text == "hello from the SDK server"
        assert "mcpsync demo server" in multi.read_resource("demo://about").contents[0].text
        prompts = [p.name for p in multi.list_prompts()]
        assert "demo__summarize" in prompts and "sdk__review" in prompts
        result = multi.get_prompt("sdk__review", {"code": "x = 1"})
        assert "Please review" in result.messages[0].content.text
