"""What the two HTTP transports share: one HTTP exchange up to the response headers.

:class:`HTTPExchange` is the base of :class:`~mcpsync.transports.streamable_http.StreamableHTTPTransport`
and :class:`~mcpsync.transports.sse.SSETransport`. Its :meth:`~HTTPExchange._open` is
the one request loop of both: the auth hook's headers before every attempt and its one
retry on 401 / 403 (DPoP nonce challenges answered apart from it), a same-origin 307 /
308 redirect followed and kept, the caller's deadline shared by the pool wait, the
connects and the read, and transport errors translated at this boundary. Also the
small helpers both use on a response (close or release it, never quote what it sent).
"""

from __future__ import annotations

import logging
import re
import time
from dataclasses import replace
from typing import Any, Mapping

from .._errors import ConnectionClosed, ProtocolError, RequestTimeout
from ._base import Transport
from ._http_errors import (
    MAX_REDIRECTS,
    read_body,
    redirect_target,
    request_timeout,
    sent_secrets,
    status_error,
    translate,
)
from ._http_headers import auth_retry, call_auth_headers, dpop_nonce_challenge, MAX_DPOP_NONCE_RETRIES
from ._fastconn import _dict_get
from ._http_cookies import set_cookie_values
from ._http_options import HTTPOptions, headers_problem, wire_url
from ._http_pools import Pools
from ._urllib3_path import attempt, was_written

__all__ = ["ACCEPT_ENCODING", "HTTPExchange", "http_options", "session_id"]

log = logging.getLogger("mcpsync.http")

_JSON = "application/json"
_SSE = "text/event-stream"
#: both HTTP paths decode these (bounded: a piece at a time), as requests and httpx ask for them
ACCEPT_ENCODING = "gzip, deflate"
_SESSION_ID = re.compile(r"[\x21-\x7e]+\Z")


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


def _shutdown(resp: Any) -> None:
    """Unblock a thread reading ``resp`` (from any thread)."""
    if resp is None:
        return
    try:
        resp.shutdown()
    except Exception:  # noqa: BLE001 - already released / closed
        pass


def _secrets(resp: Any) -> tuple[str, ...]:
    """The values of the headers ``resp``'s request carried (never quoted in errors)."""
    sent = getattr(resp, "_mcpsync_sent", None)
    return sent_secrets(sent) if sent else ()


def _finish(resp: Any, *, reusable: bool = False) -> None:
    """Give ``resp``'s connection back (reusable) or close it."""
    try:
        if not reusable:
            resp.close()
        resp.release_conn()
    except Exception:  # noqa: BLE001
        pass


class HTTPExchange(Transport):
    """The base of the HTTP transports: their URL, options, pool and request loop."""

    url: str
    options: HTTPOptions
    _pool: Pools | None
    _closed: bool

    def _open(
        self,
        method: str,
        headers: dict[str, str],
        body: bytes | None,
        read_timeout: float,
        *,
        control: bool = False,
        deadline: float | None = None,
        url: str | None = None,
    ) -> Any:
        """One HTTP exchange up to the response headers, with the auth hook's single retry.

        Requests wait for a free connection of the main pool; ``control`` exchanges
        (streams, replies, notifications) never wait. A failed connect is retried once.
        With a ``deadline`` (monotonic: the caller's timeout, set when the send began)
        the pool wait, each connect and the read of the answer get only what is left of
        it, and both connect attempts fit in it; without one each read may take
        ``read_timeout``. ``url`` defaults to the transport's own; a same-origin 307 /
        308 redirect is followed and kept (:meth:`_redirected`).
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
        pools = self._pool
        if pools is None:
            raise ConnectionClosed("transport is closed")
        pool = pools.control if control else pools.main
        fast, cookies = pools.fast, pools.cookies
        auth = self.options.auth
        retried = False
        nonces = 0
        redirects = 0
        while True:
            # never changed once sent (quoted nowhere): without a hook, the headers as given
            send_headers = headers if auth is None else {**headers, **call_auth_headers(auth, url, method)}
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
                if self._closed:
                    raise ConnectionClosed("transport is closed") from exc
                raise translate(exc, url, connecting=True, written=None if pools.fast else was_written()) from exc
            resp._mcpsync_sent = send_headers  # quoted nowhere
            if (_dict_get(resp.headers, "set-cookie") if fast else resp.headers.get("set-cookie")) is not None:
                cookies.store(url, set_cookie_values(resp))
            if resp.status == 200:
                return resp  # the common answer: no redirect, no auth challenge
            if resp.status < 200:
                # a 101 (both paths read past the interim answers): whatever follows on the
                # socket is not HTTP any more. Closed, never reused
                _finish(resp, reusable=False)
                raise ProtocolError(f"{url} switched protocols (HTTP {resp.status}), which was not asked for",
                                    status=resp.status)
            target = redirect_target(url, resp)
            if target is not None:
                redirects += 1
                if redirects > MAX_REDIRECTS:
                    raise ProtocolError(f"{url}: too many redirects", status=resp.status)
                log.info("%s redirects to %s (HTTP %d): using that from now on", url, target, resp.status)
                self._redirected(url, target)
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

    def _read_timeout(self, timeout: float | None) -> float:
        limit = self.options.read_timeout
        if timeout is None or timeout >= limit:  # max(0.001, min(timeout, limit)), as comparisons
            return limit
        return timeout if timeout > 0.001 else 0.001

    def _redirected(self, old: str, new: str) -> None:
        """A request to ``old`` was redirected to ``new`` (same origin): keep using it."""
        if old == self.url:
            self.url = new
