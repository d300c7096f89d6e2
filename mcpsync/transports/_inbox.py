"""The hand-over from a transport's reader thread to the dispatcher's reader: messages in
order, then one end mark that stays, so that every later read sees the end too.

Used by the transports whose messages arrive on a thread of their own (WebSocket, gRPC,
HTTP+SSE, in-process); each words its own end-of-stream error. The reader takes the next
message into a list of one (:attr:`Inbox.first`, the transport's ``next_message``) with
no point between the take and the keeping where CPython runs a signal handler
(:func:`take_into`), and takes it out of that list itself: a Ctrl-C that comes meanwhile
leaves it there for the next reader. (A message returned through a call can be lost:
CPython runs signal handlers right after a call returns, before its value is stored.)
"""

from __future__ import annotations

import queue
from typing import Any, Callable

__all__ = ["ENDED", "Inbox", "take_into"]

#: what :meth:`Inbox.fill` leaves in ``first`` once the stream has ended (for good)
ENDED: Any = object()


def take_into(box: list[Any], get: Callable[[bool, float | None], Any], block: bool, timeout: float | None) -> None:
    """``box[0] = get(block, timeout)`` (a queue's C ``get``), with no point between the take
    and the keeping where a signal handler runs: ``map`` makes the call and ``for`` stores
    its value straight into the box (neither FOR_ITER nor STORE_SUBSCR runs handlers).
    Raises what ``get`` raises (``queue.Empty``; a handler's exception while it waits,
    before anything was taken), the box then unchanged."""
    for box[0] in map(get, (block,), (timeout,)):
        break


class Inbox:
    """A queue of received messages with a sticky end.

    ``put`` (the reader thread) adds a message; ``end`` marks the end (idempotent in
    effect: the mark, once first, stays there). ``fill`` moves the next message into
    ``first``; the reader takes it from there (``data = first[0]; first[0] = None``, no
    call between) unless it is :data:`ENDED`.
    """

    __slots__ = ("_queue", "put", "first")

    def __init__(self) -> None:
        self._queue: queue.SimpleQueue[Any] = queue.SimpleQueue()
        #: add one message (the reader thread's hot path: the queue's own method)
        self.put = self._queue.put
        #: the next message, or None (see the class)
        self.first: list[Any] = [None]

    def end(self) -> None:
        """Mark the end of the stream; wakes a ``fill`` waiting on an empty inbox."""
        self._queue.put(ENDED)

    def empty(self) -> bool:
        return self.first[0] is None and self._queue.empty()

    def fill(self, timeout: float | None) -> bool:
        """Wait up to ``timeout`` s (0 or less: do not wait; None: no bound) for a message in
        ``first`` (True; one there already counts), or False when none came. Once the
        stream has ended, :data:`ENDED` is in ``first`` (and stays: True every time)."""
        first = self.first
        if first[0] is not None:
            return True
        try:
            if timeout is not None and timeout <= 0:
                take_into(first, self._queue.get, False, None)
            else:
                take_into(first, self._queue.get, True, timeout)
        except queue.Empty:
            return False
        return True
