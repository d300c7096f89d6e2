"""Where user callbacks run: never on a connection's reader.

:class:`Worker` has an ordered lane (one thread: notifications, progress and resource
updates arrive in the order the server sent them) and a small pool for server→client
requests (a sampling or elicitation handler may block, and may call the client again).
Threads are daemons, started lazily and stopped by :meth:`Worker.close`; an exception
in a callback is logged and harms nothing else.
"""

from __future__ import annotations

import logging
import queue
import threading
from typing import Any, Callable

__all__ = ["Worker"]

log = logging.getLogger("mcpsync.worker")

_STOP = object()


class Worker:
    """Runs callbacks off the reader thread.

    Args:
        name: used in thread names.
        max_threads: size of the request pool.
    """

    def __init__(self, name: str = "mcpsync", max_threads: int = 4) -> None:
        self.name = name
        self.max_threads = max_threads
        self._lock = threading.Lock()
        self._serial: queue.SimpleQueue[Any] = queue.SimpleQueue()
        self._serial_thread: threading.Thread | None = None
        self._pool: queue.SimpleQueue[Any] = queue.SimpleQueue()
        self._pool_threads: list[threading.Thread] = []
        self._idle = 0
        self._closed = False

    def serial(self, fn: Callable[..., Any], *args: Any) -> None:
        """Run ``fn(*args)`` on the ordered lane."""
        with self._lock:
            if self._closed:
                return
            if self._serial_thread is None:
                t = threading.Thread(target=self._run, args=(self._serial, False), name=f"{self.name}-events", daemon=True)
                self._serial_thread = t
                t.start()
        self._serial.put((fn, args))

    def on_serial_lane(self) -> bool:
        """True on the thread that runs :meth:`serial` work (notifications, in order)."""
        return self._serial_thread is threading.current_thread()

    def submit(self, fn: Callable[..., Any], *args: Any) -> None:
        """Run ``fn(*args)`` on the pool (a new thread is started while none is idle)."""
        with self._lock:
            if self._closed:
                return
            if self._idle == 0 and len(self._pool_threads) < self.max_threads:
                t = threading.Thread(
                    target=self._run, args=(self._pool, True), name=f"{self.name}-handler-{len(self._pool_threads)}", daemon=True
                )
                self._pool_threads.append(t)
                t.start()
            elif self._idle:
                self._idle -= 1  # an idle thread will take this item
        self._pool.put((fn, args))

    def _run(self, q: "queue.SimpleQueue[Any]", pooled: bool) -> None:
        while True:
            item = q.get()
            if item is _STOP:
                return
            fn, args = item
            try:
                fn(*args)
            except Exception:
                log.exception("callback %r raised", getattr(fn, "__qualname__", fn))
            if pooled:
                with self._lock:
                    self._idle += 1

    def close(self, timeout: float = 1.0) -> None:
        """Stop the threads after the work already queued (waits at most ``timeout``)."""
        with self._lock:
            if self._closed:
                return
            self._closed = True
            threads = list(self._pool_threads)
            serial = self._serial_thread
        for _ in threads:
            self._pool.put(_STOP)
        if serial is not None:
            self._serial.put(_STOP)
        me = threading.current_thread()
        for t in [*threads, *([serial] if serial else [])]:
            if t is not me:
                t.join(timeout)
