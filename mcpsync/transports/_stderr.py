"""The stdio transport's stderr lines: how one is kept and logged, how many a second
reach the log, and which are kept for the error that says why a server failed (the
transport's reader thread splits the lines; see ``stdio.py``)."""

from __future__ import annotations

import collections
import logging
import os
import re
import select
import time
from typing import IO, Callable

__all__ = ["STDERR_LINE_MAX", "LogBudget", "Tail", "drain", "line_text"]

#: a line that may say why a server failed (npm's ``404 Not Found``, ``npm ERR!``, a
#: Python traceback's last line): kept even once it is older than the last lines
_TELLING = re.compile(r"(?i)error|ERR!|not found")
_TELLING_BYTES = re.compile(rb"(?i)error|ERR!|not found")

#: the longest part of a stderr line kept (bytes)
STDERR_LINE_MAX = 300
#: one read of the stderr pipe
_CHUNK = 65536
#: how often the reader looks whether the transport was closed (no output meanwhile),
#: where close() cannot wake it (no eventfd), and whether lines left out are due a summary
_POLL = 0.2
_monotonic = time.monotonic


def line_text(raw: bytes, size: int) -> str:
    """One stderr line as kept and logged: at most STDERR_LINE_MAX bytes of it, decoded,
    with its length when cut. ``size`` is its whole length (-1: ``len(raw)``)."""
    if size < 0:
        size = len(raw)
    if size > STDERR_LINE_MAX:
        return raw[:STDERR_LINE_MAX].decode("utf-8", "replace") + f"... ({size} bytes)"
    return raw.decode("utf-8", "replace").rstrip("\r")


class LogBudget:
    """At most ``rate`` stderr lines a second reach the log; the rest are counted and
    reported in one line when the second is over (or the stream ends)."""

    __slots__ = ("logger", "rate", "window", "left", "skipped")

    def __init__(self, logger: logging.Logger, rate: int) -> None:
        self.logger = logger
        self.rate = max(int(rate), 0)
        self.window = _monotonic()
        self.left = self.rate
        self.skipped = 0

    def take(self, n: int) -> int:
        """How many of the next ``n`` lines may be logged."""
        self.tick()
        k = n if n <= self.left else self.left
        self.left -= k
        self.skipped += n - k
        return k

    def tick(self, final: bool = False) -> None:
        now = _monotonic()
        if final or now - self.window >= 1.0:
            if self.skipped:
                self.logger.info("... %d more stderr lines not logged (over %d a second)", self.skipped, self.rate)
                self.skipped = 0
            self.window = now
            self.left = self.rate


class Tail:
    """The stderr lines kept for error messages: the last ``keep`` ones, and up to
    ``telling`` older ones that look like a failure's reason (:data:`_TELLING`).

    Example:
        >>> t = Tail(keep=2)
        >>> for line in ["npm ERR! 404 Not Found - foo", "a", "b", "c"]:
        ...     t.append(line)
        >>> t.lines()
        ['npm ERR! 404 Not Found - foo', 'b', 'c']
    """

    __slots__ = ("last", "telling")

    def __init__(self, keep: int = 20, telling: int = 10) -> None:
        self.last: collections.deque[str] = collections.deque(maxlen=keep)
        self.telling: collections.deque[str] = collections.deque(maxlen=telling)

    def append(self, text: str) -> None:
        last = self.last
        if len(last) == last.maxlen and _TELLING.search(last[0]):
            self.telling.append(last[0])  # about to fall out of the last lines
        last.append(text)

    def passed(self, raw: bytes, size: int = -1) -> None:
        """A line that goes straight past the last lines (more came in the same read):
        kept only when it is telling."""
        if _TELLING_BYTES.search(raw, 0, STDERR_LINE_MAX):
            self.telling.append(line_text(raw, size))

    def lines(self) -> list[str]:
        """The telling older lines, then the last lines, oldest first."""
        return [*self.telling, *self.last]

    def summary(self, last: int) -> str:
        """The telling older lines and the ``last`` newest, joined for a message."""
        return " | ".join([*self.telling, *list(self.last)[-last:]] if last else self.telling)

    def __bool__(self) -> bool:
        return bool(self.last)


def drain(stream: IO[bytes], logger: logging.Logger, rate: int, tail: Tail, wake: int, stopping: Callable[[], float]) -> None:
    """Read a server's stderr until EOF, or until the transport closes: ``stopping()``
    turns non-zero (a ``time.monotonic()`` instant) and ``wake`` (an eventfd, or -1) is
    written; lines still coming then are read until that instant (a grandchild may hold
    the pipe). The stream is closed on the way out: the calling thread owns it.

    Bulk reads (a pipe read per 64 KiB, not per byte), lines split here. Only the lines
    that are logged (at most ``rate`` a second) or kept in ``tail`` are decoded; a line's
    first STDERR_LINE_MAX bytes are kept, so one endless line costs no memory.
    """
    budget = LogBudget(logger, rate)
    keep = tail.last.maxlen or 0
    limit = STDERR_LINE_MAX
    head = b""  # the start of the line not yet ended (at most `limit` bytes)
    head_size = 0  # that line's whole length so far
    try:
        fd = stream.fileno()
        poller = select.poll()
        poller.register(fd, select.POLLIN)
        if wake >= 0:  # no idle polls while the server is quiet
            poller.register(wake, select.POLLIN)
        while True:
            events = poller.poll(None if wake >= 0 and not budget.skipped else _POLL * 1000.0)
            if not events or (len(events) == 1 and events[0][0] == wake):
                budget.tick()
                if stopping():
                    break
                continue
            try:
                chunk = os.read(fd, _CHUNK)
            except InterruptedError:
                continue
            if not chunk:
                break
            stop = stopping()
            if stop and _monotonic() > stop:
                break
            lines = chunk.split(b"\n")
            rest = lines.pop()  # after the last newline: the start of the next line
            n = len(lines)
            if n:
                first = lines[0]
                first_size = head_size + len(first)
                if head_size:
                    lines[0] = head + first[: max(limit - len(head), 0)]
                    head, head_size = b"", 0
                logged = budget.take(n) if logger.isEnabledFor(logging.INFO) else 0
                for i in range(logged):
                    logger.info("%s", line_text(lines[i], first_size if i == 0 else -1))
                for i in range(n - keep):  # (more lines than are kept came in this read)
                    tail.passed(lines[i], first_size if i == 0 else -1)
                for i in range(max(n - keep, 0), n):
                    tail.append(line_text(lines[i], first_size if i == 0 else -1))
            if rest:
                if len(head) < limit:
                    head += rest[: limit - len(head)]
                head_size += len(rest)
        if head_size:  # a last line without its newline
            text = line_text(head, head_size)
            tail.append(text)
            if logger.isEnabledFor(logging.INFO) and budget.take(1):
                logger.info("%s", text)
        budget.tick(final=True)
    except (OSError, ValueError):
        pass
    finally:
        try:
            stream.close()
        except OSError:
            pass
