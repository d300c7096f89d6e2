"""The handshake of one connection: which era the server speaks and what it is.

``auto`` mode probes with ``server/discover`` (modern era) and falls back to
``initialize`` (legacy era); the era found is remembered per server address (the one
era memory), so a reconnect skips the probe. Also the modern era's per-request
``_meta``, the renegotiation after an unsupported-version error, and the renewal of a
legacy session the server forgot (:meth:`Handshake.renew`: ``initialize`` again on the
same connection, once for all the callers that met the expiry).
"""

from __future__ import annotations

import errno
import logging
import socket
import threading
import time
from dataclasses import dataclass, field
from typing import Any, Callable, Mapping, Protocol

import msgspec

from ._constants import LATEST_LEGACY, LATEST_MODERN, LEGACY_VERSIONS, MODERN_VERSIONS
from ._constants import META_CLIENT_CAPABILITIES as _META_CAPS, META_CLIENT_INFO as _META_INFO
from ._constants import META_LOG_LEVEL as _META_LOG, META_VERSION as _META_VERSION
from ._dispatcher import Dispatcher
from ._errors import (
    ConnectionClosed,
    MCPError,
    ProtocolError,
    RemoteError,
    RequestTimeout,
    SessionExpired,
    UnsupportedProtocolVersion,
)
from ._decoders import decode_result
from ._messages import DiscoverResult, Implementation, InitializeResult, ServerCapabilities, encode
from ._settings import Settings
from .transports._base import Transport

__all__ = ["Handshake", "ServerSession", "wrong_endpoint", "never_reached", "MODERN_VERSIONS", "LEGACY_VERSIONS", "LATEST_MODERN", "LATEST_LEGACY"]

log = logging.getLogger("mcpsync.client")


#: Era detected per server address ("modern" / "legacy"), so reconnects skip the probe.
_ERA_CACHE: dict[str, str] = {}
_ERA_LOCK = threading.Lock()


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


class _Opening:
    """One connection being made off the callers' threads: callers wait up to their own
    deadlines, the attempt goes on and its connection is kept for the next call;
    ``phase`` (what it waits for) and ``last``, the last failed try on the reconnect
    schedule (:meth:`attempt`: out of descriptors, the command gone), are named in a
    caller's error."""

    __slots__ = ("done", "conn", "error", "phase", "started", "made", "thread", "claimed", "last")

    def __init__(self) -> None:
        self.done = threading.Event()
        self.conn: _Connection | None = None
        self.error: BaseException | None = None
        self.phase = "starting the connection"
        self.started = time.monotonic()
        self.made: Transport | Any = None  # what close() must close to stop it (a Transport or Channel)
        self.thread: threading.Thread | None = None
        self.claimed = False  # a borrower is waiting for it
        self.last: BaseException | None = None

    def attempt(self, open_: Callable[["_Opening"], "_Connection"]) -> "_Connection":
        """One try of ``open_(self)``; a failure is kept in ``last`` and raised."""
        try:
            return open_(self)
        except Exception as exc:
            self.last = exc
            raise


class _Connection:
    """One live channel to the server plus the facts of its session."""

    def __init__(self, channel: Any, transport: Transport | None, key: str) -> None:
        self.channel = channel
        self.transport = transport
        self.key = key
        #: for the pool, every call: on a Dispatcher one C call, no syscall (its reader
        #: notices a dead peer); a thorough check is :meth:`healthy`
        self.alive: Callable[[], bool] = channel.up_check() if isinstance(channel, Dispatcher) else self._channel_alive
        self.session: ServerSession | None = None
        self.closer: Callable[[Callable[[], None], str], None] | None = None
        self.meta: dict[str, Any] | None = None  # modern per-request _meta
        self.renewing = threading.Lock()  # one session renewal at a time (see Handshake.renew)
        self.closed_alive = False  # the client closed it while it worked (its end was no loss)
        self.wire_cache: tuple[Any, Any] = (None, None)  # (meta, what is sent for it)

    def wire_meta(self, meta: dict[str, Any]) -> Any:
        """``meta`` as sent: encoded once per value on a connection that sends JSON
        (a Dispatcher's), the mapping itself on an in-process channel."""
        known, wire = self.wire_cache
        if known is not meta:
            wire = msgspec.Raw(encode(meta)) if self.transport is not None else meta
            self.wire_cache = (meta, wire)
        return wire

    def _channel_alive(self) -> bool:
        return bool(self.channel.alive())

    def healthy(self) -> bool:
        """A thorough check (process running, socket open), for keepalive rounds."""
        return bool(self.channel.alive())

    def close(self) -> None:
        """Close it off the calling thread when the client gave a closer (a stubborn
        server takes seconds to stop: neither a failed call nor the other connections wait
        for it); the client's own ``close()`` waits for every closer."""
        if not self.closed_alive:
            try:
                self.closed_alive = bool(self.alive())
            except Exception:  # pragma: no cover - a dead channel may raise when asked
                pass
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


