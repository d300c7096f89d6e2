"""The stdio transport's pipes under close: a reader never touches a descriptor that
close() released, so it can never read (steal) the output of the server that opens next
and is given the same descriptor number.

Found under chaos (tests/chaos/test_chaos_stdio.py): a connection's reader outlived its
close, polled its old descriptor number, now another server's output, and took that
server's answer to ``initialize``; the new connection's caller then blocked in os.read.
"""

from __future__ import annotations

import json
import logging
import os
import sys
import threading
import time
from typing import Callable

import pytest

from mcpsync import ConnectionClosed, StartFailed
from mcpsync.transports.stdio import StdioTransport
from tests.conftest import server_command

pytestmark = pytest.mark.timeout(60)


def started(*args: str) -> StdioTransport:
    cmd = server_command("raw_server.py", *args)
    t = StdioTransport(cmd[0], cmd[1:], close_timeout=1.0)
    t.connect(10.0)
    return t


def ping(t: StdioTransport, rid: int) -> None:
    t.send(json.dumps({"jsonrpc": "2.0", "id": rid, "method": "ping"}).encode(), 5.0)


def answer_id(t: StdioTransport) -> int:
    data = t.receive(10.0)
    assert data is not None, "no answer within 10 s"
    return json.loads(data)["id"]


def reader_thread(
    receive: Callable[[float | None], bytes | None],
) -> tuple[threading.Thread, list[BaseException | bytes | None]]:
    """A started thread in ``receive(30)``, and the list its outcome goes to."""
    outcome: list[BaseException | bytes | None] = []

    def read() -> None:
        try:
            outcome.append(receive(30.0))
        except BaseException as exc:  # noqa: BLE001 - the test inspects it
            outcome.append(exc)

    reader = threading.Thread(target=read, daemon=True)
    reader.start()
    return reader, outcome


def reusing_descriptor(number: int, attempts: int = 5) -> tuple[StdioTransport, list[StdioTransport]]:
    """A connected transport whose output pipe got descriptor ``number`` (the kernel hands
    out the lowest free one, so this is the usual case), and the others opened meanwhile."""
    others: list[StdioTransport] = []
    for _ in range(attempts):
        t = started()
        if t._out_fd == number:
            return t, others
        others.append(t)
    for t in others:
        t.close()
    pytest.skip(f"descriptor {number} was not reused in {attempts} connects")


def test_a_receive_after_close_raises_and_does_not_read_the_next_servers_pipe() -> None:
    old = started()
    ping(old, 1)
    assert answer_id(old) == 1
    number = old._out_fd
    old.close()
    new, others = reusing_descriptor(number)
    try:
        ping(new, 2)
        with pytest.raises(ConnectionClosed, match="closed"):
            old.receive(2.0)
        assert answer_id(new) == 2  # still there for its own reader
    finally:
        for t in (new, *others):
            t.close()


def test_close_under_a_waiting_reader_ends_the_read_then_releases_the_pipe() -> None:
    t = started()
    reader, outcome = reader_thread(t.receive)
    while not t._rlock.locked():  # the reader is inside receive(), waiting
        reader.join(0.01)
        assert reader.is_alive(), outcome
    number = t._out_fd
    t.close()
    reader.join(10.0)
    assert not reader.is_alive(), "the reader stayed blocked after close()"
    assert len(outcome) == 1 and isinstance(outcome[0], ConnectionClosed), outcome
    assert t._out_fd == -1  # the reader released the pipe on its way out
    new, others = reusing_descriptor(number)
    try:
        ping(new, 3)
        with pytest.raises(ConnectionClosed):
            t.receive(1.0)
        assert answer_id(new) == 3
    finally:
        for other in (new, *others):
            other.close()


