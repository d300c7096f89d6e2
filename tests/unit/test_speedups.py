"""Framing and TTL cache, over both implementations (compiled and pure Python)."""

from __future__ import annotations

import itertools
import os
import threading
import time

import pytest

import types

import mcpsync._speedups as speedups
from mcpsync._speedups import _pypipes, _pyspeedups
from tests.helpers import while_reading

try:
    from mcpsync._speedups import _cpipes, _cspeedups
except ImportError:  # the test below fails loudly in that case
    _cspeedups = _cpipes = None


def _both(*modules):
    """The two modules of one build as one namespace (None when one did not load)."""
    if None in modules:
        return None
    return types.SimpleNamespace(**{k: v for m in modules for k, v in vars(m).items() if not k.startswith("__")})


IMPLS = [pytest.param(_both(_cspeedups, _cpipes), id="c-extension"), pytest.param(_both(_pyspeedups, _pypipes), id="pure-python")]


@pytest.fixture
def pipe():
    """A real pipe, its read end non-blocking as a transport's: (read fd, write fd), closed after."""
    r, w = os.pipe()
    os.set_blocking(r, False)
    yield r, w
    for fd in (r, w):
        try:
            os.close(fd)
        except OSError:  # closed by the test
            pass


@pytest.fixture(params=IMPLS)
def impl(request):
    if request.param is None:
        pytest.fail("the compiled _cspeedups or _cpipes module did not load (build with Cython, or see setup.py)")
    return request.param


def test_compiled_module_is_loaded_and_active():
    if os.environ.get("MCPSYNC_NO_EXTENSIONS"):
        pytest.skip("pure Python asked for explicitly")
    assert _cspeedups is not None and _cpipes is not None, "the Cython extensions were not built"
    for compiled in (_cspeedups, _cpipes):
        assert compiled.__file__.endswith((".so", ".pyd")), compiled.__file__
    assert speedups.IMPLEMENTATION == "c-extension"
    assert speedups.LineFramer is _cpipes.LineFramer
    assert speedups.FastPath is _cspeedups.FastPath
    from mcpsync.transports.stdio import StdioTransport

    # a stdio call's writes and reads are the compiled pipe ends' (its receive_alone only takes the message)
    assert StdioTransport.send is _cpipes.PipeEnds.send
    assert StdioTransport.wait_first is _cpipes.PipeEnds.wait_first


class FakeClock:
    def __init__(self):
        self.now = 100.0

    def __call__(self):
        return self.now


# ------------------------------------------------------------------ framing


def test_framing_whole_and_several_per_chunk(impl):
    f = impl.LineFramer()
    assert f.feed(b'{"a":1}\n{"b":2}\n{"c"') == [b'{"a":1}', b'{"b":2}']
    assert f.buffered == 4
    assert f.feed(b":3}\n") == [b'{"c":3}']
    assert f.buffered == 0


def test_framing_partial_chunks_byte_by_byte(impl):
    f = impl.LineFramer()
    msg = b'{"jsonrpc":"2.0","id":1,"result":{}}\n'
    out = []
    for i in range(len(msg)):
        out += f.feed(msg[i : i + 1])
    assert out == [msg[:-1]]


def test_framing_crlf_and_blank_lines(impl):
    f = impl.LineFramer()
    assert f.feed(b'{"a":1}\r\n\r\n\n  \n{"b":2}\r') == [b'{"a":1}']
    assert f.feed(b"\n") == [b'{"b":2}']
    # a CR split from its LF across chunks
    assert f.feed(b'{"c":3}\r') == []
    assert f.feed(b'\n') == [b'{"c":3}']


def test_framing_oversized_message_is_dropped_and_stream_recovers(impl):
    f = impl.LineFramer(max_size=100)
    assert f.feed(b'{"ok":1}\n{"id":7,"x":"') == [b'{"ok":1}']
    f.feed(b"y" * 150)  # over the limit: discarded as it arrives
    assert f.buffered == 0
    with pytest.raises(impl.FrameTooLarge) as info:
        f.feed(b'y"}\n{"next":2}\n')
    err = info.value
    assert err.limit == 100 and err.size > 100
    assert err.head.startswith(b'{"id":7')
    assert err.tail.endswith(b'y"}')
    assert f.pop() == [b'{"next":2}']
    assert f.feed(b'{"after":3}\n') == [b'{"after":3}']


def test_framing_oversized_in_one_chunk_keeps_neighbours(impl):
    f = impl.LineFramer(max_size=10)
    with pytest.raises(impl.FrameTooLarge):
        f.feed(b'{"a":1}\n' + b"z" * 50 + b'\n{"b":2}\n')
    assert f.pop() == [b'{"a":1}', b'{"b":2}']


