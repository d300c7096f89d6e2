"""Many threads hammering one shared Client: every answer reaches the thread that asked."""

from __future__ import annotations

import threading

import pytest

from mcpsync import Client
from tests.conftest import everything_command, server_command

pytestmark = pytest.mark.timeout(180)


def hammer(client: Client, n_threads: int, n_calls: int, tool: str, key: str, expect) -> None:
    errors: list[str] = []
    counts = [0] * n_threads
    start = threading.Barrier(n_threads)

    def worker(t: int) -> None:
        start.wait(10)
        for i in range(n_calls):
            msg = f"t{t}-c{i}"
            try:
                r = client.call_tool(tool, {key: msg}, timeout=60)
            except Exception as exc:  # noqa: BLE001 - recorded and asserted below
                errors.append(f"{msg}: {exc!r}")
                continue
            if r.text != expect(msg):
                errors.append(f"{msg}: got {r.text!r}")
            else:
                counts[t] += 1

    threads = [threading.Thread(target=worker, args=(t,), name=f"hammer-{t}") for t in range(n_threads)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(150)
    assert not [t for t in threads if t.is_alive()], "a caller never returned"
    assert not errors, errors[:5]
    assert counts == [n_calls] * n_threads


@pytest.mark.parametrize("mode", ["legacy", "modern"])
def test_32_threads_x_200_calls_on_one_client(mode):
    cmd = server_command("raw_server.py")
    with Client.stdio(cmd[0], cmd[1:], mode=mode) as c:
        hammer(c, 32, 200, "echo", "message", lambda m: m)
        assert not c._primary_connection().channel._pending
        assert c._primary_connection().channel.stats["dropped"] == 0


def test_16_threads_against_server_everything():
    cmd = everything_command("stdio")
    with Client.stdio(cmd[0], cmd[1:]) as c:
        hammer(c, 16, 50, "echo", "message", lambda m: f"Echo: {m}")