@pytest.mark.parametrize("method", ["receive", "receive_alone"])
def test_many_transports_closing_while_read_never_cross_answers(method: str) -> None:
    """Readers on transports closed under them, while new ones open and answer:
    every answer reaches the transport that asked, none is read by a closed one.
    (``receive_alone``: the dispatcher's lockless read, closed by the flags hand-off.)"""
    stolen: list[bytes] = []
    lost: list[int] = []
    errors: list[BaseException] = []

    def drain(t: StdioTransport) -> None:
        while True:
            try:
                data = getattr(t, method)(5.0)
            except ConnectionClosed:
                return
            except BaseException as exc:  # noqa: BLE001 - e.g. an EBADF would land here
                errors.append(exc)
                return
            if data is not None:
                stolen.append(data)  # a closed transport's pings were all answered before

    for round_ in range(8):
        t = started()
        ping(t, round_)
        if answer_id(t) != round_:
            lost.append(round_)
        reader = threading.Thread(target=drain, args=(t,), daemon=True)
        reader.start()
        t.close()
        fresh = started()
        try:
            ping(fresh, 100 + round_)
            if answer_id(fresh) != 100 + round_:
                lost.append(100 + round_)
        finally:
            fresh.close()
        reader.join(10.0)
        assert not reader.is_alive()
    assert not stolen and not lost and not errors, (stolen, lost, errors)


# A server that answers each line with the same bytes back, written in two parts with
# a pause between them (the first part ends mid-message), or only the first part.
_SPLIT_ECHO = r"""
import os, sys, time
hold = sys.argv[1] == "hold"
for line in sys.stdin.buffer:
    half = len(line) // 2
    os.write(1, line[:half])
    if hold:
        continue
    time.sleep(0.05)
    os.write(1, line[half:])
"""


def split_echo(mode: str) -> StdioTransport:
    t = StdioTransport(sys.executable, ["-c", _SPLIT_ECHO, mode], close_timeout=1.0)
    t.connect(10.0)
    return t


def test_a_message_written_in_parts_is_received_whole() -> None:
    t = split_echo("split")
    try:
        for rid in range(3):
            ping(t, rid)
            assert answer_id(t) == rid
    finally:
        t.close()


def test_half_a_message_then_silence_ends_the_receive_at_its_timeout() -> None:
    t = split_echo("hold")
    try:
        ping(t, 7)
        started_at = time.monotonic()
        assert t.receive(0.3) is None  # neither a hang nor a broken message
        assert time.monotonic() - started_at < 5.0
        assert t._framer.buffered > 0  # the part that came is kept for the rest
        assert t.alive()
    finally:
        t.close()


def test_the_reader_waits_and_reads_through_its_one_slot() -> None:
    # the transport's waits and reads of its output are LineFramer.wait_message's, in
    # _wait_message (the slot tests step into): one call per message, with the receive's time
    t = started()
    try:
        calls: list[float | None] = []
        real = t._wait_message

        def counted(fd: int, timeout: float | None) -> int:
            calls.append(timeout)
            return real(fd, timeout)

        t._wait_message = counted
        ping(t, 1)
        assert answer_id(t) == 1
        assert calls == [10.0]
    finally:
        t.close()


# --------------------------------------------------------------------------- start failures
# A command that cannot run fails connect() at once; a process that exits (or closes its
# output) before answering is reported by start_failure() with the facts: the command,
# the exit code and the last lines of its stderr.


def _receive_until_closed(t: StdioTransport) -> ConnectionClosed:
    for _ in range(10):  # a few lines of garbage may come first
        try:
            data = t.receive(10.0)
        except ConnectionClosed as exc:
            return exc
        assert data is not None, "no EOF within 10 s"
    raise AssertionError("the child's output never ended")


@pytest.mark.parametrize("kind", ["missing", "not-executable"])
def test_a_command_that_cannot_run_raises_start_failed_from_connect(kind: str, tmp_path) -> None:
    if kind == "missing":
        command = str(tmp_path / "no-such-server")
    else:
        command = str(tmp_path / "server.sh")
        with open(command, "w") as f:
            f.write("#!/bin/sh\nexit 0\n")
        os.chmod(command, 0o644)
    t = StdioTransport(command, ["--flag"])
    with pytest.raises(StartFailed) as info:
        t.connect(10.0)
    assert command in str(info.value) and info.value.command == f"{command} --flag"
    assert info.value.exit_code is None
    assert t.start_failure(0.0) is None  # nothing ran, nothing more to tell
    t.close()


_EXIT_WITH_MESSAGE = "import sys\nsys.stderr.write('line one\\nfatal: no config file\\n')\nsys.exit(1)"
_GARBAGE_THEN_EXIT = "import sys, time\nprint('Server starting on stdio...', flush=True)\nsys.stdin.readline()\nprint('<html>oops</html>', flush=True)\nsys.stderr.write('crashed\\n')\nsys.exit(3)"


