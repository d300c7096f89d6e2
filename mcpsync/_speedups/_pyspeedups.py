"""Hot-path helpers: newline JSON-RPC framing and a thread-safe TTL cache.

This file is the single source of both implementations: imported as is it is the
pure-Python twin; ``setup.py`` compiles a copy of it with Cython (pure-Python mode,
types from ``_cspeedups.pxd``) into the ``_cspeedups`` extension. Keep it in the subset
of Python that Cython compiles unchanged.
"""

import threading
import time

__all__ = ["LineFramer", "FrameTooLarge", "TTLCache", "DEFAULT_MAX_MESSAGE_SIZE"]

DEFAULT_MAX_MESSAGE_SIZE = 16 * 1024 * 1024
_EDGE = 256


class FrameTooLarge(Exception):
    """A frame exceeded ``max_size``. ``head``/``tail`` keep its first and last bytes."""

    def __init__(self, size, limit, head, tail):
        Exception.__init__(self, "message of at least %d bytes exceeds the limit of %d bytes" % (size, limit))
        self.size = size
        self.limit = limit
        self.head = head
        self.tail = tail


class LineFramer:
    """Splits a byte stream into newline-delimited messages.

    ``feed(chunk)`` returns the complete messages the chunk finished (without the line
    ending; a trailing ``\\r`` is dropped, blank lines are skipped). A message longer than
    ``max_size`` is discarded as it arrives (memory stays bounded) and raises
    :class:`FrameTooLarge` once, at the newline that ends it; the framer then carries on,
    so later messages are unaffected. Messages completed in the same chunk as the
    error are kept for the next ``feed``/``pop``.
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
        self._ready = []

    @property
    def buffered(self):
        """Bytes held for the message not yet complete."""
        return len(self._buf)

    def pop(self):
        """Messages already complete (left over from a feed that raised)."""
        out = self._ready
        self._ready = []
        return out

    def feed(self, data):
        buf = self._buf
        out = self._ready
        self._ready = []
        error = None
        start = 0
        n = len(data)
        while start < n:
            nl = data.find(b"\n", start)
            if self._discarding:
                stop = n if nl < 0 else nl
                self._discard_size += stop - start
                self._tail = (self._tail + data[max(start, stop - _EDGE):stop])[-_EDGE:]
                if nl < 0:
                    break
                self._discarding = False
                start = nl + 1
                if error is None:
                    error = FrameTooLarge(self._discard_size, self.max_size, self._head, self._tail)
                continue
            if nl < 0:
                size = len(buf) + (n - start)
                if size > self.max_size:
                    head = (bytes(buf[:_EDGE]) + data[start:start + _EDGE])[:_EDGE]
                    tail = (bytes(buf[-_EDGE:]) + data[max(start, n - _EDGE):n])[-_EDGE:]
                    self._discarding = True
                    self._discard_size = size
                    self._head = head
                    self._tail = tail
                    del buf[:]
                else:
                    buf += data[start:]
                break
            if buf:
                buf += data[start:nl]
                frame = bytes(buf)
                del buf[:]
            else:
                frame = data[start:nl]
            start = nl + 1
            if frame.endswith(b"\r"):
                frame = frame[:-1]
            if len(frame) > self.max_size:
                if error is None:
                    error = FrameTooLarge(len(frame), self.max_size, frame[:_EDGE], frame[-_EDGE:])
            elif frame and not frame.isspace():
                out.append(frame)
        if error is not None:
            self._ready = out
            raise error
        return out

    def reset(self):
        del self._buf[:]
        self._discarding = False
        self._ready = []


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
        lock = self._lock
        lock.acquire()  # not ``with``: on CPython 3.11 that costs over twice as much
        try:
            entry = self._data.get(key)
            if entry is not None:
                expires = entry[1]
                if expires < 0.0 or self._clock() < expires:
                    self.hits += 1
                    return entry[0]
                del self._data[key]
            self.misses += 1
            return default
        finally:
            lock.release()

    def peek(self, key, default=None):
        """Like :meth:`get` without the counters and, for an entry without a TTL,
        without the lock: a reader on a hot path.

        A key's entry is one dict value, swapped whole by :meth:`set`, so one ``dict.get``
        reads a consistent entry. An entry with a TTL is checked under the lock (it may
        have to be dropped).
        """
        entry = self._data.get(key)
        if entry is None:
            return default
        if entry[1] < 0.0:
            return entry[0]
        with self._lock:
            entry = self._data.get(key)
            if entry is None:
                return default
            if self._clock() < entry[1]:
                return entry[0]
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
