"""A change announced while a listing is in flight is never lost (issue 31).

A real stdio server (tests/servers/churn_server.py) changes its tool list every 10 ms
(``notifications/tools/list_changed`` after each change, 2,000 tools a listing), and one more
time during every listing, between building the answer and sending it (the last change always
comes so), while four threads list the tools of one Client over and over and four call a tool.
A listing that began before a change must not be kept over it: once the last change was
announced and handled, the next listing is fresh. (Before the fix: stale in every run.)
"""

from __future__ import annotations

import threading

import pytest

from mcpsync import Client
from tests.conftest import server_command
from tests.helpers import wait_until

pytestmark = pytest.mark.timeout(180)


@pytest.mark.parametrize("run", range(3))
def test_a_tool_list_that_changes_while_it_is_listed_ends_fresh(run: int) -> None:
    cmd = server_command("churn_server.py")
    with Client.stdio(cmd[0], cmd[1:], mode="legacy") as c:
        handled = [0]
        changed = threading.Event()

        def on_change(_params: object) -> None:  # after the client's own (the cache's) handling
            handled[0] += 1
            changed.set()

        c.on_notification("notifications/tools/list_changed", on_change)
        assert "v0" in {t.name for t in c.list_tools()}
        c.call_tool("churn", {"count": 300, "every_ms": 10})
        stop = threading.Event()
        listings = [0]
        errors: list[BaseException] = []

        def lister(i: int) -> None:
            while not stop.is_set():
                try:
                    if i % 2:  # half of them call a tool between listings: a reader is always about
                        c.call_tool("echo", {"message": "x"}, timeout=30)
                    c.list_tools(timeout=30)
                    listings[0] += 1
                except Exception as exc:  # noqa: BLE001
                    errors.append(exc)
                    return

        threads = [threading.Thread(target=lister, args=(i,), daemon=True) for i in range(8)]
        for t in threads:
            t.start()
        try:
            assert wait_until(lambda: c.call_tool("version").structured_content["left"] == 0, 60, interval=0.05)
        finally:
            stop.set()
            for t in threads:
                t.join(60)
        assert not errors, errors
        final = c.call_tool("version").structured_content["version"]
        assert final == 300
        # the version answer came after every change's notification: wait for the last to be handled
        assert wait_until(lambda: handled[0] >= final, 10, event=changed), handled
        names = {t.name for t in c.list_tools()}  # one listing after the last change
        assert f"v{final}" in names, sorted(n for n in names if n.startswith("v"))
        assert listings[0] > 8  # the threads did list while it changed
