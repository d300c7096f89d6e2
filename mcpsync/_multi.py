"""Several servers at once: one object over many Clients, calls routed by tool name.

Each server keeps its own :class:`~mcpsync.Client` (its own pool, breaker, cache and
metrics); :class:`MultiClient` only lists their tools side by side and routes calls.
Every tool is exposed as ``server__tool`` (the separator is configurable): a tool's name
depends on its own server's name and nothing else, so adding a server to a configuration
never renames another server's tools (which would break agent prompts and the prompt-cache
prefixes built from the tool list). ``namespace="collisions"`` keeps bare names and
prefixes only names several servers offer, at that cost. A qualified name is accepted for
any tool. Tools are listed from all servers concurrently, each bounded by
its own timeout, so a dead or slow server never holds up the others: it is reported in
:meth:`MultiClient.status` and :attr:`MultiClient.errors` instead of raising, and each
server left out of a listing is said once in a WARNING (``mcpsync.multi``) with the reason.
A server still starting when its listing time runs out goes on starting in the
background and is listed as soon as it answers; a call of one of its tools, or of a tool
of a server that failed, is told so (:class:`ToolNotFound` with ``server_state``
``"starting"`` or ``"failed"``, which the adapters turn into a sentence that says so).
Resources and prompts are listed across servers too (:mod:`mcpsync._multi_catalog`).

Example:
    >>> with MultiClient.from_config("mcp.json") as multi:                    # doctest: +SKIP
    ...     print([t.name for t in multi.list_tools()])
    ...     print(multi.call_tool("everything__echo", {"message": "hi"}).text)
    ...     print({name: s.state for name, s in multi.status().items()})
"""

from __future__ import annotations

import logging
import os
import threading
import time
from typing import TYPE_CHECKING, Any, Iterable, Literal, Mapping, Sequence

import msgspec

from ._errors import ToolNotFound
from ._multi_catalog import Catalog, ServerStatus, ToolEntry

if TYPE_CHECKING:
    from ._messages import CallToolResult, Tool

__all__ = ["MultiClient", "ServerStatus", "ToolEntry"]

log = logging.getLogger("mcpsync.multi")

Namespace = Literal["collisions", "always"]

#: Longest wait (seconds) of :meth:`MultiClient.close` for its clients, which close in
#: parallel; each client's own close is bounded (a stdio server: close stdin, wait,
#: SIGTERM, wait, SIGKILL), so this is only a backstop.
CLOSE_WAIT = 30.0


def _start_budget(client: Any) -> float:
    """How long a server may take to start (its client's ``timeouts.start``, else 0)."""
    start = getattr(getattr(client, "timeouts", None), "start", 0.0)
    return float(start) if isinstance(start, (int, float)) else 0.0


def _close_client(name: str, client: Any) -> None:
    try:
        client.close()
    except Exception:
        log.warning("closing the client of %s failed", name, exc_info=True)


class _Server:
    __slots__ = ("name", "client", "tools", "error", "checked", "listing", "generation", "config_error", "disabled", "failed_at",
                 "stale", "starting", "warned")

    def __init__(self, name: str, client: Any = None) -> None:
        self.name = name
        self.client = client
        self.tools: list[Any] | None = None
        self.error: BaseException | None = None
        self.checked: float | None = None
        self.listing: threading.Event | None = None
        self.generation = 0
        self.config_error: BaseException | None = None
        self.disabled = False
        self.failed_at: float | None = None  # monotonic time of the last failed listing
        self.stale = False  # a list_changed arrived: list again at the next use
        self.starting = False  # its listing outlived list_timeout and goes on (listed when it answers)
        self.warned: str | None = None  # the reason it was last said to be left out (said once)


