"""What the two HTTP transports share: one HTTP exchange up to the response headers.

:class:`HTTPExchange` is a helper that
:class:`~mcpsync.transports.streamable_http.StreamableHTTPTransport` and
:class:`~mcpsync.transports.sse.SSETransport` each build and hold (as does the former's
response streams part). It owns the URL, the options and the client's pools for that
origin; its :meth:`~HTTPExchange.request` is the one request loop of both transports:
the auth hook's headers before every attempt and its one retry on 401 / 403 (DPoP nonce
challenges answered apart from it), the client's cookies, a same-origin 307 / 308
redirect followed and kept, the caller's deadline shared by the pool wait, the connects
and the read, and transport errors translated at this boundary. Also the small helpers
both use on a response (close or release it, never quote what it sent).
"""

from __future__ import annotations

import logging
import re
import time
from dataclasses import replace
from typing import Any, Callable, Mapping

import urllib3

from .._errors import ConnectionClosed, MCPError, ProtocolError, RequestTimeout
from ._http_errors import (
    MAX_REDIRECTS,
    read_body,
    redirect_target,
    request_timeout,
    sent_secrets,
    status_error,
    translate,
)
from ._http_headers import auth_retry, auth_send_headers, dpop_nonce_challenge, MAX_DPOP_NONCE_RETRIES
from ._http_cookies import set_cookie_values
from ._http_options import HTTPOptions, headers_problem, wire_url
from ._http_pools import ClientConnections, Pools
from ._urllib3_path import attempt, was_written

__all__ = [
    "ACCEPT_ENCODING", "JSON", "SSE", "HTTPExchange", "finish", "http_options", "sent_values", "session_id", "shutdown",
]

log = logging.getLogger("mcpsync.http")

JSON = "application/json"
SSE = "text/event-stream"
#: both HTTP paths decode these (bounded: a piece at a time), as requests and httpx ask for them
ACCEPT_ENCODING = "gzip, deflate"
_SESSION_ID = re.compile(r"[\x21-\x7e]+\Z")
_dict_get = dict.get  # the fast path's headers' own lookups (a dict under lower-case names)


def session_id(value: str | None, url: str) -> str | None:
    """A server's ``Mcp-Session-Id``, checked before it is ever sent back: visible ASCII
    only, as the specification has it (never a CR, LF or NUL to inject a header with).

    Raises:
        ProtocolError: the server's id cannot be sent (it is not quoted).
    """
    if not value:
        return None
    if not _SESSION_ID.match(value):
        raise ProtocolError(f"{url} gave a session id that is not visible ASCII; it cannot be sent back")
    return value


def http_options(
    url: str,
    options: HTTPOptions | None,
    *,
    headers: Mapping[str, str] | None,
    auth: Any,
    verify: Any,
    cert: Any,
    proxy: str | None,
    connect_timeout: float,
    read_timeout: float,
    pool_size: int,
    max_message_size: int | None,
) -> tuple[str, HTTPOptions]:
    """The URL as it goes on the wire (:func:`~._http_options.wire_url`) and ``options``,
    else one :class:`HTTPOptions` of the individual arguments. Credentials in the URL
    become an ``Authorization: Basic`` header unless one is given. A URL that is not
    http(s), or a header that cannot be sent, is a ValueError."""
    if not url.lower().startswith(("http://", "https://")):
        raise ValueError(f"not an http(s) URL: {wire_url(url)[0] if '@' in url else url!r}")
    url, basic = wire_url(url)
    if options is None:
        kwargs: dict[str, Any] = {
            "headers": dict(headers or {}),
            "auth": auth,
            "verify": verify,
            "cert": cert,
            "proxy": proxy,
            "connect_timeout": connect_timeout,
            "read_timeout": read_timeout,
            "pool_size": pool_size,
        }
        if max_message_size is not None:
            kwargs["max_message_size"] = max_message_size
        options = HTTPOptions(**kwargs)
    if basic is not None and not any(name.lower() == "authorization" for name in options.headers):
        options = replace(options, headers={**options.headers, "Authorization": basic})
    return url, options


def shutdown(resp: Any) -> None:
    """Unblock a thread reading ``resp`` (from any thread)."""
    if resp is None:
        return
    try:
        resp.shutdown()
    except Exception:  # noqa: BLE001 - already released / closed
        pass


def sent_values(resp: Any) -> tuple[str, ...]:
    """The values of the headers ``resp``'s request carried (never quoted in errors)."""
    sent = getattr(resp, "mcpsync_sent", None)
    return sent_secrets(sent) if sent else ()


