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
import time
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
from ._fasthttp import _dict_get
from ._http_cookies import set_cookie_values
from ._http_options import HTTPOptions
from ._http_pools import Pools

__all__ = ["HTTPExchange", "http_options"]

log = logging.getLogger("mcpsync.http")

_JSON = "application/json"
_SSE = "text/event-stream"


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
) -> HTTPOptions:
    """``options``, else one :class:`HTTPOptions` of the individual arguments; a URL that
    is not http(s) is a ValueError."""
    if not url.lower().startswith(("http://", "https://")):
        raise ValueError(f"not an http(s) URL: {url!r}")
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
    return options


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
            except Exception as exc:
                if self._closed:
                    raise ConnectionClosed("transport is closed") from exc
                raise translate(exc, url, connecting=True) from exc
            resp._mcpsync_sent = send_headers  # quoted nowhere
            if (_dict_get(resp.headers, "set-cookie") if fast else resp.headers.get("set-cookie")) is not None:
                cookies.store(url, set_cookie_values(resp))
            if resp.status == 200:
                return resp  # the common answer: no redirect, no auth challenge
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
