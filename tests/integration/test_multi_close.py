"""MultiClient.close() closes its servers in parallel, bounded: eight servers that ignore
EOF on stdin and SIGTERM (each must wait out both polite steps, then be killed) close in
about the time of one, and leave no process and no mcpsync thread behind."""

from __future__ import annotations

import os
import threading
import time

import pytest

from mcpsync import Client
from mcpsync._multi import MultiClient
from tests.conftest import server_command
from tests.helpers import wait_until

pytestmark = pytest.mark.timeout(120)


def _mcpsync_threads() -> set[threading.Thread]:
    # not the process-wide spawner, which lives as long as the process (mcpsync/transports/_spawn.py)
    return {t for t in threading.enumerate() if t.name.startswith("mcpsync") and t.name != "mcpsync-spawner" and t.is_alive()}


def test_eight_stubborn_servers_close_in_parallel_and_leave_nothing_behind():
    before = _mcpsync_threads()
    cmd = server_command("stdio_faults.py", "--ignore-term", "--linger")
    clients = {f"stubborn{i}": Client.stdio(cmd[0], cmd[1:], name=f"stubborn{i}", mode="legacy") for i in range(8)}
    multi = MultiClient(clients)
    pids = []
    try:
        for name in clients:
            pids.append(multi.client(name).call_tool("pid", timeout=30).structured_content["pid"])
    except BaseException:
        multi.close()
        raise
    assert len(set(pids)) == 8
    started = time.monotonic()
    multi.close()
    elapsed = time.monotonic() - started
    # one server takes ~4 s (2 s after closing stdin, 2 s after SIGTERM, then SIGKILL);
    # one after the other, eight took 32 s
    assert elapsed < 15.0, elapsed
    for pid in pids:
        with pytest.raises(ProcessLookupError):
            os.kill(pid, 0)  # killed and reaped: not even a zombie is left
    # the threads of these eight clients (other tests' clients may still be winding down)
    suffixes = tuple(f"-{pid}" for pid in pids)

    def left() -> list[str]:
        return sorted(
            t.name for t in _mcpsync_threads() - before if "stubborn" in t.name or t.name.endswith(suffixes)
        )

    assert wait_until(lambda: not left(), 5.0), left()  # a thread told to stop may take a moment to end
    multi.close()  # idempotent
