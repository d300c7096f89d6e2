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

import inspect
import threading
from dataclasses import dataclass, field
from typing import Any, Callable, Mapping, Sequence, TypeVar

from ._errors import ProfileError
from ._policies import BreakerPolicy, PoolLimits, RetryPolicy, Timeouts
from ._settings import InPart, Setting, Settings
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
    "ProcessPerCallClient",
    "process_per_call",
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
        process_per_call: every call starts its own stdio server process and ends it.
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
        # a process per call: no pooled connections at all
        pool=PoolLimits(min=0, max=1),
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
    if options.get("pool") is None:
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


class ProcessPerCallClient:
    """A Client-like object that starts a fresh stdio server for every call, then ends it.

    The Minimal profile's "no pool (process per call)": nothing survives between calls,
    so a crashed or wedged server never poisons the next call. Failed calls are retried
    per ``retry`` (the Minimal profile: 3 fixed-interval retries), each on a new process;
    there is no circuit breaker. Thread-safe: concurrent calls each get their own process.

    Args:
        command: the executable.
        args: its arguments.
        env: extra environment variables for the child.
        cwd: the child's working directory.
        retry: call retries (default: the Minimal profile's).
        name: the server's name in logs and errors.
        client_factory: ``factory(command, args, env=, cwd=, **options)`` building the
            one-shot Client (``Client.stdio``).
        sleep: waits between retries (inject for tests).
        **options: keyword options for each one-shot Client (``mode``, ``timeouts`` ...).

    Attributes:
        spawned: how many server processes were started so far.

    Example:
        >>> c = ProcessPerCallClient("python", ["-m", "mcpsync.server.demo"], client_factory=Client.stdio)  # doctest: +SKIP
        >>> c.call_tool("add", {"a": 1, "b": 2}).structured_content, c.spawned  # doctest: +SKIP
        ({'result': 3}, 1)
    """

    #: call retries (read-only: another policy, another wrapper)
    retry = Setting[RetryPolicy]()

    def __init__(
        self,
        command: str,
        args: Sequence[str] = (),
        *,
        env: Mapping[str, str] | None = None,
        cwd: Any = None,
        retry: RetryPolicy | None = None,
        name: str | None = None,
        client_factory: Callable[..., Any],
        sleep: Callable[[float], None] | None = None,
        **options: Any,
    ) -> None:
        import os
        import time

        self.command = command
        self.args = list(args)
        self.env = dict(env) if env else None
        self.cwd = cwd
        self.name = name or os.path.basename(command)
        self.settings = Settings(name=self.name, retry=retry if retry is not None else PROFILES["minimal"].retry,
                                 breaker=BreakerPolicy.DISABLED)
        self._factory = client_factory
        self._sleep = sleep or time.sleep
        self._options = dict(options)
        self._lock = threading.Lock()
        self._closed = False
        self._session: Any = None
        self._tools: list[Any] | None = None
        self._handlers: list[tuple[str, Callable[[Mapping[str, Any] | None], None]]] = []
        self.spawned = 0
        # the one-shot clients must not retry themselves: retries happen here, each on a
        # new process
        self._options.setdefault("retry", RetryPolicy.NONE)
        self._options.setdefault("breaker", BreakerPolicy.DISABLED)
        self._options.setdefault("name", self.name)

    # -------------------------------------------------------------- lifecycle

    def __enter__(self) -> "ProcessPerCallClient":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def connect(self) -> Any:
        """Start a server once to check it answers; returns its session facts."""
        return self._run(lambda c: c.session, tool=None, safe=True)

    def close(self) -> None:
        """Refuse further calls (no process is left running between calls). Idempotent."""
        self._closed = True

    @property
    def closed(self) -> bool:
        return self._closed

    @property
    def session(self) -> Any:
        """The session facts of the most recent process (starts one if none ran yet)."""
        return self._session if self._session is not None else self.connect()

    # -------------------------------------------------------------- calls

    def _once(self, fn: Callable[[Any], Any]) -> Any:
        from ._errors import ConnectionClosed

        if self._closed:
            raise ConnectionClosed(f"client for {self.name} is closed")
        client = self._factory(self.command, self.args, env=self.env, cwd=self.cwd, **self._options)
        with self._lock:
            self.spawned += 1
            handlers = list(self._handlers)
        for method, handler in handlers:
            register = getattr(client, "on_notification", None)
            if register is not None:
                register(method, handler)
        try:
            result = fn(client)
            try:
                self._session = client.session
            except Exception:  # the process may be gone already; the facts are optional
                pass
            return result
        finally:
            client.close()

    def _run(self, fn: Callable[[Any], Any], *, tool: str | None, safe: bool) -> Any:
        from ._guard import Guard

        guard = Guard(self.name, retry=self.retry, breaker=BreakerPolicy.DISABLED, sleep=self._sleep)
        return guard.call(lambda: self._once(fn), safe_to_retry=safe, tool=tool)

    def request(self, method: str, params: Mapping[str, Any] | None = None, *, timeout: float | None = None, **kw: Any) -> Any:
        """Any request, on a fresh process."""
        return self._run(lambda c: c.request(method, params, timeout=timeout, **kw), tool=None, safe=False)

    def ping(self, *, timeout: float | None = None) -> None:
        self._run(lambda c: c.ping(timeout=timeout), tool=None, safe=True)

    def list_tools(self, *, timeout: float | None = None) -> list[Any]:
        """The tools, from a fresh process (every time: the profile has no tool cache)."""
        tools = list(self._run(lambda c: c.list_tools(timeout=timeout), tool=None, safe=True))
        self._tools = tools
        return tools

    def call_tool(
        self,
        name: str,
        arguments: Mapping[str, Any] | None = None,
        *,
        timeout: float | None = None,
        safe_to_retry: bool | None = None,
        **kw: Any,
    ) -> Any:
        """Call a tool on a fresh process, retried per ``retry``.

        Args:
            name: the tool.
            arguments: its arguments.
            timeout: seconds for each attempt.
            safe_to_retry: the call may be repeated even after it may have reached the
                server (default: the tool's readOnly/idempotent annotations, when the
                tools were listed; attempts that never reached a server are always retried).
        """
        from ._retry import tool_is_retry_safe

        if safe_to_retry is None:
            tool = next((t for t in (self._tools or ()) if t.name == name), None)
            safe_to_retry = tool_is_retry_safe(tool)
        return self._run(lambda c: c.call_tool(name, arguments, timeout=timeout, **kw), tool=name, safe=safe_to_retry)

    # -------------------------------------------------------------- the rest of the API

    #: Client methods that need a session outliving one call: the profile has none.
    _SESSION_ONLY = frozenset({"subscribe", "unsubscribe", "on_list_changed", "remove_list_changed", "task", "list_tasks", "call_tool_task"})

    def on_notification(self, method: str, handler: Callable[[Mapping[str, Any] | None], None]) -> None:
        """Call ``handler(params)`` for notifications ``method`` sent during any call
        (progress, log messages ...); registered on each call's fresh client."""
        with self._lock:
            self._handlers.append((method, handler))

    def __getattr__(self, name: str) -> Any:
        # Other read-style Client methods (list_resources, read_resource, get_prompt ...)
        # run, like calls, on a fresh process each.
        if name.startswith("_"):
            raise AttributeError(name)
        return self._method(name)

    def _method(self, name: str) -> Callable[..., Any]:
        if name in self._SESSION_ONLY:
            def refuse(*_a: Any, **_kw: Any) -> Any:
                raise ProfileError(
                    f"{name}() needs a session that outlives one call; the minimal profile starts a process per call "
                    "(use profile='professional', or process_per_call=False)"
                )

            return refuse
        owner = getattr(self._factory, "__self__", None)  # the Client class, for Client.stdio
        target = getattr(owner, name, None) if isinstance(owner, type) else None
        if not callable(target):
            raise AttributeError(name)

        def run(*args: Any, **kwargs: Any) -> Any:
            return self._run(lambda c: getattr(c, name)(*args, **kwargs), tool=None, safe=name.startswith(("list_", "read_", "get_")))

        run.__name__ = name
        run.__doc__ = getattr(target, "__doc__", None)
        return run

    def __repr__(self) -> str:
        return f"ProcessPerCallClient({self.name!r}, spawned={self.spawned})"


