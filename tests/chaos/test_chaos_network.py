"""Chaos over the network: a TCP proxy on 127.0.0.1 cuts connections at random, refuses
new ones for a while, and the upstream server is restarted, while 16 threads call
through one Client.

Transports: Streamable HTTP against the official SDK server (``tests/servers/sdk_server.py
http PORT``; both eras), and WebSocket and gRPC against the mcpsync bridge
(``python -m mcpsync.server.bridge``) relaying to ``tests/servers/chaos_server.py``,
whose call log shows what each upstream process really executed.

Asserted, as over stdio: every call ends within its bound with a result or a typed
``MCPError``; issued = succeeded + failed; every success is its own answer; unannotated
calls are never re-sent after they may have reached the server (and, through the bridge,
the servers' log shows each at most once); connections are rebuilt (the proxy accepts
new ones, the pool's ``created`` grows); calls succeed again after the chaos stops; the
breaker opened and closed again (CLOSED→OPEN→HALF_OPEN→CLOSED). A frozen (SIGSTOPped)
upstream makes calls end with RequestTimeout and the client recover after SIGCONT; a
Streamable HTTP call cut after it reached the server must not be re-sent (its server,
``tests/servers/chaos_http_server.py``, logs every execution).
"""

from __future__ import annotations

import importlib
import os
import random
import select
import signal
import subprocess
import sys
import threading
import time
from collections import Counter
from pathlib import Path
from typing import Any, Callable, Iterator

import pytest

from mcpsync import (
    BreakerPolicy,
    BreakerState,
    Client,
    ConnectError,
    MCPError,
    NetworkError,
    PoolLimits,
    PoolTimeout,
    ReconnectPolicy,
    RequestTimeout,
    RetryPolicy,
    Timeouts,
)
from tests.chaos.proxy import ChaosProxy
from tests.chaos.test_chaos_stdio import THREADS, join_all, run_callers
from tests.conftest import ROOT, free_port, server_command
from tests.helpers import wait_until
from tests.servers.chaos_support import ChaosLog, Tally, resent_after_reaching

#: what a call that met a frozen server ends with: a timeout, in flight or waiting for a slot
TIMED_OUT = (RequestTimeout, PoolTimeout)

pytestmark = pytest.mark.timeout(90)

B = BreakerState
TIMEOUTS = Timeouts(connect=3.0, request=4.0, close=0.5)
RETRY = RetryPolicy(backoff=0.01, max_wait=0.5)
#: the count rule alone (no failure-rate condition: thousands of calls succeed around each
#: fault), so that the faults open the breaker and its OPEN / HALF_OPEN path is exercised
BREAKER = BreakerPolicy(threshold=5, window=2.0, cooldown=0.3, failure_rate=0.0)
RECONNECT = ReconnectPolicy(backoff=0.01, max_failures=6)
CALL_BOUND = 2 * TIMEOUTS.connect + TIMEOUTS.request + RETRY.max_wait + sum(RECONNECT.schedule()) + 3.0
#: what a call may end with while its connections are cut: network errors only
#: (ServerUnavailable too: reconnection may give up while the upstream restarts)
NETWORK_ERRORS = (NetworkError,)


# ----------------------------------------------------------------------------- upstreams


class Upstream:
    """A server subprocess on fixed ports (so that a restart comes back at the same address)."""

    def __init__(self, argv: Callable[[], list[str]], ready: Callable[["Upstream"], bool], ports: dict[str, int]) -> None:
        self._argv = argv
        self._ready = ready
        self.ports = ports
        self.proc: subprocess.Popen[bytes] | None = None
        self.restarts = 0

    def start(self) -> None:
        self.proc = subprocess.Popen(
            self._argv(), cwd=ROOT, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL, start_new_session=True,
        )
        if not self._ready(self):
            self.stop()
            raise RuntimeError(f"upstream {self._argv()} did not start")
        # keep draining its stdout (access logs): a full pipe would stall the server
        threading.Thread(target=_drain, args=(self.proc.stdout,), name="upstream-stdout", daemon=True).start()

    def stop(self) -> None:
        proc = self.proc
        if proc is not None and proc.poll() is None:
            try:
                os.killpg(proc.pid, signal.SIGKILL)  # the server and (bridge) its children
            except ProcessLookupError:
                pass
        if proc is not None:
            proc.wait(10)

    def restart(self) -> None:
        self.stop()
        self.start()
        self.restarts += 1


def _drain(stream: Any) -> None:
    try:
        while stream.read1(65536) if hasattr(stream, "read1") else stream.read(65536):
            pass
    except (OSError, ValueError):
        pass


