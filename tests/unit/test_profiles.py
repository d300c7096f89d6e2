"""Scale profiles: SPEC.md's numbers, overrides, and the per-call pool the minimal profile is."""

from __future__ import annotations

from dataclasses import replace

import pytest

from mcpsync import BreakerPolicy, Client, PoolLimits, RetryPolicy, Timeouts
from mcpsync._profiles import (
    ALL_TRANSPORTS,
    PROFILE_FLAGS,
    PROFILES,
    ProfileError,
    check_transport,
    profile_options,
    split_options,
)


def test_minimal_is_specs_minimal():
    o = profile_options("minimal")
    assert o["allowed_transports"] == {"stdio"}
    assert o["process_per_call"] is True
    assert (o["retry"].retries, o["retry"].fixed, o["retry"].jitter) == (3, True, 0.0)
    assert [o["retry"].base_delay(n) for n in (1, 2, 3)] == [1.0, 1.0, 1.0]  # fixed interval
    assert o["breaker"].enabled is False
    assert (o["subscriptions"], o["tool_cache"], o["oauth"], o["metrics"], o["routing"]) == ("none", "none", "none", False, False)


def test_professional_is_specs_professional():
    o = profile_options("professional")
    assert o["allowed_transports"] == {"stdio", "http", "sse"}
    assert (o["pool"].min, o["pool"].max) == (2, 5)
    assert (o["retry"].retries, o["retry"].max_wait, o["retry"].fixed) == (5, 30.0, False)
    assert o["retry"].jitter == 0.25
    assert o["process_per_call"] is False
    assert (o["subscriptions"], o["tool_cache"], o["oauth"]) == ("poll", "session", "authorization-code")


def test_enterprise_is_specs_enterprise():
    o = profile_options("enterprise")
    assert o["allowed_transports"] == ALL_TRANSPORTS and len(ALL_TRANSPORTS) == 6
    assert (o["pool"].min, o["pool"].max, o["adaptive_pool"]) == (2, 10, True)
    b = o["breaker"]
    assert (b.enabled, b.threshold, b.window, b.cooldown, b.half_open_max) == (True, 5, 60.0, 30.0, 3)
    assert (o["subscriptions"], o["tool_cache"], o["oauth"], o["metrics"], o["routing"]) == (
        "push",
        "three-level",
        "pkce-refresh-keyring",
        True,
        True,
    )


@pytest.mark.parametrize("name", list(PROFILES))
def test_every_single_setting_is_overridable(name):
    base = profile_options(name)
    overrides = {
        "timeouts": Timeouts(request=3.0),
        "retry": RetryPolicy.NONE,
        "breaker": BreakerPolicy(threshold=2),
        "pool": PoolLimits(min=1, max=3),
        "process_per_call": not base["process_per_call"],
        "allowed_transports": {"stdio", "websocket"},
        "adaptive_pool": not base["adaptive_pool"],
        "subscriptions": "poll",
        "tool_cache": "session",
        "oauth": "none",
        "metrics": not base["metrics"],
        "routing": not base["routing"],
    }
    assert set(overrides) == set(base)
    for key, value in overrides.items():
        o = profile_options(name, **{key: value})
        assert o[key] == (frozenset(value) if key == "allowed_transports" else value)
        for other in base:
            if other != key:
                assert o[other] == base[other], (key, other)


def test_none_overrides_are_ignored_and_extra_options_pass_through():
    o = profile_options("minimal", retry=None, mode="legacy")
    assert o["retry"] == PROFILES["minimal"].retry and o["mode"] == "legacy"


def test_bad_names_and_values():
    with pytest.raises(ProfileError, match="unknown profile 'tiny': expected one of 'minimal', 'professional', 'enterprise'"):
        profile_options("tiny")
    with pytest.raises(ProfileError, match="allowed_transports: unknown transports"):
        profile_options("minimal", allowed_transports={"carrier-pigeon"})
    with pytest.raises(ProfileError, match="subscriptions must be one of"):
        profile_options("enterprise", subscriptions="sometimes")


def test_split_options_feeds_the_real_client():
    for name in PROFILES:
        client_opts, flags = split_options(profile_options(name, mode="legacy"))
        assert set(flags) <= set(PROFILE_FLAGS)
        assert {"timeouts", "retry", "breaker", "pool", "mode"} <= set(client_opts)
        # the real Client accepts every option it is given (it connects lazily: nothing runs)
        Client(lambda: None, **client_opts).close()
    with pytest.raises(TypeError, match="unexpected option 'retries'"):
        split_options({"retries": 3})


def test_check_transport():
    check_transport("minimal", "stdio")
    check_transport("enterprise", "grpc")
    with pytest.raises(ProfileError, match=r"allows only stdio servers, not http: use profile='professional'"):
        check_transport("minimal", "http")
    with pytest.raises(ProfileError, match=r"not websocket: use profile='enterprise'"):
        check_transport(profile_options("professional"), "websocket")
    check_transport(profile_options("minimal", allowed_transports={"stdio", "http"}), "http")


# ------------------------------------------------------------------ process per call (logic)


class _Conn:
    """A connection for the pool's pure logic: alive until closed."""

    def __init__(self, log):
        self.log = log
        self.closed = False

    def alive(self):
        return not self.closed

    def close(self):
        self.closed = True
        self.log.append("closed")


