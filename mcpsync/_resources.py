"""The resource lifecycle: UNKNOWN → SUBSCRIBED → CACHED → STALE → UNSUBSCRIBED.

A :class:`ResourceManager` sits on one or more clients (anything with
``list_resources()``, ``read_resource(uri)``, ``subscribe(uri, callback)`` returning a
handle with ``close()``, and ``unsubscribe(uri, callback)``: the
:class:`~mcpsync.Client`), and keeps, per URI, its state, its cached contents and the
observers told of its updates.

========================  =======================================================
event                     transition
========================  =======================================================
``discover_resources``    (new URI) → UNKNOWN
first access              UNKNOWN / UNSUBSCRIBED → SUBSCRIBED (the server is
(``read``, ``subscribe``, subscribed to: ``resources/subscribe`` or the modern
``on_update``)            ``subscriptions/listen``, whichever the era has)
``read`` fetched          SUBSCRIBED / STALE → CACHED (served from the cache while
                          fresh: no request)
server update             CACHED → STALE (and every observer is told)
TTL expiry                CACHED → STALE (noticed by ``read`` / ``state``)
``reconnected()``         CACHED → STALE (updates may have been missed)
``unsubscribe`` / close   any → UNSUBSCRIBED (cache dropped); a later access
                          subscribes again
========================  =======================================================

The TTL of an entry is the manager's ``ttl``, shortened to the server's ``ttlMs`` when
the result carries a positive one. A ``ttlMs`` of 0 ("stale at once") is honoured only
when there is no push subscription: with push, the server's update notification is what
makes the entry stale. A server that refuses subscriptions still gets the lifecycle,
TTL-driven (``ResourceInfo.push`` is False).

Observers (``on_update(uri, callback)``) are a map ``uri → callbacks``; every callback
of a URI is called with the URI on each update (on the client's worker thread), and a
callback that raises is logged and harms no other.

Example:
    >>> from mcpsync import Client                               # doctest: +SKIP
    >>> with Client.stdio("npx", ["-y", "@modelcontextprotocol/server-everything"]) as c:  # doctest: +SKIP
    ...     rm = ResourceManager(c)
    ...     uris = [r.uri for r in rm.discover_resources()]
    ...     rm.read(uris[0]).text[:20]                           # subscribes, fetches: CACHED
    ...     rm.state(uris[0])
    <ResourceState.CACHED: 'cached'>
"""

from __future__ import annotations

import enum
import logging
import threading
import time
from collections import deque
from dataclasses import dataclass
from typing import Any, Callable, Mapping

from ._errors import MCPError, RemoteError

__all__ = ["ResourceManager", "ResourceState", "ResourceInfo", "ResourceSubscription"]

log = logging.getLogger("mcpsync.resources")

UpdateCallback = Callable[[str], None]
#: on_transition(uri, old, new, reason)
TransitionListener = Callable[[str, "ResourceState", "ResourceState", str], None]


class ResourceState(str, enum.Enum):
    UNKNOWN = "unknown"
    SUBSCRIBED = "subscribed"
    CACHED = "cached"
    STALE = "stale"
    UNSUBSCRIBED = "unsubscribed"


#: state changes made under the lock, told to the listener after it (uri, old, new, why)
_Changes = list[tuple[str, "ResourceState", "ResourceState", str]]


@dataclass(frozen=True, slots=True)
class ResourceInfo:
    """A frozen view of one URI."""

    uri: str
    server: str
    state: ResourceState
    push: bool  # the server accepted the subscription (updates are pushed)
    observers: int
    fetched_at: float | None
    expires_at: float | None
    fetches: int
    hits: int
    updates: int


class ResourceSubscription:
    """One observer of one URI (or a bare subscription); ``close()`` ends it."""

    __slots__ = ("manager", "uri", "callback", "_closed")

    def __init__(self, manager: "ResourceManager", uri: str, callback: UpdateCallback | None) -> None:
        self.manager = manager
        self.uri = uri
        self.callback = callback
        self._closed = False

    @property
    def closed(self) -> bool:
        return self._closed

    def close(self) -> None:
        self.manager.unsubscribe(self)

    def __enter__(self) -> "ResourceSubscription":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __repr__(self) -> str:
        return f"<ResourceSubscription {self.uri} {'closed' if self._closed else 'open'}>"


