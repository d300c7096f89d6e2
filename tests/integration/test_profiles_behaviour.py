"""Each profile's behaviour, observed against real stdio servers (not just its settings).

Through the public constructor, ``Client.stdio(..., profile=...)``.
"""

from __future__ import annotations

import inspect
import json
import sys
from dataclasses import replace

import pytest

from mcpsync import Client, PoolLimits, Timeouts
from mcpsync._errors import CircuitOpen, ConnectError, ConnectionClosed, RequestTimeout, StartFailed
from mcpsync._profiles import PROFILES, ProfileError, check_transport
from tests.conftest import server_command
from tests.servers.chaos_support import is_gone

RAW = server_command("raw_server.py")
SILENT = server_command("raw_server.py", "--misbehave", "silent")
DEMO = [sys.executable, "-m", "mcpsync.server.demo"]
FAST = Timeouts(connect=5.0, request=0.3, close=1.0)


def _counts(result) -> dict:
    return json.loads(result.content[0].text)


def test_minimal_spawns_a_process_per_call():
    client = Client.stdio(RAW[0], RAW[1:], profile="minimal")
    assert type(client) is Client and client.pool == PoolLimits.PER_CALL  # a Client: its pool keeps nothing
    with client:  # connecting checks that the server starts: a process of its own, ended at once
        client.list_tools()  # another (the tools known: no call learns them after its answer)
        live, ended = [], []
        seen = []
        for _ in range(3):
            seen.append(_counts(client.call_tool("stats")))
            live += [c.pid for c in client.diagnostics().connections if c.alive]
            ended += [c.pid for c in client.diagnostics().connections]  # the newest, for its facts
        stats = client.pool_stats()
    # every call met a server that had seen nothing before it: its own process
    assert all(c.get("tools/call") == 1 for c in seen), seen
    assert all(c.get("initialize", 0) + c.get("server/discover", 0) >= 1 for c in seen)
    # each ended with its call (none left between calls), and was not counted as lost
    assert not live and len(set(ended)) == 3 and all(is_gone(pid) for pid in ended), (live, ended)
    assert (stats.created, stats.closed, stats.size, stats.discarded) == (5, 5, 0, 0), stats
    assert client.diagnostics().sessions_lost == 0


def test_enterprise_keeps_its_servers_between_calls():
    with Client.stdio(RAW[0], RAW[1:], profile="enterprise") as client:
        seen = [_counts(client.call_tool("stats")) for _ in range(3)]
    # three calls over at most max(pool) processes, but reused: some process served >= 2
    assert max(c["tools/call"] for c in seen) >= 2, seen


def test_minimal_retries_three_times_at_a_fixed_interval():
    """Each retry on a new process: a server that dies in the call (safe to repeat)."""
    fast = replace(PROFILES["minimal"].retry, backoff=0.05)
    crash = server_command("raw_server.py", "--misbehave", "exit")
    client = Client.stdio(crash[0], crash[1:], profile="minimal", retry=fast, timeouts=replace(FAST, request=5.0))
    with pytest.raises(ConnectionClosed) as info:
        client.call_tool("bad", retry_safe=True)
    history = info.value.retry_history
    assert [name for name, _ in history] == ["ConnectionClosed"] * 4  # the call + 3 retries
    assert [wait for _, wait in history][1:] == [0.05, 0.05, 0.05]  # fixed, no jitter
    stats = client.pool_stats()
    assert (stats.created, stats.discarded, stats.size) == (4, 4, 0), stats  # each died in its call
    assert client.diagnostics().sessions_lost == 0  # nothing lasted between calls to be lost
    client.close()


def test_minimal_does_not_retry_a_command_that_cannot_run():
    client = Client.stdio("/nonexistent/mcp-server", [], profile="minimal", timeouts=FAST)
    with pytest.raises(StartFailed) as info:
        client.call_tool("anything")
    assert len(getattr(info.value, "retry_history", ())) <= 1  # not retried
    assert client.pool_stats().created == 0
    client.close()


def test_minimal_has_no_breaker():
    # a call's timeout covers starting its process too: give the start room on a busy machine
    client = Client.stdio(SILENT[0], SILENT[1:], profile="minimal", timeouts=replace(FAST, request=2.0))
    for _ in range(7):  # past the breaker threshold of 5: still real attempts, never CircuitOpen
        with pytest.raises(RequestTimeout):
            client.call_tool("bad")
    stats = client.pool_stats()
    assert (stats.created, stats.closed) == (7, 7), stats
    client.close()


