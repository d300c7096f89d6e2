"""One client's HTTP connection pools and the daemon threads that read response streams.

* :class:`ClientConnections` — what one client owns, as a ``requests.Session`` or an
  ``httpx.Client`` does: its pool managers (one pair per origin, and TLS / proxy
  settings), shared by every transport and thread of that client, reference counted so
  the last transport's close closes their idle sockets, and its cookie jar. Nothing is
  shared between clients: two clients of one origin (say with different credentials)
  never hand each other a socket, so no framing fault can give one client's answer to
  another. Proxies are the ``proxy`` option's, else the environment's
  (``HTTP(S)_PROXY`` / ``NO_PROXY``, read as requests reads them).
* :class:`StreamThreads` — each transport reads its response streams on its own
  reusable daemon threads, all ended (bounded join) when the transport closes.
"""

from __future__ import annotations

import os
import queue
import ssl
import threading
import time
import weakref
from typing import Any
from urllib.parse import unquote, urlsplit

import urllib3

from .._errors import ConnectError, ConnectionClosed
from ._fasthttp import FastPoolManager, http_path
from ._http_cookies import Cookies
from ._urllib3_path import POOL_CLASSES, close_manager
from ._http_options import HTTPOptions, log, origin_of
from ._tls import tls_context

class Pools:
    """The two pool managers of one origin, and the cookie jar of the client they serve.

    Attributes:
        main: requests; at most ``pool_size`` connections on the fast path, where a
            caller waits (up to its timeout) for a free one; urllib3's keeps ``pool_size``
            and never blocks (the client's own pool bounds the calls in flight).
        control: long-lived streams (the standalone GET stream, the HTTP+SSE stream),
            replies to server requests, notifications and DELETE. Never blocks, so an
            answer a server waits for is never stuck behind the streams awaiting it.
        cookies: the client's :class:`~._http_cookies.Cookies` (every origin's alike).
        key: what the owner files these pools under.
    """

    __slots__ = ("main", "control", "refs", "fast", "cookies", "key")

    def __init__(self, main: Any, control: Any, cookies: Cookies, key: tuple[Any, ...] = ()) -> None:
        self.main = main  # urllib3's or the fast path's managers
        self.control = control
        self.refs = 0
        #: both are the fast path's (``FastPoolManager.exchange`` takes plain timeouts)
        self.fast = isinstance(main, FastPoolManager)
        self.cookies = cookies
        self.key = key


#: every live owner, told when the process forks (their sockets are the parent's)
_owners: "weakref.WeakSet[ClientConnections]" = weakref.WeakSet()