def test_framing_memory_stays_bounded(impl):
    f = impl.LineFramer(max_size=1000)
    for _ in range(100):
        f.feed(b"q" * 10_000)
    assert f.buffered == 0
    with pytest.raises(impl.FrameTooLarge) as info:
        f.feed(b"\n")
    assert info.value.size == 1_000_000


def test_framing_rejects_bad_limit(impl):
    with pytest.raises(ValueError):
        impl.LineFramer(max_size=0)


def _take(f):
    """A reader's take (stdio's receive): first[0], then the next one moved up."""
    first = f.first
    if first[0] is None:
        f.promote()
    data, first[0] = first[0], None
    return data


def test_a_reader_reads_a_pipe_into_first_then_ready(impl):
    r, w = os.pipe()
    os.set_blocking(r, False)
    try:
        f = impl.LineFramer(max_size=100)
        assert f.read(r) == -1  # nothing in yet
        os.write(w, b'{"a":1}\n{"b":2}\n{"c"')
        assert f.read(r) == 1
        assert f.first == [b'{"a":1}'] and list(f.ready) == [b'{"b":2}'] and f.buffered == 4
        os.write(w, b':3}\n{"d":4}\n')
        assert f.read(r) == 1  # a message not yet taken stays first; the later ones queue behind it
        assert [_take(f) for _ in range(4)] == [b'{"a":1}', b'{"b":2}', b'{"c":3}', b'{"d":4}']
        assert _take(f) is None
        os.write(w, b'{"e":5}\n' + b"z" * 200 + b'\n{"f":6}\n')
        with pytest.raises(impl.FrameTooLarge):
            f.read(r)
        assert [_take(f), _take(f)] == [b'{"e":5}', b'{"f":6}']  # its neighbours are kept
        os.close(w)
        w = -1
        assert f.read(r) == 0  # the end of the stream
    finally:
        os.close(r)
        if w >= 0:
            os.close(w)


def test_reading_a_pipe_frames_each_chunk_as_feeding_it_does(impl, pipe):
    """``read(fd)`` (compiled: one read(2) into the module's buffer, a lone whole message
    kept with no split) frames every chunk as ``feed`` does: lone messages with LF or
    CRLF, blank and whitespace-only lines, a message exactly at the size limit and one
    byte over, a lone message while another is still in ``first``, and partial lines."""
    import random

    lines = [b'{"a":1}', b'{"b":"x y"}\r', b"", b"   ", b"\t\r", b"\x00odd", b" {\"lead\":1}", b"z" * 63, b"z" * 64,
             b"z" * 62 + b"\r", b"x", b"\r"]
    rng = random.Random(11)
    r, w = pipe
    for _ in range(300):
        reader = impl.LineFramer(max_size=64)
        feeder = impl.LineFramer(max_size=64)
        got, expected = [], []
        for _ in range(rng.randint(1, 5)):
            picked = [rng.choice(lines) for _ in range(rng.randint(1, 3))]
            chunk = b"".join(line + b"\n" for line in picked)
            if rng.random() < 0.2:
                chunk = chunk[: rng.randint(1, len(chunk))]  # a partial line: held for the next
            os.write(w, chunk)
            try:
                assert reader.read(r) == 1
            except impl.FrameTooLarge as exc:
                got.append(("too large", exc.size))
            try:
                expected += feeder.feed(chunk)
            except impl.FrameTooLarge as exc:
                expected.append(("too large", exc.size))
                expected += feeder.pop()
            if rng.random() < 0.5:  # sometimes the reader takes its messages before the next chunk
                while (data := _take(reader)) is not None:
                    got.append(data)
        while (data := _take(reader)) is not None:
            got.append(data)
        assert sorted(map(repr, got)) == sorted(map(repr, expected))
        assert [g for g in got if type(g) is bytes] == [e for e in expected if type(e) is bytes]
        assert reader.read(r) == -1  # the pipe is empty again


def test_big_and_small_reads_alternate_and_frame_alike(impl, pipe):
    # compiled, a read after a big one (over 2 KiB) goes into bytes of its own, a read after a
    # small one into the module's buffer: every mix frames as feeding the same chunks does
    r, w = pipe
    big = b'{"big":"' + b"x" * 5000 + b'"}'
    chunks = [big + b"\n", b'{"a":1}\n', big + b"\r\n", big + b"\n", b'{"b":2}\n{"c":3}\n', big + b"\n" + big[:100],
              big[100:] + b"\n", b'{"d":4}\r\n', b"   \n", big + b"\n"]
    f = impl.LineFramer()
    got = []
    for chunk in chunks:
        os.write(w, chunk)
        assert f.read(r) == 1
        while (data := _take(f)) is not None:
            got.append(data)
    expected = impl.LineFramer().feed(b"".join(chunks))
    assert got == expected and len(got) == 10
    assert f.read(r) == -1


