"""``close()`` gives back every file descriptor at once, not when the garbage collector
gets round to the objects: 50 open/call/close cycles with the collector off leave this
process's descriptor count where it started (real stdio servers, a real HTTP server)."""

from __future__ import annotations

import gc
import os
import sys
from typing import Callable, Iterator

import pytest

import tests.servers.http_support as hs
from mcpsync import Client

pytestmark = [
    pytest.mark.timeout(300),
    pytest.mark.skipif(not os.path.isdir("/proc/self/fd"), reason="counts /proc/self/fd"),
]

CYCLES = 50


def _fds() -> dict[int, str]:
    out = {}
    for name in os.listdir("/proc/self/fd"):
        try:
            out[int(name)] = os.readlink(f"/proc/self/fd/{name}")
        except OSError:
            pass  # the listing's own descriptor, closed meanwhile
    return out


def _cycles(make: Callable[[], Client]) -> list[str]:
    """The descriptors left open after CYCLES open/call/close cycles (after one warm-up
    cycle: process-wide things such as the watchdog's pipe are made once)."""
    client = make()
    client.list_tools(timeout=30)
    client.close()
    was = gc.isenabled()
    gc.disable()
    try:
        before = _fds()
        for _ in range(CYCLES):
            client = make()
            client.list_tools(timeout=30)
            client.close()
        after = _fds()
    finally:
        if was:
            gc.enable()
    return sorted(v for k, v in after.items() if before.get(k) != v)


@pytest.mark.parametrize("mode", ["legacy", "modern"])
def test_stdio_close_gives_back_every_descriptor(mode: str):
    left = _cycles(lambda: Client.stdio(sys.executable, ["-m", "mcpsync.server.demo"], mode=mode, name="demo"))
    assert left == [], f"{len(left)} descriptors left open after {CYCLES} cycles: {left[:6]}"


@pytest.fixture(scope="module")
def http_server() -> Iterator[str]:
    port = hs.free_port()
    with hs.run_server(hs.sdk_server_argv(port), port):
        yield f"http://127.0.0.1:{port}/mcp"


def test_http_close_gives_back_every_descriptor(http_server: str):
    left = _cycles(lambda: Client.http(http_server, name="sdk"))
    assert left == [], f"{len(left)} descriptors left open after {CYCLES} cycles: {left[:6]}"
