"""Multi-region routing: one logical server, several endpoints, the nearest one used.

A :class:`Router` keeps, per :class:`Endpoint`, a smoothed (EWMA) round-trip time of its
connects and of its pings, whether it is available, and when to probe it next:

* **Nearest first.** :meth:`Router.choose` returns the available endpoint with the
  smallest round-trip (the ping EWMA; before any ping, the connect EWMA). With a
  configured client ``region``, endpoints of that region come first (nearest among
  them), the others only when none of that region is available. Endpoints never
  measured are probed first (in parallel). A ``hysteresis`` (10 %) keeps the current
  choice until another endpoint is clearly nearer, so equal nodes do not flap.
* **Failover.** :meth:`Router.report_failure` marks an endpoint unavailable; so does an
  open breaker (``breaker_open(endpoint)``, or :meth:`Router.report_breaker`); the next
  :meth:`Router.choose` takes the next nearest.
* **Breakers.** A routed Client (:meth:`Client.routed`) keeps one circuit breaker per
  endpoint and passes it as ``breaker_open``: an endpoint whose calls keep failing is
  skipped while its breaker is open, its connections are retired, and the calls go to
  the next endpoint; after the cooldown its trial calls decide whether it comes back.
* **Re-probing.** An unavailable endpoint is probed again after ``retry_after`` seconds
  (doubling per consecutive failure up to ``max_retry_after``); available ones are
  re-measured every ``probe_interval`` seconds, so a recovered or a now-nearer node is
  taken back. Probing happens in :meth:`Router.choose` when due (or call
  :meth:`Router.probe_due` from a maintenance thread). The clock is injectable.

``probe(endpoint)`` returns the round-trip in seconds, or a ``(connect, ping)`` pair, and
raises when the endpoint is unreachable; it must bound its own time (a probe still
running after ``probe_timeout`` counts as failed).

For a Client, :meth:`Router.transport_factory` wraps a ``make(endpoint) -> Transport``
into the Client's zero-argument factory: each new connection goes to the chosen
endpoint and its connect is timed and reported (success with the connect time, or
failure, which fails the next connection over to the next endpoint).

Example:
    >>> rtts = {"eu": 0.030, "us": 0.120, "ap": 0.250}
    >>> r = Router([Endpoint("eu"), Endpoint("us"), Endpoint("ap")], probe=lambda e: rtts[e.name])
    >>> r.choose().name
    'eu'
    >>> r.report_failure(r.choose(), ConnectionError("gone"))
    >>> r.choose().name
    'us'
"""

from __future__ import annotations

import logging
import threading
import time
from dataclasses import dataclass
from typing import Any, Callable, Iterable, Mapping

from ._breaker import BreakerState, CircuitBreaker
from ._channel import MessageFacts
from ._errors import CircuitOpen, NoEndpointAvailable, ServerUnavailable
from .transports._base import Transport

__all__ = ["Endpoint", "EndpointState", "Router", "NoEndpointAvailable", "mcp_probe", "Attempts", "routed_client"]

log = logging.getLogger("mcpsync.routing")



@dataclass(frozen=True, slots=True)
class Endpoint:
    """One node or region of a server.

    Attributes:
        name: unique among the server's endpoints ("eu-west-1", "node-b").
        address: what a transport needs (a URL, ``host:port``, a command…); default ``name``.
        region: the region it is in, matched against the router's client ``region``.
    """

    name: str
    address: Any = None
    region: str | None = None

    @property
    def target(self) -> Any:
        return self.address if self.address is not None else self.name


@dataclass(frozen=True, slots=True)
class EndpointState:
    """A frozen view of what the router knows about one endpoint."""

    endpoint: Endpoint
    available: bool
    rtt: float | None  # the ranking value: ping EWMA, else connect EWMA (seconds)
    connect_rtt: float | None
    ping_rtt: float | None
    failures: int  # consecutive
    breaker_open: bool
    next_probe_at: float
    last_error: str | None
    samples: int


class _State:
    __slots__ = ("endpoint", "available", "connect", "ping", "failures", "breaker", "next_probe", "error",
                 "samples", "probing")

    def __init__(self, endpoint: Endpoint) -> None:
        self.endpoint = endpoint
        self.available = True
        self.connect: float | None = None
        self.ping: float | None = None
        self.failures = 0
        self.breaker = False
        self.next_probe = 0.0  # due at once: never measured
        self.error: str | None = None
        self.samples = 0
        self.probing = False

    @property
    def rtt(self) -> float | None:
        return self.ping if self.ping is not None else self.connect


