"""Router: nearest by EWMA round-trip or region, failover, re-probing, hysteresis (fake clock)."""

from __future__ import annotations

import threading

import pytest

from mcpsync._errors import ConnectError
from mcpsync._routing import Endpoint, NoEndpointAvailable, Router
from mcpsync.transports._base import Transport


class Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


class Net:
    """Fake network: rtt per endpoint name; None = down. Counts probes."""

    def __init__(self, **rtts: float | None) -> None:
        self.rtts = dict(rtts)
        self.probes: list[str] = []
        self.lock = threading.Lock()

    def probe(self, ep: Endpoint) -> float:
        with self.lock:
            self.probes.append(ep.name)
        rtt = self.rtts[ep.name]
        if rtt is None:
            raise ConnectError(f"{ep.name} refused")
        return rtt


def eps(*names: str, regions: dict[str, str] | None = None) -> list[Endpoint]:
    regions = regions or {}
    return [Endpoint(n, address=f"http://{n}", region=regions.get(n)) for n in names]


def test_nearest_is_chosen_after_probing_everything():
    net = Net(a=0.080, b=0.010, c=0.040)
    clock = Clock()
    r = Router(eps("a", "b", "c"), probe=net.probe, clock=clock)
    assert r.choose().name == "b"
    assert sorted(net.probes) == ["a", "b", "c"]
    assert [e.name for e in r.candidates()] == ["b", "c", "a"]
    r.choose()
    assert len(net.probes) == 3  # nothing due: no more probes


def test_failover_and_return_after_recovery():
    net = Net(a=0.080, b=0.010, c=0.040)
    clock = Clock()
    r = Router(eps("a", "b", "c"), probe=net.probe, clock=clock, retry_after=5, probe_interval=30)
    assert r.choose().name == "b"
    net.rtts["b"] = None
    r.report_failure("b", ConnectError("killed"))
    assert r.choose().name == "c"
    st = {s.endpoint.name: s for s in r.state()}
    assert not st["b"].available and st["b"].failures == 1 and "killed" in st["b"].last_error
    clock.now += 5
    assert r.choose().name == "c"  # probed, still down: next probe in 10 s
    assert r.state()[1].failures == 2 and r.state()[1].next_probe_at == pytest.approx(clock.now + 10)
    net.rtts["b"] = 0.012
    clock.now += 10
    assert r.choose().name == "b"  # recovered and nearer: back
    assert r.switches == 3


def test_backoff_is_capped():
    net = Net(a=None)
    clock = Clock()
    r = Router(eps("a"), probe=net.probe, clock=clock, retry_after=5, max_retry_after=20)
    for _ in range(6):
        with pytest.raises(NoEndpointAvailable) as ei:
            r.choose()
        clock.now = r.state()[0].next_probe_at
    assert "a: ConnectError" in str(ei.value)
    assert r.state()[0].next_probe_at - clock.now <= 20


def test_client_region_is_preferred():
    net = Net(eu1=0.090, eu2=0.070, us=0.005)
    r = Router(eps("eu1", "eu2", "us", regions={"eu1": "eu", "eu2": "eu", "us": "us"}), probe=net.probe,
               clock=Clock(), region="eu")
    assert r.choose().name == "eu2"
    r.report_failure("eu2")
    assert r.choose().name == "eu1"
    r.report_failure("eu1")
    assert r.choose().name == "us"  # only when no endpoint of the region is left


def test_open_breaker_skips_an_endpoint():
    net = Net(a=0.010, b=0.020)
    opened: set[str] = set()
    r = Router(eps("a", "b"), probe=net.probe, clock=Clock(), breaker_open=lambda e: e.name in opened)
    assert r.choose().name == "a"
    opened.add("a")
    assert r.choose().name == "b"
    opened.clear()
    r.report_breaker("b", True)
    assert r.choose().name == "a"
    r.report_breaker("a", True)
    with pytest.raises(NoEndpointAvailable, match="breaker open"):
        r.choose()


