"""What mcpsync adds to urllib3, the HTTP path taken behind a proxy.

``_http_pools`` builds its urllib3 managers with :data:`POOL_CLASSES`, whose connections
and answers add what the fast path (``_fasthttp``) has of its own:

* **Was it written?** :func:`attempt` before a request, :func:`was_written` after a
  failure: urllib3 wraps a TLS failure the same way whether it came in the handshake or
  after the request went out, and only the second may have reached the server (a
  side-effecting call must then not be sent again).
* **Past interim answers.** ``http.client`` reads past ``100`` only; ``102`` and ``103``
  are read past too (:class:`_ReadsPastInterim`), so the real answer is the request's own.
* **One deadline for the head.** ``http.client`` gives every read of an answer's head
  the socket's timeout afresh, so a head trickled a byte at a time could outlast any
  deadline; a watchdog thread shuts the socket down when the deadline passes, and the
  read fails as a read timeout. :func:`guard` does the same for any read.

(Its managers never block waiting for a connection: urllib3 keeps its places in a queue
that a caller interrupted by a signal between two bytecodes can leave short for good, and
the client's own pool already bounds the calls in flight.)
"""

from __future__ import annotations

import heapq
import http.client
import itertools
import os
import socket
import threading
import time
import weakref
from contextlib import contextmanager
from typing import Any, Iterator

from urllib3.connection import HTTPConnection, HTTPSConnection
from urllib3.connectionpool import HTTPConnectionPool, HTTPSConnectionPool
from urllib3.exceptions import ReadTimeoutError

__all__ = ["POOL_CLASSES", "attempt", "close_manager", "guard", "was_written"]

_local = threading.local()


def attempt(deadline: float | None) -> None:
    """Before a request on this thread: nothing written yet; its head is read by ``deadline``."""
    _local.written = False
    _local.deadline = deadline


def was_written() -> bool:
    """Whether this thread's last request had begun to be written (so may have reached the server)."""
    return bool(getattr(_local, "written", False))


# --------------------------------------------------------------------------- the watchdog


class _Watch:
    __slots__ = ("deadline", "sock", "fired", "done")

    def __init__(self, deadline: float, sock: Any) -> None:
        self.deadline = deadline
        self.sock = sock
        self.fired = False
        self.done = False


class _Watchdog:
    """Shuts sockets down when their deadline passes; one thread, started when needed,
    gone after :data:`_LINGER` seconds with nothing to watch."""

    _LINGER = 1.0

    def __init__(self) -> None:
        self._cond = threading.Condition(threading.Lock())
        self._heap: list[tuple[float, int, _Watch]] = []
        self._seq = itertools.count()
        self._running = False

    def watch(self, deadline: float, sock: Any) -> _Watch:
        watch = _Watch(deadline, sock)
        with self._cond:
            heapq.heappush(self._heap, (deadline, next(self._seq), watch))
            if not self._running:
                self._running = True
                threading.Thread(target=self._run, name="mcpsync-urllib3-deadline", daemon=True).start()
            elif self._heap[0][2] is watch:
                self._cond.notify()
        return watch

    def _run(self) -> None:
        cond = self._cond
        while True:
            fire: list[_Watch] = []
            with cond:
                heap = self._heap
                while heap and heap[0][2].done:
                    heapq.heappop(heap)
                if not heap:
                    cond.wait(self._LINGER)
                    while heap and heap[0][2].done:
                        heapq.heappop(heap)
                    if not heap:
                        self._running = False
                        return
                    continue
                now = time.monotonic()
                while heap and heap[0][0] <= now:
                    watch = heapq.heappop(heap)[2]
                    if not watch.done:
                        watch.fired = True
                        fire.append(watch)
                if not fire:
                    cond.wait(heap[0][0] - now)
            for watch in fire:
                try:
                    watch.sock.shutdown(socket.SHUT_RDWR)
                except OSError:
                    pass

    def after_fork(self) -> None:
        self.__init__()  # type: ignore[misc]  # the parent's thread did not come along


