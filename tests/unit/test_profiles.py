"""Scale profiles: SPEC.md's numbers, overrides, and the process-per-call wrapper's logic."""

from __future__ import annotations

from dataclasses import replace

import pytest

from mcpsync import BreakerPolicy, Client, PoolLimits, RetryPolicy, Timeouts
from mcpsync._errors import ConnectError, RequestTimeout
from mcpsync._profiles import (
    ALL_TRANSPORTS,
    PROFILE_FLAGS,
    PROFILES,
    ProcessPerCallClient,
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


class _OneShot:
    """Stands in for Client.stdio: each instance is one 'process'."""

    def __init__(self, log, outcomes):
        self.log, self.outcomes = log, outcomes
        self.closed = False
        self.session = "facts"

    def call_tool(self, name, arguments=None, **kw):
        outcome = self.outcomes.pop(0)
        if isinstance(outcome, BaseException):
            raise outcome
        return outcome

    list_tools = lambda self, **kw: []  # noqa: E731

    def close(self):
        self.closed = True
        self.log.append("closed")


def _wrapper(outcomes, **kw):
    made, sleeps = [], []

    def factory(command, args, env=None, cwd=None, **options):
        made.append(options)
        return _OneShot(made_log, outcomes)

    made_log: list = []
    c = ProcessPerCallClient("srv", ["a"], client_factory=factory, sleep=sleeps.append, **kw)
    return c, made, made_log, sleeps


def test_each_call_gets_a_fresh_process_closed_after():
    c, made, closed, _ = _wrapper(["r1", "r2", "r3"])
    assert [c.call_tool("t"), c.call_tool("t"), c.call_tool("t")] == ["r1", "r2", "r3"]
    assert c.spawned == 3 and closed == ["closed"] * 3


def test_minimal_retries_three_times_at_a_fixed_interval_each_on_a_new_process():
    c, made, closed, sleeps = _wrapper([ConnectError("no")] * 3 + ["ok"])
    assert c.call_tool("t") == "ok"
    assert c.spawned == 4 and sleeps == [1.0, 1.0, 1.0]
    c, made, closed, sleeps = _wrapper([ConnectError("no")] * 4)
    with pytest.raises(ConnectError) as info:
        c.call_tool("t")
    assert c.spawned == 4 and len(closed) == 4
    assert [name for name, _ in info.value.retry_history] == ["ConnectError"] * 4


def test_the_one_shot_clients_do_not_retry_or_break_themselves():
    c, made, _, _ = _wrapper(["ok"])
    c.call_tool("t")
    assert made[0]["retry"] == RetryPolicy.NONE and made[0]["breaker"].enabled is False


def test_minimal_has_no_breaker():
    c, _, _, _ = _wrapper([RequestTimeout("slow")] * 12, retry=RetryPolicy.NONE)
    for _ in range(12):
        with pytest.raises(RequestTimeout):
            c.call_tool("t")
    assert c.spawned == 12


def test_closed_wrapper_refuses_calls():
    c, _, _, _ = _wrapper(["ok"], retry=RetryPolicy.NONE)
    c.close()
    with pytest.raises(Exception, match="closed"):
        c.call_tool("t")
    assert c.spawned == 0


def test_retry_override_reaches_the_wrapper():
    from mcpsync._profiles import process_per_call, resolve

    fast = replace(PROFILES["minimal"].retry, backoff=0.01)
    options, flags = resolve("minimal", "stdio", {"retry": fast})
    w = process_per_call(Client, "srv", [], options)
    assert flags["process_per_call"] and isinstance(w, ProcessPerCallClient) and w.retry == fast
    w = Client.stdio("srv", [], profile="minimal", retry=fast)
    assert isinstance(w, ProcessPerCallClient) and isinstance(w, Client) and w.retry == fast
    with pytest.raises(AttributeError, match="read-only"):
        w.retry = RetryPolicy.NONE
    c = Client.stdio("srv", [], profile="minimal", process_per_call=False)  # lazy: nothing runs
    assert isinstance(c, Client) and c.retry.retries == 3
    c.close()


def test_resolve_is_the_constructor_hook():
    from mcpsync._profiles import resolve

    client_opts, flags = resolve("professional", "http", {"mode": "legacy", "retry": RetryPolicy.NONE})
    assert client_opts["retry"] == RetryPolicy.NONE and client_opts["mode"] == "legacy"
    # the Client keeps one session per server; the profile's pool sizes what is
    # interchangeable under it (the HTTP keep-alive sockets)
    assert "pool" not in client_opts
    assert flags["oauth"] == "authorization-code" and "oauth" not in client_opts
    from mcpsync import Client, PoolLimits

    client_opts, _ = resolve("professional", "http", {})
    assert "pool" not in client_opts and client_opts["pool_size"] == 5
    client_opts, _ = resolve("professional", "stdio", {"pool": PoolLimits(min=2, max=3)})
    assert client_opts["pool"].max == 3  # asked for explicitly: several sessions
    with pytest.raises(ProfileError):
        resolve("professional", "grpc", {})
    resolve("minimal", None, {})  # a custom transport factory: no check
