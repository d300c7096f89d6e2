"""What a client loses when its server's process or session is replaced, said in one place.

A stdio server keeps its state in its process (sequential-thinking's history, a memory
graph); a legacy-era session keeps it on the server under its ``Mcp-Session-Id``. When the
process dies and the client starts a new one, or a server (a replica behind a balancer)
forgets the session and the client initializes a new one, the calls go on but that state
is gone. The client never does this silently: each replacement is a WARNING on the
``mcpsync.client`` logger naming the server and what was lost, a count in
``Client.diagnostics()`` (``sessions_lost``, ``last_session_lost``), and the client's
``on_session_lost(event)`` callback (run on the client's worker, never on a reader).

A modern-era (2026-07-28) HTTP server is stateless: a new connection loses nothing there.

Renewing a legacy session the server forgot (:class:`Renewal`: ``initialize`` again on the
same connection, once for all the callers that met the expiry, then the request once more)
lives here too: it is the one place a session is replaced by the client's own hand.

Example:
    >>> events = []
    >>> losses = Losses("thinking", events.append, submit=lambda fn, *a: fn(*a))
    >>> losses.announce(SessionLost("thinking", "process", "pid 12", "pid 34", "it exited with code 1"))
    >>> losses.count, events[0].new
    (1, 'pid 34')
"""

from __future__ import annotations

import collections
import logging
import threading
import time
from dataclasses import dataclass
from typing import Any, Callable

from ._errors import MCPError, RequestTimeout, SessionExpired

__all__ = ["SessionLost", "Losses", "Renewal"]

log = logging.getLogger("mcpsync.client")


@dataclass(frozen=True, slots=True)
class SessionLost:
    """A server's process or session was replaced: what the old one held is gone.

    Attributes:
        server: the client's name for the server.
        what: ``"process"`` (a stdio server was started again) or ``"session"`` (a new MCP
            session: initialize again after the server forgot the old one, or a new
            connection).
        old: the lost one (``"pid 123"``, the old session id), None when unknown.
        new: the one that replaced it, None when unknown.
        reason: why the old one ended.
    """

    server: str
    what: str
    old: str | None
    new: str | None
    reason: str

    def __str__(self) -> str:
        held = "what the server process held in memory" if self.what == "process" else "the server's state for that session"
        old = f" ({self.old})" if self.old else ""
        new = f" ({self.new})" if self.new else ""
        return f"{self.server}: the {self.what}{old} ended ({self.reason}); a new {self.what}{new} replaces it: {held} is lost"


def identity(conn: Any) -> tuple[str, str | None] | None:
    """``(what, which)`` a connection would lose its server's state with, or None when a new
    one loses nothing (a stateless modern-era remote server, an in-process registry)."""
    transport = conn.transport
    if transport is None:
        return None
    if transport.kind == "stdio":
        return "process", f"pid {transport.pid}"
    session = conn.session
    if session is None or session.era != "legacy":
        return None
    try:
        sid = transport.session_info().get("session_id")
    except Exception:  # pragma: no cover - a snapshot of facts never fails the caller
        sid = None
    return "session", str(sid) if sid else None


def _ended(conn: Any, reason: BaseException) -> str:
    """How a lost connection ended, in words."""
    code = conn.transport.returncode if conn.transport is not None else None
    if isinstance(code, int):
        return f"killed by signal {-code}" if code < 0 else f"exited with code {code}"
    return str(reason) or type(reason).__name__