class Router:
    """Chooses the nearest available endpoint of one server; thread-safe.

    Args:
        endpoints: the server's endpoints (names unique), in configuration order (the
            tie-break).
        probe: ``probe(endpoint) -> seconds | (connect, ping)``; raises if unreachable.
            ``None``: no active probing (only what callers report).
        clock: monotonic seconds (inject for tests).
        region: the client's region: its endpoints are preferred.
        alpha: EWMA weight of a new sample (0 < alpha <= 1).
        probe_interval: seconds between re-measurements of available endpoints.
        retry_after: seconds before an unavailable endpoint is probed again (doubled per
            consecutive failure, up to ``max_retry_after``).
        probe_timeout: seconds to wait for a probe.
        hysteresis: relative margin by which another endpoint must be nearer before the
            current choice changes.
        breaker_open: ``breaker_open(endpoint) -> bool``, asked on each choice.
        on_change: ``on_change(old, new)`` when the chosen endpoint changes (outside the lock).
    """

    def __init__(
        self,
        endpoints: Iterable[Endpoint | str],
        *,
        probe: Callable[[Endpoint], Any] | None = None,
        clock: Callable[[], float] = time.monotonic,
        region: str | None = None,
        alpha: float = 0.3,
        probe_interval: float = 30.0,
        retry_after: float = 5.0,
        max_retry_after: float = 60.0,
        probe_timeout: float = 10.0,
        hysteresis: float = 0.10,
        breaker_open: Callable[[Endpoint], bool] | None = None,
        on_change: Callable[[Endpoint | None, Endpoint], None] | None = None,
    ) -> None:
        eps = [e if isinstance(e, Endpoint) else Endpoint(str(e)) for e in endpoints]
        if not eps:
            raise ValueError("a router needs at least one endpoint")
        if len({e.name for e in eps}) != len(eps):
            raise ValueError("endpoint names must be unique")
        if not 0 < alpha <= 1:
            raise ValueError("alpha must be in (0, 1]")
        self.endpoints: tuple[Endpoint, ...] = tuple(eps)
        self.probe = probe
        self.region = region
        self.alpha = alpha
        self.probe_interval = probe_interval
        self.retry_after = retry_after
        self.max_retry_after = max_retry_after
        self.probe_timeout = probe_timeout
        self.hysteresis = hysteresis
        self.breaker_open = breaker_open
        self.on_change = on_change
        self._clock = clock
        self._lock = threading.Lock()
        self._probed = threading.Condition(self._lock)  # notified when a probe round ends
        self._states = {e.name: _State(e) for e in eps}
        self._order = {e.name: i for i, e in enumerate(eps)}
        self._current: Endpoint | None = None
        self.switches = 0

    # ------------------------------------------------------------------ reports

    def _state(self, endpoint: Endpoint | str) -> _State:
        name = endpoint if isinstance(endpoint, str) else endpoint.name
        try:
            return self._states[name]
        except KeyError:
            raise ValueError(f"unknown endpoint {name!r}") from None

    def _smooth(self, old: float | None, sample: float) -> float:
        return sample if old is None else self.alpha * sample + (1 - self.alpha) * old

    def report_success(self, endpoint: Endpoint | str, rtt: float | None = None, *, kind: str = "ping") -> None:
        """The endpoint answered; ``rtt`` (seconds) of a ``"ping"`` or a ``"connect"``."""
        with self._lock:
            s = self._state(endpoint)
            if rtt is not None:
                rtt = max(0.0, float(rtt))
                if kind == "connect":
                    s.connect = self._smooth(s.connect, rtt)
                else:
                    s.ping = self._smooth(s.ping, rtt)
                s.samples += 1
            if not s.available:
                log.info("endpoint %s is available again", s.endpoint.name)
            s.available = True
            s.failures = 0
            s.error = None
            s.next_probe = self._clock() + self.probe_interval

    def report_failure(self, endpoint: Endpoint | str, error: BaseException | str | None = None) -> None:
        """The endpoint could not be reached: unavailable until a probe succeeds."""
        with self._lock:
            s = self._state(endpoint)
            s.available = False
            s.failures += 1
            s.error = None if error is None else (error if isinstance(error, str) else f"{type(error).__name__}: {error}")
            wait = min(self.max_retry_after, self.retry_after * (2 ** (s.failures - 1)))
            s.next_probe = self._clock() + wait
            log.info("endpoint %s unavailable (%s); probing again in %.1f s", s.endpoint.name, s.error, wait)

    def report_breaker(self, endpoint: Endpoint | str, open: bool) -> None:
        """The endpoint's circuit breaker opened (skip it) or closed again."""
        with self._lock:
            self._state(endpoint).breaker = bool(open)

    # ------------------------------------------------------------------ probing

    def _run_probes(self, states: list[_State]) -> None:
        if self.probe is None or not states:
            return
        results: dict[str, tuple[bool, Any]] = {}

        def one(s: _State) -> None:
            t0 = self._clock()
            try:
                got = self.probe(s.endpoint)  # type: ignore[misc]
                results[s.endpoint.name] = (True, got if got is not None else self._clock() - t0)
            except Exception as exc:  # noqa: BLE001 - any probe failure marks the endpoint down
                results[s.endpoint.name] = (False, exc)

        if len(states) == 1:
            one(states[0])
            threads: list[threading.Thread] = []
        else:
            threads = [threading.Thread(target=one, args=(s,), daemon=True, name=f"probe-{s.endpoint.name}") for s in states]
            for t in threads:
                t.start()
            deadline = time.monotonic() + self.probe_timeout
            for t in threads:
                t.join(max(0.0, deadline - time.monotonic()))
        for s in states:
            ok, got = results.get(s.endpoint.name, (False, TimeoutError(f"probe took over {self.probe_timeout} s")))
            if ok:
                if isinstance(got, tuple):
                    connect, ping = got
                    if connect is not None:
                        self.report_success(s.endpoint, connect, kind="connect")
                    self.report_success(s.endpoint, ping, kind="ping")
                else:
                    self.report_success(s.endpoint, got, kind="ping")
            else:
                self.report_failure(s.endpoint, got)
        with self._lock:
            for s in states:
                s.probing = False
            self._probed.notify_all()

    def _due(self, now: float, everything: bool = False) -> list[_State]:
        with self._lock:
            due = [s for s in self._states.values() if not s.probing and (everything or s.next_probe <= now)]
            for s in due:
                s.probing = True
        return due

    def probe_due(self) -> int:
        """Probe every endpoint whose probe is due (in parallel). Returns how many."""
        due = self._due(self._clock())
        self._run_probes(due)
        return len(due)

    def probe_all(self) -> None:
        """Probe every endpoint now."""
        self._run_probes(self._due(self._clock(), everything=True))

    # ------------------------------------------------------------------ choosing

    def _blocked(self, s: _State) -> bool:
        if s.breaker:
            return True
        if self.breaker_open is not None:
            try:
                return bool(self.breaker_open(s.endpoint))
            except Exception:  # noqa: BLE001
                log.exception("breaker_open callback raised")
        return False

    def _ranked(self) -> list[_State]:
        with self._lock:
            states = list(self._states.values())
        usable = [s for s in states if s.available and not self._blocked(s)]

        def key(s: _State) -> tuple[int, float, int]:
            foreign = 0 if self.region is None or s.endpoint.region == self.region else 1
            rtt = s.rtt
            return (foreign, rtt if rtt is not None else float("inf"), self._order[s.endpoint.name])

        return sorted(usable, key=key)

    def candidates(self) -> list[Endpoint]:
        """Available endpoints, best first (no probing)."""
        return [s.endpoint for s in self._ranked()]

    def probe_in_background(self) -> bool:
        """Start the probes that are due on a daemon thread and return at once.

        A routed Client calls it on each call, so re-measuring never delays a caller.
        Returns True if a probe round was started.
        """
        if self.probe is None:
            return False
        now = self._clock()
        with self._lock:
            if not any(not s.probing and s.next_probe <= now for s in self._states.values()):
                return False
        due = self._due(now)
        if not due:
            return False
        threading.Thread(target=self._run_probes, args=(due,), daemon=True, name="mcpsync-probe").start()
        return True

    def choose(self, *, probe: bool = True) -> Endpoint:
        """The endpoint to use now (probing first whatever is due, unless ``probe=False``).

        Raises:
            NoEndpointAvailable: every endpoint is unavailable or behind an open breaker.
        """
        if probe and self.probe is not None:
            self.probe_due()
            # another thread may be running the very first probe of some endpoint: wait
            # for it (bounded) rather than choose among endpoints nobody has measured
            with self._lock:
                self._probed.wait_for(
                    lambda: not any(s.probing and s.samples == 0 and s.failures == 0 for s in self._states.values()),
                    timeout=self.probe_timeout,
                )
        ranked = self._ranked()
        if not ranked:
            with self._lock:
                errors = "; ".join(f"{s.endpoint.name}: {s.error or 'breaker open'}" for s in self._states.values())
            raise NoEndpointAvailable(f"no endpoint of the server is available ({errors})", failures=len(self._states))
        best = ranked[0]
        with self._lock:
            current = self._current
            cur = next((s for s in ranked if current is not None and s.endpoint == current), None)
            if cur is not None and cur is not best and _same_class(cur, best, self.region):
                if cur.rtt is not None and best.rtt is not None and cur.rtt <= best.rtt * (1 + self.hysteresis):
                    best = cur  # not clearly nearer: stay
            changed = best.endpoint != current
            if changed:
                self._current = best.endpoint
                self.switches += 1
        if changed:
            log.info("routing to %s (rtt %s)", best.endpoint.name, best.rtt)
            if self.on_change is not None:
                try:
                    self.on_change(current, best.endpoint)
                except Exception:  # noqa: BLE001
                    log.exception("router on_change raised")
        return best.endpoint

    @property
    def current(self) -> Endpoint | None:
        """The endpoint the last :meth:`choose` returned."""
        return self._current

    def state(self) -> tuple[EndpointState, ...]:
        """What the router knows, per endpoint, in configuration order."""
        with self._lock:
            out = []
            for e in self.endpoints:
                s = self._states[e.name]
                out.append(EndpointState(e, s.available, s.rtt, s.connect, s.ping, s.failures, s.breaker,
                                         s.next_probe, s.error, s.samples))
        return tuple(out)

    # ------------------------------------------------------------------ using

    def transport_factory(self, make: Callable[[Endpoint], Transport]) -> Callable[[], Transport]:
        """A Client transport factory: each connection goes to :meth:`choose`'s endpoint.

        The connection is timed from ``connect()`` to its first message received (the
        handshake's answer) and reported as the connect round-trip; an error before
        that marks the endpoint unavailable, so the Client's connect retry reaches the
        next endpoint.
        """

        def factory() -> Transport:
            ep = self.choose()
            return _RoutedTransport(make(ep), self, ep)

        return factory


