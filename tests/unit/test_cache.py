"""ToolCache: the three levels, ttlMs / cacheScope, credentials, stable order, counters.

Every test runs over both TTLCache implementations (compiled and pure Python).
"""

from __future__ import annotations

import threading

import pytest

from mcpsync._cache import (
    LIST_CHANGED,
    PRIVATE,
    PUBLIC,
    RECONNECT,
    SERVER_START,
    ToolCache,
    credential_key,
    merge_cache_hints,
)
from mcpsync._messages import ListToolsResult, Tool
from mcpsync._metrics import MetricsRecorder
from mcpsync._speedups import _pyspeedups

try:
    from mcpsync._speedups import _cspeedups
except ImportError:  # test_speedups fails loudly in that case
    _cspeedups = None

IMPLS = [pytest.param(_cspeedups, id="c-extension"), pytest.param(_pyspeedups, id="pure-python")]


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


@pytest.fixture
def clock() -> Clock:
    return Clock()


@pytest.fixture(params=IMPLS)
def make(request, clock):
    if request.param is None:
        pytest.fail("the compiled _cspeedups module did not load")

    def build(**kw):
        kw.setdefault("clock", clock)
        return ToolCache(cache_factory=request.param.TTLCache, **kw)

    return build


def tools(*names: str) -> list[Tool]:
    return [Tool(name=n) for n in names]


def test_first_discovery_serves_every_lookup(make):
    cache = make()
    calls = []
    for _turn in range(50):  # level 1 + 2: every turn of the session reuses the listing
        ts = cache.fetch("s1", lambda: calls.append(1) or tools("echo", "add"))
        assert ts.names == ("echo", "add")
        assert cache.lookup("s1", "add").name == "add"
    assert len(calls) == 1
    st = cache.stats("s1")
    assert st.discoveries == 1
    assert st.misses == 1  # the very first fetch
    assert st.hits == 49 + 50


@pytest.mark.parametrize("reason", [LIST_CHANGED, RECONNECT, SERVER_START])
def test_rediscovery_only_after_invalidation(make, reason):
    cache = make()
    n = []
    cache.fetch("s1", lambda: n.append(1) or tools("a"))
    cache.fetch("s1", lambda: n.append(1) or tools("a"))
    assert len(n) == 1
    assert cache.invalidate("s1", reason) == 1
    assert cache.get("s1") is None
    ts = cache.fetch("s1", lambda: n.append(1) or tools("a", "b"))
    assert len(n) == 2 and ts.names == ("a", "b") and ts.generation == 1
    assert cache.stats("s1").invalidations == {reason: 1}


def test_invalidation_is_per_server(make):
    cache = make()
    cache.put("s1", tools("a"))
    cache.put("s2", tools("b"))
    cache.invalidate("s1", LIST_CHANGED)
    assert cache.get("s1") is None
    assert cache.get("s2").names == ("b",)
    assert cache.invalidate(None, SERVER_START) == 1
    assert len(cache) == 0


def test_positive_ttl_expires(make, clock):
    cache = make()
    cache.put("s1", tools("a"), ttl_ms=5000)
    clock.now += 4.9
    ts = cache.get("s1")
    assert ts is not None and not ts.stale
    clock.now += 0.2
    assert cache.get("s1") is None  # the server's hint is honoured: rediscover


def test_zero_ttl_is_stale_but_serves_the_session(make, clock):
    cache = make()
    cache.put("s1", tools("a"), ttl_ms=0, scope=PUBLIC)
    ts = cache.get("s1")
    assert ts is not None and ts.stale
    clock.now += 3600
    assert cache.lookup("s1", "a") is not None
    assert cache.stats("s1").stale_served == 1


def test_zero_ttl_refetch_policy(make):
    cache = make(zero_ttl="refetch")
    cache.put("s1", tools("a"), ttl_ms=0)
    assert cache.get("s1") is None
    with pytest.raises(ValueError):
        make(zero_ttl="sometimes")


