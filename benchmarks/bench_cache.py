"""Tool cache lookups: compiled vs pure ``_speedups.TTLCache`` next to ``cachetools.TTLCache``.

All in one run, one group per operation; the baseline of each group is a plain dict read
under a ``threading.Lock`` (the raw limit of a thread-safe lookup). ``cachetools`` is not
thread-safe by itself, so it is measured the way a threaded client must use it: under a
lock.

Run: ``taskset -c 0 python -m pytest benchmarks/bench_cache.py --benchmark-enable -p no:randomly``
"""

from __future__ import annotations

import threading

import pytest

from mcpsync._cache import ToolCache
from mcpsync._messages import Tool
from mcpsync._speedups import _pyspeedups

try:
    from mcpsync._speedups import _cspeedups
except ImportError:  # pragma: no cover - the build failed
    _cspeedups = None

KEYS = [("server-%d" % i, None) for i in range(64)]
HOT = KEYS[17]

IMPLS = [pytest.param(_cspeedups, id="c-extension"), pytest.param(_pyspeedups, id="pure-python")]


def _need(impl):
    if impl is None:
        pytest.skip("the compiled _cspeedups module did not load")
    return impl


# ------------------------------------------------------------------ get (hit)


@pytest.mark.benchmark(group="cache-get-hit")
def test_get_raw_dict_with_lock(benchmark):
    data = {k: ("v", -1.0) for k in KEYS}
    lock = threading.Lock()

    def get(key):
        with lock:
            return data.get(key)

    assert benchmark(get, HOT) is not None


@pytest.mark.benchmark(group="cache-get-hit")
@pytest.mark.parametrize("impl", IMPLS)
def test_get_speedups_ttlcache(benchmark, impl):
    c = _need(impl).TTLCache(ttl=300.0)
    for k in KEYS:
        c.set(k, "v")
    assert benchmark(c.get, HOT) == "v"


@pytest.mark.benchmark(group="cache-get-hit")
def test_get_cachetools_ttlcache_with_lock(benchmark):
    cachetools = pytest.importorskip("cachetools", reason="pip install cachetools (test extra)")
    c = cachetools.TTLCache(maxsize=4096, ttl=300.0)
    for k in KEYS:
        c[k] = "v"
    lock = threading.Lock()

    def get(key):
        with lock:
            return c.get(key)

    assert benchmark(get, HOT) == "v"


# ------------------------------------------------------------------ get (miss)


@pytest.mark.benchmark(group="cache-get-miss")
def test_miss_raw_dict_with_lock(benchmark):
    data = {k: ("v", -1.0) for k in KEYS}
    lock = threading.Lock()

    def get(key):
        with lock:
            return data.get(key)

    assert benchmark(get, ("nope", None)) is None


@pytest.mark.benchmark(group="cache-get-miss")
@pytest.mark.parametrize("impl", IMPLS)
def test_miss_speedups_ttlcache(benchmark, impl):
    c = _need(impl).TTLCache(ttl=300.0)
    for k in KEYS:
        c.set(k, "v")
    assert benchmark(c.get, ("nope", None)) is None


@pytest.mark.benchmark(group="cache-get-miss")
def test_miss_cachetools_ttlcache_with_lock(benchmark):
    cachetools = pytest.importorskip("cachetools", reason="pip install cachetools (test extra)")
    c = cachetools.TTLCache(maxsize=4096, ttl=300.0)
    for k in KEYS:
        c[k] = "v"
    lock = threading.Lock()

    def get(key):
        with lock:
            return c.get(key)

    assert benchmark(get, ("nope", None)) is None


# ------------------------------------------------------------------ set


@pytest.mark.benchmark(group="cache-set")
def test_set_raw_dict_with_lock(benchmark):
    data: dict = {}
    lock = threading.Lock()

    def put(key):
        with lock:
            data[key] = ("v", 0.0)

    benchmark(put, HOT)


