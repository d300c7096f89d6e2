"""Scale profiles: ``profile="minimal" | "professional" | "enterprise"`` presets (SPEC.md).

A profile is a bundle of Client keyword options (``timeouts``, ``retry``, ``breaker``,
``pool``) plus flags for the features that are switched on or off as a whole
(``process_per_call``, ``allowed_transports``, ``subscriptions``, ``tool_cache``,
``oauth``, ``metrics``, ``routing``, ``adaptive_pool``). Any single setting is
overridden by passing it::

    profile_options("minimal", retry=RetryPolicy.NONE)

=================  =====================  ============================  ==============================
setting            minimal                professional                  enterprise
=================  =====================  ============================  ==============================
transports         stdio                  stdio, http, sse              all six
connections        a process per call     pool 2-5                      adaptive pool 2-10
retries            3, fixed 1 s           5, backoff up to 30 s         5, backoff up to 30 s
circuit breaker    off                    on (5 in 60 s, 30 s)          on (5 in 60 s, 30 s)
subscriptions      none                   discover/subscribe/read       push (list_changed, updated)
tool cache         none                   session memory                three levels
OAuth              none                   authorization code            code + PKCE + refresh + keyring
metrics / routing  off / off              off / off                     on / on
=================  =====================  ============================  ==============================

Example:
    >>> opts = profile_options("minimal")
    >>> opts["process_per_call"], opts["retry"].retries, opts["retry"].fixed, opts["breaker"].enabled
    (True, 3, True, False)
    >>> profile_options("professional", pool=PoolLimits(min=1, max=3))["pool"].max
    3
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Mapping

from ._errors import ProfileError
from ._policies import BreakerPolicy, PoolLimits, RetryPolicy, Timeouts
from .transports._factory import TRANSPORT_OPTIONS

__all__ = [
    "PROFILES",
    "PROFILE_FLAGS",
    "ALL_TRANSPORTS",
    "Profile",
    "ProfileError",
    "profile_options",
    "split_options",
    "check_transport",
    "resolve",
    "CLIENT_OPTIONS",
]

#: Every transport mcpsync has.
ALL_TRANSPORTS: frozenset[str] = frozenset({"stdio", "http", "sse", "websocket", "grpc", "local"})

#: Option names that are profile flags, not :class:`~mcpsync.Client` keyword options.
PROFILE_FLAGS: tuple[str, ...] = (
    "process_per_call",
    "allowed_transports",
    "adaptive_pool",
    "subscriptions",
    "tool_cache",
    "oauth",
    "metrics",
    "routing",
)


@dataclass(frozen=True, slots=True)
class Profile:
    """One preset. Values, like the policies: change one with ``dataclasses.replace``.

    Attributes:
        name: ``"minimal"``, ``"professional"`` or ``"enterprise"``.
        timeouts: the timeout layers.
        retry: call retries.
        breaker: the circuit breaker (``BreakerPolicy.DISABLED`` for none).
        pool: connection pool limits.
        process_per_call: every call starts its own server process (its own connection)
            and ends it: the Client gets ``PoolLimits.PER_CALL`` (see :func:`resolve`).
        allowed_transports: the transports servers may use.
        adaptive_pool: the pool grows and shrinks between ``pool.min`` and ``pool.max``.
        subscriptions: ``"none"``, ``"poll"`` (discover → subscribe → read, no push) or
            ``"push"`` (server update notifications).
        tool_cache: ``"none"``, ``"session"`` (tools/list once per session) or
            ``"three-level"`` (memory, session, rediscovery on list_changed / reconnect).
        oauth: ``"none"``, ``"authorization-code"`` or ``"pkce-refresh-keyring"``.
        metrics: per-server metrics (QPS, P50/P99, error rate, cache hit rate).
        routing: multi-region routing (the nearest server node).
    """

    name: str
    timeouts: Timeouts = Timeouts.DEFAULT
    retry: RetryPolicy = RetryPolicy.DEFAULT
    breaker: BreakerPolicy = BreakerPolicy.DEFAULT
    pool: PoolLimits = PoolLimits.DEFAULT
    process_per_call: bool = False
    allowed_transports: frozenset[str] = field(default=ALL_TRANSPORTS)
    adaptive_pool: bool = True
    subscriptions: str = "push"
    tool_cache: str = "three-level"
    oauth: str = "pkce-refresh-keyring"
    metrics: bool = True
    routing: bool = True

    def options(self) -> dict[str, Any]:
        """Client keyword options and flags, as :func:`profile_options` returns them."""
        return {
            "timeouts": self.timeouts,
            "retry": self.retry,
            "breaker": self.breaker,
            "pool": self.pool,
            "process_per_call": self.process_per_call,
            "allowed_transports": self.allowed_transports,
            "adaptive_pool": self.adaptive_pool,
            "subscriptions": self.subscriptions,
            "tool_cache": self.tool_cache,
            "oauth": self.oauth,
            "metrics": self.metrics,
            "routing": self.routing,
        }


#: The three presets of SPEC.md's "Scale profiles".
PROFILES: dict[str, Profile] = {
    "minimal": Profile(
        name="minimal",
        # SPEC.md: "3 fixed-interval retries"; each retry starts a fresh process
        retry=RetryPolicy(retries=3, fixed=True, backoff=1.0, jitter=0.0),
        breaker=BreakerPolicy.DISABLED,
        # a process per call: a pool that keeps no connection (see resolve)
        pool=PoolLimits.PER_CALL,
        process_per_call=True,
        allowed_transports=frozenset({"stdio"}),
        adaptive_pool=False,
        subscriptions="none",
        tool_cache="none",
        oauth="none",
        metrics=False,
        routing=False,
    ),
    "professional": Profile(
        name="professional",
        retry=RetryPolicy(retries=5, backoff=1.0, max_wait=30.0, jitter=0.25),
        # SPEC.md is silent on the breaker here; a production client keeps it on
        breaker=BreakerPolicy.DEFAULT,
        pool=PoolLimits(min=2, max=5),
        allowed_transports=frozenset({"stdio", "http", "sse"}),
        adaptive_pool=False,
        subscriptions="poll",
        tool_cache="session",
        oauth="authorization-code",
        metrics=False,
        routing=False,
    ),
    "enterprise": Profile(
        name="enterprise",
        retry=RetryPolicy(retries=5, backoff=1.0, max_wait=30.0, jitter=0.25),
        breaker=BreakerPolicy.DEFAULT,
        pool=PoolLimits(min=2, max=10),
        allowed_transports=ALL_TRANSPORTS,
        adaptive_pool=True,
        subscriptions="push",
        tool_cache="three-level",
        oauth="pkce-refresh-keyring",
        metrics=True,
        routing=True,
    ),
}

_CHOICES = {
    "subscriptions": ("none", "poll", "push"),
    "tool_cache": ("none", "session", "three-level"),
    "oauth": ("none", "authorization-code", "pkce-refresh-keyring"),
}


def _get(name: str | Profile) -> Profile:
    if isinstance(name, Profile):
        return name
    profile = PROFILES.get(name) if isinstance(name, str) else None
    if profile is None:
        raise ProfileError(f"unknown profile {name!r}: expected one of {', '.join(repr(p) for p in PROFILES)}")
    return profile


def profile_options(name: str | Profile, /, **overrides: Any) -> dict[str, Any]:
    """The Client keyword options and flags of a profile, with ``overrides`` applied.

    Args:
        name: ``"minimal"``, ``"professional"``, ``"enterprise"`` (or a :class:`Profile`).
        **overrides: any setting (``retry=...``, ``process_per_call=False``,
            ``allowed_transports={"stdio", "http"}``) and any other Client option
            (``mode=...``); ``None`` values are ignored, so callers can pass optional
            arguments through.

    Returns:
        A new dict: ``timeouts``, ``retry``, ``breaker``, ``pool`` (Client options), the
        :data:`PROFILE_FLAGS`, and the other overrides unchanged.

    Raises:
        ProfileError: the profile is unknown, or a flag has a value it cannot take.
    """
    opts = _get(name).options()
    for key, value in overrides.items():
        if value is None:
            continue
        opts[key] = value
    if isinstance(opts["allowed_transports"], str):
        opts["allowed_transports"] = frozenset({opts["allowed_transports"]})
    opts["allowed_transports"] = frozenset(opts["allowed_transports"])
    unknown = opts["allowed_transports"] - ALL_TRANSPORTS
    if unknown:
        raise ProfileError(f"allowed_transports: unknown transports {sorted(unknown)} (known: {sorted(ALL_TRANSPORTS)})")
    for key, choices in _CHOICES.items():
        if opts[key] not in choices:
            raise ProfileError(f"{key} must be one of {', '.join(map(repr, choices))}, not {opts[key]!r}")
    return opts


#: The keyword options of :class:`~mcpsync.Client` (``tests/unit/test_public_surface.py``
#: keeps this list equal to ``Client.__init__``'s).
CLIENT_OPTIONS: frozenset[str] = frozenset({
    "mode", "timeouts", "retry", "breaker", "pool", "sampling_handler", "elicitation_handler", "roots",
    "logging_handler", "log_level", "client_info", "name", "reconnect", "record", "on_breaker_change",
    "on_unavailable", "telemetry", "credential", "metrics", "push_updates", "extensions", "on_session_lost",
    "routing",
})


def split_options(options: Mapping[str, Any], transport: str | None = None) -> tuple[dict[str, Any], dict[str, Any]]:
    """Split resolved profile options into (constructor keyword options, profile flags).

    The :data:`PROFILE_FLAGS` always go to the flags (the Client wires each one
    explicitly, as it gains the feature; a bare ``True`` is not what its options take);
    every other key must be one of :data:`CLIENT_OPTIONS` or an option of the
    ``transport``'s (e.g. ``max_message_size``; see
    :data:`mcpsync.transports._factory.TRANSPORT_OPTIONS`).

    Raises:
        TypeError: a key is neither (a typo).
    """
    accepted = CLIENT_OPTIONS | TRANSPORT_OPTIONS.get(transport or "", frozenset())
    client: dict[str, Any] = {}
    flags: dict[str, Any] = {}
    for key, value in options.items():
        if key in PROFILE_FLAGS:
            flags[key] = value
        elif key in accepted:
            client[key] = value
        else:
            raise TypeError(f"unexpected option {key!r} (not a Client option nor a profile setting)")
    # the flags the Client has an option for are enforced through it
    if "metrics" in flags:
        client.setdefault("metrics", bool(flags["metrics"]))
    if "subscriptions" in flags:
        client.setdefault("push_updates", flags["subscriptions"] == "push")
    return client, flags


def resolve(profile: str | Profile, transport: str | None, options: Mapping[str, Any]) -> tuple[dict[str, Any], dict[str, Any]]:
    """The hook for ``profile=`` in the Client's constructors.

    Applies ``options`` over the profile, checks the transport is allowed, and splits the
    result (see :func:`split_options`).

    Args:
        profile: the profile name.
        transport: ``"stdio"``, ``"http"``, ``"sse"``, ``"websocket"``, ``"grpc"``,
            ``"local"``, or ``None`` to skip the check (a custom transport factory).
        options: the caller's keyword options (the Client's and the transport's); they
            win over the profile.

    Returns:
        (constructor keyword options, profile flags).

    Raises:
        ProfileError: unknown profile, or a transport it does not allow.
    """
    opts = profile_options(profile, **dict(options))
    if transport is not None:
        check_transport(opts, transport)
    per_call = opts.get("process_per_call")
    if per_call:  # a connection (a process) per call is a pool setting
        limits = opts.get("pool")
        if limits is None or not limits.per_call:
            if options.get("pool") is not None:
                raise ProfileError(f"pool={limits!r} keeps connections between calls, which process_per_call=True "
                                   "does not: pass process_per_call=False, or a pool with per_call=True")
            opts["pool"] = PoolLimits.PER_CALL
    elif options.get("pool") is None:
        # A profile's pool is where connections are interchangeable: the HTTP keep-alive
        # sockets under a session. The Client itself keeps one session per server (its
        # state is the user's data) unless the caller passes ``pool=`` explicitly.
        limits = opts.pop("pool", None)
        if limits is not None and options.get("pool_size") is None and "pool_size" in TRANSPORT_OPTIONS.get(transport or "", ()):
            opts["pool_size"] = max(limits.max, 1)
    return split_options(opts, transport)


def check_transport(options: Mapping[str, Any] | str | Profile, transport: str) -> None:
    """Raise :class:`ProfileError` when the profile does not allow ``transport``.

    Args:
        options: resolved options (from :func:`profile_options`) or a profile name.
        transport: ``"stdio"``, ``"http"``, ``"sse"``, ``"websocket"``, ``"grpc"``, ``"local"``.
    """
    if isinstance(options, (str, Profile)):
        options = profile_options(options)
    allowed = frozenset(options.get("allowed_transports", ALL_TRANSPORTS))
    if transport in allowed:
        return
    which = [p.name for p in PROFILES.values() if transport in p.allowed_transports]
    raise ProfileError(
        f"this profile allows only {', '.join(sorted(allowed))} servers, not {transport}: "
        f"use profile={which[0]!r} or pass allowed_transports={{..., {transport!r}}}"
        if which
        else f"this profile allows only {', '.join(sorted(allowed))} servers, not {transport}"
    )
