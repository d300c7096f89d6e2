# Types of the Streamable HTTP transport's JSON lane, for both twins: _pyhttp.py stays untyped
# so that Cython compiles it unchanged in pure-Python mode (its C types are in _chttp.pxd).
from typing import Any, Callable

from .._channel import MessageFacts

__all__ = ["JSONLane", "simple_answer", "facts_of"]

def simple_answer(data: bytes) -> bytes | None: ...

class JSONLane:
    open: bool
    legacy: tuple[Any, ...] | None
    succeeded: bool
    def __init__(
        self,
        exchange: Any,
        options: Any,
        put: Callable[[Any], None],
        kinds: dict[str, str],
        remember: Callable[[str, str], None],
        blocks: dict[tuple[Any, ...], Any],
        general: Callable[..., None],
        answered: Callable[..., None],
        delivered: Callable[..., None],
        resume: Callable[..., Any],
        auth_failed: Callable[[Exception, str], Any],
        auth_merge: Callable[..., Any],
        wire_of: Callable[[Any], tuple[bytes, bool]],
        first: list[Any],
        take: Callable[[bool, float | None], Any],
        waiting: Callable[[float | None], bool],
    ) -> None: ...
    def wait_first(self, timeout: float | None) -> bool: ...
    def send(self, message: bytes, timeout: float | None = None, facts: MessageFacts | None = None) -> None: ...

def facts_of(
    facts_type: Any, safe_methods: frozenset[str], name_keys: dict[str, str], meta_version: str, mapping: type
) -> Any: ...
