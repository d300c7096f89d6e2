"""A read-only snapshot of a :class:`~mcpsync.Client`'s inner state.

``Client.diagnostics()`` answers the questions an operator (or a test) asks of a live
client -- how many connections, which server processes, which session, what the breaker
and the reconnect schedule went through, what is subscribed, what the tool cache holds --
without reaching into private attributes. The snapshot is a frozen value taken at one
moment: it never connects, never blocks on the network and never changes the client.

:func:`snapshot` reads the public state of the parts the Client gives it (its session,
subscriptions and tools); when the client is restructured, only :func:`snapshot` changes
and the callers keep working.

Example:
    >>> from mcpsync import Client
    >>> with Client.stdio("python", ["-m", "mcpsync.server.demo"]) as client:  # doctest: +SKIP
    ...     client.ping()
    ...     d = client.diagnostics()
    ...     print(d.era, d.pids, d.pool.size)
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from ._cache import CacheStats
from ._breaker import BreakerState
from ._losses import SessionLost
from ._pool import PoolStats

if TYPE_CHECKING:
    from ._session import Session
    from ._subscriptions import Subscriptions
    from ._tools import Tools

__all__ = ["ConnectionDiagnostics", "Diagnostics", "snapshot"]


@dataclass(frozen=True, slots=True)
class ConnectionDiagnostics:
    """One pooled connection.

    Attributes:
        key: the pool's name for it (stable while it lives).
        primary: it carries the session-scoped state (subscriptions, listen streams).
        alive: the channel has not failed or been closed (cheap check, no syscall).
        in_flight: calls the pool has lent it that have not come back.
        pending: requests sent on it still waiting for their answer.
        dropped: messages it received and dropped (unknown ids, late answers, bad frames).
        transport: the transport kind (``"stdio"``, ``"streamable-http"``, ...), or
            ``None`` for an in-process channel.
        pid: the server process id (stdio), else ``None``.
        session_id: the HTTP ``Mcp-Session-Id``, else ``None``.
        era: ``"legacy"`` or ``"modern"`` once its handshake is done, else ``None``.
        protocol_version: the negotiated version once known, else ``None``.
    """

    key: str
    primary: bool
    alive: bool
    in_flight: int
    pending: int
    dropped: int
    transport: str | None
    pid: int | None
    session_id: str | None
    era: str | None
    protocol_version: str | None


@dataclass(frozen=True, slots=True)
class Diagnostics:
    """What a :class:`~mcpsync.Client` holds at one moment.

    Attributes:
        name: the client's (server's) name.
        closed: ``close()`` was called.
        connections: the pool's connections, oldest first.
        pool: the pool's counters.
        in_flight: calls under way now (leases not yet given back).
        era: the session's era (the primary connection's, else the oldest live connection's
            that finished its handshake), ``None`` before the first handshake.
        protocol_version: that connection's negotiated version, or ``None``.
        session_id: that connection's HTTP session id, or ``None``.
        pids: the server processes of the live connections (stdio), oldest first.
        breaker: the circuit breaker's state.
        breaker_transitions: the breaker's latest ``(old, new)`` transitions, oldest first.
        unavailable: reconnection gave up (calls raise ``ServerUnavailable``).
        reconnect_failures: consecutive failed connection attempts.
        reconnect_history: the latest ``(error class name, delay before the next attempt
            or None)`` pairs of the reconnect schedule, oldest first.
        openings: what each connection being made in the background is waiting for.
        subscriptions: resource URIs subscribed to, sorted.
        list_watches: the list kinds (``"tools"``, ``"prompts"``, ...) watched for changes.
        listening: a modern ``subscriptions/listen`` stream is wanted (open or opening).
        listen_acknowledged: that stream was acknowledged by the server.
        listen_acks: listen streams acknowledged so far (each reconnection or re-listen adds one).
        subscription_restores: legacy subscriptions restored on a new session connection.
        cached_tools: the tool names the tool cache holds for this client, ``None``
            when it holds no listing.
        tool_cache: the tool cache's counters for this client's server.
        sessions_lost: server processes and sessions replaced so far (each also a WARNING
            and an ``on_session_lost`` call): what each held was lost.
        last_session_lost: the latest of them, or ``None``.
        events_dropped: events (notifications, progress) the client's worker dropped, the
            oldest first, because its bounded lane was full (see :mod:`mcpsync._worker`).
    """

    name: str
    closed: bool
    connections: tuple[ConnectionDiagnostics, ...]
    pool: PoolStats
    in_flight: int
    era: str | None
    protocol_version: str | None
    session_id: str | None
    pids: tuple[int, ...]
    breaker: BreakerState
    breaker_transitions: tuple[tuple[BreakerState, BreakerState], ...]
    unavailable: bool
    reconnect_failures: int
    reconnect_history: tuple[tuple[str, float | None], ...]
    openings: tuple[str, ...]
    subscriptions: tuple[str, ...]
    list_watches: tuple[str, ...]
    listening: bool
    listen_acknowledged: bool
    listen_acks: int
    subscription_restores: int
    cached_tools: tuple[str, ...] | None
    tool_cache: CacheStats
    events_dropped: int
    sessions_lost: int = 0
    last_session_lost: SessionLost | None = None

    @property
    def primary(self) -> ConnectionDiagnostics | None:
        """The connection that carries the session-scoped state, if there is one."""
        return next((c for c in self.connections if c.primary), None)


def _connection(conn: Any, in_flight: int, primary: bool) -> ConnectionDiagnostics:
    channel = conn.channel
    transport = conn.transport
    stats = getattr(channel, "stats", None)  # (a dispatcher's; an in-process channel has none)
    info: dict[str, Any] = {}
    if transport is not None:
        try:
            info = dict(transport.session_info())
        except Exception:  # pragma: no cover - a snapshot never fails on one transport
            info = {}
    session = conn.session
    try:
        alive = bool(conn.alive())
    except Exception:  # pragma: no cover - a dead channel may raise when asked
        alive = False
    return ConnectionDiagnostics(
        key=str(conn.key),
        primary=primary,
        alive=alive,
        in_flight=in_flight,
        pending=int(stats.get("pending", 0)) if isinstance(stats, dict) else 0,
        dropped=int(stats.get("dropped", 0)) if isinstance(stats, dict) else 0,
        transport=transport.kind if transport is not None else None,
        pid=transport.pid if transport is not None else None,
        session_id=info.get("session_id"),
        era=session.era if session is not None else None,
        protocol_version=session.protocol_version if session is not None else None,
    )


def snapshot(session: Session, subscriptions: Subscriptions, tools: Tools) -> Diagnostics:
    """Take a :class:`Diagnostics` of a client from its parts (never connects, never blocks on I/O).

    Args:
        session: the client's session (connections, pool, breaker, reconnect schedule, losses).
        subscriptions: what it watches.
        tools: its tools part (the tool cache, for this server and credential).

    Returns:
        A frozen snapshot; later changes to the client do not show in it.
    """
    pool = session.pool
    primary = session.primary
    lent = pool.lent()
    connections = [_connection(conn, n, conn is primary) for conn, n in lent]
    if primary is not None and all(conn is not primary for conn, _ in lent):
        connections.insert(0, _connection(primary, 0, True))  # retiring, still the session's
    stats = pool.stats()
    facts = primary.session if primary is not None else None
    main = next((c for c in connections if c.primary), None)
    if facts is None:  # no session connection yet (none was needed): the oldest working one speaks
        described = connections[len(connections) - len(lent):]  # (a retiring primary comes first)
        for (conn, _), shown in zip(lent, described):
            if conn.session is not None and shown.alive:
                facts, main = conn.session, shown
                break
    breaker = session.guard.breaker
    reconnect = session.reconnect
    with session.lock:
        openings = tuple(o.phase for o in session.openings if not o.done.is_set())
    uris, watches, listening, acknowledged, acks, restores = subscriptions.watching()
    listed = tools.cache.peek(tools.name, tools.credential)
    return Diagnostics(
        name=session.name,
        closed=session.closed,
        connections=tuple(connections),
        pool=stats,
        in_flight=stats.in_use,
        era=facts.era if facts is not None else None,
        protocol_version=facts.protocol_version if facts is not None else None,
        session_id=main.session_id if main is not None else None,
        pids=tuple(c.pid for c in connections if c.pid is not None and c.alive),
        breaker=breaker.state,
        breaker_transitions=tuple(breaker.transitions),
        unavailable=reconnect.unavailable,
        reconnect_failures=reconnect.failures,
        reconnect_history=tuple(reconnect.history),
        openings=openings,
        subscriptions=uris,
        list_watches=watches,
        listening=listening,
        listen_acknowledged=acknowledged,
        listen_acks=acks,
        subscription_restores=restores,
        cached_tools=listed.names if listed is not None else None,
        tool_cache=tools.cache.stats(tools.name),
        sessions_lost=session.losses.count,
        last_session_lost=session.losses.last,
        events_dropped=session.worker.dropped,
    )
