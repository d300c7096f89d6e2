"""MultiClient routing within the call's deadline (issue 31).

A call to a listed server never waits for another server's listing; a server not listed
yet is listed within the call's own timeout. The peers are real processes: a quick stdio
server (raw_server.py) and one that starts but never answers its handshake.
"""

from __future__ import annotations

import sys
import time

import pytest

from mcpsync import Client, ConnectError, RequestTimeout, Timeouts
from mcpsync._multi import MultiClient
from tests.conftest import server_command

pytestmark = pytest.mark.timeout(120)

RAW = server_command("raw_server.py")
HANGS = [sys.executable, "-c", "import sys; sys.stdin.read()"]  # reads until EOF: never outlives the test


def _multi(**options: object) -> MultiClient:
    clients = {
        "t0": Client.stdio(RAW[0], RAW[1:], name="t0", mode="legacy"),
        "hangs": Client.stdio(HANGS[0], HANGS[1:], name="hangs", timeouts=Timeouts(connect=3.0, request=3.0, start=3.0)),
    }
    return MultiClient(clients, list_timeout=15.0, **options)  # type: ignore[arg-type]


def _timed(fn: object, *args: object, **kwargs: object) -> tuple[object, float]:
    started = time.monotonic()
    result = fn(*args, **kwargs)  # type: ignore[operator]
    return result, time.monotonic() - started


def test_a_call_to_a_server_not_listed_yet_waits_for_its_listing_only() -> None:
    with _multi() as m:
        # nothing listed yet: t0's listing is waited for (within the call's 5 s), not the hanging one's 15 s
        result, took = _timed(m.call_tool, "t0__echo", {"message": "first"}, timeout=5)
        assert result.text == "first"  # type: ignore[attr-defined]
        assert took < 5.0, took
        assert m.status()["hangs"].state in ("pending", "error")
        # t0 is listed now: later calls wait for nobody, while the other server still hangs
        for i in range(5):
            result, took = _timed(m.call_tool, "t0__echo", {"message": str(i)}, timeout=2)
            assert result.text == str(i) and took < 2.0, took  # type: ignore[attr-defined]


def test_a_hanging_server_never_slows_calls_to_the_others_after_each_relist() -> None:
    with _multi(relist_after=0.2) as m:
        assert m.call_tool("t0__echo", {"message": "x"}, timeout=5).text == "x"
        deadline = time.monotonic() + 30
        while m.status()["hangs"].state != "error" and time.monotonic() < deadline:
            time.sleep(0.05)  # (its listing fails once its connect gives up, at 3 s)
        assert m.status()["hangs"].state == "error"
        # each call past relist_after starts the failed server's listing again, and does not wait for it
        for i in range(4):
            time.sleep(0.25)
            result, took = _timed(m.call_tool, "t0__echo", {"message": str(i)}, timeout=2)
            assert result.text == str(i) and took < 2.0, took  # type: ignore[attr-defined]


def test_a_call_to_the_hanging_server_ends_within_its_own_timeout() -> None:
    with _multi() as m:
        started = time.monotonic()
        with pytest.raises((RequestTimeout, ConnectError)):
            m.call_tool("hangs__anything", {}, timeout=2)
        assert time.monotonic() - started < 4.0  # (its listing would have had 15 s)
