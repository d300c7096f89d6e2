"""ConnectionPool: waiting borrowers are served in arrival order (issue 16, symptom 10).

Real threads against the pool with a fake connection (the pool is pure logic); every
hand-over is synchronised on events or on the pool's own ``waiting`` count, never on
sleeps.
"""

from __future__ import annotations

import random
import statistics
import sys
import threading
import time

import pytest

from mcpsync._errors import PoolClosed, PoolTimeout
from mcpsync._policies import PoolLimits
from mcpsync._pool import ConnectionPool
from tests.unit.test_pool import Factory, FakeConn, assert_no_leaks


def fair_pool(factory: Factory, **limits: object) -> ConnectionPool[FakeConn]:
    kwargs = {"min": 1, "max": 1, "max_in_flight": 1, "borrow_timeout": 30.0, **limits}
    # a maintenance thread (hourly, so it never runs here) turns the lone-caller fast path on
    return ConnectionPool(factory, PoolLimits(**kwargs), address="srv", maintenance_interval=3600.0)  # type: ignore[arg-type]


def until(predicate, timeout: float = 10.0) -> None:
    """Wait (bounded) for a condition another thread brings about."""
    deadline = time.monotonic() + timeout
    while not predicate():
        assert time.monotonic() < deadline, "condition not reached in time"
        time.sleep(0.001)


@pytest.fixture()
def factory() -> Factory:
    return Factory()


def test_waiters_are_served_in_arrival_order_and_newcomers_queue_behind(factory: Factory) -> None:
    pool = fair_pool(factory)
    first = pool.borrow()
    order: list[int] = []
    got = [threading.Event() for _ in range(6)]
    done = [threading.Event() for _ in range(6)]

    def waiter(i: int) -> None:
        entry = pool.borrow_entry()
        order.append(i)
        got[i].set()
        done[i].wait(10)
        pool.give_back(entry)

    threads = []
    for i in range(6):  # each one queued before the next arrives
        t = threading.Thread(target=waiter, args=(i,), daemon=True)
        t.start()
        threads.append(t)
        until(lambda: pool.stats().waiting == i + 1)
    first.release()
    for i in range(6):
        # the slot went to waiter i the moment it was returned: neither the fast path
        # nor a new borrow can take it, even before waiter i has run
        assert pool.take_idle() is None
        with pytest.raises(PoolTimeout):
            pool.borrow(timeout=0.0)
        assert got[i].wait(10)
        done[i].set()
    for t in threads:
        t.join(10)
    assert order == list(range(6))
    s = pool.stats()
    assert s.timeouts == 6 and s.waiting == 0  # the six refused newcomers
    assert_no_leaks(pool, factory)
    assert pool.take_idle() is not None  # with nobody waiting the fast path works again
    pool.close()


def test_an_in_flight_slot_of_a_multiplexed_connection_goes_to_the_oldest_waiter(factory: Factory) -> None:
    pool = fair_pool(factory, max_in_flight=3)
    leases = [pool.borrow() for _ in range(3)]
    assert len(factory.made) == 1  # one session carries the three calls
    got = [threading.Event() for _ in range(5)]
    done = threading.Event()

    def waiter(i: int) -> None:
        with pool.borrow():
            got[i].set()
            done.wait(10)

    threads = []
    for i in range(5):
        t = threading.Thread(target=waiter, args=(i,), daemon=True)
        t.start()
        threads.append(t)
        until(lambda: pool.stats().waiting == i + 1)
    for i, lease in enumerate(leases):  # one slot at a time: each to the oldest waiter
        lease.release()
        assert got[i].wait(10)
        assert pool.stats().waiting == 4 - i
        assert not any(e.is_set() for e in got[i + 1 :])
    done.set()
    for t in threads:
        t.join(10)
    assert all(e.is_set() for e in got)
    assert_no_leaks(pool, factory)
    pool.close()