def test_wait_message_reads_what_is_in_waits_for_what_comes_and_ends_at_its_timeout(impl):
    r, w = os.pipe()
    os.set_blocking(r, False)
    try:
        f = impl.LineFramer(max_size=100)
        os.write(w, b'{"a":1}\n')
        assert f.wait_message(r, 30.0) == 1 and _take(f) == b'{"a":1}'  # in already
        began = time.monotonic()
        assert f.wait_message(r, 0.05) == -1  # nothing comes: the wait ends at its timeout
        assert f.wait_message(r, 0.0) == -1  # no time: no wait
        assert time.monotonic() - began < 10.0
        writer = threading.Thread(target=os.write, args=(w, b'{"b":2}\n'))
        writer.start()
        assert f.wait_message(r, 30.0) == 1  # the write wakes the wait (or came before it)
        writer.join()
        assert _take(f) == b'{"b":2}'
        os.write(w, b'{"c"')
        assert f.wait_message(r, 0.05) == -1 and f.first == [None] and f.buffered == 4  # a part: kept for the rest
        writer = threading.Thread(target=os.write, args=(w, b':3}\n{"d":4}\n'))
        writer.start()
        assert f.wait_message(r, 30.0) == 1  # the rest completes it
        writer.join()
        assert [_take(f), _take(f), _take(f)] == [b'{"c":3}', b'{"d":4}', None]
        os.close(w)
        w = -1
        assert f.wait_message(r, None) == 0  # the end of the stream, waited for with no bound
    finally:
        os.close(r)
        if w >= 0:
            os.close(w)


def test_a_message_in_parts_is_waited_for_within_one_timeout(impl, pipe):
    # the parts of one message come apart: the wait goes on for the rest until the time
    # given in all is up (a first part does not start the time again)
    r, w = pipe
    f = impl.LineFramer(max_size=100)
    os.write(w, b'{"a"')
    began = time.monotonic()
    assert f.wait_message(r, 0.2) == -1
    took = time.monotonic() - began
    assert 0.15 <= took < 10.0
    assert f.buffered == 4


def test_the_pure_wait_message_waits_first_after_a_wait_that_did_not_end_at_once(pipe):
    from mcpsync._speedups import _pypipes

    r, w = pipe
    f = _pypipes.LineFramer()
    assert f._eager and f.wait_message(r, 0.05) == -1  # read first, found nothing: it waited
    assert not f._eager  # the wait did not end at once: the next waits first
    waits = []
    real = f._poller

    class Counted:
        def poll(self, timeout=None):
            waits.append(timeout)
            return real.poll(timeout)

    f._poller = Counted()
    os.write(w, b'{"a":1}\n')
    assert f.wait_message(r, 30.0) == 1 and waits == [30000.0] and _take(f) == b'{"a":1}'


def test_write_line_writes_the_message_and_its_newline_as_far_as_the_pipe_has_room(impl):
    r, w = os.pipe()
    os.set_blocking(w, False)
    try:
        assert impl.write_line(w, b'{"a":1}') == 8
        assert os.read(r, 100) == b'{"a":1}\n'
        big = b"x" * (1 << 20)  # more than a pipe holds
        n = impl.write_line(w, big)
        assert 0 < n < len(big) + 1  # as far as there was room
        assert impl.write_line(w, b"more") == 0  # no room at all
        os.close(r)
        r = -1
        with pytest.raises(BrokenPipeError):  # (Python ignores SIGPIPE: the write fails with EPIPE)
            impl.write_line(w, b"gone")
    finally:
        if r >= 0:
            os.close(r)
        os.close(w)


def test_a_read_cut_short_keeps_its_chunk_for_the_next(pipe):
    # the pure twin keeps the chunk it read in _pending until its messages are kept: a
    # framing cut short by an exception (a signal handler's) loses nothing
    from mcpsync._speedups import _pypipes

    r, w = pipe
    f = _pypipes.LineFramer()
    real = f._frame
    f._frame = lambda data: (_ for _ in ()).throw(KeyboardInterrupt)  # cut short at the call
    os.write(w, b'{"a":1}\n')
    with pytest.raises(KeyboardInterrupt):
        f.read(r)
    assert f.first == [None] and f._pending == b'{"a":1}\n'
    f._frame = real
    assert f.read(r) == 1 and f.first == [b'{"a":1}'] and f._pending is None


# ------------------------------------------------------------------ TTL cache


def test_cache_get_set_expire(impl):
    clock = FakeClock()
    c = impl.TTLCache(ttl=10, clock=clock)
    assert c.get("k") is None
    c.set("k", "v")
    assert c.get("k") == "v" and "k" in c and len(c) == 1
    clock.now += 9.99
    assert c.get("k") == "v"
    clock.now += 0.02
    assert c.get("k", "gone") == "gone"
    assert "k" not in c
    assert (c.hits, c.misses) == (2, 2)


