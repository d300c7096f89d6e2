"""The stdio transport's stderr lines: how one is kept and logged, and how many a second
reach the log (the transport's reader thread splits the lines; see ``stdio.py``)."""

from __future__ import annotations

import logging
import time

__all__ = ["STDERR_LINE_MAX", "LogBudget", "line_text"]

#: the longest part of a stderr line kept (bytes)
STDERR_LINE_MAX = 300
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
