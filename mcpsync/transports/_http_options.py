"""What every HTTP transport is configured with: :class:`HTTPOptions` (headers, auth
hook, TLS, timeouts, pool size, maximum message size), the :class:`AuthHook` protocol,
and the small URL / media-type helpers.

The auth hook is any object with two methods::

    headers(url: str, method: str) -> dict[str, str]      # before every request
    on_response(url: str, method: str, status: int, headers: Mapping[str, str]) -> bool
                                                           # on 401/403: True = retry once
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, field
from typing import Any, Mapping, Protocol
from urllib.parse import urlsplit

from .._speedups import DEFAULT_MAX_MESSAGE_SIZE

log = logging.getLogger("mcpsync.http")

_EDGE = 256


class AuthHook(Protocol):
    """What ``auth=`` accepts (the OAuth work implements it)."""

    def headers(self, url: str, method: str) -> dict[str, str]: ...

    def on_response(self, url: str, method: str, status: int, headers: Mapping[str, str]) -> bool: ...


@dataclass(frozen=True, slots=True)
class HTTPOptions:
    """Options shared by the HTTP transports.

    Attributes:
        headers: static headers sent on every request (e.g. an API key).
        auth: an :class:`AuthHook`, asked for headers before every request and told of
            every 401 / 403.
        verify: TLS verification: True (system / certifi bundle), False, or a CA bundle path.
        connect_timeout: TCP (+TLS) connect timeout; a failed connect is retried once.
        read_timeout: longest silence tolerated on a response or stream before it is
            treated as dead (a stream is then resumed or re-issued where the era allows).
        pool_size: connections kept per origin.
        max_message_size: the largest message accepted, in bytes.
        user_agent: the ``User-Agent`` header.
    """

    headers: Mapping[str, str] = field(default_factory=dict)
    auth: Any = None
    verify: bool | str = True
    connect_timeout: float = 10.0
    read_timeout: float = 300.0
    pool_size: int = 10
    max_message_size: int = DEFAULT_MAX_MESSAGE_SIZE
    user_agent: str = "mcpsync/0.1"


class HeaderBlock(dict[str, str]):
    """Request headers made once and sent on many requests: a dict that refuses changes.

    The fast HTTP path keeps its wire form (``wire``: ``Name: value\\r\\n`` lines, made
    on its first send) so a request of the same kind costs no header formatting; urllib3
    reads it as the plain mapping it is. Copy it (``dict(block)``) to add headers.

    Example:
        >>> block = HeaderBlock({"Accept": "application/json"})
        >>> block["Accept"]
        'application/json'
        >>> dict(block, Authorization="Bearer x")["Authorization"]
        'Bearer x'
    """

    __slots__ = ("wire",)

    def __init__(self, headers: Mapping[str, str]) -> None:
        super().__init__(headers)
        self.wire: bytes | None = None

    def _read_only(self, *args: Any, **kwargs: Any) -> Any:
        raise TypeError("a HeaderBlock is read-only: copy it with dict(block)")

    __setitem__ = __delitem__ = update = pop = popitem = clear = setdefault = __ior__ = _read_only


# --------------------------------------------------------------------------- media types


def media_type(content_type: str | None) -> str:
    """``"application/json; charset=utf-8"`` → ``"application/json"``."""
    if not content_type:
        return ""
    if content_type == "application/json" or content_type == "text/event-stream":
        return content_type  # the common values: nothing to cut or fold
    return content_type.split(";", 1)[0].strip().lower()


def origin_of(url: str) -> tuple[str, str, int]:
    """(scheme, host, port) of ``url``, with the default port filled in."""
    parts = urlsplit(url)
    scheme = parts.scheme.lower()
    port = parts.port or (443 if scheme == "https" else 80)
    return scheme, (parts.hostname or "").lower(), port
