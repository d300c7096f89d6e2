"""The hand-over from a transport's reader thread to ``receive``: messages in order, then
one end mark that stays, so that every later ``receive`` sees the end too.

Used by the transports whose messages arrive on a thread of their own (WebSocket, gRPC);
each words its own end-of-stream error.
"""

from __future__ import annotations

import queue
from typing import Any

__all__ = ["ENDED", "Inbox"]

#: what :meth:`Inbox.take` returns once the stream has ended
ENDED: Any = object()


class Inbox:
    """A queue of received messages with a sticky end.

    ``put`` (the reader thread) adds a message; ``end`` marks the end (idempotent in
    effect: later takes see :data:`ENDED` whether it was marked once or more).
    """

    __slots__ = ("_queue", "put")

    def __init__(self) -> None:
        self._queue: queue.SimpleQueue[Any] = queue.SimpleQueue()
        #: add one message (the reader thread's hot path: the queue's own method)
        self.put = self._queue.put

    def end(self) -> None:
        """Mark the end of the stream; wakes a ``take`` waiting on an empty inbox."""
        self._queue.put(ENDED)

    def empty(self) -> bool:
        return self._queue.empty()

    def take(self, timeout: float | None) -> Any:
        """The next message, None after ``timeout`` (0 or less: do not wait), or
        :data:`ENDED` once the stream has ended (and on every call after that)."""
        try:
            if timeout is not None and timeout <= 0:
                item = self._queue.get_nowait()
            else:
                item = self._queue.get(timeout=timeout)
        except queue.Empty:
            return None
        if item is ENDED:
            self._queue.put(ENDED)  # leave the mark for every later take
        return item
