"""ResourceManager against @modelcontextprotocol/server-everything (legacy push over stdio).

Updates arrive after the tool ``toggle-subscriber-updates`` (every 5 s, for every
subscribed URI of the session); waits are bounded.
"""

from __future__ import annotations

import threading

import pytest

from mcpsync import Client, PoolLimits
from mcpsync._resources import ResourceManager, ResourceState
from tests.conftest import everything_command

pytestmark = [pytest.mark.timeout(90), pytest.mark.npm]

S = ResourceState
DOC = "demo://resource/static/document/architecture.md"


@pytest.fixture(scope="module")
def everything():
    cmd = everything_command("stdio")
    with Client.stdio(cmd[0], cmd[1:], pool=PoolLimits.SINGLE, name="everything") as c:
        yield c


def test_lifecycle_with_pushed_updates(everything):
    seen: list[tuple[str, ResourceState, ResourceState, str]] = []
    lock = threading.Lock()

    def on_transition(uri, old, new, reason):
        with lock:
            seen.append((uri, old, new, reason))

    rm = ResourceManager(everything, on_transition=on_transition)
    try:
        uris = [r.uri for r in rm.discover_resources()]
        assert DOC in uris
        assert all(rm.state(u) is S.UNKNOWN for u in uris)

        text = rm.read(DOC).text
        assert text and rm.state(DOC) is S.CACHED
        assert rm.read(DOC).text == text and rm.info(DOC).fetches == 1

        told: dict[str, threading.Event] = {"a": threading.Event(), "b": threading.Event()}

        def broken(_u: str) -> None:
            raise RuntimeError("a broken observer")

        subs = [
            rm.on_update(DOC, broken),
            rm.on_update(DOC, lambda u: told["a"].set()),
            rm.on_update(DOC, lambda u: told["b"].set()),
        ]
        assert not everything.call_tool("toggle-subscriber-updates", {}).is_error
        try:
            assert told["a"].wait(20) and told["b"].wait(20), "no notifications/resources/updated"
        finally:
            everything.call_tool("toggle-subscriber-updates", {})
        assert rm.info(DOC).updates >= 1
        assert rm.state(DOC) is S.STALE
        assert rm.read(DOC).text
        assert rm.state(DOC) in (S.CACHED, S.STALE)  # another update may have landed already
        assert rm.info(DOC).fetches == 2

        for s in subs:
            s.close()
        assert rm.state(DOC) is S.UNSUBSCRIBED
    finally:
        rm.close()
    path = [(old, new) for u, old, new, _ in seen if u == DOC]
    assert path[:4] == [(S.UNKNOWN, S.SUBSCRIBED), (S.SUBSCRIBED, S.CACHED), (S.CACHED, S.STALE), (S.STALE, S.CACHED)]
    assert path[-1][1] is S.UNSUBSCRIBED
