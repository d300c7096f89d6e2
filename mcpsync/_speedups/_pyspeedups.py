"""Hot-path helpers: newline JSON-RPC framing, a thread-safe TTL cache, latency histograms
and call tallies, the guard's fast path, the dispatcher's idle gate and the stdio idle
watch's switch.

This file is the single source of both implementations: imported as is it is the
pure-Python twin; ``setup.py`` compiles a copy of it with Cython (pure-Python mode,
types from ``_cspeedups.pxd``) into the ``_cspeedups`` extension. Keep it in the subset
of Python that Cython compiles unchanged.
"""

import collections
import errno
import functools
import os
import select
import threading
import time

try:  # compiled, ``cython.compiled`` is True (Cython resolves it); imported as is, False
    import cython
except ImportError:  # the pure-Python package: Cython is only a build requirement
    _COMPILED = False
else:
    _COMPILED = cython.compiled

__all__ = ["LineFramer", "FrameTooLarge", "write_line", "TTLCache", "DEFAULT_MAX_MESSAGE_SIZE", "Histogram", "CallTally",
           "bucket_index", "fold_calls", "CallQueue", "BUCKETS", "Gate", "FastPath", "EpollSwitch", "IdleGate"]

DEFAULT_MAX_MESSAGE_SIZE = 16 * 1024 * 1024
_EDGE = 256
_CHUNK = 65536  # one read of a pipe (LineFramer.read)
_SMALL = 2048  # compiled, a read of more is made into bytes of its own, not copied out of the module's buffer
_INSTANT = 5e-6  # a wait that ended sooner found its input in already (LineFramer.wait_message)


def _millis(timeout):
    """``timeout`` s as whole milliseconds for poll(2), rounded up (0 to ~23 days)."""
    ms = min(max(timeout, 0.0), 2e6) * 1000.0
    return int(ms) + (1 if int(ms) < ms else 0)


def write_line(fd, message):
    """Write ``message`` and a newline to the non-blocking file ``fd``: the bytes written (fewer
    when the pipe is full); raises as ``os.write`` does. Compiled, one writev(2) (_cspeedups.pxd)."""
    if _COMPILED:
        return _write_line(fd, message, len(message))
    try:
        return os.write(fd, message + b"\n")
    except BlockingIOError:
        return 0


class FrameTooLarge(Exception):
    """A frame exceeded ``max_size``. ``head``/``tail`` keep its first and last bytes."""

    def __init__(self, size, limit, head, tail):
        Exception.__init__(self, "message of at least %d bytes exceeds the limit of %d bytes" % (size, limit))
        self.size = size
        self.limit = limit
        self.head = head
        self.tail = tail


def _without_cr(frame):
    """A frame without the ``\\r`` of a CRLF line ending."""
    return frame[:-1] if frame and frame[len(frame) - 1] == 13 else frame


def _worth_keeping(frame):
    """Not empty and not whitespace only (blank lines between messages are skipped)."""
    return len(frame) > 0 and (frame[0] > 32 or not frame.isspace())


