"""Policies are values: frozen dataclasses with a ``DEFAULT``, changed with ``replace()``.

Example:
    >>> from dataclasses import replace
    >>> from mcpsync import Timeouts
    >>> fast = replace(Timeouts.DEFAULT, request=5.0)
    >>> fast.request, fast.connect
    (5.0, 10.0)
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import ClassVar

__all__ = ["Timeouts", "RetryPolicy", "BreakerPolicy", "PoolLimits", "replace"]


@dataclass(frozen=True, slots=True)
class Timeouts:
    """The three timeout layers of SPEC.md, in seconds.

    Attributes:
        connect: process start or TCP connect plus the MCP handshake (retried once).
        request: one request, server time included; on expiry the server is told to cancel.
        idle: a pooled connection idle longer than this is closed.
        keepalive: interval of the keepalive ping on long-lived connections.
        close: how long ``close()`` waits for a child to exit before each escalation.
        progress_cap: hard cap for calls whose timer is reset by progress notifications
            (``None``: ten times ``request``).
    """

    connect: float = 10.0
    request: float = 30.0
    idle: float = 300.0
    keepalive: float = 60.0
    close: float = 2.0
    progress_cap: float | None = None
    DEFAULT: ClassVar["Timeouts"]

    def __post_init__(self) -> None:
        for name in ("connect", "request", "idle", "keepalive", "close"):
            if getattr(self, name) <= 0:
                raise ValueError(f"Timeouts.{name} must be positive")


Timeouts.DEFAULT = Timeouts()


@dataclass(frozen=True, slots=True)
class RetryPolicy:
    """Call retries: immediately, then ``backoff`` × 2ⁿ⁻¹ seconds, with ±``jitter``.

    Attributes:
        retries: retries after the first attempt (at most).
        backoff: the first non-immediate wait.
        max_wait: total seconds of waiting across all retries (at most).
        jitter: relative jitter applied to every wait (0.25 → ±25 %).
        history: the attempts made so far, as (error class name, waited seconds) pairs.
    """

    retries: int = 5
    backoff: float = 1.0
    max_wait: float = 30.0
    jitter: float = 0.25
    fixed: bool = False
    history: tuple[tuple[str, float], ...] = field(default=(), compare=False)
    DEFAULT: ClassVar["RetryPolicy"]
    NONE: ClassVar["RetryPolicy"]

    def base_delay(self, retry_number: int) -> float:
        """The un-jittered wait before retry ``retry_number`` (1-based)."""
        if self.fixed:
            return self.backoff
        if retry_number <= 1:
            return 0.0
        return self.backoff * (2 ** (retry_number - 2))


RetryPolicy.DEFAULT = RetryPolicy()
RetryPolicy.NONE = RetryPolicy(retries=0)


@dataclass(frozen=True, slots=True)
class BreakerPolicy:
    """Circuit breaker: ``threshold`` failures within ``window`` s open it for ``cooldown`` s;
    then at most ``half_open_max`` trial calls decide between closing and reopening."""

    threshold: int = 5
    window: float = 60.0
    cooldown: float = 30.0
    half_open_max: int = 3
    enabled: bool = True
    DEFAULT: ClassVar["BreakerPolicy"]
    DISABLED: ClassVar["BreakerPolicy"]


BreakerPolicy.DEFAULT = BreakerPolicy()
BreakerPolicy.DISABLED = BreakerPolicy(enabled=False)


@dataclass(frozen=True, slots=True)
class PoolLimits:
    """Connections per server address.

    Attributes:
        min: connections kept open (and kept alive) once the pool is in use.
        max: connections at most.
        max_in_flight: concurrent calls per connection before another one is opened.
        borrow_timeout: how long a call waits for a connection (``None``: request timeout).
        idle: idle connections above ``min`` are closed after this many seconds.
    """

    min: int = 2
    max: int = 10
    max_in_flight: int = 16
    borrow_timeout: float | None = None
    idle: float = 300.0
    DEFAULT: ClassVar["PoolLimits"]
    SINGLE: ClassVar["PoolLimits"]

    def __post_init__(self) -> None:
        if self.min < 0 or self.max < 1 or self.min > self.max:
            raise ValueError("PoolLimits needs 0 <= min <= max and max >= 1")


PoolLimits.DEFAULT = PoolLimits()
PoolLimits.SINGLE = PoolLimits(min=1, max=1)
