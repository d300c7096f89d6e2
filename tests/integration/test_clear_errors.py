"""Errors say what happened, in the caller's terms (issue 31, defect 9).

Out of descriptors (``ulimit -n``), a pool that cannot start more stdio servers says "Too
many open files" (the reason its background connect keeps failing), and each call still
ends within its own timeout; a timeout names the caller's seconds (``timeout=2`` says
2 s), not what was left of them after waiting for a connection or a retry.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap

import pytest

from tests.conftest import ROOT, SERVERS

pytestmark = pytest.mark.timeout(120)

SCRIPT = textwrap.dedent(
    """
    import json, resource, sys, threading, time
    from mcpsync import Client, PoolLimits
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    resource.setrlimit(resource.RLIMIT_NOFILE, (24, hard))  # room for about two stdio servers
    c = Client.stdio(sys.executable, [{server!r}], mode="legacy", pool=PoolLimits(min=1, max=8, max_in_flight=1))
    c.call_tool("echo", {{"message": "up"}})
    outcomes = []
    def call():
        started = time.monotonic()
        try:
            c.call_tool("sleep", {{"seconds": 3}}, timeout=2)
            outcomes.append(["ok", time.monotonic() - started, ""])
        except Exception as exc:
            outcomes.append([type(exc).__name__, time.monotonic() - started, str(exc)])
    threads = [threading.Thread(target=call) for _ in range(8)]
    for t in threads: t.start()
    for t in threads: t.join(30)
    c.close()
    print(json.dumps(outcomes))
    """
).format(server=str(SERVERS / "raw_server.py"))


def test_out_of_descriptors_is_named_and_timeouts_are_the_callers() -> None:
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")])}
    done = subprocess.run([sys.executable, "-c", SCRIPT], cwd=ROOT, env=env, capture_output=True, text=True, timeout=90)
    assert done.returncode == 0, done.stderr[-3000:]
    outcomes = json.loads(done.stdout.strip().splitlines()[-1])
    assert len(outcomes) == 8
    for kind, took, message in outcomes:
        assert took < 4.0, (kind, took, message)  # each within its 2 s (plus a slow machine's margin)
        if kind == "RequestTimeout" and "within" in message:
            assert "within the call's 2 s" in message or "within 2 s" in message, message
    starts = [m for kind, _, m in outcomes if kind == "ConnectError"]
    assert starts, outcomes  # some calls needed a server that could not be started
    for message in starts:
        assert "Too many open files" in message, message