def test_no_ttl_lives_for_the_session(make, clock):
    cache = make()
    cache.put("s1", tools("a"))
    clock.now += 10 * 86400
    ts = cache.get("s1")
    assert ts is not None and not ts.stale and ts.fresh_until is None


def test_private_entries_are_never_shared_across_credentials(make):
    cache = make()
    cache.put("s1", tools("mine"), scope=PRIVATE, cred="token-A")
    assert cache.get("s1", cred="token-A").names == ("mine",)
    assert cache.get("s1", cred="token-B") is None
    assert cache.get("s1") is None
    assert cache.lookup("s1", "mine", cred="token-B") is None
    # a public entry is shared, but a private one still wins for its owner
    cache.put("s1", tools("shared"), scope=PUBLIC, cred="token-B")
    assert cache.get("s1", cred="token-B").names == ("shared",)
    assert cache.get("s1").names == ("shared",)
    assert cache.get("s1", cred="token-A").names == ("mine",)


def test_scope_defaults_private_under_a_credential(make):
    cache = make()
    ts = cache.put("s1", tools("a"), cred="tok")
    assert ts.scope == PRIVATE
    assert cache.get("s1", cred="other") is None
    assert cache.put("s2", tools("a")).scope == PUBLIC
    assert cache.put("s3", tools("a"), scope="weird").scope == PRIVATE


def test_private_without_credential_is_its_own_context(make):
    cache = make()
    cache.put("s1", tools("anon"), scope=PRIVATE)
    assert cache.get("s1").names == ("anon",)
    assert cache.get("s1", cred="tok") is None


def test_server_turning_public_drops_the_callers_private_copy(make):
    cache = make()
    cache.put("s1", tools("old"), scope=PRIVATE, cred="A")
    cache.put("s1", tools("new"), scope=PUBLIC, cred="A")
    assert cache.get("s1", cred="A").names == ("new",)


def test_invalidate_drops_private_entries_too(make):
    cache = make()
    cache.put("s1", tools("a"), scope=PRIVATE, cred="A")
    cache.put("s1", tools("b"), scope=PRIVATE, cred="B")
    cache.put("s1", tools("c"), scope=PUBLIC)
    assert cache.invalidate("s1", LIST_CHANGED, cred="A") == 1
    assert cache.get("s1", cred="B").names == ("b",)
    assert cache.invalidate("s1", LIST_CHANGED) == 2
    assert cache.get("s1", cred="B") is None


def test_credentials_are_hashed():
    k = credential_key("secret-token")
    assert k is not None and "secret" not in k and len(k) == 32
    assert credential_key(b"secret-token") == k
    assert credential_key(None) is None


def test_merge_hints_over_pages():
    pages = [
        ListToolsResult(tools=tools("a"), ttl_ms=60_000, cache_scope="public", next_cursor="p2"),
        ListToolsResult(tools=tools("b"), ttl_ms=5_000, cache_scope="private"),
        ListToolsResult(tools=tools("c")),
    ]
    assert merge_cache_hints(pages) == (5_000, PRIVATE)
    assert merge_cache_hints([{"ttlMs": 7, "cacheScope": "public"}, {"tools": []}]) == (7, PUBLIC)
    assert merge_cache_hints([ListToolsResult()]) == (None, None)


def test_put_pages_and_fetch_pages(make, clock):
    cache = make()
    pages = [
        ListToolsResult(tools=tools("a", "b"), ttl_ms=2000, cache_scope="public", next_cursor="x"),
        ListToolsResult(tools=tools("c"), ttl_ms=1000, cache_scope="public"),
    ]
    ts = cache.fetch("s1", lambda: pages)
    assert ts.names == ("a", "b", "c") and ts.ttl_ms == 1000 and ts.scope == PUBLIC
    clock.now += 1.5
    assert cache.get("s1") is None
    ts = cache.fetch("s1", lambda: pages[1])  # a single page
    assert ts.names == ("c",)


