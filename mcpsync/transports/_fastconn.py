"""The sockets of the fast HTTP path and the answers read from them: one origin's pool of
sockets (:class:`_OriginPool`), a socket and its parser's state (:class:`_Conn`,
:class:`_Answer`), and the answer handed to the transports (:class:`FastResponse`).

:mod:`._fasthttp` writes requests; this module keeps their sockets and reads what comes back,
bounded (:data:`MAX_HEAD`, :data:`MAX_FIELDS`, :data:`MAX_LINE`; the stretches of an answer
without body fed whole lines), past interim answers, within a deadline, decoding gzip and
deflate a bounded piece at a time. A socket (:class:`_Conn`) no one holds any more is
closed and its place in the pool freed when it is collected, which is at once: nothing
it owns points back at it, and the pool counts its places through weak references.
"""

from __future__ import annotations

import select
import socket
import ssl
import threading
import time
import weakref
import zlib
from collections import deque
from typing import Any

try:
    import httptools
except ImportError:  # pragma: no cover - a plain dependency; urllib3 serves without it
    httptools = None  # type: ignore[assignment]

from urllib3.exceptions import (
    ClosedPoolError,
    ConnectTimeoutError,
    EmptyPoolError,
    NewConnectionError,
    ProtocolError,
    ReadTimeoutError,
    SSLError,
)

__all__ = ["FastHeaders", "FastResponse", "MAX_FIELDS", "MAX_HEAD", "MAX_LINE", "httptools"]

_CHUNK = 65536
#: the most bytes an answer's head may take (interim heads before it included), and
#: likewise any stretch of an answer that brings no body (chunk lines, trailers)
MAX_HEAD = 256 * 1024
#: the most fields a head (or a head and its trailers) may have, as urllib3 allows
MAX_FIELDS = 100
#: the longest field (name and value), as urllib3 allows a line
MAX_LINE = 65536
_MAX_RAW = 2 * MAX_FIELDS  # names and values
#: a stretch without body past this many bytes is fed whole lines, or this much at once
_KEEP_BACK = 8192
_LINE_BATCH = 16384
_TOO_LONG = f"the answer's head (or a stretch of it without body) is over {MAX_HEAD} bytes"

_dict_get = dict.get  # the headers' own lookups, not FastHeaders' case-folding ones


class FastHeaders(dict[str, str]):
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


class _Answer:
    """The parser's side of one socket: the state of the answer being read.

    The parser lives as long as the socket (llhttp starts the next message after a
    complete one on a kept-alive connection) and so does this state, so an answer costs
    neither a parser nor a Python call per event of its own: the body's pieces are
    appended to ``body``, and the start of a message and the end of its head take the
    tokens in ``head``, by the C methods of those containers; only ``on_header`` and
    ``on_message_complete`` run Python. An answer is read by one thread at a time (the
    one that took the socket from the pool), so this state needs no lock.

    A second answer where none was asked for (bytes after a complete one) spoils the
    socket: each request puts two tokens in ``head``, the message's begin pops one and
    the end of its head clears the other, so a message beyond it has none to pop and
    fails the parse; the socket is closed, never reused. An interim (1xx) answer puts
    the two tokens back when it ends, for the answer it announces.

    It is the parser's protocol object, apart from :class:`_Conn`, so that the parser's
    hold on it makes no reference cycle with the socket's owner (see :class:`_Conn`).
    """

    __slots__ = (
        "parser", "raw", "body", "head", "complete", "keep",
        "on_body", "on_headers_complete", "on_message_begin",
    )

    def __init__(self) -> None:
        self.raw: list[bytes] = []  # the head's names and values (name, value, name, value …) as they came
        self.body: deque[bytes] = deque()
        self.head: list[bool] = []  # not empty while the head of the answer asked for is incomplete
        self.complete = False
        self.keep = False  # the answer read whole may be followed by another (False: spoiled too)
        # the parser's callbacks that need no Python frame (see the class docstring)
        self.on_body = self.body.append
        self.on_headers_complete = self.head.clear
        self.on_message_begin = self.head.pop
        self.parser = httptools.HttpResponseParser(self)

    # ------------------------------------------------------------- httptools callbacks

    def on_header(self, name: bytes, value: bytes) -> None:
        raw = self.raw
        raw += (name, value)  # measured by the reader (fields_problem); counted here, so never kept many
        if len(raw) > _MAX_RAW:
            raise ProtocolError(f"the answer has more than {MAX_FIELDS} header fields")

    def on_message_complete(self) -> None:
        parser = self.parser
        if parser.get_status_code() < 200:
            if parser.get_status_code() == 101:
                raise ProtocolError("the server switched protocols (HTTP 101), which was not asked for")
            # interim (100, 102, 103): the real answer follows (how many: bounded by MAX_HEAD)
            self.raw.clear()
            self.head += _TOKENS
            return
        self.complete = True
        self.keep = parser.should_keep_alive()  # asked now: the parser resets after