class _Entry:
    __slots__ = ("uri", "server", "state", "handle", "push", "result", "fetched_at", "expires_at", "observers",
                 "fetches", "hits", "updates", "fetch_lock", "epoch")

    def __init__(self, uri: str, server: str) -> None:
        self.uri = uri
        self.server = server
        self.state = ResourceState.UNKNOWN
        self.handle: Any = None
        self.push = False
        self.result: Any = None
        self.fetched_at: float | None = None
        self.expires_at: float | None = None
        self.observers: list[ResourceSubscription] = []
        self.fetches = 0
        self.hits = 0
        self.updates = 0
        self.fetch_lock = threading.Lock()
        self.epoch = 0  # bumped by every update: a fetch that raced one stays STALE


class ResourceManager:
    """Resource lifecycle, cache and observers over one or more clients; thread-safe.

    Args:
        clients: one client, or a mapping server id → client.
        ttl: seconds a read stays fresh (default 60).
        clock: monotonic seconds (inject for tests).
        on_transition: ``(uri, old, new, reason)`` after each state change (outside the
            lock; exceptions are logged).
        history: how many transitions per URI :meth:`transitions` keeps.
    """

    def __init__(
        self,
        clients: Any,
        *,
        ttl: float = 60.0,
        clock: Callable[[], float] = time.monotonic,
        on_transition: TransitionListener | None = None,
        history: int = 64,
    ) -> None:
        if isinstance(clients, Mapping):
            self._clients: dict[str, Any] = dict(clients)
        else:
            self._clients = {str(getattr(clients, "name", None) or "server"): clients}
        if not self._clients:
            raise ValueError("a ResourceManager needs at least one client")
        self.ttl = float(ttl)
        self._clock = clock
        self.on_transition = on_transition
        self._lock = threading.Lock()
        self._entries: dict[str, _Entry] = {}
        self._history: dict[str, deque[tuple[ResourceState, ResourceState, str]]] = {}
        self._history_len = history
        self._closed = False

    # ------------------------------------------------------------------ helpers

    def _server_for(self, uri: str, server: str | None) -> str:
        if server is not None:
            if server not in self._clients:
                raise KeyError(f"unknown server {server!r}")
            return server
        e = self._entries.get(uri)
        if e is not None:
            return e.server
        if len(self._clients) == 1:
            return next(iter(self._clients))
        raise KeyError(f"{uri!r} was not discovered; say which server it belongs to")

    def _entry(self, uri: str, server: str | None = None) -> _Entry:
        e = self._entries.get(uri)
        if e is None:
            sid = self._server_for(uri, server)
            with self._lock:
                e = self._entries.get(uri)
                if e is None:
                    e = self._entries[uri] = _Entry(uri, sid)
                    self._history[uri] = deque(maxlen=self._history_len)
        return e

    def _move(self, e: _Entry, new: ResourceState, reason: str, changes: _Changes) -> None:
        """Change state (lock held); the listener runs later, from ``_emit``."""
        old = e.state
        if old is new:
            return
        e.state = new
        self._history[e.uri].append((old, new, reason))
        changes.append((e.uri, old, new, reason))

    def _emit(self, changes: _Changes) -> None:
        if not changes:
            return
        for uri, old, new, reason in changes:
            log.debug("resource %s: %s -> %s (%s)", uri, old.value, new.value, reason)
            if self.on_transition is not None:
                try:
                    self.on_transition(uri, old, new, reason)
                except Exception:
                    log.exception("on_transition listener raised")

    def _expire(self, e: _Entry, now: float, changes: _Changes) -> None:
        if e.state is ResourceState.CACHED and e.expires_at is not None and now >= e.expires_at:
            self._move(e, ResourceState.STALE, "ttl", changes)

    # ------------------------------------------------------------------ discovery

    def discover_resources(self, server: str | None = None) -> list[Any]:
        """List the server's resources; each new URI becomes known (UNKNOWN).

        Args:
            server: the server id (default: the only one).

        Returns:
            The listed resources (``Resource`` values with ``uri``, ``name``, …).
        """
        if server is None:
            if len(self._clients) != 1:
                raise KeyError("several servers: say which one")
            server = next(iter(self._clients))
        sid = self._server_for("", server)
        listed = list(self._clients[sid].list_resources())
        for r in listed:
            uri = getattr(r, "uri", None) or (r.get("uri") if isinstance(r, Mapping) else None)
            if uri:
                self._entry(str(uri), sid)
        return listed

    # ------------------------------------------------------------------ subscribing

    def _ensure_subscribed(self, e: _Entry) -> None:
        """First access: subscribe at the server (outside the manager's lock)."""
        with e.fetch_lock:
            if e.state not in (ResourceState.UNKNOWN, ResourceState.UNSUBSCRIBED):
                return
            client = self._clients[e.server]
            handle = None
            push = False
            try:
                handle = client.subscribe(e.uri, self._updated)
                push = True
            except RemoteError as exc:  # no subscriptions here: TTL-driven lifecycle
                log.info("%s: %s cannot be subscribed (%s); it is re-read after its TTL", e.server, e.uri, exc)
            changes: _Changes = []
            with self._lock:
                e.handle = handle
                e.push = push
                self._move(e, ResourceState.SUBSCRIBED, "first access", changes)
            self._emit(changes)

    def subscribe(self, uri: str, server: str | None = None) -> ResourceSubscription:
        """Subscribe to ``uri`` (no callback); returns the handle to :meth:`unsubscribe`."""
        return self._observe(uri, None, server)

    def on_update(self, uri: str, callback: UpdateCallback, server: str | None = None) -> ResourceSubscription:
        """Call ``callback(uri)`` on every server update of ``uri`` (subscribing if needed).

        Returns:
            The handle; ``close()`` it or pass it to :meth:`unsubscribe`.
        """
        return self._observe(uri, callback, server)

    def _observe(self, uri: str, callback: UpdateCallback | None, server: str | None) -> ResourceSubscription:
        e = self._entry(uri, server)
        self._ensure_subscribed(e)
        sub = ResourceSubscription(self, uri, callback)
        with self._lock:
            e.observers.append(sub)
        return sub

    def unsubscribe(self, subscription: ResourceSubscription | str) -> None:
        """End a subscription.

        Args:
            subscription: a handle from :meth:`subscribe` / :meth:`on_update` (that
                observer goes; the URI is unsubscribed when it was the last one), or a
                URI (every observer goes and the URI is unsubscribed).
        """
        if isinstance(subscription, ResourceSubscription):
            uri = subscription.uri
            e = self._entries.get(uri)
            subscription._closed = True
            if e is None:
                return
            with self._lock:
                if subscription in e.observers:
                    e.observers.remove(subscription)
                last = not e.observers
            if not last:
                return
        else:
            uri = subscription
            e = self._entries.get(uri)
            if e is None:
                return
            with self._lock:
                for s in e.observers:
                    s._closed = True
                e.observers.clear()
        self._end(e, "unsubscribe")

    def _end(self, e: _Entry, reason: str) -> None:
        with e.fetch_lock:
            changes: _Changes = []
            with self._lock:
                handle, e.handle = e.handle, None
                e.push = False
                e.result = None
                e.expires_at = None
                if e.state is not ResourceState.UNKNOWN or handle is not None:
                    self._move(e, ResourceState.UNSUBSCRIBED, reason, changes)
            if handle is not None:
                try:
                    handle.close()
                except MCPError as exc:
                    log.debug("unsubscribing %s failed: %s", e.uri, exc)
            self._emit(changes)

    # ------------------------------------------------------------------ reading

    def read(self, uri: str, server: str | None = None, *, timeout: float | None = None) -> Any:
        """The contents of ``uri``: from the cache while fresh, else fetched.

        The first access subscribes; a fetch makes the entry CACHED; an update or the
        TTL makes it STALE, and the next read fetches again.

        Raises:
            ResourceNotFound: and the client's other errors, as raised by
                ``read_resource`` (the state is left as it was).
        """
        e = self._entry(uri, server)
        if e.state in (ResourceState.UNKNOWN, ResourceState.UNSUBSCRIBED):
            self._ensure_subscribed(e)
        changes: _Changes = []
        with self._lock:
            self._expire(e, self._clock(), changes)
            if e.state is ResourceState.CACHED:
                e.hits += 1
                result = e.result
            else:
                result = None
        self._emit(changes)
        if result is not None:
            return result
        with e.fetch_lock:  # one fetch at a time per URI; late arrivals use its result
            changes = []
            with self._lock:
                self._expire(e, self._clock(), changes)
                if e.state is ResourceState.CACHED:
                    e.hits += 1
                    cached = e.result
                else:
                    cached = None
                epoch = e.epoch
            self._emit(changes)
            if cached is not None:
                return cached
            client = self._clients[e.server]
            result = client.read_resource(uri, timeout=timeout) if timeout is not None else client.read_resource(uri)
            now = self._clock()
            changes = []
            with self._lock:
                e.fetches += 1
                e.result = result
                e.fetched_at = now
                e.expires_at = now + self._ttl_of(result, e.push)
                if e.state in (ResourceState.UNKNOWN, ResourceState.UNSUBSCRIBED):
                    pass  # unsubscribed meanwhile: hand the result over, cache nothing
                elif e.epoch != epoch:
                    self._move(e, ResourceState.STALE, "updated during fetch", changes)
                else:
                    self._move(e, ResourceState.CACHED, "fetched", changes)
            self._emit(changes)
            return result

    def _ttl_of(self, result: Any, push: bool) -> float:
        ttl = self.ttl
        ms = getattr(result, "ttl_ms", None)
        if ms is None and isinstance(result, Mapping):
            ms = result.get("ttlMs")
        if ms is not None:
            if ms > 0:
                ttl = min(ttl, ms / 1000.0)
            elif not push:
                ttl = 0.0
        return ttl

    # ------------------------------------------------------------------ updates

    def _updated(self, uri: str) -> None:
        """A server update of ``uri`` (called by the client, on its worker)."""
        e = self._entries.get(uri)
        if e is None:
            return
        changes: _Changes = []
        with self._lock:
            e.updates += 1
            e.epoch += 1
            if e.state is ResourceState.CACHED:
                self._move(e, ResourceState.STALE, "server update", changes)
            observers = [s for s in e.observers if s.callback is not None]
        self._emit(changes)
        for s in observers:
            try:
                s.callback(uri)  # type: ignore[misc]
            except Exception:
                log.exception("resource observer %r of %s raised", s.callback, uri)

    def mark_stale(self, uri: str | None = None, reason: str = "explicit") -> int:
        """Make ``uri`` (or every CACHED entry) STALE. Returns how many changed."""
        changes: _Changes = []
        with self._lock:
            entries = [self._entries[uri]] if uri is not None and uri in self._entries else (
                list(self._entries.values()) if uri is None else []
            )
            for e in entries:
                e.epoch += 1
                if e.state is ResourceState.CACHED:
                    self._move(e, ResourceState.STALE, reason, changes)
        self._emit(changes)
        return len(changes)

    def reconnected(self, server: str | None = None) -> int:
        """Tell the manager a server's connection was restored (the client re-subscribes
        by itself); cached entries of that server go STALE, since updates sent during the
        outage were lost. Returns how many entries changed."""
        changes: _Changes = []
        with self._lock:
            for e in self._entries.values():
                if server is None or e.server == server:
                    e.epoch += 1
                    if e.state is ResourceState.CACHED:
                        self._move(e, ResourceState.STALE, "reconnected", changes)
        self._emit(changes)
        return len(changes)

    # ------------------------------------------------------------------ inspecting

    def state(self, uri: str) -> ResourceState:
        """The URI's state (UNKNOWN for a URI never seen); notices TTL expiry."""
        e = self._entries.get(uri)
        if e is None:
            return ResourceState.UNKNOWN
        changes: _Changes = []
        with self._lock:
            self._expire(e, self._clock(), changes)
            state = e.state
        self._emit(changes)
        return state

    def states(self) -> dict[str, ResourceState]:
        """Every known URI's state."""
        return {uri: self.state(uri) for uri in list(self._entries)}

    def info(self, uri: str) -> ResourceInfo | None:
        e = self._entries.get(uri)
        if e is None:
            return None
        state = self.state(uri)
        with self._lock:
            return ResourceInfo(uri, e.server, state, e.push, len(e.observers), e.fetched_at, e.expires_at,
                                e.fetches, e.hits, e.updates)

    def transitions(self, uri: str) -> list[tuple[ResourceState, ResourceState, str]]:
        """The URI's latest transitions, oldest first, as ``(old, new, reason)``."""
        with self._lock:
            return list(self._history.get(uri, ()))

    # ------------------------------------------------------------------ lifecycle

    def close(self) -> None:
        """Session end: every URI is unsubscribed (UNSUBSCRIBED). Idempotent."""
        with self._lock:
            if self._closed:
                return
            self._closed = True
            entries = list(self._entries.values())
            for e in entries:
                for s in e.observers:
                    s._closed = True
                e.observers.clear()
        for e in entries:
            self._end(e, "session end")

    def __enter__(self) -> "ResourceManager":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
