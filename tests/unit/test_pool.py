"""ConnectionPool: lazy creation, borrow/return on every path, growth, reaping, keepalive."""

from __future__ import annotations

import gc
import itertools
import random
import threading
import weakref

import pytest

from mcpsync._errors import (
    Cancelled,
    ConnectError,
    ConnectionClosed,
    PoolClosed,
    PoolTimeout,
    RequestTimeout,
)
from mcpsync._policies import PoolLimits
from mcpsync._pool import ConnectionPool
from tests.helpers import run_in_child


class FakeConn:
    """A multiplexed connection that counts how many calls use it at once."""

    ids = itertools.count()

    def __init__(self) -> None:
        self.id = next(self.ids)
        self.is_alive = True
        self.close_calls = 0
        self.pings = 0
        self.active = 0
        self.peak = 0
        self.lock = threading.Lock()

    def alive(self) -> bool:
        return self.is_alive and self.close_calls == 0

    def close(self) -> None:
        self.close_calls += 1

    def enter(self) -> None:
        with self.lock:
            self.active += 1
            self.peak = max(self.peak, self.active)

    def leave(self) -> None:
        with self.lock:
            self.active -= 1


class Factory:
    def __init__(self) -> None:
        self.made: list[FakeConn] = []
        self.failures: list[BaseException] = []
        self.lock = threading.Lock()

    def __call__(self) -> FakeConn:
        with self.lock:
            if self.failures:
                raise self.failures.pop(0)
            conn = FakeConn()
            self.made.append(conn)
            return conn


class FakeClock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


@pytest.fixture()
def factory() -> Factory:
    return Factory()


@pytest.fixture()
def clock() -> FakeClock:
    return FakeClock()


def make(
    factory: Factory, clock: FakeClock | None = None, maintenance_interval: float | None = None, **limits: object
) -> ConnectionPool[FakeConn]:
    kwargs = {"min": 2, "max": 4, "max_in_flight": 2, "borrow_timeout": 0.0, **limits}
    return ConnectionPool(
        factory,
        PoolLimits(**kwargs),  # type: ignore[arg-type]
        address="srv",
        clock=clock or FakeClock(),
        maintenance_interval=maintenance_interval,
    )


def assert_no_leaks(pool: ConnectionPool[FakeConn], factory: Factory) -> None:
    s = pool.stats()
    assert s.in_use == 0 and s.borrowed == s.returned
    assert s.created == len(factory.made)
    assert s.created - s.closed == s.size
    assert pool.loads() == [0] * s.size
    closed_by_pool = sum(1 for c in factory.made if c.close_calls)
    assert closed_by_pool == s.closed
    assert all(c.close_calls <= 1 for c in factory.made)


def test_defaults_match_spec() -> None:
    limits = PoolLimits.DEFAULT
    assert (limits.min, limits.max, limits.idle) == (2, 10, 300.0)


def test_lazy_creation(factory: Factory) -> None:
    pool = make(factory)
    assert factory.made == [] and len(pool) == 0
    with pool.borrow() as conn:
        assert conn is factory.made[0]
    assert pool.stats().created == 1
    assert_no_leaks(pool, factory)


class Boom(Exception):
    pass


@pytest.mark.parametrize(
    ("exc", "discarded"),
    [
        (None, False),
        (Boom("tool raised"), False),
        (RequestTimeout("no answer"), False),
        (Cancelled("by the caller"), False),
        (KeyboardInterrupt(), False),
        (ConnectionClosed("EOF"), True),
    ],
    ids=["success", "error", "timeout", "cancel", "interrupt", "connection-died"],
)
def test_returned_on_every_path(factory: Factory, exc: BaseException | None, discarded: bool) -> None:
    pool = make(factory)
    for _ in range(3):
        try:
            with pool.borrow() as conn:
                assert pool.stats().in_use == 1
                if exc is not None:
                    raise exc
        except BaseException as caught:  # noqa: B902  (KeyboardInterrupt included on purpose)
            assert caught is exc
    s = pool.stats()
    assert (s.borrowed, s.returned, s.in_use) == (3, 3, 0)
    if discarded:
        assert s.discarded == 3 and s.created == 3 and s.size == 0
        assert all(c.close_calls == 1 for c in factory.made)
    else:
        assert s.discarded == 0 and s.created == 1 and s.size == 1
    assert_no_leaks(pool, factory)