def test_ewma_smooths_and_reprobes_over_time():
    net = Net(a=0.020, b=0.030)
    clock = Clock()
    r = Router(eps("a", "b"), probe=net.probe, clock=clock, alpha=0.5, probe_interval=10)
    assert r.choose().name == "a"
    net.rtts["a"] = 0.100  # a got slow
    clock.now += 10
    assert r.choose().name == "b"  # EWMA 0.06 > 0.03 * 1.1
    assert r.state()[0].rtt == pytest.approx(0.060)
    one_spike = Router(eps("a", "b"), probe=net.probe, clock=clock, alpha=0.2, probe_interval=10)
    net.rtts.update(a=0.020, b=0.030)
    one_spike.choose()
    net.rtts["a"] = 0.060  # a single spike is smoothed away
    clock.now += 10
    assert one_spike.choose().name == "a"  # 0.028 vs 0.030


def test_hysteresis_avoids_flapping():
    r = Router(eps("a", "b"), clock=Clock(), hysteresis=0.10)
    r.report_success("a", 0.050)
    r.report_success("b", 0.052)
    assert r.choose().name == "a"
    r.report_success("a", 0.056, kind="ping")  # ewma 0.0518: b marginally nearer
    assert r.choose().name == "a"
    r.report_success("b", 0.010)
    r.report_success("b", 0.010)
    assert r.choose().name == "b"


def test_connect_time_ranks_before_any_ping():
    r = Router(eps("a", "b"), clock=Clock())
    r.report_success("a", 0.050, kind="connect")
    r.report_success("b", 0.020, kind="connect")
    assert r.choose().name == "b"
    r.report_success("a", 0.001, kind="ping")  # a ping of a beats b's connect time
    assert r.choose().name == "a"


def test_probe_pairs_and_timeouts():
    gate = threading.Event()

    def probe(ep: Endpoint):
        if ep.name == "slow":
            gate.wait(2)
            return 0.001
        return (0.030, 0.010)

    r = Router(eps("fast", "slow"), probe=probe, clock=Clock(), probe_timeout=0.2)
    assert r.choose().name == "fast"
    gate.set()
    st = {s.endpoint.name: s for s in r.state()}
    assert st["fast"].connect_rtt == 0.030 and st["fast"].ping_rtt == 0.010
    assert not st["slow"].available and "probe took over" in st["slow"].last_error


class FakeTransport(Transport):
    kind = "fake"

    def __init__(self, ep: Endpoint, fail: bool) -> None:
        self.ep = ep
        self.fail = fail
        self.extra = "passed through"

    def connect(self, timeout: float) -> None:
        if self.fail:
            raise ConnectError("refused")

    def send(self, message: bytes, timeout: float | None = None, facts: object = None) -> None:
        if self.ep.name == "lazy":
            raise ConnectError("refused at the first request")

    def receive(self, timeout: float | None) -> bytes | None:
        return b"{}"

    def describe(self) -> str:
        return self.ep.target


def test_transport_factory_reports_connects():
    clock = Clock()
    down = {"a"}
    r = Router(eps("a", "b"), clock=clock)
    r.report_success("a", 0.01)
    r.report_success("b", 0.02)
    factory = r.transport_factory(lambda ep: FakeTransport(ep, ep.name in down))
    t = factory()
    assert isinstance(t, Transport) and t.endpoint.name == "a" and t.extra == "passed through"
    with pytest.raises(ConnectError):
        t.connect(1)
    assert not r.state()[0].available
    t2 = factory()
    t2.connect(1)
    assert r.state()[1].connect_rtt is None  # measured up to the first answer
    t2.send(b"{}")
    clock.now += 0.25
    assert t2.receive(1) == b"{}"
    assert t2.endpoint.name == "b" and t2.describe() == "http://b [b]"
    assert r.state()[1].connect_rtt == pytest.approx(0.25)