def fields_problem(raw: list[bytes]) -> str | None:
    """Why the fields ``raw`` (names and values, as they came) are too many or too long, or None."""
    if len(raw) > _MAX_RAW:
        return f"the answer has more than {MAX_FIELDS} header fields"
    for i in range(0, len(raw) - 1, 2):
        if len(raw[i]) + len(raw[i + 1]) > MAX_LINE:
            return f"the answer has a header field of over {MAX_LINE} bytes"
    return None


class _Conn:
    """One socket to the pool's origin and its parser, kept answer after answer.

    ``sock`` is what the transports adjust timeouts on; ``answer`` is the parser's state
    (:class:`_Answer`; ``raw``, ``body`` and ``head`` are its containers, kept here too).
    ``slot`` is its place among its pool's open sockets (:class:`_Slot`), held as long as
    the socket lives and is not given up: one dropped by a caller that was interrupted
    (or an answer never released) is collected at once, since nothing it owns points back
    at it, and its place with it; its socket is closed by the socket's own finalizer. No
    Python code has to run for that, so no signal can stop it half-way.
    """

    __slots__ = (
        "sock", "fd", "answer", "parser", "raw", "body", "head", "eof", "dry", "pending", "poller", "slot", "__weakref__",
    )

    def __init__(self, sock: socket.socket, slot: _Slot) -> None:
        self.sock = sock
        #: the descriptor of a plain socket (the JSON lane writes and reads it in C), -1 for TLS
        self.fd = sock.fileno() if sock.__class__ is socket.socket else -1
        self.answer = answer = _Answer()
        self.parser = answer.parser
        self.raw = answer.raw
        self.body = answer.body
        self.head = answer.head
        self.eof = False
        self.dry = 0  # bytes fed since the parser last gave body bytes (a head, chunk lines, trailers)
        self.pending = bytearray()  # bytes of such a stretch kept back until a line ends
        self.slot = slot
        #: a ``select.poll`` on the socket (where there is poll): input while idle means it was dropped
        self.poller: Any = None
        if _POLL:
            self.poller = select.poll()
            self.poller.register(sock, select.POLLIN)

    def close(self) -> None:
        """Close the socket and give up its place in the pool."""
        self.slot.live = False
        try:
            self.sock.close()
        except OSError:
            pass

    def dropped(self) -> bool:
        """The server closed this idle socket (or wrote to it unasked): not to be reused."""
        try:
            if self.poller is not None:
                return bool(self.poller.poll(0))
            readable, _, _ = select.select([self.sock], [], [], 0)
        except (OSError, ValueError):
            return True
        return bool(readable)

    def feed(self, data: bytes) -> None:
        """Feed the parser ``data`` read after the first read of an answer.

        A stretch of the answer that gives no body (a head, chunk lines, trailers) is
        refused past :data:`MAX_HEAD` bytes; past its first :data:`_KEEP_BACK` bytes it is
        fed whole lines (or :data:`_LINE_BATCH` bytes) at a time, because httptools builds
        a field up by joining its pieces: a long field trickled a byte at a time costs no
        more than one read at once.

        Raises:
            ProtocolError: malformed, or over a limit.
        """
        dry = self.dry
        if dry > _KEEP_BACK:
            pending = self.pending
            pending += data
            if dry + len(pending) > MAX_HEAD:
                raise ProtocolError(_TOO_LONG)
            if b"\n" not in data and len(pending) < _LINE_BATCH:
                return  # no line has ended: keep it back
            data = bytes(pending)
            pending.clear()
        answer = self.answer
        head = self.head
        in_head = bool(head)
        pieces = len(answer.body)
        fields = len(self.raw)
        try:
            self.parser.feed_data(data)
        except (httptools.HttpParserUpgrade, httptools.HttpParserError) as exc:
            _parse_failed(answer, exc)
        if len(self.raw) != fields:  # new fields (or an interim head's gone): all measured again
            problem = fields_problem(self.raw)
            if problem is not None:
                raise ProtocolError(problem)
        if answer.complete or len(answer.body) != pieces or (in_head and not head):
            self.dry = 0  # body came, or the head ended: a new stretch
        else:
            self.dry = dry = self.dry + len(data)
            if dry > MAX_HEAD:
                raise ProtocolError(_TOO_LONG)


