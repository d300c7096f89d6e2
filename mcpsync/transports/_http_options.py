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
from ._tls import Verify, check_tls

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
        verify: whom to trust (see :mod:`~mcpsync.transports._tls`): True (the CA bundle the
            environment names, ``REQUESTS_CA_BUNDLE`` / ``CURL_CA_BUNDLE`` / ``SSL_CERT_FILE`` /
            ``SSL_CERT_DIR``, else certifi's), False (nothing checked), ``"system"`` (the
            operating system's trust store, through ``truststore``), a CA bundle file or
            directory, or an :class:`ssl.SSLContext`.
        cert: a client certificate (mTLS): a PEM file with the certificate and its key, or
            ``(certfile, keyfile)``; kept as ``(certfile, keyfile or None)``.
        proxy: an HTTP(S) forward proxy (``http://host:port``, credentials as
            ``http://user:password@host:port``) for every request, whatever
            ``HTTP(S)_PROXY`` / ``NO_PROXY`` say; None: those variables decide.
        connect_timeout: TCP (+TLS) connect timeout; a failed connect is retried once.
        read_timeout: longest silence tolerated on a response or stream before it is
            treated as dead (a stream is then resumed or re-issued where the era allows).
        pool_size: connections kept per origin.
        max_message_size: the largest message accepted, in bytes.
        user_agent: the ``User-Agent`` header.
    """

    headers: Mapping[str, str] = field(default_factory=dict)
    auth: Any = None
    verify: Verify = True
    cert: Any = None
    proxy: str | None = None
    connect_timeout: float = 10.0
    read_timeout: float = 300.0
    pool_size: int = 10
    max_message_size: int = DEFAULT_MAX_MESSAGE_SIZE
    user_agent: str = "mcpsync/0.1"

    def __post_init__(self) -> None:
        object.__setattr__(self, "cert", check_tls(self.verify, self.cert)[1])
        if self.proxy is not None:
            object.__setattr__(self, "proxy", check_proxy(self.proxy))


def check_proxy(proxy: Any) -> str:
    """``proxy`` checked: an ``http://`` or ``https://`` URL with a host.

    Raises:
        ValueError: anything else (the message never repeats a password).
    """
    if not isinstance(proxy, str):
        raise TypeError(f"proxy= takes a URL such as 'http://127.0.0.1:3128', not {type(proxy).__name__}")
    parts = urlsplit(proxy)
    try:
        parts.port
    except ValueError:
        raise ValueError(f"proxy at {parts.hostname!r}: the port is not a number") from None
    if parts.scheme.lower() not in ("http", "https") or not parts.hostname:
        raise ValueError(f"proxy with scheme {parts.scheme!r} and host {parts.hostname!r}: "
                         "an http:// or https:// URL with a host is expected")
    return proxy


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