#: HTTP statuses of a failed handshake that another attempt may mend: authentication (its own
#: errors), a timeout, rate limiting; every other 4xx is the request's (the URL's) fault
_RETRIED_4XX = frozenset({401, 403, 408, 429})


def wrong_endpoint(exc: MCPError, url: str) -> ProtocolError | None:
    """The error for a handshake an HTTP server refused with a 4xx that no retry can mend (a
    wrong path answers 404, often an HTML page, to the POST and to the HTTP+SSE fallback's
    GET alike), else None. Never retried, never counted by the breaker: the server is fine.
    A 404 for a known session is not one (the session layer renews the session)."""
    status = getattr(exc, "status", None)
    if not isinstance(status, int) or not 400 <= status < 500 or status in _RETRIED_4XX:
        return None
    if isinstance(exc, SessionExpired) and exc.renewable:
        return None
    if status in (404, 405):
        path = url.split("?", 1)[0].rstrip("/")
        hint = ("not an MCP endpoint (check the host, port and path)" if path.endswith("/mcp")
                else "not an MCP endpoint; MCP servers usually serve /mcp")
    else:
        hint = "the server refused the MCP handshake"
    return ProtocolError(f"HTTP {status} at {url}: {hint} ({exc})", status=status, url=url)


def never_reached(exc: BaseException) -> bool:
    """Whether a failed connect never reached anything at the address: refused, an unknown
    host, no route (found in the exception's cause chain). A connection that opened and then
    broke (a proxy in front of a dead server) did reach something."""
    seen = 0
    cause: BaseException | None = exc
    while cause is not None and seen < 10:
        if isinstance(cause, (ConnectionRefusedError, socket.gaierror)) or (
            isinstance(cause, OSError) and cause.errno in (errno.EHOSTUNREACH, errno.ENETUNREACH)
        ):
            return True
        cause, seen = cause.__cause__ or cause.__context__, seen + 1
    return False


def default_client_info() -> dict[str, Any]:
    """The ``clientInfo`` a Client reports unless given one: mcpsync and its version."""
    try:
        from importlib.metadata import version

        return {"name": "mcpsync", "version": version("mcpsync")}
    except Exception:  # pragma: no cover - not installed
        return {"name": "mcpsync", "version": "0"}


def _supported_from(data: Any) -> list[str]:
    if isinstance(data, Mapping):
        sup = data.get("supported") or data.get("supportedVersions") or []
        if isinstance(sup, list):
            return [str(v) for v in sup]
    return []


class Declares(Protocol):
    """What the client declares in a handshake (:class:`~mcpsync._handlers.Handlers`)."""

    log_level: str | None

    def capabilities(self) -> dict[str, Any]:
        """The client capabilities, extensions included."""


