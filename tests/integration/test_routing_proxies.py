"""Routing against three real servers at three distances.

Three official-SDK servers (``tests/servers/sdk_server.py http PORT``, Streamable HTTP on
127.0.0.1) each sit behind a delaying TCP proxy (``tests/servers/proxy.py``). Probes are
real mcpsync Clients over :class:`StreamableHTTPTransport` (:func:`mcp_probe`): connect
(``server/discover``) and ping are timed and fed to the router. The router's clock is a fake one, so
"time passes" for re-probing without the test sleeping. No timing is asserted: the
delays (0, 80 ms, 160 ms per chunk each way; a probe crosses several chunks) differ by far
more than the noise of a loaded machine, the router smooths three probes each, and only
the ranking that follows is checked.
"""

from __future__ import annotations

import subprocess
import sys
import threading
import time
from typing import Iterator

import pytest

from mcpsync import BreakerPolicy, BreakerState, CircuitOpen, Client, RequestTimeout, RetryPolicy
from mcpsync._routing import Endpoint, NoEndpointAvailable, Router, mcp_probe
from mcpsync.transports.streamable_http import StreamableHTTPTransport
from tests.conftest import ROOT, SERVERS, free_port

sys.path.insert(0, str(SERVERS))
from proxy import DelayProxy  # noqa: E402

DELAYS = {"near": 0.0, "mid": 0.080, "far": 0.160}


