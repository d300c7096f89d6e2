"""Hot-path helpers: a thread-safe TTL cache, latency histograms and call tallies, the
guard's fast path. (The stdio pipe's framing and idle watch: :mod:`._pypipes`.)

This file is the single source of both implementations: imported as is it is the
pure-Python twin; ``setup.py`` compiles a copy of it with Cython (pure-Python mode,
types from ``_cspeedups.pxd``) into the ``_cspeedups`` extension. Keep it in the subset
of Python that Cython compiles unchanged.
"""

import threading
import time

try:  # compiled, ``cython.compiled`` is True (Cython resolves it); imported as is, False
    import cython
except ImportError:  # the pure-Python package: Cython is only a build requirement
    _COMPILED = False
else:
    _COMPILED = cython.compiled

__all__ = ["TTLCache", "Histogram", "CallTally", "bucket_index", "fold_calls", "CallQueue", "BUCKETS", "Gate", "FastPath",
           "CallAnswer", "IdleReturn"]


class TTLCache:
    """A thread-safe mapping whose entries expire after a time to live.

    Args:
        ttl: default time to live in seconds (``None``: entries never expire).
        maxsize: at most this many entries; the oldest inserted is evicted first.
        clock: a monotonic clock (seconds), injectable for tests.
    """

    def __init__(self, ttl=None, maxsize=4096, clock=None):
        self.ttl = ttl
        self.maxsize = maxsize
        self._clock = clock if clock is not None else time.monotonic
        self._data = {}
        self._lock = threading.Lock()
        self.hits = 0
        self.misses = 0

    def get(self, key, default=None):
        with self._lock:  # (not acquire() then try: a KeyboardInterrupt between them keeps the lock)
            entry = self._data.get(key)
            if entry is not None:
                expires = entry[1]
                if expires < 0.0 or self._clock() < expires:
                    self.hits += 1
                    return entry[0]
                del self._data[key]
            self.misses += 1
            return default

    def peek(self, key, default=None):
        """Like :meth:`get` without the counters and, for a live entry, without the
        lock: a reader on a hot path.

        A key's entry is one dict value, swapped whole by :meth:`set`, so one ``dict.get``
        reads a consistent entry, and a live one (no TTL, or one not yet run out) is
        returned as read. Only an entry found expired takes the lock, to drop it (unless
        :meth:`set` replaced it meanwhile).
        """
        entry = self._data.get(key)
        if entry is None:
            return default
        expires = entry[1]
        if expires < 0.0 or self._clock() < expires:
            return entry[0]
        with self._lock:  # (not acquire() then try: a KeyboardInterrupt between them keeps the lock)
            if self._data.get(key) is entry:
                del self._data[key]
        return default

    def set(self, key, value, ttl=None):
        if ttl is None:
            ttl = self.ttl
        expires = -1.0 if ttl is None else self._clock() + ttl
        with self._lock:
            data = self._data
            if key in data:
                del data[key]
            elif len(data) >= self.maxsize:
                del data[next(iter(data))]
            data[key] = (value, expires)

    def invalidate(self, key=None):
        """Drop one key, or every key when ``key`` is None. Returns how many were dropped."""
        with self._lock:
            if key is None:
                n = len(self._data)
                self._data.clear()
                return n
            if key in self._data:
                del self._data[key]
                return 1
            return 0

    def __contains__(self, key):
        with self._lock:
            entry = self._data.get(key)
            if entry is None:
                return False
            return entry[1] < 0.0 or self._clock() < entry[1]

    def __len__(self):
        with self._lock:
            now = self._clock()
            return sum(1 for v in self._data.values() if v[1] < 0.0 or now < v[1])

    def stats(self):
        with self._lock:
            return {"hits": self.hits, "misses": self.misses, "size": len(self._data)}


# ------------------------------------------------------------------ call tallies
# The latency buckets of mcpsync._metrics: log-linear (HDR-style) over integer
# microseconds, 64 linear sub-buckets per power of two, values under 128 exact,
# anything over 2**36 us clamped into the top bucket.
_SUB_BITS = 6
_SUB = 64
_MAX_EXP = 35
BUCKETS = ((_MAX_EXP - _SUB_BITS + 1) << _SUB_BITS) + _SUB


def bucket_index(v):
    """The histogram bucket of ``v`` microseconds (``v`` >= 0)."""
    if v < 2 * _SUB:
        return v
    e = 0  # v.bit_length() - 1, in steps that compile to plain shifts
    x = v
    if x >> 32:
        x >>= 32
        e += 32
    if x >> 16:
        x >>= 16
        e += 16
    if x >> 8:
        x >>= 8
        e += 8
    if x >> 4:
        x >>= 4
        e += 4
    if x >> 2:
        x >>= 2
        e += 2
    if x >> 1:
        e += 1
    if e > _MAX_EXP:
        return BUCKETS - 1
    return ((e - _SUB_BITS + 1) << _SUB_BITS) + (v >> (e - _SUB_BITS)) - _SUB