class FastResponse:
    """One answer read from a pooled socket as the caller asks for its body.

    Made once the head has arrived (``status`` and ``headers`` are its own); the body is
    read through the socket's state (:class:`_Conn`) while the answer holds the socket.
    ``deadline`` (monotonic; unset: none) bounds every later read of the body as a whole,
    not read by read; ``read_body`` sets it.
    """

    __slots__ = ("_pool", "connection", "status", "headers", "_taken", "mcpsync_sent", "deadline", "_decoder")
    deadline: float | None

    def __init__(self, pool: _OriginPool, conn: _Conn) -> None:
        self._pool = pool
        self.connection: _Conn | None = conn
        self.status: int = conn.parser.get_status_code()
        self.headers = headers = FastHeaders()
        raw = conn.raw  # (counted as it came; longer fields cannot come in one read of a head, later reads are measured)
        for name, data in zip(raw[::2], raw[1::2]):  # under lower-case names, repeats joined
            key = _dict_get(_NAMES, name)
            if key is None:
                key = _name(name)
            value = data.decode("latin-1")
            old = _dict_get(headers, key)
            headers[key] = value if old is None else f"{old}, {value}"
        self._taken = 0
        self._decoder: Any = None
        coding = _dict_get(headers, "content-encoding")
        if coding is not None:
            self._decoder = _decoder(coding)

    @property
    def length_remaining(self) -> int | None:
        """What is left of a ``Content-Length`` body (None: the body has no declared length)."""
        length = _dict_get(self.headers, "content-length")
        if length is None or not length.isdigit() or self._decoder is not None:
            return None
        return int(length) - self._taken

    # ------------------------------------------------------------- reading

    def _fill(self) -> bool:
        """Read once from the socket into the parser; False when nothing more will come."""
        conn = self.connection
        if conn is None or conn.answer.complete or conn.eof:
            return False
        deadline = getattr(self, "deadline", None)  # (set by read_body only: no cost for others)
        if deadline is not None:
            left = deadline - time.monotonic()
            if left <= 0:
                raise ReadTimeoutError(None, None, "the answer did not arrive in time")  # type: ignore[arg-type]
            timeout = conn.sock.gettimeout()
            if timeout is None or left < timeout:
                conn.sock.settimeout(left)
        data = conn.sock.recv(_CHUNK)
        if not data:
            conn.eof = True
            if _dict_get(self.headers, "content-length") is not None or "chunked" in self.headers.get(
                "transfer-encoding", ""
            ):
                raise ProtocolError("Connection broken: the answer ended early", ConnectionResetError())
            return False  # a body delimited by the connection's close ends here
        conn.feed(data)
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
        if self._decoder is not None:
            return self._decoded(amt)
        conn = self.connection
        if conn is None:
            return b""
        while not conn.body and self._fill():
            pass
        return self._take(amt) if conn.body else b""

    def read(self, amt: int | None = None) -> bytes:
        """``amt`` bytes of the body (fewer at its end), or all of the rest."""
        if self._decoder is not None:
            out: list[bytes] = []
            size = 0
            while amt is None or size < amt:
                piece = self._decoded(None if amt is None else amt - size)
                if not piece:
                    break
                out.append(piece)
                size += len(piece)
            return b"".join(out)
        conn = self.connection
        if conn is None:
            return b""
        while (amt is None or sum(map(len, conn.body)) < amt) and self._fill():
            pass
        return self._take(amt) if conn.body else b""

    def _decoded(self, amt: int | None) -> bytes:
        """:meth:`read1` of a body with a content coding: at most ``amt`` (else
        :data:`_CHUNK`) decoded bytes at a time, however much they expand."""
        decoder = self._decoder
        limit = amt or _CHUNK
        while True:
            tail = decoder.unconsumed_tail
            if tail:
                data = tail
            elif decoder.eof:
                return b""
            else:
                conn = self.connection
                if conn is None:
                    return b""
                while not conn.body and self._fill():
                    pass
                if not conn.body:
                    raise ProtocolError("the compressed body ended before its end", ConnectionResetError())
                data = self._take(None)
            try:
                out: bytes = decoder.decompress(data, limit)
            except zlib.error as exc:
                raise ProtocolError(f"the answer's compressed body is corrupt: {exc}") from None
            if out:
                return out

    def whole(self, limit: int) -> bytes | None:
        """The whole body when it has all arrived already and is at most ``limit`` bytes
        (a small JSON answer comes with its head): no read, no timeout. None otherwise."""
        conn = self.connection
        if conn is None or not conn.answer.complete or self._decoder is not None:
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
        answer = conn.answer
        if answer.complete and answer.keep and not conn.body:
            with pool.lock:  # pool.put, inline: once per request
                if not pool.closed and len(pool.idle) < pool.maxsize:
                    pool.idle.append(conn)
                    if pool.waiting:
                        pool.cond.notify()
                    return
            pool.put(conn)  # no room, or closed: closed and counted out there
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
                if conn.answer.complete:
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


