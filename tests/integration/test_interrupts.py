"""Ctrl-C at any bytecode never wedges a client nor loses another thread's call (issue 31).

Each case runs tests/integration/interrupt_stress.py in a process of its own, bounded: the
main thread calls ``echo`` while four other threads do the same on the same Client and
SIGINT comes about every millisecond, thousands of times, inside the main thread's calls
(``--storm``: at every signal, the client's own clean-up included). The client must go on
working, no call of another thread may fail, ``close()`` must end a stdio server and the
process must exit: a wedge is the bound running out. Both builds: compiled and
``MCPSYNC_NO_EXTENSIONS=1``.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys

import pytest

from tests.conftest import ROOT

DRIVER = ROOT / "tests" / "integration" / "interrupt_stress.py"
BOUND = 150.0  # seconds for one run: a wedged client never exits

# pytest-timeout's own bound (120 s) would fire first and hide the driver's report
pytestmark = pytest.mark.timeout(BOUND + 60)

BUILDS = {"compiled": {}, "pure": {"MCPSYNC_NO_EXTENSIONS": "1"}}


def stress(transport: str, server: str, build: str, *args: str, env: dict[str, str] | None = None) -> dict[str, object]:
    full = {**os.environ, **BUILDS[build], **(env or {})}
    full["PYTHONPATH"] = os.pathsep.join([str(ROOT), full.get("PYTHONPATH", "")])
    proc = subprocess.Popen([sys.executable, str(DRIVER), transport, server, *args], cwd=ROOT, env=full,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, start_new_session=True)
    try:
        out, err = proc.communicate(timeout=BOUND)
    except subprocess.TimeoutExpired:
        os.kill(proc.pid, signal.SIGUSR1)  # the driver's threads, as they stand, to its stderr
        try:
            proc.wait(timeout=2)
        except subprocess.TimeoutExpired:
            pass
        os.killpg(proc.pid, signal.SIGKILL)  # the client, and the servers it started
        out, err = proc.communicate(timeout=30)
        pytest.fail(f"wedged: no exit within {BOUND:g} s\n{err.decode(errors='replace')[-3000:]}")
    lines = out.decode().strip().splitlines()
    report = json.loads(lines[-1]) if lines and lines[-1].startswith("{") else {}
    assert proc.returncode == 0 and report, (proc.returncode, report, err.decode(errors="replace")[-3000:])
    return report


def check(report: dict[str, object], interrupts: int) -> None:
    assert report["delivered"] >= interrupts, report  # (the SIGINTs that landed inside a call)
    assert report["other_failed"] == 0, report
    assert report["after_ok"] and report["server_gone"], report
    assert not report["failures"], report


@pytest.mark.parametrize("build", list(BUILDS))
def test_interrupts_on_a_stdio_client_under_load(build: str) -> None:
    check(stress("stdio", "raw", build, "--interrupts", "1500", "--seconds", "100"), 1500)


@pytest.mark.parametrize("build", list(BUILDS))
def test_interrupts_on_an_in_process_client_under_load(build: str) -> None:
    # every answer reaches the reading thread through the transport's queue (its inbox): the
    # leader takes the next one into the inbox's box with no point between where a Ctrl-C lands
    check(stress("inprocess", "sdk", build, "--interrupts", "1500", "--seconds", "100", "--storm"), 1500)


@pytest.mark.npm
@pytest.mark.parametrize("build", list(BUILDS))
def test_interrupt_storm_on_a_legacy_http_sse_client(build: str) -> None:
    # every answer comes on the GET stream, through its reader thread and the inbox to the
    # leader; before the leader took it into the inbox's box, 2 runs of 3 lost another
    # thread's call (a Ctrl-C right after the take returned)
    check(stress("sse", "everything", build, "--interrupts", "1500", "--seconds", "100", "--storm"), 1500)


@pytest.mark.slow
@pytest.mark.npm
@pytest.mark.parametrize("storm", [False, True], ids=["once-per-call", "storm"])
@pytest.mark.parametrize("build", list(BUILDS))
def test_interrupts_on_server_everything_over_stdio(build: str, storm: bool) -> None:
    args = ["--interrupts", "3000", "--seconds", "100"] + (["--storm"] if storm else [])
    check(stress("stdio", "everything", build, *args), 3000)


@pytest.mark.slow
@pytest.mark.parametrize("build", list(BUILDS))
def test_interrupt_storm_on_a_python_server_over_stdio(build: str) -> None:
    check(stress("stdio", "chaos", build, "--interrupts", "3000", "--seconds", "100", "--storm"), 3000)


@pytest.mark.slow
@pytest.mark.npm
@pytest.mark.parametrize("build", list(BUILDS))
def test_interrupts_on_an_http_client_under_load(build: str) -> None:
    # urllib3's path: the dispatcher's part (issue 31); the keep-alive fast path's own socket
    # release on KeyboardInterrupt (issue 29) is the case below. Not the SDK's HTTP server: mcp
    # 2.3.0's stops answering every session once clients drop a few POSTs before reading
    # their answers, as an interrupted call does (seen with raw sockets too, no mcpsync)
    check(stress("http", "everything", build, "--interrupts", "2000", "--seconds", "100", env={"MCPSYNC_HTTP": "urllib3"}), 2000)


@pytest.mark.slow
@pytest.mark.npm
@pytest.mark.parametrize("build", list(BUILDS))
def test_interrupts_on_the_http_fast_path(build: str) -> None:
    check(stress("http", "everything", build, "--interrupts", "2000", "--seconds", "100"), 2000)
