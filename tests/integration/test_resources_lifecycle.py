"""ResourceManager over real servers: every transition of the lifecycle, observers, TTL.

* the official-SDK protocol server (``tests/servers/sdk_protocol_server.py``, stdio) in
  both eras: legacy ``resources/subscribe`` and modern ``subscriptions/listen``; its
  tool ``touch(uri)`` sends ``notifications/resources/updated``;
* ``tests/servers/counting_server.py`` (legacy push; its ``stats`` tool proves reads from
  the cache never reach the server), and in the modern era, where it has no
  ``subscriptions/listen``: a server refusing subscriptions gets a TTL-driven lifecycle.

The manager's clock is a fake one, so TTL expiry needs no sleeping. Subscriptions need
one server process per client: SINGLE pools.
"""

from __future__ import annotations

import threading

import pytest

from mcpsync import Client, PoolLimits
from mcpsync._resources import ResourceManager, ResourceState
from tests.conftest import server_command

pytestmark = pytest.mark.timeout(90)

S = ResourceState


class Clock:
    def __init__(self) -> None:
        self.now = 500.0

    def __call__(self) -> float:
        return self.now


class Recorder:
    """Every transition, and an event per wanted (uri, new state)."""

    def __init__(self) -> None:
        self.seen: list[tuple[str, ResourceState, ResourceState, str]] = []
        self.cond = threading.Condition()

    def __call__(self, uri, old, new, reason) -> None:
        with self.cond:
            self.seen.append((uri, old, new, reason))
            self.cond.notify_all()

    def wait_for(self, uri: str, state: ResourceState, count: int = 1, timeout: float = 15.0) -> bool:
        with self.cond:
            return self.cond.wait_for(lambda: sum(1 for u, _, n, _ in self.seen if u == uri and n is state) >= count, timeout)

    def path(self, uri: str) -> list[ResourceState]:
        out: list[ResourceState] = []
        for u, old, new, _ in self.seen:
            if u == uri:
                if not out:
                    out.append(old)
                out.append(new)
        return out


def sdk_client(mode: str) -> Client:
    cmd = server_command("sdk_protocol_server.py")
    return Client.stdio(cmd[0], cmd[1:], mode=mode, pool=PoolLimits.SINGLE, name="sdk")


def counting_client(mode: str, *args: str) -> Client:
    cmd = server_command("counting_server.py", *args)
    return Client.stdio(cmd[0], cmd[1:], mode=mode, pool=PoolLimits.SINGLE, name="counting")


@pytest.mark.parametrize("mode", ["legacy", "modern"])
def test_every_transition_against_the_sdk_server(mode):
    uri = "test://greeting"
    clock = Clock()
    rec = Recorder()
    with sdk_client(mode) as client, ResourceManager(client, ttl=30, clock=clock, on_transition=rec) as rm:
        listed = [r.uri for r in rm.discover_resources()]
        assert uri in listed
        assert rm.state(uri) is S.UNKNOWN

        got: list[str] = []
        also: list[str] = []
        two = threading.Event()

        def broken(u: str) -> None:
            raise RuntimeError("a broken observer")

        def good(u: str) -> None:
            got.append(u)
            if len(also) >= 1:
                two.set()

        def other(u: str) -> None:
            also.append(u)
            if got:
                two.set()

        subs = [rm.on_update(uri, broken), rm.on_update(uri, good), rm.on_update(uri, other)]
        assert rm.state(uri) is S.SUBSCRIBED and rm.info(uri).push
        first = rm.read(uri)
        assert "hello" in first.text
        assert rm.state(uri) is S.CACHED
        assert rm.read(uri) is first  # within the TTL: from the cache
        assert rm.info(uri).fetches == 1 and rm.info(uri).hits == 1

        client.call_tool("touch", {"uri": uri})  # a server update
        assert rec.wait_for(uri, S.STALE), "no update reached the manager"
        assert two.wait(10)
        assert got == [uri] and also == [uri]  # the raising observer harmed no other
        assert rm.state(uri) is S.STALE

        rm.read(uri)  # re-fetched
        assert rm.state(uri) is S.CACHED and rm.info(uri).fetches == 2

        clock.now += 31  # the TTL runs out
        assert rm.state(uri) is S.STALE
        rm.read(uri)
        assert rm.info(uri).fetches == 3

        for s in subs:
            rm.unsubscribe(s)
        assert rm.state(uri) is S.UNSUBSCRIBED
        client.call_tool("touch", {"uri": uri})
        client.read_resource(uri)  # a round trip after the touch: no observer is told
        assert got == [uri]

        rm.read(uri)  # first access again: subscribes, fetches
        assert rm.state(uri) is S.CACHED
    assert rm.state(uri) is S.UNSUBSCRIBED  # session end
    assert rec.path(uri) == [
        S.UNKNOWN, S.SUBSCRIBED, S.CACHED, S.STALE, S.CACHED, S.STALE, S.CACHED,
        S.UNSUBSCRIBED, S.SUBSCRIBED, S.CACHED, S.UNSUBSCRIBED,
    ]
    reasons = [r for u, _, _, r in rec.seen if u == uri]
    assert reasons[:4] == ["first access", "fetched", "server update", "fetched"]
    assert "ttl" in reasons and "session end" in reasons