_watchdog = _Watchdog()
if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_watchdog.after_fork)


@contextmanager
def guard(deadline: float | None, sock: Any) -> Iterator[None]:
    """Reads of ``sock`` inside end by ``deadline`` (monotonic): the socket is shut down
    when it passes, and what failed for it is a :class:`ReadTimeoutError`."""
    if deadline is None or sock is None:
        yield
        return
    watch = _watchdog.watch(deadline, sock)
    try:
        yield
    except BaseException:
        if watch.fired:
            raise ReadTimeoutError(None, None, "the answer did not arrive in time") from None  # type: ignore[arg-type]
        raise
    finally:
        watch.done = True


# --------------------------------------------------------------------------- urllib3's classes


_INTERIM_FIELDS = 100  # http.client's own limits on a head
_LINE = 65536
_MAX_INTERIM = 16


class _ReadsPastInterim(http.client.HTTPResponse):
    """``http.client``'s answer, reading past every interim answer (it skips ``100`` only:
    a ``102`` or ``103`` would be taken for the answer, and the real one left on the socket
    for the next request). ``101`` stays the answer (and is refused above)."""

    def _read_status(self) -> tuple[str, int, str]:
        for _ in range(_MAX_INTERIM):
            version, status, reason = super()._read_status()  # type: ignore[misc]  # (private: http.client's own)
            if not 101 < status < 200:
                return version, status, reason
            for _ in range(_INTERIM_FIELDS + 1):  # the interim answer's fields: read, bounded, dropped
                line = self.fp.readline(_LINE + 1)
                if len(line) > _LINE:
                    raise http.client.LineTooLong("interim answer's field")
                if line in (b"\r\n", b"\n", b""):
                    break
            else:
                raise http.client.HTTPException(f"an interim answer with over {_INTERIM_FIELDS} fields")
        raise http.client.HTTPException(f"more than {_MAX_INTERIM} interim answers")


class _Written:
    """A connection that notes when it starts to write a request, and whose answer's
    head is read within this thread's deadline (:func:`attempt`)."""

    sock: Any

    def send(self, data: Any) -> None:
        if self.sock is None:
            self.connect()  # type: ignore[attr-defined]  # (http.client would, in its send)
        _local.written = True
        super().send(data)  # type: ignore[misc]

    def getresponse(self) -> Any:
        with guard(getattr(_local, "deadline", None), self.sock):
            return super().getresponse()  # type: ignore[misc]


class _HTTPConnection(_Written, HTTPConnection):
    response_class = _ReadsPastInterim


class _HTTPSConnection(_Written, HTTPSConnection):
    response_class = _ReadsPastInterim


class _Tracked:
    """A pool that knows its connections (weakly: made rarely, gone when collected), so
    that closing the client can wake the calls still waiting on them."""

    _made: weakref.WeakSet[Any]

    def _new_conn(self) -> Any:
        conn = super()._new_conn()  # type: ignore[misc]
        made = getattr(self, "_made", None)
        if made is None:
            made = self._made = weakref.WeakSet()
        made.add(conn)
        return conn


class _HTTPPool(_Tracked, HTTPConnectionPool):
    ConnectionCls = _HTTPConnection


class _HTTPSPool(_Tracked, HTTPSConnectionPool):
    ConnectionCls = _HTTPSConnection


def close_manager(manager: Any) -> None:
    """Close a urllib3 manager: its idle connections (urllib3's ``clear``) and, first, the
    ones still in use, shut down so that their readers wake now and fail."""
    pools = manager.pools
    for key in list(pools.keys()):
        pool = pools.get(key)
        for conn in list(getattr(pool, "_made", ())):
            sock = getattr(conn, "sock", None)
            if sock is not None:
                try:
                    sock.shutdown(socket.SHUT_RDWR)
                except OSError:
                    pass
    manager.clear()


#: set as a urllib3 manager's ``pool_classes_by_scheme``
POOL_CLASSES: dict[str, type[HTTPConnectionPool]] = {"http": _HTTPPool, "https": _HTTPSPool}
