"""Bad input from a real stdio server: each case ends in the documented error, no hang."""

from __future__ import annotations

import json
import logging
import os
import sys
import threading
import time

import pytest

from mcpsync import (
    Client,
    ConnectError,
    ConnectionClosed,
    MessageTooLarge,
    PoolLimits,
    PoolTimeout,
    ProtocolError,
    RemoteError,
    RequestTimeout,
    StartFailed,
    Timeouts,
)
from mcpsync._errors import counts_as_breaker_failure
from tests.conftest import server_command
from tests.helpers import wait_until

pytestmark = pytest.mark.timeout(60)


def raw_client(*args: str, **options) -> Client:
    cmd = server_command("raw_server.py", *args)
    return Client.stdio(cmd[0], cmd[1:], **options)


def _threads_named(prefix: str) -> list[threading.Thread]:
    return [t for t in threading.enumerate() if t.name.startswith(prefix) and t.is_alive()]


@pytest.mark.parametrize("mode", ["legacy", "modern", "auto"])
def test_basic_calls_both_eras(mode):
    with raw_client(mode=mode) as c:
        assert c.era == ("legacy" if mode == "legacy" else "modern")
        assert [t.name for t in c.list_tools()][:2] == ["echo", "add"]
        r = c.call_tool("add", {"a": 2, "b": 3})
        assert r.structured_content == {"result": 5} and r.text == "5" and not r.is_error
        c.ping()


def test_a_caller_that_takes_over_from_the_idle_reader_gets_its_answer():
    # Idle past the grace period, the background thread reads. A slow answer (longer
    # than its poll) makes it hand the reading over to the waiting caller, which then
    # reads its own answer itself.
    with raw_client() as c:
        c.call_tool("echo", {"message": "warm"})
        time.sleep(0.1)  # idle past the grace period (not a synchronisation)
        assert c.call_tool("sleep", {"seconds": 0.8}).text == "slept"
        time.sleep(0.1)  # idle again
        assert c.call_tool("echo", {"message": "again"}).text == "again"


def test_garbage_lines_are_dropped_and_the_call_still_answers(caplog):
    with caplog.at_level(logging.WARNING, logger="mcpsync.dispatcher"):
        with raw_client("--misbehave", "garbage") as c:
            assert c.call_tool("bad").text == "ok after garbage"
            assert c.call_tool("echo", {"message": "still fine"}).text == "still fine"
            assert c.diagnostics().primary.dropped >= 3
    dropped = [r.getMessage() for r in caplog.records if "invalid message (dropped)" in r.getMessage()]
    # each line is logged with why it was dropped: not JSON at all, or JSON but no envelope
    assert any("malformed JSON" in m and "this is not json" in m for m in dropped), dropped
    assert any("invalid JSON-RPC envelope" in m and "[1,2,3]" in m for m in dropped), dropped


def test_response_with_unknown_id_is_dropped():
    with raw_client("--misbehave", "unknown-id") as c:
        assert c.call_tool("bad").text == "ok after unknown id"
        assert c.call_tool("echo", {"message": "x"}).text == "x"


def test_truncated_message_then_eof_fails_the_pending_call():
    with raw_client("--misbehave", "truncate") as c:
        with pytest.raises(ConnectionClosed) as info:
            c.call_tool("bad")
        assert "exit code 3" in str(info.value)
        # the next call reconnects to a fresh process
        assert c.call_tool("echo", {"message": "again"}).text == "again"


def test_oversized_message_fails_only_its_call():
    with raw_client("--misbehave", "oversize", "--big", "300000", max_message_size=100_000) as c:
        with pytest.raises(MessageTooLarge) as info:
            c.call_tool("bad")
        assert "too large" in str(info.value)
        assert c.call_tool("echo", {"message": "after"}).text == "after"


