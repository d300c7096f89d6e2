"""Where user callbacks run: never on a connection's reader.

:class:`Worker` has an ordered lane (one thread: notifications, progress and resource
updates arrive in the order the server sent them) and a small pool for server→client
requests (a sampling or elicitation handler may block, and may call the client again).
Threads are daemons, started lazily and stopped by :meth:`Worker.close`; an exception
in a callback is logged and harms nothing else.

The lane is bounded: at most :attr:`Worker.lane_limit` events wait (10,000 by default).
When a server sends faster than the callbacks run, the oldest waiting event is dropped
for each new one, counted (:attr:`Worker.dropped`, in ``Client.diagnostics()``) and
warned about (a warning at the first drop, then one a minute with the count): memory stays
flat and the reader never waits, so answers to calls are not held up behind the backlog.
(What the client itself keeps up to date from notifications, its caches, it does as they
are read, not on the lane: see ``Dispatcher.set_handlers``.) :meth:`Worker.close` drops
what still waits and returns once the event being handled, if any, is done (bounded):
nothing is delivered after it returns.
"""

from __future__ import annotations

import collections
import logging
import queue
import threading
import time
from typing import Any, Callable

__all__ = ["Worker", "LANE_LIMIT"]

log = logging.getLogger("mcpsync.worker")

_STOP = object()

#: Events the ordered lane holds at most by default (see the module's docstring).
LANE_LIMIT = 10_000
#: events the lane thread takes at once (the lane holds at most this many more meanwhile)
_BATCH = 64
#: Seconds between two warnings about dropped events.
_WARN_EVERY = 60.0


class Worker:
    """Runs callbacks off the reader thread.

    Args:
        name: used in thread names.
        max_threads: size of the request pool.
        lane_limit: events the ordered lane holds at most (the oldest goes first).
    """

    def __init__(self, name: str = "mcpsync", max_threads: int = 4, lane_limit: int = LANE_LIMIT) -> None:
        self.name = name
        self.max_threads = max_threads
        self.lane_limit = lane_limit
        #: events the lane dropped (oldest first) because it was full
        self.dropped = 0
        self._lock = threading.Lock()
        self._lane: collections.deque[tuple[Callable[..., Any], tuple[Any, ...]]] = collections.deque()
        self._ready = threading.Condition(self._lock)
        self._serial_thread: threading.Thread | None = None
        self._running = False  # the lane thread is inside a callback
        self._asleep = False  # the lane thread waits for an event
        self._pool: queue.SimpleQueue[Any] = queue.SimpleQueue()
        self._pool_threads: list[threading.Thread] = []
        self._idle = 0
        self._closed = False
        self._warned = 0.0  # monotonic time of the last warning about drops

    def serial(self, fn: Callable[..., Any], *args: Any) -> None:
        """Run ``fn(*args)`` on the ordered lane (dropping the oldest event when it is full)."""
        with self._lock:
            if self._closed:
                return
            lane = self._lane
            behind = len(lane)
            if behind >= self.lane_limit:
                lane.popleft()
                self.dropped += 1
                self._warn_dropped()
            lane.append((fn, args))
            if self._serial_thread is None:
                t = threading.Thread(target=self._run_lane, name=f"{self.name}-events", daemon=True)
                self._serial_thread = t
                t.start()
            elif self._asleep:
                self._asleep = False
                self._ready.notify()
        if behind >= self.lane_limit >> 2:
            # a quarter full: the callbacks fall behind (a burst, or slow ones). Give them the
            # interpreter after each event (the GIL goes to a thread waiting for it): quick
            # callbacks then keep up and a burst is delivered whole; slow ones still lose the
            # oldest, counted, and nothing blocks the reader
            time.sleep(0)

    def _warn_dropped(self) -> None:  # under _lock
        now = time.monotonic()
        if self.dropped == 1 or now - self._warned >= _WARN_EVERY:
            self._warned = now
            log.warning("%s: events are coming faster than their callbacks run: %d dropped so far (the oldest "
                        "first; the lane holds %d)", self.name, self.dropped, self.lane_limit)

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

    def _run_lane(self) -> None:
        lane, ready = self._lane, self._ready
        popleft = lane.popleft
        batch: list[tuple[Callable[..., Any], tuple[Any, ...]]] = []
        while True:
            with self._lock:
                self._running = False
                while not lane and not self._closed:
                    self._asleep = True
                    ready.wait()
                if self._closed:
                    ready.notify_all()  # (close() waits for the callback that just ended)
                    return
                # up to _BATCH events for one turn of the lock: under a burst the lane keeps
                # up with a reader that frames and queues each event for less than this
                # thread takes to run it (the lane's bound grows by the batch at most)
                for _ in range(min(len(lane), _BATCH)):
                    batch.append(popleft())
                self._running = True
            self._run_batch(batch)
            batch.clear()  # (a waiting thread holds no callback: it would keep its client alive)

    def _run_batch(self, batch: list[tuple[Callable[..., Any], tuple[Any, ...]]]) -> None:
        for fn, args in batch:
            if self._closed:  # close() waits for this callback; then nothing more runs
                return
            try:
                fn(*args)
            except Exception:
                log.exception("callback %r raised", getattr(fn, "__qualname__", fn))

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
            del fn, args, item  # (as in _run_lane)
            if pooled:
                with self._lock:
                    self._idle += 1

    def close(self, timeout: float = 1.0) -> None:
        """Stop the threads: events still waiting on the lane are dropped, and this returns
        once the one being handled is done (waits at most ``timeout``); requests already
        given to the pool still run."""
        with self._lock:
            if self._closed:
                return
            self._closed = True
            self._lane.clear()
            threads = list(self._pool_threads)
            serial = self._serial_thread
            self._ready.notify_all()
            me = threading.current_thread()
            if serial is not None and serial is not me:
                self._ready.wait_for(lambda: not self._running, timeout)
        for _ in threads:
            self._pool.put(_STOP)
        for t in [*threads, *([serial] if serial else [])]:
            if t is not me:
                t.join(timeout)
