"""The Client: typed, blocking MCP methods over either protocol era.

Example:
    >>> from mcpsync import Client
    >>> with Client.stdio("python", ["-m", "mcpsync.server.demo"]) as client:   # doctest: +SKIP
    ...     print([t.name for t in client.list_tools()])
    ...     print(client.call_tool("echo", {"message": "hi"}).text)
"""

from __future__ import annotations

import logging
import os
import threading
import time
from dataclasses import dataclass, field, replace
from typing import Any, Callable, Iterable, Literal, Mapping, Sequence, Union

import msgspec

from ._channel import Channel, ProgressCallback
from ._dispatcher import Dispatcher
from ._errors import (
    METHOD_NOT_FOUND,
    URL_ELICITATION_REQUIRED,
    AuthError,
    CircuitOpen,
    ConnectError,
    ConnectionClosed,
    MCPError,
    NetworkError,
    PoolClosed,
    ProtocolError,
    RemoteError,
    RequestTimeout,
    ServerUnavailable,
    StartFailed,
    UnsupportedProtocolVersion,
    attach_fields,
)
from ._messages import (
    CallToolResult,
    DiscoverResult,
    Implementation,
    InitializeResult,
    ListToolsResult,
    ServerCapabilities,
    Tool,
    decode_result,
    encode,
)
from ._cache import EXPLICIT, LIST_CHANGED, RECONNECT, ToolCache
from ._guard import BreakerState, CircuitBreaker, Guard, ReconnectSchedule, Recorder, tool_is_retry_safe
from ._metrics import DISCOVERY_METHODS, MetricsRecorder, fan_out
from ._policies import BreakerPolicy, PoolLimits, ReconnectPolicy, RetryPolicy, Timeouts
from ._paging import paginate
from ._pool import ConnectionPool
from ._protocol import ProtocolMixin
from ._skills import SkillsMixin
from ._worker import Worker
from .transports._base import Transport
from ._diagnostics import Diagnostics, snapshot as _diagnostics_snapshot

__all__ = [
    "Client",
    "ServerSession",
    "MODERN_VERSIONS",
    "LEGACY_VERSIONS",
    "LATEST_MODERN",
    "LATEST_LEGACY",
]

log = logging.getLogger("mcpsync.client")

#: Revisions with the stateless per-request envelope.
MODERN_VERSIONS: tuple[str, ...] = ("2026-07-28",)
#: Revisions reached through the initialize handshake, oldest first.
LEGACY_VERSIONS: tuple[str, ...] = ("2024-11-05", "2025-03-26", "2025-06-18", "2025-11-25")
LATEST_MODERN = MODERN_VERSIONS[-1]
LATEST_LEGACY = LEGACY_VERSIONS[-1]

_META_VERSION = "io.modelcontextprotocol/protocolVersion"
_META_CAPS = "io.modelcontextprotocol/clientCapabilities"
_META_INFO = "io.modelcontextprotocol/clientInfo"
_META_LOG = "io.modelcontextprotocol/logLevel"

Mode = Literal["auto", "modern", "legacy"]
TransportFactory = Callable[[], Union[Transport, Channel]]

#: Bumped in a child after os.fork(): cheaper to compare than calling getpid() per call.
_fork_generation = 0


def _after_fork_in_child() -> None:
    global _fork_generation
    _fork_generation += 1


os.register_at_fork(after_in_child=_after_fork_in_child)

#: Era detected per server address ("modern" / "legacy"), so reconnects skip the probe.
_ERA_CACHE: dict[str, str] = {}
_ERA_LOCK = threading.Lock()


#: Requests without side effects: retried after any transient failure (one table, in _channel).
from ._channel import SAFE_METHODS as _SAFE_METHODS  # noqa: E402


def _version() -> str:
    try:
        from importlib.metadata import version

        return version("mcpsync")
    except Exception:  # pragma: no cover - not installed
        return "0"


@dataclass
class ServerSession:
    """What one connection learned about its server."""

    era: str
    protocol_version: str
    capabilities: ServerCapabilities
    server_info: Implementation
    instructions: str | None = None
    meta: dict[str, Any] = field(default_factory=dict)
    #: modern era: the discover result's ``ttlMs`` as a ``time.monotonic()`` instant;
    #: past it, the next look at the session re-discovers (None: no expiry)
    fresh_until: float | None = None


class _Connection:
    """One live channel to the server plus the facts of its session."""

    def __init__(self, channel: Any, transport: Transport | None, key: str) -> None:
        self.channel = channel
        self.transport = transport
        self.key = key
        self.session: ServerSession | None = None
        self.closer: Callable[[Callable[[], None], str], None] | None = None
        self.meta: dict[str, Any] | None = None  # modern per-request _meta
        self._wire_meta: tuple[Any, Any] = (None, None)  # (meta, what is sent for it)

    def wire_meta(self, meta: dict[str, Any]) -> Any:
        """``meta`` as sent: encoded once per value on a connection that sends JSON
        (a Dispatcher's), the mapping itself on an in-process channel."""
        known, wire = self._wire_meta
        if known is not meta:
            wire = msgspec.Raw(encode(meta)) if self.transport is not None else meta
            self._wire_meta = (meta, wire)
        return wire

    def alive(self) -> bool:
        ch = self.channel
        if isinstance(ch, Dispatcher):  # cheap: no syscall; the reader notices a dead peer
            return ch._dead is None and not ch._closed
        return bool(ch.alive())

    def healthy(self) -> bool:
        """A thorough check (process running, socket open), for keepalive rounds."""
        return bool(self.channel.alive())

    def close(self) -> None:
        """Close it off the calling thread when the client gave a closer (a stubborn
        server takes seconds to stop: neither a failed call nor the other connections wait
        for it); the client's own ``close()`` waits for every closer."""
        closer = self.closer
        if closer is not None:
            closer(self._close_now, self.key)
        else:
            self._close_now()

    def _close_now(self) -> None:
        try:
            self.channel.close()
        except Exception:  # pragma: no cover - close is best effort
            log.debug("closing %s failed", self.key, exc_info=True)


class _Opening:
    """One connection being made off the callers' threads.

    Callers wait for it up to their own deadlines; when one's time runs out the
    attempt goes on, and the connection it makes is kept for the next call. Its
    ``phase`` says what it is waiting for, for the error a caller then gets.
    """

    __slots__ = ("done", "conn", "error", "phase", "started", "made", "thread", "claimed")

    def __init__(self) -> None:
        self.done = threading.Event()
        self.conn: _Connection | None = None
        self.error: BaseException | None = None
        self.phase = "starting the connection"
        self.started = time.monotonic()
        self.made: Transport | Channel | None = None  # what close() must close to stop it
        self.thread: threading.Thread | None = None
        self.claimed = False  # a borrower is waiting for it