def finish(resp: Any, *, reusable: bool = False) -> None:
    """Give ``resp``'s connection back (reusable) or close it."""
    try:
        if not reusable:
            resp.close()
        resp.release_conn()
    except Exception:  # noqa: BLE001
        pass


class HTTPExchange:
    """One transport's HTTP exchanges: its URL, options, pools and request loop.

    Args:
        url: the URL requests go to unless they name another (kept up to date across a
            same-origin 307 / 308 redirect).
        options: the transport's :class:`HTTPOptions`.
        connections: the client's :class:`~._http_pools.ClientConnections` (None: its own).
        on_redirect: told ``(old, new)`` when a request to a URL other than :attr:`url`
            was redirected within its origin (the HTTP+SSE endpoint); None: nothing to tell.
    """

    __slots__ = ("url", "options", "pools", "_connections", "_on_redirect", "_closed")

    def __init__(
        self,
        url: str,
        options: HTTPOptions,
        connections: ClientConnections | None = None,
        on_redirect: Callable[[str, str], None] | None = None,
    ) -> None:
        self.url = url
        self.options = options
        #: the client's pools for the URL's origin, from :meth:`acquire` on (None before)
        self.pools: Pools | None = None
        self._connections = connections if connections is not None else ClientConnections()
        self._on_redirect = on_redirect
        self._closed = False

    @property
    def connections(self) -> ClientConnections:
        """The client's connections these pools come from (what an HTTP+SSE fallback shares)."""
        return self._connections

    def acquire(self) -> Pools:
        """The client's pools for the URL's origin, taken on the first call."""
        pools = self.pools
        if pools is None:
            pools = self.pools = self._connections.acquire(self.url, self.options)
        return pools

    def close(self) -> None:
        """From now on a request that fails reads as ConnectionClosed (its owner closed);
        the pools stay usable until :meth:`release`."""
        self._closed = True

    def release(self) -> None:
        """Give the pools back to the client (once nothing uses them any more)."""
        if self.pools is not None:
            self._connections.release(self.pools)

    def read_timeout(self, timeout: float | None) -> float:
        """The read timeout of a request with ``timeout`` left: the option's, or less."""
        limit = self.options.read_timeout
        if timeout is None or timeout >= limit:  # max(0.001, min(timeout, limit)), as comparisons
            return limit
        return timeout if timeout > 0.001 else 0.001

    def failure(self, exc: Exception, url: str) -> MCPError:
        """What a request to ``url`` that failed with ``exc`` (sending it or reading the
        answer's head) raises: ConnectionClosed once closed, else the translated error."""
        if self._closed:
            return ConnectionClosed("transport is closed")
        pools = self.pools
        return translate(exc, url, connecting=True, written=None if pools is None or pools.fast else was_written())

    def request_once(self, method: str, headers: Mapping[str, str], timeout: float) -> None:
        """A best-effort request on the control pool (the client's cookies attached; no
        redirect, no auth retry, the answer dropped), e.g. a session's DELETE on close.

        Raises:
            Exception: whatever the pool raised (the caller logs it and goes on).
        """
        pools = self.pools
        if pools is None:
            return
        if pools.cookies.held:  # a balancer pins the session by cookie: this goes there too
            headers = pools.cookies.headers(self.url, headers)
        resp = pools.control.request(
            method,
            self.url,
            headers=headers,
            timeout=urllib3.Timeout(connect=timeout, read=timeout),
            retries=False,
            redirect=False,
        )
        resp.release_conn()

    def request(
        self,
        method: str,
        headers: dict[str, str],
        body: bytes | None,
        read_timeout: float,
        *,
        control: bool = False,
        deadline: float | None = None,
        url: str | None = None,
        answer: Any = None,
        sent: Mapping[str, str] | None = None,
    ) -> Any:
        """One HTTP exchange up to the response headers, with the auth hook's single retry.

        Requests wait for a free connection of the main pool; ``control`` exchanges
        (streams, replies, notifications) never wait. A failed connect is retried once.
        With a ``deadline`` (monotonic: the caller's timeout, set when the send began)
        the pool wait, each connect and the read of the answer get only what is left of
        it, and both connect attempts fit in it; without one each read may take
        ``read_timeout``. ``url`` defaults to :attr:`url`; a same-origin 307 / 308
        redirect is followed and kept. ``answer``: the first attempt's answer, read
        already (the transport's JSON lane sent the request with the headers ``sent``).

        Raises:
            ConnectionClosed: not acquired yet, or closed meanwhile.
            RequestTimeout: the deadline passed before the request could be sent.
            ProtocolError: a header that cannot be sent; too many redirects; a 101.
            MCPError: the translated transport error, or a final 401 / 403.
        """
        if url is None:
            url = self.url
        connect = self.options.connect_timeout
        first: float | None = None  # what is left of the deadline for the first attempt
        if deadline is None:
            if not control:
                deadline = time.monotonic() + read_timeout
                first = read_timeout
        else:
            first = deadline - time.monotonic()
            half = first / 2  # both connect attempts fit in the deadline
            if half < connect:  # max(0.05, min(…)) without the builtins' argument parsing
                connect = half if half > 0.05 else 0.05
        pools = self.pools
        if pools is None:
            raise ConnectionClosed("transport is closed")
        pool = pools.control if control else pools.main
        fast, cookies = pools.fast, pools.cookies
        auth = self.options.auth
        retried = False
        nonces = 0
        redirects = 0
        while True:
            if answer is not None:  # the first attempt's, read by the JSON lane
                resp, answer, first = answer, None, None
                send_headers = sent if sent is not None else headers
            else:
                # never changed once sent (quoted nowhere): without a hook, the headers as given
                send_headers = headers if auth is None else auth_send_headers(auth, headers, url, method)
                if cookies.held:  # the client's cookies: nothing to ask while it has none
                    send_headers = cookies.headers(url, send_headers)
                try:
                    if fast:  # plain timeouts: no urllib3.Timeout to make and read
                        if deadline is None:  # time_left(deadline), inline: every request
                            wait = None
                        else:
                            if first is not None:  # read once above: the same instant, near enough
                                wait, first = first, None
                            else:
                                wait = deadline - time.monotonic()
                            if wait <= 0:
                                raise RequestTimeout("the request's time ran out before it could be sent")
                        resp = pool.exchange(
                            method, url, body, send_headers, deadline, connect, read_timeout, None if control else wait
                        )
                    else:
                        extra, pool_wait = request_timeout(deadline, connect, read_timeout)
                        if not control:
                            extra["pool_timeout"] = pool_wait
                        problem = headers_problem(send_headers)  # http.client's own check quotes the value
                        if problem is not None:
                            raise ValueError(f"request headers: {problem}")
                        attempt(deadline)
                        resp = pool.request(
                            method,
                            url,
                            body=body,
                            headers=send_headers,
                            preload_content=False,
                            redirect=False,
                            **extra,
                        )
                except RequestTimeout:
                    raise  # the deadline passed before the request could be sent
                except ValueError as exc:  # a header that cannot go on the wire: nothing was sent
                    raise ProtocolError(f"cannot send the request to {url}: {exc}") from None
                except Exception as exc:
                    raise self.failure(exc, url) from exc
            resp.mcpsync_sent = send_headers  # quoted nowhere
            if (_dict_get(resp.headers, "set-cookie") if fast else resp.headers.get("set-cookie")) is not None:
                cookies.store(url, set_cookie_values(resp))
            if resp.status == 200:
                return resp  # the common answer: no redirect, no auth challenge
            if resp.status < 200:
                # a 101 (both paths read past the interim answers): whatever follows on the
                # socket is not HTTP any more. Closed, never reused
                finish(resp, reusable=False)
                raise ProtocolError(f"{url} switched protocols (HTTP {resp.status}), which was not asked for",
                                    status=resp.status)
            target = redirect_target(url, resp)
            if target is not None:
                redirects += 1
                if redirects > MAX_REDIRECTS:
                    raise ProtocolError(f"{url}: too many redirects", status=resp.status)
                log.info("%s redirects to %s (HTTP %d): using that from now on", url, target, resp.status)
                if url == self.url:
                    self.url = target
                elif self._on_redirect is not None:
                    self._on_redirect(url, target)
                url = target
                continue
            if resp.status in (401, 403):
                data = read_body(resp, 65536, url)
                resp.release_conn()
                nonce = dpop_nonce_challenge(resp.status, resp.headers)
                allowed = nonces < MAX_DPOP_NONCE_RETRIES if nonce else not retried
                if allowed and auth_retry(auth, url, method, resp.status, resp.headers):
                    if nonce:
                        nonces += 1  # a DPoP nonce challenge is answered, not counted as the auth retry
                    else:
                        retried = True
                    continue
                raise status_error(resp.status, url, data, resp.headers, secrets=sent_secrets(send_headers))
            return resp
