"""One client's cookies: the standard library's :class:`http.cookiejar.CookieJar`, with its
default policy, fed by every answer's ``Set-Cookie`` and read for every request.

Load balancers that pin a client to one replica by a cookie (AWS ALB's ``AWSALB``,
HAProxy's ``cookie … insert``, many ingresses) need it sent back: a legacy-era session
lives on one replica. The jar belongs to one client (its
:class:`~mcpsync.transports._http_pools.ClientConnections`): cookies never cross clients.

A request costs nothing more while the jar is empty: the transports look at
:attr:`Cookies.held` (an attribute) before asking the jar for anything, and at the
answer's ``Set-Cookie`` (a dictionary lookup) before storing.

Example:
    >>> cookies = Cookies()
    >>> cookies.held
    False
    >>> cookies.store("http://127.0.0.1:8000/mcp", ["SRV=r1; path=/"])
    >>> cookies.held, cookies.headers("http://127.0.0.1:8000/mcp", {"Accept": "*/*"})["Cookie"]
    (True, 'SRV=r1')
"""

from __future__ import annotations

import urllib.request
from http.cookiejar import CookieJar
from typing import Any, Mapping

from ._fasthttp import FastResponse

__all__ = ["Cookies", "set_cookie_values"]


class _Answer:
    """What :meth:`CookieJar.extract_cookies` reads of an answer: its ``Set-Cookie`` values."""

    __slots__ = ("values",)

    def __init__(self, values: list[str]) -> None:
        self.values = values

    def info(self) -> "_Answer":
        return self

    def get_all(self, name: str, default: Any = None) -> Any:
        return self.values if name.lower() == "set-cookie" and self.values else default


class Cookies:
    """A client's cookie jar (thread-safe: the jar locks itself).

    Attributes:
        jar: the :class:`http.cookiejar.CookieJar`.
        held: False while the jar has never held a cookie (requests skip it then).
    """

    __slots__ = ("jar", "held")

    def __init__(self) -> None:
        self.jar = CookieJar()
        self.held = False

    def headers(self, url: str, headers: Mapping[str, str]) -> Mapping[str, str]:
        """``headers`` with the ``Cookie`` header the jar has for ``url`` (a new dict; the
        same mapping when the jar has none for it, or the caller set a ``Cookie`` itself)."""
        request = urllib.request.Request(url)
        self.jar.add_cookie_header(request)
        value = request.get_header("Cookie")
        if value is None or any(name.lower() == "cookie" for name in headers):
            return headers
        return {**headers, "Cookie": value}

    def store(self, url: str, values: list[str]) -> None:
        """Keep the cookies of an answer from ``url`` (its ``Set-Cookie`` values), as the
        jar's policy allows."""
        if not values:
            return
        self.jar.extract_cookies(_Answer(values), urllib.request.Request(url))  # type: ignore[arg-type]
        self.held = self.held or any(True for _ in self.jar)

    def clear(self) -> None:
        self.jar.clear()
        self.held = False


def set_cookie_values(resp: Any) -> list[str]:
    """Every ``Set-Cookie`` value of an answer, one per header line (a cookie's
    ``Expires`` has a comma: joined values cannot be split again).

    The fast path's answer still holds its socket's raw head here (until the socket's
    next request); urllib3's keeps every value.
    """
    if isinstance(resp, FastResponse):
        conn = resp.connection
        raw = conn.raw if conn is not None else []
        return [raw[i + 1].decode("latin-1") for i in range(0, len(raw) - 1, 2) if raw[i].lower() == b"set-cookie"]
    getlist = getattr(resp.headers, "getlist", None)
    if getlist is not None:
        return list(getlist("set-cookie"))
    value = resp.headers.get("set-cookie")
    return [value] if value else []
