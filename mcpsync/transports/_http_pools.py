"""Shared HTTP connection pools and the daemon threads that read response streams.

* :func:`acquire_pool` / :func:`release_pool` — one urllib3 pool manager per origin
  (and TLS / proxy settings), shared by every transport and thread talking to it,
  reference counted so the last user closes it. Proxies come from the environment
  (``HTTP(S)_PROXY`` / ``NO_PROXY``) as requests reads them.
* :class:`StreamThreads` — each transport reads its response streams on its own
  reusable daemon threads, all ended (bounded join) when the transport closes.
"""

from __future__ import annotations

import os
import queue
import threading
import time
import weakref
from typing import Any
from urllib.parse import urlsplit

import urllib3

from .._errors import ConnectionClosed
from ._fasthttp import FastPoolManager, http_path, tls_context
from ._urllib3_path import POOL_CLASSES
from ._http_options import HTTPOptions, log, origin_of

class Pools:
    """The two pool managers of one origin.

    Attributes:
        main: requests; at most ``pool_size`` connections, a caller waits (up to its
            timeout) for a free one.
        control: long-lived streams (the standalone GET stream, the HTTP+SSE stream),
            replies to server requests, notifications and DELETE. Never blocks, so an
            answer a server waits for is never stuck behind the streams awaiting it.
    """

    __slots__ = ("main", "control", "refs", "fast")

    def __init__(self, main: Any, control: Any) -> None:  # urllib3's or the fast path's managers
        self.main = main
        self.control = control
        self.refs = 0
        #: both are the fast path's (``FastPoolManager.exchange`` takes plain timeouts)
        self.fast = isinstance(main, FastPoolManager)


_pools: dict[tuple[Any, ...], Pools] = {}
_pools_lock = threading.Lock()


def _env_proxy(url: str) -> str | None:
    import requests.utils  # requests' reading of HTTP(S)_PROXY / NO_PROXY

    proxies = requests.utils.get_environ_proxies(url)
    scheme = urlsplit(url).scheme
    return proxies.get(scheme) or proxies.get("all")


def _pool_key(url: str, opts: HTTPOptions) -> tuple[Any, ...]:
    proxy = _env_proxy(url)
    return (origin_of(url), str(opts.verify), proxy, opts.pool_size, http_path(proxy))


def acquire_pool(url: str, opts: HTTPOptions) -> tuple[tuple[Any, ...], Pools]:
    """The shared pools for ``url``'s origin; pair every call with :func:`release_pool`.

    Returns:
        (key, pools): pass ``key`` to :func:`release_pool`.
    """
    key = _pool_key(url, opts)
    with _pools_lock:
        entry = _pools.get(key)
        if entry is None:
            entry = Pools(_make_manager(url, opts, block=True), _make_manager(url, opts, block=False))
            _pools[key] = entry
        entry.refs += 1
        return key, entry


def release_pool(key: tuple[Any, ...]) -> None:
    """Drop one reference; the last one closes the pools' idle connections."""
    with _pools_lock:
        entry = _pools.get(key)
        if entry is None:
            return
        entry.refs -= 1
        if entry.refs > 0:
            return
        del _pools[key]
    entry.main.clear()
    entry.control.clear()


def _make_manager(url: str, opts: HTTPOptions, *, block: bool) -> Any:
    """A pool manager for ``url``: the fast path's, or urllib3's where the fast path does
    not fit (a proxy; ``MCPSYNC_HTTP=urllib3``; see :func:`_fasthttp.http_path`)."""
    proxy = _env_proxy(url)
    if http_path(proxy) == "fast":
        tls = tls_context(opts.verify) if urlsplit(url).scheme == "https" else None
        return FastPoolManager(maxsize=opts.pool_size, block=block, tls=tls)
    kwargs: dict[str, Any] = {
        "num_pools": 4,
        "maxsize": opts.pool_size,
        # never blocking: urllib3 counts its places in a queue that a caller interrupted by
        # a signal can leave short for good; the client's own pool bounds the calls in flight
        "block": False,
        "retries": urllib3.Retry(total=None, connect=1, read=0, redirect=0, status=0, other=0),
    }
    if urlsplit(url).scheme == "https":
        if opts.verify is False:
            kwargs["cert_reqs"] = "CERT_NONE"
        else:
            kwargs["cert_reqs"] = "CERT_REQUIRED"
            if isinstance(opts.verify, str):
                kwargs["ca_certs"] = opts.verify
            else:
                try:
                    import certifi

                    kwargs["ca_certs"] = certifi.where()
                except ImportError:  # pragma: no cover - certifi ships with requests
                    pass
    manager = urllib3.ProxyManager(proxy, **kwargs) if proxy else urllib3.PoolManager(**kwargs)
    manager.pool_classes_by_scheme = POOL_CLASSES  # what mcpsync adds (see _urllib3_path)
    return manager


