"""The Client: typed, blocking MCP methods over either protocol era.

A facade, and the one place where its parts are made and joined (``Client.__init__``): each
part is given the frozen :class:`~mcpsync._settings.Settings`, the collaborators it uses and
callbacks for what concerns another part, never the Client. Each MCP method hands its work
to a part: ``_session`` (:mod:`mcpsync._session`: the connection state and every request; the
handshake is :mod:`mcpsync._handshake`), ``_tools``, ``_tasks``, ``_subscriptions``,
``_handlers`` (requests and notifications from the server), ``_reads`` (cacheable reads,
modern ``ttlMs``) and ``_skills``.
"""

from __future__ import annotations

import os
from typing import TYPE_CHECKING, Any, Callable, Final, Literal, Mapping, Sequence

from ._breaker import BreakerState, CircuitBreaker
from ._cache import RECONNECT, CacheHits, ResultCache, ToolCache
from ._channel import ProgressCallback
from ._constants import CLIENT_DOES_NOT_TRAVEL
from ._diagnostics import Diagnostics, snapshot as _diagnostics_snapshot
from ._extensions import SKILLS_EXTENSION, Extension, wire_extensions
from ._errors import ServerUnavailable
from ._guard import Recorder
from ._losses import SessionLost
from ._handlers import LEVELS, Handlers
from ._handshake import LATEST_LEGACY, LATEST_MODERN, LEGACY_VERSIONS, MODERN_VERSIONS, ServerSession, default_client_info
from ._messages import CallToolResult, Implementation, ServerCapabilities, Tool
from ._metrics import MetricsRecorder, MetricsSnapshot, fan_out
from ._policies import BreakerPolicy, PoolLimits, ReconnectPolicy, RetryPolicy, Timeouts
from ._pool import PoolStats
from ._protocol_types import CompleteResult, Completion, GetPromptResult, Prompt, ReadResourceResult, Resource
from ._protocol_types import ResourceTemplate, Task, completion_params, prompt_params
from ._reads import Later, Reads
from ._routing import Attempts, Endpoint, Router
from ._session import Session
from ._settings import InPart, Mode, Setting, Settings
from ._skills import Skill, SkillInfo, Skills
from ._subscriptions import Subscription, Subscriptions
from ._tasks import Tasks, ToolTask
from ._tools import ParamHeaders, Tools
from .transports._base import Transport
from .transports._factory import TRANSPORT_OPTIONS, TransportFactory, Verify, build as build_transport, single_use

__all__ = ["Client", "ServerSession", "MODERN_VERSIONS", "LEGACY_VERSIONS", "LATEST_MODERN", "LATEST_LEGACY"]

if TYPE_CHECKING:
    from ._config import ServerConfig
    from ._resources import ResourceManager