def test_server_exiting_mid_call_fails_every_pending_call_at_once():
    # one connection, so every call is pending on the process that dies
    with raw_client("--misbehave", "exit", pool=PoolLimits.SINGLE) as c:
        c.connect()
        errors: list[BaseException] = []

        def slow():
            try:
                c.call_tool("sleep", {"seconds": 20})
            except BaseException as exc:  # noqa: BLE001
                errors.append(exc)

        threads = [threading.Thread(target=slow) for _ in range(4)]
        for t in threads:
            t.start()
        # the four slow calls are out before the one that makes the server exit
        assert wait_until(lambda: sum(conn.pending for conn in c.diagnostics().connections) == 4, 10)
        with pytest.raises(ConnectionClosed) as info:
            c.call_tool("bad")
        assert "exiting on purpose" in str(info.value)
        for t in threads:
            t.join(10)
            assert not t.is_alive()
        assert len(errors) == 4 and all(isinstance(e, ConnectionClosed) for e in errors)


def test_server_that_never_answers_times_out_and_is_told_to_cancel():
    with raw_client("--misbehave", "silent") as c:
        with pytest.raises(RequestTimeout) as info:
            c.call_tool("bad", timeout=0.3)
        assert info.value.timeout == 0.3
        # the server saw our notifications/cancelled (counted by its stats tool)
        stats = c.call_tool("stats").structured_content
        assert stats.get("notifications/cancelled") == 1
        assert c.diagnostics().primary.pending == 0  # nothing left in the pending map


def test_a_safe_call_that_timed_out_is_not_retried_past_its_timeout():
    # read-only or not, a call has its request timeout in all: an attempt that used it
    # up is not tried again, so the timeout reaches the caller (SPEC: timeouts)
    with raw_client("--misbehave", "silent") as c:
        with pytest.raises(RequestTimeout) as info:
            c.call_tool("bad", timeout=0.3, retry_safe=True)
        assert len(info.value.retry_history) == 1
        assert c.call_tool("stats").structured_content.get("tools/call") == 2  # one attempt, then this call


def test_a_call_starved_of_connections_ends_at_its_timeout_not_after_retries():
    limits = PoolLimits(min=1, max=1, max_in_flight=1)
    with raw_client(pool=limits, timeouts=Timeouts(request=10.0)) as c:
        c.call_tool("stats")  # connected
        busy = threading.Thread(target=c.call_tool, args=("sleep", {"seconds": 3}), daemon=True)
        busy.start()
        # the sleeping call holds the only connection
        assert wait_until(lambda: c.pool_stats().in_use >= 1, 10)
        with pytest.raises(PoolTimeout) as info:
            c.call_tool("stats", timeout=0.5)
        # the wait for a connection is the call's own timeout: no retry waits again
        assert len(info.value.retry_history) == 1
        busy.join(10)
        assert c.call_tool("stats").structured_content.get("tools/call", 0) >= 2  # usable again


def test_chatty_stderr_never_blocks_the_client(caplog):
    with raw_client("--misbehave", "stderr") as c:
        assert c.call_tool("bad", timeout=20).text == "ok after stderr"


def test_protocol_error_response_is_typed():
    with raw_client() as c:
        with pytest.raises(RemoteError) as info:
            c.call_tool("no-such-tool")
        assert info.value.code == -32602


def test_spawn_failure_is_a_connect_error():
    c = Client.stdio("/nonexistent/definitely-not-here", [])
    with pytest.raises(ConnectError) as info:
        c.connect()
    assert "could not start" in str(info.value)
    c.close()


def test_server_that_never_handshakes_is_a_connect_error_at_its_start_budget():
    # `cat >/dev/null` reads stdin and never answers anything: alive and silent, it is
    # *starting* (the transport's starting()), so the start budget bounds it, not the
    # connect timeout; it is not a start failure
    c = Client.stdio("sh", ["-c", "cat >/dev/null"], timeouts=Timeouts(connect=0.5, start=1.0))
    t0 = time.monotonic()
    with pytest.raises(ConnectError) as info:
        c.connect()
    assert not isinstance(info.value, StartFailed)
    assert "starting" in str(info.value)
    assert time.monotonic() - t0 < 30  # bounded, not a timing assertion on speed
    c.close()


