"""The three-level tool discovery cache.

One :class:`ToolCache` per :class:`~mcpsync.Client` (or one shared by several) holds the
result of ``tools/list`` per server, on :class:`mcpsync._speedups.TTLCache`:

1. **Session memory.** The first discovery of a server serves every later tool lookup
   (:meth:`ToolCache.lookup`, :meth:`ToolCache.get`).
2. **Across turns.** Nothing in a session rediscovers on its own: an agent loop that
   asks for the tools every turn gets the cached :class:`ToolSet` every turn.
3. **Dynamic.** Rediscovery happens only after :meth:`ToolCache.invalidate`, which the
   client calls when a server (re)starts, when a lost connection is restored and when
   ``notifications/tools/list_changed`` arrives (:data:`SERVER_START`,
   :data:`RECONNECT`, :data:`LIST_CHANGED`) — or when the server's own ``ttlMs`` ran out.

Modern-era cache hints (2026-07-28, analogous to HTTP ``Cache-Control``):

* ``ttlMs`` > 0 — the entry is fresh for that long; after it the entry is dropped and the
  next lookup rediscovers (the server asked for it explicitly).
* ``ttlMs`` == 0 — "SHOULD be considered immediately stale; the client MAY re-fetch
  every time". The entry is marked stale at once (:attr:`ToolSet.stale`, counted in
  :attr:`CacheStats.stale_served`) but, by default (``zero_ttl="session"``), it keeps
  serving as the session cache until an invalidation event: re-fetching is a MAY, and
  a session's tools are discovered once unless an event says otherwise. ``zero_ttl="refetch"`` makes
  such entries miss on every lookup instead.
* no ``ttlMs`` (legacy servers) — the entry lives for the session.
* ``cacheScope`` ``"public"`` — one entry per server, shared by every credential.
  ``"private"`` — keyed by server *and* credential: a lookup under another credential
  (or none) never sees it. Credentials are hashed (:func:`credential_key`) before they
  become part of a key; raw tokens are never stored. An absent scope is ``"public"``
  for a server reached without credentials and ``"private"`` otherwise (the safe
  reading: without the server's word, data fetched under a token stays with it).
* Several pages (``nextCursor``) are merged by :func:`merge_cache_hints`: the smallest
  ``ttlMs`` and the most restrictive scope of any page.

Discovery is harness work, never agent work: :class:`CacheStats` counts
``discoveries`` apart from ``hits``/``misses`` of the agent's lookups, and the
recorder given as ``metrics`` (``record_cache(server, hit, tool)`` /
``record_discovery(server)``, see :class:`mcpsync._metrics.MetricsRecorder`) keeps them
out of the per-call numbers.

Tool order is stable (:meth:`ToolCache.tools`, :meth:`ToolCache.ordered_tools`): a
rediscovered list keeps known tools in place and appends new ones (prompt-cache prefixes).

Example:
    >>> from mcpsync._messages import Tool
    >>> cache = ToolCache()
    >>> _ = cache.put("everything", [Tool(name="echo"), Tool(name="add")])
    >>> cache.lookup("everything", "add").name
    'add'
    >>> cache.invalidate("everything", LIST_CHANGED)
    1
    >>> cache.get("everything") is None
    True
"""

from __future__ import annotations

import json
import threading
import time
from dataclasses import dataclass, field
from operator import attrgetter
from types import MappingProxyType
from typing import Any, Callable, Iterable, Mapping, Sequence

from ._speedups import TTLCache

_NAME = attrgetter("name")

__all__ = [
    "ToolCache", "ResultCache", "CacheHits", "ToolSet", "CacheStats", "merge_cache_hints", "credential_key",
    "SERVER_START", "RECONNECT", "LIST_CHANGED", "EXPLICIT", "PUBLIC", "PRIVATE",
]