C = TypeVar("C")


def process_per_call(client_class: type[C], command: str, args: Sequence[str], options: Mapping[str, Any]) -> C:
    """The Minimal profile's stdio client: the hook for ``Client.stdio(..., profile=...)``
    when the profile (or the caller) sets ``process_per_call``.

    What it returns is a ``client_class`` (a :class:`~mcpsync.Client`) whose every public
    method runs as :class:`ProcessPerCallClient` runs it: on a one-shot client built by
    ``client_class.stdio``, each on a fresh process.

    Args:
        client_class: the Client class.
        command: the executable.
        args: its arguments.
        options: the resolved constructor options (see :func:`resolve`); the profile's
            retries happen here, each on a new process, so the one-shot clients get
            neither retries nor a breaker nor a pool.
    """
    opts = dict(options)
    retry = opts.pop("retry", None)
    for key in ("breaker", "pool"):
        opts.pop(key, None)
    env, cwd = opts.pop("env", None), opts.pop("cwd", None)
    factory = client_class.stdio  # type: ignore[attr-defined]
    kind = _per_call_class(client_class)
    return kind(command, args, env=env, cwd=cwd, retry=retry, client_factory=factory, **opts)  # type: ignore[no-any-return]


_PER_CALL_CLASSES: dict[type, type] = {}
_PER_CALL_LOCK = threading.Lock()