class Losses:
    """The losses of one client's connections (see the module's docstring).

    Args:
        name: the client's name.
        callback: ``on_session_lost(event)``, or None.
        submit: runs a callback off the calling thread (the client's worker).
    """

    def __init__(self, name: str, callback: Callable[[SessionLost], None] | None,
                 submit: Callable[..., Any]) -> None:
        self.name = name
        self.callback = callback
        self.submit = submit
        self._lock = threading.Lock()
        self._dead: collections.deque[tuple[str, str | None, str]] = collections.deque(maxlen=64)
        #: replacements announced so far, and the latest
        self.count = 0
        self.last: SessionLost | None = None

    def watch(self, conn: Any) -> None:
        """Watch a connection whose handshake is done: if it dies (not closed by the client
        while alive), the next connection made replaces it, and says so."""
        ident = identity(conn)
        add = getattr(conn.channel, "add_close_callback", None)
        if ident is None or add is None:
            return

        def closed(reason: BaseException) -> None:
            if conn.closed_alive:  # the client closed it while it worked: nothing was lost
                return
            with self._lock:
                self._dead.append((ident[0], ident[1], _ended(conn, reason)))

        add(closed)

    def replaced_by(self, conn: Any) -> None:
        """A new connection was made: if one died before it, announce the replacement."""
        ident = identity(conn)
        with self._lock:
            lost = self._dead.popleft() if self._dead else None
        if lost is not None:
            what, old, why = lost
            self.announce(SessionLost(self.name, what, old, ident[1] if ident is not None else None, why))

    def renewed(self, old: str | None, new: str | None, reason: str) -> None:
        """The server forgot session ``old``; ``new`` was initialized on the same connection."""
        self.announce(SessionLost(self.name, "session", old, new, reason))

    def announce(self, event: SessionLost) -> None:
        with self._lock:
            self.count += 1
            self.last = event
        log.warning("%s", event)
        if self.callback is not None:
            self.submit(self._call, event)

    def _call(self, event: SessionLost) -> None:
        try:
            self.callback(event)  # type: ignore[misc]
        except Exception:
            log.exception("%s: on_session_lost raised", self.name)


class Renewal:
    """Renewing the legacy sessions of one client's connections after the server forgot them.

    Args:
        name: the client's name.
        renew: ``Handshake.renew(conn, expired, deadline)``: True when this call made the
            new session, False when another caller had.
        losses: where a renewal is announced.
        submit: runs work on the client's worker.
        current: whether ``conn`` is the client's session connection (not closed).
        replaced: renews what the session connection held (tools, subscriptions).
        connect_timeout: the bound of a renewal made off a call (the GET stream's).
    """

    def __init__(
        self, name: str, renew: Callable[[Any, SessionExpired, float], bool], losses: Losses, *,
        submit: Callable[..., Any], current: Callable[[Any], bool], replaced: Callable[[Any], None],
        connect_timeout: float,
    ) -> None:
        self.name = name
        self._renew = renew
        self.losses = losses
        self.submit = submit
        self.current = current
        self.replaced = replaced
        self.connect_timeout = connect_timeout

    def renew(self, conn: Any, expired: SessionExpired, deadline: float) -> None:
        """Re-initialize on ``conn`` after the server forgot its session (one renewal shared
        by the callers that met the same expiry; e.g. a replica behind a balancer died),
        announce it, then renew what the session held, as after a reconnect."""
        if self._renew(conn, expired, deadline):
            new = conn.transport.session_id if conn.transport is not None else None
            status = getattr(expired, "status", None)
            self.losses.renewed(expired.session_id, new, f"the server no longer knew it (HTTP {status})" if status else
                                "the server no longer knew it")
            if self.current(conn):
                self.replaced(conn)

    def after_expiry(self, conn: Any, exc: SessionExpired, again: bool, t: float, resend: Callable[[float], Any]) -> Any:
        """The server forgot the session (the request was not processed): renew it on
        ``conn`` and ``resend`` the request once more, in what is left of its time ``t``."""
        if again:
            # lost again right after a new session: a session error (the connection
            # is replaced on the reconnect schedule), not the server's answer
            conn.close()
            raise SessionExpired(
                f"session at {self.name} was lost again right after re-initializing"
                f" (HTTP {getattr(exc, 'status', None)})",
                status=getattr(exc, "status", None),
            ) from exc
        began = time.monotonic()
        self.renew(conn, exc, began + t)
        t -= time.monotonic() - began
        if t <= 0.0:
            raise RequestTimeout(
                f"{self.name}: the call's time ran out while its session was renewed", sent=False, truncated=True
            ) from exc
        return resend(t)

    def stream_found_it_gone(self, conn: Any, session_id: str, closed: Callable[[], bool]) -> None:
        """The transport's standalone stream found the session gone: renew it on the worker
        now rather than at the next request (subscriptions live on that stream)."""
        expired = SessionExpired(f"session {session_id} expired", renewable=True, session_id=session_id)

        def renew() -> None:
            if closed() or not conn.alive():
                return
            try:
                self.renew(conn, expired, time.monotonic() + self.connect_timeout)
            except MCPError as exc:  # the connection was closed: the next use replaces it
                log.info("%s: renewing the lost session failed: %s", self.name, exc)

        self.submit(renew)
