"""Resources and prompts across the servers of a :class:`~mcpsync.MultiClient`, and what
it reports of its tools and servers (:class:`ToolEntry`, :class:`ServerStatus`).

Each server is asked concurrently, each bounded by the MultiClient's ``list_timeout``, so a
slow or dead server never holds up the others (it is left out, said once in a WARNING on
``mcpsync.multi``); a server that offers no resources or prompts (no capability, or
"method not found") simply adds none. Prompt names are namespaced as tool names are
(``server__prompt``); a resource keeps its URI, and :meth:`Catalog.read_resource` reads it
from the server that listed it.

Example:
    >>> with MultiClient.from_config("mcp.json") as multi:                # doctest: +SKIP
    ...     [r.uri for r in multi.list_resources()][:2]
    ...     multi.get_prompt("everything__simple_prompt").messages[0]
"""

from __future__ import annotations

import logging
import threading
import time
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Callable, Mapping

import msgspec

from ._errors import MethodNotFound, ResourceNotFound, ToolNotFound

if TYPE_CHECKING:
    from ._messages import Tool

__all__ = ["Catalog", "ServerStatus", "ToolEntry"]

log = logging.getLogger("mcpsync.multi")


@dataclass(frozen=True, slots=True)
class ToolEntry:
    """One tool as the MultiClient exposes it.

    Attributes:
        server: the server's name.
        name: the name callers use (qualified ``server__tool`` when namespaced).
        tool: the server's :class:`~mcpsync.Tool`, with its own name.
    """

    server: str
    name: str
    tool: Tool

    @property
    def original_name(self) -> str:
        """The tool's name on its server (``name`` without the ``server__`` prefix)."""
        return str(self.tool.name)


@dataclass(frozen=True, slots=True)
class ServerStatus:
    """What the MultiClient knows about one server.

    Attributes:
        name: the server's name.
        state: ``"ok"`` (ready: tools listed), ``"starting"`` (its listing outlived
            ``list_timeout`` and goes on: listed as soon as it answers), ``"error"``
            (failed: the last listing or connection failed), ``"pending"`` (not listed
            yet), ``"config-error"`` (the configuration entry cannot be used: a malformed
            entry, an unset variable), ``"disabled"``.
        tools: how many tools it offered at the last successful listing.
        error: the error's message, when ``state`` is an error (never a secret: it is
            the message mcpsync built).
        error_type: the error's class name.
        checked: ``time.time()`` of the last listing attempt, or ``None``.
    """

    name: str
    state: str
    tools: int = 0
    error: str | None = None
    error_type: str | None = None
    checked: float | None = None

    @property
    def ok(self) -> bool:
        return self.state == "ok"


class Catalog:
    """The resources and prompts half of a MultiClient, a part it holds.

    Args:
        servers: the MultiClient's servers by name (each with ``name`` and ``client``),
            read under ``lock``.
        lock: the MultiClient's lock.
        separator: between server and prompt in namespaced names.
        namespace: ``"always"`` or ``"collisions"`` (as the MultiClient's tools).
        list_timeout: seconds each server gets to answer a listing.
    """

    def __init__(self, servers: Mapping[str, Any], lock: threading.Lock, separator: str, namespace: str,
                 list_timeout: float) -> None:
        self._servers = servers
        self._lock = lock
        self.separator = separator
        self.namespace = namespace
        self.list_timeout = list_timeout
        self._resource_owner: dict[str, str] = {}  # resource URI -> the server that listed it
        self._prompt_routes: dict[str, tuple[str, str]] = {}  # exposed prompt name -> (server, its name)

    def _across(self, ask: Callable[[Any], list[Any]], what: str, timeout: float | None) -> list[tuple[str, list[Any]]]:
        """``ask(client)`` on every server with a client, concurrently; (server, items) in
        server order, for those that answered within ``timeout`` (default ``list_timeout``)."""
        wait = self.list_timeout if timeout is None else float(timeout)
        with self._lock:
            servers = [(s.name, s.client) for s in self._servers.values() if s.client is not None]
        answers: dict[str, list[Any]] = {}
        failures: dict[str, BaseException] = {}

        def one(name: str, client: Any) -> None:
            try:
                answers[name] = list(ask(client))
            except MethodNotFound:
                answers[name] = []  # it offers none
            except BaseException as exc:  # reported, never raised: one server never blocks the rest
                failures[name] = exc

        threads = [threading.Thread(target=one, args=sv, name=f"mcpsync-{what}-{sv[0]}", daemon=True) for sv in servers]
        for t in threads:
            t.start()
        deadline = time.monotonic() + wait
        for t in threads:
            t.join(max(deadline - time.monotonic(), 0.0))
        for (name, _client), t in zip(servers, threads):
            if t.is_alive():
                log.warning("server %s is left out of the %s list: it did not answer within %g s", name, what, wait)
            elif name in failures:
                exc = failures[name]
                log.warning("server %s is left out of the %s list: %s: %s", name, what, type(exc).__name__, exc)
        return [(name, answers[name]) for name, _client in servers if name in answers]

    def list_resources(self, *, timeout: float | None = None) -> list[Any]:
        """Every resource of every server that answered, servers in order (URIs as the
        servers gave them)."""
        found = self._across(lambda c: c.list_resources(timeout=timeout or self.list_timeout), "resource", timeout)
        with self._lock:
            self._resource_owner = {r.uri: name for name, items in found for r in items}
        return [r for _name, items in found for r in items]

    def read_resource(self, uri: str, **kwargs: Any) -> Any:
        """Read ``uri`` from the server that listed it (listing first if needed).

        Raises:
            ResourceNotFound: no server listed it.
        """
        owner = self._resource_owner.get(uri)
        if owner is None:
            self.list_resources()
            owner = self._resource_owner.get(uri)
        if owner is None:
            raise ResourceNotFound(f"no server lists resource {uri}", code=-32002, uri=uri)
        return self._servers[owner].client.read_resource(uri, **kwargs)

    def list_prompts(self, *, timeout: float | None = None) -> list[Any]:
        """Every prompt of every server that answered, named as :meth:`get_prompt` takes
        them (``server__prompt`` when namespaced, as tools are)."""
        found = self._across(lambda c: c.list_prompts(timeout=timeout or self.list_timeout), "prompt", timeout)
        counts: dict[str, int] = {}
        for _name, items in found:
            for p in items:
                counts[p.name] = counts.get(p.name, 0) + 1
        out, routes = [], {}
        for server, items in found:
            for p in items:
                qualify = self.namespace == "always" or counts[p.name] > 1
                exposed = f"{server}{self.separator}{p.name}" if qualify else p.name
                routes[exposed] = (server, p.name)
                out.append(msgspec.structs.replace(p, name=exposed) if exposed != p.name else p)
        with self._lock:
            self._prompt_routes = routes
        return out

    def get_prompt(self, name: str, arguments: Mapping[str, Any] | None = None, **kwargs: Any) -> Any:
        """Render prompt ``name`` (as :meth:`list_prompts` names it) on its server.

        Raises:
            ToolNotFound: no server offers a prompt of that name.
        """
        route = self._prompt_routes.get(name)
        if route is None:
            self.list_prompts()
            route = self._prompt_routes.get(name)
        if route is None:
            raise ToolNotFound(f"prompt {name} does not exist on any server", code=-32602, data={"prompt": name})
        server, prompt = route
        return self._servers[server].client.get_prompt(prompt, arguments, **kwargs)