def test_progress_reaches_the_callback_on_a_worker_thread():
    seen = []
    with raw_client() as c:
        reader = threading.current_thread()

        def on_progress(progress, total, message):
            seen.append((progress, total, message, threading.current_thread() is not reader))

        r = c.call_tool("progress", {"steps": 3}, progress=on_progress)
        assert r.text == "done"
        wait_until(lambda: len(seen) >= 3, 5)
    assert [s[:3] for s in seen] == [(1, 3, "step 1"), (2, 3, "step 2"), (3, 3, "step 3")]
    assert all(s[3] for s in seen)


def test_progress_resets_the_timer_but_the_cap_holds():
    with raw_client(timeouts=Timeouts(request=0.5, progress_cap=1.5)) as c:
        # 6 steps x 0.3 s = 1.8 s in all: each gap < 0.5 s, so progress keeps it alive ...
        r = c.call_tool("progress", {"steps": 4, "delay": 0.3}, progress=lambda *a: None)
        assert r.text == "done"
        # ... but a call longer than the hard cap still times out
        with pytest.raises(RequestTimeout):
            c.call_tool("progress", {"steps": 8, "delay": 0.3}, progress=lambda *a: None)


def test_close_reaps_the_child_and_leaves_no_threads():
    c = raw_client()
    c.connect()
    (pid,) = c.diagnostics().pids
    c.close()
    c.close()  # idempotent
    assert c.diagnostics().pids == ()
    import os

    with pytest.raises(ChildProcessError):
        os.waitpid(pid, os.WNOHANG)  # already reaped: no zombie
    mine = (f"mcpsync-reader-{c.name}", f"mcpsync-stderr-{c.name}", f"mcpsync-{c.name}-")
    wait_until(lambda: not any(t.name.startswith(mine) for t in _threads_named("mcpsync-")), 5, interval=0.05)
    assert not [t.name for t in _threads_named("mcpsync-") if t.name.startswith(mine)]


def test_calls_after_close_fail_fast():
    c = raw_client()
    c.connect()
    c.close()
    with pytest.raises(ConnectionClosed):
        c.call_tool("echo", {"message": "x"})


def test_modern_discover_facts_are_refreshed_after_their_ttl(tmp_path):
    """server/discover's ttlMs: the session facts are re-fetched once it has passed."""
    with raw_client("--discover-ttl-ms", "200", mode="modern") as c:
        first = c.session
        assert first.fresh_until is not None
        assert c.session is first  # within the ttl: no new discover
        time.sleep(0.3)
        assert c.session is not first  # re-discovered
        stats = c.call_tool("stats").structured_content
        assert stats.get("server/discover") == 2


# --------------------------------------------------------------------------- issue 16


def faults_client(*args: str, **options) -> Client:
    cmd = server_command("stdio_faults.py", *args)
    options.setdefault("mode", "legacy")
    return Client.stdio(cmd[0], cmd[1:], **options)


@pytest.mark.parametrize("shape", ["one-long-line", "100-byte-lines"])
def test_a_tool_that_writes_50_mb_to_stderr_answers_within_its_timeout(shape):
    # drained in bulk: the server never sits blocked on a full stderr pipe
    with faults_client() as c:
        line = 0 if shape == "one-long-line" else 100
        assert c.call_tool("chatty", {"bytes": 50_000_000, "line": line}, timeout=30).text == "done"
        assert c.call_tool("pid", timeout=30).structured_content["pid"] > 0


def test_a_stderr_flood_logs_a_bounded_number_of_lines(caplog):
    with caplog.at_level(logging.INFO, logger="mcpsync.stderr"):
        with faults_client(name="chatty") as c:
            started = time.monotonic()
            assert c.call_tool("chatty", {"bytes": 10_000_000, "line": 100}, timeout=30).text == "done"
            elapsed = time.monotonic() - started
    records = [r for r in caplog.records if r.name.startswith("mcpsync.stderr")]
    # 100,000 lines written; at most 50 a second are logged, plus a summary a second
    assert 0 < len(records) <= 51 * (elapsed + 3), (len(records), elapsed)
    assert any("not logged" in r.getMessage() for r in records)