#: Invalidation reasons (level 3 of the cache).
SERVER_START = "server_start"
RECONNECT = "reconnect"
LIST_CHANGED = "list_changed"
EXPLICIT = "explicit"

PUBLIC = "public"
PRIVATE = "private"

_ANONYMOUS = ""  # the credential key of "no credential" for private entries
_sha256: Any = None  # hashlib.sha256, once credential_key first needs it


def credential_key(credential: Any) -> str | None:
    """A stable, non-reversible key for an authorization context.

    Args:
        credential: a token string/bytes, or anything with a stable ``str()``; ``None``
            for no credential.

    Returns:
        ``None`` for no credential, else 32 hex digits of SHA-256.
    """
    if credential is None:
        return None
    global _sha256
    if _sha256 is None:
        from hashlib import sha256 as _sha256  # imported on first use: ~5 ms off ``import mcpsync``
    data = credential if isinstance(credential, bytes) else str(credential).encode()
    digest: str = _sha256(b"mcpsync-cred\x00" + data).hexdigest()
    return digest[:32]


def merge_cache_hints(pages: Iterable[Any]) -> tuple[int | None, str | None]:
    """Merge the ``ttlMs`` / ``cacheScope`` of the pages of one listing.

    Args:
        pages: results with ``ttl_ms`` and ``cache_scope`` attributes (or mapping keys
            ``ttlMs`` / ``cacheScope``).

    Returns:
        ``(ttl_ms, scope)``: the smallest ``ttlMs`` of any page (``None`` if no page had
        one) and ``"private"`` if any page was private, ``"public"`` if some page said
        public and none private, ``None`` if no page said.
    """
    ttl: int | None = None
    scope: str | None = None
    for page in pages:
        if isinstance(page, Mapping):
            t, s = page.get("ttlMs"), page.get("cacheScope")
        else:
            t, s = getattr(page, "ttl_ms", None), getattr(page, "cache_scope", None)
        if t is not None:
            t = max(0, int(t))
            ttl = t if ttl is None else min(ttl, t)
        if s == PRIVATE:
            scope = PRIVATE
        elif s == PUBLIC and scope is None:
            scope = PUBLIC
    return ttl, scope


@dataclass(frozen=True, slots=True)
class ToolSet:
    """One server's discovered tools, as cached.

    Attributes:
        server: the server id.
        tools: the tools in stable order (see the module docstring).
        by_name: name → tool.
        ttl_ms: the merged ``ttlMs`` hint (``None``: none given).
        scope: ``"public"`` or ``"private"``.
        fetched_at: the cache clock's time of the discovery.
        fresh_until: when the entry turns stale (``None``: never, within the session).
        generation: how many discoveries of this server (and credential) came before.
        plans: name → what ``call_tool`` works out of a tool once (the tools layer's
            ``call_plan``), kept with the listing it came from.
    """

    server: str
    tools: tuple[Any, ...]
    by_name: Mapping[str, Any]
    ttl_ms: int | None
    scope: str
    fetched_at: float
    fresh_until: float | None
    generation: int
    _clock: Callable[[], float] = field(repr=False, compare=False, default=time.monotonic)
    plans: dict[str, Any] = field(repr=False, compare=False, default_factory=dict)

    @property
    def stale(self) -> bool:
        """The server's ``ttlMs`` has passed (always True for ``ttlMs`` 0)."""
        return self.fresh_until is not None and self._clock() >= self.fresh_until

    @property
    def names(self) -> tuple[str, ...]:
        return tuple(t.name for t in self.tools)

    def __len__(self) -> int:
        return len(self.tools)

    def __iter__(self):  # type: ignore[no-untyped-def]
        return iter(self.tools)


