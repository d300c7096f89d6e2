"""What every HTTP transport is configured with: :class:`HTTPOptions` (headers, auth
hook, TLS, timeouts, pool size, maximum message size), the :class:`AuthHook` protocol,
and the small URL / media-type helpers.

The auth hook is any object with two methods::

    headers(url: str, method: str) -> dict[str, str]      # before every request
    on_response(url: str, method: str, status: int, headers: Mapping[str, str]) -> bool
                                                           # on 401/403: True = retry once
"""

from __future__ import annotations

import base64
import logging
import re
from dataclasses import dataclass, field
from typing import Any, Mapping, Protocol
from urllib.parse import quote, unquote, urlsplit

from .._speedups import DEFAULT_MAX_MESSAGE_SIZE
from ._tls import Verify, check_tls

log = logging.getLogger("mcpsync.http")

#: how many bytes of an oversized message (its head and tail) are kept, to quote redacted
EDGE = 256


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
        check_headers(self.headers, "headers")
        check_headers({"User-Agent": self.user_agent}, "user_agent")
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


# --------------------------------------------------------------------------- header checks

_TOKEN = r"[!#$%&'*+\-.^_`|~0-9A-Za-z]+"
#: header names joined by "\n": each an RFC 9110 token
NAMES_OK = re.compile(rf"{_TOKEN}(?:\n{_TOKEN})*\Z")
#: what no header value may hold: CR, LF, NUL and the other controls but HTAB, and
#: characters beyond Latin-1 (RFC 9110: visible ASCII, obs-text, SP, HTAB)
BAD_VALUE = re.compile(r"[^\t\x20-\x7e\x80-\xff]")
_NAME = re.compile(rf"{_TOKEN}\Z")
#: the request's framing is the client's, from its body: a second one would let an
#: intermediary read the request two ways (request smuggling)
_FRAMING = frozenset({"content-length", "transfer-encoding"})


def header_problem(name: Any, value: Any) -> str | None:
    """Why the header ``name: value`` cannot go on the wire, or None. The value is never
    quoted (it may be a credential); a long name is cut."""
    if not isinstance(name, str) or not _NAME.match(name):
        return f"header name {str(name)[:40]!r} is not an HTTP token"
    if not isinstance(value, str):
        return f"the value of header {name!r} is not a str ({type(value).__name__})"
    if BAD_VALUE.search(value):
        return (
            f"the value of header {name!r} holds a character that cannot be sent (CR, LF, NUL, "
            "another control character, or one beyond Latin-1)"
        )
    if name.lower() in _FRAMING:
        return f"header {name!r} is set by the client from the request body"
    return None


def headers_problem(headers: Mapping[str, Any]) -> str | None:
    """Why ``headers`` cannot go on the wire as given (:func:`header_problem` of the first
    bad one), or None: two pattern searches when every header is fine."""
    try:
        names = "\n".join(headers)
        values = "\t".join(headers.values())
    except TypeError:  # a name or value that is not a str
        names = values = "\n"
    if NAMES_OK.match(names) is not None and BAD_VALUE.search(values) is None:
        lowered = names.lower()
        if "content-length" not in lowered and "transfer-encoding" not in lowered:
            return None
    for name, value in headers.items():
        problem = header_problem(name, value)
        if problem is not None:
            return problem
    return None


def check_headers(headers: Mapping[str, Any], source: str) -> None:
    """Refuse headers that cannot go on the wire as given.

    Raises:
        ValueError: naming ``source`` and the first bad header (never its value).

    Example:
        >>> check_headers({"X-Api-Key": "abc"}, "headers")
        >>> check_headers({"X-Api-Key": "abc\\r\\nX-Injected: 1"}, "headers")
        Traceback (most recent call last):
        ...
        ValueError: headers: the value of header 'X-Api-Key' holds a character that cannot be sent (CR, LF, NUL, another control character, or one beyond Latin-1)
    """
    problem = headers_problem(headers)
    if problem is not None:
        raise ValueError(f"{source}: {problem}")


# --------------------------------------------------------------------------- URLs

_PATH_SAFE = "/:@!$&'()*+,;=-._~%"
_QUERY_SAFE = _PATH_SAFE + "?"


def wire_url(url: str) -> tuple[str, str | None]:
    """``url`` as it goes on the wire, and the ``Authorization`` value its userinfo asks for.

    The host becomes its IDNA 2008 ASCII form (UTS 46 mapping, as browsers and urllib3:
    ``straße.test`` is ``xn--strae-oqa.test``, not IDNA 2003's ``strasse.test``); the path
    and query are percent-encoded where they hold characters HTTP cannot carry (escapes
    already there are kept); a fragment is dropped; the userinfo is taken out, so that no
    message or log line quotes it, and returned as ``Basic`` credentials (as requests sends
    them), None when the URL has none.

    Raises:
        ValueError: a host that is not a valid international domain name.

    Example:
        >>> wire_url("http://user:pw@straße.test/mcp/ü")
        ('http://xn--strae-oqa.test/mcp/%C3%BC', 'Basic dXNlcjpwdw==')
    """
    parts = urlsplit(url)
    host = parts.hostname or ""
    if not host.isascii():
        import idna  # requests' own dependency: the IDNA 2008 codec urllib3 uses

        try:
            host = idna.encode(host, uts46=True).decode("ascii")
        except idna.IDNAError as exc:
            raise ValueError(f"{host!r} is not a valid international domain name: {exc}") from None
    netloc = f"[{host}]" if ":" in host else host
    if parts.port is not None:
        netloc += f":{parts.port}"
    path = quote(parts.path, safe=_PATH_SAFE)
    query = quote(parts.query, safe=_QUERY_SAFE)
    wire = f"{parts.scheme.lower()}://{netloc}{path}" + (f"?{query}" if query else "")
    basic = None
    if parts.username is not None or parts.password is not None:
        pair = f"{unquote(parts.username or '')}:{unquote(parts.password or '')}"
        basic = "Basic " + base64.b64encode(pair.encode("utf-8")).decode("ascii")
    return wire, basic


class HeaderBlock(dict[str, str]):
    """Request headers made once and sent on many requests: a dict that refuses changes.

    The fast HTTP path keeps its wire form (``wire``: the ``Name: value\\r\\n`` lines,
    checked, and whether they name the Host; made on its first send) so a request of the
    same kind costs no header formatting; urllib3 reads it as the plain mapping it is.
    Copy it (``dict(block)``) to add headers.

    Example:
        >>> block = HeaderBlock({"Accept": "application/json"})
        >>> block["Accept"]
        'application/json'
        >>> dict(block, Authorization="Bearer x")["Authorization"]
        'Bearer x'
    """

    __slots__ = ("wire", "authed")

    def __init__(self, headers: Mapping[str, str]) -> None:
        super().__init__(headers)
        self.wire: tuple[bytes, bool] | None = None
        #: (auth hook, the headers it gave, this block merged with them): the last merge
        #: (``_http_headers.auth_send_headers``), made again when the hook's headers change
        self.authed: tuple[Any, Mapping[str, str], HeaderBlock] | None = None

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