class Client:
    """A blocking, thread-safe MCP client for one server.

    Every public method blocks until it has a result or raises one of the errors of
    :mod:`mcpsync._errors`; one instance may be shared by any number of threads. The
    connection opens on first use (or :meth:`connect`). Every constructor takes its
    transport's options, a ``profile`` (``"minimal"``, ``"professional"``,
    ``"enterprise"``: presets of the options below, each overridable) and these options:

    Args:
        transport: a zero-argument callable returning a fresh :class:`~mcpsync.transports.Transport`
            (or in-process channel) per connection; or one ready ``Transport``, used once.
        mode: ``"auto"`` (probe with ``server/discover``, fall back to ``initialize``),
            ``"modern"`` (2026-07-28 only) or ``"legacy"`` (the initialize handshake).
        timeouts: the timeout layers (connect 10 s, request 30 s, ...).
        retry: call retry policy.
        breaker: circuit breaker policy.
        pool: connections (MCP sessions); default one (:attr:`PoolLimits.SESSION`) for every thread.
        sampling_handler: ``handler(params) -> result`` for ``sampling/createMessage``.
        elicitation_handler: ``handler(params) -> result`` for ``elicitation/create``.
        roots: a list of roots (``{"uri": ..., "name": ...}``) or a callable returning one.
        logging_handler: ``handler(params)`` for server log messages (default: ``logging``).
        log_level: level asked of the server for its log messages (None: not asked).
        client_info: name/version this client reports.
        name: the server's name in logs and errors.
        reconnect: the reconnection schedule after a lost connection.
        record: an extra metrics sink ``record(server, tool, start, end, outcome)``.
        on_breaker_change: ``callback(old, new)`` on circuit breaker transitions.
        on_unavailable: ``callback(error)`` once the server is marked unavailable.
        on_session_lost: ``callback(event)`` (a :class:`SessionLost`, on the worker) when the
            server's process or session was replaced: what it held is gone (also logged).
        telemetry: ``True`` (the ``otel`` extra) or a :class:`mcpsync.Telemetry`:
            OpenTelemetry spans and metrics, trace context in each request's ``_meta``.
        credential: the authorization context ``private`` cache entries are keyed by.
        metrics: record per-call metrics for :meth:`metrics`.
        push_updates: False refuses ``subscribe`` (resources then live by TTL alone).
        extensions: the :class:`~mcpsync.Extension` values (or identifiers) declared in the
            client capabilities; default :attr:`Extension.DEFAULTS` (tasks and skills).
        routing: a routed client's attempt strategy (:meth:`routed` makes it).

    Example:
        >>> with Client.stdio("python", ["-m", "mcpsync.server.demo"]) as client:   # doctest: +SKIP
        ...     client.call_tool("add", {"a": 1, "b": 2}).structured_content
        {'result': 3}
    """

    # the policies it was built with, read-only (``client.retry = ...`` raises)
    mode, timeouts, retry = Setting[Mode](), Setting[Timeouts](), Setting[RetryPolicy]()
    breaker, pool = Setting[BreakerPolicy](), Setting[PoolLimits]()
    # what may change on a live client, kept by the part that uses it (handler_timeout: seconds a
    # sampling/elicitation/roots handler may take, None: the request timeout; max_input_rounds:
    # InputRequiredResult rounds per call, 8; listen_timeout: seconds a subscriptions/listen stays
    # open before it is re-sent, 120; cache_results: honour modern ttlMs/cacheScope, True)
    sampling_handler = InPart[Callable[[Mapping[str, Any]], Any] | None]("_handlers")
    elicitation_handler = InPart[Callable[[Mapping[str, Any]], Any] | None]("_handlers")
    roots = InPart[Sequence[Mapping[str, Any]] | Callable[[], Sequence[Mapping[str, Any]]] | None]("_handlers")
    logging_handler = InPart[Callable[[Mapping[str, Any]], None] | None]("_handlers")
    log_level = InPart[str | None]("_handlers")
    handler_timeout = InPart[float | None]("_handlers")
    max_input_rounds = InPart[int]("_session")
    listen_timeout = InPart[float]("_subscriptions")
    push_updates = InPart[bool]("_subscriptions")
    cache_results = InPart[bool]("_reads")

    def __init__(
        self, transport: TransportFactory | Transport, *, mode: Mode = "auto", timeouts: Timeouts = Timeouts.DEFAULT,
        retry: RetryPolicy = RetryPolicy.DEFAULT, breaker: BreakerPolicy = BreakerPolicy.DEFAULT,
        pool: PoolLimits | None = None, sampling_handler: Callable[[Mapping[str, Any]], Any] | None = None,
        elicitation_handler: Callable[[Mapping[str, Any]], Any] | None = None,
        roots: Sequence[Mapping[str, Any]] | Callable[[], Sequence[Mapping[str, Any]]] | None = None,
        logging_handler: Callable[[Mapping[str, Any]], None] | None = None, log_level: str | None = None,
        client_info: Mapping[str, Any] | None = None, name: str | None = None,
        reconnect: ReconnectPolicy = ReconnectPolicy.DEFAULT, record: Recorder | None = None,
        on_breaker_change: Callable[[BreakerState, BreakerState], None] | None = None,
        on_unavailable: Callable[[ServerUnavailable], None] | None = None, telemetry: Any = None,
        credential: Any = None, metrics: bool = True, push_updates: bool = True,
        extensions: Sequence[Extension | str] | None = None,
        on_session_lost: Callable[[SessionLost], None] | None = None, routing: Attempts | None = None,
    ) -> None:
        if isinstance(transport, Transport):
            factory, pool = single_use(transport), PoolLimits.SINGLE
        elif callable(transport):
            factory = transport
        else:
            raise TypeError("transport must be a Transport or a zero-argument callable returning one")
        self.settings: Final[Settings] = (settings := Settings(
            name=name or "server", mode=mode, timeouts=timeouts, retry=retry, breaker=breaker,
            pool=PoolLimits.SESSION if pool is None else pool, client_info=dict(client_info or default_client_info()),
            credential=credential, push_updates=push_updates, extensions=wire_extensions(extensions),
        ))
        self.client_info = settings.client_info
        self.name = settings.name
        self._metrics = MetricsRecorder()
        if telemetry is True:
            from ._otel import telemetry as otel_telemetry

            telemetry = otel_telemetry()
        self._telemetry = tel = telemetry or None
        sinks = (self._metrics if metrics else None, tel.recorder if tel is not None else None, record)
        sink = fan_out(*sinks) if any(x is not None for x in sinks) else None
        # the parts, each given what it uses; a callback to a part made later names it when called
        # (every part exists before the first connection, hence before any callback runs)
        session: Session
        subscriptions: Subscriptions
        tools: Tools
        self._tool_cache = tool_cache = ToolCache(metrics=CacheHits(sink))
        self._results = results = ResultCache()
        self._resources = resources = Later()  # the ResourceManager, made on first use (resources())
        received = (lambda method, params, run: tel.received(session, method, params, run)) if tel is not None else None
        self._handlers = handlers = Handlers(
            settings, tools_changed=lambda: tools.list_changed(), notice=lambda m, p: subscriptions.notice(m, p),
            route=lambda m, p: subscriptions.notification(m, p), received=received, sampling_handler=sampling_handler,
            elicitation_handler=elicitation_handler, roots=roots, logging_handler=logging_handler, log_level=log_level,
        )
        headers = ParamHeaders()

        def replaced() -> None:  # the session connection was replaced: the server may have restarted
            tool_cache.invalidate(settings.name, RECONNECT)
            resources.reconnected(settings.name)

        def closing() -> None:
            resources.close()
            subscriptions.stop()

        self._session = session = Session(
            settings, factory, handlers, param_headers=headers, replaced=replaced,
            restore=lambda first: subscriptions.restore(first), closing=closing, reconnect=reconnect, record=sink,
            on_breaker_change=on_breaker_change, on_unavailable=on_unavailable, telemetry=tel,
            on_session_lost=on_session_lost, attempts=routing, owner=self,
        )
        self._subscriptions = subscriptions = Subscriptions(settings, session, results)
        self._reads = reads = Reads(settings, session, results)
        self._tasks = tasks = Tasks(settings, session, handlers.answer)
        self._tools = tools = Tools(settings, session, tool_cache, tasks, headers, handlers.url_prerequisites)
        self._skills = Skills(server=settings.name, request=session.request, read_resource=reads.read_resource,
                              declaration=lambda: (session.facts().capabilities.extensions or {}).get(SKILLS_EXTENSION))

    # ------------------------------------------------------------------ constructors

    @classmethod
    def stdio(
        cls, command: str, args: Sequence[str] = (), *, env: Mapping[str, str] | None = None,
        cwd: str | os.PathLike[str] | None = None, max_message_size: int | None = None,
        profile: str | None = None, **options: Any,
    ) -> "Client":
        """A server run as a child process: ``command`` with ``args`` in ``cwd``, ``env`` over a minimal
        environment (HOME, LOGNAME, PATH, SHELL, TERM, USER; ``inherit_env=True``: all of this process's),
        messages up to ``max_message_size`` bytes. The ``"minimal"`` profile starts a process per call
        (``pool=PoolLimits.PER_CALL``)."""
        options.update(env=env, cwd=cwd, max_message_size=max_message_size)
        return cls._build("stdio", (command, args), profile, options)

    @classmethod
    def http(
        cls, url: str, *, headers: Mapping[str, str] | None = None, auth: Any = None, verify: Verify = True,
        cert: str | tuple[str, str] | None = None, proxy: str | None = None, pool_size: int = 10,
        max_message_size: int | None = None, sse_fallback: bool = True, profile: str | None = None, **options: Any,
    ) -> "Client":
        """A client for a remote server at ``url``: Streamable HTTP (both eras), falling back to HTTP+SSE
        (2024-11-05) when the URL refuses POSTs (unless ``sse_fallback`` is False). ``headers`` go with every
        request; ``auth`` is a hook such as :class:`mcpsync.auth.OAuth`; ``verify``: True, False, ``"system"``, a CA
        file or directory, or an ``ssl.SSLContext``; ``cert``: a client certificate (a PEM file, or ``(certfile,
        keyfile)``); ``proxy``: a forward proxy URL; ``pool_size``: sockets per origin, the client's own."""
        options.update(headers=headers, auth=auth, verify=verify, cert=cert, proxy=proxy, pool_size=pool_size,
                       max_message_size=max_message_size, sse_fallback=sse_fallback)
        return cls._build("http", url, profile, options)

    @classmethod
    def sse(
        cls, url: str, *, headers: Mapping[str, str] | None = None, auth: Any = None, verify: Verify = True,
        cert: str | tuple[str, str] | None = None, proxy: str | None = None, pool_size: int = 10,
        max_message_size: int | None = None, profile: str | None = None, **options: Any,
    ) -> "Client":
        """A client for a server speaking HTTP+SSE (2024-11-05) at the stream ``url``; options as for :meth:`http`."""
        options.update(headers=headers, auth=auth, verify=verify, cert=cert, proxy=proxy, pool_size=pool_size,
                       max_message_size=max_message_size)
        return cls._build("sse", url, profile, options)

    @classmethod
    def websocket(
        cls, url: str, *, headers: Mapping[str, str] | None = None, token: str | None = None, auth: Any = None,
        sslopt: Mapping[str, Any] | None = None, max_message_size: int | None = None,
        profile: str | None = None, **options: Any,
    ) -> "Client":
        """A client for a server reached over WebSocket (subprotocol ``mcp``; ``mcpsync bridge
        --websocket`` serves any server so): ``headers``, a bearer ``token`` and an ``auth``
        hook's headers go with each handshake; ``sslopt``: websocket-client's TLS options."""
        options.update(headers=headers, token=token, auth=auth, sslopt=sslopt, max_message_size=max_message_size)
        return cls._build("websocket", url, profile, options)

    @classmethod
    def grpc(
        cls, target: str, *, token: str | None = None, auth: Any = None,
        metadata: Sequence[tuple[str, str]] | None = None, secure: bool = False,
        root_certificates: bytes | None = None, scope: str = "session",
        max_message_size: int | None = None, profile: str | None = None, **options: Any,
    ) -> "Client":
        """A client for a server reached over gRPC at ``host:port`` (``mcpsync bridge
        --grpc`` serves one). A bearer ``token`` and an ``auth`` hook's headers go as
        lowercase metadata with extra ``metadata``; ``secure`` uses TLS
        (``root_certificates`` to trust a private CA); ``scope`` is ``"session"`` (one bidi
        stream per connection, both eras) or ``"request"`` (one RPC per request, modern)."""
        options.update(token=token, auth=auth, metadata=metadata, secure=secure, root_certificates=root_certificates,
                       scope=scope, max_message_size=max_message_size)
        return cls._build("grpc", target, profile, options)

    @classmethod
    def local(cls, registry: Any, *, profile: str | None = None, **options: Any) -> "Client":
        """A client for a server in this process: a :class:`mcpsync.server.Registry` (no
        serialisation, no thread hop), or an ``mcp`` SDK or FastMCP server object run on a
        private event loop thread (:mod:`mcpsync.transports.inprocess`; ``close()`` stops it)."""
        return cls._build("local", registry, profile, options)

    @classmethod
    def from_config(
        cls, path: str | os.PathLike[str] | Mapping[str, Any] | ServerConfig, name: str | None = None, **options: Any
    ) -> "Client":
        """A client for server ``name`` of an ``mcpServers`` file (``${VAR}`` expanded from
        ``environ``, default the environment), of the same configuration as a dict, or for
        one loaded :class:`~mcpsync.ServerConfig` (then without ``name``). Options given
        here win over the file's; ``allow_disabled=True`` uses a ``"disabled"`` entry.

        Raises:
            ConfigError: the file or the entry is invalid (the message names the field),
                or the entry is disabled.
        """
        from ._config import open_client

        client: Client = open_client(cls, path, name, options)
        return client

    @classmethod
    def routed(
        cls, endpoints: Sequence[Endpoint | str], make: Callable[[Endpoint], Transport], *, region: str | None = None,
        probe: bool = True, router_options: Mapping[str, Any] | None = None, **options: Any,
    ) -> "Client":
        """A client for a server with several ``endpoints`` (:class:`mcpsync.Endpoint` values
        or names), ``make(endpoint)`` building a fresh transport for one. New connections go
        to the nearest available endpoint (``region`` first, else by round-trip, measured
        first if ``probe``); each endpoint has its own breaker (:attr:`endpoint_breakers`):
        calls fail over when one opens and move back when a better one recovers.
        ``router_options`` go to the :class:`~mcpsync._routing.Router`; calls raise
        :class:`NoEndpointAvailable` when no endpoint is usable."""
        from ._routing import routed_client

        client: Client = routed_client(cls, endpoints, make, region=region, probe=probe, router_options=router_options, **options)
        return client

    @classmethod
    def _build(cls, kind: str, target: Any, profile: str | None, options: dict[str, Any]) -> "Client":
        """Every constructor's body: the profile's options under the caller's, the transport's
        options to :func:`~mcpsync.transports._factory.build`, the rest to the Client."""
        if profile is not None:
            from ._profiles import resolve

            options, _flags = resolve(profile, kind, options)
        transport_options = {k: options.pop(k) for k in TRANSPORT_OPTIONS[kind] & options.keys()}
        built = build_transport(kind, target, transport_options, timeouts=options.get("timeouts", Timeouts.DEFAULT))
        options.setdefault("name", built.name)
        if built.pool is not None:
            options.setdefault("pool", built.pool)
        return cls(built.factory, **options)

    # ------------------------------------------------------------------ lifecycle and state

    def __reduce_ex__(self, protocol: object) -> Any:
        raise TypeError(CLIENT_DOES_NOT_TRAVEL.format(name=self.name))  # a ClientSpec does (mcpsync._spec)

    def __enter__(self) -> "Client":
        self.connect()
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def connect(self, *, timeout: float | None = None) -> ServerSession:
        """Open the connection now, waiting up to ``timeout`` (default ``timeouts.start``);
        then :class:`ConnectError` says what it waited for, and the start goes on."""
        conn = self._session.primary_connection(self.timeouts.start if timeout is None else timeout)
        return conn.session  # type: ignore[return-value]

    def close(self) -> None:
        """Close every connection and stop the client's threads. Idempotent."""
        self._session.close()

    @property
    def closed(self) -> bool:
        return self._session.closed

    @property
    def session(self) -> ServerSession:
        """Facts about the server (era, version, capabilities); connects if needed."""
        return self._session.facts()

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
        return self._session.guard.breaker.state

    @property
    def endpoint_breakers(self) -> Mapping[str, CircuitBreaker]:
        """A routed client's circuit breakers, by endpoint name (empty otherwise)."""
        attempts = self._session.attempts
        return dict(attempts.breakers) if attempts is not None else {}

    @property
    def router(self) -> Router | None:
        """The :class:`~mcpsync._routing.Router` of a client made by :meth:`routed`."""
        attempts = self._session.attempts
        return attempts.router if attempts is not None else None

    @property
    def unavailable(self) -> bool:
        """True once reconnection gave up; calls raise ServerUnavailable until :meth:`reconnect`."""
        return self._session.reconnect.unavailable

    def reconnect(self) -> None:
        """Clear the unavailable mark and the breaker; the next call connects afresh."""
        self._session.reconnect.reset()
        self._session.guard.breaker.reset()

    def pool_stats(self) -> PoolStats:
        """Counters of the connection pool (created, closed, borrowed, returned, in use)."""
        return self._session.pool.stats()

    def metrics(self) -> MetricsSnapshot:
        """Per-server and per-tool calls, QPS, P50/P99, errors, timeouts, cache hit rate (frozen)."""
        return self._metrics.snapshot()

    def diagnostics(self) -> Diagnostics:
        """A frozen snapshot of connections, pool, session, breaker, subscriptions and tool cache."""
        return _diagnostics_snapshot(self._session, self._subscriptions, self._tools)

    # ------------------------------------------------------------------ requests

    def request(
        self, method: str, params: Mapping[str, Any] | None = None, *, timeout: float | None = None,
        progress: ProgressCallback | None = None, safe_to_retry: bool | None = None, tool: str | None = None,
        retry: RetryPolicy | None = None,
    ) -> Any:
        """Send any request and return its decoded result (typed where mcpsync has a type), under
        the breaker, retried per the retry policy (safe requests, or never sent) within ``timeout``."""
        return self._session.request(method, params, timeout, progress, safe_to_retry, tool, retry)

    def notify(self, method: str, params: Mapping[str, Any] | None = None) -> None:
        """Send a notification to the server (on the session-scoped connection)."""
        self._session.notify(method, params)

    def ping(self, *, timeout: float | None = None) -> None:
        """Check the server answers. Modern servers have no ``ping``; ``server/discover`` stands in."""
        self.request("server/discover" if self.session.era == "modern" else "ping", None, timeout=timeout)

    # ------------------------------------------------------------------ tools and tasks

    def list_tools(self, *, timeout: float | None = None, refresh: bool = False) -> list[Tool]:
        """Every tool (every page, stable order), from the tool cache after the first call until
        the server says its list changed, a lost connection is restored, ``ttlMs``, or ``refresh``."""
        return self._tools.list_tools(timeout, refresh)

    def get_tool(self, name: str, *, timeout: float | None = None) -> Tool | None:
        """One tool's definition, from the tool cache; a discovery for it is bounded (at most
        10 s, no retries), and after a failed one the tool is ``None`` for a minute."""
        return self._tools.get(name, timeout)

    def call_tool(
        self, name: str, arguments: Mapping[str, Any] | None = None, *, timeout: float | None = None,
        progress: ProgressCallback | None = None, meta: Mapping[str, Any] | None = None, retry_safe: bool = False,
        task: bool | None = None, validate: bool = True,
    ) -> CallToolResult:
        """Call a tool and return its result (``result.is_error``: the tool itself failed); a
        task the server makes of the call (tasks extension) is followed to its end.

        Args:
            timeout: seconds (default ``timeouts.request``) for all of it, a task's polls
                included; on expiry the request or task is cancelled (:class:`RequestTimeout`).
            progress: ``progress(progress, total, message)``; each resets the timer, up
                to ``timeouts.progress_cap``.
            meta: extra ``_meta`` for the request.
            retry_safe: retry even after the request may have reached the server (tools
                annotated ``readOnlyHint`` or ``idempotentHint`` are anyway).
            task: True runs the call as a task and waits for its result; None runs
                2025-11-25 task-only tools so transparently; False never (the task
                itself, to poll or cancel: :meth:`call_tool_task`).
            validate: check ``structured_content`` against the tool's ``outputSchema``
                (else :class:`OutputSchemaError`).
        """
        return self._tools.call(name, arguments, timeout, progress, meta, retry_safe, task, validate)

    def check_tool_result(self, tool: Tool | str, result: CallToolResult) -> CallToolResult:
        """Check ``result.structured_content`` against the tool's ``outputSchema`` (not for
        ``isError`` results); raises :class:`OutputSchemaError` when it does not match."""
        return self._tools.check_result(tool, result)

    def call_tool_task(
        self, name: str, arguments: Mapping[str, Any] | None = None, *, ttl: int | None = None,
        timeout: float | None = None, meta: Mapping[str, Any] | None = None,
    ) -> ToolTask:
        """Call a tool and hand back its :class:`~mcpsync.ToolTask` to poll, cancel or wait
        on (finished at once when the server answered without a task). 2025-11-25 servers
        are asked for a task (``ttl`` ms); in the 2026-07-28 era the server decides."""
        return self._tasks.start(name, arguments, ttl=ttl, timeout=timeout, meta=meta)

    def task(self, task_id: str, *, tool: str | None = None) -> ToolTask:
        """A :class:`~mcpsync.ToolTask` for a task id kept from earlier (e.g. before a restart)."""
        return self._tasks.resume(task_id, tool)

    def list_tasks(self, *, timeout: float | None = None) -> list[Task]:
        """The tasks the server keeps for this client (``tasks/list``: 2025-11-25 servers only)."""
        return self._tasks.list_tasks(timeout)

    # ------------------------------------------------------------------ resources, prompts, completion, skills

    def list_resources(self, *, timeout: float | None = None, refresh: bool = False) -> list[Resource]:
        """Every resource the server lists (every page; ``refresh``: skip a cached list)."""
        return self._reads.paged("resources/list", "resources", timeout, refresh)

    def list_resource_templates(self, *, timeout: float | None = None, refresh: bool = False) -> list[ResourceTemplate]:
        """Every resource template (every page)."""
        return self._reads.paged("resources/templates/list", "resource_templates", timeout, refresh)

    def read_resource(self, uri: str, *, timeout: float | None = None, refresh: bool = False) -> ReadResourceResult:
        """Read one resource (``.text`` joins its text items, ``.blob`` decodes blobs);
        ``refresh`` skips a cached copy (modern ``ttlMs``). Raises :class:`ResourceNotFound`
        when the server has none (-32602, or -32002 from older servers)."""
        return self._reads.read_resource(uri, timeout=timeout, refresh=refresh)

    def list_prompts(self, *, timeout: float | None = None, refresh: bool = False) -> list[Prompt]:
        """Every prompt the server offers (every page)."""
        return self._reads.paged("prompts/list", "prompts", timeout, refresh)

    def get_prompt(self, name: str, arguments: Mapping[str, Any] | None = None, *, timeout: float | None = None) -> GetPromptResult:
        """Render a prompt with its arguments (values are sent as strings)."""
        return self.request("prompts/get", prompt_params(name, arguments), timeout=timeout)  # type: ignore[no-any-return]

    def complete(
        self, ref: Prompt | ResourceTemplate | Mapping[str, Any] | str, argument: Mapping[str, Any] | tuple[str, str],
        *, context: Mapping[str, Any] | None = None, timeout: float | None = None,
    ) -> Completion:
        """Completions (``values``, ``total``, ``has_more``) of one ``argument``
        (``(name, partial_value)`` or ``{"name": ..., "value": ...}``) of ``ref``: a
        :class:`Prompt`, a :class:`ResourceTemplate`, a wire reference, a prompt name or a
        URI template (containing ``://`` or ``{``); ``context``: arguments already chosen."""
        res: CompleteResult = self.request("completion/complete", completion_params(ref, argument, context), timeout=timeout)
        return res.completion

    def list_skills(self, *, timeout: float | None = None) -> list[SkillInfo]:
        """Every valid skill the server lists (``skills/list``, every page); reads no file."""
        return self._skills.list_skills(timeout)

    def get_skill(self, uri: str, *, timeout: float | None = None) -> SkillInfo:
        """The entry of the skill whose ``SKILL.md`` is at ``uri`` (``skills/get``), listed or not."""
        return self._skills.get_skill(uri, timeout)

    def read_skill(self, skill: str | SkillInfo, *, timeout: float | None = None) -> Skill:
        """Load one skill (a :class:`SkillInfo`, its ``SKILL.md`` URI, or a listed name): its
        ``SKILL.md`` read and checked against the entry (else :class:`SkillIntegrityError`)."""
        return self._skills.load(skill, timeout)

    def read_directory(self, uri: str, *, timeout: float | None = None) -> list[Resource]:
        """A directory's children (``resources/directory/read``; the skills ``directoryRead``)."""
        return self._skills.read_directory(uri, timeout)

    def clear_result_cache(self) -> None:
        """Forget every cached result (resources, prompts, resource contents)."""
        self._results.clear()

    def resources(self) -> ResourceManager:
        """The client's :class:`~mcpsync._resources.ResourceManager` (made on first use)."""
        with self._session.lock:
            if self._resources.made is None:
                from ._resources import ResourceManager

                self._resources.made = ResourceManager(self)
            return self._resources.made

    # ------------------------------------------------------------------ subscriptions, roots, logging, notifications

    def subscribe(self, uri: str, callback: Callable[[str], None], *, timeout: float | None = None) -> Subscription:
        """Call ``callback(uri)`` (on the worker) whenever the server says ``uri`` changed,
        until the :class:`Subscription` is closed. Legacy era: ``resources/subscribe``;
        modern: a ``subscriptions/listen`` stream, acknowledged before this returns.
        :class:`RemoteError` if the server refuses, or with ``push_updates=False`` (-32601)."""
        return self._subscriptions.subscribe(uri, callback, timeout)

    def unsubscribe(self, uri: str, callback: Callable[[str], None] | None = None, *, timeout: float | None = None) -> None:
        """Stop ``callback`` (or every callback, if None) watching ``uri``."""
        self._subscriptions.unsubscribe(uri, callback, timeout)

    def on_list_changed(self, kind: str, callback: Callable[[str], None], *, timeout: float | None = None) -> None:
        """Call ``callback(kind)`` (on the worker, after cached lists are dropped) whenever the server's
        ``"tools"``, ``"prompts"`` or ``"resources"`` list changes (``timeout``: a modern listen's ack)."""
        self._subscriptions.on_list_changed(kind, callback, timeout)

    def remove_list_changed(self, kind: str, callback: Callable[[str], None]) -> None:
        """Stop a callback given to :meth:`on_list_changed`."""
        self._subscriptions.remove_list_changed(kind, callback)

    def client_capabilities(self) -> dict[str, Any]:
        """Capabilities declared to the server: those whose handler was given, and the extensions."""
        return self._handlers.capabilities()

    def set_roots(self, roots: Sequence[Mapping[str, Any]] | Callable[[], Sequence[Mapping[str, Any]]]) -> None:
        """Replace the roots; a legacy-era server is told if the client declared roots."""
        declared = self.roots is not None
        self.roots = roots
        if declared and not self.closed and self.session.era == "legacy":
            self.notify("notifications/roots/list_changed", None)

    def set_log_level(self, level: str, *, timeout: float | None = None) -> None:
        """Ask for server log messages at ``level`` and up (legacy: ``logging/setLevel``; modern: ``_meta``)."""
        if level not in LEVELS:
            raise ValueError(f"unknown log level {level!r}; one of {', '.join(LEVELS)}")
        self.log_level = level
        if self.session.era == "legacy":
            self._subscriptions.request("logging/setLevel", {"level": level}, timeout)

    def on_notification(self, method: str, handler: Callable[[Mapping[str, Any] | None], None]) -> None:
        """Call ``handler(params)`` (on the worker) for every notification ``method``."""
        self._handlers.add_notification_handler(method, handler)