@pytest.mark.parametrize(
    "script, code, said",
    [(_EXIT_WITH_MESSAGE, 1, "fatal: no config file"), (_GARBAGE_THEN_EXIT, 3, "crashed")],
    ids=["exit-1-with-stderr", "garbage-then-exit"],
)
def test_a_child_that_exits_before_answering_is_a_start_failure(script: str, code: int, said: str) -> None:
    t = StdioTransport(sys.executable, ["-c", script], close_timeout=1.0)
    t.connect(10.0)
    try:
        ping(t, 1)
    except ConnectionClosed:
        pass  # gone already
    closed = _receive_until_closed(t)
    # the pending requests learn why: the exit code and the last stderr lines
    assert f"exit code {code}" in str(closed) and said in str(closed)
    failure = t.start_failure(5.0)
    assert isinstance(failure, StartFailed)
    assert failure.exit_code == code and said in failure.stderr_tail
    assert sys.executable in str(failure) and f"code {code}" in str(failure) and said in str(failure)
    t.close()
    again = t.start_failure(0.0)  # still told after close: the exit came before it
    assert isinstance(again, StartFailed) and again.exit_code == code


def test_a_child_alive_and_silent_is_starting_not_failed() -> None:
    script = "import sys, time\nsys.stdin.readline()\nprint('{\"jsonrpc\":\"2.0\",\"id\":1,\"result\":{}}', flush=True)\ntime.sleep(60)"
    t = StdioTransport(sys.executable, ["-c", script], close_timeout=0.5)
    t.connect(10.0)
    try:
        assert t.starting()
        assert t.start_failure(0.2) is None  # alive, output open: it may still answer
        ping(t, 1)
        assert answer_id(t) == 1
        assert not t.starting()  # it spoke
    finally:
        t.close()
    assert not t.starting()
    assert t.start_failure(0.0) is None  # stopped by close(), not a failure to start


def test_a_child_that_closes_its_output_fails_the_read_and_closes_quickly() -> None:
    # close_timeout 5 s: the polite wait after EOF on stdin would be 5 s; a child that has
    # closed its output cannot answer anything more, so it is not waited on
    script = "import os, sys, time\nsys.stdin.readline()\nos.close(1)\ntime.sleep(60)"
    t = StdioTransport(sys.executable, ["-c", script], close_timeout=5.0)
    t.connect(10.0)
    ping(t, 1)
    _receive_until_closed(t)
    assert t.alive() or t.returncode is None
    failure = t.start_failure(0.2)
    assert isinstance(failure, StartFailed) and failure.exit_code is None and "still running" in str(failure)
    started_at = time.monotonic()
    t.close()
    assert time.monotonic() - started_at < 3.0  # under the 5 s polite wait it used to get
    assert t.returncode is not None


# --------------------------------------------------------------------------- stderr


def test_a_stderr_flood_is_drained_with_a_bounded_tail_and_bounded_log_lines(caplog) -> None:
    # 20 MB in 200,000 lines of 100 bytes, then one 5 MB line without a newline
    script = (
        "import sys\nerr = sys.stderr.buffer\nblock = (b'x' * 99 + b'\\n') * 10000\n"
        "for _ in range(20): err.write(block)\nerr.write(b'z' * 5000000)\nerr.flush()\n"
    )
    t = StdioTransport(sys.executable, ["-c", script], name="flood", close_timeout=1.0)
    with caplog.at_level(logging.INFO, logger="mcpsync.stderr.flood"):
        started_at = time.monotonic()
        t.connect(10.0)
        try:
            _receive_until_closed(t)  # exits after writing
            t._join_stderr(30.0)
            elapsed = time.monotonic() - started_at
            tail = t.stderr_tail()
        finally:
            t.close()
    records = [r for r in caplog.records if r.name == "mcpsync.stderr.flood"]
    # at most the rate per second, plus one summary line per second and one at the end
    assert len(records) <= (t.stderr_log_rate + 1) * (elapsed + 2), (len(records), elapsed)
    assert any("not logged" in r.getMessage() for r in records)
    assert 0 < len(tail) <= 20
    assert tail[-2] == "x" * 99
    assert tail[-1].startswith("z" * 100) and "5000000 bytes" in tail[-1] and len(tail[-1]) < 400
