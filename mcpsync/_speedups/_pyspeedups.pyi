# Types of the hot-path helpers, for both twins: _pyspeedups.py stays untyped so that
# Cython compiles it unchanged in pure-Python mode (its C types are in _cspeedups.pxd).
from typing import Any, Callable, Iterator, Mapping

__all__ = ["TTLCache", "Histogram", "CallTally", "bucket_index", "fold_calls", "CallQueue", "BUCKETS", "Gate", "FastPath",
           "CallAnswer", "IdleReturn"]

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

class Histogram:
    counts: list[int]
    count: int
    total_us: int
    min_us: int
    max_us: int
    def __init__(self) -> None: ...
    def record_us(self, v: int) -> None: ...

class CallTally(Histogram):
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
    def forget(self) -> None: ...
    def record(self, server: str, tool: str | None, start: float, end: float, outcome: str) -> None: ...

class Gate:
    shut: bool
    def __init__(self) -> None: ...

class FastPath:
    def __init__(
        self, breaker_gate: Gate, reconnect_gate: Gate, ok: Iterator[int], mark: Callable[[], object],
        record: Callable[[str, str | None, float, float, str], object] | None,
        server: str, clock: Callable[[], float], success: str, failed: Callable[[], object],
    ) -> None: ...
    def begin(self) -> float | None: ...
    def succeeded(self, tool: str | None, start: float) -> None: ...

class CallAnswer:
    def __init__(self, decode: Callable[[bytes], Any], start: bytes, errors: tuple[type[BaseException], ...]) -> None: ...
    def take(self, data: Any) -> Any: ...

class IdleReturn:
    def __init__(
        self, clock: Callable[[], float], returned: Iterator[int], waiters: Any, settle: Callable[[Any, bool], object]
    ) -> None: ...
    def give_back(self, entry: Any, broken: bool = False) -> None: ...