class LineFramer:
    """Splits a byte stream into newline-delimited messages.

    ``feed(chunk)`` returns the complete messages the chunk finished (without the line
    ending; a trailing ``\\r`` is dropped, blank lines are skipped). A message longer than
    ``max_size`` is discarded as it arrives (memory stays bounded) and raises
    :class:`FrameTooLarge` once, at the newline that ends it; the framer then carries on,
    so later messages are unaffected. Messages completed in the same chunk as the
    error are kept for the next ``feed``/``pop``.

    ``read(fd)`` is a reader's way: it reads one chunk of a pipe and frames it, keeping
    the complete messages, oldest first, in ``first`` (a list of one: the message or
    None) and then ``ready`` (a deque), from which the reader takes them with no call
    (``data = first[0]; first[0] = None``; ``promote()`` moves the next one up), so that
    no byte read is ever only in a local.
    Compiled, each call runs in C, where no signal handler runs. An exception a handler
    raises (KeyboardInterrupt) can come at any call or backward jump of the pure build,
    never elsewhere (CPython runs handlers there only): the chunk is read by a ``for``
    step (over ``iter(partial(os.read, fd, size), b"")``) and kept in ``_pending`` with no
    call between; the framing works on locals and is committed with no call (the
    carried-over bytes, the discard state, the messages, ``_pending`` cleared); a read
    cut short leaves its chunk to the next read.
    """

    def __init__(self, max_size=DEFAULT_MAX_MESSAGE_SIZE):
        if max_size <= 0:
            raise ValueError("max_size must be positive")
        self.max_size = max_size
        self._buf = bytearray()
        self._discarding = False
        self._discard_size = 0
        self._head = b""
        self._tail = b""
        self.first = [None]
        self.ready = collections.deque()
        self._pending = None
        self._source = None  # the pure twin's reads of _source_fd (see read)
        self._source_fd = -1
        self._poller, self._poll_fd, self._eager, self._big = None, -1, True, False  # waits (wait_message), reads (read)

    @property
    def buffered(self):
        """Bytes held for the message not yet complete."""
        return len(self._buf)

    def pop(self):
        """Messages already complete (left over from a feed that raised)."""
        first = self.first
        out = [] if first[0] is None else [first[0]]
        out.extend(self.ready)
        first[0] = None
        self.ready.clear()
        return out

    def feed(self, data):
        self._frame(data)
        return self.pop()

    def promote(self):
        """Move the oldest message of ``ready`` to ``first`` when ``first`` is empty (with
        no call: see the class)."""
        ready = self.ready
        first = self.first
        if first[0] is None and ready:
            first[0] = ready[0]
            del ready[0]

    def read(self, fd):
        """Read what the file ``fd`` (non-blocking) holds, up to 64 KiB, and frame it.
        Returns 1 after a read, 0 at the end of the stream, -1 when there is nothing to
        read (BlockingIOError, caught here: cheaper than through C); raises what else
        reading raises, and :class:`FrameTooLarge`."""
        data = self._pending
        if data is None and _COMPILED:
            # one read(2), the GIL kept (a non-blocking pipe never waits): a small one into the
            # module's buffer, copied out, a big one (as the last was) into bytes of its own; one
            # whole message with nothing held before it is kept as it is (see _cspeedups.pxd)
            first = self.first
            lone = self.max_size if first[0] is None and not self.ready and not self._buf and not self._discarding else 0
            data = _read(fd, lone, self._big, cython.address(state))
            if state < 1:
                return state
            self._big = len(data) > _SMALL
            if state == 2:  # (_frame's first case and its commit, with no split)
                first[0] = data
                return 1
            self._pending = data
        if data is None:
            try:  # a for step reads: no signal check between the read and the keeping
                if self._source_fd != fd:
                    self._source = iter(functools.partial(os.read, fd, _CHUNK), b"")
                    self._source_fd = fd
                data = b""
                for data in self._source:
                    break
            except BlockingIOError:
                return -1
            if not data:
                return 0
            self._pending = data  # no call since the read: see the class
        self._frame(data)
        return 1

    def wait_message(self, fd, timeout):
        """Read the non-blocking file ``fd`` until a message is whole in ``first``, waiting up to
        ``timeout`` s in all (None: no bound): 1, 0 at the end of the stream, -1 when none came
        in time. Compiled, reads come first (one that finds nothing costs no exception in C)
        and waits are poll(2)s with the GIL let go; the pure twin reads first only while
        waits end at once."""
        first = self.first
        deadline = -1.0
        eager = _COMPILED or self._eager
        while True:
            if not eager:
                started = _c_monotonic() if _COMPILED else time.monotonic()
                left = timeout
                if timeout is not None:
                    if deadline < 0.0:
                        deadline = started + timeout
                    else:
                        left = deadline - started
                        if left <= 0.0:
                            return -1
                if _COMPILED:
                    _poll_in(fd, -1 if left is None else _millis(left))
                else:
                    if self._poll_fd != fd:
                        self._poller = select.poll()
                        self._poller.register(fd, select.POLLIN)
                        self._poll_fd = fd
                    self._poller.poll(None if left is None else left * 1000.0 if left > 0.0 else 0.0)
                    self._eager = time.monotonic() - started < _INSTANT
            n = self.read(fd)
            if n == 0:
                return 0
            if n > 0 and first[0] is not None:
                return 1
            eager = self._eager = False  # nothing in yet (a wake with nothing to read), or a part of a message: wait

    def _frame(self, data):
        # frames ``data`` after the bytes held; committed at the end with no call (see the class)
        buf = self._buf
        n = len(data)
        out = []
        if n > 1 and data[n - 1] == 10 and not buf and not self._discarding and n <= self.max_size:
            # the usual read: whole messages, nothing held from the read before: one split
            # (the last piece is the empty one after the final newline)
            for frame in data.split(b"\n"):
                frame = _without_cr(frame)
                if _worth_keeping(frame):
                    out.append(frame)
            rest = out[1:] if len(out) > 1 else None
            # the commit: no call from here to the end
            first = self.first
            if first[0] is None and not self.ready and out:
                first[0] = out[0]
                if rest is not None:
                    self.ready += rest
            else:
                self.ready += out
            self._pending = None
            return
        error = None
        discarding = self._discarding
        discard_size = self._discard_size
        head = self._head
        tail = self._tail
        held = len(buf)  # bytes of buf that start the next line (0 once used)
        drop = False  # buf was used: emptied at the commit
        rest = b""  # what buf gets at the commit
        start = 0
        while start < n:
            nl = data.find(b"\n", start)
            if discarding:
                stop = n if nl < 0 else nl
                discard_size += stop - start
                tail = (tail + data[max(start, stop - _EDGE):stop])[-_EDGE:]
                if nl < 0:
                    break
                discarding = False
                start = nl + 1
                if error is None:
                    error = FrameTooLarge(discard_size, self.max_size, head, tail)
                continue
            if nl < 0:
                size = held + (n - start)
                if size > self.max_size:
                    before = bytes(buf) if held else b""
                    head = (before[:_EDGE] + data[start:start + _EDGE])[:_EDGE]
                    tail = (before[-_EDGE:] + data[max(start, n - _EDGE):n])[-_EDGE:]
                    discarding = True
                    discard_size = size
                    drop = held > 0
                    held = 0
                else:
                    rest = data[start:]
                break
            if held:
                frame = b"".join((buf, data[start:nl]))
                drop = True
                held = 0
            else:
                frame = data[start:nl]
            start = nl + 1
            frame = _without_cr(frame)
            if len(frame) > self.max_size:
                if error is None:
                    error = FrameTooLarge(len(frame), self.max_size, frame[:_EDGE], frame[-_EDGE:])
            elif _worth_keeping(frame):
                out.append(frame)
        after = out[1:] if len(out) > 1 else None
        # the commit: no call from here to the end
        if drop:
            del buf[:]
        buf += rest
        self._discarding = discarding
        self._discard_size = discard_size
        self._head = head
        self._tail = tail
        first = self.first
        if first[0] is None and not self.ready and out:
            first[0] = out[0]
            if after is not None:
                self.ready += after
        else:
            self.ready += out
        self._pending = None
        if error is not None:
            raise error

    def reset(self):
        del self._buf[:]
        self._discarding = False
        self._pending = None
        self.first[0] = None
        self.ready.clear()


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

    def record(self, server, tool, start, end, outcome):
        tallies = self.tallies
        if tallies is not None:
            tally = tallies.get((server, tool))
            if tally is not None:
                tally.add(start, end, outcome, True)
            else:
                self.missing(server, tool, start, end, outcome)
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
        self._record = record
        self._server = server
        self._clock = clock
        self._success = success
        self._failed = failed

    def begin(self):
        if self._gate.shut or self._reconnect_gate.shut:
            return None
        return self._clock()

    def succeeded(self, tool, start):
        if not next(self._ok) & 15:  # the window's successes are read between the breaker's marks
            self._mark()
        record = self._record
        if record is not None:
            try:
                record(self._server, tool, start, self._clock(), self._success)
            except Exception:
                self._failed()


