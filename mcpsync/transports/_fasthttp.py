"""HTTP/1.1 keep-alive exchanges parsed by ``httptools``: the fast path of the HTTP transports.

urllib3 spends most of a small JSON exchange in its own layers (pool-manager lookup,
``Retry`` bookkeeping, ``http.client``'s line-by-line header parsing); the bytes on the
wire are the same whoever writes them. This module keeps a pool of plain sockets per
origin, writes each request in one ``sendall`` and parses answers with ``httptools``
(the llhttp binding uvicorn uses), and offers the part of urllib3's interface the
transports use (:meth:`FastPoolManager.request`, and on the answer ``status``,
``headers``, ``read`` / ``read1``, ``release_conn``, ``drain_conn``, ``close``,
``shutdown``, ``connection.sock``), so one code path serves both.

Per request it costs what Python must do and little more (issue 21 counts instructions
under callgrind): :meth:`FastPoolManager.exchange` takes its time as plain values (no
``urllib3.Timeout``), a :class:`~._http_options.HeaderBlock`'s wire form is made once,
each socket keeps one parser whose body, head-end and message-begin callbacks are C
methods of the socket's own containers (only ``on_header`` and ``on_message_complete``
run Python), and a small answer that came with its head is handed over whole
(:meth:`FastResponse.whole`) without another read or timeout.

It raises urllib3's exception types where urllib3 would (``NewConnectionError``,
``ConnectTimeoutError``, ``EmptyPoolError``, ``SSLError``, ``ProtocolError``), so the one
map from HTTP failures to mcpsync's errors (``_http_errors.translate``) covers both paths.

Not covered (the transports stay on urllib3 for these): proxies, and a missing
``httptools`` (it is a plain dependency; ``MCPSYNC_HTTP=urllib3`` picks urllib3 on purpose).
"""

from __future__ import annotations

import os
import select
import socket
import ssl
import threading
import time
from collections import deque
from typing import Any, Mapping
from urllib.parse import urlsplit

try:
    import httptools
except ImportError:  # pragma: no cover - a plain dependency; urllib3 serves without it
    httptools = None  # type: ignore[assignment]

from ._http_options import HeaderBlock
from urllib3.exceptions import (
    ConnectTimeoutError,
    EmptyPoolError,
    NewConnectionError,
    ProtocolError,
    SSLError,
)

__all__ = ["FastPoolManager", "FastResponse", "http_path", "tls_context"]

_CHUNK = 65536
_METHODS = {"POST": b"POST", "GET": b"GET", "DELETE": b"DELETE"}


def http_path(proxy: str | None) -> str:
    """Which HTTP path a client takes: ``"fast"`` or ``"urllib3"``.

    urllib3 when ``MCPSYNC_HTTP=urllib3`` is set, when the origin is reached through a
    proxy (``HTTP(S)_PROXY``), or when ``httptools`` is missing; the fast path otherwise.
    """
    if proxy or httptools is None or os.environ.get("MCPSYNC_HTTP", "").strip().lower() == "urllib3":
        return "urllib3"
    return "fast"


def tls_context(verify: bool | str) -> ssl.SSLContext:
    """The TLS context of the fast path for a transport's ``verify`` option.

    ``False`` checks nothing; a string is a CA bundle's path; ``True`` uses certifi's
    bundle where it is installed (as the urllib3 path does), else the system's.
    """
    if verify is False:
        context = ssl.create_default_context()
        context.check_hostname = False
        context.verify_mode = ssl.CERT_NONE
        return context
    if isinstance(verify, str):
        return ssl.create_default_context(cafile=verify)
    try:
        import certifi
    except ImportError:  # pragma: no cover - certifi ships with requests
        return ssl.create_default_context()
    return ssl.create_default_context(cafile=certifi.where())


def _wire(headers: Mapping[str, str]) -> bytes:
    """Header lines as sent: ``Name: value\\r\\n`` each (latin-1, as HTTP/1.1 has it)."""
    return "".join([f"{name}: {value}\r\n" for name, value in headers.items()]).encode("latin-1")


