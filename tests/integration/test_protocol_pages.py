"""Pagination and result caching hints against an official-SDK server (tests/servers/sdk_pages_server.py)."""

from __future__ import annotations

import threading

import pytest

from mcpsync import Client, PoolLimits
from tests.conftest import server_command
from tests.helpers import scripted_server, wait_until

pytestmark = pytest.mark.timeout(60)


def _client(mode, *args):
    cmd = server_command("sdk_pages_server.py", *args)
    # one process: the read counter and the announced changes live in it
    return Client.stdio(cmd[0], cmd[1:], mode=mode, pool=PoolLimits.SINGLE)


@pytest.mark.parametrize("mode", ["modern", "legacy"])
def test_pagination_followed(mode):
    with _client(mode) as c:
        assert [r.uri for r in c.list_resources()] == [f"page://r/{i}" for i in range(5)]
        assert [t.uri_template for t in c.list_resource_templates()] == [f"page://t{i}/{{x}}" for i in range(3)]
        assert [p.name for p in c.list_prompts()] == ["p0", "p1", "p2"]


def test_modern_ttl_honoured_and_private_entries_kept_per_credential():
    with _client("modern") as c:
        first = c.read_resource("count://reads")
        assert first.ttl_ms == 60_000 and first.cache_scope == "private"
        assert c.read_resource("count://reads").text == first.text  # from the cache
        c._reads.credential = "another-user"  # another credential: a private entry is not shared with it
        assert int(c.read_resource("count://reads").text) == int(first.text) + 1
        assert int(c.read_resource("count://reads", refresh=True).text) == int(first.text) + 2
        c.cache_results = False
        assert int(c.read_resource("count://reads").text) == int(first.text) + 3


def test_legacy_results_not_cached():
    with _client("legacy") as c:
        a = int(c.read_resource("count://reads").text)
        assert int(c.read_resource("count://reads").text) == a + 1


@pytest.mark.parametrize("mode", ["modern", "legacy"])
def test_list_changed_invalidates(mode):
    with _client(mode) as c:
        changed = threading.Event()
        c.on_list_changed("prompts", lambda kind: changed.set())
        assert len(c.list_prompts()) == 3
        assert len(c.list_prompts()) == 3  # cached in the modern era (public, 60 s)
        if mode == "modern":  # registered before connecting: the listen stream opens after the handshake
            assert wait_until(lambda: c.diagnostics().listen_acks, 10)
        assert c.call_tool("bump", {}).text == "bumped"
        assert changed.wait(10)
        assert [p.name for p in c.list_prompts()][-1] == "p3"


@pytest.mark.parametrize("mode", ["modern", "legacy"])
def test_subscribe_refused_leaves_client_working(mode):
    """No subscriptions/listen (modern) / no resources/subscribe (legacy): subscribe raises
    the server's error, nothing stays registered, and the client keeps working."""
    from mcpsync import RemoteError

    with _client(mode, "--no-listen") as c:
        c.connect()
        with pytest.raises(RemoteError) as info:
            c.subscribe("count://reads", lambda u: None)
        assert info.value.code == -32601
        assert not c.diagnostics().subscriptions
        if mode == "modern":
            with pytest.raises(RemoteError):
                c.on_list_changed("prompts", lambda k: None)
            assert "prompts" not in c.diagnostics().list_watches
        assert c.read_resource("count://reads").text


_LOOPING_PAGES = r'''
KEYS = {"tasks/list": "tasks", "tools/list": "tools", "prompts/list": "prompts", "resources/list": "resources"}


def answer(method, params):
    if method in KEYS:
        return {KEYS[method]: [], "nextCursor": "again"}  # the same cursor for ever: a broken server
    return None
'''


@pytest.mark.parametrize("listing", ["list_tools", "list_prompts", "list_resources", "list_tasks"])
def test_a_repeated_cursor_ends_every_listing(tmp_path, listing):
    """One pagination loop for every list method: a server that repeats its cursor gets a
    ProtocolError, never an endless loop (tasks/list had no such guard)."""
    from mcpsync import ProtocolError

    server = scripted_server(tmp_path, _LOOPING_PAGES, name="loops", capabilities={"tools": {}, "tasks": {"list": {}}})
    with Client.stdio(*server, mode="legacy") as client:
        with pytest.raises(ProtocolError, match="repeated the .* cursor 'again'"):
            getattr(client, listing)()