def test_stable_order_across_rediscovery(make):
    cache = make()
    cache.put("s1", tools("b", "a", "c"))
    cache.invalidate("s1", LIST_CHANGED)
    ts = cache.put("s1", tools("d", "c", "a"))  # the server reordered, dropped b, added d
    assert ts.names == ("a", "c", "d")  # known tools keep their places, new ones append
    cache.put("s0", tools("z"))
    assert [(s, t.name) for s, t in cache.ordered_tools()] == [("s1", "a"), ("s1", "c"), ("s1", "d"), ("s0", "z")]
    assert [t.name for _, t in cache.ordered_tools(["s0"])] == ["z"]
    assert cache.tools("missing") == ()


def test_a_listing_with_a_name_twice_keeps_the_last_in_the_first_place(make):
    cache = make()
    first, second = Tool(name="a", description="1"), Tool(name="a", description="2")
    listed = [first, Tool(name="b"), second]
    ts = cache.put("s1", listed)
    assert ts.names == ("a", "b") and ts.by_name["a"] is second and ts.tools[0] is second
    assert len(listed) == 3  # the caller's list is not changed
    ts = cache.put("s1", iter(tools("b", "a")))  # the same names again, any iterable, reordered
    assert ts.names == ("a", "b")
    ts = cache.put("s1", tools("a", "b"))  # the same names in the same order
    assert ts.names == ("a", "b") and [t.name for t in ts.tools] == ["a", "b"]


def test_lookup_of_unknown_tool_is_a_miss(make):
    cache = make()
    cache.put("s1", tools("a"))
    assert cache.lookup("s1", "nope") is None
    assert cache.lookup("s2", "a") is None
    assert cache.stats("s1").misses == 1
    assert cache.stats().misses == 2
    assert cache.peek("s1").names == ("a",)
    assert cache.stats("s1").hits == 0  # peek counts nothing


def test_discovery_errors_propagate_and_are_not_cached(make):
    cache = make()

    def boom():
        raise RuntimeError("server down")

    with pytest.raises(RuntimeError):
        cache.fetch("s1", boom)
    assert cache.fetch("s1", lambda: tools("a")).names == ("a",)


def test_single_flight_under_threads(make):
    cache = make()
    gate = threading.Event()
    calls = []

    def discover():
        calls.append(1)
        gate.wait(5)
        return tools("a")

    results = []
    threads = [threading.Thread(target=lambda: results.append(cache.fetch("s1", discover).names)) for _ in range(16)]
    for t in threads:
        t.start()
    while not calls:
        threading.Event().wait(0.005)
    gate.set()
    for t in threads:
        t.join(10)
    assert results == [("a",)] * 16
    assert len(calls) == 1
    assert cache.stats("s1").discoveries == 1


def test_counters_exact_under_threads(make):
    cache = make()
    cache.put("s1", tools("a"))

    def work():
        for _ in range(500):
            cache.lookup("s1", "a")
            cache.lookup("s1", "b")

    ts = [threading.Thread(target=work) for _ in range(8)]
    for t in ts:
        t.start()
    for t in ts:
        t.join(30)
    st = cache.stats("s1")
    assert (st.hits, st.misses, st.hit_rate) == (4000, 4000, 0.5)


def test_feeds_the_metrics_recorder(make):
    rec = MetricsRecorder()
    cache = make(metrics=rec)
    cache.fetch("s1", lambda: tools("a"))
    cache.lookup("s1", "a")
    cache.lookup("s1", "a")
    cache.lookup("s1", "zzz")
    m = rec.snapshot()["s1"]
    assert m.tools["a"].cache_hits == 2
    assert m.total.cache_hits == 2 and m.total.cache_misses == 2  # the cold fetch + zzz
    assert m.total.cache_hit_rate == 0.5
    assert m.discovery.calls == 1
    assert m.total.calls == 0  # discovery is never agent work


def test_maxsize_bounds_entries(make):
    cache = make(maxsize=3)
    for i in range(10):
        cache.put(f"s{i}", tools("a"))
    assert len(cache) == 3
    assert cache.get("s9") is not None and cache.get("s0") is None