def test_cache_per_entry_ttl_and_no_expiry(impl):
    clock = FakeClock()
    c = impl.TTLCache(ttl=None, clock=clock)
    c.set("forever", 1)
    c.set("short", 2, ttl=1)
    clock.now += 1e6
    assert c.get("forever") == 1
    assert c.get("short") is None


def test_cache_peek_reads_without_counting_and_keeps_ttls(impl):
    clock = FakeClock()
    c = impl.TTLCache(ttl=None, clock=clock)
    c.set("forever", 1)
    c.set("short", 2, ttl=5)
    assert (c.peek("forever"), c.peek("short"), c.peek("nothing", "dflt")) == (1, 2, "dflt")
    clock.now += 6
    assert c.peek("short", "gone") == "gone"
    assert len(c) == 1  # the expired entry was dropped
    assert (c.hits, c.misses) == (0, 0)
    assert c.get("forever") == 1 and (c.hits, c.misses) == (1, 0)


def test_cache_peek_never_sees_a_torn_entry(impl):
    c = impl.TTLCache(ttl=None, maxsize=6)
    stop, started = threading.Event(), threading.Event()
    seen = []

    def write():
        i = 0
        while not stop.is_set():
            i += 1
            c.set("k", ("v", i))
            started.set()
            if i % 3 == 0:
                c.invalidate("k")
            c.set(i % 10, i)  # new keys: evictions around the one read

    w = threading.Thread(target=write)
    w.start()
    try:
        assert started.wait(10)
        deadline = time.monotonic() + 2.0
        while len(seen) < 200 and time.monotonic() < deadline:
            v = c.peek("k")
            if v is not None:
                seen.append(v)
                assert v[0] == "v" and isinstance(v[1], int)
    finally:
        stop.set()
        w.join(10)
    assert seen  # the reader did meet the entry


def test_cache_invalidate(impl):
    c = impl.TTLCache(ttl=60)
    c.set("a", 1)
    c.set("b", 2)
    assert c.invalidate("a") == 1
    assert c.invalidate("a") == 0
    assert c.get("a") is None and c.get("b") == 2
    assert c.invalidate() == 1
    assert len(c) == 0
    assert c.stats()["size"] == 0


def test_cache_maxsize_evicts_oldest(impl):
    c = impl.TTLCache(ttl=None, maxsize=3)
    for k in "abcd":
        c.set(k, k)
    assert c.get("a") is None
    assert [c.get(k) for k in "bcd"] == ["b", "c", "d"]