def test_a_server_that_closes_its_stdout_fails_the_pending_call_at_once():
    # the child keeps running with its output closed; the call fails as soon as the EOF
    # is read, without waiting out the polite shutdown (close=5 s) of the broken child
    with faults_client(timeouts=Timeouts(close=5.0)) as c:
        pid = c.call_tool("pid").structured_content["pid"]
        started = time.monotonic()
        with pytest.raises(ConnectionClosed):
            c.call_tool("vanish", timeout=30)
        assert time.monotonic() - started < 3.0  # was over 5 s (2 s at the default close)
    with pytest.raises(ProcessLookupError):
        os.kill(pid, 0)


@pytest.mark.parametrize("mode", ["jsonrpc-1.0", "no-jsonrpc"])
def test_an_answer_that_is_not_jsonrpc_2_is_a_protocol_error(mode, caplog):
    with caplog.at_level(logging.WARNING, logger="mcpsync.dispatcher"):
        with raw_client("--misbehave", mode) as c:
            with pytest.raises(ProtocolError) as info:
                c.call_tool("bad", timeout=10)
            assert not isinstance(info.value, RequestTimeout)
            assert "jsonrpc" in str(info.value)
            assert c.call_tool("echo", {"message": "still fine"}).text == "still fine"
    assert any("invalid answer to tools/call" in r.getMessage() for r in caplog.records)


def test_a_missing_command_fails_at_once_with_start_failed(tmp_path):
    command = str(tmp_path / "no-such-server")
    c = Client.stdio(command, ["--stdio"])
    started = time.monotonic()
    with pytest.raises(StartFailed) as info:
        c.list_tools()
    assert time.monotonic() - started < 2.0
    assert command in str(info.value)
    c.close()


def test_a_server_that_exits_at_once_fails_with_its_exit_code_and_stderr():
    script = "import sys\nsys.stderr.write('fatal: API_KEY is not set\\n')\nsys.exit(1)"
    c = Client.stdio(sys.executable, ["-c", script])
    started = time.monotonic()
    with pytest.raises(StartFailed) as info:
        c.list_tools()
    assert time.monotonic() - started < 2.0
    assert info.value.exit_code == 1
    assert "API_KEY is not set" in str(info.value) and sys.executable in str(info.value)
    c.close()


@pytest.mark.parametrize("mode", ["legacy", "modern"])
def test_answers_of_unusual_shape_come_out_as_the_general_decode_gives_them(mode):
    """The reader decodes the usual tools/call answer in one pass; every other shape takes
    the general path and comes out as before."""
    with raw_client("--misbehave", "result-and-error", mode=mode) as c:
        # invalid JSON-RPC (issue 31): a ProtocolError, counted by the breaker, not the error answer
        with pytest.raises(ProtocolError) as info:
            c.call_tool("bad", {})
        assert info.value.code == -32600 and "both a result and an error" in str(info.value)
        assert "-32603: raw: result and error" in str(info.value)
        assert not isinstance(info.value, RemoteError) and counts_as_breaker_failure(info.value)
        assert c.call_tool("echo", {"message": "after"}).text == "after"
    with raw_client("--misbehave", "extra-member", mode=mode) as c:
        assert c.call_tool("bad", {}).text == "extra ignored"
    with raw_client("--misbehave", "id-last", mode=mode) as c:
        assert c.call_tool("bad", {}).text == "id last"
    with raw_client("--misbehave", "empty-content", mode=mode) as c:
        r = c.call_tool("bad", {})
        assert r.content == [] and not r.is_error
    with raw_client("--misbehave", "unknown-content", mode=mode) as c:
        r = c.call_tool("bad", {})
        assert r.text == "and text" and len(r.content) == 2