@dataclass(frozen=True, slots=True)
class CacheStats:
    """Counters of one server's cache (or of all servers, from :meth:`ToolCache.stats`).

    ``hits``/``misses`` count lookups made for the agent; ``discoveries`` count the
    ``tools/list`` listings stored (harness overhead, never agent work);
    ``invalidations`` maps reason → count.
    """

    hits: int = 0
    misses: int = 0
    discoveries: int = 0
    stale_served: int = 0
    invalidations: Mapping[str, int] = field(default_factory=lambda: MappingProxyType({}))

    @property
    def lookups(self) -> int:
        return self.hits + self.misses

    @property
    def hit_rate(self) -> float:
        """hits / lookups (0.0 before any lookup)."""
        n = self.hits + self.misses
        return self.hits / n if n else 0.0


class _Counters:
    __slots__ = ("hits", "misses", "discoveries", "stale_served", "invalidations")

    def __init__(self) -> None:
        self.hits = 0
        self.misses = 0
        self.discoveries = 0
        self.stale_served = 0
        self.invalidations: dict[str, int] = {}

    def freeze(self) -> CacheStats:
        return CacheStats(
            self.hits, self.misses, self.discoveries, self.stale_served, MappingProxyType(dict(self.invalidations))
        )


class ToolCache:
    """Thread-safe tool discovery cache keyed by server id (+ credential for private entries).

    Args:
        clock: monotonic clock in seconds (inject a fake for tests); also the clock of
            the underlying :class:`~mcpsync._speedups.TTLCache`.
        maxsize: at most this many (server, credential) entries.
        zero_ttl: ``"session"`` (default: a ``ttlMs`` 0 entry is stale but serves until
            invalidated) or ``"refetch"`` (it misses on every lookup).
        metrics: optional recorder told ``record_cache(server, hit, tool)`` on each
            lookup and ``record_discovery(server)`` on each stored listing.
        cache_factory: builds the backing store (``TTLCache`` by default); for tests and
            benchmarks of the pure-Python twin.

    Example:
        >>> from mcpsync._messages import Tool
        >>> cache = ToolCache()
        >>> cache.fetch("s1", lambda: [Tool(name="echo")]).names
        ('echo',)
        >>> cache.fetch("s1", lambda: 1 / 0).names        # cached: not called again
        ('echo',)
    """

    def __init__(
        self, *, clock: Callable[[], float] | None = None, maxsize: int = 4096, zero_ttl: str = "session",
        metrics: Any = None, cache_factory: Callable[..., Any] | None = None,
    ) -> None:
        if zero_ttl not in ("session", "refetch"):
            raise ValueError("zero_ttl must be 'session' or 'refetch'")
        self._clock = clock if clock is not None else time.monotonic
        self.zero_ttl = zero_ttl
        self.metrics = metrics
        factory = cache_factory if cache_factory is not None else TTLCache
        self._store = factory(ttl=None, maxsize=maxsize, clock=self._clock)
        self._lock = threading.Lock()
        self._private: dict[str, set[str]] = {}  # server → credential keys with private entries
        self._order: dict[tuple[str, str | None], list[str]] = {}  # stable order memory
        self._generation: dict[tuple[str, str | None], int] = {}
        self._counters: dict[str, _Counters] = {}
        self._servers: dict[str, None] = {}  # insertion-ordered set of servers seen
        self._inflight: dict[tuple[str, str | None], threading.Event] = {}
        #: server → invalidations so far: a listing asked for before one is not kept (fetch)
        self._epochs: dict[str, int] = {}

    # ------------------------------------------------------------------ reading

    def _find(self, server: str, ck: str | None) -> ToolSet | None:
        store = self._store
        if ck is not None or server in self._private:
            entry = store.get((server, ck if ck is not None else _ANONYMOUS))
            if entry is not None:
                return self._usable(entry)
        entry = store.get((server, None))
        if entry is not None:
            return self._usable(entry)
        return None

    def _usable(self, entry: ToolSet) -> ToolSet | None:
        if entry.fresh_until is not None and self.zero_ttl == "refetch" and entry.ttl_ms == 0:
            return None
        return entry

    def peek(self, server: str, cred: Any = None) -> ToolSet | None:
        """Like :meth:`get`, but counts nothing (for the harness's own use)."""
        if cred is None and server not in self._private:
            # asked on every call_tool: the public entry, _find and _usable in one frame
            entry = self._store.peek((server, None))
            if entry is None or (entry.fresh_until is not None and entry.ttl_ms == 0 and self.zero_ttl == "refetch"):
                return None
            return entry  # type: ignore[no-any-return]
        return self._find(server, None if cred is None else credential_key(cred))

    def get(self, server: str, cred: Any = None) -> ToolSet | None:
        """The cached tools of ``server`` for the authorization context ``cred``.

        A private entry stored under ``cred`` is preferred, else the public entry; a
        private entry of another credential is never returned. Counts a hit or a miss.

        Returns:
            The :class:`ToolSet`, or ``None`` (not discovered, invalidated, or its
            positive ``ttlMs`` ran out).
        """
        return self._get(server, credential_key(cred))

    def _get(self, server: str, ck: str | None) -> ToolSet | None:
        entry = self._find(server, ck)
        with self._lock:
            c = self._counters.get(server)
            if c is None:
                c = self._counters[server] = _Counters()
            if entry is None:
                c.misses += 1
            else:
                c.hits += 1
                if entry.ttl_ms == 0:
                    c.stale_served += 1
        m = self.metrics
        if m is not None:
            m.record_cache(server, entry is not None, None)
        return entry

    def lookup(self, server: str, tool_name: str, cred: Any = None) -> Any:
        """The cached definition of one tool, or ``None``.

        ``None`` means either that the server was not discovered (or its entry was
        invalidated) — check with :meth:`get` / rediscover — or that it has no such
        tool. Counts one hit (tool found) or one miss.
        """
        ck = credential_key(cred) if cred is not None else None
        entry = self._find(server, ck)
        tool = entry.by_name.get(tool_name) if entry is not None else None
        with self._lock:
            c = self._counters.get(server)
            if c is None:
                c = self._counters[server] = _Counters()
            if tool is None:
                c.misses += 1
            else:
                c.hits += 1
        m = self.metrics
        if m is not None:
            m.record_cache(server, tool is not None, tool_name)
        return tool

    def tools(self, server: str, cred: Any = None) -> tuple[Any, ...]:
        """The cached tools of ``server`` in stable order (empty if not cached). Counts nothing."""
        entry = self._find(server, credential_key(cred))
        return entry.tools if entry is not None else ()

    def ordered_tools(
        self, servers: Sequence[str] | None = None, cred: Any = None
    ) -> list[tuple[str, Any]]:
        """``(server, tool)`` pairs for an LLM request, in a stable order.

        Args:
            servers: which servers, in this order (default: every server, in the order
                they were first stored).
            cred: the authorization context.

        Returns:
            The tools of each server in its stable order; a server not cached adds
            nothing. Append these after the harness's own stable prefix.
        """
        names = list(servers) if servers is not None else list(self._servers)
        ck = credential_key(cred)
        out: list[tuple[str, Any]] = []
        for s in names:
            entry = self._find(s, ck)
            if entry is not None:
                out.extend((s, t) for t in entry.tools)
        return out

    def servers(self) -> list[str]:
        """Every server stored so far, in first-stored order."""
        return list(self._servers)

    # ------------------------------------------------------------------ writing

    def put(
        self,
        server: str,
        tools: Iterable[Any],
        ttl_ms: int | None = None,
        scope: str | None = None,
        cred: Any = None,
        *,
        epoch: int | None = None,
    ) -> ToolSet:
        """Store a discovery of ``server`` (one ``tools/list`` listing, every page).

        Args:
            server: the server id.
            tools: the tools (:class:`~mcpsync._messages.Tool` or anything with ``name``).
            ttl_ms: the server's ``ttlMs`` (merged over pages: :func:`merge_cache_hints`).
            scope: the server's ``cacheScope``; ``None`` means public without ``cred``
                and private with one.
            cred: the authorization context the listing was fetched under.
            epoch: the server's invalidation count when the listing was asked for: if an
                invalidation (a ``list_changed``) came since, the listing is returned but
                not kept (it may predate the change).

        Returns:
            The :class:`ToolSet` (stored unless outdated). Counts one discovery.
        """
        ck = credential_key(cred)
        if scope is None:
            scope = PUBLIC if ck is None else PRIVATE
        if scope not in (PUBLIC, PRIVATE):
            scope = PRIVATE  # an unknown scope is treated as the restrictive one
        key = (server, None) if scope == PUBLIC else (server, ck if ck is not None else _ANONYMOUS)
        listed = tools if type(tools) is list else list(tools)
        now = self._clock()
        drop_private: tuple[str, str] | None = None
        with self._lock:
            # name -> tool (the last of a name wins, in the place of its first): built in C
            by_name = dict(zip(map(_NAME, listed), listed))
            names = list(by_name)
            known = self._order.get(key)
            if not known or known == names:  # the first listing, or the same names again
                ordered = names
            else:  # the known names that stay, in their old places, then the new ones
                ordered = [n for n in known if n in by_name]
                have = set(ordered)
                ordered += [n for n in names if n not in have]
            self._order[key] = ordered
            gen = self._generation.get(key, -1) + 1
            self._generation[key] = gen
            if scope == PRIVATE:
                self._private.setdefault(server, set()).add(key[1])  # type: ignore[arg-type]
            elif ck is not None and ck in self._private.get(server, ()):
                drop_private = (server, ck)  # the server now says public: the old private copy goes
            self._servers.setdefault(server, None)
            c = self._counters.setdefault(server, _Counters())
            c.discoveries += 1
        fresh_until = None if ttl_ms is None else now + max(0, ttl_ms) / 1000.0
        entry = ToolSet(
            server=server,
            tools=tuple(by_name.values()) if ordered is names else tuple(map(by_name.__getitem__, ordered)),
            by_name=MappingProxyType(by_name),
            ttl_ms=ttl_ms,
            scope=scope,
            fetched_at=now,
            fresh_until=fresh_until,
            generation=gen,
            _clock=self._clock,
        )
        # a positive ttlMs expires in the store; 0 and None live for the session
        expiry = ttl_ms / 1000.0 if ttl_ms is not None and ttl_ms > 0 else None
        self._store.set(key, entry, expiry)
        if epoch is not None and self._epochs.get(server, 0) != epoch:
            # looked at after the store: an invalidation that came before this look is seen
            # here; one that comes after it drops the entry itself (it counts, then drops)
            self._store.invalidate(key)
        if drop_private is not None:
            self._store.invalidate(drop_private)
        m = self.metrics
        if m is not None:
            m.record_discovery(server)
        return entry

    def put_pages(self, server: str, pages: Sequence[Any], cred: Any = None, *, epoch: int | None = None) -> ToolSet:
        """Store a listing given as its pages (``ListToolsResult`` values), merging hints."""
        ttl, scope = merge_cache_hints(pages)
        if len(pages) == 1 and not isinstance(pages[0], Mapping):  # one page: its list as it is
            tools = pages[0].tools
        else:
            tools = [t for p in pages for t in (p.get("tools", ()) if isinstance(p, Mapping) else p.tools)]
        return self.put(server, tools, ttl_ms=ttl, scope=scope, cred=cred, epoch=epoch)

    def fetch(
        self,
        server: str,
        discover: Callable[[], Any],
        cred: Any = None,
        *,
        timeout: float = 60.0,
    ) -> ToolSet:
        """The cached tools, discovering them once if needed (single flight).

        When several threads miss at once, one of them calls ``discover`` and the
        others wait for its result (bounded by ``timeout``), so a cold cache costs one
        ``tools/list`` however many threads ask.

        Args:
            server: the server id.
            discover: returns a list of tools, or a sequence of pages
                (``ListToolsResult``), or one page; its exceptions propagate.
            cred: the authorization context.
            timeout: how long a waiting thread waits for another's discovery before
                discovering itself.

        Returns:
            The :class:`ToolSet` (a hit counts as a hit, a discovery as a miss).
        """
        ck = credential_key(cred)
        entry = self._get(server, ck)
        if entry is not None:
            return entry
        flight = (server, ck)
        while True:
            with self._lock:
                event = self._inflight.get(flight)
                leader = event is None
                if leader:
                    event = self._inflight[flight] = threading.Event()
            if leader:
                break
            event.wait(timeout)  # type: ignore[union-attr]
            entry = self._find(server, ck)
            if entry is not None:
                return entry
            if not event.is_set():  # type: ignore[union-attr]
                break  # the leader is stuck: discover ourselves
        try:
            epoch = self._epochs.get(server, 0)
            found = discover()
            return self._store_found(server, found, cred, epoch)
        finally:
            with self._lock:
                ev = self._inflight.pop(flight, None)
            if ev is not None:
                ev.set()

    def _store_found(self, server: str, found: Any, cred: Any, epoch: int) -> ToolSet:
        if hasattr(found, "tools"):  # one page
            return self.put_pages(server, [found], cred, epoch=epoch)
        items = list(found)
        if items and (hasattr(items[0], "tools") or (isinstance(items[0], Mapping) and "tools" in items[0])):
            return self.put_pages(server, items, cred, epoch=epoch)
        return self.put(server, items, cred=cred, epoch=epoch)

    # ------------------------------------------------------------------ invalidation

    def invalidate(self, server: str | None = None, reason: str = EXPLICIT, cred: Any = None) -> int:
        """Drop cached listings so the next lookup rediscovers (level 3).

        Args:
            server: the server id (``None``: every server).
            reason: :data:`SERVER_START`, :data:`RECONNECT`, :data:`LIST_CHANGED` or
                :data:`EXPLICIT` (anything else is counted under its own name).
            cred: drop only this credential's private entry (default: the public entry
                and every private one of ``server``). ``list_changed`` and reconnects
                concern the server, so the client passes no ``cred`` for them.

        Returns:
            How many entries were dropped.
        """
        if server is None:
            return sum(self.invalidate(s, reason) for s in list(self._servers))
        with self._lock:
            if cred is not None:
                keys = [(server, credential_key(cred))]
            else:
                keys = [(server, None)] + [(server, k) for k in self._private.get(server, ())]
            c = self._counters.setdefault(server, _Counters())
            c.invalidations[reason] = c.invalidations.get(reason, 0) + 1
            self._epochs[server] = self._epochs.get(server, 0) + 1
        return sum(self._store.invalidate(k) for k in keys)

    # ------------------------------------------------------------------ stats

    def stats(self, server: str | None = None) -> CacheStats:
        """Counters of one server, or summed over every server."""
        with self._lock:
            if server is not None:
                c = self._counters.get(server)
                return c.freeze() if c is not None else CacheStats()
            total = _Counters()
            for c in self._counters.values():
                total.hits += c.hits
                total.misses += c.misses
                total.discoveries += c.discoveries
                total.stale_served += c.stale_served
                for k, v in c.invalidations.items():
                    total.invalidations[k] = total.invalidations.get(k, 0) + v
            return total.freeze()

    @property
    def hits(self) -> int:
        return self.stats().hits

    @property
    def misses(self) -> int:
        return self.stats().misses

    def __len__(self) -> int:
        return len(self._store)