class ClientConnections:
    """One client's connection pools (per origin) and cookie jar.

    The transport factory of one client makes one of these and hands it to every
    transport it makes (its HTTP+SSE fallback included); a transport made on its own
    makes its own. Sockets, and cookies, never cross from one owner to another.

    Example:
        >>> conns = ClientConnections()
        >>> pools = conns.acquire("http://127.0.0.1:8000/mcp", HTTPOptions())
        >>> pools is conns.acquire("http://127.0.0.1:8000/other", HTTPOptions())
        True
        >>> pools is ClientConnections().acquire("http://127.0.0.1:8000/mcp", HTTPOptions())
        False
        >>> conns.release(pools); conns.release(pools)
    """

    __slots__ = ("_pools", "_lock", "_tls", "cookies", "__weakref__")

    def __init__(self) -> None:
        self._pools: dict[tuple[Any, ...], Pools] = {}
        self._lock = threading.Lock()
        self._tls: dict[Any, ssl.SSLContext] = {}  # one context per (verify, cert): made once
        self.cookies = Cookies()
        _owners.add(self)

    def acquire(self, url: str, opts: HTTPOptions) -> Pools:
        """This client's pools for ``url``'s origin; pair every call with :meth:`release`.

        Raises:
            ConnectError: the TLS settings cannot be loaded (a bundle or certificate that
                cannot be read).
        """
        proxy = opts.proxy or _env_proxy(url)
        key = (origin_of(url), proxy, opts.pool_size, http_path(proxy), opts.verify, opts.cert)
        with self._lock:
            entry = self._pools.get(key)
            if entry is not None:
                entry.refs += 1
                return entry
        tls = self._tls_context(opts) if urlsplit(url).scheme.lower() == "https" else None
        made = Pools(_make_manager(proxy, opts, tls, block=True), _make_manager(proxy, opts, tls, block=False),
                     self.cookies, key)
        with self._lock:
            entry = self._pools.setdefault(key, made)
            entry.refs += 1
        if entry is not made:  # another thread made them first
            made.main.clear()
            made.control.clear()
        return entry

    def release(self, pools: Pools) -> None:
        """Drop one reference to ``pools``; the last one closes their idle connections."""
        with self._lock:
            if self._pools.get(pools.key) is not pools:
                return  # a forked child's stale reference, or released already
            pools.refs -= 1
            if pools.refs > 0:
                return
            del self._pools[pools.key]
        _close(pools.main)
        _close(pools.control)

    def in_use(self) -> list[Pools]:
        """The pools some transport holds now (each origin's once)."""
        with self._lock:
            return list(self._pools.values())

    def _tls_context(self, opts: HTTPOptions) -> ssl.SSLContext:
        key = (opts.verify, opts.cert)
        context = self._tls.get(key)
        if context is None:
            try:
                context = tls_context(opts.verify, opts.cert)
            except (OSError, ValueError) as exc:  # ssl.SSLError is an OSError
                raise ConnectError(f"TLS settings cannot be loaded: {exc}") from exc
            self._tls[key] = context
        return context

    def _after_fork(self) -> None:
        self._pools = {}  # the sockets are the parent's; dropped, never shut down
        self._lock = threading.Lock()


def _close(manager: Any) -> None:
    """Close a manager: its idle sockets, and the ones in use shut down (their calls end now)."""
    if isinstance(manager, FastPoolManager):
        manager.clear()
    else:
        close_manager(manager)


def _env_proxy(url: str) -> str | None:
    import requests.utils  # requests' reading of HTTP(S)_PROXY / NO_PROXY

    proxies = requests.utils.get_environ_proxies(url)
    scheme = urlsplit(url).scheme
    return proxies.get(scheme) or proxies.get("all")


def _make_manager(proxy: str | None, opts: HTTPOptions, tls: ssl.SSLContext | None, *, block: bool) -> Any:
    """A pool manager: the fast path's, or urllib3's where the fast path does not fit (a
    proxy; ``MCPSYNC_HTTP=urllib3``; see :func:`_fasthttp.http_path`). ``tls`` (the
    client's context, for an https origin) is what both verify with."""
    if http_path(proxy) == "fast":
        return FastPoolManager(maxsize=opts.pool_size, block=block, tls=tls)
    kwargs: dict[str, Any] = {
        "num_pools": 4,
        "maxsize": opts.pool_size,
        # never blocking: urllib3 counts its places in a queue that a caller interrupted by
        # a signal can leave short for good; the client's own pool bounds the calls in flight
        "block": False,
        "retries": urllib3.Retry(total=None, connect=1, read=0, redirect=0, status=0, other=0),
    }
    if tls is not None:
        # urllib3 sets the context's verify_mode from cert_reqs, and checks the host
        # itself unless told not to: both as the context says
        kwargs["ssl_context"] = tls
        kwargs["cert_reqs"] = tls.verify_mode
        if not tls.check_hostname:
            kwargs["assert_hostname"] = False
    if proxy:
        parts = urlsplit(proxy)
        headers = None
        if parts.username is not None:  # requests sends a proxy's credentials so too
            headers = urllib3.make_headers(proxy_basic_auth=f"{unquote(parts.username)}:{unquote(parts.password or '')}")
            proxy = parts._replace(netloc=parts.netloc.rpartition("@")[2]).geturl()
        manager: urllib3.PoolManager = urllib3.ProxyManager(proxy, proxy_headers=headers, **kwargs)
    else:
        manager = urllib3.PoolManager(**kwargs)
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
    for owner in list(_owners):
        owner._after_fork()
    for threads in list(_all_threads):
        threads._after_fork()


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_after_fork_in_child)
