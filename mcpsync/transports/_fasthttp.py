"""HTTP/1.1 keep-alive exchanges parsed by ``httptools``: the fast path of the HTTP transports.

urllib3 spends most of a small JSON exchange in its own layers (pool-manager lookup,
``Retry`` bookkeeping, ``http.client``'s line-by-line header parsing); the bytes on the
wire are the same whoever writes them. This module keeps a pool of plain sockets per
origin, writes each request in one ``sendall`` and parses answers with ``httptools``
(the llhttp binding uvicorn uses), and offers the part of urllib3's interface the
transports use (:meth:`FastPoolManager.request`, and on the answer ``status``,
``headers``, ``read`` / ``read1``, ``release_conn``, ``drain_conn``, ``close``,
``shutdown``, ``connection.sock``), so one code path serves both.

What it holds to at the wire (the transports' wire-edge tests run every row on this path
and on urllib3's):

* **An answer is its own request's.** Interim ``1xx`` answers are read past, ``101`` is
  refused, bytes after a whole answer spoil the socket (closed, never reused), and a
  socket the server closed while idle is seen before reuse. A manager is one client's
  (the transports' pools are per client), so no framing fault could hand one client's
  answer to another.
* **Bounded, within the deadline, given back**: how an answer is read is
  :mod:`._fastconn`'s (limits on the head and on every stretch without body, every read
  of the head within what is left of the deadline, gzip decoded a piece at a time, a
  socket nobody holds closed and uncounted when it is collected).
* **Headers as given, or refused.** Names must be tokens and values free of CR, LF, NUL
  and other controls (:func:`~._http_options.headers_problem`); a user's ``Host``
  replaces the URL's; the framing (``Content-Length``) is the client's own.

Per request it costs what Python must do and little more (benchmarks/callgrind.py counts instructions
under callgrind): :meth:`FastPoolManager.exchange` takes its time as plain values (no
``urllib3.Timeout``), a :class:`~._http_options.HeaderBlock`'s wire form is made once,
each socket keeps one parser whose body, head-end and message-begin callbacks are C
methods of the answer's own containers (only ``on_header`` and ``on_message_complete``
run Python), and a small answer that came with its head is handed over whole
(:meth:`FastResponse.whole`) without another read or timeout.

It raises urllib3's exception types where urllib3 would (``NewConnectionError``,
``ConnectTimeoutError``, ``EmptyPoolError``, ``SSLError``, ``ProtocolError``,
``ReadTimeoutError``), so the one map from HTTP failures to mcpsync's errors
(``_http_errors.translate``) covers both paths.

Not covered (the transports stay on urllib3 for these): proxies, and a missing
``httptools`` (it is a plain dependency; ``MCPSYNC_HTTP=urllib3`` picks urllib3 on purpose).
"""

from __future__ import annotations

import os
import re
import ssl
import threading
import time
from typing import Any, Mapping
from urllib.parse import urlsplit

from urllib3.exceptions import ClosedPoolError, ProtocolError

from ._fastconn import (  # httptools: None when it is missing (urllib3 serves then)
    _CHUNK,
    _TOKENS,
    MAX_FIELDS,
    MAX_HEAD,
    MAX_LINE,
    FastResponse,
    _Conn,
    _OriginPool,
    _parse_failed,
    _rest_of_head,
    httptools,
)
from ._http_options import HeaderBlock, headers_problem

__all__ = ["FastPoolManager", "FastResponse", "MAX_FIELDS", "MAX_HEAD", "MAX_LINE", "http_path", "resume", "wire_of"]

_METHODS = {"POST": b"POST", "GET": b"GET", "DELETE": b"DELETE"}


def http_path(proxy: str | None) -> str:
    """Which HTTP path a client takes: ``"fast"`` or ``"urllib3"``.

    urllib3 when ``MCPSYNC_HTTP=urllib3`` is set, when the origin is reached through a
    proxy (``HTTP(S)_PROXY``), or when ``httptools`` is missing; the fast path otherwise.
    """
    if proxy or httptools is None or os.environ.get("MCPSYNC_HTTP", "").strip().lower() == "urllib3":
        return "urllib3"
    return "fast"


def _wire(headers: Mapping[str, str]) -> tuple[bytes, bool]:
    """Header lines as sent (``Name: value\\r\\n`` each, latin-1), and whether they name
    the ``Host`` (which then replaces the URL's).

    Raises:
        ValueError: a header that cannot go on the wire (:func:`~._http_options.check_headers`
            names it); nothing is written.
    """
    if not headers:
        return b"", False
    problem = headers_problem(headers)
    if problem is not None:
        raise ValueError(f"request headers: {problem}")
    host = "host" in "\n".join(headers).lower() and any(name.lower() == "host" for name in headers)
    return "".join([f"{name}: {value}\r\n" for name, value in headers.items()]).encode("latin-1"), host


