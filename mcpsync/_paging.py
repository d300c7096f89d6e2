"""Following ``nextCursor``: the one pagination loop of every MCP list method."""

from __future__ import annotations

from typing import Any, Callable, Iterator, Mapping

from ._errors import ProtocolError

__all__ = ["MAX_PAGES", "items", "paginate"]

#: a server that pages forever is a broken one: stop there
MAX_PAGES = 10_000


def paginate(
    fetch: Callable[[str | None], Any],
    *,
    server: str,
    method: str,
    next_cursor: Callable[[Any], str | None] = lambda page: page.next_cursor,
) -> Iterator[Any]:
    """Yield every page of a list method, asking ``fetch(cursor)`` for each.

    Args:
        fetch: one request: ``None`` for the first page, then the previous page's
            ``next_cursor``.
        server: the server's name (in errors).
        method: the list method (in errors).
        next_cursor: reads a page's cursor (default: its ``next_cursor`` attribute, as
            the typed list results have; a plain mapping needs ``lambda p: p.get("nextCursor")``).

    Raises:
        ProtocolError: the server repeated a cursor (it would loop forever), or sent more
            than :data:`MAX_PAGES` pages.

    Example:
        >>> class Page:
        ...     def __init__(self, items, next_cursor): self.items, self.next_cursor = items, next_cursor
        >>> pages = {None: Page([1, 2], "b"), "b": Page([3], None)}
        >>> [x for p in paginate(pages.__getitem__, server="s", method="tools/list") for x in p.items]
        [1, 2, 3]
    """
    cursor: str | None = None
    seen: set[str] = set()
    for _ in range(MAX_PAGES):
        page = fetch(cursor)
        yield page
        cursor = next_cursor(page)
        if not cursor:
            return
        if cursor in seen:
            raise ProtocolError(f"{server} repeated the {method} cursor {cursor!r}", code=-32600)
        seen.add(cursor)
    raise ProtocolError(f"{server} returned more than {MAX_PAGES} pages for {method}", code=-32600)


def items(request: Callable[[Mapping[str, Any] | None], Any], attr: str, *, server: str, method: str) -> list[Any]:
    """Every item (``page.<attr>``) of a list method, ``request(params)`` asking for each page."""
    pages = paginate(lambda cursor: request({"cursor": cursor} if cursor else None), server=server, method=method)
    return [item for page in pages for item in getattr(page, attr)]
