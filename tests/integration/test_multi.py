"""Several servers at once: server-everything + an official-SDK server + a dead one.

Tools from the live servers are listed side by side (namespaced where names collide) and
usable; the dead one is reported, never raised, and never holds the others up.
"""

from __future__ import annotations

import json
import sys
import threading

import jsonschema
import pytest

from mcpsync import Client, RetryPolicy, Timeouts, ToolNotFound
from mcpsync._multi import MultiClient
from mcpsync.adapters import ToolAdapter
from tests.conftest import everything_command, server_command

pytestmark = pytest.mark.npm

FAST = Timeouts(request=10.0, close=1.0)


def _config(tmp_path, **extra) -> str:
    ev = everything_command("stdio")
    sdk = server_command("sdk_server.py")
    servers = {
        "everything": {"command": ev[0], "args": ev[1:], "env": {"MCPSYNC_CFG_TEST": "${MCPSYNC_CFG_UNSET_VALUE:-from-default}"}},
        "sdk": {"command": sdk[0], "args": sdk[1:], "env": {"SDK_GREETING": "${SDK_GREETING:-hello}"}},
        "dead": {"command": "/nonexistent/mcp-server-that-is-not-there"},
        "needs-secret": {"command": sys.executable, "args": ["-c", "pass"], "env": {"TOKEN": "${MCPSYNC_TEST_UNSET_TOKEN}"}},
        "off": {"command": "whatever", "disabled": True},
        **extra,
    }
    path = tmp_path / "mcp.json"
    path.write_text(json.dumps({"mcpServers": servers}))
    return str(path)


@pytest.fixture(scope="module")
def multi(tmp_path_factory):
    path = _config(tmp_path_factory.mktemp("multi"))
    m = MultiClient.from_config(path, namespace="collisions", list_timeout=20.0, timeouts=FAST, per_server={"dead": {"retry": RetryPolicy.NONE}})
    yield m
    m.close()


def test_live_servers_tools_are_listed_and_namespaced_on_collision(multi):
    names = [t.name for t in multi.list_tools()]
    assert multi.status()["sdk"].ok and multi.status()["everything"].ok, multi.status()
    # both offer echo: namespaced; the others keep their own names
    assert "everything__echo" in names and "sdk__echo" in names and "echo" not in names
    assert "get-sum" in names and "add" in names and "word_count" in names
    assert len(names) == len(set(names))
    by_server = multi.tools_by_server()
    assert set(by_server) == {"everything", "sdk"}
    assert {t.name for t in by_server["sdk"]} >= {"add", "echo", "word_count"}


def test_calls_are_routed_by_tool_name(multi):
    assert multi.call_tool("everything__echo", {"message": "hi"}).content[0].text == "Echo: hi"
    assert multi.call_tool("sdk__echo", {"message": "hi"}).content[0].text == "hi"
    assert multi.call_tool("add", {"a": 2, "b": 40}).structured_content == {"result": 42}
    assert "3" in multi.call_tool("get-sum", {"a": 1, "b": 2}).content[0].text
    # a qualified name works for a tool that is not namespaced, too
    assert multi.call_tool("sdk__add", {"a": 1, "b": 1}).structured_content == {"result": 2}
    assert multi.route("everything__get-sum") == ("everything", "get-sum")


def test_expanded_env_reaches_the_server_process(multi):
    env = json.loads(multi.call_tool("get-env", {}).content[0].text)  # server-everything's process env
    assert env["MCPSYNC_CFG_TEST"] == "from-default"  # ${MCPSYNC_CFG_UNSET_VALUE:-from-default}


def test_ambiguous_and_unknown_names(multi):
    with pytest.raises(ToolNotFound, match="offered by several servers: call one of everything__echo, sdk__echo"):
        multi.call_tool("echo", {"message": "x"})
    # (the fixture has a dead and a misconfigured server: the error names them, they may have offered it)
    with pytest.raises(ToolNotFound, match="tool no_such_tool is not listed, and some servers are not ready") as info:
        multi.call_tool("no_such_tool", {})
    assert info.value.server_state == "failed" and set(info.value.data["failed"]) == {"dead", "needs-secret"}


def test_the_dead_and_the_misconfigured_are_reported(multi):
    multi.list_tools()
    status = multi.status()
    assert list(status) == ["everything", "sdk", "dead", "needs-secret", "off"]  # the file's order
    assert status["everything"].state == "ok" and status["everything"].tools >= 10
    assert status["sdk"].state == "ok"
    # a command that cannot run: StartFailed (a ConnectError), at once
    assert status["dead"].state == "error" and status["dead"].error_type == "StartFailed"
    assert "could not start" in status["dead"].error or "did not respond" in status["dead"].error
    assert status["needs-secret"].state == "config-error"
    assert "MCPSYNC_TEST_UNSET_TOKEN is not set" in status["needs-secret"].error
    assert status["off"].state == "disabled"
    assert set(multi.errors) == {"dead", "needs-secret"}


