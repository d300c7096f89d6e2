"""Chaos over stdio: 16 threads call through one Client while a harness SIGKILLs its servers.

What a user would notice, and what is asserted:

* every call returns within its bound with a result or a typed ``MCPError`` (no hang,
  no foreign exception), and the counts add up: issued = succeeded + failed, each
  success carries its own unique message, nothing is lost or doubled (the servers'
  own log shows each unannotated call at most once);
* dead connections are replaced (the pool's ``created`` counter grows with the kills)
  and calls succeed again once the kills stop;
* the breaker opens under a fast kill rate and closes again afterwards, observed through
  ``on_breaker_change``: CLOSED→OPEN→HALF_OPEN→CLOSED (time-scaled BreakerPolicy);
* a command that starts then dies marks the server unavailable after the 6th failed
  reconnect, on the schedule 0, b, 2b, 4b, 8b; ``reconnect()`` clears it;
* retries respect side effects: a call that may have reached a dying server is retried
  only for a ``readOnlyHint`` tool (or on opt-in); ``exc.retry_history`` tells the attempts
  and ``exc.retried_errors`` the errors retried (each one, for an unannotated tool, of an
  attempt that never left the client);
* frozen (SIGSTOPped) servers: calls end with RequestTimeout, are not re-sent, and the
  same processes serve again after SIGCONT.

"""

from __future__ import annotations

import os
import random
import signal
import threading
import time
from collections import Counter
from pathlib import Path
from typing import Any, Callable

import pytest

from mcpsync import (
    BreakerPolicy,
    BreakerState,
    CircuitOpen,
    Client,
    ConnectError,
    ConnectionClosed,
    MCPError,
    PoolLimits,
    ReconnectPolicy,
    RequestTimeout,
    RetryPolicy,
    ServerUnavailable,
    Timeouts,
)
from tests.conftest import server_command
from tests.helpers import wait_until
from tests.servers.chaos_support import (
    ChaosLog,
    Tally,
    kill,
    noticed_dead,
    pool_pids,
    resent_after_reaching,
    wait_gone,
)

pytestmark = pytest.mark.timeout(60)

THREADS = 16
TIMEOUTS = Timeouts(connect=5.0, request=3.0, close=0.5)
RETRY = RetryPolicy(backoff=0.01, max_wait=0.5)
#: the count rule alone (no failure-rate condition: thousands of calls succeed around each
#: fault), so that the faults open the breaker and its OPEN / HALF_OPEN path is exercised
BREAKER = BreakerPolicy(threshold=5, window=2.0, cooldown=0.3, failure_rate=0.0)
RECONNECT = ReconnectPolicy(backoff=0.01)
#: the longest a call may take: every attempt's connect (retried once) and request
#: timeouts, the retry waits and the reconnect schedule, with room for a loaded host
CALL_BOUND = 2 * TIMEOUTS.connect + TIMEOUTS.request + RETRY.max_wait + sum(RECONNECT.schedule()) + 3.0
#: the errors a call may end with while its servers are being killed
CHAOS_ERRORS = (ConnectionClosed, CircuitOpen, ConnectError, RequestTimeout)
B = BreakerState