def _per_call_class(client_class: type) -> type:
    """``ProcessPerCallClient`` grafted onto ``client_class``: an instance is a Client for
    ``isinstance`` and type checkers; every public method of the Client runs on a fresh
    process (or is refused, for those that need a lasting session)."""
    with _PER_CALL_LOCK:
        made = _PER_CALL_CLASSES.get(client_class)
        if made is not None:
            return made
        namespace: dict[str, Any] = {
            "__doc__": ProcessPerCallClient.__doc__,
            "__module__": __name__,
            # no breaker, and never "unavailable": every call starts afresh
            "breaker_state": property(lambda self: _closed_state()),
            "unavailable": property(lambda self: False),
            "endpoint_breakers": property(lambda self: {}),
        }
        for name in dir(client_class):
            if name.startswith("_") or name in namespace or hasattr(ProcessPerCallClient, name):
                continue
            attr = inspect.getattr_static(client_class, name)
            if isinstance(attr, InPart):  # kept by a Client's part: this wrapper has none
                namespace[name] = None
                continue
            if isinstance(attr, Setting):  # read from the wrapper's own settings
                continue
            if isinstance(attr, (property, classmethod, staticmethod)) or not callable(attr):
                continue
            namespace[name] = _delegate(name, attr)
        made = type(f"{client_class.__name__}ProcessPerCall", (ProcessPerCallClient, client_class), namespace)
        _PER_CALL_CLASSES[client_class] = made
        return made


def _closed_state() -> Any:
    from ._breaker import BreakerState

    return BreakerState.CLOSED


def _delegate(name: str, target: Any) -> Callable[..., Any]:
    def method(self: ProcessPerCallClient, *args: Any, **kwargs: Any) -> Any:
        return self._method(name)(*args, **kwargs)

    method.__name__ = name
    method.__doc__ = getattr(target, "__doc__", None)
    return method