def test_enterprise_breaker_opens():
    with Client.stdio(SILENT[0], SILENT[1:], profile="enterprise", timeouts=FAST) as client:
        client.list_tools()
        errors = []
        for _ in range(7):
            try:
                client.call_tool("bad")
            except (RequestTimeout, CircuitOpen) as exc:
                errors.append(type(exc).__name__)
        assert errors[:5] == ["RequestTimeout"] * 5
        assert errors[5:] == ["CircuitOpen", "CircuitOpen"]
        assert client.breaker_state.value == "open"
        # other tools of the same server are refused too, until the cooldown
        with pytest.raises(CircuitOpen):
            client.call_tool("echo", {"message": "hi"})


def test_professional_keeps_one_session_and_pools_http_sockets():
    """SPEC: the profile's pool (2-5) is where connections are interchangeable; a stdio
    server is one process (its state is the user's data) unless pool= asks for more."""
    with Client.stdio(DEMO[0], DEMO[1:], profile="professional") as client:
        assert client.call_tool("add", {"a": 1, "b": 2}).structured_content == {"result": 3}
        assert (client.pool.min, client.pool.max) == (1, 1)
    with Client.stdio(DEMO[0], DEMO[1:], profile="professional", pool=PoolLimits(min=2, max=5)) as client:
        assert (client.pool.min, client.pool.max) == (2, 5)


def test_minimal_refuses_remote_transports():
    with pytest.raises(ProfileError, match="use profile='professional'"):
        check_transport("minimal", "http")
    check_transport("professional", "sse")
    with pytest.raises(ProfileError):
        check_transport("professional", "grpc")


def test_minimal_serves_a_real_tool_list_and_calls():
    with Client.stdio(DEMO[0], DEMO[1:], profile="minimal") as client:
        names = [t.name for t in client.list_tools()]
        assert "echo" in names
        assert client.call_tool("echo", {"message": "hi"}).content[0].text == "hi"
        assert client.pool_stats().created == 3  # connect(), the listing, the call


@pytest.mark.skipif("profile" not in inspect.signature(Client.stdio).parameters and "profile" not in inspect.signature(Client.__init__).parameters, reason="Client does not take profile= yet (lead integrates it)")
def test_public_constructor_takes_profile():
    client = Client.stdio(RAW[0], RAW[1:], profile="minimal")
    with client:
        seen = [_counts(client.call_tool("stats")) for _ in range(2)]
    assert all(c.get("tools/call") == 1 for c in seen)


def test_minimal_concurrent_calls_each_get_their_own_process():
    import threading

    client = Client.stdio(RAW[0], RAW[1:], profile="minimal")
    seen: list[dict] = []
    lock = threading.Lock()

    def worker() -> None:
        for _ in range(2):
            counts = _counts(client.call_tool("stats"))
            with lock:
                seen.append(counts)

    threads = [threading.Thread(target=worker) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)
    assert len(seen) == 8 and all(c.get("tools/call") == 1 for c in seen)
    stats = client.pool_stats()
    # the first call learns the tools after its answer (a process of its own); calls that
    # started before it knew them may each do the same
    assert 9 <= stats.created <= 12 and stats.size == 0, stats
    client.close()


def test_minimal_other_methods_run_per_call_and_session_features_are_refused():
    with Client.stdio(DEMO[0], DEMO[1:], profile="minimal") as client:
        resources = client.list_resources()
        assert any(getattr(r, "uri", None) == "demo://about" or (isinstance(r, dict) and r.get("uri") == "demo://about") for r in resources)
        assert client.pool_stats().created == 2  # connect(), the listing
        assert client.read_resource("demo://about").contents and client.pool_stats().created == 3
        with pytest.raises(ProfileError, match="needs a session that outlives one call"):
            client.subscribe("demo://about", lambda *a: None)
        assert client.pool_stats().created == 3


def test_minimal_delivers_progress_of_a_call():
    got = []
    with Client.stdio(RAW[0], RAW[1:], profile="minimal") as client:
        result = client.call_tool("progress", {"steps": 3}, progress=lambda p, total, message: got.append(p))
    assert result.content[0].text == "done"
    assert got == [1, 2, 3]


def test_professional_pool_never_exceeds_five_servers():
    import threading

    one_call_each = replace(PROFILES["professional"].pool, max_in_flight=1)  # a connection per concurrent call
    with Client.stdio(RAW[0], RAW[1:], profile="professional", pool=one_call_each) as client:
        client.list_tools()
        barrier = threading.Barrier(8)
        errors: list[BaseException] = []

        def worker() -> None:
            try:
                barrier.wait(10)
                client.call_tool("sleep", {"seconds": 0.3}, timeout=20)
            except BaseException as exc:  # pragma: no cover - reported below
                errors.append(exc)

        threads = [threading.Thread(target=worker) for _ in range(8)]
        for t in threads:
            t.start()
        for t in threads:
            t.join(30)
        stats = client.pool_stats()
        assert not errors, errors
        assert 2 <= stats.created <= 5, stats  # eight concurrent calls, at most five processes