def run_callers(client: Client, tally: Tally, stop: threading.Event, calm: threading.Event,
                call: Callable[[Client, str], str], max_calls: int = 4000) -> list[threading.Thread]:
    """Start THREADS callers; each makes unique keys, records every outcome."""
    start = threading.Barrier(THREADS + 1)

    def worker(t: int) -> None:
        start.wait(10)
        ends = time.monotonic() + 180  # bounded in time as well as in count
        calm_from = None  # the count at which the calm came: it opens a budget of its own
        for i in range(2 * max_calls):
            if stop.is_set() or time.monotonic() > ends:
                return
            if calm_from is None and calm.is_set():
                calm_from = i
            if calm_from is None and i >= max_calls:
                # spent before the chaos ended (a fast machine): wait for the calm rather than
                # end, so that every thread takes part in the recovery
                if not calm.wait(max(0.0, ends - time.monotonic())):
                    return
                calm_from = i
            if calm_from is not None and i - calm_from >= max_calls:
                return
            key = f"t{t}-c{i}"
            after_calm = calm_from is not None
            with tally.lock:
                tally.issued.append(key)
            began = time.monotonic()
            try:
                text = call(client, key)
            except MCPError as exc:
                with tally.lock:
                    tally.failed[key] = exc
                    tally.durations.append(time.monotonic() - began)
                    tally.took[key] = tally.durations[-1]
                # an open breaker fails fast and says when it will try again: wait as an agent
                # would (not spinning the shared cores, nor spending the call budget before
                # the calm comes on a loaded machine)
                pause = getattr(exc, "retry_after", None) if isinstance(exc, CircuitOpen) else None
                time.sleep(min(max(pause or 0.0, 0.005), 0.25))
                continue
            except BaseException as exc:  # noqa: BLE001 - an untyped error is a failure of the test
                with tally.lock:
                    tally.failed[key] = exc
                raise
            with tally.lock:
                tally.ok[key] = text
                tally.durations.append(time.monotonic() - began)
                tally.took[key] = tally.durations[-1]
                if after_calm:
                    tally.ok_after[t] = tally.ok_after.get(t, 0) + 1

    threads = [threading.Thread(target=worker, args=(t,), name=f"chaos-{t}", daemon=True) for t in range(THREADS)]
    for th in threads:
        th.start()
    start.wait(10)
    return threads


def join_all(threads: list[threading.Thread], timeout: float) -> None:
    deadline = time.monotonic() + timeout
    for th in threads:
        th.join(max(0.0, deadline - time.monotonic()))
    hung = [th.name for th in threads if th.is_alive()]
    assert not hung, f"callers never returned (a call hung): {hung}"


def kill_randomly(client: Client, rng: random.Random, kills: int, gap: tuple[float, float]) -> list[int]:
    """SIGKILL a random live server of the pool ``kills`` times (each a different one); return
    the pids killed.

    A server killed while no call used it stays in the pool until the client notices: it is
    never picked twice (two kills of one connection would cost the pool one connection).
    """
    killed: list[int] = []

    def fresh() -> list[int]:
        return [p for p in pool_pids(client) if p not in killed]

    deadline = time.monotonic() + 30
    while len(killed) < kills and time.monotonic() < deadline:
        time.sleep(rng.uniform(*gap))
        pids = fresh()
        while not pids and time.monotonic() < deadline:
            # every server is down and the callers may have finished their share (or be
            # waiting out a breaker): ask for one, as the next caller would, then look again
            try:
                client.ping(timeout=max(0.1, min(5.0, deadline - time.monotonic())))
            except MCPError:
                pass
            pids = fresh()
        if pids:
            pid = rng.choice(pids)
            if kill(pid):
                killed.append(pid)
    return killed


def check_tally(tally: Tally, expect: Callable[[str], str] = lambda key: key) -> None:
    """Counts add up, every success is its own answer, every failure is typed and bounded."""
    assert len(tally.issued) == len(set(tally.issued)), "a key was issued twice"
    assert len(tally.issued) == len(tally.ok) + len(tally.failed), tally.summary()
    assert not set(tally.ok) & set(tally.failed), "a call both succeeded and failed"
    wrong = [(k, v) for k, v in tally.ok.items() if v != expect(k)]
    assert not wrong, f"answers reached the wrong caller: {wrong[:5]}"
    untyped = [(k, e) for k, e in tally.failed.items() if not isinstance(e, MCPError)]
    assert not untyped, f"untyped errors: {untyped[:5]}"
    odd = [(k, e) for k, e in tally.failed.items() if not isinstance(e, CHAOS_ERRORS)]
    assert not odd, f"unexpected error types: {odd[:5]}"
    slow = [d for d in tally.durations if d > CALL_BOUND]
    assert not slow, f"{len(slow)} calls outlived their bound of {CALL_BOUND:.1f} s (max {max(slow):.1f} s)"


def echo(client: Client, key: str) -> str:
    return client.call_tool("echo", {"message": key}).text