def wire_of(headers: HeaderBlock) -> tuple[bytes, bool]:
    """A header block's wire form (:func:`_wire`), made on the first call and kept.

    Raises:
        ValueError: a header that cannot go on the wire.
    """
    wire = headers.wire
    if wire is None:
        wire = headers.wire = _wire(headers)
    return wire


def _within(limit: float, left: float) -> float:
    """``limit``, cut to what is ``left`` of a deadline, never under a millisecond
    (``max(0.001, min(limit, left))``, without the builtins' argument parsing)."""
    if left < limit:
        return left if left > 0.001 else 0.001
    return limit


def _seconds(value: Any) -> float | None:
    """A urllib3 timeout attribute as seconds (its ``DEFAULT_TIMEOUT`` sentinel: None)."""
    return value if isinstance(value, (int, float)) else None


_dict_get = dict.get  # the headers' own lookups, not FastHeaders' case-folding ones
#: what a request target cannot hold as it is: spaces, controls, and beyond ASCII
_UNSENDABLE = re.compile(r"[^\x21-\x7e]")


def resume(pool: _OriginPool, conn: _Conn, chunk: bytes, deadline: float | None, read: float | None) -> FastResponse:
    """The answer on ``conn`` (taken from ``pool``), read from its first read, ``chunk``,
    on: its head parsed (more of it read, each read within what is left of ``deadline``),
    its body left to read from the :class:`FastResponse`. On failure the socket is closed.

    Raises:
        ProtocolError: nothing came (the server closed the socket), or a malformed head.
        OSError: a read failed or timed out.
    """
    answer = conn.answer
    try:
        if not chunk:
            raise ProtocolError("Connection aborted.", ConnectionResetError("the server closed the connection"))
        # ready to read one answer (the socket was idle: its last answer was read whole)
        conn.raw.clear()
        conn.head += _TOKENS
        answer.complete = False
        try:
            conn.parser.feed_data(chunk)
        except (httptools.HttpParserUpgrade, httptools.HttpParserError) as exc:
            _parse_failed(answer, exc)
        if conn.head:  # more to come: a slow or long head, interim answers
            conn.dry = len(chunk)
            _rest_of_head(conn, deadline, read)
        return FastResponse(pool, conn)
    except BaseException:
        pool.discard(conn)
        raise


