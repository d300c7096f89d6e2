"""Interpreter exit with open clients: no hang, no child process left behind.

A real Python subprocess opens clients on live stdio servers, prints the servers' pids
and exits without closing anything: by falling off the end, by an uncaught exception,
by ``sys.exit``, with a call still in flight on a daemon thread. Servers that ignore EOF
on stdin (``--linger``) or also SIGTERM (``--ignore-term``) must be ended too. The
exit is bounded by a timeout (a hang fails the test); afterwards every server pid is gone.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap

import pytest

from tests.conftest import ROOT, SERVERS
from tests.servers.chaos_support import kill, wait_gone

pytestmark = pytest.mark.timeout(120)

EXIT_BOUND = 30.0

SCRIPT = textwrap.dedent(
    """
    import json, sys, threading, time
    from mcpsync import Client, PoolLimits, Timeouts
    from tests.helpers import wait_until
    from tests.servers.chaos_support import pool_pids

    how, server_args = sys.argv[1], sys.argv[2:]
    clients = []
    for i in range(2):
        c = Client.stdio(sys.executable, [{server!r}, *server_args], mode="legacy", name=f"c{{i}}",
                         pool=PoolLimits(min=2, max=2), timeouts=Timeouts(close=0.5))
        # two concurrent calls: the pool opens both of its connections
        ts = [threading.Thread(target=c.call_tool, args=("sleep", {{"seconds": 0.2}})) for _ in range(2)]
        for t in ts: t.start()
        for t in ts: t.join(30)
        assert c.call_tool("echo", {{"key": "k"}}).text == "k"
        clients.append(c)
    pids = [p for c in clients for p in pool_pids(c)]
    if how == "inflight":
        started = threading.Event()
        def slow():
            started.set()
            try:
                clients[0].call_tool("sleep", {{"seconds": 60}}, timeout=90)
            except Exception:
                pass
        threading.Thread(target=slow, daemon=True).start()
        started.wait(10)
        wait_until(lambda: clients[0].pool_stats().in_use == 1, 10)
    print("PIDS " + json.dumps(pids), flush=True)
    if how == "raise":
        raise RuntimeError("the harness crashed")
    if how == "sys-exit":
        sys.exit(3)
    """
).format(server=str(SERVERS / "chaos_server.py"))

EXPECTED_CODE = {"fall-off-end": 0, "raise": 1, "sys-exit": 3, "inflight": 0}


SERVER_KINDS = {"plain-server": [], "ignores-eof": ["--linger"], "ignores-eof-and-sigterm": ["--linger", "--ignore-term"]}
CASES = [(how, "plain-server") for how in EXPECTED_CODE] + [
    (how, kind) for how in ("fall-off-end", "inflight") for kind in ("ignores-eof", "ignores-eof-and-sigterm")
]


@pytest.mark.parametrize(("how", "server_args"), [(h, SERVER_KINDS[k]) for h, k in CASES],
                         ids=[f"{h}-{k}" for h, k in CASES])
def test_exit_without_close_leaves_no_servers(how: str, server_args: list[str]) -> None:
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")])}
    proc = subprocess.Popen(
        [sys.executable, "-c", SCRIPT, how, *server_args],
        cwd=ROOT, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, start_new_session=True,
    )
    try:
        out, err = proc.communicate(timeout=EXIT_BOUND)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, 9)
        out, err = proc.communicate(timeout=10)
        pytest.fail(f"the interpreter did not exit within {EXIT_BOUND} s ({how}, {server_args}): {err.decode()[-2000:]}")
    lines = [line for line in out.decode().splitlines() if line.startswith("PIDS ")]
    assert lines, f"the script failed before reporting pids: {err.decode()[-2000:]}"
    pids = json.loads(lines[0][5:])
    assert len(pids) == 4, pids  # two clients, two connections each
    assert proc.returncode == EXPECTED_CODE[how], err.decode()[-2000:]
    if how == "raise":
        assert b"the harness crashed" in err
    left = wait_gone(pids, 2.0)
    for pid in left:
        kill(pid)
    assert not left, f"server processes outlived the interpreter ({how}, {server_args}): {left}"