def _port_open(port: int, proc: subprocess.Popen[bytes], timeout: float = 20.0) -> bool:
    import socket

    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            return False
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=0.2):
                return True
        except OSError:
            time.sleep(0.05)
    return False


def _bridge_ready(up: Upstream, timeout: float = 20.0) -> bool:
    """The bridge prints ``mcpsync-bridge: upstream ...`` once it listens."""
    assert up.proc is not None and up.proc.stdout is not None
    fd = up.proc.stdout.fileno()
    deadline = time.monotonic() + timeout
    buf = b""
    while time.monotonic() < deadline:
        r, _, _ = select.select([fd], [], [], 0.2)
        if r:
            chunk = os.read(fd, 4096)
            if not chunk:
                return False
            buf += chunk
            if b"mcpsync-bridge: upstream" in buf:
                return True
        elif up.proc.poll() is not None:
            return False
    return False


def _missing(modules: dict[str, str]) -> str | None:
    """The reason to skip, naming the first module that does not import (None: all do)."""
    for module, why in modules.items():
        try:
            importlib.import_module(module)
        except ImportError as exc:
            return f"{why}: {exc}"
    return None


def _missing_bridge_piece() -> str | None:
    return _missing({
        "websockets": "the bridge's WebSocket side needs the 'websockets' package",
        "grpc": "GrpcTransport and the bridge's gRPC side need 'grpcio'",
        "mcpsync.server.bridge": "mcpsync/server/bridge.py does not import",
        "mcpsync.transports.websocket": "mcpsync/transports/websocket.py does not import",
        "mcpsync.transports.grpc": "mcpsync/transports/grpc.py does not import",
    })


def _missing_http_piece() -> str | None:
    return _missing({
        "mcp.server.mcpserver": "tests/servers/sdk_server.py needs the official 'mcp' SDK with MCPServer",
        "mcpsync.transports.streamable_http": "mcpsync/transports/streamable_http.py does not import",
    })


# ----------------------------------------------------------------------------- the cases


class Case:
    """How to run one transport's chaos: the upstream, the client factory, the tool."""

    def __init__(self, name: str, tmp: Path) -> None:
        self.name = name
        self.log: Path | None = None
        if name.startswith("http"):
            missing = _missing_http_piece()
            if missing:
                pytest.skip(missing)
            port = free_port()
            self.upstream = Upstream(lambda: server_command("sdk_server.py", "http", str(port)),
                                     lambda up: _port_open(port, up.proc), {"http": port})
            self.mode = "legacy" if name == "http-legacy" else "modern"
            self.tool, self.key = "echo", "message"
        else:
            missing = _missing_bridge_piece()
            if missing:
                pytest.skip(missing)
            self.log = tmp / "calls.log"
            ws, gr = free_port(), free_port()
            upstream_cmd = server_command("chaos_server.py", "--log", str(self.log))
            self.upstream = Upstream(
                lambda: [sys.executable, "-m", "mcpsync.server.bridge", "-q", "--websocket", f"127.0.0.1:{ws}",
                         "--grpc", f"127.0.0.1:{gr}", "--", *upstream_cmd],
                _bridge_ready, {"websocket": ws, "grpc": gr},
            )
            self.mode = "legacy"
            self.tool, self.key = "echo", "key"

    def port(self) -> int:
        return self.upstream.ports["http" if self.name.startswith("http") else self.name]

    def client(self, proxy_port: int, **options: Any) -> Client:
        """A Client through the proxy, made with the public constructor a user would use
        (HTTP keeps its default pool: one transport, urllib3 pooling the TCP connections)."""
        options.setdefault("mode", self.mode)
        options.setdefault("name", self.name)
        if self.name.startswith("http"):
            options.pop("pool", None)
            return Client.http(f"http://127.0.0.1:{proxy_port}/mcp", **options)
        if self.name == "websocket":
            return Client.websocket(f"ws://127.0.0.1:{proxy_port}/", **options)
        return Client.grpc(f"127.0.0.1:{proxy_port}", **options)


@pytest.fixture
def case(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Case]:
    c = Case(request.param, tmp_path)
    c.upstream.start()
    try:
        yield c
    finally:
        c.upstream.stop()


