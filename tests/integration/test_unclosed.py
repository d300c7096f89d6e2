"""A Client nobody closed is collected and cleans up after itself (issue 31, defect 7).

Its threads (a connection's reader, the pool's upkeep, the worker) must not keep it alive;
once it is unreachable, a ResourceWarning says it was never closed (as subprocess.Popen
does), its server ends, its pipes close and its threads stop. Real peers: a stdio server
(raw_server.py) in both eras and the SDK's Streamable HTTP server.
"""

from __future__ import annotations

import gc
import os
import threading
import weakref
from typing import Callable

import pytest

from mcpsync import Client
from tests.conftest import server_command
from tests.helpers import wait_until
from tests.servers.chaos_support import is_gone
from tests.servers.http_support import free_port, run_server, sdk_server_argv

pytestmark = pytest.mark.timeout(90)

RAW = server_command("raw_server.py")


def _fds() -> int:
    return len(os.listdir("/proc/self/fd"))


def _client_threads(before: set[threading.Thread]) -> list[str]:
    # (the process-wide spawner thread is no client's)
    return [t.name for t in threading.enumerate() if t not in before and t.name != "mcpsync-spawner"]


def _collected(ref: "weakref.ref[Client]") -> bool:
    gc.collect()
    return ref() is None


def _forget(make: Callable[[], Client]) -> tuple["weakref.ref[Client]", tuple[int, ...]]:
    c = make()
    assert c.call_tool("echo", {"message": "hi"}).text
    c.list_tools()
    return weakref.ref(c), c.diagnostics().pids


@pytest.mark.parametrize("mode", ["legacy", "modern"])
def test_an_unclosed_stdio_client_is_collected_and_ends_its_server(mode: str) -> None:
    with Client.stdio(RAW[0], RAW[1:], mode=mode) as warm:  # process-wide parts made once (the
        warm.call_tool("echo", {"message": "hi"})  # spawner thread, the groups' watchdog), not counted
    threads, fds = set(threading.enumerate()), _fds()
    with pytest.warns(ResourceWarning, match="never closed"):
        ref, pids = _forget(lambda: Client.stdio(RAW[0], RAW[1:], mode=mode))  # type: ignore[arg-type]
        # (work the client started on its own, e.g. restoring listens at the first connect, may
        # hold it while it runs: no longer)
        assert wait_until(lambda: _collected(ref), 10), "the client is still held"
    assert pids and wait_until(lambda: all(is_gone(p) for p in pids), 10), pids
    assert wait_until(lambda: not _client_threads(threads), 10), _client_threads(threads)
    assert wait_until(lambda: _fds() <= fds, 10), (fds, _fds())


@pytest.mark.parametrize("mode", ["legacy", "modern"])
def test_an_unclosed_http_client_is_collected_and_stops_its_threads(mode: str) -> None:
    port = free_port()
    with run_server(sdk_server_argv(port), port):
        url = f"http://127.0.0.1:{port}/mcp"
        threads = set(threading.enumerate())
        with pytest.warns(ResourceWarning, match="never closed"):
            ref, _ = _forget(lambda: Client.http(url, mode=mode))  # type: ignore[arg-type]
            assert wait_until(lambda: _collected(ref), 10), "the client is still held"
        assert wait_until(lambda: not _client_threads(threads), 10), _client_threads(threads)


def test_a_closed_client_is_collected_without_a_warning() -> None:
    import warnings

    with warnings.catch_warnings():
        warnings.simplefilter("error", ResourceWarning)

        def closed() -> "weakref.ref[Client]":
            with Client.stdio(RAW[0], RAW[1:], mode="legacy") as c:
                assert c.call_tool("echo", {"message": "hi"}).text == "hi"
            return weakref.ref(c)

        ref = closed()
        gc.collect()
    assert ref() is None