def test_connection_found_dead_after_a_failure_is_discarded(factory: Factory) -> None:
    pool = make(factory)
    with pytest.raises(RequestTimeout):
        with pool.borrow() as conn:
            conn.is_alive = False  # the child process exited meanwhile
            raise RequestTimeout("t")
    assert pool.stats().discarded == 1 and len(pool) == 0
    assert_no_leaks(pool, factory)


def test_lease_release_is_idempotent_and_mark_broken(factory: Factory) -> None:
    pool = make(factory)
    lease = pool.borrow()
    lease.release()
    lease.release()
    assert pool.stats().returned == 1
    lease = pool.borrow()
    lease.mark_broken()
    with lease:
        pass
    assert pool.stats().discarded == 1
    assert_no_leaks(pool, factory)


def test_grows_to_min_then_shares_then_grows_at_the_in_flight_limit(factory: Factory) -> None:
    pool = make(factory, min=2, max=3, max_in_flight=2)
    leases = [pool.borrow()]
    assert pool.loads() == [1]
    leases.append(pool.borrow())  # concurrency below min: a fresh connection
    assert pool.loads() == [1, 1]
    leases.append(pool.borrow())  # at min: share the least-loaded one
    leases.append(pool.borrow())
    assert pool.loads() == [2, 2]
    leases.append(pool.borrow())  # every connection at its limit: grow
    assert pool.loads() == [2, 2, 1]
    leases.append(pool.borrow())
    assert pool.loads() == [2, 2, 2]
    with pytest.raises(PoolTimeout):  # at max and all full
        pool.borrow(timeout=0)
    assert pool.stats().timeouts == 1
    for lease in leases:
        lease.release()
    assert_no_leaks(pool, factory)


def test_least_loaded_then_most_recently_used(factory: Factory, clock: FakeClock) -> None:
    pool = make(factory, clock, min=2, max=2, max_in_flight=4)
    a, b = pool.borrow(), pool.borrow()
    first, second = a.connection, b.connection
    a.release()
    clock.now = 1
    b.release()  # second is now the most recently used
    with pool.borrow() as conn:
        assert conn is second
    x = pool.borrow()  # second (MRU) again
    y = pool.borrow()  # first is less loaded now
    assert (x.connection, y.connection) == (second, first)
    x.release()
    y.release()
    assert_no_leaks(pool, factory)


def test_a_waiting_borrower_gets_the_returned_connection(factory: Factory) -> None:
    pool = make(factory, min=1, max=1, max_in_flight=1, borrow_timeout=30.0)
    lease = pool.borrow()
    got: list[FakeConn] = []
    waiting = threading.Event()

    def borrower() -> None:
        waiting.set()
        with pool.borrow() as conn:
            got.append(conn)

    t = threading.Thread(target=borrower)
    t.start()
    waiting.wait(5)
    lease.release()
    t.join(timeout=10)
    assert not t.is_alive() and got == [lease.connection]
    assert_no_leaks(pool, factory)


def test_borrow_timeout_raises_typed_error(factory: Factory) -> None:
    pool = make(factory, min=1, max=1, max_in_flight=1, borrow_timeout=0.01)
    lease = pool.borrow()
    with pytest.raises(PoolTimeout) as info:
        pool.borrow()
    assert info.value.address == "srv"
    lease.release()
    assert_no_leaks(pool, factory)


def test_dead_connection_is_replaced_on_borrow(factory: Factory) -> None:
    pool = make(factory, min=1)
    with pool.borrow() as conn:
        pass
    conn.is_alive = False
    with pool.borrow() as fresh:
        assert fresh is not conn
    s = pool.stats()
    assert s.discarded == 1 and s.created == 2 and s.borrowed == 2
    assert conn.close_calls == 1
    assert_no_leaks(pool, factory)


def test_factory_failure_leaks_nothing(factory: Factory) -> None:
    pool = make(factory)
    factory.failures.append(ConnectError("refused"))
    with pytest.raises(ConnectError):
        pool.borrow()
    with pool.borrow():
        pass
    assert pool.stats().created == 1
    assert_no_leaks(pool, factory)


def test_connect_timeout_is_retried_once(factory: Factory) -> None:
    pool = make(factory)
    factory.failures.append(ConnectError("timed out", timeout=True))
    with pool.borrow():
        pass
    factory.failures.extend([ConnectError("timed out", timeout=True), ConnectError("timed out", timeout=True)])
    pool2 = make(factory)
    with pytest.raises(ConnectError):
        pool2.borrow()
    factory.failures[:] = [ConnectError("refused", timeout=False)]
    pool3 = make(factory)
    with pytest.raises(ConnectError):  # refused is no timeout: not retried here
        pool3.borrow()
    assert factory.failures == []