@pytest.mark.benchmark(group="cache-set")
@pytest.mark.parametrize("impl", IMPLS)
def test_set_speedups_ttlcache(benchmark, impl):
    c = _need(impl).TTLCache(ttl=300.0)
    benchmark(c.set, HOT, "v")


@pytest.mark.benchmark(group="cache-set")
def test_set_cachetools_ttlcache_with_lock(benchmark):
    cachetools = pytest.importorskip("cachetools", reason="pip install cachetools (test extra)")
    c = cachetools.TTLCache(maxsize=4096, ttl=300.0)
    lock = threading.Lock()

    def put(key):
        with lock:
            c[key] = "v"

    benchmark(put, HOT)


# ------------------------------------------------------------------ the full tool lookup


@pytest.mark.benchmark(group="toolcache-lookup")
def test_tool_lookup_raw_dict_with_lock(benchmark):
    tools = {f"tool{i}": Tool(name=f"tool{i}") for i in range(50)}
    data = {"s1": tools}
    lock = threading.Lock()

    def lookup(server, name):
        with lock:
            return data[server].get(name)

    assert benchmark(lookup, "s1", "tool7").name == "tool7"


@pytest.mark.benchmark(group="toolcache-lookup")
@pytest.mark.parametrize("impl", IMPLS)
def test_tool_lookup_toolcache(benchmark, impl):
    cache = ToolCache(cache_factory=_need(impl).TTLCache)
    cache.put("s1", [Tool(name=f"tool{i}") for i in range(50)], ttl_ms=0, scope="public")
    assert benchmark(cache.lookup, "s1", "tool7").name == "tool7"


@pytest.mark.benchmark(group="toolcache-lookup")
@pytest.mark.parametrize("impl", IMPLS)
def test_tool_lookup_toolcache_private_credential(benchmark, impl):
    cache = ToolCache(cache_factory=_need(impl).TTLCache)
    cache.put("s1", [Tool(name=f"tool{i}") for i in range(50)], scope="private", cred="token-abc")
    assert benchmark(cache.lookup, "s1", "tool7", "token-abc").name == "tool7"


# ------------------------------------------------------------------ contention


THREADS = 8
PER_THREAD = 2000


def _threaded(get) -> None:
    def work():
        for _ in range(PER_THREAD):
            get(HOT)

    ts = [threading.Thread(target=work) for _ in range(THREADS)]
    for t in ts:
        t.start()
    for t in ts:
        t.join()


@pytest.mark.benchmark(group="cache-get-8-threads")
def test_threads_raw_dict_with_lock(benchmark):
    data = {k: ("v", -1.0) for k in KEYS}
    lock = threading.Lock()

    def get(key):
        with lock:
            return data.get(key)

    benchmark.pedantic(_threaded, args=(get,), rounds=5, iterations=1, warmup_rounds=1)
    benchmark.extra_info["gets_per_round"] = THREADS * PER_THREAD


@pytest.mark.benchmark(group="cache-get-8-threads")
@pytest.mark.parametrize("impl", IMPLS)
def test_threads_speedups_ttlcache(benchmark, impl):
    c = _need(impl).TTLCache(ttl=300.0)
    for k in KEYS:
        c.set(k, "v")
    benchmark.pedantic(_threaded, args=(c.get,), rounds=5, iterations=1, warmup_rounds=1)
    benchmark.extra_info["gets_per_round"] = THREADS * PER_THREAD


@pytest.mark.benchmark(group="cache-get-8-threads")
def test_threads_cachetools_ttlcache_with_lock(benchmark):
    cachetools = pytest.importorskip("cachetools", reason="pip install cachetools (test extra)")
    c = cachetools.TTLCache(maxsize=4096, ttl=300.0)
    for k in KEYS:
        c[k] = "v"
    lock = threading.Lock()

    def get(key):
        with lock:
            return c.get(key)

    benchmark.pedantic(_threaded, args=(get,), rounds=5, iterations=1, warmup_rounds=1)
    benchmark.extra_info["gets_per_round"] = THREADS * PER_THREAD
