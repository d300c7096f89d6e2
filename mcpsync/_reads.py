"""Reads whose results a Client may keep: resource and prompt listings, resource contents.

A modern (2026-07-28) server may mark a result cacheable (``ttlMs``, ``cacheScope``);
:class:`Reads` asks the Client's :class:`~mcpsync._cache.ResultCache` first, keyed by the
cache credential of the Client's settings, and fetches through the session otherwise.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Mapping

from ._cache import ResultCache
from ._errors import InvalidParams, ResourceNotFound
from ._paging import items
from ._protocol_types import ReadResourceResult
from ._ports import Requester
from ._settings import Settings

if TYPE_CHECKING:
    from ._resources import ResourceManager

__all__ = ["Reads", "Later"]


class Reads:
    """The cacheable reads of one Client.

    Args:
        settings: the Client's settings (name, cache credential).
        session: where requests go.
        results: the result cache (the Client's; subscriptions drop what notifications make stale).
    """

    def __init__(self, settings: Settings, session: Requester, results: ResultCache) -> None:
        self.name = settings.name
        self.credential = settings.credential if settings.credential is not None else "anonymous"
        self.session = session
        self.results = results
        #: honour modern ``ttlMs``/``cacheScope`` (``Client.cache_results``)
        self.cache_results = True

    def cached(self, method: str, params: Mapping[str, Any] | None, timeout: float | None, refresh: bool) -> Any:
        """A request whose result may be kept for its ``ttlMs``."""
        request = self.session.request
        return self.results.fetch(self.credential, method, params, lambda: request(method, params, timeout),
                                  use=self.cache_results, refresh=refresh)

    def paged(self, method: str, attr: str, timeout: float | None, refresh: bool) -> list[Any]:
        """Every page of a listing (each page cacheable)."""
        return items(lambda params: self.cached(method, params, timeout, refresh), attr, server=self.name, method=method)

    def read_resource(self, uri: str, *, timeout: float | None = None, refresh: bool = False) -> ReadResourceResult:
        """``Client.read_resource`` (see there)."""
        try:
            return self.cached("resources/read", {"uri": uri}, timeout, refresh)  # type: ignore[no-any-return]
        except ResourceNotFound:
            raise
        except InvalidParams as exc:
            raise ResourceNotFound(exc.message, code=exc.code, data=exc.data, uri=uri) from None


class Later:
    """The Client's :class:`~mcpsync._resources.ResourceManager`, made on first use
    (``made``: None before, and after close); told when the session connection was replaced."""

    made: ResourceManager | None = None

    def reconnected(self, server: str) -> None:
        manager = self.made
        if manager is not None:
            manager.reconnected(server)

    def close(self) -> None:
        manager, self.made = self.made, None
        if manager is not None:
            manager.close()