# ------------------------------------------------------------------ the idle watch's switch


class EpollSwitch:
    """Turns ``fd``'s watch in ``epoll`` (a ``select.epoll``) on (EPOLLIN) and off (no
    events), as ``epoll.modify`` does: :meth:`turn`. Compiled, that is one epoll_ctl that
    keeps the GIL (``modify`` drops and retakes it, but epoll_ctl on our own set never
    blocks), called from C by :class:`IdleGate`; without epoll it fails with ENOSYS.

    The switch keeps the epoll's number, so the epoll must be closed through
    :meth:`close`: it forgets the number before the epoll closes it, and a turn runs whole
    under the GIL, so a number another file has since been given is never touched.
    """

    def __init__(self, epoll, fd):
        self._epoll = epoll
        self._epfd = epoll.fileno()
        self._fd = fd

    def close(self):
        """Close the epoll (idempotent); a turn fails with EBADF from then on."""
        self._epfd = -1
        self._epoll.close()

    def turn(self, on):
        """Watch for input (``on``) or not: 0 when done, else the errno (raises nothing:
        a failed turn means the transport is closing, which its readers report)."""
        if self._epfd < 0:
            return errno.EBADF
        if _COMPILED:
            return _epoll_turn(self._epfd, self._fd, on)  # declared in _cspeedups.pxd: compiled only
        try:
            self._epoll.modify(self._fd, select.EPOLLIN if on else 0)
        except OSError as exc:
            return exc.errno
        except ValueError:  # closed behind the switch's back
            return errno.EBADF
        return 0


class IdleGate:
    """A dispatcher's last activity (``last``, on ``clock``) and its transport's idle
    watch (``switch``, an :class:`EpollSwitch`, or None), one call into C at each end of a
    call in the compiled build (see ``Dispatcher.request`` and ``Dispatcher._lead``).

    ``arrive(now)``: a caller starts a request at ``now``. After ``grace`` s with no
    activity the background thread waits in the watch, so it is turned off first, then
    ``paused`` set; ``last`` becomes ``now``. ``leave()``: the leader let go (it put the
    read baton back itself, first: see ``Dispatcher._lead``): ``last`` becomes the time,
    then a paused watch goes on again (``paused`` cleared first), so it is never off with
    ``paused`` false. A turn that fails means the transport is closing, which its readers
    report: ignored. Compiled, each runs whole under the GIL.
    """

    def __init__(self, switch, grace, clock):
        self._switch = switch
        self._grace = grace
        self._clock = clock
        self.last = clock()
        self.paused = False

    def arrive(self, now):
        if now - self.last >= self._grace and not self.paused and self._switch is not None:
            self._switch.turn(False)
            self.paused = True
        self.last = now

    def leave(self):
        self.last = self._clock()
        if self.paused:
            self.paused = False
            self._switch.turn(True)