class Node:
    """One SDK server process behind its proxy; can be killed and started again on its port."""

    def __init__(self, name: str, delay: float) -> None:
        self.name = name
        self.port = free_port()
        self.proc: subprocess.Popen[bytes] | None = None
        self.start()
        self.proxy = DelayProxy(self.port, delay=delay)

    def start(self) -> None:
        self.proc = subprocess.Popen(
            [sys.executable, str(SERVERS / "sdk_server.py"), "http", str(self.port)],
            cwd=str(ROOT), stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
            start_new_session=True,
        )

    def wait(self, timeout: float = 30.0) -> None:
        import socket

        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            assert self.proc is not None and self.proc.poll() is None, f"{self.name} exited"
            try:
                with socket.create_connection(("127.0.0.1", self.port), timeout=0.2):
                    return
            except OSError:
                time.sleep(0.05)
        raise RuntimeError(f"{self.name} did not listen within {timeout} s")

    def kill(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(5)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(5)

    def close(self) -> None:
        self.kill()
        self.proxy.close()

    @property
    def endpoint(self) -> Endpoint:
        return Endpoint(self.name, address=f"{self.proxy.url}/mcp")


@pytest.fixture(scope="module")
def nodes() -> Iterator[dict[str, Node]]:
    made = {name: Node(name, delay) for name, delay in DELAYS.items()}  # started in parallel
    try:
        for n in made.values():
            n.wait()
        yield made
    finally:
        for n in made.values():
            n.close()


def transport(ep: Endpoint) -> StreamableHTTPTransport:
    return StreamableHTTPTransport(ep.target, connect_timeout=3, get_stream=False)


probe = mcp_probe(transport, client_class=Client, mode="modern", timeout=5.0)  # connect (server/discover) + ping, timed


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def test_nearest_failover_on_kill_and_return_after_recovery(nodes):
    clock = Clock()
    router = Router([nodes[n].endpoint for n in ("far", "mid", "near")], probe=probe, clock=clock,
                    retry_after=5, probe_interval=60, probe_timeout=20)

    # the nearest is chosen, and a Client routed through the router talks to it
    router.probe_all()
    router.probe_all()
    assert router.choose().name == "near", router.state()
    assert [e.name for e in router.candidates()] == ["near", "mid", "far"], router.state()
    before = {n: nodes[n].proxy.accepted for n in nodes}
    with Client(router.transport_factory(transport), name="routed") as client:
        assert client.call_tool("echo", {"message": "hi"}).text == "hi"
    assert nodes["near"].proxy.accepted > before["near"]
    assert nodes["mid"].proxy.accepted == before["mid"] and nodes["far"].proxy.accepted == before["far"]

    # failover on kill: the router still believes in "near"; the routed Client's connect
    # fails there, the router marks it down, and the connect retry reaches "mid"
    nodes["near"].kill()
    with Client(router.transport_factory(transport), name="routed") as client:
        assert client.call_tool("echo", {"message": "again"}).text == "again"
    state = {s.endpoint.name: s for s in router.state()}
    assert not state["near"].available and state["near"].failures >= 1
    assert router.choose().name == "mid"

    # still down at the first re-probe
    clock.now += 5
    assert router.choose().name == "mid"

    # return after recovery: restarted on its port, taken back at the next re-probe
    nodes["near"].start()
    nodes["near"].wait()
    clock.now = router.state()[2].next_probe_at
    assert router.choose().name == "near", router.state()
    with Client(router.transport_factory(transport), name="routed") as client:
        assert client.call_tool("echo", {"message": "back"}).text == "back"


def test_a_cut_link_fails_over_and_everything_down_is_reported(nodes):
    clock = Clock()
    router = Router([nodes[n].endpoint for n in ("near", "mid")], probe=probe, clock=clock, retry_after=5,
                    probe_timeout=20)
    for n in ("near", "mid"):
        nodes[n].wait()  # the other test restarts "near"
    router.probe_all()
    assert router.choose().name == "near", router.state()
    nodes["near"].proxy.cut()
    nodes["mid"].proxy.cut()
    try:
        router.probe_all()  # both probes fail: both endpoints are marked down
        with pytest.raises(NoEndpointAvailable):
            router.choose()
        nodes["mid"].proxy.restore()
        clock.now += 5
        assert router.choose().name == "mid"
    finally:
        nodes["near"].proxy.restore()
        nodes["mid"].proxy.restore()
    clock.now += 10
    assert router.choose().name == "near", router.state()


def test_a_routed_client_fails_over_when_an_endpoints_breaker_opens_and_comes_back(nodes):
    """One long-lived Client.routed: "near" answers connects but its calls time out, so
    its own breaker opens; the calls move to "mid" on the same client; after the
    cooldown "near" is chosen again, its trial call closes the breaker, and the client
    is back on it. The other endpoints' breakers never move."""
    for n in nodes.values():
        n.wait()  # an earlier test restarts "near"
    transitions: list[tuple[BreakerState, BreakerState]] = []
    clock = Clock()  # the router's and the breakers': the cooldown passes when the test says
    with Client.routed(
        [nodes[n].endpoint for n in ("far", "mid", "near")],
        transport,
        name="routed",
        breaker=BreakerPolicy(threshold=2, cooldown=30.0, half_open_max=1),
        retry=RetryPolicy.NONE,
        on_breaker_change=lambda old, new: transitions.append((old, new)),
        router_options={"probe_interval": 3600.0, "clock": clock},
    ) as client:
        router = client.router
        breakers = client.endpoint_breakers
        assert router.current.name == "near", router.state()
        accepted = {n: nodes[n].proxy.accepted for n in nodes}

        for _ in range(2):  # "near" is slow: two timeouts open its breaker
            with pytest.raises(RequestTimeout):
                client.call_tool("sleep_ms", {"ms": 3000}, timeout=0.3)
        assert breakers["near"].state is BreakerState.OPEN
        assert (BreakerState.CLOSED, BreakerState.OPEN) in transitions

        # failover on the same client: the next calls are answered by "mid"
        for i in range(3):
            assert client.call_tool("echo", {"message": f"m{i}"}).text == f"m{i}"
        assert router.current.name == "mid", router.state()
        assert nodes["mid"].proxy.accepted > accepted["mid"]
        assert nodes["far"].proxy.accepted == accepted["far"]
        assert breakers["mid"].state is BreakerState.CLOSED and breakers["far"].state is BreakerState.CLOSED

        # after the cooldown, "near" half-opens and is the router's choice again; the
        # connections to "mid" are retired as their calls finish, and the trial call
        # on a new connection to "near" closes its breaker
        clock.now += 30
        assert breakers["near"].state is BreakerState.HALF_OPEN
        near_before = nodes["near"].proxy.accepted
        for i in range(3):
            assert client.call_tool("echo", {"message": f"n{i}"}).text == f"n{i}"
        assert breakers["near"].state is BreakerState.CLOSED, breakers["near"].transitions
        assert router.current.name == "near", router.state()
        assert nodes["near"].proxy.accepted > near_before
        assert client.call_tool("add", {"a": 2, "b": 3}).structured_content == {"result": 5}


def test_a_routed_client_with_every_breaker_open_fails_fast(nodes):
    for n in nodes.values():
        n.wait()
    with Client.routed(
        [nodes[n].endpoint for n in ("mid", "near")],
        transport,
        name="routed-all",
        breaker=BreakerPolicy(threshold=1, cooldown=60.0),
        retry=RetryPolicy.NONE,
        router_options={"probe_interval": 3600.0},
    ) as client:
        for _ in range(2):  # the first opens "near"'s breaker, the second "mid"'s
            with pytest.raises(RequestTimeout):
                client.call_tool("sleep_ms", {"ms": 3000}, timeout=0.3)
        assert all(b.state is BreakerState.OPEN for b in client.endpoint_breakers.values())
        with pytest.raises(CircuitOpen, match="every endpoint") as info:
            client.call_tool("echo", {"message": "nowhere"}, timeout=5)
        assert 0 < info.value.retry_after <= 60
        assert not client.unavailable  # failing fast is not a lost server


def test_threads_keep_their_answers_while_an_endpoint_is_retired(nodes):
    """8 threads share a routed client; midway "near"'s breaker is opened. Calls already
    running on its connections finish there (retired connections close only when idle),
    later ones go to "mid"; every thread gets its own answers, none is lost."""
    from mcpsync._errors import ConnectionClosed

    for n in nodes.values():
        n.wait()
    clock = Clock()
    with Client.routed(
        [nodes[n].endpoint for n in ("mid", "near")],
        transport,
        name="routed-threads",
        breaker=BreakerPolicy(threshold=3, cooldown=30.0, failure_rate=0.0),  # 3 failures open it, whatever the calls
        router_options={"probe_interval": 3600.0, "clock": clock},
    ) as client:
        assert client.router.current.name == "near"
        errors: list[BaseException] = []
        half = threading.Barrier(9)

        def work(t: int) -> None:
            try:
                for i in range(30):
                    if i == 15:
                        half.wait(30)
                    msg = f"t{t}-{i}"
                    assert client.call_tool("echo", {"message": msg}).text == msg
            except BaseException as exc:  # noqa: BLE001 - reported below
                errors.append(exc)

        threads = [threading.Thread(target=work, args=(t,)) for t in range(8)]
        for th in threads:
            th.start()
        half.wait(30)
        for _ in range(3):  # what three failed calls would do
            client.endpoint_breakers["near"].release(None, ConnectionClosed("simulated"))
        for th in threads:
            th.join(60)
        assert not any(th.is_alive() for th in threads)
        assert errors == []
        assert client.endpoint_breakers["near"].state is BreakerState.OPEN
        assert client.router.current.name == "mid"
        assert client.call_tool("echo", {"message": "after"}).text == "after"


def test_a_config_file_with_endpoints_makes_a_routed_client(nodes, tmp_path):
    """An ``mcpServers`` entry listing endpoints becomes a routed Client: probed, the
    nearest chosen, the configured headers on its transports, failover on kill."""
    import json

    for n in nodes.values():
        n.wait()
    cfg = tmp_path / "mcp.json"
    cfg.write_text(json.dumps({"mcpServers": {"api": {
        "type": "http",
        "endpoints": [{"name": n, "url": f"{nodes[n].proxy.url}/mcp"} for n in ("far", "near")],
        "headers": {"X-Test": "${ROUTE_HEADER}"},
        "timeout": 5,
    }}}))
    with Client.from_config(cfg, "api", environ={"ROUTE_HEADER": "on"}) as client:
        assert client.router is not None and client.router.current.name == "near", client.router.state()
        assert set(client.endpoint_breakers) == {"far", "near"}
        assert client.call_tool("echo", {"message": "configured"}).text == "configured"
        conn = client._session.primary_connection()
        assert conn.transport.endpoint.name == "near"
        assert conn.transport._inner.options.headers["X-Test"] == "on"  # the entry's headers, expanded
        nodes["near"].kill()
        try:
            # the connection to "near" dies; the reconnect goes to "far"
            for _ in range(50):
                try:
                    assert client.call_tool("echo", {"message": "moved"}).text == "moved"
                    break
                except Exception:  # noqa: BLE001 - the call that met the dead node
                    time.sleep(0.1)
            assert client.router.current.name == "far", client.router.state()
        finally:
            nodes["near"].start()
            nodes["near"].wait()