class MultiClient:
    """One object over many MCP servers; thread-safe.

    Args:
        clients: server name → Client (anything with ``list_tools`` / ``call_tool`` /
            ``close``). Order is kept (it is the order of :meth:`list_tools`).
        separator: between server and tool in namespaced names (default ``"__"``).
        namespace: ``"always"`` (default: every tool is ``server__tool``, a name that
            stays the same whatever other servers join) or ``"collisions"`` (only names
            offered by several servers are prefixed: adding a server that also has
            ``echo`` renames this one's ``echo``).
        list_timeout: seconds each server gets to list its tools (connect included)
            before it is reported as failed; the others do not wait for it.
        relist_after: seconds before a server whose listing failed is tried again by
            an ordinary call (:meth:`refresh` tries at once); meanwhile calls are not
            slowed down by it.
        owns_clients: :meth:`close` closes the clients (default True).
        errors: server name → error for servers that could not even be built (a bad
            configuration entry); they are reported, never called.

    Example:
        >>> from mcpsync import Client
        >>> multi = MultiClient({"demo": Client.stdio("python", ["-m", "mcpsync.server.demo"]),
        ...                      "gone": Client.stdio("no-such-command")})           # doctest: +SKIP
        >>> [t.name for t in multi.list_tools()][:2]                                   # doctest: +SKIP
        ['echo', 'add']
        >>> multi.status()["gone"].state                                               # doctest: +SKIP
        'error'
    """

    def __init__(
        self,
        clients: Mapping[str, Any],
        *,
        separator: str = "__",
        namespace: Namespace = "always",
        list_timeout: float = 15.0,
        relist_after: float = 30.0,
        owns_clients: bool = True,
        errors: Mapping[str, BaseException] | None = None,
    ) -> None:
        if not separator:
            raise ValueError("separator must not be empty")
        if namespace not in ("collisions", "always"):
            raise ValueError(f"namespace must be 'collisions' or 'always', not {namespace!r}")
        if list_timeout <= 0 or relist_after < 0:
            raise ValueError("list_timeout must be positive and relist_after not negative")
        self.separator = separator
        self.namespace: Namespace = namespace
        self.list_timeout = float(list_timeout)
        self.relist_after = float(relist_after)
        self.owns_clients = owns_clients
        self._lock = threading.Lock()
        self._closed = False
        self._servers: dict[str, _Server] = {}
        self.catalog = Catalog(self._servers, self._lock, separator, namespace, self.list_timeout)  # resources, prompts
        for name, client in clients.items():
            self._add(name, client)
        for name, exc in (errors or {}).items():
            server = self._servers.get(name) or _Server(name)
            server.config_error = exc
            self._servers[name] = server
            self._left_out(server, f"its configuration cannot be used: {exc}")

    def _add(self, name: str, client: Any) -> None:
        if not isinstance(name, str) or not name:
            raise ValueError("server names must be non-empty strings")
        server = _Server(name, client)
        self._servers[name] = server
        on_notification = getattr(client, "on_notification", None)
        if callable(on_notification):
            on_notification("notifications/tools/list_changed", lambda _params, s=server: self._invalidate(s))

    # ---------------------------------------------------------------- construction

    @classmethod
    def from_config(
        cls,
        path: str | os.PathLike[str] | Mapping[str, Any],
        names: Sequence[str] | None = None,
        *,
        environ: Mapping[str, str] | None = None,
        separator: str = "__",
        namespace: Namespace = "always",
        list_timeout: float = 15.0,
        relist_after: float = 30.0,
        include_disabled: bool = False,
        per_server: Mapping[str, Mapping[str, Any]] | None = None,
        strict: bool = False,
        **options: Any,
    ) -> "MultiClient":
        """A MultiClient over the servers of a configuration file.

        Args:
            path: the ``mcpServers`` file, or the configuration as a dict.
            names: the servers to use (default: all that are not ``disabled``; a
                ``disabled`` server named here is used).
            environ: where ``${VAR}`` values come from.
            separator: see the class.
            namespace: see the class.
            list_timeout: see the class.
            relist_after: see the class.
            include_disabled: also use entries marked ``disabled``.
            per_server: server name → Client options for that server only (over
                ``options``).
            strict: a malformed entry fails the file (default: that server only, reported
                in :meth:`status` as ``"config-error"``).
            **options: Client keyword options given to every server's Client (each still
                gets its own Client, so its own pool, breaker and cache).

        Raises:
            ConfigError: the file itself is bad, or ``names`` names an undefined server.
                A server whose entry cannot be used (unset variable, unsupported
                transport, a transport the profile does not allow) is reported in
                :meth:`status` instead.
        """
        from ._client import Client
        from ._config import ConfigError, load_config

        config = load_config(path, environ=environ, strict=strict)
        for name in per_server or {}:
            if not config.defines(name):
                config[name]  # raises the ConfigError naming the defined servers
        chosen = list(names) if names is not None else config.names
        clients: dict[str, Any] = {}
        errors: dict[str, BaseException] = {}
        disabled: list[str] = []
        for name in chosen:
            if not config.defines(name):
                config[name]  # raises the ConfigError naming the defined servers
            if name in config.errors:
                errors[name] = config.errors[name]
                continue
            server = config[name]
            if server.disabled and not include_disabled and names is None:
                disabled.append(name)
                continue
            try:
                clients[name] = Client.from_config(server, allow_disabled=True, **{**options, **dict((per_server or {}).get(name, {}))})
            except (ConfigError, ValueError) as exc:  # ValueError: e.g. ProfileError
                errors[name] = exc
        multi = cls(clients, separator=separator, namespace=namespace, list_timeout=list_timeout, relist_after=relist_after, errors=errors)
        for name in disabled:
            s = _Server(name)
            s.disabled = True
            multi._servers[name] = s
        kept = {n: multi._servers[n] for n in config.names if n in multi._servers}  # the file's order
        multi._servers.clear()  # (in place: the catalog holds this dict)
        multi._servers.update(kept)
        return multi

    def list_resources(self, *, timeout: float | None = None) -> list[Any]:
        """Every resource of every server that answered (see :class:`~mcpsync._multi_catalog.Catalog`)."""
        return self.catalog.list_resources(timeout=timeout)

    def read_resource(self, uri: str, **kwargs: Any) -> Any:
        """Read ``uri`` from the server that listed it (:class:`ResourceNotFound` if none)."""
        return self.catalog.read_resource(uri, **kwargs)

    def list_prompts(self, *, timeout: float | None = None) -> list[Any]:
        """Every prompt of every server that answered, named as :meth:`get_prompt` takes them."""
        return self.catalog.list_prompts(timeout=timeout)

    def get_prompt(self, name: str, arguments: Mapping[str, Any] | None = None, **kwargs: Any) -> Any:
        """Render prompt ``name`` on its server (:class:`ToolNotFound` if none offers it)."""
        return self.catalog.get_prompt(name, arguments, **kwargs)

    # ---------------------------------------------------------------- lifecycle

    def __enter__(self) -> "MultiClient":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        """Close every client (when owned), all at once. Idempotent; one client's failure
        to close does not stop the others.

        The clients close in parallel, one thread each, so a stubborn server (one that
        ignores EOF and SIGTERM and must be killed) costs the time of one shutdown, not
        one per server. The wait is bounded by :data:`CLOSE_WAIT` seconds.
        """
        with self._lock:
            if self._closed:
                return
            self._closed = True
            clients = [(s.name, s.client) for s in self._servers.values() if s.client is not None]
        if not self.owns_clients or not clients:
            return
        if len(clients) == 1:
            _close_client(*clients[0])
            return
        threads = [
            threading.Thread(target=_close_client, args=(name, client), name=f"mcpsync-close-{name}", daemon=True)
            for name, client in clients
        ]
        for t in threads:
            t.start()
        deadline = time.monotonic() + CLOSE_WAIT
        for t in threads:
            t.join(max(deadline - time.monotonic(), 0.0))
        late = [t.name[len("mcpsync-close-") :] for t in threads if t.is_alive()]
        if late:
            log.warning("still closing after %g s: %s", CLOSE_WAIT, ", ".join(late))

    @property
    def closed(self) -> bool:
        return self._closed

    @property
    def servers(self) -> list[str]:
        """The server names, in order."""
        return list(self._servers)

    def client(self, server: str) -> Any:
        """The Client of one server.

        Raises:
            KeyError: no such server, or it has no client (bad configuration, disabled).
        """
        s = self._servers.get(server)
        if s is None or s.client is None:
            raise KeyError(server)
        return s.client

    # ---------------------------------------------------------------- discovery

    def _invalidate(self, server: _Server) -> None:
        # Stale, not dropped: until the next listing the old tools stay visible (a burst
        # of list_changed, as server-everything sends after its handshake, never makes a
        # server's tools vanish from a listing).
        with self._lock:
            server.generation += 1
            server.stale = True
            server.failed_at = None  # it spoke: list it again at the next use

    def _list_one(self, server: _Server, generation: int, done: threading.Event) -> None:
        # A list_changed that arrives while listing makes the answer suspect: list again
        # (a few times at most; servers like server-everything announce their tools with a
        # list_changed right after the handshake).
        # the listing may outlive the callers' wait (list_timeout): a server still starting
        # (a first `npx -y` downloads the package) gets its whole start budget, and is
        # listed the moment it answers
        budget = max(self.list_timeout, _start_budget(server.client))
        for _attempt in range(3):
            try:
                tools: list[Any] | None = list(server.client.list_tools(timeout=budget))
                error: BaseException | None = None
            except BaseException as exc:  # reported, never raised: one server never blocks the rest
                tools, error = None, exc
            with self._lock:
                server.checked = time.time()
                if error is not None:
                    server.error = error
                    server.failed_at = time.monotonic()
                    break
                if server.generation == generation:
                    server.tools, server.error, server.failed_at, server.stale = tools, None, None, False
                    break
                generation = server.generation
        else:
            with self._lock:  # still changing: keep the latest answer, still stale
                server.tools, server.error, server.failed_at = tools, None, None
        with self._lock:
            if server.listing is done:
                server.listing = None
            came_late, server.starting = server.starting, False
        if error is not None and not self._closed:
            self._left_out(server, f"listing its tools failed: {type(error).__name__}: {error}")
        elif came_late or server.warned is not None:
            server.warned = None
            log.warning("server %s answered: its %d tools are listed now", server.name, len(tools or ()))
        done.set()

    def refresh(self, servers: Iterable[str] | None = None, *, timeout: float | None = None, force: bool = True) -> dict[str, BaseException]:
        """(Re)list the tools of servers, concurrently, each bounded by ``timeout``.

        Args:
            servers: which (default all).
            timeout: seconds to wait for each (default ``list_timeout``); a server still
                listing then is reported as timed out, and its answer is kept if it comes.
            force: list even servers whose tools are cached.

        Returns:
            server name → error, for the servers that failed this time.
        """
        from ._errors import RequestTimeout

        wait_for = self.list_timeout if timeout is None else float(timeout)
        waits = self._start_listing(list(self._servers) if servers is None else list(servers), force)
        deadline = time.monotonic() + wait_for
        failed: dict[str, BaseException] = {}
        for s, event in waits:
            if not event.wait(max(deadline - time.monotonic(), 0.0)):
                exc = RequestTimeout(f"server {s.name} did not list its tools within {wait_for:g} s; it is still "
                                     "starting, and is listed as soon as it answers", timeout=wait_for)
                with self._lock:
                    still = s.listing is event
                    if still:  # its listing goes on: no failure (that would hold it off for relist_after)
                        s.starting = True
                        s.checked = time.time()
                if still:
                    self._left_out(s, f"it is still starting after {wait_for:g} s: its tools are listed as soon "
                                      "as it answers")
                failed[s.name] = exc
            elif s.error is not None:
                failed[s.name] = s.error
        return failed

    def _start_listing(self, names: Iterable[str], force: bool) -> list[tuple[_Server, threading.Event]]:
        """Start listing ``names`` (each on a thread of its own; one listing at a time per
        server: a server listing already is joined). Returns (server, its listing's end)."""
        waits: list[tuple[_Server, threading.Event]] = []
        with self._lock:
            if self._closed:
                from ._errors import ConnectionClosed

                raise ConnectionClosed("the MultiClient is closed")
            for name in names:
                s = self._servers[name]
                if s.client is None:
                    continue
                if not force and s.tools is not None and not s.stale:
                    continue
                if s.listing is None:
                    s.listing = threading.Event()
                    t = threading.Thread(
                        target=self._list_one, args=(s, s.generation, s.listing), name=f"mcpsync-list-{name}", daemon=True
                    )
                    t.start()
                waits.append((s, s.listing))
        return waits

    def _left_out(self, server: _Server, why: str) -> None:
        """Say once (per reason) that ``server``'s tools are left out of the listings."""
        if server.warned == why:
            return
        server.warned = why
        log.warning("server %s is left out of the tool list: %s", server.name, why)

    def _snapshot(self) -> list[tuple[str, list[Any]]]:
        with self._lock:
            return [(s.name, list(s.tools)) for s in self._servers.values() if s.tools is not None]

    def _entries(self, snapshot: list[tuple[str, list[Any]]]) -> list[ToolEntry]:
        owners: dict[str, int] = {}
        for _server, tools in snapshot:
            for name in {t.name for t in tools}:
                owners[name] = owners.get(name, 0) + 1
        out: list[ToolEntry] = []
        taken: set[str] = set()
        for server, tools in snapshot:
            for tool in tools:
                qualify = self.namespace == "always" or owners[tool.name] > 1
                name = f"{server}{self.separator}{tool.name}" if qualify else tool.name
                if name in taken:
                    # server "a" with tool "b__c" and server "a__b" with tool "c": number the
                    # later one (servers in order), so every exposed name stays unique
                    n = 2
                    while f"{name}{self.separator}{n}" in taken:
                        n += 1
                    log.warning("tool name %s is exposed twice; the one of server %s is %s", name, server, f"{name}{self.separator}{n}")
                    name = f"{name}{self.separator}{n}"
                taken.add(name)
                out.append(ToolEntry(server, name, tool))
        return out

    def _missing(self) -> list[str]:
        """The servers never listed (or invalidated by list_changed), but not those that
        failed recently or are still busy with an earlier listing."""
        now = time.monotonic()
        with self._lock:
            return [
                s.name
                for s in self._servers.values()
                if s.client is not None
                and (s.tools is None or s.stale)
                and not s.starting  # its listing goes on: it is listed when it answers, nobody waits
                and (s.failed_at is None or (s.listing is None and now - s.failed_at >= self.relist_after))
            ]

    def _ensure_listed(self) -> None:
        """List the servers :meth:`_missing` names, waiting for them (``list_timeout``)."""
        missing = self._missing()
        if missing:
            self.refresh(missing, force=False)

    def tool_entries(self, *, refresh: bool = False) -> list[ToolEntry]:
        """Every reachable tool as (server, exposed name, Tool), servers in order.

        Servers whose tools are not cached are listed first (concurrently); failures are
        reported in :meth:`status`, not raised.
        """
        if refresh:
            self.refresh()
        else:
            self._ensure_listed()
        return self._entries(self._snapshot())

    def list_tools(self, *, refresh: bool = False) -> list[Tool]:
        """Every reachable tool, named as callers call it (``server__tool`` when namespaced).

        Returns:
            :class:`~mcpsync.Tool` values; a namespaced one is a copy with the qualified
            name (and the server's title unchanged).
        """
        out: list[Tool] = []
        for e in self.tool_entries(refresh=refresh):
            tool = e.tool
            if e.name != tool.name:
                try:
                    tool = msgspec.structs.replace(tool, name=e.name)
                except TypeError:  # not a msgspec Struct
                    import copy

                    tool = copy.copy(tool)
                    tool.name = e.name
            out.append(tool)
        return out

    def tools_by_server(self) -> dict[str, list[Tool]]:
        """server name → its tools, with their own names (servers that listed, in order)."""
        self._ensure_listed()
        return dict(self._snapshot())

    # ---------------------------------------------------------------- routing

    def route(self, name: str, *, timeout: float | None = None) -> tuple[str, str]:
        """The (server, tool name on that server) a call of ``name`` goes to.

        A name that a listed server offers is routed at once: servers not listed yet are
        listed meanwhile, in the background, never waited for. Otherwise the servers that
        may offer it are listed first, waited for up to ``timeout`` s (default
        ``list_timeout``): a qualified name's own server, or for a bare name every server
        not listed yet.

        Raises:
            ToolNotFound: no reachable server offers it, or a bare name is offered by
                several servers (the message lists the qualified names). A bare name
                that exactly one server offers is routed to it.
        """
        missing = self._missing()
        if missing:
            self._start_listing(missing, force=False)  # never waited for here
            found = self._resolve(name, final=False)
            if found is not None:
                return found
            sep = self.separator
            own = [m for m in missing if name.startswith(m + sep)]
            self._await_listings(max(own, key=len) if own else None, missing, timeout)
        found = self._resolve(name, final=True)
        assert found is not None  # (final: raises instead)
        return found

    def _await_listings(self, own: str | None, missing: list[str], timeout: float | None) -> None:
        """Wait for the listing of a qualified name's own server (``own``), or else of every
        server ``missing``, up to ``timeout`` s; a listing still going on then goes on."""
        wait = self.list_timeout if timeout is None else max(float(timeout), 0.0)
        deadline = time.monotonic() + wait
        with self._lock:
            events = [s.listing for n in ([own] if own is not None else missing)
                      if (s := self._servers[n]).listing is not None]
        for event in events:
            event.wait(max(deadline - time.monotonic(), 0.0))

    def _resolve(self, name: str, final: bool) -> tuple[str, str] | None:
        """Route ``name`` by what the servers listed so far offer; None when that is not
        enough (``final``: raise :class:`ToolNotFound` instead)."""
        snapshot = self._snapshot()
        entries = self._entries(snapshot)
        for e in entries:
            if e.name == name:
                return e.server, e.tool.name
        # a qualified name is accepted for any tool, namespaced or not
        sep = self.separator
        for server, tools in sorted(snapshot, key=lambda st: -len(st[0])):
            prefix = server + sep
            if name.startswith(prefix):
                rest = name[len(prefix) :]
                if any(t.name == rest for t in tools):
                    return server, rest
        candidates = sorted(e.name for e in entries if e.tool.name == name)
        if len(candidates) == 1:  # a bare name one server offers: unambiguous
            return next((e.server, e.tool.name) for e in entries if e.name == candidates[0])
        if candidates:
            raise ToolNotFound(
                f"tool {name} is offered by several servers: call one of {', '.join(candidates)}",
                code=-32602,
                data={"candidates": candidates},
            )
        if not final:
            return None
        # a qualified name of a server that could not list its tools: let its client try,
        # unless it is still starting (say so at once: the call would only wait)
        with self._lock:
            unreachable = [s for s in self._servers.values() if s.client is not None and s.tools is None]
        for s in sorted(unreachable, key=lambda s: -len(s.name)):
            if name.startswith(s.name + sep):
                if s.starting:
                    raise self.missing(name)
                return s.name, name[len(s.name) + len(sep) :]
        raise self.missing(name)

    def missing(self, name: str) -> ToolNotFound:
        """The error for a tool no listed server offers, saying which servers are still
        starting or failed (``server_state``: ``"starting"``, ``"failed"``, or None when
        every server answered: the tool does not exist)."""
        sep = self.separator
        with self._lock:
            out = [s for s in self._servers.values() if s.tools is None and not s.disabled and
                   (s.starting or s.error is not None or s.config_error is not None or s.listing is not None)]
        own = next((s for s in sorted(out, key=lambda s: -len(s.name)) if name.startswith(s.name + sep)), None)
        chosen = [own] if own is not None else out
        starting = [s.name for s in chosen if s.starting or (s.listing is not None and s.error is None)]
        failed = {s.name: s.config_error or s.error for s in chosen if s.name not in starting}
        parts = [f"still starting: {', '.join(starting)}"] if starting else []
        parts += [f"failed: {n} ({type(e).__name__}: {e})" for n, e in failed.items()]
        if not parts:
            return ToolNotFound(f"tool {name} does not exist on any server", code=-32602, data={"tool": name})
        state = "starting" if starting else "failed"
        if own is None:
            text = f"tool {name} is not listed, and some servers are not ready ({'; '.join(parts)})"
        elif starting:
            text = f"tool {name} is not available yet: server {own.name} is still starting (listed once it answers)"
        else:
            text = f"tool {name} is not available: server {own.name} failed ({type(failed[own.name]).__name__}: {failed[own.name]})"
        return ToolNotFound(
            text, code=-32602, data={"tool": name, "starting": starting, "failed": list(failed)},
            server_state=state, server=own.name if own is not None else None,
        )

    def call_tool(self, name: str, arguments: Mapping[str, Any] | None = None, **kwargs: Any) -> CallToolResult:
        """Call a tool by its exposed name on the server that offers it.

        Args:
            name: the tool's name as :meth:`list_tools` shows it.
            arguments: its arguments.
            **kwargs: passed to that server's ``Client.call_tool`` (``timeout`` ...).

        Routing (:meth:`route`) spends the call's own ``timeout``, never more: a call to a
        listed server does not wait for another's listing, and what a listing took is
        taken off the time the server's client gets.

        Raises:
            ToolNotFound: see :meth:`route`.
            MCPError: what that server's Client raised (the other servers are unaffected).
        """
        timeout = kwargs.get("timeout")
        started = time.monotonic()
        server, tool = self.route(name, timeout=timeout)
        if timeout is not None:
            left = float(timeout) - (time.monotonic() - started)
            if left <= 0:
                from ._errors import RequestTimeout, seconds

                raise RequestTimeout(f"tool {name}: the call's {seconds(timeout)} s ran out while the tools of {server} were "
                                     "listed", timeout=timeout, sent=False)
            kwargs["timeout"] = left
        s = self._servers[server]
        try:
            result: CallToolResult = s.client.call_tool(tool, arguments, **kwargs)
            return result
        except ToolNotFound:
            # the server no longer has it: its tool list changed without telling us
            self._invalidate(s)
            raise

    # ---------------------------------------------------------------- health

    @property
    def errors(self) -> dict[str, BaseException]:
        """server name → its last error (configuration, connection or listing)."""
        with self._lock:
            out: dict[str, BaseException] = {}
            for s in self._servers.values():
                err = s.config_error or s.error
                if err is not None:
                    out[s.name] = err
            return out

    def status(self, *, check: bool = False, timeout: float | None = None) -> dict[str, ServerStatus]:
        """server name → :class:`ServerStatus`, in order.

        Args:
            check: list every server's tools again first (concurrently, bounded).
            timeout: seconds for each server when checking.
        """
        if check:
            self.refresh(timeout=timeout)
        with self._lock:
            out: dict[str, ServerStatus] = {}
            for s in self._servers.values():
                if s.disabled:
                    out[s.name] = ServerStatus(s.name, "disabled")
                elif s.config_error is not None:
                    e = s.config_error
                    out[s.name] = ServerStatus(s.name, "config-error", error=str(e), error_type=type(e).__name__)
                elif s.error is not None:
                    e = s.error
                    out[s.name] = ServerStatus(
                        s.name, "error", len(s.tools or ()), error=str(e) or type(e).__name__, error_type=type(e).__name__, checked=s.checked
                    )
                elif s.tools is not None:
                    out[s.name] = ServerStatus(s.name, "ok", len(s.tools), checked=s.checked)
                elif s.starting:
                    out[s.name] = ServerStatus(s.name, "starting", checked=s.checked)
                else:
                    out[s.name] = ServerStatus(s.name, "pending", checked=s.checked)
            return out

    def __repr__(self) -> str:
        return f"MultiClient(servers={self.servers!r})"