def test_sixteen_threads_while_servers_are_killed() -> None:
    """raw_server.py killed at random under load: counts add up, reconnection, breaker cycle."""
    seed = random.randrange(1 << 30)
    rng = random.Random(seed)
    changes: list[tuple[B, B]] = []
    records: list[tuple[str | None, str]] = []
    cmd = server_command("raw_server.py")
    client = Client.stdio(
        cmd[0], cmd[1:], mode="legacy", name="raw",
        timeouts=TIMEOUTS, retry=RETRY, breaker=BREAKER, reconnect=RECONNECT, pool=PoolLimits(min=2, max=4),
        on_breaker_change=lambda old, new: changes.append((old, new)),
        record=lambda server, tool, start, end, outcome: records.append((tool, outcome)),  # atomic append
    )
    tally = Tally()
    stop, calm = threading.Event(), threading.Event()
    try:
        assert echo(client, "warm-up") == "warm-up"
        created0 = client.pool_stats().created
        threads = run_callers(client, tally, stop, calm, echo)
        killed = kill_randomly(client, rng, kills=10, gap=(0.1, 0.35))
        calm.set()
        # after the kills: every thread gets through again (bounded)
        recovered = wait_until(lambda: len(tally.ok_after) == THREADS and min(tally.ok_after.values()) >= 5, 45)
        stop.set()
        join_all(threads, CALL_BOUND + 5)
        stats = client.pool_stats()
        history = list(client.diagnostics().breaker_transitions)
        final_state = client.breaker_state
    finally:
        stop.set()
        client.close()

    info = f"seed={seed} {tally.summary()} kills={len(killed)} stats={stats} transitions={history}"
    assert len(killed) == 10, info
    check_tally(tally)
    assert recovered, f"calls did not succeed again after the kills stopped: {tally.ok_after} {info}"
    # no unannotated call was retried after it may have reached a dying server (a retry
    # after an attempt that never left the client, e.g. on a connection found dead before
    # writing, is allowed)
    resent = resent_after_reaching(tally.failed)
    assert not resent, f"echo was retried after it may have reached the server: {resent[:3]} {info}"
    assert any(isinstance(e, ConnectionClosed) for e in tally.failed.values()), f"no kill hit a call: {info}"
    # reconnection: each kill cost a connection, and a new one replaced it
    assert stats.created - created0 >= len(killed), info
    assert stats.discarded >= len(killed), info
    assert stats.in_use == 0, f"leaked leases: {info}"
    # on schedule: a killed stdio server restarts at once, so every rebuild succeeded on
    # its first (immediate) attempt and no reconnect failure was counted
    assert not client.diagnostics().reconnect_history and not client.unavailable, client.diagnostics().reconnect_history
    # metrics: one record per echo call under its tool (hidden tools/list calls apart),
    # outcomes matching what the callers saw (+ the warm-up)
    outcomes = Counter(outcome for tool, outcome in records if tool == "echo")
    assert sum(outcomes.values()) == len(tally.issued) + 1, (Counter(records), info)
    assert outcomes["success"] == len(tally.ok) + 1, (outcomes, info)
    # the breaker opened under the kills and closed again, observed by the callback
    assert (B.CLOSED, B.OPEN) in changes and (B.OPEN, B.HALF_OPEN) in changes, info
    assert (B.HALF_OPEN, B.CLOSED) in changes, info
    assert len(changes) == len(history), "the callback missed transitions"
    assert history[-1] == (B.HALF_OPEN, B.CLOSED) and final_state is B.CLOSED, info
    for old, new in history:  # only the transitions of the state machine
        assert (old, new) in {(B.CLOSED, B.OPEN), (B.OPEN, B.HALF_OPEN), (B.HALF_OPEN, B.CLOSED), (B.HALF_OPEN, B.OPEN)}, info
    opened = [e for e in tally.failed.values() if isinstance(e, CircuitOpen)]
    assert opened and all(0 <= e.retry_after <= BREAKER.cooldown for e in opened), info


def chaos_client(tmp_path: Path, *extra: str, **options: Any) -> tuple[Client, Path]:
    log = tmp_path / "calls.log"
    cmd = server_command("chaos_server.py", "--log", str(log), *extra)
    options.setdefault("timeouts", TIMEOUTS)
    options.setdefault("retry", RETRY)
    options.setdefault("reconnect", RECONNECT)
    return Client.stdio(cmd[0], cmd[1:], mode="legacy", name="chaos", **options), log


