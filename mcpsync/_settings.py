"""What a Client was built with, and what its parts are given instead of the Client.

:class:`Settings` is the frozen record of a Client's construction-time choices (name,
era mode, timeouts, retry, breaker, pool, client info, the cache credential, push
updates and the extensions it declares). ``Client.__init__`` makes it once and hands it
to every part that reads a setting; nothing changes it afterwards.

:class:`InPart` is a Client attribute that may change on a live client and lives in the
part that uses it.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Generic, Literal, Mapping, TypeVar, overload

from ._errors import ProfileError
from ._policies import BreakerPolicy, PoolLimits, RetryPolicy, Timeouts

__all__ = ["Mode", "Settings", "Setting", "InPart"]

T = TypeVar("T")

Mode = Literal["auto", "modern", "legacy"]


@dataclass(frozen=True, slots=True)
class Settings:
    """A Client's construction-time settings (see :class:`~mcpsync.Client` for each).

    Args:
        name: the server's name in logs and errors.
        mode: ``"auto"``, ``"modern"`` or ``"legacy"``.
        timeouts: the timeout layers.
        retry: the call retry policy.
        breaker: the circuit breaker policy.
        pool: the connection pool's limits.
        client_info: the ``clientInfo`` this client reports.
        credential: the authorization context ``private`` cache entries are keyed by
            (``"anonymous"`` when None).
        push_updates: False refuses ``subscribe``.
        extensions: the extensions declared in the client capabilities (identifier → settings).
    """

    name: str = "server"
    mode: Mode = "auto"
    timeouts: Timeouts = Timeouts.DEFAULT
    retry: RetryPolicy = RetryPolicy.DEFAULT
    breaker: BreakerPolicy = BreakerPolicy.DEFAULT
    pool: PoolLimits = PoolLimits.SESSION
    client_info: Mapping[str, Any] = field(default_factory=dict)
    credential: Any = None
    push_updates: bool = True
    extensions: Mapping[str, Mapping[str, Any]] = field(default_factory=dict)

    def __post_init__(self) -> None:
        if self.mode not in ("auto", "modern", "legacy"):
            raise ValueError(f"mode must be 'auto', 'modern' or 'legacy', not {self.mode!r}")

    def need_lasting_session(self, what: str) -> None:
        """Raise :class:`~mcpsync.ProfileError` when a connection lasts one call
        (``pool.per_call``, the ``"minimal"`` profile): ``what`` needs one that outlives it."""
        if self.pool.per_call:
            raise ProfileError(
                f"{what} needs a session that outlives one call; this client starts a connection (a process) per "
                "call (use profile='professional', or a pool without per_call)"
            )


class InPart(Generic[T]):
    """A Client attribute kept by one of its parts: read and written there, so the part that
    uses it owns it (``sampling_handler = InPart("_handlers")``: ``client.sampling_handler``
    is ``client._handlers.sampling_handler``)."""

    def __init__(self, part: str) -> None:
        self.part = part
        self.name = ""

    def __set_name__(self, owner: type, name: str) -> None:
        self.name = name

    @overload
    def __get__(self, obj: None, objtype: Any = None) -> "InPart[T]": ...

    @overload
    def __get__(self, obj: object, objtype: Any = None) -> T: ...

    def __get__(self, obj: object | None, objtype: Any = None) -> "T | InPart[T]":
        if obj is None:
            return self
        value: T = getattr(getattr(obj, self.part), self.name)
        return value

    def __set__(self, obj: object, value: T) -> None:
        setattr(getattr(obj, self.part), self.name, value)


class Setting(Generic[T]):
    """A Client attribute read from its :class:`Settings`, read-only: a client keeps the
    policies it was built with."""

    def __init__(self) -> None:
        self.name = ""

    def __set_name__(self, owner: type, name: str) -> None:
        self.name = name

    @overload
    def __get__(self, obj: None, objtype: Any = None) -> "Setting[T]": ...

    @overload
    def __get__(self, obj: object, objtype: Any = None) -> T: ...

    def __get__(self, obj: object | None, objtype: Any = None) -> "T | Setting[T]":
        if obj is None:
            return self
        value: T = getattr(getattr(obj, "settings"), self.name)
        return value

    def __set__(self, obj: object, value: T) -> None:
        raise AttributeError(
            f"Client.{self.name} is read-only: a client keeps the policies it was built with; "
            f"build another client with {self.name}=... (e.g. Client.stdio(..., {self.name}=...))"
        )