def test_each_server_has_its_own_client(multi):
    ev, sdk = multi.client("everything"), multi.client("sdk")
    assert isinstance(ev, Client) and isinstance(sdk, Client) and ev is not sdk
    assert ev.name == "everything" and sdk.name == "sdk"
    assert ev._session is not sdk._session  # own connections, own pool, own breaker
    with pytest.raises(KeyError):
        multi.client("needs-secret")


def test_a_call_to_the_dead_server_fails_alone(multi):
    with pytest.raises(Exception) as info:
        multi.call_tool("dead__anything", {})
    assert type(info.value).__name__ in ("StartFailed", "ConnectError", "CircuitOpen", "ServerUnavailable")
    assert multi.call_tool("sdk__echo", {"message": "still here"}).content[0].text == "still here"


def test_shared_across_threads(multi):
    errors: list[BaseException] = []
    results: list[str] = []
    lock = threading.Lock()

    def worker(i: int) -> None:
        try:
            for j in range(10):
                if (i + j) % 2:
                    text = multi.call_tool("sdk__echo", {"message": f"{i}-{j}"}).content[0].text
                    expected = f"{i}-{j}"
                else:
                    text = multi.call_tool("everything__echo", {"message": f"{i}-{j}"}).content[0].text
                    expected = f"Echo: {i}-{j}"
                assert text == expected
                with lock:
                    results.append(text)
        except BaseException as exc:  # pragma: no cover - reported below
            errors.append(exc)

    threads = [threading.Thread(target=worker, args=(i,)) for i in range(6)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)
    assert not errors and len(results) == 60


def test_a_slow_server_does_not_hold_up_the_others(multi):
    started, slow_done = threading.Event(), threading.Event()

    def slow() -> None:
        started.set()
        multi.call_tool("sleep_ms", {"ms": 3000})
        slow_done.set()

    t = threading.Thread(target=slow)
    t.start()
    started.wait(5)
    # while the SDK server sleeps, everything answers (ordering, not timing)
    assert multi.call_tool("everything__echo", {"message": "fast"}).content[0].text == "Echo: fast"
    assert not slow_done.is_set()
    t.join(15)
    assert slow_done.is_set()


def test_adapters_over_several_servers(multi):
    adapter = ToolAdapter(multi, fixed=[{"name": "local_calc", "input_schema": {"type": "object"}}])
    tools = adapter.anthropic()
    for t in tools:
        jsonschema.validate(t, {"type": "object", "required": ["name", "input_schema"], "properties": {"name": {"type": "string", "pattern": "^[a-zA-Z0-9_-]{1,64}$"}}})
    names = [t["name"] for t in tools]
    assert names[0] == "local_calc"
    servers = [adapter.resolve(n)[0] for n in names[1:]]
    assert servers == sorted(servers)  # everything's tools, then sdk's
    first = json.dumps(tools)
    for _ in range(100):
        assert json.dumps(adapter.anthropic()) == first
    # a list_changed from a server that leaves its set unchanged changes nothing
    multi.client("sdk")._handlers.notification("notifications/tools/list_changed", None)
    assert json.dumps(adapter.anthropic()) == first
    r = adapter.run_anthropic({"type": "tool_use", "id": "toolu_1", "name": "sdk__echo", "input": {"message": "via adapter"}})
    assert r == {"type": "tool_result", "tool_use_id": "toolu_1", "content": [{"type": "text", "text": "via adapter"}], "is_error": False}
    o = adapter.run_openai({"id": "call_1", "type": "function", "function": {"name": "get-sum", "arguments": '{"a": 2, "b": 3}'}})
    assert o["role"] == "tool" and "5" in o["content"]


def test_a_hanging_server_is_reported_as_timed_out_without_blocking_the_rest():
    """A server that starts but never answers (it reads stdin until EOF, so it cannot outlive us): the listing gives up on it after
    list_timeout and reports it, while the live server's tools are usable."""
    sdk = server_command("sdk_server.py")
    clients = {
        "sdk": Client.stdio(sdk[0], sdk[1:], name="sdk", timeouts=FAST),
        "hangs": Client.stdio(sys.executable, ["-c", "import sys; sys.stdin.read()"], name="hangs", timeouts=FAST),
    }
    with MultiClient(clients, list_timeout=6.0, namespace="always") as m:
        names = [t.name for t in m.list_tools()]
        assert "sdk__add" in names and all(n.startswith("sdk__") for n in names)
        status = m.status()
        assert status["sdk"].ok
        # alive and silent: still starting when the listing's wait (6 s) ran out; its start
        # goes on in the background (it would be listed the moment it answered)
        assert status["hangs"].state == "starting", status["hangs"]
        # later calls do not wait for it again, and a call of its tools says it is starting
        assert m.call_tool("sdk__add", {"a": 1, "b": 2}).structured_content == {"result": 3}
        assert m.status()["hangs"].state == "starting"
        with pytest.raises(ToolNotFound, match="server hangs is still starting") as info:
            m.call_tool("hangs__anything", {})
        assert info.value.server_state == "starting"
