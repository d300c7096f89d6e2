"""The stdio transport with no lock on its hot path.

The dispatcher's leader reads through ``receive_alone`` (no reader lock: leadership is
exclusive), so ``close()`` hands the output pipe over with plain flags: a reader inside
keeps the descriptor open until it leaves, and whoever closes it first pops it from
``_out_claim``, so it is closed exactly once. Senders take the right to write (a baton)
with no lock section; concurrent senders still never interleave their bytes, also when a
message is written in parts.
"""

from __future__ import annotations

import json
import os
import select
import sys
import threading

import pytest

from mcpsync import Client, ConnectionClosed, RequestTimeout
from mcpsync.transports.stdio import StdioTransport
from tests.conftest import server_command
from tests.helpers import hammer, wait_until
from tests.integration.test_stdio_transport import answer_id, ping, reader_thread, reusing_descriptor, started

pytestmark = pytest.mark.timeout(90)


class _HeldAfterWait:
    """Stands in for the transport's waits and reads (``_wait_message``): waits for output
    with a poll of its own, then holds the reader there, between its wait and its read,
    until ``go`` is set; then reads as the framer does."""

    def __init__(self, t: StdioTransport) -> None:
        self.framer = t._framer
        self.waited = threading.Event()
        self.go = threading.Event()

    def __call__(self, fd: int, timeout: float | None) -> int:
        poller = select.poll()
        poller.register(fd, select.POLLIN)
        poller.poll(None if timeout is None else timeout * 1000.0)
        self.waited.set()
        assert self.go.wait(30.0)
        return self.framer.wait_message(fd, timeout)


def assert_number_reused_safely(t: StdioTransport, number: int, rid: int) -> None:
    """A new server's pipe given ``number`` gets its answer; the closed ``t`` reads nothing."""
    new, others = reusing_descriptor(number)
    try:
        ping(new, rid)
        with pytest.raises(ConnectionClosed):
            t.receive_alone(1.0)
        t._close_output()  # a late closer does not close the new pipe's number either
        assert answer_id(new) == rid
    finally:
        for other in (new, *others):
            other.close()


def test_close_between_a_lockless_readers_wait_and_read_leaves_the_pipe_to_it() -> None:
    t = started()
    held = _HeldAfterWait(t)
    t._wait_message = held  # the reader stops between its wait and its read
    number = t._out_fd
    reader, outcome = reader_thread(t.receive_alone)
    try:
        closer = threading.Thread(target=t.close, daemon=True)
        closer.start()  # the child ends (its stdin closed): EOF wakes the reader's wait
        assert held.waited.wait(30.0), "the reader's wait did not end"
        closer.join(30.0)
        assert not closer.is_alive(), "close() waited for the reader"
        # close() is over, the reader is still inside: its descriptor is open, unclaimed
        assert t._reading and t._out_claim == [number] and t._out_fd == number
        os.fstat(number)  # still open: no other pipe can have taken its number
        held.go.set()
        reader.join(30.0)
        assert not reader.is_alive()
        assert len(outcome) == 1 and isinstance(outcome[0], ConnectionClosed), outcome
        assert "closed" in str(outcome[0])
        # the reader closed the pipe on its way out, once
        assert not t._reading and t._out_claim == [] and t._out_fd == -1
        assert t._proc is not None and t._proc.stdout is not None and t._proc.stdout.closed
    finally:
        held.go.set()
        t.close()
    assert_number_reused_safely(t, number, 5)


def test_close_under_a_lockless_reader_waiting_ends_its_read() -> None:
    t = started()
    reader, outcome = reader_thread(t.receive_alone)
    assert wait_until(lambda: t._reading, 10.0), "the reader never went in"
    t.close()
    reader.join(10.0)
    assert not reader.is_alive(), "the reader stayed blocked after close()"
    assert len(outcome) == 1 and isinstance(outcome[0], ConnectionClosed), outcome
    assert t._out_claim == [] and t._out_fd == -1


def test_close_with_no_reader_closes_the_pipe_itself_once() -> None:
    t = started()
    ping(t, 1)
    assert t.receive_alone(10.0) is not None
    number = t._out_fd
    t.close()
    assert t._out_claim == [] and t._out_fd == -1
    t._close_output()  # a late second closer finds nothing to close
    assert_number_reused_safely(t, number, 2)


# A server that writes each line back as it came (a whole line at a time).
_ECHO = r"""
import sys
out = sys.stdout.buffer
for line in sys.stdin.buffer:
    out.write(line)
    out.flush()
"""