def _decoder(coding: str) -> Any:
    """A decompressor for an answer's ``Content-Encoding`` (gzip or deflate; identity:
    None). Anything else is refused: only gzip and deflate are asked for."""
    codings = [c.strip().lower() for c in coding.split(",") if c.strip().lower() not in ("", "identity")]
    if not codings:
        return None
    if len(codings) == 1 and codings[0] in ("gzip", "x-gzip"):
        return zlib.decompressobj(16 + zlib.MAX_WBITS)
    if len(codings) == 1 and codings[0] == "deflate":
        return zlib.decompressobj(zlib.MAX_WBITS)
    raise ProtocolError(f"the answer's content coding {coding!r} was not asked for (gzip and deflate were)")


def _parse_failed(answer: _Answer, exc: Exception) -> bool:
    """A parse failure: bytes after a whole answer spoil the socket (the answer stands:
    False); otherwise a :class:`ProtocolError` is raised (a limit's own, when a callback
    refused what it was given)."""
    if answer.complete:
        answer.keep = False
        return False
    if isinstance(exc, httptools.HttpParserUpgrade):
        raise ProtocolError("the server switched protocols (HTTP 101), which was not asked for") from None
    cause = exc.__context__
    if isinstance(cause, ProtocolError):
        raise cause from None
    raise ProtocolError(f"malformed HTTP answer: {exc}") from None


def _rest_of_head(conn: _Conn, deadline: float | None, read: float | None) -> None:
    """Read the rest of an answer's head (past any interim answers), each read waiting
    only for what is left of ``deadline``."""
    sock = conn.sock
    head = conn.head
    while head:
        if deadline is not None:
            left = deadline - time.monotonic()
            if left <= 0:
                raise ReadTimeoutError(None, None, "the answer's head did not arrive in time")  # type: ignore[arg-type]
            if read is None or left < read:
                sock.settimeout(left)
        chunk = sock.recv(_CHUNK)
        if not chunk:
            raise ProtocolError("Connection aborted.", ConnectionResetError("the server closed the connection"))
        conn.feed(chunk)


class _Slot:
    """A place among a pool's open sockets: held by the caller that connects, then by the
    socket (:attr:`_Conn.slot`); free once given up (``live`` False) or collected."""

    __slots__ = ("live", "__weakref__")

    def __init__(self) -> None:
        self.live = True


_WAIT_STEP = 0.05  # a waiter counts the places again this often (a place freed by collection tells no one)