def _same_class(a: _State, b: _State, region: str | None) -> bool:
    if region is None:
        return True
    return (a.endpoint.region == region) == (b.endpoint.region == region)


class _RoutedTransport(Transport):
    """Delegates to the real transport; reports how its connection went to the router.

    Some transports connect lazily (HTTP opens its socket with the first POST), so the
    "connect" measured is from ``connect()`` to the first message received (the
    handshake's answer); an error from ``connect``, ``send`` or ``receive`` before that
    first message marks the endpoint unavailable.
    """

    def __init__(self, inner: Transport, router: Router, endpoint: Endpoint) -> None:
        self._inner = inner
        self.needs_facts = inner.needs_facts
        self.next_message = inner.next_message  # (the inner's box: see wait_first)
        self._router = router
        self.endpoint = endpoint
        self.request_scoped = getattr(inner, "request_scoped", False)
        self.kind = getattr(inner, "kind", "transport")
        self._t0: float | None = None
        self._settled = False

    def _failed(self, exc: BaseException) -> None:
        if not self._settled:
            self._settled = True
            self._router.report_failure(self.endpoint, exc)

    def connect(self, timeout: float) -> None:
        self._t0 = self._router._clock()
        try:
            self._inner.connect(timeout)
        except Exception as exc:
            self._failed(exc)
            raise

    def send(self, message: bytes, timeout: float | None = None, facts: MessageFacts | None = None) -> None:
        try:
            self._inner.send(message, timeout, facts)
        except Exception as exc:
            self._failed(exc)
            raise

    def receive(self, timeout: float | None) -> bytes | None:
        return self._received(self._inner.receive, timeout)

    def receive_alone(self, timeout: float | None) -> bytes | None:
        return self._received(self._inner.receive_alone, timeout)

    def wait_first(self, timeout: float | None) -> bool:
        try:
            got = self._inner.wait_first(timeout)
        except Exception as exc:
            self._failed(exc)
            raise
        if got and not self._settled:
            self._succeeded()
        return got

    def _received(self, receive: Callable[[float | None], bytes | None], timeout: float | None) -> bytes | None:
        try:
            msg = receive(timeout)
        except Exception as exc:
            self._failed(exc)
            raise
        if msg is not None and not self._settled:
            self._succeeded()
        return msg

    def _succeeded(self) -> None:
        self._settled = True
        t0 = self._t0 if self._t0 is not None else self._router._clock()
        self._router.report_success(self.endpoint, self._router._clock() - t0, kind="connect")

    def close(self) -> None:
        self._inner.close()

    def alive(self) -> bool:
        return self._inner.alive()

    def set_protocol_version(self, version: str) -> None:
        self._inner.set_protocol_version(version)

    def describe(self) -> str:
        return f"{self._inner.describe()} [{self.endpoint.name}]"

    # what Transport declares with a default is the inner transport's (__getattr__ below
    # never sees a name the class has)
    def wait_readable(self, timeout: float) -> bool:
        return self._inner.wait_readable(timeout)

    def set_failure_handler(self, handler: Callable[[Any, Any], None] | None) -> None:
        self._inner.set_failure_handler(handler)

    def set_session_lost_handler(self, handler: Callable[[str], None] | None) -> None:
        self._inner.set_session_lost_handler(handler)

    def start_failure(self, wait: float = 0.0) -> Any:
        return self._inner.start_failure(wait)

    def starting(self) -> bool:
        return self._inner.starting()

    @property
    def idle_switch(self) -> Any:
        return self._inner.idle_switch

    @property
    def session_id(self) -> str | None:
        return self._inner.session_id

    @property
    def pid(self) -> int | None:
        return self._inner.pid

    @property
    def returncode(self) -> int | None:
        return self._inner.returncode

    def session_info(self) -> dict[str, Any]:
        return self._inner.session_info()

    def __getattr__(self, name: str) -> Any:
        if name == "_inner":
            raise AttributeError(name)
        return getattr(self._inner, name)