def test_a_per_call_pool_opens_a_connection_for_each_call_and_closes_it_after():
    from mcpsync._pool import ConnectionPool

    log: list = []
    pool = ConnectionPool(lambda: _Conn(log), PoolLimits.PER_CALL)
    try:
        seen = []
        for _ in range(3):
            with pool.borrow() as conn:
                seen.append(conn)
            assert conn.closed  # as the call ends
        assert len({id(c) for c in seen}) == 3 and log == ["closed"] * 3
        assert pool.take_idle() is None  # nothing lasts for a lone caller to claim
        leases = [pool.borrow(timeout=1.0) for _ in range(3)]  # at once: one each
        assert len({id(lease.connection) for lease in leases}) == 3
        for lease in leases:
            lease.release()
        s = pool.stats()
        # ended, not discarded: nothing was lost
        assert (s.created, s.closed, s.discarded, s.size, s.in_use) == (6, 6, 0, 0, 0)
        with pool.borrow() as conn:
            raise_in = conn
        assert raise_in.closed
    finally:
        pool.close()


def test_a_per_call_pool_waits_at_max_and_discards_a_broken_connection():
    from mcpsync._errors import ConnectionClosed, PoolTimeout
    from mcpsync._pool import ConnectionPool

    pool = ConnectionPool(lambda: _Conn([]), PoolLimits(min=0, max=1, max_in_flight=1, per_call=True))
    try:
        lease = pool.borrow()
        with pytest.raises(PoolTimeout):
            pool.borrow(timeout=0.0)
        lease.release()
        with pytest.raises(ConnectionClosed):
            with pool.borrow(timeout=0.0):
                raise ConnectionClosed("died in the call")
        s = pool.stats()
        assert (s.created, s.closed, s.discarded, s.timeouts) == (2, 2, 1, 1)
    finally:
        pool.close()


def test_per_call_limits_keep_nothing_and_run_one_call_on_each():
    assert PoolLimits.PER_CALL.per_call and PoolLimits.PER_CALL.min == 0 and PoolLimits.PER_CALL.max_in_flight == 1
    with pytest.raises(ValueError, match="per_call=True.*min=0 and max_in_flight=1"):
        PoolLimits(min=1, max=2, max_in_flight=1, per_call=True)
    with pytest.raises(ValueError, match="per_call"):
        PoolLimits(min=0, max=2, per_call=True)  # (16 calls on a connection made for one)


def test_minimal_is_a_client_whose_pool_is_per_call():
    fast = replace(PROFILES["minimal"].retry, backoff=0.01)
    c = Client.stdio("srv", [], profile="minimal", retry=fast)  # lazy: nothing runs
    try:
        assert type(c) is Client and c.pool == PoolLimits.PER_CALL and c.retry == fast
        assert c.breaker.enabled is False
        with pytest.raises(AttributeError, match="read-only"):
            c.retry = RetryPolicy.NONE
    finally:
        c.close()
    c = Client.stdio("srv", [], profile="minimal", process_per_call=False)  # a lasting session again
    try:
        assert not c.pool.per_call and c.retry.retries == 3
    finally:
        c.close()
    mine = PoolLimits(min=0, max=3, max_in_flight=1, per_call=True)
    c = Client.stdio("srv", [], profile="minimal", pool=mine)
    try:
        assert c.pool == mine
    finally:
        c.close()
    with pytest.raises(ProfileError, match="keeps connections between calls"):
        Client.stdio("srv", [], profile="minimal", pool=PoolLimits(min=1, max=1))
    c = Client.stdio("srv", [], profile="professional", process_per_call=True)
    try:
        assert c.pool == PoolLimits.PER_CALL
    finally:
        c.close()


@pytest.mark.parametrize("use", [
    lambda c: c.subscribe("demo://about", lambda *a: None),
    lambda c: c.on_list_changed("tools", lambda *a: None),
    lambda c: c.call_tool_task("t"),
    lambda c: c.task("task-1"),
    lambda c: c.list_tasks(),
], ids=["subscribe", "on_list_changed", "call_tool_task", "task", "list_tasks"])
def test_a_per_call_client_refuses_what_needs_a_lasting_session_before_starting_anything(use):
    c = Client.stdio("/nonexistent/mcp-server", [], pool=PoolLimits.PER_CALL)
    try:
        with pytest.raises(ProfileError, match="needs a session that outlives one call"):
            use(c)
        assert c.pool_stats().created == 0
    finally:
        c.close()


def test_resolve_is_the_constructor_hook():
    from mcpsync._profiles import resolve

    client_opts, flags = resolve("professional", "http", {"mode": "legacy", "retry": RetryPolicy.NONE})
    assert client_opts["retry"] == RetryPolicy.NONE and client_opts["mode"] == "legacy"
    # the Client keeps one session per server; the profile's pool sizes what is
    # interchangeable under it (the HTTP keep-alive sockets)
    assert "pool" not in client_opts
    assert flags["oauth"] == "authorization-code" and "oauth" not in client_opts
    client_opts, _ = resolve("professional", "http", {})
    assert "pool" not in client_opts and client_opts["pool_size"] == 5
    client_opts, _ = resolve("professional", "stdio", {"pool": PoolLimits(min=2, max=3)})
    assert client_opts["pool"].max == 3  # asked for explicitly: several sessions
    with pytest.raises(ProfileError):
        resolve("professional", "grpc", {})
    resolve("minimal", None, {})  # a custom transport factory: no check