def chaos_monkey(proxy: ChaosProxy, case: Case, rng: random.Random, rounds: int, restarts: int) -> Counter[str]:
    """Cut all connections, refuse for a while, restart the upstream: ``rounds`` actions."""
    done: Counter[str] = Counter()
    restart_at = set(rng.sample(range(2, rounds), restarts)) if restarts else set()
    for i in range(rounds):
        time.sleep(rng.uniform(0.15, 0.4))
        if i in restart_at:
            case.upstream.restart()
            done["restart"] += 1
        elif rng.random() < 0.25:
            proxy.refuse(rng.uniform(0.1, 0.4))
            proxy.cut_all(rng=rng)
            done["refuse+cut"] += 1
        else:
            done["cut"] += proxy.cut_all(rng=rng) > 0
            done["rounds"] += 1
    return done


@pytest.mark.parametrize("case", ["http-modern", "http-legacy", "websocket", "grpc"], indirect=True)
def test_sixteen_threads_while_the_network_is_cut(case: Case) -> None:
    seed = random.randrange(1 << 30)
    rng = random.Random(seed)
    changes: list[tuple[B, B]] = []
    with ChaosProxy(("127.0.0.1", case.port())) as proxy:
        client = case.client(
            proxy.port, timeouts=TIMEOUTS, retry=RETRY, breaker=BREAKER, reconnect=RECONNECT, pool=PoolLimits(min=2, max=4),
            on_breaker_change=lambda old, new: changes.append((old, new)),
        )
        tally = Tally()
        stop, calm = threading.Event(), threading.Event()

        def call(c: Client, key: str) -> str:
            return c.call_tool(case.tool, {case.key: key}).text

        try:
            assert call(client, "warm-up") == "warm-up"
            created0, accepted0 = client.pool_stats().created, proxy.accepted
            threads = run_callers(client, tally, stop, calm, call, max_calls=3000)
            actions = chaos_monkey(proxy, case, rng, rounds=8, restarts=1)
            calm.set()
            # the chaos is over. The server may have been marked unavailable (reconnection
            # gave up while the upstream restarted): a user calls reconnect(), so does this
            marked = [False]

            def back() -> bool:
                if client.unavailable:
                    marked[0] = True
                    client.reconnect()
                return len(tally.ok_after) == THREADS and min(tally.ok_after.values()) >= 3

            recovered = wait_until(back, 45, interval=0.05)
            stop.set()
            join_all(threads, CALL_BOUND + 5)
            stats = client.pool_stats()
            history = list(client.diagnostics().breaker_transitions)
            final_state = client.breaker_state
            unavailable = client.unavailable
        finally:
            stop.set()
            client.close()
    info = (f"{case.name} seed={seed} {tally.summary()} actions={dict(actions)} stats={stats} "
            f"unavailable-then-reconnect={marked[0]} transitions={history}")
    print(info, "longest calls:", sorted(tally.durations)[-3:])
    # the counts add up; every success is its own answer; every failure typed and bounded
    assert len(tally.issued) == len(tally.ok) + len(tally.failed), info
    wrong = [(k, v) for k, v in tally.ok.items() if v != k]
    assert not wrong, f"answers reached the wrong caller: {wrong[:5]}"
    odd = [(k, repr(e)) for k, e in tally.failed.items() if not isinstance(e, NETWORK_ERRORS)]
    assert not odd, f"errors that are not network errors: {odd[:5]} {info}"
    slow = [d for d in tally.durations if d > CALL_BOUND]
    assert not slow, f"calls outlived their bound {CALL_BOUND:.1f} s: max {max(slow):.1f} s {info}"
    assert recovered, f"calls did not succeed again after the chaos: {tally.ok_after} {tally.laggards(THREADS, 3)} {info}"
    assert not unavailable, info
    # reconnection: new TCP connections were accepted and the pool replaced its connections
    assert proxy.accepted > accepted0, info
    assert stats.in_use == 0, f"leaked leases: {info}"
    # no unannotated call re-sent after it may have reached the server
    resent = resent_after_reaching(tally.failed)
    assert not resent, f"echo was retried after it may have reached the server: {resent[:3]}"
    if case.log is not None:
        seen = ChaosLog.read(case.log).seen("echo")
        doubled = [k for k, n in seen.items() if n > 1]
        assert not doubled, f"a server executed an echo twice: {doubled[:5]} {info}"
        unseen = [k for k in tally.ok if seen[k] < 1]
        assert not unseen, f"successes no server executed: {unseen[:5]}"
    # the breaker opened under the cuts and closed again: by a successful trial call after
    # its cooldown, or by the reconnect() that cleared an unavailable mark (a reset)
    assert (B.CLOSED, B.OPEN) in changes, info
    cycled = (B.OPEN, B.HALF_OPEN) in changes and (B.HALF_OPEN, B.CLOSED) in changes
    assert cycled or (marked[0] and (B.OPEN, B.CLOSED) in changes), info
    assert final_state is B.CLOSED, info
    assert stats.created > created0 or case.name.startswith("http"), info