def mcp_probe(
    make: Callable[[Endpoint], Transport], *, client_class: Callable[..., Any], mode: str = "auto", timeout: float = 5.0
) -> Callable[[Endpoint], tuple[float, float]]:
    """A ``probe`` for :class:`Router` that measures a real MCP round-trip.

    Each probe opens a one-connection ``client_class`` (:class:`~mcpsync.Client`, given by
    the caller so that routing never imports the Client) over ``make(endpoint)``
    (no retries), times the connect (transport + ``initialize`` / ``server/discover``)
    and one ``ping`` (``server/discover`` in the modern era), and closes it.

    Args:
        make: builds a fresh transport for an endpoint.
        client_class: the Client class.
        mode: the Client's era mode (``"modern"`` skips the probe for the era).
        timeout: bound of the connect and of the ping, each.

    Returns:
        ``probe(endpoint) -> (connect_seconds, ping_seconds)``; raises when the endpoint
        cannot be reached.
    """
    from ._policies import BreakerPolicy, PoolLimits, RetryPolicy, Timeouts

    timeouts = Timeouts(connect=timeout, request=timeout)

    def probe(ep: Endpoint) -> tuple[float, float]:
        c = client_class(lambda: make(ep), mode=mode, name=f"probe-{ep.name}", timeouts=timeouts,
                   retry=RetryPolicy.NONE, breaker=BreakerPolicy.DISABLED, pool=PoolLimits.SINGLE)
        try:
            t0 = time.perf_counter()
            c.connect()
            t1 = time.perf_counter()
            c.ping(timeout=timeout)
            return t1 - t0, time.perf_counter() - t1
        finally:
            c.close()

    return probe