def test_cached_reads_never_reach_the_server():
    uri = "count://a"
    clock = Clock()
    with counting_client("legacy") as client, ResourceManager(client, ttl=60, clock=clock) as rm:
        rm.discover_resources()
        assert rm.read(uri).text == "count://a v1"
        for _ in range(20):
            assert rm.read(uri).text == "count://a v1"
        updated = threading.Event()
        rm.on_update(uri, lambda u: updated.set())
        client.call_tool("touch", {"uri": uri})  # version 2, and an update
        assert updated.wait(10)
        assert rm.state(uri) is S.STALE
        assert rm.read(uri).text == "count://a v2"
        counts = client.call_tool("stats").structured_content
        assert counts["resources/read"] == 2
        assert counts["resources/subscribe"] == 1
        assert rm.info(uri).hits == 20

        # a reconnection may have lost updates: cached entries go stale
        assert rm.reconnected("counting") == 1
        assert rm.state(uri) is S.STALE


def test_concurrent_readers_share_one_fetch():
    uri = "count://b"
    with counting_client("legacy") as client, ResourceManager(client) as rm:
        rm.discover_resources()
        barrier = threading.Barrier(8)
        out: list[str] = []

        def reader() -> None:
            barrier.wait(10)
            out.append(rm.read(uri).text)

        ts = [threading.Thread(target=reader) for _ in range(8)]
        for t in ts:
            t.start()
        for t in ts:
            t.join(30)
        assert out == ["count://b v1"] * 8
        assert client.call_tool("stats").structured_content["resources/read"] == 1


def test_server_without_subscriptions_gets_a_ttl_lifecycle():
    """Modern era against a server with no subscriptions/listen: reads still cache and
    expire (the server's ttlMs of 5 s is shorter than the manager's 60 s)."""
    uri = "count://a"
    clock = Clock()
    rec = Recorder()
    with counting_client("modern", "--ttl-ms", "5000") as client, \
            ResourceManager(client, ttl=60, clock=clock, on_transition=rec) as rm:
        assert rm.read(uri).text == "count://a v1"
        info = rm.info(uri)
        assert info.state is S.CACHED and not info.push
        assert info.expires_at == pytest.approx(clock.now + 5)
        rm.read(uri)
        clock.now += 5
        assert rm.state(uri) is S.STALE
        rm.read(uri)
        # the manager fetched again (on its fake clock); the client's own result cache may
        # answer that fetch, since the server's 5 s have not passed in real time
        assert rm.info(uri).fetches == 2
        assert client.call_tool("stats").structured_content["resources/read"] in (1, 2)
    assert rec.path(uri) == [S.UNKNOWN, S.SUBSCRIBED, S.CACHED, S.STALE, S.CACHED, S.UNSUBSCRIBED]


def test_survives_reconnection():
    """The server process dies; the client reconnects and re-subscribes by itself; the
    manager's observers keep hearing updates, and ``reconnected()`` (the client's hook
    for it) makes what was cached STALE, so the next read fetches from the new process."""
    uri = "count://a"
    with counting_client("legacy") as client, ResourceManager(client) as rm:
        told = threading.Event()
        rm.on_update(uri, lambda u: told.set())
        assert rm.read(uri).text == "count://a v1"
        client.call_tool("touch", {"uri": uri})  # v2 in the old process
        assert told.wait(10)
        assert rm.read(uri).text == "count://a v2"
        told.clear()
        with pytest.raises(Exception):
            client.call_tool("exit", timeout=5)
        assert client.call_tool("echo", {"message": "back"}, retry_safe=True).text == "back"
        assert rm.reconnected() == 1
        assert rm.state(uri) is S.STALE
        assert rm.read(uri).text == "count://a v1"  # a fresh process: fetched again
        # the client restores subscriptions on its worker, after the new connection is
        # first used for session state; wait (bounded) until the new process has it
        for _ in range(200):
            if client.call_tool("stats").structured_content.get("resources/subscribe", 0) >= 1:
                break
            threading.Event().wait(0.025)
        else:
            pytest.fail("the subscription was not restored on the new connection")
        client.call_tool("touch", {"uri": uri})
        assert told.wait(10), "the subscription did not survive the reconnection"
        assert rm.state(uri) is S.STALE
        assert rm.read(uri).text == "count://a v2"