class Histogram:
    """A latency histogram's numbers: ``counts`` per bucket (see :func:`bucket_index`),
    ``count``, ``total_us``, ``min_us`` (-1 while empty) and ``max_us``, in microseconds;
    :meth:`record_us` adds one value. The one home of that update: :class:`CallTally`
    records through it, and ``_metrics.LatencyHistogram`` adds percentiles on top. Not
    thread-safe."""

    def __init__(self):
        self.counts = [0] * BUCKETS
        self.count = 0
        self.total_us = 0
        self.min_us = -1
        self.max_us = 0

    def record_us(self, v):
        """Add a value of ``v`` microseconds (a negative one counts as 0)."""
        self._note(v)

    def _note(self, v):
        if v < 0:
            v = 0
        self.counts[bucket_index(v)] += 1
        self.count += 1
        self.total_us += v
        if v > self.max_us:
            self.max_us = v
        if v < self.min_us or self.min_us < 0:
            self.min_us = v


class CallTally(Histogram):
    """The numbers every finished call of one (server, tool) moves: its latency
    histogram, its outcome counts and a ring of per-second counts (QPS over ``slots``
    seconds). Not thread-safe: one folder at a time (the recorder's drain lock)."""

    def __init__(self, slots):
        Histogram.__init__(self)
        self.successes = 0
        self.errors = 0
        self.timeouts = 0
        self.slots = slots
        self.ring_t = [-1] * slots
        self.ring_n = [0] * slots
        self.first = None

    def add(self, start, end, outcome, latency=True):
        """One call from ``start`` to ``end`` (seconds) that ended with ``outcome``
        (``"success"``, ``"timeout"``, anything else an error); ``latency=False``
        counts it without a latency."""
        if latency:
            self._note(int((end - start) * 1e6 + 0.5))
        if outcome == "success":
            self.successes += 1
        elif outcome == "timeout":
            self.timeouts += 1
        else:
            self.errors += 1
        sec = int(end)
        slot = sec % self.slots
        seen = self.ring_t[slot]
        if seen == sec:
            self.ring_n[slot] += 1
        elif seen < sec:
            self.ring_t[slot] = sec
            self.ring_n[slot] = 1
        # else: a record come late, from a second a whole window before the slot's
        if self.first is None or end < self.first:
            self.first = end

    def numbers(self):
        """Every number at once: ``(counts, count, total_us, min_us, max_us, successes,
        errors, timeouts, ring_t, ring_n, first)``, the lists copied (compiled: one
        consistent copy while other threads add)."""
        return (list(self.counts), self.count, self.total_us, self.min_us, self.max_us, self.successes,
                self.errors, self.timeouts, list(self.ring_t), list(self.ring_n), self.first)


def fold_calls(pop, tallies, missing):
    """Fold queued call records into their tallies, oldest first: ``pop()`` gives
    ``(server, tool, start, end, outcome)`` until it raises IndexError; a record whose
    ``(server, tool)`` has no tally in ``tallies`` goes to ``missing(*record)``.
    Returns how many records were folded."""
    n = 0
    last = None  # the tally of the record before, kept while the calls are of one tool
    last_server = last_tool = None
    while True:
        try:
            item = pop()
        except IndexError:
            return n
        n += 1
        server = item[0]
        tool = item[1]
        if last is None or server is not last_server or tool is not last_tool:
            last = tallies.get((server, tool))
            last_server = server
            last_tool = tool
            if last is None:
                missing(server, tool, item[2], item[3], item[4])
                continue
        last.add(item[2], item[3], item[4], True)


class CallQueue:
    """Where calls leave their records: ``record(server, tool, start, end, outcome)``
    appends one to ``queue`` (a deque: no lock), and once ``batch`` are waiting calls
    ``drain(False)``, which folds them in (see :func:`fold_calls`).

    With ``tallies`` and ``missing`` (the compiled build only), a record is not queued:
    one whose ``(server, tool)`` has a tally is added to it at once, any other goes to
    ``missing(server, tool, start, end, outcome)``. Compiled, ``record`` and
    :meth:`CallTally.add` call no Python code, so each runs whole under the GIL and no
    other thread sees a tally half-moved (:meth:`CallTally.numbers` reads one the same
    way). Imported as pure Python they would interleave, so there every record queues.
    """

    def __init__(self, queue, batch, drain, tallies=None, missing=None):
        self.queue = queue
        self.batch = batch
        self.drain = drain
        self.tallies = tallies
        self.missing = missing
        self._last_server = self._last_tool = self._last = None  # the tally of the last record's key

    def forget(self):
        """Forget the tally kept for the last record's key (``tallies`` was emptied)."""
        self._last = None

    def record(self, server, tool, start, end, outcome):
        tallies = self.tallies
        if tallies is not None:
            tally = self._last  # calls of one tool in a row: no key made, no lookup
            if tally is None or server is not self._last_server or tool is not self._last_tool:
                tally = tallies.get((server, tool))
                if tally is None:
                    self.missing(server, tool, start, end, outcome)
                    return
                self._last_server = server
                self._last_tool = tool
                self._last = tally
            tally.add(start, end, outcome, True)
            return
        q = self.queue
        q.append((server, tool, start, end, outcome))
        if len(q) >= self.batch:
            self.drain(False)