def routed_client(
    client_class: Callable[..., Any],
    endpoints: Iterable[Endpoint | str],
    make: Callable[[Endpoint], Transport],
    *,
    region: str | None = None,
    probe: bool = True,
    router_options: Mapping[str, Any] | None = None,
    **options: Any,
) -> Any:
    """``Client.routed`` (see there): a ``client_class`` (the Client, given by the caller so
    that routing never imports it) whose connections a :class:`Router` places, with one
    circuit breaker per endpoint on the router's clock.

    The breakers are per endpoint: a client-wide one would stop every call when one
    endpoint fails, which is what failing over is there to avoid.
    """
    from ._policies import BreakerPolicy

    eps = [e if isinstance(e, Endpoint) else Endpoint(str(e)) for e in endpoints]
    policy: BreakerPolicy = options.pop("breaker", BreakerPolicy.DEFAULT)
    listener = options.pop("on_breaker_change", None)
    name = options.get("name") or "server"
    breakers: dict[str, CircuitBreaker] = {}
    router = Router(
        eps,
        probe=mcp_probe(make, client_class=client_class) if probe else None,
        region=region,
        breaker_open=lambda ep: breakers[ep.name].state is BreakerState.OPEN,
        **dict(router_options or {}),
    )
    for e in eps:  # on the router's clock: one time base for every routing decision
        breakers[e.name] = CircuitBreaker(policy, clock=router._clock, on_change=listener, name=f"{name}[{e.name}]")
    return client_class(router.transport_factory(make), breaker=BreakerPolicy.DISABLED,
                  routing=Attempts(name, router, breakers), **options)