class FastPoolManager:
    """urllib3's ``PoolManager.request`` for the transports, on the fast path.

    Args:
        maxsize: sockets kept per origin (and, with ``block``, the most open at once).
        block: wait (up to ``pool_timeout``) for a free socket rather than open more.
        tls: the context for ``https`` origins.
    """

    def __init__(self, *, maxsize: int, block: bool, tls: ssl.SSLContext | None = None) -> None:
        self._maxsize, self._block, self._tls = maxsize, block, tls
        self._pools: dict[tuple[str, str, int], _OriginPool] = {}
        #: URL -> (its origin's pool, the request line's rest, the Host line): a transport asks for few URLs
        self.targets: dict[str, tuple[_OriginPool, bytes, bytes]] = {}
        #: the last headers sent that were not a HeaderBlock, and their wire form
        self._last_wire: tuple[dict[str, str], tuple[bytes, bool]] | None = None
        self._lock = threading.Lock()
        self._closed = False

    def _pool(self, url: str) -> tuple[_OriginPool, bytes, bytes]:
        """The pool of ``url``'s origin, the request line's rest
        (``b" /path?query HTTP/1.1\\r\\n"``) and the URL's ``Host`` line."""
        known = self.targets.get(url)
        if known is not None:
            return known
        parts = urlsplit(url)
        scheme = parts.scheme
        host = parts.hostname or ""
        port = parts.port or (443 if scheme == "https" else 80)
        key = (scheme, host, port)
        pool = self._pools.get(key)
        if pool is None:
            with self._lock:
                if self._closed:
                    raise ClosedPoolError(None, "the client's connections are closed")  # type: ignore[arg-type]
                pool = self._pools.get(key)
                if pool is None:
                    tls = self._tls if scheme == "https" else None
                    if scheme == "https" and tls is None:
                        tls = ssl.create_default_context()
                    pool = _OriginPool(scheme, host, port, maxsize=self._maxsize, block=self._block, tls=tls)
                    self._pools[key] = pool
        target = parts.path or "/"
        if parts.query:
            target = f"{target}?{parts.query}"
        if _UNSENDABLE.search(target):
            raise ValueError(f"{url}: the path must be percent-encoded (_http_options.wire_url does it)")
        line = b" " + target.encode("ascii") + b" HTTP/1.1\r\n"
        found = (pool, line, pool.host_line)
        if len(self.targets) < 256:
            self.targets[url] = found
        return found

    def request(
        self,
        method: str,
        url: str,
        body: bytes | str | None = None,
        headers: Mapping[str, str] | None = None,
        *,
        timeout: Any = None,
        pool_timeout: float | None = None,
        **_urllib3_only: Any,
    ) -> FastResponse:
        """Send one request and read the answer's head; the body is read from the answer.

        ``timeout`` is a ``urllib3.Timeout`` or seconds; one bound to a deadline (its
        ``deadline`` attribute, see ``_http_errors.request_timeout``) gives the connect
        and the read only what is left of it when each starts. Keywords only urllib3
        knows (``preload_content``, ``redirect``, ``retries``) are accepted and mean what
        the transports always ask: stream the body, follow nothing, retry nothing.
        """
        deadline = getattr(timeout, "deadline", None)
        if deadline is not None:
            connect, read = timeout.connect_limit, timeout.read_limit
        else:
            connect = _seconds(getattr(timeout, "connect_timeout", timeout))
            read = _seconds(getattr(timeout, "read_timeout", timeout))
        return self.exchange(method, url, body, headers, deadline, connect, read, pool_timeout)

    def exchange(
        self,
        method: str,
        url: str,
        body: bytes | str | None,
        headers: Mapping[str, str] | None,
        deadline: float | None,
        connect: float | None,
        read: float | None,
        pool_timeout: float | None = None,
    ) -> FastResponse:
        """:meth:`request` with its time as plain values: the transports' hot path.

        Args:
            deadline: monotonic; the connect, and every read of the head, get at most
                what is left of it (None: no deadline).
            connect: the longest connect, in seconds (None: no limit).
            read: the longest wait for each read of the answer (None: no limit).
            pool_timeout: the longest wait for a free socket of a blocking pool.

        Raises:
            ValueError: a header that cannot go on the wire (nothing is sent).
        """
        known = self.targets.get(url)
        pool, line, host = known if known is not None else self._pool(url)
        if isinstance(body, str):
            body = body.encode()
        # the head is a few short lines, written with the body in one sendall
        block: bytes
        if headers is None:
            block = b""
        elif isinstance(headers, HeaderBlock):
            block, own = headers.wire or wire_of(headers)
            if own:
                host = b""
        else:  # headers made per request (an auth hook's merged in): formatted once per change
            last = self._last_wire  # (a copy of the headers, their wire form), read at once
            if last is not None and last[0] == headers:
                block, own = last[1]
            else:
                wire = _wire(headers)
                self._last_wire = (dict(headers), wire)
                block, own = wire
            if own:
                host = b""
        verb = _METHODS.get(method) or method.encode("ascii")
        if body is not None:
            data = b"".join((verb, line, host, block, b"Content-Length: %d\r\n\r\n" % len(body), body))
        elif method in ("POST", "PUT", "PATCH"):
            data = b"%s%s%s%sContent-Length: 0\r\n\r\n" % (verb, line, host, block)
        else:
            data = b"%s%s%s%s\r\n" % (verb, line, host, block)

        # an idle socket, as pool.get would give it (that, when none is idle or it was
        # dropped); one this thread loses before it is held below frees its place in the
        # pool when it is collected (the pool counts places weakly: see _OriginPool)
        conn = None
        with pool.lock:
            if pool.idle:
                conn = pool.idle.pop()
        if conn is not None and (conn.poller.poll(0) if conn.poller is not None else conn.dropped()):
            pool.discard(conn)  # the server closed it while idle
            conn = None
        if conn is None:
            got = pool.get(pool_timeout)
            if isinstance(got, _Conn):
                conn = got
            else:
                if deadline is not None and connect is not None:
                    connect = _within(connect, deadline - time.monotonic())
                conn = pool.connect(got, connect)
        if deadline is not None and read is not None:
            left = deadline - time.monotonic()  # inline _within: once per request
            if left < read:
                read = left if left > 0.001 else 0.001
        try:
            sock = conn.sock
            sock.settimeout(read)
            sock.sendall(data)
            chunk = sock.recv(_CHUNK)  # the head (and, for a small answer, its body), mostly
        except BaseException:
            pool.discard(conn)
            raise
        return resume(pool, conn, chunk, deadline, read)

    def clear(self) -> None:
        """Close every idle socket and the manager: a socket still in use is closed when
        it is given back, and no request is made after this."""
        with self._lock:
            self._closed = True
            pools = list(self._pools.values())
        self.targets.clear()
        for pool in pools:
            pool.clear()
