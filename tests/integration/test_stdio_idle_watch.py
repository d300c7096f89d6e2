"""The stdio transport's idle watch (``wait_readable``), turned off by a caller that reads
its own answer after an idle gap and on again when nobody reads (its ``idle_switch``,
which the dispatcher's ``IdleGate`` turns, in C when compiled): paused, input does not
wake the thread waiting in it; resumed, input already on the pipe wakes that thread at
once; frames read off the pipe along with an answer wake it as they are read, paused or
not."""

from __future__ import annotations

import array
import errno
import fcntl
import termios
import threading
import time
from typing import Callable

import pytest

from mcpsync._speedups import IdleGate
from mcpsync.transports import stdio
from tests.helpers import wait_until
from tests.integration.test_stdio_transport import answer_id, ping, started

pytestmark = pytest.mark.timeout(60)
pausable = pytest.mark.skipif(not stdio._EPOLL, reason="the idle watch pauses on Linux (epoll) only")


_PONG = b'{"jsonrpc":"2.0","id":1,"result":{}}\n'  # the shortest answer the raw server sends to a ping


def _waiting(fd: int) -> int:
    """Bytes waiting on the pipe ``fd`` (FIONREAD), without reading them."""
    n = array.array("i", [0])
    fcntl.ioctl(fd, termios.FIONREAD, n, True)
    return n[0]


def watcher(t: object) -> tuple[threading.Thread, threading.Event]:
    """A thread in ``wait_readable`` (10 s), like the dispatcher's background reader."""
    woke = threading.Event()

    def run() -> None:
        if t.wait_readable(10.0):  # type: ignore[attr-defined]
            woke.set()

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    return thread, woke


def _switches(t: object, how: str) -> tuple[Callable[[], object], Callable[[], object]]:
    """Turn the watch off and on as the dispatcher does (``gate``: its IdleGate, after an
    idle gap) or with the transport's switch itself."""
    switch = t.idle_switch  # type: ignore[attr-defined]
    if how == "switch":
        return lambda: switch.turn(False), lambda: switch.turn(True)
    gate = IdleGate(switch, 0.02, time.monotonic)
    return lambda: gate.arrive(time.monotonic() + 1.0), lambda: gate.leave()


@pausable
@pytest.mark.parametrize("how", ["switch", "gate"])
def test_a_paused_watch_sleeps_through_an_answer_and_wakes_on_resume(how: str) -> None:
    t = started()
    try:
        pause, resume = _switches(t, how)
        pause()
        thread, woke = watcher(t)
        ping(t, 1)
        # the answer arrives; the watcher sleeps on while the watch is paused (the wait
        # below is the bound of this negative check, not a synchronisation)
        assert not woke.wait(0.3)
        resume()  # the answer is still on the pipe: the watcher wakes now
        assert woke.wait(5.0)
        thread.join(5.0)
        assert answer_id(t) == 1
    finally:
        t.close()


@pausable
def test_resume_wakes_the_watch_for_frames_already_read() -> None:
    t = started()
    try:
        pause, resume = _switches(t, "gate")
        pause()
        ping(t, 1)
        ping(t, 2)
        # both answers on the pipe before the first read, so that one read takes both
        # (each answer is a line of its own: count them without reading)
        assert wait_until(lambda: _waiting(t._out_fd) >= 2 * len(_PONG), 10), "the answers did not arrive"
        assert answer_id(t) == 1
        assert t._ready, "one read took the first answer only"
        thread, woke = watcher(t)
        resume()  # nothing on the pipe, one frame in _ready: the watcher wakes
        assert woke.wait(5.0)
        thread.join(5.0)
        assert answer_id(t) == 2
    finally:
        t.close()


@pausable
def test_frames_read_along_with_an_answer_wake_a_paused_watch() -> None:
    # the caller that paused the watch reads two answers in one read and returns the
    # first: the second is off the pipe, where the paused watch cannot see it, so the
    # read itself wakes the watcher (and after the caller is gone, it is there to read)
    t = started()
    try:
        pause, _ = _switches(t, "gate")
        pause()
        thread, woke = watcher(t)
        ping(t, 1)
        ping(t, 2)
        assert wait_until(lambda: _waiting(t._out_fd) >= 2 * len(_PONG), 10), "the answers did not arrive"
        assert not woke.is_set(), "a paused watch woke on input"
        assert answer_id(t) == 1
        assert t._ready, "one read took the first answer only"
        assert woke.wait(5.0), "the frame left in _ready woke nobody"
        thread.join(5.0)
        assert answer_id(t) == 2
    finally:
        t.close()


@pausable
def test_the_switch_of_a_closed_transport_fails_quietly() -> None:
    t = started()
    switch = t.idle_switch
    assert switch is not None
    gate = IdleGate(switch, 0.02, time.monotonic)
    t.close()
    assert switch.turn(False) == switch.turn(True) == errno.EBADF
    gate.arrive(time.monotonic() + 1.0)  # the dispatcher's gate carries on: the send reports the close
    assert gate.paused
    gate.leave()
    assert not gate.paused


def test_an_unpaused_watch_wakes_on_input() -> None:
    t = started()
    try:
        thread, woke = watcher(t)
        ping(t, 1)
        assert woke.wait(5.0)
        thread.join(5.0)
        assert answer_id(t) == 1
    finally:
        t.close()


def test_a_notification_behind_an_answer_after_an_idle_gap_is_handled_while_idle() -> None:
    # "change" answers, then sends notifications/tools/list_changed at once: the caller
    # (who paused the idle watch: it comes after an idle gap) reads its answer and leaves
    # the notification for the background reader, which must handle it with no call made
    from mcpsync import Client
    from tests.conftest import server_command

    argv = server_command("counting_server.py")
    seen = threading.Event()
    with Client.stdio(argv[0], argv[1:]) as client:
        client.on_notification("notifications/tools/list_changed", lambda params: seen.set())
        client.call_tool("echo", {"message": "x"})
        for _ in range(3):
            seen.clear()
            threading.Event().wait(0.05)  # idle past the dispatcher's grace period (not a synchronisation)
            assert client.call_tool("change").content[0].text == "changed"
            assert seen.wait(5.0), "the notification was not handled while the client was idle"