def test_no_starvation_with_one_exclusive_connection(factory: Factory) -> None:
    """16 threads x 200 borrows of one connection: nobody's worst wait runs away."""
    pool = fair_pool(factory)
    go = threading.Event()
    waits: list[list[float]] = [[] for _ in range(16)]

    def worker(i: int) -> None:
        go.wait(10)
        mine = waits[i]
        for _ in range(200):
            t0 = time.perf_counter()
            entry = pool.borrow_entry()
            mine.append(time.perf_counter() - t0)
            time.sleep(0.0002)  # a tiny hold that lets the other threads run
            pool.give_back(entry)

    threads = [threading.Thread(target=worker, args=(i,), daemon=True) for i in range(16)]
    for t in threads:
        t.start()
    go.set()
    for t in threads:
        t.join(60)
    assert not any(t.is_alive() for t in threads)
    flat = [w for mine in waits for w in mine]
    median, worst = statistics.median(flat), max(flat)
    # before the fix: median ~1 us, worst ~0.9 s (a returning thread kept taking the slot back)
    assert worst <= 50 * median + 0.5, f"worst wait {worst * 1e3:.1f} ms, median {median * 1e3:.3f} ms"
    s = pool.stats()
    assert s.borrowed == s.returned == 16 * 200 and s.timeouts == 0
    assert_no_leaks(pool, factory)
    pool.close()


def test_timeouts_under_contention_lose_no_slot(factory: Factory) -> None:
    """Waiters giving up at the moment a slot is handed to them pass it on."""
    pool = fair_pool(factory, max_in_flight=2)
    go = threading.Event()
    served = [0] * 12
    timed_out = [0] * 12

    def worker(i: int) -> None:
        rnd = random.Random(i)
        go.wait(10)
        for _ in range(300):
            try:
                entry = pool.borrow_entry(rnd.choice((0.0, 0.0005, 0.001, 0.003)))
            except PoolTimeout:
                timed_out[i] += 1
                continue
            served[i] += 1
            if rnd.random() < 0.5:
                time.sleep(0.0002)
            pool.give_back(entry)

    threads = [threading.Thread(target=worker, args=(i,), daemon=True) for i in range(12)]
    for t in threads:
        t.start()
    go.set()
    for t in threads:
        t.join(60)
    assert not any(t.is_alive() for t in threads)
    s = pool.stats()
    assert sum(timed_out) > 0 and sum(served) + sum(timed_out) == 12 * 300
    assert s.borrowed == s.returned == sum(served) and s.in_use == 0
    assert s.timeouts == sum(timed_out) and s.waiting == 0
    assert pool.loads() == [0] * s.size
    # both slots are free: two borrows without waiting
    a, b = pool.borrow(timeout=0.0), pool.borrow(timeout=0.0)
    a.release()
    b.release()
    assert_no_leaks(pool, factory)
    pool.close()


def test_a_slot_handed_to_a_waiter_that_gives_up_passes_to_the_next(factory: Factory) -> None:
    """The race of a timeout with a hand-over, made deterministic: the waiter's
    give-up path (``_leave``) runs after the slot was handed to it."""
    pool = fair_pool(factory)
    lease = pool.borrow()
    results: list[object] = []
    queued = threading.Event()

    def second() -> None:
        with pool.borrow() as conn:
            results.append(conn)

    from mcpsync._pool import Waiter  # the first waiter, played by hand

    waiter = Waiter()
    with pool._lock:
        pool._waiters.append(waiter)
    t = threading.Thread(target=lambda: (queued.set(), second()), daemon=True)
    t.start()
    queued.wait(10)
    until(lambda: pool.stats().waiting == 2)
    lease.release()  # handed to the hand-played waiter...
    assert waiter.entry is not None and pool.stats().in_use == 1
    err = pool._leave(waiter)  # ...which has just timed out: the slot moves on
    assert isinstance(err, PoolTimeout)
    t.join(10)
    assert results == [lease.connection]
    s = pool.stats()
    assert s.timeouts == 1 and s.waiting == 0
    assert_no_leaks(pool, factory)
    pool.close()


def test_a_waiter_opens_the_replacement_of_a_broken_connection(factory: Factory) -> None:
    pool = fair_pool(factory)
    lease = pool.borrow()
    got: list[FakeConn] = []
    t = threading.Thread(target=lambda: got.append(pool.borrow().connection), daemon=True)
    t.start()
    until(lambda: pool.stats().waiting == 1)
    lease.release(broken=True)
    t.join(10)
    assert len(factory.made) == 2 and got == [factory.made[1]]
    assert factory.made[0].close_calls == 1
    pool.close()