# --------------------------------------------------------------------------- stream threads


_STOP = object()  # a slot told to end (its owner closed)


class _Slot:
    """One reusable daemon thread: runs jobs, then waits ``idle`` seconds for another."""

    __slots__ = ("jobs", "thread")

    def __init__(self) -> None:
        self.jobs: queue.SimpleQueue[Any] = queue.SimpleQueue()
        self.thread: threading.Thread | None = None


_SLOT_IDLE = 30.0
_all_threads: "weakref.WeakSet[StreamThreads]" = weakref.WeakSet()


class StreamThreads:
    """The daemon threads one transport reads its response streams on.

    A fresh thread costs ~60 µs here, handing a job to a parked one ~10 µs, so a
    thread that finished a job parks for the next (for up to 30 s idle). They belong
    to one transport: :meth:`close` tells the parked ones to end and waits (bounded)
    for the busy ones, whose jobs the transport's close has just cut short, so no
    ``mcpsync-http-stream`` thread outlives the transport.

    Example:
        >>> threads = StreamThreads()
        >>> done = threading.Event()
        >>> threads.spawn(done.set)
        >>> done.wait(5)
        True
        >>> threads.close(5)
        True
    """

    __slots__ = ("_idle", "_all", "_lock", "_closed", "__weakref__")

    def __init__(self) -> None:
        self._idle: list[_Slot] = []
        self._all: set[_Slot] = set()
        self._lock = threading.Lock()
        self._closed = False
        _all_threads.add(self)

    def spawn(self, fn: Any, *args: Any) -> None:
        """Run ``fn(*args)`` on one of these threads (a parked one when there is one).

        Raises:
            ConnectionClosed: after :meth:`close`.
        """
        with self._lock:
            if self._closed:
                raise ConnectionClosed("transport is closed")
            slot = self._idle.pop() if self._idle else None
            fresh = slot is None
            if slot is None:
                slot = _Slot()
                slot.thread = threading.Thread(target=self._loop, args=(slot,), name="mcpsync-http-stream", daemon=True)
                self._all.add(slot)
        slot.jobs.put((fn, args))
        if fresh:
            slot.thread.start()  # type: ignore[union-attr]

    def close(self, timeout: float) -> bool:
        """End every thread: parked ones at once, busy ones when their job returns.

        Waits at most ``timeout`` seconds in all. True when every thread has ended.
        """
        with self._lock:
            self._closed = True
            idle, self._idle = self._idle, []
            slots = list(self._all)
        for slot in idle:
            slot.jobs.put(_STOP)
        deadline = time.monotonic() + timeout
        me = threading.current_thread()
        ended = True
        for slot in slots:
            thread = slot.thread
            if thread is None or thread is me or thread.ident is None:
                continue
            thread.join(max(0.0, deadline - time.monotonic()))
            ended = ended and not thread.is_alive()
        return ended

    def _loop(self, slot: _Slot) -> None:
        try:
            while True:
                try:
                    job = slot.jobs.get(timeout=_SLOT_IDLE)
                except queue.Empty:
                    with self._lock:
                        if slot in self._idle:
                            self._idle.remove(slot)
                            return
                    job = slot.jobs.get()  # popped by spawn() or close() just now: it is coming
                if job is _STOP:
                    return
                fn, args = job
                try:
                    fn(*args)
                except Exception:  # noqa: BLE001 - jobs log their own failures
                    log.exception("HTTP stream job failed")
                fn = args = job = None  # drop references while parked
                with self._lock:
                    if self._closed:
                        return
                    self._idle.append(slot)
        finally:
            with self._lock:
                self._all.discard(slot)

    def _after_fork(self) -> None:
        self._idle = []  # their threads did not survive the fork
        self._all = set()
        self._lock = threading.Lock()


def _after_fork_in_child() -> None:
    """A forked child shares none of the parent's connections or stream threads."""
    global _pools_lock
    _pools.clear()  # the sockets are the parent's; dropped, never shut down
    _pools_lock = threading.Lock()
    for threads in list(_all_threads):
        threads._after_fork()


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_after_fork_in_child)