def test_no_duplicated_side_effects_under_kills(tmp_path: Path) -> None:
    """Half the calls are unannotated (echo), half read-only (lookup): under kills the servers
    see each echo at most once, each successful echo exactly once; lookups are retried."""
    seed = random.randrange(1 << 30)
    rng = random.Random(seed)
    # a breaker that never opens here, so that every retry the policy allows is made
    client, log_path = chaos_client(tmp_path, breaker=BreakerPolicy(threshold=10**6), pool=PoolLimits(min=2, max=4))
    tally = Tally()
    stop, calm = threading.Event(), threading.Event()

    def call(c: Client, key: str) -> str:
        tool = "echo" if int(key.rsplit("c", 1)[1]) % 2 == 0 else "lookup"
        return c.call_tool(tool, {"key": key}).text

    try:
        assert {"echo", "lookup"} <= {t.name for t in client.list_tools()}  # annotations known
        threads = run_callers(client, tally, stop, calm, call, max_calls=1500)
        killed = kill_randomly(client, rng, kills=8, gap=(0.1, 0.3))
        calm.set()
        wait_until(lambda: len(tally.ok_after) == THREADS and min(tally.ok_after.values()) >= 3, 45)
        stop.set()
        join_all(threads, CALL_BOUND + 5)
    finally:
        stop.set()
        client.close()
    log = ChaosLog.read(log_path)
    info = f"seed={seed} {tally.summary()} kills={len(killed)}"
    check_tally(tally)
    assert len(killed) == 8, info
    echoes = log.seen("echo")
    doubled = [k for k, n in echoes.items() if n > 1]
    assert not doubled, f"echo (no annotations) reached a server twice: {doubled[:5]} {info}"
    lookups = log.seen("lookup")
    unseen = [k for k in tally.ok if (echoes if int(k.rsplit("c", 1)[1]) % 2 == 0 else lookups)[k] < 1]
    assert not unseen, f"calls succeeded that no server saw: {unseen[:5]}"
    # lookups that failed were retried when the failure may have reached the server
    lookup_failures = [e for k, e in tally.failed.items() if int(k.rsplit("c", 1)[1]) % 2 == 1]
    # read-only calls may be retried (a server may see one twice: harmless by declaration);
    # that they are retried at all after a reconnect is
    # test_read_only_tool_is_retried_after_a_reconnect's subject
    print(f"lookups failed: {len(lookup_failures)}; executed twice: {sum(n > 1 for n in lookups.values())}")
    resent = resent_after_reaching({k: e for k, e in tally.failed.items() if int(k.rsplit("c", 1)[1]) % 2 == 0})
    assert not resent, f"echo was retried after it may have reached the server: {resent[:3]}"
    assert len(log.starts) >= 1 + len(killed), info


def test_read_only_call_is_retried_unannotated_is_not(tmp_path: Path) -> None:
    """A tool call that kills its server: retried for readOnlyHint, not retried without."""
    client, log_path = chaos_client(tmp_path, pool=PoolLimits(min=1, max=1))
    with client:
        client.list_tools()
        safe = tmp_path / "safe.marker"
        r = client.call_tool("die_once", {"token": str(safe)})
        assert r.text == f"survived {safe}"
        unsafe = tmp_path / "unsafe.marker"
        with pytest.raises(ConnectionClosed) as info:
            client.call_tool("die_once_unsafe", {"token": str(unsafe)})
        assert info.value.retry_history == (("ConnectionClosed", 0.0),)
        # the caller may opt in: then the same kind of call is retried and succeeds
        opt_in = tmp_path / "opt-in.marker"
        r = client.call_tool("die_once_unsafe", {"token": str(opt_in)}, retry_safe=True)
        assert r.text == f"survived {opt_in}"
        assert client.call_tool("echo", {"key": "after"}).text == "after"
    log = ChaosLog.read(log_path)
    assert log.seen("die_once")[str(safe)] == 2  # the first attempt died, the retry answered
    assert log.seen("die_once_unsafe")[str(unsafe)] == 1  # never sent twice
    assert log.seen("die_once_unsafe")[str(opt_in)] == 2
    assert len({pid for pid, tool, _ in log.calls if tool == "die_once"}) == 2  # on a new process