class _OriginPool:
    """Idle keep-alive sockets to one origin; at most ``maxsize`` open when ``block``.

    A plain lock guards the idle list (taken and given back on every request); the
    condition on it is only waited on, and notified, when a caller waits for a socket.
    How many are open is never a running count (a signal could stop its update half-way):
    it is the places (:class:`_Slot`) still held, counted through weak references when
    a caller needs a new one. Once :meth:`clear` has run the pool is closed: a socket
    given back is closed, and no socket is handed out.
    """

    def __init__(self, scheme: str, host: str, port: int, *, maxsize: int, block: bool,
                 tls: ssl.SSLContext | None) -> None:
        self.scheme, self.host, self.port = scheme, host, port
        default = 443 if scheme == "https" else 80
        name = f"[{host}]" if ":" in host else host  # an IPv6 literal
        self.host_line = b"Host: " + (name if port == default else f"{name}:{port}").encode("ascii") + b"\r\n"
        self.maxsize, self.block, self.tls = maxsize, block, tls
        #: idle sockets, the newest last: taken and given back under ``lock`` (the exchange
        #: takes one inline, as :meth:`get` would)
        self.idle: list[_Conn] = []
        self._slots: list[weakref.ref[_Slot]] = []  # every place handed out, while it may be held
        self._all: weakref.WeakSet[_Conn] = weakref.WeakSet()  # every socket made (made rarely; gone when collected)
        self.lock = threading.Lock()
        #: the condition on ``lock``: :meth:`get` waits on it, a socket given back (or a place
        #: freed) notifies it when anyone waits (``waiting``, counted under the lock)
        self.cond = threading.Condition(self.lock)
        self.waiting = 0
        self.closed = False  # (set once, by clear, under the lock)

    def open_count(self) -> int:
        """Sockets open or being opened (places held); call with the lock held."""
        held = [ref for ref in self._slots if (slot := ref()) is not None and slot.live]
        self._slots = held
        return len(held)

    def get(self, pool_timeout: float | None) -> _Conn | _Slot:
        """An idle socket, or a place (:class:`_Slot`) to connect a new one with (:meth:`connect`)."""
        with self.lock:
            ends: float | None = None
            while True:
                if self.closed:
                    raise ClosedPoolError(None, "the client's connections are closed")  # type: ignore[arg-type]
                while self.idle:
                    conn = self.idle.pop()
                    poll = conn.poller
                    if poll.poll(0) if poll is not None else conn.dropped():
                        conn.close()
                        continue
                    return conn
                if not self.block or self.open_count() < self.maxsize:
                    slot = _Slot()
                    self._slots.append(weakref.ref(slot))
                    return slot
                if pool_timeout is not None and ends is None:
                    ends = time.monotonic() + pool_timeout
                left = None if ends is None else ends - time.monotonic()
                if left is not None and left <= 0:
                    raise EmptyPoolError(None, "every pooled connection is busy")  # type: ignore[arg-type]
                self.waiting += 1
                try:
                    self.cond.wait(_WAIT_STEP if left is None or left > _WAIT_STEP else left)
                finally:
                    self.waiting -= 1

    def connect(self, slot: _Slot, connect_timeout: float | None) -> _Conn:
        """A new socket in ``slot`` (from :meth:`get`); the place is given up if it fails."""
        sock = None
        try:
            sock = socket.create_connection((self.host, self.port), timeout=connect_timeout)
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            if self.tls is not None:
                sock = self.tls.wrap_socket(sock, server_hostname=self.host)
            conn = _Conn(sock, slot)
            self._all.add(conn)
            return conn
        except BaseException as exc:
            slot.live = False
            if sock is not None:
                sock.close()
            self._freed()
            if isinstance(exc, socket.timeout):
                raise ConnectTimeoutError(None, f"connecting to {self.host}:{self.port} timed out") from exc
            if isinstance(exc, ssl.SSLError):
                raise SSLError(exc) from exc
            if isinstance(exc, OSError):
                raise NewConnectionError(None, f"failed to connect: {exc}") from exc  # type: ignore[arg-type]
            raise

    def _freed(self) -> None:
        """A place was given up: wake a waiter, if any."""
        if self.waiting:
            with self.lock:
                self.cond.notify()

    def put(self, conn: _Conn) -> None:
        with self.lock:
            if not self.closed and len(self.idle) < self.maxsize:
                self.idle.append(conn)
                if self.waiting:
                    self.cond.notify()
                return
            if self.waiting:
                self.cond.notify()
        conn.close()

    def discard(self, conn: _Conn) -> None:
        conn.close()
        self._freed()

    def clear(self) -> None:
        """Close the pool: every idle socket now, and every socket in use is shut down (its
        reader wakes and fails) and closed when it is given back."""
        with self.lock:
            self.closed = True
            idle = self.idle[:]
            self.idle.clear()  # (the one list of the pool's life: the JSON lane keeps it)
            if self.waiting:
                self.cond.notify_all()
        for conn in idle:
            conn.close()
        for conn in list(self._all):
            if conn.slot.live:  # in use
                try:
                    conn.sock.shutdown(socket.SHUT_RDWR)
                except OSError:
                    pass