class Attempts:
    """A routed client's attempt strategy, given to its session: each attempt under the
    breaker of its connection's endpoint (``Client.routed`` makes it).

    Args:
        name: the server's name in errors.
        router: places new connections.
        breakers: the circuit breaker of each endpoint, by endpoint name.
    """

    def __init__(self, name: str, router: Router, breakers: Mapping[str, CircuitBreaker]) -> None:
        self.name = name
        self.router = router
        self.breakers = dict(breakers)

    def run(self, session: Any, t: float, send: Callable[[Any], Any]) -> Any:
        """One attempt on a connection of ``session``'s pool: ``send(connection)`` under
        the breaker of the connection's endpoint.

        A connection whose endpoint's breaker is open is retired and another borrowed (a new
        one goes to the next endpoint); after the call, a connection whose endpoint is no
        longer the router's choice is retired once idle.
        """
        return _attempt(self.name, self.router, self.breakers, session, t, send)


def _attempt(name: str, router: Router, breakers: Mapping[str, CircuitBreaker], session: Any, t: float,
             send: Callable[[Any], Any]) -> Any:
    router.probe_in_background()
    if all(b.state is BreakerState.OPEN for b in breakers.values()):
        wait = min(b.retry_after() for b in breakers.values())
        raise CircuitOpen(f"the circuit breaker of every endpoint of {name} is open",
                          retry_after=wait, server=name, state="open")
    for _ in range(session.pool.limits.max + 2):
        lease = session.pool.borrow(t if session.borrow_wait is None else session.borrow_wait)
        conn = lease.connection
        endpoint = getattr(conn.transport, "endpoint", None)
        breaker = breakers.get(endpoint.name) if endpoint is not None else None
        if breaker is None:
            ticket = None
            break
        try:
            ticket = breaker.acquire()
            break
        except CircuitOpen:
            if breaker.state is BreakerState.OPEN:
                lease.release(retire=True)  # the next borrow opens one elsewhere
                continue
            ticket = None  # HALF_OPEN with its trial calls taken: run, but do not count
            break
    else:
        raise CircuitOpen(f"{name}: every connection leads to an endpoint behind an open breaker",
                          server=name, state="open")

    def should_leave() -> bool:
        """Its breaker opened, or another endpoint became the router's choice."""
        if endpoint is None:
            return False
        if breaker is not None and breaker.state is BreakerState.OPEN:
            return True
        try:
            return bool(router.choose(probe=False) != endpoint)
        except ServerUnavailable:
            return False  # nowhere better to go

    try:
        result = send(conn)
    except BaseException as exc:
        if ticket is not None:
            breaker.release(ticket, exc)  # type: ignore[union-attr]
        lease.release(broken=not conn.alive(), retire=should_leave())
        raise
    if ticket is not None:
        breaker.release(ticket)  # type: ignore[union-attr]
    lease.release(retire=should_leave())
    return result
