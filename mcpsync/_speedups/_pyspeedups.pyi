# Types of the hot-path helpers, for both twins: _pyspeedups.py stays untyped so that
# Cython compiles it unchanged in pure-Python mode (its C types are in _cspeedups.pxd).
from typing import Any, Callable, Mapping

__all__ = ["LineFramer", "FrameTooLarge", "TTLCache", "DEFAULT_MAX_MESSAGE_SIZE", "CallTally", "bucket_index",
           "fold_calls", "CallQueue", "BUCKETS", "FastPath", "EpollSwitch", "IdleGate"]

DEFAULT_MAX_MESSAGE_SIZE: int

class FrameTooLarge(Exception):
    size: int
    limit: int
    head: bytes
    tail: bytes
    def __init__(self, size: int, limit: int, head: bytes, tail: bytes) -> None: ...

class LineFramer:
    max_size: int
    def __init__(self, max_size: int = ...) -> None: ...
    @property
    def buffered(self) -> int: ...
    def pop(self) -> list[bytes]: ...
    def feed(self, data: bytes) -> list[bytes]: ...
    def reset(self) -> None: ...

class TTLCache:
    ttl: float | None
    maxsize: int
    hits: int
    misses: int
    def __init__(self, ttl: float | None = None, maxsize: int = 4096, clock: Callable[[], float] | None = None) -> None: ...
    def get(self, key: Any, default: Any = None) -> Any: ...
    def peek(self, key: Any, default: Any = None) -> Any: ...
    def set(self, key: Any, value: Any, ttl: float | None = None) -> None: ...
    def invalidate(self, key: Any = None) -> int: ...
    def __contains__(self, key: Any) -> bool: ...
    def __len__(self) -> int: ...
    def stats(self) -> dict[str, int]: ...

BUCKETS: int

def bucket_index(v: int) -> int: ...

class CallTally:
    counts: list[int]
    count: int
    total_us: int
    min_us: int
    max_us: int
    successes: int
    errors: int
    timeouts: int
    slots: int
    ring_t: list[int]
    ring_n: list[int]
    first: float | None
    def __init__(self, slots: int) -> None: ...
    def add(self, start: float, end: float, outcome: str, latency: bool = True) -> None: ...
    def numbers(
        self,
    ) -> tuple[list[int], int, int, int, int, int, int, int, list[int], list[int], float | None]: ...

def fold_calls(
    pop: Callable[[], tuple[str, str | None, float, float, str]],
    tallies: Mapping[tuple[str, str | None], CallTally],
    missing: Callable[[str, str | None, float, float, str], None],
) -> int: ...

class CallQueue:
    queue: Any
    batch: int
    drain: Callable[[bool], None]
    tallies: Mapping[tuple[str, str | None], CallTally] | None
    missing: Callable[[str, str | None, float, float, str], None] | None
    def __init__(
        self, queue: Any, batch: int, drain: Callable[[bool], None],
        tallies: Mapping[tuple[str, str | None], CallTally] | None = None,
        missing: Callable[[str, str | None, float, float, str], None] | None = None,
    ) -> None: ...
    def record(self, server: str, tool: str | None, start: float, end: float, outcome: str) -> None: ...

class FastPath:
    def __init__(
        self, breaker: Any, reconnect: Any, record: Callable[[str, str | None, float, float, str], object] | None,
        server: str, clock: Callable[[], float], closed: object, success: str, failed: Callable[[], object],
    ) -> None: ...
    def begin(self) -> float | None: ...
    def succeeded(self, tool: str | None, start: float) -> None: ...

class EpollSwitch:
    def __init__(self, epoll: Any, fd: int) -> None: ...
    def close(self) -> None: ...
    def turn(self, on: bool) -> int: ...

class IdleGate:
    last: float
    paused: bool
    def __init__(self, switch: EpollSwitch | None, grace: float, clock: Callable[[], float]) -> None: ...
    def arrive(self, now: float) -> None: ...
    def leave(self, baton: list[bool]) -> None: ...