@pytest.mark.parametrize("case", ["http-modern", "http-legacy", "websocket", "grpc"], indirect=True)
def test_frozen_upstream_calls_end_with_timeouts_then_recover(case: Case) -> None:
    """SIGSTOP the upstream (TCP still accepts, nothing answers): every call in flight or
    issued meanwhile ends with a typed error within its bound; after SIGCONT calls succeed."""
    timeouts = Timeouts(connect=1.0, request=1.0, close=0.5)
    with ChaosProxy(("127.0.0.1", case.port())) as proxy:
        client = case.client(
            proxy.port, timeouts=timeouts,
            retry=RETRY, breaker=BREAKER, reconnect=RECONNECT,
            pool=PoolLimits(min=2, max=4),
        )
        tally = Tally()
        stop, calm = threading.Event(), threading.Event()

        def call(c: Client, key: str) -> str:
            return c.call_tool(case.tool, {case.key: key}).text

        assert case.upstream.proc is not None
        try:
            assert call(client, "warm-up") == "warm-up"
            threads = run_callers(client, tally, stop, calm, call, max_calls=3000)
            time.sleep(0.3)
            os.killpg(case.upstream.proc.pid, signal.SIGSTOP)
            try:
                wait_until(lambda: sum(isinstance(e, TIMED_OUT) for e in tally.failed.values()) >= THREADS, 8)
            finally:
                os.killpg(case.upstream.proc.pid, signal.SIGCONT)
            calm.set()

            def back() -> bool:
                if client.unavailable:
                    client.reconnect()
                return len(tally.ok_after) == THREADS and min(tally.ok_after.values()) >= 3

            recovered = wait_until(back, 45, interval=0.05)
            stop.set()
            join_all(threads, 20)
        finally:
            stop.set()
            client.close()
    info = f"{case.name} {tally.summary()}"
    bound = 2 * timeouts.connect + timeouts.request + RETRY.max_wait + sum(RECONNECT.schedule()) + 3.0
    assert len(tally.issued) == len(tally.ok) + len(tally.failed), info
    assert not [k for k, v in tally.ok.items() if v != k], info
    assert all(isinstance(e, NetworkError) for e in tally.failed.values()), info
    # a call in flight times out; one waiting for a slot on the frozen connection (HTTP keeps
    # as many in flight as it has sockets) times out waiting: both end within their deadline
    assert sum(isinstance(e, TIMED_OUT) for e in tally.failed.values()) >= THREADS, info
    assert sum(isinstance(e, RequestTimeout) for e in tally.failed.values()) >= 1, info
    assert not [d for d in tally.durations if d > bound], f"a call outlived {bound:.1f} s: {info}"
    assert recovered, info




@pytest.mark.parametrize("era", ["modern", "legacy"])
def test_http_call_cut_after_reaching_the_server_is_not_resent(tmp_path: Path, era: str) -> None:
    missing = _missing_http_piece()
    if missing:
        pytest.skip(missing)
    port, log = free_port(), tmp_path / "notes.log"
    up = Upstream(lambda: server_command("chaos_http_server.py", str(port), str(log)),
                  lambda u: _port_open(port, u.proc), {"http": port})
    up.start()
    outcome: dict[str, Any] = {}

    def notes() -> list[str]:
        return [line.split()[-1] for line in log.read_text().splitlines()] if log.exists() else []

    try:
        with ChaosProxy(("127.0.0.1", port)) as proxy:
            client = Client.http(f"http://127.0.0.1:{proxy.port}/mcp", mode=era, name=f"http-{era}",
                                 timeouts=Timeouts(connect=3.0, request=5.0), retry=RETRY,
                                 breaker=BreakerPolicy.DISABLED)
            with client:
                assert client.call_tool("echo", {"message": "warm"}).text == "warm"

                def slow() -> None:
                    try:
                        outcome["text"] = client.call_tool("note", {"key": "k1", "ms": 1500}).text
                    except MCPError as exc:
                        outcome["error"] = exc

                th = threading.Thread(target=slow, daemon=True)
                th.start()
                assert wait_until(lambda: "k1" in notes(), 10), "the call never reached the server"
                proxy.cut_all(reset=True)
                th.join(20)
                assert not th.is_alive(), "the cut call never returned"
    finally:
        up.stop()
    assert notes().count("k1") == 1, f"the unannotated call ran {notes().count('k1')} times: {outcome}"
    assert "error" in outcome, outcome
    assert not isinstance(outcome["error"], ConnectError), repr(outcome["error"])