def _within(limit: float, left: float) -> float:
    """``limit``, cut to what is ``left`` of a deadline, never under a millisecond
    (``max(0.001, min(limit, left))``, without the builtins' argument parsing)."""
    if left < limit:
        return left if left > 0.001 else 0.001
    return limit


def _seconds(value: Any) -> float | None:
    """A urllib3 timeout attribute as seconds (its ``DEFAULT_TIMEOUT`` sentinel: None)."""
    return value if isinstance(value, (int, float)) else None


_dict_get = dict.get  # the headers' own lookups, not _Headers' case-folding ones


class _Headers(dict[str, str]):
    """Response headers under lower-case names; lookups ignore case (repeats joined by ``, ``)."""

    def get(self, key: str, default: Any = None) -> Any:
        return _dict_get(self, key.lower(), default)

    def __getitem__(self, key: str) -> str:
        return dict.__getitem__(self, key.lower())

    def __contains__(self, key: object) -> bool:
        return isinstance(key, str) and dict.__contains__(self, key.lower())


#: header names as they came → their lower-case str: a server names the same few
#: headers answer after answer (bounded; one dict operation each, safe across threads)
_NAMES: dict[bytes, str] = {}


def _name(raw: bytes) -> str:
    """A header name's lower-case str, remembered in :data:`_NAMES` (up to 256 of them)."""
    name = raw.decode("latin-1").lower()
    if len(_NAMES) < 256:
        _NAMES[raw] = name
    return name


_POLL = hasattr(select, "poll")
_TOKENS = (True, True)  # an answer's: its message-begin takes one, the end of its head the other


class _Conn:
    """One socket to the pool's origin and its parser, kept answer after answer.

    ``sock`` is what the transports adjust timeouts on. The parser lives as long as the
    socket (llhttp starts the next message after a complete one on a kept-alive
    connection) and so does the state it fills in, so an answer costs neither a parser
    nor a Python call per event of its own: the body's pieces are appended to ``body``,
    and the start of a message and the end of its head take the tokens in ``head``, by
    the C methods of those containers; only ``on_header`` and ``on_message_complete``
    (asked for keep-alive there: the parser resets after) are Python. An answer is read by one thread at a time (the one
    that took the socket from the pool), so this state needs no lock.

    A second answer where none was asked for (bytes after a complete one) spoils the
    socket: each request puts two tokens in ``head``, the message's begin pops one and
    the end of its head clears the other, so a message beyond it has none to pop and
    fails the parse; the socket is closed, never reused.
    """

    __slots__ = (
        "sock", "parser", "raw", "body", "head", "complete", "keep", "eof", "_poll",
        "on_body", "on_headers_complete", "on_message_begin",
    )

    def __init__(self, sock: socket.socket) -> None:
        self.sock = sock
        self.raw: list[bytes] = []  # the head's names and values (name, value, name, value …) as they came
        self.body: deque[bytes] = deque()
        self.head: list[bool] = []  # not empty while the head of the answer asked for is incomplete
        self.complete = False
        self.keep = False  # the answer read whole may be followed by another (False: spoiled too)
        self.eof = False
        # the parser's callbacks that need no Python frame (see the class docstring)
        self.on_body = self.body.append
        self.on_headers_complete = self.head.clear
        self.on_message_begin = self.head.pop
        self.parser = httptools.HttpResponseParser(self)
        self._poll: Any = None
        if _POLL:
            self._poll = select.poll()
            self._poll.register(sock, select.POLLIN)

    def close(self) -> None:
        try:
            self.sock.close()
        except OSError:
            pass

    def dropped(self) -> bool:
        """The server closed this idle socket (or wrote to it unasked): not to be reused."""
        try:
            if self._poll is not None:
                return bool(self._poll.poll(0))
            readable, _, _ = select.select([self.sock], [], [], 0)
        except (OSError, ValueError):
            return True
        return bool(readable)

    # ------------------------------------------------------------- httptools callbacks

    def on_header(self, name: bytes, value: bytes) -> None:
        self.raw += (name, value)

    def on_message_complete(self) -> None:
        self.complete = True
        self.keep = self.parser.should_keep_alive()  # asked now: the parser resets after