def test_idle_connections_above_min_are_reaped(factory: Factory, clock: FakeClock) -> None:
    pool = make(factory, clock, min=2, max=4, max_in_flight=1)
    leases = [pool.borrow() for _ in range(4)]
    for i, lease in enumerate(leases):
        clock.now = float(i)  # returned at t=0, 1, 2, 3
        lease.release()
    assert pool.reap(now=299.0) == 0  # nobody idle 300 s yet
    assert pool.reap(now=300.5) == 1  # the one returned at t=0
    assert pool.reap(now=1000.0) == 1  # down to min, never below
    assert len(pool) == 2
    s = pool.stats()
    assert (s.reaped, s.closed, s.size) == (2, 2, 2)
    assert [c.close_calls for c in factory.made] == [1, 1, 0, 0]  # oldest idle first
    assert_no_leaks(pool, factory)


def test_busy_connections_are_not_reaped(factory: Factory, clock: FakeClock) -> None:
    pool = make(factory, clock, min=0, max=2, max_in_flight=1)
    lease = pool.borrow()
    assert pool.reap(now=10_000.0) == 0
    lease.release()
    clock.now = 10_000.0
    lease2 = pool.borrow()
    lease2.release()
    assert pool.reap(now=10_299.0) == 0 and pool.reap(now=10_301.0) == 1
    assert_no_leaks(pool, factory)


def test_reap_discards_dead_idle_connections(factory: Factory, clock: FakeClock) -> None:
    pool = make(factory, clock, min=2)
    a, b = pool.borrow(), pool.borrow()
    a.release()
    b.release()
    a.connection.is_alive = False
    assert pool.reap(now=1.0) == 1
    assert pool.stats().discarded == 1
    assert_no_leaks(pool, factory)


def test_keepalive_for_the_min_connections(factory: Factory, clock: FakeClock) -> None:
    pings: list[int] = []

    def ping(conn: FakeConn) -> None:
        pings.append(conn.id)

    pool = ConnectionPool(
        factory, PoolLimits(min=2, max=3, max_in_flight=1), clock=clock, keepalive=ping, keepalive_interval=60.0
    )
    leases = [pool.borrow() for _ in range(3)]
    for i, lease in enumerate(leases):
        clock.now = float(i)
        lease.release()
    assert pool.keepalive(now=30.0) == 0  # nobody quiet for 60 s
    assert pool.keepalive(now=62.5) == 2
    made = [c.id for c in factory.made]
    assert sorted(pings) == made[1:]  # the two most recently used; the third is left to the reaper
    assert pool.keepalive(now=100.0) == 0  # pinged at 62.5: next due at 122.5
    assert pool.keepalive(now=123.0) == 2
    assert pool.stats().returned == 3  # keepalives are not borrows
    assert_no_leaks(pool, factory)


def test_failed_keepalive_discards_the_connection(factory: Factory, clock: FakeClock) -> None:
    def ping(conn: FakeConn) -> None:
        raise ConnectionClosed("no pong")

    pool = ConnectionPool(factory, PoolLimits(min=1, max=2), clock=clock, keepalive=ping)
    with pool.borrow() as first:
        pass
    pool.maintain(now=61.0)
    assert len(pool) == 0 and first.close_calls == 1
    with pool.borrow() as second:  # replaced on the next borrow
        assert second is not first
    assert_no_leaks(pool, factory)


def test_close_closes_everything_once_and_refuses_borrows(factory: Factory) -> None:
    pool = make(factory)
    lease = pool.borrow()
    other = pool.borrow()
    other.release()
    pool.close()
    pool.close()
    assert all(c.close_calls == 1 for c in factory.made)
    with pytest.raises(PoolClosed):
        pool.borrow()
    lease.release()  # returning to a closed pool is harmless
    s = pool.stats()
    assert (s.in_use, s.size, s.closed) == (0, 0, 2)
    assert isinstance(PoolClosed("x"), ConnectionClosed)


def test_finalizer_closes_connections_and_does_not_hold_the_pool(factory: Factory) -> None:
    pool = make(factory, maintenance_interval=3600.0)
    with pool.borrow():
        pass
    thread = pool._thread
    ref = weakref.ref(pool)
    del pool
    gc.collect()
    assert ref() is None
    assert factory.made[0].close_calls == 1
    assert thread is not None
    thread.join(timeout=5)
    assert not thread.is_alive()