class CacheHits:
    """A metrics sink as seen by a :class:`ToolCache` whose discoveries are counted
    elsewhere (a Client's guard times them as ``tools/list`` requests): hits and misses."""

    __slots__ = ("record_cache",)

    def __init__(self, sink: Any) -> None:
        self.record_cache = getattr(sink, "record_cache", lambda *a: None)

    def record_discovery(self, server: str, *args: Any, **kwargs: Any) -> None:
        pass


class ResultCache:
    """Modern-era results kept for their ``ttlMs`` (resources, prompts, ``resources/read``).

    ``cacheScope: "public"`` entries are shared by every credential; any other entry is
    keyed by the credential that fetched it, so it is never served to another one. An
    invalidation that lands while a request is in flight keeps that request's result
    out (``generation``).

    Example:
        >>> rc = ResultCache()
        >>> gen = rc.generation
        >>> rc.put("me", "prompts/list", None, "listing", ttl_ms=60_000, scope="private", generation=gen)
        >>> rc.get("me", "prompts/list", None), rc.get("you", "prompts/list", None)
        ('listing', None)
        >>> rc.invalidate(("prompts/list",)); rc.get("me", "prompts/list", None) is None
        True
    """

    #: Entries kept at most; past it the cache starts again empty.
    MAX_ENTRIES = 1024

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._entries: dict[tuple[Any, str, str], tuple[float, Any]] = {}
        self.generation = 0  # bumped by every invalidation

    @staticmethod
    def key(params: Mapping[str, Any] | None) -> str:
        return json.dumps(params or {}, sort_keys=True, default=str)

    def get(self, cred: Any, method: str, params: Mapping[str, Any] | None) -> Any:
        """The fresh entry for ``cred`` (or a public one), else None."""
        pkey = self.key(params)
        now = time.monotonic()
        with self._lock:
            for scope in (cred, None):
                hit = self._entries.get((scope, method, pkey))
                if hit is not None:
                    if hit[0] > now:
                        return hit[1]
                    del self._entries[(scope, method, pkey)]
        return None

    def put(
        self, cred: Any, method: str, params: Mapping[str, Any] | None, result: Any, *, ttl_ms: float,
        scope: str | None, generation: int,
    ) -> None:
        """Keep ``result`` for ``ttl_ms``, unless an invalidation came since ``generation``."""
        owner = None if scope == PUBLIC else cred
        with self._lock:
            if self.generation != generation:
                return  # a change was announced while this was in flight
            if len(self._entries) > self.MAX_ENTRIES:
                self._entries.clear()
            self._entries[(owner, method, self.key(params))] = (time.monotonic() + ttl_ms / 1000.0, result)

    def fetch(
        self, cred: Any, method: str, params: Mapping[str, Any] | None, ask: Callable[[], Any], *,
        use: bool = True, refresh: bool = False,
    ) -> Any:
        """The fresh entry, else ``ask()``'s result, kept when it carries ``ttlMs``.

        Args:
            cred: who is asking (private entries are theirs alone).
            ask: the request.
            use: False: neither read nor keep (the client's ``cache_results``).
            refresh: ask even if a fresh entry is kept (the answer replaces it).
        """
        generation = self.generation
        if use and not refresh:
            hit = self.get(cred, method, params)
            if hit is not None:
                return hit
        result = ask()
        ttl = getattr(result, "ttl_ms", None)
        if use and ttl:
            self.put(cred, method, params, result, ttl_ms=ttl, scope=getattr(result, "cache_scope", None),
                     generation=generation)
        return result

    def invalidate(self, methods: Iterable[str], uri: str | None = None) -> None:
        """Drop the entries of ``methods`` (only those for ``uri``, if given)."""
        methods = tuple(methods)
        with self._lock:
            self.generation += 1
            for k in [k for k in self._entries if k[1] in methods]:
                if uri is None or json.loads(k[2]).get("uri") == uri:
                    del self._entries[k]

    def clear(self) -> None:
        with self._lock:
            self.generation += 1
            self._entries.clear()

    def __len__(self) -> int:
        return len(self._entries)
