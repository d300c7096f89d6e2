"""The :class:`Context` a tool may ask for, on its own so that both the registry and the
server core (:mod:`mcpsync.server._serve`) can import it without importing each other."""

from __future__ import annotations

from typing import Any, Callable, Mapping

__all__ = ["Context"]


class Context:
    """Given to a tool that declares a parameter annotated ``Context`` (or named ``ctx``).

    ``progress(done, total, message)`` reports progress to the caller (a progress
    callback in-process, ``notifications/progress`` over the wire); ``log(level, data)``
    sends a log message.
    """

    __slots__ = ("_progress", "_log", "request_meta")

    def __init__(
        self,
        progress: Callable[[float, float | None, str | None], None] | None = None,
        log: Callable[[str, Any], None] | None = None,
        request_meta: Mapping[str, Any] | None = None,
    ) -> None:
        self._progress = progress
        self._log = log
        self.request_meta = request_meta or {}

    def progress(self, done: float, total: float | None = None, message: str | None = None) -> None:
        if self._progress is not None:
            self._progress(done, total, message)

    def log(self, level: str, data: Any) -> None:
        if self._log is not None:
            self._log(level, data)