def test_lazy_transport_failing_at_first_send_is_reported():
    r = Router(eps("lazy", "b"), clock=Clock())
    r.report_success("lazy", 0.01)
    r.report_success("b", 0.02)
    t = r.transport_factory(lambda ep: FakeTransport(ep, False))()
    t.connect(1)  # an HTTP transport connects lazily: nothing known yet
    with pytest.raises(ConnectError):
        t.send(b"{}")
    assert not r.state()[0].available
    assert r.choose().name == "b"


def test_validation():
    with pytest.raises(ValueError):
        Router([])
    with pytest.raises(ValueError):
        Router(["a", "a"])
    with pytest.raises(ValueError):
        Router(["a"], alpha=0)
    r = Router(["a"])
    with pytest.raises(ValueError):
        r.report_success("zzz", 0.1)
    assert r.choose().name == "a"  # no probe, never measured: still usable


def test_concurrent_choices_probe_each_endpoint_once():
    gate = threading.Event()
    net = Net(a=0.03, b=0.01, c=0.02)

    def slow_probe(ep: Endpoint) -> float:
        gate.wait(2)
        return net.probe(ep)

    r = Router(eps("a", "b", "c"), probe=slow_probe, clock=Clock(), probe_timeout=5)
    out: list[str] = []
    errors: list[BaseException] = []

    def work() -> None:
        try:
            for _ in range(50):
                out.append(r.choose().name)
        except BaseException as exc:  # noqa: BLE001
            errors.append(exc)

    ts = [threading.Thread(target=work) for _ in range(8)]
    for t in ts:
        t.start()
    threading.Event().wait(0.05)
    gate.set()
    for t in ts:
        t.join(30)
    assert not errors
    assert sorted(net.probes) == ["a", "b", "c"]  # an in-flight probe is never doubled
    assert out[-1] == "b" and out.count("b") >= 8 * 50 - 8 * 3


def test_probe_in_background_returns_at_once_and_updates_the_ranking():
    net = Net(a=0.010, b=0.040)
    clock = Clock()
    gate = threading.Event()
    started = threading.Event()

    def slow_probe(ep: Endpoint) -> float:
        if ep.name == "a" and net.rtts["a"] is not None and started.is_set():
            gate.wait(10)
        return net.probe(ep)

    r = Router(eps("a", "b"), probe=slow_probe, clock=clock, probe_interval=30)
    assert r.choose().name == "a"
    assert not r.probe_in_background()  # nothing due
    clock.now += 30
    net.rtts["a"] = 0.200  # "a" got far
    started.set()
    gate.set()
    assert r.probe_in_background()
    for _ in range(200):
        if r.choose(probe=False).name == "b":
            break
        threading.Event().wait(0.01)
    assert r.choose(probe=False).name == "b"
    assert not r.probe_in_background()  # re-measured: the next round is 30 s away


def test_probe_in_background_without_a_probe_does_nothing():
    r = Router(eps("a", "b"))
    assert not r.probe_in_background()
    assert r.choose(probe=False).name == "a"


def test_a_routed_transport_forwards_every_capability_transport_declares():
    # __getattr__ delegation never sees a name the class has: each optional capability with a
    # default on Transport (an HTTP failure handler, a session-lost handler, readiness, the
    # session id, ...) must be forwarded explicitly, or a routed HTTP client would lose them
    import inspect

    from mcpsync._routing import _RoutedTransport
    from mcpsync.transports import Transport

    declared = {n for n, v in vars(Transport).items() if not n.startswith("_") and (callable(v) or isinstance(v, property))}
    missing = sorted(n for n in declared if n not in vars(_RoutedTransport) and n not in ("connect",))
    assert not missing, f"_RoutedTransport does not forward: {missing}"
    assert inspect.isfunction(vars(_RoutedTransport)["set_failure_handler"])