class Handshake:
    """Discover/initialize for the connections of one Client.

    Args:
        settings: the Client's settings (``name``, ``mode``, ``client_info``).
        handlers: what the client declares (capabilities) and the log level it asks for,
            read at each handshake.
        telemetry: a Telemetry (``notifications/initialized`` is a span of its own), or None.
        owner: the session whose connections these are (for telemetry).
    """

    def __init__(self, settings: Settings, handlers: Declares, telemetry: Any = None, owner: Any = None) -> None:
        self.name = settings.name
        self.mode = settings.mode
        self.client_info = settings.client_info
        self.handlers = handlers
        self._telemetry = telemetry
        self._owner = owner

    def modern_meta(self, version: str) -> dict[str, Any]:
        level = self.handlers.log_level
        meta: dict[str, Any] = {
            _META_VERSION: version,
            _META_CAPS: self.handlers.capabilities(),
            _META_INFO: self.client_info,
        }
        if level is not None:
            meta[_META_LOG] = level
        return meta

    def run(self, conn: _Connection, deadline: float, starting: bool = False) -> None:
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
        mode: str = self.mode
        if mode == "auto":
            with _ERA_LOCK:
                mode = _ERA_CACHE.get(conn.key, "auto")
        if mode in ("auto", "modern"):
            remaining = deadline - time.monotonic()
            probe = remaining if mode == "modern" or starting else max(min(remaining / 2, 5.0), 0.05)
            try:
                self.discover(conn, probe)
                self.remember(conn.key, "modern")
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
                        self.initialize(conn, deadline)
                    except UnsupportedProtocolVersion:
                        # the probe was only late: the server took it and now serves the
                        # modern era on this connection; ask again rather than fail
                        self.discover(conn, max(deadline - time.monotonic(), 0.05))
                        self.remember(conn.key, "modern")
                        return
                    self.remember(conn.key, "legacy")
                    return
        self.initialize(conn, deadline)
        if self.mode == "auto":
            self.remember(conn.key, "legacy")

    @staticmethod
    def remember(key: str, era: str) -> None:
        with _ERA_LOCK:
            _ERA_CACHE[key] = era

    def discover(self, conn: _Connection, timeout: float) -> None:
        version = LATEST_MODERN
        for attempt in range(2):
            meta = self.modern_meta(version)
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
                meta = self.modern_meta(version)
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

    def initialize(self, conn: _Connection, deadline: float) -> None:
        params = {
            "protocolVersion": LATEST_LEGACY,
            "capabilities": self.handlers.capabilities(),
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
        if self._telemetry is not None:
            self._telemetry.notify(self._owner, "notifications/initialized", None,
                                   lambda sent: conn.channel.notify("notifications/initialized", sent), conn)
        else:
            conn.channel.notify("notifications/initialized", None)
        level = self.handlers.log_level
        if level is not None and res.capabilities.logging is not None:
            try:
                conn.channel.request("logging/setLevel", {"level": level}, timeout)
            except RemoteError as exc:
                log.debug("%s: logging/setLevel failed: %s", self.name, exc)

    def renew(self, conn: _Connection, expired: SessionExpired, deadline: float) -> bool:
        """Start a new legacy session on ``conn`` after the server forgot ``expired.session_id``:
        ``initialize`` again (then ``notifications/initialized``) on the same connection.

        Concurrent callers that met the same expiry share one renewal: the transport's
        session id is checked under the connection's lock, so only the first one
        re-initializes and the others find the new session already there.

        Returns:
            True when this call made the new session, False when another caller had.

        Raises:
            ConnectionClosed: the new session could not be started; the connection is
                closed (it is replaced on the reconnect schedule).
        """
        transport = conn.transport
        with conn.renewing:
            current = transport.session_id if transport is not None else None
            if current != expired.session_id:
                if current is None:  # pragma: no cover - a transport without a session
                    raise expired
                return False
            log.info("%s: session %s expired: re-initializing", self.name, expired.session_id)
            try:
                self.initialize(conn, deadline)
            except MCPError as exc:
                log.warning("%s: re-initializing after an expired session failed: %s", self.name, exc)
                conn.close()
                raise ConnectionClosed(
                    f"{self.name}: session {expired.session_id} expired and could not be re-initialized: {exc}",
                    status=getattr(expired, "status", None),
                ) from exc
        return True

    def renegotiate(self, conn: _Connection, exc: UnsupportedProtocolVersion) -> bool:
        supported = _supported_from(exc.data)
        choice = next((v for v in reversed(MODERN_VERSIONS) if v in supported), None)
        if choice is None:
            return False
        conn.meta = self.modern_meta(choice)
        if conn.session is not None:
            conn.session.protocol_version = choice
        if conn.transport is not None:
            conn.transport.set_protocol_version(choice)
        return True