class Client(ProtocolMixin, SkillsMixin):
    """A blocking, thread-safe MCP client for one server.

    Every public method blocks until it has a result or raises one of the errors of
    :mod:`mcpsync._errors`; one instance may be shared by any number of threads. The
    connection is opened lazily, on first use (or by :meth:`connect`).

    Args:
        transport: a zero-argument callable returning a fresh, unconnected
            :class:`~mcpsync.transports.Transport` (or an in-process channel); called
            again whenever a new connection is needed. A ready ``Transport`` instance is
            accepted too, for a single connection.
        mode: ``"auto"`` (probe with ``server/discover``, fall back to ``initialize``),
            ``"modern"`` (2026-07-28 only) or ``"legacy"`` (the initialize handshake).
        timeouts: the timeout layers (connect 10 s, request 30 s, ...).
        retry: call retry policy.
        breaker: circuit breaker policy.
        pool: connections (MCP sessions) per server. Default: one session
            (:attr:`PoolLimits.SESSION`), every thread's calls multiplexed on it; more
            than one splits a stateful server's state (see :class:`PoolLimits`).
        sampling_handler: ``handler(params) -> result`` for ``sampling/createMessage``.
        elicitation_handler: ``handler(params) -> result`` for ``elicitation/create``.
        roots: a list of roots (``{"uri": ..., "name": ...}``) or a callable returning one.
        logging_handler: ``handler(params)`` for server log messages (default: the
            ``logging`` module, logger ``mcpsync.server.<name>``).
        log_level: level asked of the server for its log messages (None: not asked).
        client_info: name/version this client reports.
        name: the server's name in logs and errors.
        reconnect: the reconnection schedule after a lost connection.
        record: an extra metrics sink ``record(server, tool, start, end, outcome)``.
        on_breaker_change: ``callback(old, new)`` on circuit breaker transitions.
        on_unavailable: ``callback(error)`` once the server is marked unavailable.
        telemetry: ``True`` for OpenTelemetry spans and metrics (the ``otel`` extra),
            or a :class:`mcpsync._otel.Telemetry`; spans carry W3C trace context into
            the request's ``_meta``.
        credential: the authorization context the tool cache keys ``private``
            entries by (default: none).
        metrics: record per-call metrics for :meth:`metrics` (False: nothing recorded).
        push_updates: accept resource update subscriptions (False: ``subscribe``
            is refused and the resource lifecycle is driven by TTL alone, as in the
            professional profile).

    Example:
        >>> client = Client.stdio("python", ["-m", "mcpsync.server.demo"])   # doctest: +SKIP
        >>> client.call_tool("add", {"a": 1, "b": 2}).structured_content     # doctest: +SKIP
        {'result': 3}
    """

    def __init__(
        self,
        transport: TransportFactory | Transport,
        *,
        mode: Mode = "auto",
        timeouts: Timeouts = Timeouts.DEFAULT,
        retry: RetryPolicy = RetryPolicy.DEFAULT,
        breaker: BreakerPolicy = BreakerPolicy.DEFAULT,
        pool: PoolLimits | None = None,
        sampling_handler: Callable[[Mapping[str, Any]], Any] | None = None,
        elicitation_handler: Callable[[Mapping[str, Any]], Any] | None = None,
        roots: Sequence[Mapping[str, Any]] | Callable[[], Sequence[Mapping[str, Any]]] | None = None,
        logging_handler: Callable[[Mapping[str, Any]], None] | None = None,
        log_level: str | None = None,
        client_info: Mapping[str, Any] | None = None,
        name: str | None = None,
        reconnect: ReconnectPolicy = ReconnectPolicy.DEFAULT,
        record: Recorder | None = None,
        on_breaker_change: Callable[[BreakerState, BreakerState], None] | None = None,
        on_unavailable: Callable[[ServerUnavailable], None] | None = None,
        telemetry: Any = None,
        credential: Any = None,
        metrics: bool = True,
        push_updates: bool = True,
    ) -> None:
        if mode not in ("auto", "modern", "legacy"):
            raise ValueError(f"mode must be 'auto', 'modern' or 'legacy', not {mode!r}")
        if pool is None:
            pool = PoolLimits.SESSION  # one session per server: its state is the user's data
        if isinstance(transport, Transport):
            single = transport
            used = [False]

            def factory() -> Transport:
                if used[0]:
                    raise ConnectError(f"{single.describe()}: a single Transport instance cannot reconnect; pass a factory")
                used[0] = True
                return single

            self._factory: TransportFactory = factory
            pool = PoolLimits.SINGLE
        elif callable(transport):
            self._factory = transport
        else:
            raise TypeError("transport must be a Transport or a zero-argument callable returning one")
        self.mode: Mode = mode
        self.timeouts = timeouts
        self.retry = retry
        self.breaker = breaker
        self.pool = pool
        self.sampling_handler = sampling_handler
        self.elicitation_handler = elicitation_handler
        self.roots = roots
        self.logging_handler = logging_handler
        self.log_level = log_level
        self.client_info = dict(client_info or {"name": "mcpsync", "version": _version()})
        self.name = name or "server"
        self._lock = threading.Lock()
        self._closed = False
        self._primary: _Connection | None = None
        self._ever_connected = False
        self._openings: list[_Opening] = []  # connections being made in the background
        self._stopping = threading.Event()  # set by close(): background waits end at once
        self._closers: list[threading.Thread] = []  # connections being closed off the caller's thread
        self._worker = Worker(f"mcpsync-{self.name}")
        self._notification_handlers: dict[str, list[Callable[[Mapping[str, Any] | None], None]]] = {}
        self._server_logger = logging.getLogger(f"mcpsync.server.{self.name}")
        self._fork_gen = _fork_generation
        self._cache_credential = credential
        self._discovery_backoff_until = 0.0  # a failed hidden tools/list is not retried before
        self._metrics = MetricsRecorder()
        if telemetry is True:
            from . import _otel

            telemetry = _otel.telemetry()
        self._telemetry = telemetry or None
        self.push_updates = push_updates
        sinks = (self._metrics if metrics else None, self._telemetry.recorder if self._telemetry is not None else None, record)
        sink = fan_out(*sinks) if any(x is not None for x in sinks) else None
        # the cache reports hits and misses; its discoveries are already timed and
        # counted by the guard as tools/list requests (kept apart from agent calls)
        self._tool_cache = ToolCache(metrics=_CacheHits(sink))
        self._resources: Any = None
        self._reconnect = ReconnectSchedule(reconnect, name=self.name, on_unavailable=on_unavailable)
        self._guard = Guard(self.name, retry=retry, breaker=breaker, reconnect=self._reconnect, record=sink)
        if on_breaker_change is not None:
            self._guard.breaker.add_listener(on_breaker_change)
        self._pool: ConnectionPool[_Connection] = ConnectionPool(
            self._open_pooled,
            replace(pool, idle=min(pool.idle, timeouts.idle)),
            address=self.name,
            keepalive=self._keepalive,
            keepalive_interval=timeouts.keepalive,
            default_timeout=timeouts.request,
            connect_retries=0,  # _open retries the connect once itself
            maintenance_interval=min(timeouts.keepalive, timeouts.idle) / 4,
        )
        self._borrow_wait = pool.borrow_timeout  # None: each call waits up to its own timeout
        #: the :class:`~mcpsync._routing.Router` of a client made by :meth:`routed`
        self.router: Any = None
        self._endpoint_breakers: dict[str, CircuitBreaker] | None = None

    # ------------------------------------------------------------------ constructors

    @classmethod
    def stdio(
        cls,
        command: str,
        args: Sequence[str] = (),
        *,
        env: Mapping[str, str] | None = None,
        cwd: str | os.PathLike[str] | None = None,
        max_message_size: int | None = None,
        profile: str | None = None,
        **options: Any,
    ) -> "Client":
        """A client for a server run as a child process.

        Args:
            command: the executable (``"npx"``, ``"python"``, ...).
            args: its arguments.
            env: extra environment variables for the child.
            cwd: the child's working directory.
            max_message_size: longest accepted message in bytes.
            profile: ``"minimal"`` (a process per call, 3 fixed retries, no breaker),
                ``"professional"`` or ``"enterprise"``: presets of the options below,
                each still overridable (see the README's profile table).
            **options: the keyword options of :class:`Client`.
        """
        if profile is not None:
            from ._profiles import stdio_client

            if max_message_size is not None:
                options["max_message_size"] = max_message_size
            return stdio_client(command, args, profile=profile, env=env, cwd=cwd, client_class=cls, **options)  # type: ignore[no-any-return]
        from .transports.stdio import StdioTransport

        kwargs: dict[str, Any] = {"env": env, "cwd": cwd}
        if max_message_size is not None:
            kwargs["max_message_size"] = max_message_size
        timeouts: Timeouts = options.get("timeouts", Timeouts.DEFAULT)
        kwargs["close_timeout"] = timeouts.close
        options.setdefault("name", os.path.basename(command))
        args = list(args)
        return cls(lambda: StdioTransport(command, args, **kwargs), **options)

    @classmethod
    def http(
        cls,
        url: str,
        *,
        headers: Mapping[str, str] | None = None,
        auth: Any = None,
        verify: bool | str = True,
        pool_size: int = 10,
        max_message_size: int | None = None,
        sse_fallback: bool = True,
        profile: str | None = None,
        **options: Any,
    ) -> "Client":
        """A client for a remote server: Streamable HTTP (both eras), falling back to
        HTTP+SSE (2024-11-05) when the URL refuses POSTs.

        Args:
            url: the MCP endpoint (``https://host/mcp``) or an HTTP+SSE stream URL.
            headers: static headers for every request.
            auth: an auth hook such as :class:`mcpsync.auth.OAuth`: ``headers(url, method)``
                before every request, ``on_response(url, method, status, headers)`` on
                401/403 (True = retry once).
            verify: TLS verification: True, False or a CA bundle path.
            pool_size: HTTP connections per origin (shared by the client's threads).
            max_message_size: longest accepted message in bytes.
            sse_fallback: switch to HTTP+SSE when the URL refuses POSTs.
            **options: the keyword options of :class:`Client`.
        """
        if profile is not None:
            from ._profiles import resolve

            options, _flags = resolve(profile, "http", options, cls)
        from .transports.streamable_http import StreamableHTTPTransport

        kwargs = cls._http_kwargs(headers, auth, verify, pool_size, max_message_size, options)
        kwargs["sse_fallback"] = sse_fallback
        return cls(lambda: StreamableHTTPTransport(url, **kwargs), **cls._http_options(url, options, pool_size))

    @classmethod
    def sse(
        cls,
        url: str,
        *,
        headers: Mapping[str, str] | None = None,
        auth: Any = None,
        verify: bool | str = True,
        pool_size: int = 10,
        max_message_size: int | None = None,
        profile: str | None = None,
        **options: Any,
    ) -> "Client":
        """A client for a server speaking HTTP+SSE (2024-11-05) at the stream ``url``.
        Options as for :meth:`http`."""
        if profile is not None:
            from ._profiles import resolve

            options, _flags = resolve(profile, "sse", options, cls)
        from .transports.sse import SSETransport

        kwargs = cls._http_kwargs(headers, auth, verify, pool_size, max_message_size, options)
        return cls(lambda: SSETransport(url, **kwargs), **cls._http_options(url, options, pool_size))

    @classmethod
    def from_config(cls, path: str | os.PathLike[str] | Mapping[str, Any], name: str, **options: Any) -> "Client":
        """A client for server ``name`` of an ``mcpServers`` configuration file (the
        format desktop clients and editors use; ``${VAR}`` expanded from the environment),
        or of the same configuration given as a dict.

        Raises:
            ConfigError: the file or the entry is invalid (the message names the field),
                or the entry is ``"disabled": true`` (``allow_disabled=True`` overrides).
        """
        from ._config import build_client, load_config

        environ = options.pop("environ", None)
        return build_client(load_config(path, environ=environ)[name], client_class=cls, **options)  # type: ignore[no-any-return]

    @classmethod
    def routed(
        cls,
        endpoints: Sequence[Any],
        make: Callable[[Any], Transport],
        *,
        region: str | None = None,
        probe: bool = True,
        router_options: Mapping[str, Any] | None = None,
        **options: Any,
    ) -> "Client":
        """A client for a server with several endpoints (nodes or regions).

        Each new connection goes to the nearest available endpoint: by measured
        round-trip (a smoothed average of connect and ping times), or the client's
        ``region`` first. An endpoint that cannot be reached is skipped until it is
        re-probed; each endpoint has its own circuit breaker (the ``breaker`` policy),
        and one whose breaker opens is skipped too, its connections retired, so calls
        fail over to the next endpoint. Due probes run in the background; when a
        recovered or nearer endpoint becomes the best, connections move back to it as
        their calls finish.

        Args:
            endpoints: :class:`mcpsync._routing.Endpoint` values (or names).
            make: builds a fresh transport for an endpoint, e.g.
                ``lambda ep: StreamableHTTPTransport(ep.address)``.
            region: the client's region, preferred over round-trip times.
            probe: measure every endpoint with a real MCP round-trip before choosing.
            router_options: more keyword options of the
                :class:`~mcpsync._routing.Router` (``probe_interval``, ``retry_after``,
                ``hysteresis``, ``on_change`` …).
            **options: the keyword options of :class:`Client`. ``breaker`` is the
                policy of each endpoint's breaker and ``on_breaker_change`` is told of
                their transitions; :attr:`endpoint_breakers` holds them (they keep
                time by the router's ``clock``).

        Raises (from calls):
            NoEndpointAvailable: every endpoint is unreachable or behind an open breaker.
        """
        from ._routing import Endpoint, Router, mcp_probe

        eps = [e if isinstance(e, Endpoint) else Endpoint(str(e)) for e in endpoints]
        policy: BreakerPolicy = options.pop("breaker", BreakerPolicy.DEFAULT)
        listener = options.pop("on_breaker_change", None)
        name = options.get("name") or "server"
        breakers: dict[str, CircuitBreaker] = {}
        router = Router(
            eps,
            probe=mcp_probe(make) if probe else None,
            region=region,
            breaker_open=lambda ep: breakers[ep.name].state is BreakerState.OPEN,
            **dict(router_options or {}),
        )
        for e in eps:  # on the router's clock: one time base for every routing decision
            breakers[e.name] = CircuitBreaker(policy, clock=router._clock, on_change=listener, name=f"{name}[{e.name}]")
        # the breakers are per endpoint: a client-wide one would stop every call when
        # one endpoint fails, which is what failing over is there to avoid
        client = cls(router.transport_factory(make), breaker=BreakerPolicy.DISABLED, **options)
        client.router = router
        client._endpoint_breakers = breakers
        return client

    @property
    def endpoint_breakers(self) -> Mapping[str, CircuitBreaker]:
        """A routed client's circuit breakers, by endpoint name (empty otherwise)."""
        return dict(self._endpoint_breakers or {})

    @staticmethod
    def _http_kwargs(
        headers: Mapping[str, str] | None,
        auth: Any,
        verify: bool | str,
        pool_size: int,
        max_message_size: int | None,
        options: Mapping[str, Any],
    ) -> dict[str, Any]:
        timeouts: Timeouts = options.get("timeouts", Timeouts.DEFAULT)
        kwargs: dict[str, Any] = {
            "headers": dict(headers or {}),
            "auth": auth,
            "verify": verify,
            "connect_timeout": timeouts.connect,
            "read_timeout": timeouts.idle,
            "pool_size": pool_size,
        }
        if max_message_size is not None:
            kwargs["max_message_size"] = max_message_size
        return kwargs

    @staticmethod
    def _http_options(url: str, options: dict[str, Any], pool_size: int) -> dict[str, Any]:
        from urllib.parse import urlsplit

        options.setdefault("name", urlsplit(url).netloc or url)
        # One transport per client: urllib3 fans requests out over its own pool of TCP
        # connections, and every extra legacy-era transport would be another session.
        # As many calls in flight as there are sockets: the rest wait in the client's
        # pool, in arrival order (urllib3's own wait lets a returning thread go first).
        options.setdefault("pool", replace(PoolLimits.SESSION, max_in_flight=max(pool_size, 1)))
        return options

    @classmethod
    def websocket(
        cls,
        url: str,
        *,
        headers: Mapping[str, str] | None = None,
        token: str | None = None,
        auth: Any = None,
        sslopt: Mapping[str, Any] | None = None,
        max_message_size: int | None = None,
        profile: str | None = None,
        **options: Any,
    ) -> "Client":
        """A client for a server reached over WebSocket (subprotocol ``mcp``).

        No stock MCP server speaks WebSocket; ``mcpsync bridge --websocket`` serves any
        MCP server over it.

        Args:
            url: ``ws://`` or ``wss://`` URL.
            headers: extra handshake headers.
            token: a bearer token for the handshake.
            auth: an auth hook (e.g. :class:`mcpsync.auth.OAuth`) asked for fresh headers
                at every handshake.
            sslopt: websocket-client TLS options.
            max_message_size: longest accepted message in bytes.
            **options: the keyword options of :class:`Client`.
        """
        if profile is not None:
            from ._profiles import resolve

            options, _flags = resolve(profile, "websocket", options, cls)
        from .transports.websocket import WebSocketTransport

        timeouts: Timeouts = options.get("timeouts", Timeouts.DEFAULT)
        kw: dict[str, Any] = {"headers": headers, "token": token, "sslopt": sslopt, "ping_interval": timeouts.keepalive}
        if max_message_size:
            kw["max_message_size"] = max_message_size
        options.setdefault("name", url)
        static = dict(headers or {})

        def factory() -> WebSocketTransport:
            hdrs = {**static, **auth.headers(url, "GET")} if auth is not None else static
            return WebSocketTransport(url, **{**kw, "headers": hdrs})

        return cls(factory, **options)

    @classmethod
    def grpc(
        cls,
        target: str,
        *,
        token: str | None = None,
        auth: Any = None,
        metadata: Sequence[tuple[str, str]] | None = None,
        secure: bool = False,
        root_certificates: bytes | None = None,
        scope: str = "session",
        max_message_size: int | None = None,
        profile: str | None = None,
        **options: Any,
    ) -> "Client":
        """A client for a server reached over gRPC (``mcpsync bridge --grpc`` serves one).

        Args:
            target: ``host:port``.
            token: a bearer token sent as ``authorization`` metadata.
            auth: an auth hook (e.g. :class:`mcpsync.auth.OAuth`) asked for fresh headers
                at every connect; they are sent as lowercase metadata.
            metadata: extra metadata (lowercase keys).
            secure: use TLS (``root_certificates`` to trust a private CA).
            scope: ``"session"`` (one bidi stream per connection, both eras) or
                ``"request"`` (one RPC per request; modern era only).
            max_message_size: largest message in bytes (gRPC's own default is 4 MiB).
            **options: the keyword options of :class:`Client`.
        """
        if profile is not None:
            from ._profiles import resolve

            options, _flags = resolve(profile, "grpc", options, cls)
        from .transports.grpc import GrpcTransport

        kw: dict[str, Any] = {
            "token": token,
            "metadata": metadata,
            "secure": secure,
            "root_certificates": root_certificates,
            "scope": scope,
        }
        if max_message_size:
            kw["max_message_size"] = max_message_size
        options.setdefault("name", target)
        static = list(metadata or ())

        def factory() -> GrpcTransport:
            md = static
            if auth is not None:
                md = static + [(k.lower(), v) for k, v in auth.headers(target, "POST").items()]
            return GrpcTransport(target, **{**kw, "metadata": md})

        return cls(factory, **options)

    @classmethod
    def local(cls, registry: Any, *, profile: str | None = None, **options: Any) -> "Client":
        """A client for a server in this process: tools registered in a
        :class:`mcpsync.server.Registry` (no serialisation, no process boundary, no
        thread hop), or a server object of the official ``mcp`` SDK (``MCPServer``) or
        of FastMCP, run on a private event loop thread and reached through the SDK's
        in-memory transport (:mod:`mcpsync.transports.inprocess`); ``close()`` stops it."""
        if profile is not None:
            from ._profiles import resolve

            options, _flags = resolve(profile, "local", options, cls)
        from .transports.inprocess import sdk_server_factory
        from .transports.local import LocalChannel

        options.setdefault("name", getattr(registry, "name", "local"))
        sdk = sdk_server_factory(registry)
        if sdk is not None:
            return cls(sdk, **options)
        return cls(lambda: LocalChannel(registry), **options)

    # ------------------------------------------------------------------ lifecycle

    def __reduce_ex__(self, protocol: object) -> Any:
        raise TypeError(
            f"a Client ({self.name}) holds threads, pipes and sockets and cannot be pickled or copied; "
            "send a mcpsync.ClientSpec (ClientSpec.stdio/http/from_config with the same arguments) to the "
            "worker and call spec.client() there: one client per worker process"
        )

    def __enter__(self) -> "Client":
        self.connect()
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def connect(self, *, timeout: float | None = None) -> ServerSession:
        """Open the connection now (otherwise it opens on first use).

        Args:
            timeout: seconds to wait for it (default ``timeouts.start``, the start
                budget: a first ``npx -y`` run downloads its package first). When it
                passes, :class:`ConnectError` says what the connection was waiting
                for; the start goes on in the background.
        """
        return self._primary_connection(self.timeouts.start if timeout is None else timeout).session  # type: ignore[return-value]

    def close(self) -> None:
        """Close every connection and stop the client's threads. Idempotent."""
        with self._lock:
            if self._closed:
                return
            self._closed = True
            self._stopping.set()
            self._primary = None
            resources, self._resources = self._resources, None
            openings, self._openings = self._openings, []
        for opening in openings:
            made = opening.made  # a start still under way ends now, not at its timeout
            if made is not None and not opening.done.is_set():
                try:
                    made.close()
                except Exception:  # pragma: no cover - close is best effort
                    log.debug("closing the connection being made to %s failed", self.name, exc_info=True)
        if resources is not None:
            resources.close()
        stop_listening = getattr(self, "_stop_listening", None)
        if stop_listening is not None:
            try:
                stop_listening()
            except Exception:  # pragma: no cover - close is best effort
                log.debug("stopping the listen stream of %s failed", self.name, exc_info=True)
        if self._telemetry is not None:  # the sessions end now (mcp.client.session.duration)
            self._telemetry.client_closed(self)
        self._pool.close()
        for opening in openings:
            if opening.thread is not None and opening.thread is not threading.current_thread():
                opening.thread.join(self.timeouts.close + 1.0)
            with self._lock:
                left, opening.conn = opening.conn, None
            if left is not None:  # made just before close(): never handed out
                left.close()
        # every connection closes at once, each on its own thread: wait for all, bounded by
        # one stdio escalation (stdin closed, SIGTERM, SIGKILL), not one per connection
        ends = time.monotonic() + 2 * self.timeouts.close + 2.0
        with self._lock:
            closers, self._closers = self._closers, []
        for thread in closers:
            thread.join(max(ends - time.monotonic(), 0.0))
        self._worker.close()

    @property
    def closed(self) -> bool:
        return self._closed

    @property
    def session(self) -> ServerSession:
        """Facts about the server (era, version, capabilities); connects if needed.

        In the modern era the facts come from ``server/discover`` and are kept for the
        ``ttlMs`` the server gave; after that the next look re-discovers them.
        """
        conn = self._primary_connection()
        facts = conn.session
        if facts is not None and facts.fresh_until is not None and time.monotonic() >= facts.fresh_until:
            try:
                self._discover(conn, min(self.timeouts.request, 10.0))
            except MCPError as exc:  # keep the facts we have; try again next time
                log.info("%s: refreshing server/discover failed: %s", self.name, exc)
                facts.fresh_until = time.monotonic() + 5.0
            facts = conn.session
        return facts  # type: ignore[return-value]

    @property
    def era(self) -> str:
        return self.session.era

    @property
    def protocol_version(self) -> str:
        return self.session.protocol_version

    @property
    def server_info(self) -> Implementation:
        return self.session.server_info

    @property
    def capabilities(self) -> ServerCapabilities:
        return self.session.capabilities

    @property
    def breaker_state(self) -> BreakerState:
        """The circuit breaker's state (CLOSED, OPEN or HALF_OPEN)."""
        return self._guard.breaker.state

    @property
    def unavailable(self) -> bool:
        """True once reconnection gave up; calls raise ServerUnavailable until :meth:`reconnect`."""
        return self._reconnect.unavailable

    def reconnect(self) -> None:
        """Clear the unavailable mark and the breaker; the next call connects afresh."""
        self._reconnect.reset()
        self._guard.breaker.reset()

    def pool_stats(self) -> Any:
        """Counters of the connection pool (created, closed, borrowed, returned, in use)."""
        return self._pool.stats()

    # ------------------------------------------------------------------ connection

    def _check_usable(self) -> None:
        if self._closed:
            raise ConnectionClosed(f"client for {self.name} is closed")
        if self._fork_gen != _fork_generation:
            # forked: the pool forgets the parent's connections by itself; the
            # worker's threads did not survive the fork
            self._fork_gen = _fork_generation
            self._worker = Worker(f"mcpsync-{self.name}")
            self._primary = None
            self._openings = []  # their threads did not survive the fork

    def _primary_connection(self, timeout: float | None = None) -> _Connection:
        """The connection that carries session-scoped state (subscriptions, listens).

        It is one of the pool's connections (the first one opened); when it dies or is
        reclaimed, the next use picks another and the session state is restored on it.
        """
        self._check_usable()
        conn = self._primary
        if conn is not None and conn.alive():
            return conn
        bound = self.timeouts.request if timeout is None else timeout
        deadline = time.monotonic() + bound
        lease = self._guard.call(
            lambda: self._pool.borrow(self._left(deadline)), safe_to_retry=True, tool="initialize", budget=bound
        )
        new = lease.connection
        lease.release()
        with self._lock:
            old, self._primary = self._primary, new
        if old is not new:
            self._watch_primary(new)
        if old is None:
            restore = getattr(self, "_restore_session_state", None)
            if restore is not None:
                self._worker.submit(restore, True)  # listens asked for before the first connect
        elif old is not new:
            self._primary_replaced(new)
        return new

    def _primary_replaced(self, conn: _Connection) -> None:
        """The session-scoped connection was replaced: the server may have restarted.

        Tools are rediscovered on next use (cache level 3), cached resources turn
        STALE, and the session state (subscriptions, listens) is restored.
        """
        self._tool_cache.invalidate(self.name, RECONNECT)
        resources = self._resources
        if resources is not None:
            resources.reconnected(self.name)
        restore = getattr(self, "_restore_session_state", None)
        if restore is not None:
            self._worker.submit(restore)

    def _open_pooled(self) -> _Connection:
        """The pool's factory, on a borrower's thread: wait for a connection being made
        in the background, at most until the borrower's deadline.

        Each connection is made by a thread of its own (:meth:`_make`), claimed by one
        waiting borrower at a time. When the borrower's time runs out first, it raises a
        :class:`ConnectError` (``pending``, not counted by the breaker) that says what the
        connection was waiting for, and lets go of its claim: the attempt goes on, and
        its connection is kept for the next borrower.
        """
        deadline = self._pool.creation_deadline()
        if deadline is None:
            deadline = time.monotonic() + self.timeouts.request
        with self._lock:
            if self._closed:
                raise PoolClosed(f"client for {self.name} is closed")
            openings = self._openings
            # a stale failure helps nobody: a new attempt replaces it
            openings[:] = [o for o in openings if not (o.done.is_set() and o.conn is None)]
            opening = next((o for o in openings if not o.claimed and o.conn is not None), None) or next(
                (o for o in openings if not o.claimed), None
            )
            if opening is None:
                opening = _Opening()
                openings.append(opening)
                opening.thread = threading.Thread(
                    target=self._make, args=(opening,), name=f"mcpsync-connect-{self.name}", daemon=True
                )
                opening.thread.start()
            opening.claimed = True
        finished = opening.done.wait(max(deadline - time.monotonic(), 0.0))
        with self._lock:
            opening.claimed = False
            if finished:
                if opening in self._openings:
                    self._openings.remove(opening)
                conn, opening.conn = opening.conn, None  # exactly one borrower gets it
                if conn is not None:
                    return conn
        if not finished:
            waited = time.monotonic() - opening.started
            raise ConnectError(
                f"MCP server {self.name}: {opening.phase} ({waited:.1f} s so far); the call's time ran out, "
                "the connection goes on in the background",
                timeout=True, sent=False, pending=True, phase=opening.phase,
            )
        error = opening.error
        if error is None:  # pragma: no cover - done without a connection means an error
            error = ConnectError(f"MCP server {self.name}: connecting failed", sent=False)
        raise error

    def _make(self, opening: _Opening) -> None:
        """The background attempt: a first connect tries once (retried once after a
        timeout); after a connection was lost, reconnection follows the backoff schedule.
        ``close()`` ends it at once."""
        conn: _Connection | None = None
        error: BaseException | None = None
        try:
            if not self._ever_connected:
                conn = self._open(opening)
            else:
                conn = self._reconnect.run(lambda: self._open(opening), sleep=self._stopping.wait)
        except BaseException as exc:  # delivered to the waiting callers
            error = exc
        if conn is not None:
            with self._lock:
                closed = self._closed
                if not closed:
                    self._ever_connected = True
                    opening.conn = conn
            if closed:
                conn.close()
                error = PoolClosed(f"client for {self.name} is closed")
            else:
                self._connected(conn)
        opening.error = error
        opening.done.set()

    def _connected(self, conn: _Connection) -> None:
        """A connection was made: if the session's connection was lost, this one takes
        its place, and what the session held (the tool list, subscriptions, cached
        resources) is renewed."""
        primary = self._primary
        if primary is None or primary.alive():
            return
        with self._lock:
            replaced = self._primary is primary
            if replaced:
                self._primary = conn
        if replaced:
            self._watch_primary(conn)
            self._primary_replaced(conn)

    def _session_renewed(self, conn: _Connection) -> None:
        """The transport replaced a lost session (e.g. its replica died behind a balancer
        and the new one answered 404): what the old session held is renewed as after a
        reconnect: tools rediscovered, cached resources stale, subscriptions restored."""
        if not self._closed and self._primary is conn:
            self._primary_replaced(conn)

    def _watch_primary(self, conn: _Connection) -> None:
        """When the session's connection dies, replace it at once (not on next use),
        so subscriptions are restored even while other pooled connections live on."""
        add = getattr(conn.channel, "add_close_callback", None)
        if add is not None:
            add(lambda _reason: self._primary_lost(conn))

    def _primary_lost(self, conn: _Connection) -> None:
        if self._closed or self._primary is not conn:
            return
        try:
            self._primary_connection()
        except MCPError as exc:  # the next use tries again
            log.info("%s: replacing the lost session connection failed: %s", self.name, exc)

    def _keepalive(self, conn: _Connection) -> None:
        if not conn.healthy():
            raise ConnectionClosed(f"connection to {self.name} died")
        if conn.meta is None and conn.session is not None:  # the legacy era has ping
            conn.channel.request("ping", None, self.timeouts.request)

    def _open(self, opening: _Opening) -> _Connection:
        """Start a connection and handshake (on the connecting thread).

        A child process that is alive but has said nothing yet is *starting*: its
        handshake may take the start budget (``timeouts.start``); a remote server gets
        the connect timeout, retried once after a timeout. A process that exited, or a
        command that cannot run, fails at once with :class:`StartFailed` (not retried).
        """
        errors: list[BaseException] = []
        for _attempt in range(2):
            if self._closed:
                raise PoolClosed(f"client for {self.name} is closed")
            conn: _Connection | None = None
            made: Transport | Channel | None = None
            try:
                opening.phase = "starting the server" if _attempt == 0 else "starting the server again"
                made = opening.made = self._factory()
                if self._closed:  # close() may have run before ``made`` was known
                    raise PoolClosed(f"client for {self.name} is closed")
                conn = self._start(made, time.monotonic() + self.timeouts.connect)
                if self._closed:  # close() ran while the transport started: it must not live on
                    raise PoolClosed(f"client for {self.name} is closed")
                starting = conn.transport is not None and conn.transport.starting()
                budget = self.timeouts.start if starting else self.timeouts.connect
                opening.phase = (
                    "waiting for the server process to answer its handshake (it is alive, still starting)"
                    if starting
                    else "waiting for the server to answer its handshake"
                )
                if self._telemetry is not None:  # the handshake's span; the session's clock starts
                    self._telemetry.handshake(self, conn, lambda: self._handshake(conn, time.monotonic() + budget, starting))
                else:
                    self._handshake(conn, time.monotonic() + budget, starting)
                return conn
            except MCPError as exc:
                failure = None
                if isinstance(made, Transport) and not isinstance(exc, (RemoteError, AuthError, StartFailed)):
                    try:
                        failure = made.start_failure(1.0)
                    except Exception:  # pragma: no cover - best effort
                        failure = None
                if conn is not None:
                    conn.close()
                elif made is not None:
                    try:
                        made.close()
                    except Exception:
                        pass
                if failure is not None:
                    raise failure from exc
                if isinstance(exc, (RemoteError, AuthError, StartFailed, PoolClosed)) or self._closed:
                    raise  # the server answered, or cannot run: a fresh start would fare the same
                errors.append(exc)
                if not getattr(exc, "timeout", isinstance(exc, RequestTimeout)):
                    break  # SPEC: a connect is retried once after a *timeout*
        last = errors[-1]
        raise ConnectError(
            f"MCP server {self.name} did not respond: {last}", attempts=len(errors)
        ) from last

    def _start(self, made: Transport | Channel, deadline: float) -> _Connection:
        if isinstance(made, Transport):
            made.connect(max(deadline - time.monotonic(), 0.001))
            disp = Dispatcher(
                made,
                name=self.name,
                worker=self._worker,
                request_timeout=self.timeouts.request,
                progress_cap=self.timeouts.progress_cap,
            )
            disp.set_handlers(self._on_notification, self._on_request)
            disp.start()
            conn = _Connection(disp, made, made.describe())
            conn.closer = self._close_in_background
            if hasattr(made, "on_new_session"):  # Streamable HTTP: a lost session replaced in place
                made.on_new_session = lambda: self._session_renewed(conn)
            return conn
        chan = made
        chan.set_handlers(self._on_notification, self._on_request)
        return _Connection(chan, None, getattr(chan, "describe", lambda: repr(chan))())

    def _close_in_background(self, close: Callable[[], None], what: str) -> None:
        """Run one connection's close on a thread of its own, tracked so that
        :meth:`close` can wait for all of them (in parallel, bounded). At interpreter exit
        (the main thread is done: finalizers and atexit run) it closes here: a daemon thread
        would die half-way and leave the server process behind."""
        if not threading.main_thread().is_alive():
            close()
            return
        thread = threading.Thread(target=close, name=f"mcpsync-close-{self.name}", daemon=True)
        with self._lock:
            self._closers = [t for t in self._closers if t.is_alive()]
            self._closers.append(thread)
        thread.start()

    # ------------------------------------------------------------------ handshake

    def _modern_meta(self, version: str) -> dict[str, Any]:
        meta: dict[str, Any] = {
            _META_VERSION: version,
            _META_CAPS: self.client_capabilities(),
            _META_INFO: self.client_info,
        }
        if self.log_level is not None:
            meta[_META_LOG] = self.log_level
        return meta

    def _handshake(self, conn: _Connection, deadline: float, starting: bool = False) -> None:
        """Learn the server's era and session facts (``server/discover``, else
        ``initialize``). The era is decided here, once per connection: an answer that
        comes after the handshake moved on changes nothing.

        Args:
            conn: the new connection.
            deadline: the ``time.monotonic()`` instant the handshake must end by.
            starting: the server process has said nothing yet: in ``auto`` mode the
                probe then waits for the whole handshake budget (a starting server
                answers it first, whatever its era) instead of 5 s.
        """
        mode = self.mode
        if mode == "auto":
            with _ERA_LOCK:
                mode = _ERA_CACHE.get(conn.key, "auto")  # type: ignore[assignment]
        if mode in ("auto", "modern"):
            remaining = deadline - time.monotonic()
            probe = remaining if mode == "modern" or starting else max(min(remaining / 2, 5.0), 0.05)
            try:
                self._discover(conn, probe)
                self._remember(conn.key, "modern")
                return
            except (RemoteError, RequestTimeout, ProtocolError) as exc:
                if mode == "modern":
                    if isinstance(exc, RequestTimeout):
                        raise
                    raise UnsupportedProtocolVersion(
                        f"{self.name} does not speak the modern protocol ({LATEST_MODERN}): {exc}",
                        code=getattr(exc, "code", -32022),
                        data=getattr(exc, "data", None),
                    ) from exc
                log.debug("%s: server/discover failed (%s); falling back to initialize", self.name, exc)
                if isinstance(exc, RequestTimeout):
                    try:
                        self._initialize(conn, deadline)
                    except UnsupportedProtocolVersion:
                        # the probe was only late: the server took it and now serves the
                        # modern era on this connection; ask again rather than fail
                        self._discover(conn, max(deadline - time.monotonic(), 0.05))
                        self._remember(conn.key, "modern")
                        return
                    self._remember(conn.key, "legacy")
                    return
        self._initialize(conn, deadline)
        if self.mode == "auto":
            self._remember(conn.key, "legacy")

    @staticmethod
    def _remember(key: str, era: str) -> None:
        with _ERA_LOCK:
            _ERA_CACHE[key] = era

    def _discover(self, conn: _Connection, timeout: float) -> None:
        version = LATEST_MODERN
        for attempt in range(2):
            meta = self._modern_meta(version)
            try:
                raw = conn.channel.request("server/discover", {"_meta": meta}, timeout)
            except UnsupportedProtocolVersion as exc:
                supported = _supported_from(exc.data)
                choice = next((v for v in reversed(MODERN_VERSIONS) if v in supported), None)
                if choice is None or attempt:  # one retry with the listed version (even the one sent)
                    raise
                version = choice
                continue
            res: DiscoverResult = decode_result("server/discover", raw)
            supported = res.supported_versions
            if not supported:
                raise ProtocolError(f"{self.name} answered server/discover without supportedVersions")
            if supported and version not in supported:
                choice = next((v for v in reversed(MODERN_VERSIONS) if v in supported), None)
                if choice is None:
                    raise UnsupportedProtocolVersion(
                        f"{self.name} supports only {supported}", code=-32022, data={"supported": supported}
                    )
                version = choice
                meta = self._modern_meta(version)
            conn.meta = meta
            conn.session = ServerSession(
                era="modern",
                protocol_version=version,
                capabilities=res.capabilities,
                server_info=res.server_info,
                instructions=res.instructions,
                meta=dict(res.meta or {}),
                fresh_until=time.monotonic() + res.ttl_ms / 1000.0 if res.ttl_ms else None,
            )
            if conn.transport is not None:
                conn.transport.set_protocol_version(version)
            return
        raise UnsupportedProtocolVersion(f"{self.name}: no mutually supported protocol version", code=-32022)

    def _initialize(self, conn: _Connection, deadline: float) -> None:
        params = {
            "protocolVersion": LATEST_LEGACY,
            "capabilities": self.client_capabilities(),
            "clientInfo": self.client_info,
        }
        timeout = max(deadline - time.monotonic(), 0.05)
        raw = conn.channel.request("initialize", params, timeout)
        res: InitializeResult = decode_result("initialize", raw)
        if res.protocol_version not in LEGACY_VERSIONS:
            raise UnsupportedProtocolVersion(
                f"{self.name} answered initialize with protocol version {res.protocol_version!r}, "
                f"which this client does not support ({', '.join(LEGACY_VERSIONS)})",
                code=-32022,
                data={"supported": list(LEGACY_VERSIONS), "requested": res.protocol_version},
            )
        if conn.transport is not None:
            conn.transport.set_protocol_version(res.protocol_version)
        conn.session = ServerSession(
            era="legacy",
            protocol_version=res.protocol_version,
            capabilities=res.capabilities,
            server_info=res.server_info,
            instructions=res.instructions,
            meta=dict(res.meta or {}),
        )
        conn.channel.notify("notifications/initialized", None)
        if self.log_level is not None and res.capabilities.logging is not None:
            try:
                conn.channel.request("logging/setLevel", {"level": self.log_level}, timeout)
            except RemoteError as exc:
                log.debug("%s: logging/setLevel failed: %s", self.name, exc)

    # ------------------------------------------------------------------ requests

    def request(
        self,
        method: str,
        params: Mapping[str, Any] | None = None,
        *,
        timeout: float | None = None,
        progress: ProgressCallback | None = None,
        safe_to_retry: bool | None = None,
        tool: str | None = None,
        retry: RetryPolicy | None = None,
    ) -> Any:
        """Send any request and return its decoded result (typed where mcpsync has a type).

        The call borrows a pooled connection, runs under the server's circuit breaker and
        is retried per the retry policy (requests without side effects always; others
        only when ``safe_to_retry`` or when the attempt never left the client), within
        the call's timeout: no retry is made whose backoff would end after it. In the
        modern era the per-request ``_meta`` (protocol version, capabilities, client
        info) is added, and an unsupported-version error is answered by one retry with a
        version the server supports.
        """
        if self._closed or self._fork_gen != _fork_generation:
            self._check_usable()
        tel = self._telemetry
        if tel is not None and not tel.inside():  # one span and one duration per request
            return tel.request(self, method, params, timeout=timeout, progress=progress,
                               safe_to_retry=safe_to_retry, tool=tool, retry=retry)
        t = self.timeouts.request if timeout is None else timeout
        safe = (method in _SAFE_METHODS) if safe_to_retry is None else safe_to_retry
        if tool is None and method in DISCOVERY_METHODS:
            tool = method  # kept apart from agent calls in the metrics
        guard = self._guard
        if self._endpoint_breakers is None and guard.ready():
            # the healthy common case, flattened: the first attempt runs here; only an
            # error goes on to the guard's retry loop
            start = guard._clock()
            try:
                result = self._attempt(method, params, t, progress)
            except BaseException as exc:
                deadline = time.monotonic() - (guard._clock() - start) + t
                return guard.after_first_failure(
                    exc, lambda: self._retry_attempt(method, params, deadline, t, progress), start,
                    safe_to_retry=safe, tool=tool, retry=retry, budget=t,
                )
            guard.succeeded(tool, start)
            return result
        deadline = time.monotonic() + t
        first = [True]

        def attempt() -> Any:
            if first[0]:
                first[0] = False
                return self._attempt(method, params, t, progress)
            return self._retry_attempt(method, params, deadline, t, progress)

        return guard.call(attempt, safe_to_retry=safe, tool=tool, retry=retry, budget=t)

    @staticmethod
    def _left(deadline: float) -> float:
        """Seconds left until ``deadline``; :class:`RequestTimeout` (never sent) if none."""
        left = deadline - time.monotonic()
        if left <= 0.0:
            raise RequestTimeout("the call's time ran out before this attempt", sent=False, truncated=True)
        return left

    def _retry_attempt(
        self, method: str, params: Mapping[str, Any] | None, deadline: float, t: float, progress: ProgressCallback | None
    ) -> Any:
        """A retry gets only what is left of its call's time; when that is less than a
        whole timeout, its timeout is the call's, not a sign of an unwell server
        (``truncated``: the breaker does not count it)."""
        if self._closed:
            raise PoolClosed(f"client for {self.name} is closed")
        left = self._left(deadline)
        try:
            return self._attempt(method, params, left, progress)
        except RequestTimeout as exc:
            if left < t:
                attach_fields(exc, truncated=True)
            raise

    def _attempt(self, method: str, params: Mapping[str, Any] | None, t: float, progress: ProgressCallback | None) -> Any:
        if self._endpoint_breakers is not None:
            return self._routed_attempt(method, params, t, progress)
        pool = self._pool
        # no Lease object: this frame gives it back on every path; the wait for a
        # connection (and for it to be made) is part of the call's timeout unless the
        # pool fixes one, and the request gets what is left
        entry = pool.take_idle()
        if entry is None:
            began = time.monotonic()
            entry = pool.borrow(t if self._borrow_wait is None else self._borrow_wait)._entry
            t -= time.monotonic() - began
            if t <= 0.0:
                pool.give_back(entry)
                raise RequestTimeout(
                    f"{self.name}: the call's time ran out while it waited for a connection", sent=False, truncated=True
                )
        conn = entry.conn
        try:
            result = self._request_on(conn, method, params, t, progress)
        except BaseException:
            pool.give_back(entry, broken=not conn.alive())
            raise
        pool.give_back(entry)
        return result

    def _routed_attempt(
        self, method: str, params: Mapping[str, Any] | None, t: float, progress: ProgressCallback | None
    ) -> Any:
        """One attempt of a routed client: under the breaker of the connection's endpoint.

        A connection whose endpoint's breaker is open is retired and another borrowed
        (a new one goes to the next endpoint); after the call, a connection whose
        endpoint is no longer the router's choice is retired once idle.
        """
        router = self.router
        breakers: dict[str, CircuitBreaker] = self._endpoint_breakers  # type: ignore[assignment]
        router.probe_in_background()
        if all(b.state is BreakerState.OPEN for b in breakers.values()):
            wait = min(b.retry_after() for b in breakers.values())
            raise CircuitOpen(f"the circuit breaker of every endpoint of {self.name} is open",
                              retry_after=wait, server=self.name, state="open")
        for _ in range(self.pool.max + 2):
            lease = self._pool.borrow(t if self._borrow_wait is None else self._borrow_wait)
            conn = lease.connection
            endpoint = getattr(conn.transport, "endpoint", None)
            breaker = breakers.get(endpoint.name) if endpoint is not None else None
            if breaker is None:
                ticket = None
                break
            try:
                ticket = breaker.acquire()
                break
            except CircuitOpen:
                if breaker.state is BreakerState.OPEN:
                    lease.release(retire=True)  # the next borrow opens one elsewhere
                    continue
                ticket = None  # HALF_OPEN with its trial calls taken: run, but do not count
                break
        else:
            raise CircuitOpen(f"{self.name}: every connection leads to an endpoint behind an open breaker",
                              server=self.name, state="open")
        try:
            result = self._request_on(conn, method, params, t, progress)
        except BaseException as exc:
            if ticket is not None:
                breaker.release(ticket, exc)  # type: ignore[union-attr]
            lease.release(broken=not conn.alive(), retire=self._should_leave(endpoint, breaker))
            raise
        if ticket is not None:
            breaker.release(ticket)  # type: ignore[union-attr]
        lease.release(retire=self._should_leave(endpoint, breaker))
        return result

    def _should_leave(self, endpoint: Any, breaker: CircuitBreaker | None) -> bool:
        """Whether a routed connection should move: its breaker opened, or another
        endpoint became the router's choice (a recovered or clearly nearer one)."""
        if endpoint is None:
            return False
        if breaker is not None and breaker.state is BreakerState.OPEN:
            return True
        try:
            return bool(self.router.choose(probe=False) != endpoint)
        except ServerUnavailable:
            return False  # nowhere better to go

    def _request_on(
        self, conn: _Connection, method: str, params: Mapping[str, Any] | None, t: float, progress: ProgressCallback | None
    ) -> Any:
        for attempt in range(2):
            sent = params
            base = conn.meta
            if base is not None:
                if self.log_level is not None and base.get(_META_LOG) != self.log_level:
                    base = conn.meta = {**base, _META_LOG: self.log_level}
                p = dict(params) if params else {}
                extra = p.get("_meta")
                p["_meta"] = {**base, **extra} if extra else conn.wire_meta(base)
                sent = p
            try:
                raw = conn.channel.request(method, sent, t, progress)
            except UnsupportedProtocolVersion as exc:
                if attempt or conn.meta is None or not self._renegotiate(conn, exc):
                    raise
                continue
            result = decode_result(method, raw)
            rt = result.get("resultType") if isinstance(result, dict) else getattr(result, "result_type", None)
            if rt is None or rt == "complete":
                return result
            # MRTR rounds stay on this connection: a server may seal requestState per process
            return self._incomplete_result(method, params, raw, rt, timeout=t, progress=progress, connection=conn)
        raise UnsupportedProtocolVersion(f"{self.name}: no mutually supported protocol version", code=-32022)

    def _renegotiate(self, conn: _Connection, exc: UnsupportedProtocolVersion) -> bool:
        supported = _supported_from(exc.data)
        choice = next((v for v in reversed(MODERN_VERSIONS) if v in supported), None)
        if choice is None:
            return False
        conn.meta = self._modern_meta(choice)
        if conn.session is not None:
            conn.session.protocol_version = choice
        if conn.transport is not None:
            conn.transport.set_protocol_version(choice)
        return True

    def notify(self, method: str, params: Mapping[str, Any] | None = None) -> None:
        """Send a notification to the server (on the session-scoped connection)."""
        self._primary_connection().channel.notify(method, params)

    # ------------------------------------------------------------------ MCP methods

    def ping(self, *, timeout: float | None = None) -> None:
        """Check the server answers. Modern servers have no ``ping``; ``server/discover`` stands in."""
        if self.session.era == "modern":
            self.request("server/discover", None, timeout=timeout)
        else:
            self.request("ping", None, timeout=timeout)

    def list_tools(self, *, timeout: float | None = None, refresh: bool = False) -> list[Tool]:
        """Every tool the server offers, following ``nextCursor`` across pages.

        The first call discovers; later calls are served from the tool cache for the
        rest of the session (and across turns), until the server says its list changed,
        the connection is restored after a loss, the server's own ``ttlMs`` runs out,
        or ``refresh=True`` asks for a rediscovery. Tools keep a stable order.
        """
        if refresh:
            self._tool_cache.invalidate(self.name, EXPLICIT)
        found = self._tool_cache.fetch(self.name, lambda: self._tool_pages(timeout), self._cache_credential)
        return list(found.tools)

    def _tool_pages(self, timeout: float | None, retry: RetryPolicy | None = None) -> list[ListToolsResult]:
        def fetch(cursor: str | None) -> ListToolsResult:
            return self.request(  # type: ignore[no-any-return]
                "tools/list", {"cursor": cursor} if cursor else None, timeout=timeout, retry=retry
            )

        return list(paginate(fetch, server=self.name, method="tools/list"))

    def get_tool(self, name: str, *, timeout: float | None = None) -> Tool | None:
        """The definition of one tool, from the tool cache (discovering once if needed).

        ``call_tool`` uses it to check results against the tool's ``outputSchema``. A
        discovery made for it is bounded (at most ``timeout``, never more than 10 s, no
        retries); when it fails, the tool is reported unknown (``None``) and no new
        discovery is tried for a minute, so a server whose ``tools/list`` is broken
        slows no call down more than once a minute.
        """
        cache = self._tool_cache
        cred = self._cache_credential
        if cache.peek(self.name, cred) is None:
            if time.monotonic() < self._discovery_backoff_until:
                return None
            bound = min(timeout if timeout is not None else self.timeouts.request, 10.0)
            try:
                cache.fetch(self.name, lambda: self._tool_pages(bound, retry=RetryPolicy.NONE), cred)
            except MCPError as exc:
                self._discovery_backoff_until = time.monotonic() + 60.0
                log.info("%s: tools/list failed (%s); tool results go unchecked for a minute", self.name, exc)
                return None
        return cache.lookup(self.name, name, cred)  # type: ignore[no-any-return]

    def metrics(self) -> Any:
        """Per-server and per-tool metrics: calls, QPS, P50/P99 latency, error and
        timeout counts and rates, tool-cache hit rate (a frozen snapshot)."""
        return self._metrics.snapshot()

    def resources(self) -> Any:
        """The client's :class:`~mcpsync._resources.ResourceManager` (made on first use):
        the resource lifecycle UNKNOWN → SUBSCRIBED → CACHED → STALE → UNSUBSCRIBED."""
        with self._lock:
            if self._resources is None:
                from ._resources import ResourceManager

                self._resources = ResourceManager(self)
            return self._resources

    def call_tool(
        self,
        name: str,
        arguments: Mapping[str, Any] | None = None,
        *,
        timeout: float | None = None,
        progress: ProgressCallback | None = None,
        meta: Mapping[str, Any] | None = None,
        retry_safe: bool = False,
        task: bool | None = None,
        validate: bool = True,
    ) -> CallToolResult:
        """Call a tool and return its result.

        Args:
            name: the tool's name.
            arguments: its arguments.
            timeout: seconds to wait (default ``timeouts.request``); on expiry the server
                is told to cancel and :class:`RequestTimeout` is raised.
            progress: ``progress(progress, total, message)`` for progress notifications;
                each one resets the timer, up to ``timeouts.progress_cap``.
            meta: extra ``_meta`` for the request.
            retry_safe: allow retrying after the request may have reached the server
                (tools annotated ``readOnlyHint`` or ``idempotentHint`` are retried anyway).
            task: ``True`` returns the task handle of a task-capable tool instead of
                waiting; ``None`` (default) runs task-only tools as tasks transparently.
            validate: check ``structured_content`` against the tool's ``outputSchema``.

        Returns:
            The result; ``result.is_error`` is True when the tool itself failed.

        Raises:
            OutputSchemaError: the structured content does not match the output schema.
        """
        listed = self._tool_cache.peek(self.name, self._cache_credential)  # harness work: not counted
        definition = listed.by_name.get(name) if listed is not None else None
        cold = listed is None
        if cold:  # what the call may spend on learning the tool after its answer
            ends = time.monotonic() + (self.timeouts.request if timeout is None else timeout)
        if definition is None:
            safe: bool | Callable[[], bool] = retry_safe
            task_only = False
            if cold and not retry_safe:
                # the annotations that decide retry safety matter only after a failure:
                # the call goes out first, and the tool cache is filled only then
                safe = lambda: self._learned_safe(name, ends)  # noqa: E731
        else:
            safe, task_only = _call_facts(definition)
            safe = safe or retry_safe
        tel = self._telemetry
        if (
            tel is None
            and task is not True
            and not task_only
            and (definition is None or not validate or definition.output_schema is None)
        ):
            # the common case, kept short: nothing to validate, no task to run
            params: dict[str, Any] = {"name": name, "arguments": arguments if arguments is not None else {}}
            if meta:
                params["_meta"] = dict(meta)
            try:
                result = self.request("tools/call", params, timeout=timeout, progress=progress, tool=name, safe_to_retry=safe)
            except RemoteError as exc:
                if exc.code != URL_ELICITATION_REQUIRED:
                    if cold and task is None:
                        learned = self._learn_tool(name, ends)
                        if learned is not None and _task_only(learned):  # learned only now: run it as a task
                            return self._protocol_call_tool(  # type: ignore[return-value]
                                name, arguments, timeout=timeout, progress=progress, meta=meta, task=task,
                                validate=validate, definition=learned, tool=name, safe_to_retry=safe,
                            )
                    raise
                result = None  # the protocol path shows the URLs to the handler, then retries
            if result is not None:
                if isinstance(result, CallToolResult):
                    if cold and validate:
                        self._check_late(name, result, ends)
                    return result
                return self.wait_task(result.task, timeout=timeout)  # type: ignore[attr-defined, no-any-return]  # the server made it a task
        if tel is None:
            return self._protocol_call_tool(  # type: ignore[return-value]
                name, arguments, timeout=timeout, progress=progress, meta=meta, task=task, validate=validate,
                definition=definition, tool=name, safe_to_retry=safe,
            )
        result = self._protocol_call_tool(  # request() makes the span of each tools/call
            name, arguments, timeout=timeout, progress=progress, meta=meta,
            task=task, validate=validate, definition=definition, tool=name, safe_to_retry=safe,
        )
        if cold and validate and isinstance(result, CallToolResult):
            self._check_late(name, result, ends)
        return result  # type: ignore[return-value]

    def _learn_tool(self, name: str, ends: float) -> Tool | None:
        """The definition of ``name`` learned after its call's answer or failure: a
        discovery bounded by what is left of the call's time (at most 10 s, no retries)."""
        left = ends - time.monotonic()
        if left <= 0.05:
            return self._tool_cache.lookup(self.name, name, self._cache_credential) if self._tool_cache.peek(
                self.name, self._cache_credential) is not None else None
        return self.get_tool(name, timeout=left)

    def _learned_safe(self, name: str, ends: float) -> bool:
        """After a failed first call of ``name`` on a cold tool cache: whether its
        annotations make it safe to retry."""
        definition = self._learn_tool(name, ends)
        return definition is not None and _call_facts(definition)[0]

    def _check_late(self, name: str, result: CallToolResult, ends: float) -> None:
        """Check a first call's result against the tool's ``outputSchema``, learned now
        that there is a result to check (only when it carries structured content)."""
        if result.structured_content is None or result.is_error:
            return
        learned = self._learn_tool(name, ends)
        if learned is not None and learned.output_schema is not None:
            self.check_tool_result(learned, result)

    # ------------------------------------------------------------------ incoming

    def on_notification(self, method: str, handler: Callable[[Mapping[str, Any] | None], None]) -> None:
        """Call ``handler(params)`` (on the worker) for every notification ``method``."""
        with self._lock:
            self._notification_handlers.setdefault(method, []).append(handler)

    def _on_notification(self, method: str, params: Mapping[str, Any] | None) -> None:
        if method == "notifications/tools/list_changed":
            self._discovery_backoff_until = 0.0
            self._tool_cache.invalidate(self.name, LIST_CHANGED)
        self._protocol_notification(method, params)
        for handler in list(self._notification_handlers.get(method, ())):
            try:
                handler(params)
            except Exception:
                log.exception("handler for %s raised", method)

    def diagnostics(self) -> Diagnostics:
        """A frozen snapshot of connections, pool, session, breaker, subscriptions and tool cache."""
        return _diagnostics_snapshot(self)


def _call_facts(tool: Tool) -> tuple[bool, bool]:
    """(retry safe, task-only) of a listed tool: worked out on its first call and kept
    on the Tool, since call_tool asks on every call."""
    facts: tuple[bool, bool] | None = tool.__dict__.get("_mcpsync_call_facts")
    if facts is None:
        facts = tool.__dict__["_mcpsync_call_facts"] = (tool_is_retry_safe(tool), _task_only(tool))
    return facts


def _task_only(tool: Tool) -> bool:
    execution = tool.execution
    return bool(execution) and execution.get("taskSupport") == "required"  # type: ignore[union-attr]


class _CacheHits:
    """The tool cache's view of the metrics sink: hits and misses only."""

    __slots__ = ("record_cache",)

    def __init__(self, sink: Any) -> None:
        self.record_cache = getattr(sink, "record_cache", lambda *a: None)

    def record_discovery(self, server: str, *args: Any, **kwargs: Any) -> None:
        pass


def _supported_from(data: Any) -> list[str]:
    if isinstance(data, Mapping):
        sup = data.get("supported") or data.get("supportedVersions") or []
        if isinstance(sup, list):
            return [str(v) for v in sup]
    return []