def test_read_only_tool_is_retried_after_a_reconnect(tmp_path: Path) -> None:
    client, log_path = chaos_client(tmp_path, pool=PoolLimits(min=1, max=1))
    with client:
        assert client.list_tools()  # annotations known: die_once is read-only
        pids = pool_pids(client)
        kill(pids[0])
        assert wait_until(lambda: noticed_dead(client, pids), 5)
        assert client.call_tool("echo", {"key": "reconnected"}).text == "reconnected"  # new process
        token = tmp_path / "after-reconnect.marker"
        r = client.call_tool("die_once", {"token": str(token)})  # kills its server once
        assert r.text == f"survived {token}"
    assert ChaosLog.read(log_path).seen("die_once")[str(token)] == 2


def test_unavailable_after_sixth_failed_reconnect_and_reconnect_clears_it(tmp_path: Path) -> None:
    """Kill the server while its command now fails at once: 6 failed reconnects on the
    schedule, then ServerUnavailable for every caller without new processes, until reconnect()."""
    marker = tmp_path / "broken"
    told: list[ServerUnavailable] = []
    client, log_path = chaos_client(
        tmp_path, "--fail-if", str(marker), pool=PoolLimits(min=2, max=4),
        breaker=BreakerPolicy(threshold=10**6), on_unavailable=told.append,
    )
    with client:
        assert client.call_tool("echo", {"key": "first"}).text == "first"
        before = pool_pids(client)
        marker.touch()
        for pid in before:
            kill(pid)
        assert not wait_gone(before, 5)
        assert wait_until(lambda: not pool_pids(client), 5)
        starts_before = len(ChaosLog.read(log_path).starts)
        errors: list[BaseException] = []
        lock = threading.Lock()

        def caller() -> None:
            try:
                client.call_tool("echo", {"key": "x"})
            except MCPError as exc:
                with lock:
                    errors.append(exc)

        threads = [threading.Thread(target=caller, daemon=True) for _ in range(THREADS)]
        for th in threads:
            th.start()
        join_all(threads, CALL_BOUND * 2)
        assert len(errors) == THREADS
        assert all(isinstance(e, (ServerUnavailable, ConnectionClosed)) for e in errors), errors
        assert any(isinstance(e, ServerUnavailable) for e in errors)
        assert client.unavailable
        assert len(told) == 1 and told[0].failures == RECONNECT.max_failures
        # the schedule: failures 1..5 waited 0, b, 2b, 4b, 8b; the 6th marked it
        history = client.diagnostics().reconnect_history
        sched = [d for _, d in history]
        assert sched == [*RECONNECT.schedule(), None], history
        spawned = len(ChaosLog.read(log_path).starts) - starts_before
        # 6 failed connects, one process each (a process that exits is not restarted within
        # an attempt: only a connect that timed out is tried twice); one outage counted once
        assert spawned == RECONNECT.max_failures, spawned
        # from now on: at once, and no process is started
        with pytest.raises(ServerUnavailable):
            client.call_tool("echo", {"key": "y"})
        assert len(ChaosLog.read(log_path).starts) - starts_before == spawned
        # the server is fixed; reconnect() clears the mark
        marker.unlink()
        client.reconnect()
        assert not client.unavailable
        assert client.call_tool("echo", {"key": "back"}).text == "back"
        assert client.breaker_state is B.CLOSED
        assert set(pool_pids(client)).isdisjoint(before)