class Gate:
    """A switch the fast path reads in one step: ``shut`` while its owner must see every
    call itself (a circuit breaker that is not CLOSED, a server marked unavailable). The
    owner sets it, under its own lock, wherever its state changes."""

    def __init__(self):
        self.shut = False


class FastPath:
    """A guard's fast path, its two ends one call into C each in the compiled build (see
    ``Guard.begin`` and ``Guard.succeeded``, which these are). A circuit breaker builds it
    (``CircuitBreaker.fast_path``) from what only it holds.

    ``begin()``: the start on ``clock`` when a first attempt may run unguarded (neither
    ``breaker_gate`` nor ``reconnect_gate`` is shut: the breaker is CLOSED and the server is
    not marked unavailable), else None. ``succeeded(tool, start)``: counts a success
    (``next(ok)``, a count the breaker reads; every 16th also calls ``mark()``, the
    breaker's mark of its window) and hands ``(server, tool, start, end, success)`` to
    ``record`` (if any); a recorder that raises is reported to ``failed()``.
    """

    def __init__(self, breaker_gate, reconnect_gate, ok, mark, record, server, clock, success, failed):
        self._gate = breaker_gate
        self._reconnect_gate = reconnect_gate
        self._ok = ok
        self._mark = mark
        calls = getattr(record, "__self__", None)  # a CallQueue's record: called as its method (compiled: in C)
        self._calls = calls if type(calls) is CallQueue else None
        self._record = None if self._calls is not None else record
        self._server = server
        self._clock = clock
        self._c_clock = _COMPILED and clock is time.monotonic  # read in C, with no call (the same clock)
        self._success = success
        self._failed = failed

    def begin(self):
        if self._gate.shut or self._reconnect_gate.shut:
            return None
        if self._c_clock:
            return _c_monotonic()
        return self._clock()

    def succeeded(self, tool, start):
        if not next(self._ok) & 15:  # the window's successes are read between the breaker's marks
            self._mark()
        calls = self._calls
        record = self._record
        if calls is None and record is None:
            return
        end = _c_monotonic() if self._c_clock else self._clock()
        try:
            if calls is not None:
                calls.record(self._server, tool, start, end, self._success)
            else:
                record(self._server, tool, start, end, self._success)
        except Exception:
            self._failed()



class IdleReturn:
    """The end of a lone caller's call on a pooled connection it claimed without the
    pool's lock: ``ConnectionPool.give_back_idle``, which :meth:`give_back` is, one call
    into C in the compiled build (it gives back, it takes nothing: a signal handler's
    exception after it finds nothing half done).

    ``give_back(entry, broken=False)``: the entry's ``last_used`` set on ``clock``; when
    ``broken``, ``settle(entry, True)`` first (the pool takes it out under its lock while
    the claim still holds it); the claim given up (``entry.claims.pop()``) and counted
    (``next(returned)``); then, for an entry ``retiring`` or while the pool's ``waiters``
    wait, ``settle(entry, False)`` (the room goes to the queue).
    """

    def __init__(self, clock, returned, waiters, settle):
        self._clock = clock
        self._c_clock = _COMPILED and clock is time.monotonic  # read in C, with no call (the same clock)
        self._returned = returned
        self._waiters = waiters
        self._settle = settle

    def give_back(self, entry, broken=False):
        entry.last_used = _c_monotonic() if self._c_clock else self._clock()
        if broken:
            self._settle(entry, True)
        entry.claims.pop()
        next(self._returned)
        if entry.retiring or self._waiters:  # (read after the claim is gone: see the pool's _reserve)
            self._settle(entry, False)


# ------------------------------------------------------------------ tools/call's answer in one pass


class CallAnswer:
    """``tools/call``'s answer read in one pass (``mcpsync._decoders`` builds it; the
    dispatcher's reader calls :meth:`take`, one call into C in the compiled build).

    ``take(data)``: ``decode(data)`` (the whole answer, its result typed) when ``data`` is
    bytes that begin with ``start`` (how servers write an answer) and decode to a complete
    result with content (``result.content`` or ``result.structured_content``, and
    ``result.result_type`` None or ``"complete"``); else None, ``errors`` (the decoder's)
    included: the reader's general path decodes those again, and reports what is wrong.
    """

    def __init__(self, decode, start, errors):
        self._decode = decode
        self._start = start
        self._errors = errors

    def take(self, data):
        if type(data) is not bytes:
            return None
        raw = data  # (compiled: typed bytes, so that startswith is a memcmp)
        if not raw.startswith(self._start):
            return None
        try:
            answer = self._decode(raw)
        except Exception as exc:
            if isinstance(exc, self._errors):
                return None
            raise
        r = answer.result
        if (r.content or r.structured_content is not None) and (r.result_type is None or r.result_type == "complete"):
            return answer
        return None