def test_maintenance_thread_starts_lazily_and_stops_on_close(factory: Factory) -> None:
    pool = make(factory, maintenance_interval=3600.0)
    assert pool._thread is None
    with pool.borrow():
        pass
    assert pool._thread is not None and pool._thread.is_alive()
    pool.close()
    assert not pool._thread.is_alive()


def test_maintenance_thread_reaps_on_its_own(factory: Factory, clock: FakeClock) -> None:
    pool = make(factory, clock, min=0, maintenance_interval=0.01)
    with pool.borrow():
        pass
    clock.now = 1000.0
    for _ in range(500):  # bounded wait for the daemon's round; no timing is asserted
        if len(pool) == 0:
            break
        threading.Event().wait(0.01)
    assert len(pool) == 0 and pool.stats().reaped == 1
    pool.close()


def test_forked_child_forgets_the_parents_connections(factory: Factory) -> None:
    pool = make(factory, min=1)
    with pool.borrow() as parent_conn:
        pass
    lease = pool.borrow()  # in flight at fork time

    def child() -> bytes:
        with pool.borrow() as conn:
            ok = conn is not parent_conn and parent_conn.close_calls == 0
        lease.release()  # a lease of the parent's: harmless, counts for nothing here
        s = pool.stats()
        return b"ok" if ok and s.created == 1 and s.in_use == 0 and len(pool) == 1 else b"bad"

    answer = run_in_child(child)
    assert answer == b"ok"
    lease.release()
    assert parent_conn.close_calls == 0 and pool.stats().created == 1
    assert_no_leaks(pool, factory)


def test_sixteen_threads_counts_add_up(factory: Factory, clock: FakeClock) -> None:
    limits = PoolLimits(min=2, max=5, max_in_flight=3, borrow_timeout=30.0, idle=0.5)
    pool = ConnectionPool(factory, limits, clock=clock)
    lock = threading.Lock()
    tally = {"ok": 0, "error": 0, "broken": 0, "timeout": 0}
    in_flight = [0]
    peak = [0]

    def worker(seed: int) -> None:
        rnd = random.Random(seed)
        local = dict.fromkeys(tally, 0)
        for i in range(300):
            roll = rnd.random()
            try:
                with pool.borrow() as conn:
                    conn.enter()
                    with lock:
                        in_flight[0] += 1
                        peak[0] = max(peak[0], in_flight[0])
                    try:
                        if roll < 0.05:
                            raise ConnectionClosed("cut")
                        if roll < 0.15:
                            raise RequestTimeout("slow")
                        if roll < 0.2:
                            raise Boom("tool failed")
                    finally:
                        with lock:
                            in_flight[0] -= 1
                        conn.leave()
                local["ok"] += 1
            except ConnectionClosed:
                local["broken"] += 1
            except RequestTimeout:
                local["timeout"] += 1
            except Boom:
                local["error"] += 1
            if i % 50 == 0:
                with lock:
                    clock.now += 1.0
                pool.reap()
        with lock:
            for k, v in local.items():
                tally[k] += v

    threads = [threading.Thread(target=worker, args=(n,)) for n in range(16)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=120)
    assert not any(t.is_alive() for t in threads)
    assert sum(tally.values()) == 16 * 300
    s = pool.stats()
    assert s.borrowed == s.returned == 16 * 300
    assert s.timeouts == 0
    assert all(c.peak <= limits.max_in_flight for c in factory.made)  # never over the per-connection limit
    assert peak[0] <= limits.max * limits.max_in_flight
    assert s.discarded >= 1
    assert_no_leaks(pool, factory)
    pool.close()
    assert all(c.close_calls == 1 for c in factory.made)
    s = pool.stats()
    assert s.created == s.closed


def test_retire_keeps_running_calls_and_closes_when_the_last_returns(factory):
    pool = make(factory, min=0, max=2, max_in_flight=4)
    first = pool.borrow()
    second = pool.borrow()
    conn = first.connection
    assert second.connection is conn  # multiplexed: both calls on one connection
    first.release(retire=True)
    assert conn.close_calls == 0  # a call still runs on it
    third = pool.borrow()
    assert third.connection is not conn  # no new call is given a retiring connection
    second.release()
    assert conn.close_calls == 1  # closed once its last call returned
    third.release()
    assert pool.stats().in_use == 0
    pool.close()


def test_retire_of_an_idle_connection_closes_it_at_once(factory):
    pool = make(factory, min=0, max=2)
    lease = pool.borrow()
    conn = lease.connection
    lease.release(retire=True)
    assert conn.close_calls == 1
    assert pool.borrow().connection is not conn
    pool.close()