def test_concurrent_senders_of_messages_larger_than_the_pipe_never_interleave() -> None:
    # 256 KiB messages do not fit a pipe (64 KiB): each is written in parts, and the other
    # senders wait for the right to write meanwhile (they queue behind the baton)
    t = StdioTransport(sys.executable, ["-c", _ECHO], close_timeout=2.0)
    t.connect(10.0)
    threads_n, each = 6, 4
    size = 256 * 1024
    received: list[bytes] = []
    failures: list[BaseException] = []

    def read() -> None:
        try:
            while len(received) < threads_n * each:
                data = t.receive(30.0)
                assert data is not None, "the echo stopped"
                received.append(data)
        except BaseException as exc:  # noqa: BLE001
            failures.append(exc)

    start = threading.Barrier(threads_n)

    def send(k: int) -> None:
        try:
            start.wait(10.0)
            for i in range(each):
                body = {"k": k, "i": i, "pad": chr(ord("a") + k) * size}
                t.send(json.dumps(body).encode(), 30.0)
        except BaseException as exc:  # noqa: BLE001
            failures.append(exc)

    reader = threading.Thread(target=read, daemon=True)
    senders = [threading.Thread(target=send, args=(k,), daemon=True) for k in range(threads_n)]
    try:
        reader.start()
        for s in senders:
            s.start()
        for s in senders:
            s.join(60.0)
        reader.join(60.0)
        assert not failures, failures
        assert len(received) == threads_n * each
        seen = set()
        for data in received:
            msg = json.loads(data)  # an interleaved message would not parse
            assert msg["pad"] == chr(ord("a") + msg["k"]) * size
            seen.add((msg["k"], msg["i"]))
        assert len(seen) == threads_n * each
        assert t._wbaton == [True]  # given back by every sender
    finally:
        t.close()


def test_close_while_senders_are_stuck_on_a_full_pipe_ends_every_send() -> None:
    # a server that never reads: the first sender fills the pipe and waits for room (holding
    # the right to write), the others queue behind it; each ends at its timeout in turn (a
    # message is never cut by another), close() after them, and nothing hangs
    t = StdioTransport(sys.executable, ["-c", "import time\ntime.sleep(60)"], close_timeout=0.5)
    t.connect(10.0)
    outcomes: list[BaseException | None] = []

    def send() -> None:
        try:
            t.send(b'{"pad": "' + b"x" * (1 << 20) + b'"}', 1.0)
            outcomes.append(None)
        except BaseException as exc:  # noqa: BLE001
            outcomes.append(exc)

    senders = [threading.Thread(target=send, daemon=True) for _ in range(3)]
    for s in senders:
        s.start()
    assert wait_until(lambda: t._wwaiters, 10.0), "no sender queued for the right to write"
    closer = threading.Thread(target=t.close, daemon=True)
    closer.start()
    for s in senders:
        s.join(30.0)
        assert not s.is_alive(), "a sender stayed blocked"
    closer.join(30.0)
    assert not closer.is_alive()
    assert len(outcomes) == 3
    for outcome in outcomes:
        assert isinstance(outcome, (ConnectionClosed, RequestTimeout)), outcomes
    with pytest.raises(ConnectionClosed):
        t.send(b"{}", 1.0)


@pytest.mark.parametrize("mode", ["legacy", "modern"])
def test_many_threads_on_one_stdio_client_after_idle_gaps(mode: str) -> None:
    # leadership passes with no lock (the baton); after each idle gap the first caller
    # pauses the idle watch; every answer still reaches the thread that asked, and the
    # background reader is free to lead again once the callers are gone
    cmd = server_command("raw_server.py")
    with Client.stdio(cmd[0], cmd[1:], mode=mode) as c:
        for _ in range(4):
            hammer(c, threads=12, calls=25, expect=lambda m: m)
            gap = threading.Event()
            gap.wait(0.05)  # the idle gap under test (longer than the dispatcher's 20 ms grace)
        primary = c.diagnostics().primary
        assert primary is not None and primary.pending == 0 and primary.dropped == 0


# A server whose child (a grandchild of the client) keeps the server's stderr open and
# quiet after the server itself is gone.
_STDERR_HELD = r"""
import subprocess, sys
subprocess.Popen([sys.executable, "-c", "import time; time.sleep(10)"])  # inherits stderr
sys.stderr.write("started\n"); sys.stderr.flush()
for line in sys.stdin.buffer:
    pass
"""


def test_close_ends_the_stderr_reader_while_a_grandchild_holds_the_pipe_quiet() -> None:
    # the stderr reader waits with no timeout while the server is quiet (no idle polls);
    # close() wakes it, so it leaves, and closes its pipe, at once
    t = StdioTransport(sys.executable, ["-c", _STDERR_HELD], close_timeout=1.0)
    t.connect(10.0)
    assert wait_until(lambda: "started" in t.stderr_tail(), 10.0)
    reader = t._stderr_thread
    assert reader is not None and reader.is_alive()
    t.close()
    reader.join(5.0)  # before: up to one idle poll (0.2 s); either way well under this bound
    assert not reader.is_alive(), "the stderr reader stayed after close()"


def test_a_connection_is_not_alive_once_its_server_died_or_it_was_closed() -> None:
    # the pool's lone-caller check (conn.alive(): one C call on the dispatcher's _up) must
    # see a death the reader noticed, and a close, or a call would go to a dead connection
    argv = server_command("counting_server.py")
    with Client.stdio(argv[0], argv[1:]) as client:
        client.call_tool("echo", {"message": "x"})
        hot = client._session.pool._hot
        assert hot is not None and hot.conn.alive()
        proc = hot.conn.transport._proc  # type: ignore[union-attr]
        proc.kill()
        assert wait_until(lambda: not hot.conn.alive(), 20), "a dead server's connection still looks alive"
        assert hot.conn.channel._dead is not None
        # the next call notices it and goes to a new connection, to a new server
        assert client.call_tool("echo", {"message": "y"}).content[0].text == "y"
        again = client._session.pool._hot
        assert again is not None and again.conn is not hot.conn and again.conn.alive()
        conn = again.conn
    assert not conn.alive() and conn.channel._closed