def test_cache_thread_safe_counters(impl):
    c = impl.TTLCache(ttl=60, maxsize=64)
    n_threads, n_ops = 8, 2000

    def work(t):
        for i in range(n_ops):
            key = (t * 7 + i) % 100
            if c.get(key) is None:
                c.set(key, i)

    threads = [threading.Thread(target=work, args=(t,)) for t in range(n_threads)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(30)
    assert c.hits + c.misses == n_threads * n_ops
    assert len(c) <= 64


# ------------------------------------------------------------------ call tallies (metrics)


def test_bucket_index_is_exact_below_128_and_within_a_64th_above(impl):
    assert [impl.bucket_index(v) for v in (0, 1, 127)] == [0, 1, 127]
    for v in (128, 1000, 123_456, 10**9, 2**36 - 1):
        i = impl.bucket_index(v)
        assert impl.bucket_index(v + 1) in (i, i + 1)
        assert i < impl.BUCKETS
    assert impl.bucket_index(2**40) == impl.BUCKETS - 1  # clamped
    assert impl.bucket_index(10**9) == _pyspeedups.bucket_index(10**9)


def test_call_tally_counts_outcomes_latency_and_seconds(impl):
    t = impl.CallTally(60)
    t.add(10.0, 10.25, "success")
    t.add(10.5, 10.75, "timeout")
    t.add(11.0, 11.5, "error")
    t.add(12.0, 12.0, "success", False)  # counted, no latency
    assert (t.successes, t.timeouts, t.errors) == (2, 1, 1)
    assert (t.count, t.min_us, t.max_us, t.total_us) == (3, 250_000, 500_000, 1_000_000)
    assert sum(t.counts) == 3
    assert t.first == 10.25
    assert t.ring_n[10] == 2 and t.ring_n[11] == 1 and t.ring_n[12] == 1


def test_fold_calls_folds_in_order_and_hands_unknown_keys_back(impl):
    from collections import deque

    known = impl.CallTally(60)
    q = deque([("s", "echo", 1.0, 1.001, "success"), ("s", "other", 1.0, 1.002, "error"),
               ("s", "echo", 2.0, 2.003, "timeout")])
    missing = []
    assert impl.fold_calls(q.popleft, {("s", "echo"): known}, lambda *item: missing.append(item)) == 3
    assert not q
    assert (known.successes, known.timeouts, known.count) == (1, 1, 2)
    assert missing == [("s", "other", 1.0, 1.002, "error")]


def test_call_queue_drains_once_a_batch_waits(impl):
    from collections import deque

    q: deque = deque()
    drains = []
    calls = impl.CallQueue(q, 3, lambda wait: (drains.append(wait), q.clear()))
    calls.record("s", "echo", 1.0, 2.0, "success")
    calls.record("s", "echo", 1.0, 2.0, "success")
    assert len(q) == 2 and drains == []
    calls.record("s", None, 1.0, 2.0, "error")
    assert drains == [False] and not q


def test_call_queue_given_the_tallies_adds_at_once_or_hands_on(impl):
    from collections import deque

    q: deque = deque()
    known = impl.CallTally(60)
    tallies = {("s", "echo"): known}
    missing = []
    calls = impl.CallQueue(q, 3, lambda wait: None, tallies, lambda *item: missing.append(item))
    calls.record("s", "echo", 1.0, 1.002, "success")
    assert not q and (known.count, known.successes) == (1, 1)
    calls.record("s", "other", 1.0, 1.002, "error")  # no tally: handed on, not queued
    assert not q and missing == [("s", "other", 1.0, 1.002, "error")] and known.count == 1
    counts, count, total_us, min_us, max_us, ok, errors, timeouts, ring_t, ring_n, first = known.numbers()
    assert (sum(counts), count, total_us, min_us, max_us, ok, errors, timeouts) == (1, 1, 2000, 2000, 2000, 1, 0, 0)
    assert sum(ring_n) == 1 and 1 in ring_t and first == 1.002
    counts[0] += 5  # a copy
    assert sum(known.counts) == 1


def test_compiled_direct_adds_are_whole_under_threads():
    """Compiled, many threads add to one tally with no lock while another reads it:
    every call is counted, and every read is one consistent state."""
    if _cspeedups is None:
        pytest.fail("the compiled _cspeedups module did not load")
    from collections import deque

    tally = _cspeedups.CallTally(60)
    calls = _cspeedups.CallQueue(deque(), 256, lambda wait: None, {("s", "echo"): tally}, None)
    outcomes = ["success", "error", "timeout", "success"]
    torn = []

    def read_once():
        counts, count, _, _, _, ok, errors, timeouts, _, ring_n, _ = tally.numbers()
        if not (sum(counts) == count == ok + errors + timeouts == sum(ring_n)):
            torn.append((sum(counts), count, ok + errors + timeouts, sum(ring_n)))

    def work(t):
        for i in range(5000):
            calls.record("s", "echo", 100.0, 100.0 + 0.0001 * (i % 7), outcomes[(i + t) % 4])

    while_reading(read_once, work)
    assert not torn, torn[:5]
    assert (tally.count, tally.successes, tally.errors, tally.timeouts) == (40000, 20000, 10000, 10000)


def test_a_tally_takes_its_records_in_any_order(impl):
    """A record queued before its tally existed is folded after later ones: the counts,
    the QPS ring and the first call's time come out as in order."""
    late = impl.CallTally(60)
    late.add(100.0, 130.5, "success")
    late.add(100.0, 131.5, "success")
    late.add(100.0, 129.5, "error")  # older than the others
    late.add(100.0, 70.5, "success")  # a whole window older than the slot it maps to: outside it
    counts, count, _, _, _, ok, errors, _, ring_t, ring_n, first = late.numbers()
    assert (count, ok, errors, first) == (4, 3, 1, 70.5)
    assert sorted((t, n) for t, n in zip(ring_t, ring_n) if t >= 0) == [(129, 1), (130, 1), (131, 1)]


def test_framing_is_the_same_for_whole_reads_and_any_cut(impl):
    """Whole reads (the one-split path) and reads cut anywhere give the same frames:
    CRLF endings trimmed, blank and whitespace-only lines skipped, other lines kept."""
    import random

    lines = [b'{"a":1}', b'{"b":"x y"}\r', b"", b"   ", b"\t\r", b"\x00odd", b" {\"lead\":1}", b"z" * 300]
    rng = random.Random(7)
    for _ in range(200):
        picked = [rng.choice(lines) for _ in range(rng.randint(1, 6))]
        stream = b"".join(line + b"\n" for line in picked)
        expected = [line.rstrip(b"\r") for line in picked if line.rstrip(b"\r") and not line.rstrip(b"\r").isspace()]
        whole = impl.LineFramer(max_size=1024)
        assert whole.feed(stream) == expected
        cut = impl.LineFramer(max_size=1024)
        got, pos = [], 0
        while pos < len(stream):
            step = rng.randint(1, 40)
            got += cut.feed(stream[pos:pos + step])
            pos += step
        assert got == expected



def test_call_queue_keeps_the_last_tally_until_told_to_forget_it(impl):
    """Calls of one tool in a row go to the tally found for the first; once the owner
    empties ``tallies`` and says ``forget()``, the next record looks its tally up again."""
    from collections import deque

    first, second = impl.CallTally(60), impl.CallTally(60)
    tallies = {("s", "echo"): first}
    calls = impl.CallQueue(deque(), 3, lambda wait: None, tallies, lambda *item: None)
    for _ in range(3):
        calls.record("s", "echo", 1.0, 1.002, "success")
    tallies.clear()
    calls.forget()
    tallies[("s", "echo")] = second
    calls.record("s", "echo", 1.0, 1.002, "success")
    calls.record("s", "other", 1.0, 1.002, "success")  # no tally: handed on
    calls.record("t", "echo", 1.0, 1.002, "success")  # another server's key
    assert (first.count, second.count) == (3, 1)


def test_fast_path_records_through_a_call_queue_on_the_monotonic_clock(impl):
    """Given a CallQueue's record (the metrics' entry), the fast path records through it
    (compiled: in C) with both ends read from time.monotonic."""
    from collections import deque

    tally = impl.CallTally(60)
    calls = impl.CallQueue(deque(), 1, lambda wait: None, {("s", "t"): tally}, lambda *item: None)
    fast, _, _, ok, _ = _fast_path(impl, calls.record, time.monotonic, lambda: None)
    before = time.monotonic()
    start = fast.begin()
    fast.succeeded("t", start)
    assert before <= start <= time.monotonic() and next(ok) == 1
    assert tally.count == 1 and tally.successes == 1


# ------------------------------------------------------------------ the guard's fast path


def _fast_path(impl, record, clock, failed):
    """A fast path over fresh gates: (path, breaker gate, reconnect gate, success count, marks)."""
    ok, marks = itertools.count(), []
    breaker_gate, reconnect_gate = impl.Gate(), impl.Gate()
    fast = impl.FastPath(breaker_gate, reconnect_gate, ok, lambda: marks.append(1), record, "s", clock, "success", failed)
    return fast, breaker_gate, reconnect_gate, ok, marks


def test_fast_path_begins_only_while_both_gates_are_open_and_records_successes(impl):
    clock, seen, failed = FakeClock(), [], []
    fast, breaker_gate, reconnect_gate, ok, marks = _fast_path(impl, lambda *a: seen.append(a), clock,
                                                               lambda: failed.append(True))
    assert breaker_gate.shut is False and reconnect_gate.shut is False
    start = fast.begin()
    assert start == 100.0
    clock.now = 100.5
    fast.succeeded("t", start)
    # the first success is the count's 0th: a mark of the window, then one every 16th
    assert seen == [("s", "t", 100.0, 100.5, "success")] and next(ok) == 1 and not failed and marks == [1]
    reconnect_gate.shut = True
    assert fast.begin() is None
    reconnect_gate.shut = False
    breaker_gate.shut = True
    assert fast.begin() is None
    breaker_gate.shut = False
    assert fast.begin() == 100.5


def test_fast_path_without_a_recorder_and_with_one_that_raises(impl):
    failed: list[int] = []
    bare, _, _, _, _ = _fast_path(impl, None, FakeClock(), lambda: failed.append(1))
    assert bare.begin() == 100.0
    bare.succeeded(None, 100.0)

    def broken(*_a):
        raise RuntimeError("bug")

    raising, _, _, ok, _ = _fast_path(impl, broken, FakeClock(), lambda: failed.append(2))
    raising.succeeded("t", 100.0)
    assert failed == [2] and next(ok) == 1


def test_a_breaker_and_a_schedule_shut_their_gates_as_their_state_changes() -> None:
    from mcpsync._breaker import CircuitBreaker
    from mcpsync._errors import ConnectionClosed
    from mcpsync._policies import BreakerPolicy, ReconnectPolicy
    from mcpsync._retry import ReconnectSchedule

    now = [0.0]
    breaker = CircuitBreaker(BreakerPolicy(threshold=1, cooldown=10), clock=lambda: now[0])
    schedule = ReconnectSchedule(ReconnectPolicy(max_failures=1))
    fast = breaker.fast_path(schedule.gate, None, "s", lambda: now[0], lambda: None)
    assert fast.begin() == 0.0
    breaker.release(breaker.acquire(), ConnectionClosed("gone"))  # OPEN
    assert breaker.gate.shut and fast.begin() is None
    now[0] = 10.0
    assert breaker.state.value == "half_open" and breaker.gate.shut  # a trial is not the fast path's
    breaker.release(breaker.acquire(), None)  # CLOSED again
    assert not breaker.gate.shut and fast.begin() == 10.0
    fast.succeeded(None, 10.0)
    assert breaker.successes == 2  # the trial and the fast path's success
    schedule.failure(ConnectionClosed("gone"))
    assert schedule.unavailable and schedule.gate.shut and fast.begin() is None
    schedule.reset()
    assert not schedule.gate.shut and fast.begin() == 10.0


# ------------------------------------------------------------------ the idle watch's switch

needs_epoll = pytest.mark.skipif(not hasattr(__import__("select"), "epoll"), reason="epoll is Linux only")


@pytest.fixture
def watched_pipe():
    """A real pipe whose read end is in a real epoll set, watched for input."""
    import select

    r, w = os.pipe()
    ep = select.epoll()
    ep.register(r, select.EPOLLIN)
    yield ep, r, w
    ep.close()
    os.close(r)
    os.close(w)


@needs_epoll
def test_epoll_switch_turns_the_watch_off_and_on(impl, watched_pipe):
    import select

    ep, r, w = watched_pipe
    switch = impl.EpollSwitch(ep, r)
    assert switch.turn(False) == 0
    os.write(w, b"x")
    assert ep.poll(0) == []
    assert switch.turn(True) == 0  # input already waiting is reported at once, under the fd's own number
    assert ep.poll(0) == [(r, select.EPOLLIN)]
    assert switch.turn(False) == 0
    assert ep.poll(0) == []
    assert switch.turn(True) == 0
    assert ep.poll(0) == [(r, select.EPOLLIN)]


@needs_epoll
def test_epoll_switch_closes_its_epoll_and_then_fails_with_ebadf(impl, watched_pipe):
    import errno
    import select

    _, r, _ = watched_pipe
    ep = select.epoll()
    ep.register(r, select.EPOLLIN)
    switch = impl.EpollSwitch(ep, r)
    switch.close()
    assert ep.closed
    switch.close()  # idempotent
    assert switch.turn(False) == switch.turn(True) == errno.EBADF


@needs_epoll
def test_a_closed_switch_never_touches_the_number_its_epoll_had(impl, watched_pipe):
    # the number a closed epoll had goes to the next file opened: here another epoll
    # watching the same pipe. A turn of the closed one must not turn that one's watch off.
    import errno
    import select

    _, r, w = watched_pipe
    ep = select.epoll()
    ep.register(r, select.EPOLLIN)
    number = ep.fileno()
    switch = impl.EpollSwitch(ep, r)
    switch.close()
    other = select.epoll()
    try:
        if other.fileno() != number:
            pytest.skip("the number was not given again (another thread opened a file meanwhile)")
        other.register(r, select.EPOLLIN)
        assert switch.turn(False) == errno.EBADF
        os.write(w, b"x")
        assert other.poll(0) == [(r, select.EPOLLIN)], "the closed switch turned another epoll's watch off"
    finally:
        other.close()


@needs_epoll
def test_epoll_switch_for_a_descriptor_not_in_the_set_fails_with_enoent(impl, watched_pipe):
    import errno

    ep, _, w = watched_pipe
    switch = impl.EpollSwitch(ep, w)
    assert switch.turn(False) == switch.turn(True) == errno.ENOENT


# ------------------------------------------------------------------ the dispatcher's idle gate


@needs_epoll
def test_idle_gate_turns_the_watch_off_after_the_grace_and_on_when_the_leader_lets_go(impl, watched_pipe):
    import select

    ep, r, w = watched_pipe
    clock = FakeClock()
    gate = impl.IdleGate(impl.EpollSwitch(ep, r), 0.02, clock)
    os.write(w, b"x")
    assert gate.last == 100.0 and not gate.paused
    gate.arrive(100.01)  # within the grace: the background thread does not watch
    assert not gate.paused and gate.last == 100.01 and ep.poll(0) == [(r, select.EPOLLIN)]
    gate.arrive(100.04)  # after an idle gap: off before the answer can come
    assert gate.paused and gate.last == 100.04 and ep.poll(0) == []
    gate.arrive(100.09)  # already off (another caller leads): stays so
    assert gate.paused and ep.poll(0) == []
    clock.now = 100.1
    gate.leave()
    assert gate.last == 100.1 and not gate.paused and ep.poll(0) == [(r, select.EPOLLIN)]
    gate.leave()
    assert not gate.paused


def test_idle_gate_without_a_watch(impl):
    gate = impl.IdleGate(None, 0.02, FakeClock())
    gate.arrive(200.0)
    assert not gate.paused and gate.last == 200.0
    gate.leave()


# ------------------------------------------------------------------ the histogram's one update


def test_a_call_tally_records_latencies_as_a_histogram_does(impl):
    values = [-5, 0, 1, 127, 128, 129, 1_000, 65_537, 10**9, 10**13]
    h, tally = impl.Histogram(), impl.CallTally(8)
    for v in values:
        h.record_us(v)
        tally.add(0.0, v / 1e6, "success")
    assert (h.counts, h.count, h.total_us, h.min_us, h.max_us) == tally.numbers()[:5]
    assert h.min_us == 0 and h.max_us == 10**13 and h.counts[impl.BUCKETS - 1] >= 1  # clamped into the top bucket


# ------------------------------------------------------------------ tools/call's answer in one pass


def test_call_answer_takes_a_complete_answer_and_leaves_the_rest_to_the_general_path(impl):
    """``take`` gives the whole answer only for a complete result with content, written as
    servers write an answer; None for anything else (what msgspec rejects included), so
    that the dispatcher's general path decodes it again; other errors are not hidden."""
    import msgspec

    from mcpsync._decoders import ANSWER_DECODERS, _CallToolAnswer

    decode = msgspec.json.Decoder(_CallToolAnswer).decode
    take = impl.CallAnswer(decode, b'{"jsonrpc":"2.0","id":', (msgspec.ValidationError, msgspec.DecodeError)).take
    ok = b'{"jsonrpc":"2.0","id":7,"result":{"content":[{"type":"text","text":"hi"}]}}'
    answer = take(ok)
    assert answer.id == 7 and answer.result.content[0].text == "hi"
    structured = b'{"jsonrpc":"2.0","id":1,"result":{"content":[],"structuredContent":{"a":1}}}'
    assert take(structured).result.structured_content == {"a": 1}
    for other in (
        b'{"id":7,"jsonrpc":"2.0","result":{"content":[{"type":"text","text":"hi"}]}}',  # another order
        b'{"jsonrpc":"2.0","id":7,"result":{"content":[]}}',  # no content: maybe a task
        b'{"jsonrpc":"2.0","id":7,"result":{"content":[{"type":"text","text":"x"}],"resultType":"input_required"}}',
        b'{"jsonrpc":"2.0","id":7,"error":{"code":-32601,"message":"no"}}',  # rejected by msgspec
        b'{"jsonrpc":"2.0","id":7,"result":',  # cut short
        bytearray(ok),  # not bytes
    ):
        assert take(other) is None, other

    def broken(data):
        raise RuntimeError("bug")

    with pytest.raises(RuntimeError):
        impl.CallAnswer(broken, b"{", (msgspec.ValidationError,)).take(b"{}")
    assert ANSWER_DECODERS["tools/call"](ok).id == 7  # the table's, built on the active build


# ------------------------------------------------------------------ the pool's lone-caller return


def test_idle_return_gives_the_claim_back_and_settles_only_what_needs_the_lock(impl):
    """``give_back``: the entry's last use stamped, its claim given up and counted; the
    pool's ``settle`` is called for a broken entry (before the claim goes), a retiring one
    or while borrowers wait, and never on the usual return."""
    from collections import deque
    from types import SimpleNamespace

    clock, returned, waiters, settled = FakeClock(), itertools.count(), deque(), []
    give_back = impl.IdleReturn(clock, returned, waiters, lambda entry, broken: settled.append((len(entry.claims), broken))).give_back
    entry = SimpleNamespace(claims=deque([None]), retiring=False, last_used=0.0)
    give_back(entry)
    assert (entry.last_used, len(entry.claims), settled) == (100.0, 0, [])
    entry.claims.append(None)
    give_back(entry, broken=True)  # taken out while the claim still holds it
    assert settled == [(1, True)] and not entry.claims
    entry.claims.append(None)
    waiters.append("borrower")
    clock.now = 101.0
    give_back(entry, False)  # the room goes to the queue
    assert settled[-1] == (0, False) and entry.last_used == 101.0
    waiters.clear()
    entry.claims.append(None)
    entry.retiring = True
    give_back(entry)
    assert settled[-1] == (0, False) and len(settled) == 3 and next(returned) == 4


def test_idle_return_reads_the_monotonic_clock():
    """Compiled, on time.monotonic the stamp is read in C: the same clock."""
    from collections import deque
    from types import SimpleNamespace

    if _cspeedups is None:
        pytest.fail("the compiled _cspeedups module did not load")
    entry = SimpleNamespace(claims=deque([None]), retiring=False, last_used=0.0)
    before = time.monotonic()
    _cspeedups.IdleReturn(time.monotonic, itertools.count(), deque(), lambda *a: None).give_back(entry)
    assert before <= entry.last_used <= time.monotonic()