def test_calls_stay_bounded_while_reconnects_hang(tmp_path: Path) -> None:
    """The server is killed and its command now hangs before the handshake: each call must
    end within its own bound (borrow timeout + one connect, retried once), with a typed error."""
    marker = tmp_path / "hang"
    timeouts = Timeouts(connect=1.0, request=1.0, close=0.1)
    client, log_path = chaos_client(
        tmp_path, "--hang-if", str(marker), timeouts=timeouts,
        pool=PoolLimits(min=2, max=2, borrow_timeout=1.0), breaker=BreakerPolicy(threshold=10**6),
        retry=RetryPolicy.NONE,  # one attempt per call: the bound below is that attempt's
    )
    bound = timeouts.request + 2 * timeouts.connect + 3.0  # 6 s; the schedule takes >= 13 s here
    outcomes: list[object] = []
    threads: list[threading.Thread] = []
    try:
        assert client.call_tool("echo", {"key": "first"}).text == "first"
        before = pool_pids(client)
        marker.touch()
        for pid in before:
            kill(pid)
        assert wait_until(lambda: noticed_dead(client, before), 5)

        def caller(i: int) -> None:
            try:
                outcomes.append(client.call_tool("echo", {"key": f"k{i}"}, timeout=timeouts.request).text)
            except MCPError as exc:
                outcomes.append(exc)

        threads = [threading.Thread(target=caller, args=(i,), daemon=True) for i in range(4)]
        for th in threads:
            th.start()
        deadline = time.monotonic() + bound
        for th in threads:
            th.join(max(0.0, deadline - time.monotonic()))
        late = [th.name for th in threads if th.is_alive()]
    finally:
        marker.unlink(missing_ok=True)  # let a still-running rebuild finish quickly
        for th in threads:
            th.join(30)
        client.close()
    assert not late, f"calls still waiting after {bound:.0f} s (their bound): {late}; ended: {outcomes}"
    assert all(isinstance(o, MCPError) for o in outcomes), outcomes


def test_frozen_servers_time_out_then_recover() -> None:
    """SIGSTOP every server (alive, silent): calls end with RequestTimeout within their
    bound, the breaker opens; after SIGCONT the same processes answer again and it closes."""
    changes: list[tuple[B, B]] = []
    cmd = server_command("raw_server.py")
    timeouts = Timeouts(connect=5.0, request=1.0, close=0.5)
    client = Client.stdio(
        cmd[0], cmd[1:], mode="legacy", name="raw", timeouts=timeouts, retry=RETRY, breaker=BREAKER,
        reconnect=RECONNECT, pool=PoolLimits(min=2, max=4),
        on_breaker_change=lambda old, new: changes.append((old, new)),
    )
    tally = Tally()
    stop, calm = threading.Event(), threading.Event()
    frozen: list[int] = []
    try:
        assert echo(client, "warm-up") == "warm-up"
        threads = run_callers(client, tally, stop, calm, echo)
        time.sleep(0.3)
        frozen = pool_pids(client)
        for pid in frozen:
            os.kill(pid, signal.SIGSTOP)
        try:
            wait_until(lambda: sum(isinstance(e, RequestTimeout) for e in tally.failed.values()) >= THREADS, 8)
        finally:
            for pid in frozen:
                os.kill(pid, signal.SIGCONT)
        calm.set()
        recovered = wait_until(lambda: len(tally.ok_after) == THREADS and min(tally.ok_after.values()) >= 3, 45)
        stop.set()
        join_all(threads, CALL_BOUND + 5)
        survivors = pool_pids(client)
    finally:
        stop.set()
        client.close()
    info = tally.summary()
    check_tally(tally)
    timeouts_seen = [e for e in tally.failed.values() if isinstance(e, RequestTimeout)]
    assert len(timeouts_seen) >= THREADS, info
    # an unannotated call that timed out may have run on the server: never re-sent
    resent = resent_after_reaching(tally.failed)
    assert not resent, [(k, repr(tally.failed[k]), [repr(e) for e in tally.failed[k].retried_errors]) for k in resent[:3]]
    assert recovered, info
    assert set(frozen) & set(survivors), "a frozen (not dead) server was replaced"
    assert (B.CLOSED, B.OPEN) in changes and changes[-1] == (B.HALF_OPEN, B.CLOSED), changes


def test_failed_call_is_recorded_under_its_tool() -> None:
    """A call_tool that fails while its tool cache is empty (its hidden tools/list fails
    too) is still recorded once under its own tool (SPEC: every call_tool records ...)."""
    records: list[tuple[str | None, str]] = []
    cmd = server_command("raw_server.py")
    client = Client.stdio(cmd[0], cmd[1:], mode="legacy", name="raw", breaker=BreakerPolicy(threshold=1, cooldown=30),
                          record=lambda server, tool, start, end, outcome: records.append((tool, outcome)))
    with client:
        client._session.guard.breaker.release(None, ConnectionClosed("a connection died"))  # threshold 1: OPEN
        assert client.breaker_state is B.OPEN
        with pytest.raises(CircuitOpen):
            client.call_tool("echo", {"message": "x"})
    assert ("echo", "error") in records, records