def test_a_failed_open_passes_the_right_to_open_to_the_next_waiter(factory: Factory) -> None:
    pool = fair_pool(factory, min=0, max=2)
    lease = pool.borrow()
    gate = threading.Event()
    opened = threading.Event()
    real = factory.__call__

    def slow_failing_then_ok() -> FakeConn:
        if not opened.is_set():
            opened.set()
            gate.wait(10)
            raise OSError("refused")
        return real()

    pool._factory = slow_failing_then_ok  # type: ignore[assignment]
    outcomes: list[object] = []

    def borrower() -> None:
        try:
            outcomes.append(pool.borrow().connection)
        except OSError as exc:
            outcomes.append(exc)

    a = threading.Thread(target=borrower, daemon=True)
    a.start()
    assert opened.wait(10)  # a opens the second connection
    b = threading.Thread(target=borrower, daemon=True)
    b.start()
    until(lambda: pool.stats().waiting == 1)  # b waits: one open at a time beyond min
    gate.set()
    a.join(10)
    b.join(10)
    assert isinstance(outcomes[0], OSError) and isinstance(outcomes[1], FakeConn)
    lease.release()
    pool.close()


def test_close_wakes_every_waiter_with_pool_closed(factory: Factory) -> None:
    pool = fair_pool(factory)
    lease = pool.borrow()
    errors: list[BaseException] = []

    def waiter() -> None:
        try:
            pool.borrow()
        except BaseException as exc:  # noqa: BLE001 - recorded for the assertion
            errors.append(exc)

    threads = [threading.Thread(target=waiter, daemon=True) for _ in range(5)]
    for t in threads:
        t.start()
    until(lambda: pool.stats().waiting == 5)
    t0 = time.monotonic()
    pool.close()
    for t in threads:
        t.join(10)
    assert time.monotonic() - t0 < 5  # not their 30 s borrow timeout
    assert len(errors) == 5 and all(isinstance(e, PoolClosed) for e in errors)
    lease.release()
    assert pool.stats().in_use == 0


@pytest.mark.parametrize("max_in_flight", [1, 3])
def test_lone_caller_claims_and_locked_borrows_never_overfill_a_connection(
    factory: Factory, max_in_flight: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The lone caller's lock-free claim (take_idle/give_back_idle), borrows under the lock
    and the reaper, all at once from many threads: no connection ever carries more calls
    than ``max_in_flight`` or is closed under one, nothing leaks, every borrow counts once."""
    from mcpsync._pool_types import Entry

    real_load = Entry.load

    def stale_load(self: Entry) -> int:  # the lock's side acts on a load that may have moved
        n = real_load(self)
        time.sleep(0)
        return n

    monkeypatch.setattr(Entry, "load", stale_load)
    clock_now = [0.0]
    pool = ConnectionPool(
        factory, PoolLimits(min=1, max=2, max_in_flight=max_in_flight, borrow_timeout=30.0, idle=0.0),
        address="srv", clock=lambda: clock_now[0], maintenance_interval=3600.0,
    )
    stop = threading.Event()
    errors: list[BaseException] = []
    fast_uses = [0]
    breaks = max_in_flight == 1  # (a shared connection discarded as broken closes under its other calls)

    def use(conn: FakeConn) -> None:
        conn.enter()
        try:
            for _ in range(3):
                assert conn.active <= max_in_flight, (conn.active, max_in_flight)
                assert conn.close_calls == 0, "a connection closed under its call"
        finally:
            conn.leave()

    def lone_caller(seed: int) -> None:
        rnd = random.Random(seed)
        try:
            for _ in range(3000):
                entry = pool.take_idle()
                if entry is None:
                    entry = pool.borrow_entry()
                    use(entry.conn)
                    pool.give_back(entry, broken=breaks and rnd.random() < 0.002)
                else:
                    fast_uses[0] += 1
                    use(entry.conn)
                    pool.give_back_idle(entry, broken=breaks and rnd.random() < 0.002)
        except BaseException as exc:  # reported below
            errors.append(exc)

    def reaper() -> None:
        while not stop.is_set():
            clock_now[0] += 1.0
            pool.reap()

    threads = [threading.Thread(target=lone_caller, args=(i,)) for i in range(6)]
    upkeep = threading.Thread(target=reaper)
    switch = sys.getswitchinterval()
    sys.setswitchinterval(1e-6)  # threads change hands between any two steps: races show
    try:
        for t in threads + [upkeep]:
            t.start()
        for t in threads:
            t.join(120)
    finally:
        stop.set()
        upkeep.join(30)
        sys.setswitchinterval(switch)
    assert not errors, errors[:3]
    assert fast_uses[0] > 0  # the lock-free path did run
    assert all(c.peak <= max_in_flight for c in factory.made)
    s = pool.stats()
    assert s.borrowed == s.returned == 6 * 3000 and s.in_use == 0
    assert_no_leaks(pool, factory)
    pool.close()