class FastResponse:
    """One answer read from a pooled socket as the caller asks for its body.

    Made once the head has arrived (``status`` and ``headers`` are its own); the body is
    read through the socket's state (:class:`_Conn`) while the answer holds the socket.
    """

    __slots__ = ("_pool", "connection", "status", "headers", "_taken", "_mcpsync_sent")

    def __init__(self, pool: "_OriginPool", conn: _Conn) -> None:
        self._pool = pool
        self.connection: _Conn | None = conn
        self.status: int = conn.parser.get_status_code()
        self.headers = headers = _Headers()
        raw = conn.raw
        for name, data in zip(raw[::2], raw[1::2]):  # under lower-case names, repeats joined
            key = _dict_get(_NAMES, name)
            if key is None:
                key = _name(name)
            value = data.decode("latin-1")
            old = _dict_get(headers, key)
            headers[key] = value if old is None else f"{old}, {value}"
        self._taken = 0

    @property
    def length_remaining(self) -> int | None:
        """What is left of a ``Content-Length`` body (None: the body has no declared length)."""
        length = _dict_get(self.headers, "content-length")
        if length is None or not length.isdigit():
            return None
        return int(length) - self._taken

    # ------------------------------------------------------------- reading

    def _fill(self) -> bool:
        """Read once from the socket into the parser; False when nothing more will come."""
        conn = self.connection
        if conn is None or conn.complete or conn.eof:
            return False
        data = conn.sock.recv(_CHUNK)
        if not data:
            conn.eof = True
            if self.length_remaining is not None or "chunked" in self.headers.get("transfer-encoding", ""):
                raise ProtocolError("Connection broken: the answer ended early", ConnectionResetError())
            return False  # a body delimited by the connection's close ends here
        try:
            conn.parser.feed_data(data)
        except (httptools.HttpParserUpgrade, httptools.HttpParserError) as exc:
            return _parse_failed(conn, exc)
        return True

    def _take(self, amt: int | None) -> bytes:
        conn = self.connection
        if conn is None:
            return b""
        body = conn.body
        if amt is None or amt >= sum(map(len, body)):
            data = b"".join(body) if len(body) != 1 else body[0]
            body.clear()
        else:
            out: list[bytes] = []
            need = amt
            while need:
                piece = body[0]
                if len(piece) <= need:
                    out.append(body.popleft())
                    need -= len(piece)
                else:
                    out.append(piece[:need])
                    body[0] = piece[need:]
                    need = 0
            data = b"".join(out)
        self._taken += len(data)
        return data

    def read1(self, amt: int | None = None) -> bytes:
        """What has arrived of the body (up to ``amt``), waiting only when nothing has; b"" at its end."""
        conn = self.connection
        if conn is None:
            return b""
        while not conn.body and self._fill():
            pass
        return self._take(amt) if conn.body else b""

    def read(self, amt: int | None = None) -> bytes:
        """``amt`` bytes of the body (fewer at its end), or all of the rest."""
        conn = self.connection
        if conn is None:
            return b""
        while (amt is None or sum(map(len, conn.body)) < amt) and self._fill():
            pass
        return self._take(amt) if conn.body else b""

    def whole(self, limit: int) -> bytes | None:
        """The whole body when it has all arrived already and is at most ``limit`` bytes
        (a small JSON answer comes with its head): no read, no timeout. None otherwise."""
        conn = self.connection
        if conn is None or not conn.complete:
            return None
        body = conn.body
        if len(body) == 1:
            data = body[0]
        elif not body:
            return b""
        else:
            data = b"".join(body)
        if len(data) > limit:
            return None
        body.clear()
        self._taken += len(data)
        return data

    # ------------------------------------------------------------- the connection

    def release_conn(self) -> None:
        """Give the socket back when the answer was read whole and it may be kept; else close it."""
        conn, self.connection = self.connection, None
        if conn is None:
            return
        pool = self._pool
        if conn.complete and conn.keep and not conn.body:
            with pool._lock:  # pool.put, inline: once per request
                if not pool._closed and len(pool._idle) < pool.maxsize:
                    pool._idle.append(conn)
                    if pool._waiting:
                        pool._cond.notify()
                    return
            pool.put(conn)  # no room: closed and counted out there
        else:
            pool.discard(conn)

    def drain_conn(self) -> None:
        """Read the rest of the body (kept short) so the socket can be reused."""
        conn = self.connection
        if conn is None:
            return
        try:
            while conn.body or self._fill():
                conn.body.clear()
                if conn.complete:
                    break
        except (OSError, ProtocolError):
            self.close()

    def close(self) -> None:
        """Close the socket; the body's rest is never read."""
        conn, self.connection = self.connection, None
        if conn is not None:
            self._pool.discard(conn)

    def shutdown(self) -> None:
        """Wake a thread blocked reading this answer (from any thread)."""
        conn = self.connection
        if conn is not None:
            try:
                conn.sock.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass


def _parse_failed(conn: _Conn, exc: Exception) -> bool:
    """A parse failure on ``conn``: bytes after a whole answer spoil the socket (the
    answer stands: False); otherwise a :class:`ProtocolError` is raised."""
    if conn.complete:
        conn.keep = False
        return False
    if isinstance(exc, httptools.HttpParserUpgrade):  # pragma: no cover - never asked for
        raise ProtocolError("unexpected protocol upgrade") from None
    raise ProtocolError(f"malformed HTTP answer: {exc}") from None


class _OriginPool:
    """Idle keep-alive sockets to one origin; at most ``maxsize`` open when ``block``.

    A plain lock guards the idle list (taken and given back on every request); the
    condition on it is only waited on, and notified, when a caller waits for a socket.
    """

    def __init__(self, scheme: str, host: str, port: int, *, maxsize: int, block: bool,
                 tls: ssl.SSLContext | None) -> None:
        self.scheme, self.host, self.port = scheme, host, port
        default = 443 if scheme == "https" else 80
        self.host_header = (host if port == default else f"{host}:{port}").encode("idna")
        if ":" in host and not host.startswith("["):  # an IPv6 literal
            self.host_header = f"[{host}]".encode() + (b"" if port == default else f":{port}".encode())
        self.maxsize, self.block, self.tls = maxsize, block, tls
        self._idle: list[_Conn] = []
        self._open = 0
        self._lock = threading.Lock()
        self._cond = threading.Condition(self._lock)
        self._waiting = 0
        self._closed = False

    def get(self, pool_timeout: float | None) -> _Conn | None:
        """An idle socket (None: the caller connects a new one, counted already)."""
        with self._lock:
            ends: float | None = None
            while True:
                while self._idle:
                    conn = self._idle.pop()
                    poll = conn._poll
                    if poll.poll(0) if poll is not None else conn.dropped():
                        self._open -= 1
                        conn.close()
                        continue
                    return conn
                if not self.block or self._open < self.maxsize:
                    self._open += 1
                    return None
                if pool_timeout is not None and ends is None:
                    ends = time.monotonic() + pool_timeout
                left = None if ends is None else ends - time.monotonic()
                if left is not None and left <= 0:
                    raise EmptyPoolError(None, "every pooled connection is busy")  # type: ignore[arg-type]
                self._waiting += 1
                try:
                    self._cond.wait(left)
                finally:
                    self._waiting -= 1

    def connect(self, connect_timeout: float | None) -> _Conn:
        try:
            sock = socket.create_connection((self.host, self.port), timeout=connect_timeout)
        except socket.timeout as exc:
            self.forget()
            raise ConnectTimeoutError(None, f"connecting to {self.host}:{self.port} timed out") from exc
        except OSError as exc:
            self.forget()
            raise NewConnectionError(None, f"failed to connect: {exc}") from exc  # type: ignore[arg-type]
        try:
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            if self.tls is not None:
                sock = self.tls.wrap_socket(sock, server_hostname=self.host)
        except ssl.SSLError as exc:
            sock.close()
            self.forget()
            raise SSLError(exc) from exc
        except OSError as exc:
            sock.close()
            self.forget()
            raise NewConnectionError(None, f"failed to connect: {exc}") from exc  # type: ignore[arg-type]
        return _Conn(sock)

    def forget(self) -> None:
        """A counted socket was never made (or is gone): make room for another."""
        with self._lock:
            self._open -= 1
            if self._waiting:
                self._cond.notify()

    def put(self, conn: _Conn) -> None:
        with self._lock:
            if not self._closed and len(self._idle) < self.maxsize:
                self._idle.append(conn)
                if self._waiting:
                    self._cond.notify()
                return
            self._open -= 1
            if self._waiting:
                self._cond.notify()
        conn.close()

    def discard(self, conn: _Conn) -> None:
        conn.close()
        self.forget()

    def clear(self) -> None:
        with self._lock:
            idle, self._idle = self._idle, []
            self._open -= len(idle)
        for conn in idle:
            conn.close()


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
        self._targets: dict[str, tuple[_OriginPool, bytes]] = {}  # a transport asks for few URLs
        self._lock = threading.Lock()

    def _pool(self, url: str) -> tuple[_OriginPool, bytes]:
        """The pool of ``url``'s origin and the request line's rest with the Host header
        (``b" /path?query HTTP/1.1\\r\\nHost: …\\r\\n"``)."""
        known = self._targets.get(url)
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
        # a URL with raw non-ASCII fails here, not on the wire
        found = (pool, b" " + target.encode("ascii") + b" HTTP/1.1\r\nHost: " + pool.host_header + b"\r\n")
        if len(self._targets) < 256:
            self._targets[url] = found
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
            connect, read = timeout._connect_s, timeout._read_s
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
            deadline: monotonic; the connect and the read each get at most what is left
                of it when they start (None: no deadline).
            connect: the longest connect, in seconds (None: no limit).
            read: the longest wait for each read of the answer (None: no limit).
            pool_timeout: the longest wait for a free socket of a blocking pool.
        """
        known = self._targets.get(url)
        pool, target = known if known is not None else self._pool(url)
        if isinstance(body, str):
            body = body.encode()
        # the head is a few short lines, written with the body in one sendall
        block: bytes | None
        if headers is None:
            block = b""
        elif isinstance(headers, HeaderBlock):
            block = headers.wire
            if block is None:
                block = headers.wire = _wire(headers)
        else:
            block = _wire(headers)
        verb = _METHODS.get(method) or method.encode("ascii")
        if body is not None:
            data = b"".join((verb, target, block, b"Content-Length: %d\r\n\r\n" % len(body), body))
        elif method in ("POST", "PUT", "PATCH"):
            data = b"%s%s%sContent-Length: 0\r\n\r\n" % (verb, target, block)
        else:
            data = b"%s%s%s\r\n" % (verb, target, block)

        # an idle socket, as pool.get would give it (that, when none is idle or it was dropped)
        conn = None
        with pool._lock:
            if pool._idle:
                conn = pool._idle.pop()
        if conn is not None and (conn._poll.poll(0) if conn._poll is not None else conn.dropped()):
            pool.discard(conn)  # the server closed it while idle
            conn = None
        if conn is None:
            conn = pool.get(pool_timeout)
        if conn is None:
            if deadline is not None and connect is not None:
                connect = _within(connect, deadline - time.monotonic())
            conn = pool.connect(connect)
        if deadline is not None and read is not None:
            left = deadline - time.monotonic()  # inline _within: once per request
            if left < read:
                read = left if left > 0.001 else 0.001
        # ready to read one answer (the socket is idle: its last answer was read whole)
        conn.raw.clear()
        conn.head += _TOKENS
        conn.complete = False
        try:
            sock = conn.sock
            sock.settimeout(read)
            sock.sendall(data)
            while conn.head:  # the head (and, for a small answer, its body) in one read, mostly
                chunk = sock.recv(_CHUNK)
                if not chunk:
                    raise ProtocolError("Connection aborted.", ConnectionResetError("the server closed the connection"))
                try:
                    conn.parser.feed_data(chunk)
                except (httptools.HttpParserUpgrade, httptools.HttpParserError) as exc:
                    _parse_failed(conn, exc)
        except BaseException:
            pool.discard(conn)
            raise
        return FastResponse(pool, conn)

    def clear(self) -> None:
        """Close every idle socket (answers still being read keep theirs until released)."""
        with self._lock:
            pools = list(self._pools.values())
        for pool in pools:
            pool.clear()
