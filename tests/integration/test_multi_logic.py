"""MultiClient routing and failure isolation with in-memory clients (fast, no processes).

The real-server behaviour is in test_multi.py; these pin the rules: namespacing, routing
of qualified names, listing concurrency, how failed servers are (not) waited for.
"""

from __future__ import annotations

import threading

import pytest

from mcpsync import CallToolResult, ConnectError, TextContent, Tool, ToolNotFound
from mcpsync._multi import MultiClient


class Fake:
    def __init__(self, names, *, fail=None, gate=None):
        self.names = list(names)
        self.fail = fail
        self.gate = gate
        self.lists = 0
        self.calls = []
        self.closed = False
        self.handlers = {}

    def on_notification(self, method, handler):
        self.handlers.setdefault(method, []).append(handler)

    def notify_changed(self):
        for h in self.handlers.get("notifications/tools/list_changed", []):
            h(None)

    def list_tools(self, timeout=None):
        self.lists += 1
        if self.gate is not None:
            self.gate.wait(10)
        if self.fail is not None:
            raise self.fail
        return [Tool(name=n) for n in self.names]

    def call_tool(self, name, arguments=None, **kw):
        self.calls.append(name)
        if name not in self.names:
            raise ToolNotFound(f"Unknown tool: {name}", code=-32602)
        return CallToolResult(content=[TextContent(text=name)])

    def close(self):
        self.closed = True


def test_namespacing_only_on_collision_and_custom_separator():
    a, b = Fake(["echo", "a_only"]), Fake(["echo", "b_only"])
    m = MultiClient({"a": a, "b": b}, separator=".", namespace="collisions")
    assert [t.name for t in m.list_tools()] == ["a.echo", "a_only", "b.echo", "b_only"]
    assert m.call_tool("b.echo").content[0].text == "echo" and b.calls == ["echo"]
    assert m.call_tool("a.a_only").content[0].text == "a_only"  # qualified works too
    always = MultiClient({"a": Fake(["x"]), "b": Fake(["y"])}, namespace="always")
    assert [t.name for t in always.list_tools()] == ["a__x", "b__y"]


def test_exposed_names_stay_unique_when_prefixes_overlap():
    m = MultiClient({"a": Fake(["b__c"]), "a__b": Fake(["c"])}, namespace="always")
    assert [t.name for t in m.list_tools()] == ["a__b__c", "a__b__c__2"]
    assert m.route("a__b__c") == ("a", "b__c")
    assert m.route("a__b__c__2") == ("a__b", "c")


def test_qualified_names_route_by_the_longest_server_prefix():
    m = MultiClient({"a": Fake(["x"]), "a__b": Fake(["y"])})
    assert m.route("a__b__y") == ("a__b", "y") and m.route("a__x") == ("a", "x")


def test_listing_is_concurrent_and_a_slow_server_is_reported_not_waited_for_again():
    gate = threading.Event()
    slow, fast = Fake(["s"], gate=gate), Fake(["f"])
    m = MultiClient({"slow": slow, "fast": fast}, list_timeout=0.3, namespace="collisions")
    try:
        assert [t.name for t in m.list_tools()] == ["f"]
        st = m.status()
        assert st["fast"].ok and st["slow"].state == "starting" and st["slow"].error is None
        for _ in range(20):  # later calls do not wait for the slow server again
            assert m.call_tool("f").content[0].text == "f"
        assert slow.lists == 1
    finally:
        gate.set()
    # its answer, when it comes, is kept
    m.refresh(["slow"], timeout=5)
    assert {t.name for t in m.list_tools()} == {"s", "f"}
    assert m.status()["slow"].ok


def test_a_failed_server_is_retried_only_after_relist_after():
    dead = Fake([], fail=ConnectError("no"))
    m = MultiClient({"dead": dead, "ok": Fake(["t"])}, relist_after=3600, namespace="collisions")
    for _ in range(10):
        m.list_tools()
        m.call_tool("t")
    assert dead.lists == 1  # not once per call
    assert m.status()["dead"].error_type == "ConnectError"
    assert set(m.refresh()) == {"dead"} and dead.lists == 2  # an explicit refresh retries at once
    dead.fail, dead.names = None, ["back"]
    dead.notify_changed()  # it spoke: listed again at the next use
    assert "back" in [t.name for t in m.list_tools()]
    assert m.status()["dead"].ok


def test_list_changed_relists_only_that_server():
    a, b = Fake(["x"]), Fake(["y"])
    m = MultiClient({"a": a, "b": b}, namespace="collisions")
    m.list_tools()
    a.names = ["x", "x2"]
    a.notify_changed()
    assert [t.name for t in m.list_tools()] == ["x", "x2", "y"]
    assert (a.lists, b.lists) == (2, 1)


def test_tool_not_found_from_a_server_invalidates_its_list():
    a = Fake(["gone"])
    m = MultiClient({"a": a})
    m.list_tools()
    a.names = []
    with pytest.raises(ToolNotFound):
        m.call_tool("gone")
    assert [t.name for t in m.list_tools()] == [] and a.lists == 2


def test_close_closes_every_client_once_and_refuses_more():
    a, b = Fake(["x"]), Fake(["y"])
    with MultiClient({"a": a, "b": b}) as m:
        m.list_tools()
    assert a.closed and b.closed and m.closed
    with pytest.raises(Exception, match="closed"):
        m.refresh()
    borrowed = Fake(["z"])
    MultiClient({"z": borrowed}, owns_clients=False).close()
    assert not borrowed.closed


def test_thread_safe_routing_under_list_changes():
    a, b = Fake(["x"]), Fake(["y"])
    m = MultiClient({"a": a, "b": b}, namespace="collisions")
    errors = []

    def caller():
        try:
            for _ in range(200):
                assert m.call_tool("y").content[0].text == "y"
        except BaseException as exc:  # pragma: no cover
            errors.append(exc)

    def changer():
        for _ in range(50):
            a.notify_changed()

    threads = [threading.Thread(target=caller) for _ in range(4)] + [threading.Thread(target=changer)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(30)
    assert not errors


def test_bad_arguments():
    with pytest.raises(ValueError):
        MultiClient({}, separator="")
    with pytest.raises(ValueError):
        MultiClient({}, namespace="sometimes")  # type: ignore[arg-type]
    with pytest.raises(ValueError):
        MultiClient({}, list_timeout=0)
