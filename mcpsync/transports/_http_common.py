"""What the HTTP transports share: connection pools, media types, the SSE parser, errors.

* :class:`SSEParser` — an incremental ``text/event-stream`` parser. It buffers each
  event up to the blank line that ends it (events split across reads are fine), keeps
  the last event id and the server's ``retry`` even for events without data (the
  priming events of resumable servers), ignores comment / keep-alive lines, and
  enforces a maximum event size while the event arrives. It is linear in the input:
  a partial line is kept in one ``bytearray`` and only new bytes are scanned.
* :func:`acquire_pool` / :func:`release_pool` — one urllib3 pool manager per origin
  (and TLS / proxy settings), shared by every transport and thread talking to it,
  reference counted so the last user closes it. Proxies come from the environment
  (``HTTP(S)_PROXY`` / ``NO_PROXY``) as requests reads them.
* :func:`media_type` — a ``Content-Type`` without its parameters, lower-cased.
* :func:`redirect_target` — same-origin 307 / 308 redirects only.
* :class:`StreamThreads` — each transport reads its response streams on its own
  reusable daemon threads, all ended (bounded join) when the transport closes.
* :func:`translate` — the one place where urllib3 / socket exceptions become
  :mod:`mcpsync._errors` types; :func:`status_error` words an HTTP error status and
  leaves its mapping to :func:`mcpsync._errors.error_from_http_status`.
* :func:`redact` — what of an error body may reach a message or a log line.
* :func:`request_timeout` — one deadline for an HTTP request: the pool wait, the
  connect and each read get what is left of it.
* :class:`HTTPOptions` — the options both transports take (headers, auth hook, TLS,
  timeouts, pool size, maximum message size).

The auth hook is any object with two methods::

    headers(url: str, method: str) -> dict[str, str]      # before every request
    on_response(url: str, method: str, status: int, headers: Mapping[str, str]) -> bool
                                                           # on 401/403: True = retry once
"""

from __future__ import annotations

import base64
import logging
import os
import queue
import re
import threading
import time
import weakref
from dataclasses import dataclass, field
from typing import Any, Mapping, Protocol
from urllib.parse import urljoin, urlsplit

import urllib3
from urllib3.exceptions import (
    ConnectTimeoutError,
    EmptyPoolError,
    HTTPError,
    MaxRetryError,
    NewConnectionError,
    ProtocolError as Urllib3ProtocolError,
    ProxyError,
    ReadTimeoutError,
    SSLError,
)

from .._errors import (
    AuthError,
    ConnectError,
    ConnectionClosed,
    MCPError,
    MessageTooLarge,
    NetworkError,
    ProtocolError,
    RequestTimeout,
    error_from_http_status,
)
from .._speedups import DEFAULT_MAX_MESSAGE_SIZE
from ._fasthttp import FastPoolManager, http_path, tls_context

__all__ = [
    "AuthHook",
    "HTTPOptions",
    "SSEEvent",
    "SSEParser",
    "Pools",
    "acquire_pool",
    "release_pool",
    "media_type",
    "origin_of",
    "translate",
    "status_error",
    "redirect_target",
    "StreamThreads",
    "redact",
    "sent_secrets",
    "request_timeout",
    "encode_header_value",
    "header_annotation_error",
    "header_annotations",
    "mcp_param_headers",
    "DEFAULT_MAX_MESSAGE_SIZE",
]

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


# --------------------------------------------------------------------------- media types


def media_type(content_type: str | None) -> str:
    """``"application/json; charset=utf-8"`` → ``"application/json"``."""
    if not content_type:
        return ""
    return content_type.split(";", 1)[0].strip().lower()


def origin_of(url: str) -> tuple[str, str, int]:
    """(scheme, host, port) of ``url``, with the default port filled in."""
    parts = urlsplit(url)
    scheme = parts.scheme.lower()
    port = parts.port or (443 if scheme == "https" else 80)
    return scheme, (parts.hostname or "").lower(), port


# --------------------------------------------------------------------------- SSE parser


@dataclass(slots=True)
class SSEEvent:
    """One dispatched server-sent event."""

    event: str
    data: bytes
    id: str | None


class _Oversized:
    """Marker the parser emits in place of an event that exceeded the size limit."""

    __slots__ = ("error",)

    def __init__(self, error: MessageTooLarge) -> None:
        self.error = error


class SSEParser:
    """Incremental ``text/event-stream`` parser (WHATWG HTML §9.2.6), linear-time.

    ``feed(chunk)`` returns the events the chunk completed, in order. An event whose
    data exceeds ``max_size`` is discarded as it arrives and reported once, in its
    place, as an :class:`_Oversized` marker carrying a :class:`MessageTooLarge`
    (``head``/``tail`` keep its first and last bytes); parsing then carries on.

    Attributes:
        last_event_id: the last ``id`` seen (kept across events, as the spec says).
        retry: the last ``retry`` value, in milliseconds, or None.

    Example:
        >>> p = SSEParser()
        >>> [e.data for e in p.feed(b"id: 1\\ndata: {}\\n\\n: ping\\n\\n")]
        [b'{}']
        >>> p.last_event_id
        '1'
    """

    __slots__ = (
        "max_size",
        "last_event_id",
        "retry",
        "_partial",
        "_skip_lf",
        "_data",
        "_data_size",
        "_event",
        "_has_data",
        "_oversized",
        "_head",
        "_tail",
    )

    def __init__(self, max_size: int = DEFAULT_MAX_MESSAGE_SIZE) -> None:
        if max_size <= 0:
            raise ValueError("max_size must be positive")
        self.max_size = max_size
        self.last_event_id: str | None = None
        self.retry: int | None = None
        self._partial = bytearray()
        self._skip_lf = False
        self._data: list[bytes] = []
        self._data_size = 0
        self._event = ""
        self._has_data = False
        self._oversized = False
        self._head = b""
        self._tail = b""

    def feed(self, chunk: bytes) -> list[SSEEvent | _Oversized]:
        """Parse ``chunk``; return the events (and oversize markers) it completed."""
        out: list[SSEEvent | _Oversized] = []
        if not chunk:
            return out
        pos = 0
        n = len(chunk)
        if self._skip_lf:
            self._skip_lf = False
            if chunk[0] == 0x0A:
                pos = 1
        partial = self._partial
        while pos < n:
            # find the next line terminator (\r, \n or \r\n)
            cr = chunk.find(b"\r", pos)
            lf = chunk.find(b"\n", pos)
            if cr < 0 and lf < 0:
                self._grow_partial(chunk, pos, n)
                break
            if cr < 0 or (0 <= lf < cr):
                end = lf
                nxt = lf + 1
            else:
                end = cr
                nxt = cr + 1
                if nxt < n:
                    if chunk[nxt] == 0x0A:
                        nxt += 1
                else:
                    self._skip_lf = True
            if partial:
                self._grow_partial(chunk, pos, end)
                line = bytes(partial)
                del partial[:]
            else:
                line = chunk[pos:end]
            pos = nxt
            self._line(line, out)
        if len(partial) > self.max_size + 64 and not self._oversized:
            # a single line longer than any acceptable event: stop keeping it
            self._start_discard(bytes(partial[:_EDGE]))
            self._tail = bytes(partial[-_EDGE:])
            self._data_size = len(partial)
            del partial[:]
            partial += b"-"  # placeholder: the line is not blank
        return out

    def _grow_partial(self, chunk: bytes, start: int, stop: int) -> None:
        if self._oversized:
            if stop > start:
                self._tail = (self._tail + chunk[max(start, stop - _EDGE) : stop])[-_EDGE:]
                self._data_size += stop - start
                if not self._partial:
                    self._partial += b"-"  # placeholder: the line is not blank
            return
        self._partial += chunk[start:stop]

    def _start_discard(self, head: bytes) -> None:
        self._oversized = True
        self._head = head[:_EDGE]
        self._data = []

    def _line(self, line: bytes, out: list[SSEEvent | _Oversized]) -> None:
        if not line:
            self._dispatch(out)
            return
        if line[0] == 0x3A:  # ":" comment / keep-alive
            return
        colon = line.find(b":")
        if colon < 0:
            name = line
            value = b""
        else:
            name = line[:colon]
            value = line[colon + 1 :]
            if value[:1] == b" ":
                value = value[1:]
        if name == b"data":
            self._has_data = True
            if self._oversized:
                self._data_size += len(value) + 1
                self._tail = (self._tail + value[-_EDGE:])[-_EDGE:]
                return
            self._data_size += len(value) + (1 if self._data else 0)
            if self._data_size > self.max_size:
                head = b"\n".join(self._data)[:_EDGE] if self._data else value[:_EDGE]
                self._start_discard(head)
                self._tail = value[-_EDGE:]
                return
            self._data.append(value)
        elif name == b"event":
            self._event = value.decode("utf-8", "replace")
        elif name == b"id":
            if b"\x00" not in value:
                self.last_event_id = value.decode("utf-8", "replace")
        elif name == b"retry":
            if value.isdigit():
                self.retry = int(value)

    def _dispatch(self, out: list[SSEEvent | _Oversized]) -> None:
        if self._oversized:
            err = MessageTooLarge(
                f"event of at least {self._data_size} bytes exceeds the limit of {self.max_size} bytes",
                size=self._data_size,
                limit=self.max_size,
                head=self._head,
                tail=self._tail,
            )
            out.append(_Oversized(err))
        elif self._has_data:
            data = self._data[0] if len(self._data) == 1 else b"\n".join(self._data)
            out.append(SSEEvent(self._event or "message", data, self.last_event_id))
        self._data = []
        self._data_size = 0
        self._event = ""
        self._has_data = False
        self._oversized = False
        self._head = b""
        self._tail = b""


# --------------------------------------------------------------------------- pools


class Pools:
    """The two pool managers of one origin.

    Attributes:
        main: requests; at most ``pool_size`` connections, a caller waits (up to its
            timeout) for a free one.
        control: long-lived streams (the standalone GET stream, the HTTP+SSE stream),
            replies to server requests, notifications and DELETE. Never blocks, so an
            answer a server waits for is never stuck behind the streams awaiting it.
    """

    __slots__ = ("main", "control", "refs")

    def __init__(self, main: Any, control: Any) -> None:  # urllib3's or the fast path's managers
        self.main = main
        self.control = control
        self.refs = 0


_pools: dict[tuple[Any, ...], Pools] = {}
_pools_lock = threading.Lock()


def _env_proxy(url: str) -> str | None:
    import requests.utils  # requests' reading of HTTP(S)_PROXY / NO_PROXY

    proxies = requests.utils.get_environ_proxies(url)
    scheme = urlsplit(url).scheme
    return proxies.get(scheme) or proxies.get("all")


def _pool_key(url: str, opts: HTTPOptions) -> tuple[Any, ...]:
    proxy = _env_proxy(url)
    return (origin_of(url), str(opts.verify), proxy, opts.pool_size, http_path(proxy))


def acquire_pool(url: str, opts: HTTPOptions) -> tuple[tuple[Any, ...], Pools]:
    """The shared pools for ``url``'s origin; pair every call with :func:`release_pool`.

    Returns:
        (key, pools): pass ``key`` to :func:`release_pool`.
    """
    key = _pool_key(url, opts)
    with _pools_lock:
        entry = _pools.get(key)
        if entry is None:
            entry = Pools(_make_manager(url, opts, block=True), _make_manager(url, opts, block=False))
            _pools[key] = entry
        entry.refs += 1
        return key, entry


def release_pool(key: tuple[Any, ...]) -> None:
    """Drop one reference; the last one closes the pools' idle connections."""
    with _pools_lock:
        entry = _pools.get(key)
        if entry is None:
            return
        entry.refs -= 1
        if entry.refs > 0:
            return
        del _pools[key]
    entry.main.clear()
    entry.control.clear()


def _make_manager(url: str, opts: HTTPOptions, *, block: bool) -> Any:
    """A pool manager for ``url``: the fast path's, or urllib3's where the fast path does
    not fit (a proxy; ``MCPSYNC_HTTP=urllib3``; see :func:`_fasthttp.http_path`)."""
    proxy = _env_proxy(url)
    if http_path(proxy) == "fast":
        tls = tls_context(opts.verify) if urlsplit(url).scheme == "https" else None
        return FastPoolManager(maxsize=opts.pool_size, block=block, tls=tls)
    kwargs: dict[str, Any] = {
        "num_pools": 4,
        "maxsize": opts.pool_size,
        "block": block,
        "retries": urllib3.Retry(total=None, connect=1, read=0, redirect=0, status=0, other=0),
    }
    if urlsplit(url).scheme == "https":
        if opts.verify is False:
            kwargs["cert_reqs"] = "CERT_NONE"
        else:
            kwargs["cert_reqs"] = "CERT_REQUIRED"
            if isinstance(opts.verify, str):
                kwargs["ca_certs"] = opts.verify
            else:
                try:
                    import certifi

                    kwargs["ca_certs"] = certifi.where()
                except ImportError:  # pragma: no cover - certifi ships with requests
                    pass
    if proxy:
        return urllib3.ProxyManager(proxy, **kwargs)
    return urllib3.PoolManager(**kwargs)


# --------------------------------------------------------------------------- stream threads


_STOP = object()  # a slot told to end (its owner closed)


class _Slot:
    """One reusable daemon thread: runs jobs, then waits ``idle`` seconds for another."""

    __slots__ = ("jobs", "thread")

    def __init__(self) -> None:
        self.jobs: queue.SimpleQueue[Any] = queue.SimpleQueue()
        self.thread: threading.Thread | None = None


_SLOT_IDLE = 30.0
_all_threads: "weakref.WeakSet[StreamThreads]" = weakref.WeakSet()


class StreamThreads:
    """The daemon threads one transport reads its response streams on.

    A fresh thread costs ~60 µs here, handing a job to a parked one ~10 µs, so a
    thread that finished a job parks for the next (for up to 30 s idle). They belong
    to one transport: :meth:`close` tells the parked ones to end and waits (bounded)
    for the busy ones, whose jobs the transport's close has just cut short, so no
    ``mcpsync-http-stream`` thread outlives the transport.

    Example:
        >>> threads = StreamThreads()
        >>> done = threading.Event()
        >>> threads.spawn(done.set)
        >>> done.wait(5)
        True
        >>> threads.close(5)
        True
    """

    __slots__ = ("_idle", "_all", "_lock", "_closed", "__weakref__")

    def __init__(self) -> None:
        self._idle: list[_Slot] = []
        self._all: set[_Slot] = set()
        self._lock = threading.Lock()
        self._closed = False
        _all_threads.add(self)

    def spawn(self, fn: Any, *args: Any) -> None:
        """Run ``fn(*args)`` on one of these threads (a parked one when there is one).

        Raises:
            ConnectionClosed: after :meth:`close`.
        """
        with self._lock:
            if self._closed:
                raise ConnectionClosed("transport is closed")
            slot = self._idle.pop() if self._idle else None
            fresh = slot is None
            if slot is None:
                slot = _Slot()
                slot.thread = threading.Thread(target=self._loop, args=(slot,), name="mcpsync-http-stream", daemon=True)
                self._all.add(slot)
        slot.jobs.put((fn, args))
        if fresh:
            slot.thread.start()  # type: ignore[union-attr]

    def close(self, timeout: float) -> bool:
        """End every thread: parked ones at once, busy ones when their job returns.

        Waits at most ``timeout`` seconds in all. True when every thread has ended.
        """
        with self._lock:
            self._closed = True
            idle, self._idle = self._idle, []
            slots = list(self._all)
        for slot in idle:
            slot.jobs.put(_STOP)
        deadline = time.monotonic() + timeout
        me = threading.current_thread()
        ended = True
        for slot in slots:
            thread = slot.thread
            if thread is None or thread is me or thread.ident is None:
                continue
            thread.join(max(0.0, deadline - time.monotonic()))
            ended = ended and not thread.is_alive()
        return ended

    def _loop(self, slot: _Slot) -> None:
        try:
            while True:
                try:
                    job = slot.jobs.get(timeout=_SLOT_IDLE)
                except queue.Empty:
                    with self._lock:
                        if slot in self._idle:
                            self._idle.remove(slot)
                            return
                    job = slot.jobs.get()  # popped by spawn() or close() just now: it is coming
                if job is _STOP:
                    return
                fn, args = job
                try:
                    fn(*args)
                except Exception:  # noqa: BLE001 - jobs log their own failures
                    log.exception("HTTP stream job failed")
                fn = args = job = None  # drop references while parked
                with self._lock:
                    if self._closed:
                        return
                    self._idle.append(slot)
        finally:
            with self._lock:
                self._all.discard(slot)

    def _after_fork(self) -> None:
        self._idle = []  # their threads did not survive the fork
        self._all = set()
        self._lock = threading.Lock()


def _after_fork_in_child() -> None:
    """A forked child shares none of the parent's connections or stream threads."""
    global _pools_lock
    _pools.clear()  # the sockets are the parent's; dropped, never shut down
    _pools_lock = threading.Lock()
    for threads in list(_all_threads):
        threads._after_fork()


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_after_fork_in_child)


# --------------------------------------------------------------------------- errors


def translate(exc: BaseException, url: str, *, connecting: bool = False, fatal: bool = True) -> MCPError:
    """Map a urllib3 / socket exception to the mcpsync error tree (not raised).

    Connection refused is a :class:`ConnectError`, never a timeout; a read timeout is
    a :class:`RequestTimeout`; a connection dropped mid-response is
    :class:`ConnectionClosed` when it ends the session (``fatal``), else a plain
    :class:`NetworkError` (one HTTP exchange failed; the transport stays usable).
    """
    if isinstance(exc, MCPError):
        return exc
    reason: BaseException = exc
    if isinstance(exc, MaxRetryError) and exc.reason is not None:
        reason = exc.reason
    if isinstance(reason, (NewConnectionError, ConnectTimeoutError, ProxyError)):
        return ConnectError(f"cannot connect to {url}: {reason}")
    if isinstance(reason, EmptyPoolError):
        return RequestTimeout(f"no free connection to {url} in time: every pooled connection is busy")
    if isinstance(reason, SSLError):
        return ConnectError(f"TLS failure talking to {url}: {reason}")
    if isinstance(reason, ReadTimeoutError) or isinstance(reason, TimeoutError):
        return RequestTimeout(f"no data from {url} within the read timeout")
    if isinstance(reason, (Urllib3ProtocolError, ConnectionError)):
        if connecting:
            # the connection was up and the request written (or being written) when it
            # broke: the server may have acted on it, so it must not count as unsent;
            # and one broken exchange does not end the transport
            return NetworkError(f"connection to {url} broke before the answer: {reason}", sent=True)
        if not fatal:
            return NetworkError(f"connection to {url} dropped mid-response: {reason}")
        return ConnectionClosed(f"connection to {url} dropped: {reason}")
    if isinstance(reason, (HTTPError, OSError)):
        if not fatal:
            return NetworkError(f"HTTP failure talking to {url}: {reason}")
        return ConnectionClosed(f"HTTP failure talking to {url}: {reason}")
    return NetworkError(f"HTTP failure talking to {url}: {reason!r}")


MAX_REDIRECTS = 3


def redirect_target(url: str, resp: Any) -> str | None:
    """Where a 307 / 308 answer to a request for ``url`` points, or None if it is none.

    Only redirects that keep the origin are followed (they keep the method and body,
    and the session and auth headers stay with the server they belong to); one to
    another origin is a :class:`ProtocolError`.
    """
    if resp.status not in (307, 308):
        return None
    location = resp.headers.get("location")
    if not location:
        return None
    target: str = urljoin(url, str(location))
    if origin_of(target) != origin_of(url):
        raise ProtocolError(f"{url} redirects to another origin ({target}); not followed", status=resp.status)
    try:
        resp.drain_conn()
        resp.release_conn()
    except Exception:  # noqa: BLE001 - the connection is simply not reused
        pass
    return target


#: How much of an error body a message may quote (after redaction), in characters.
SNIPPET = 200
_REDACT_WINDOW = 2048
_REDACTED = "[redacted]"
_CREDENTIALS = re.compile(
    r"""(?ix)
      (?P<line>\b(?:proxy-)?authorization\b[ \t]*[:=][^\r\n]*)             # an Authorization header line
    | (?P<cookie>\b(?:set-)?cookie\b[ \t]*[:=][^\r\n]*)
    | (?P<scheme>\b(?:bearer|basic|dpop|digest)[ \t]+)[A-Za-z0-9._~+/=:-]{4,}
    | (?P<key>["']?\b[\w-]*(?:token|api[_-]?key|apikey|secret|password|passwd|session[_-]?id|signature|credential)s?\b["']?
        [ \t]*[:=][ \t]*["']?)[^\s"'&,;<>}]+
    | eyJ[A-Za-z0-9_-]{8,}(?:\.[A-Za-z0-9_-]*){0,2}                        # a JWT (or its start)
    """
)


def _redact_match(m: re.Match[str]) -> str:
    if m.group("line") is not None:
        name = m.group("line").split(":", 1)[0].split("=", 1)[0].strip()
        return f"{name}: {_REDACTED}"
    if m.group("cookie") is not None:
        name = m.group("cookie").split(":", 1)[0].split("=", 1)[0].strip()
        return f"{name}: {_REDACTED}"
    if m.group("scheme") is not None:
        return m.group("scheme") + _REDACTED
    if m.group("key") is not None:
        return m.group("key") + _REDACTED
    return _REDACTED


def redact(text: str | bytes, secrets: Any = (), limit: int = SNIPPET) -> str:
    """``text`` fit for an exception message or a log line: credentials out, then cut.

    Removes every value in ``secrets`` (the request's own header values) and anything
    shaped like a credential: ``Authorization`` / ``Cookie`` lines, ``Bearer …`` /
    ``Basic …`` / ``DPoP …``, ``token=…`` / ``access_token`` /
    ``api_key`` / ``password`` / ``secret`` key-value pairs (JSON or form), and
    JWT-looking strings; then keeps at most ``limit`` characters.

    Example:
        >>> redact('{"error": "bad", "access_token": "abc123"} Authorization: Bearer xyz')
        '{"error": "bad", "access_token": "[redacted]"} Authorization: [redacted]'
    """
    if isinstance(text, (bytes, bytearray, memoryview)):
        text = bytes(text[:_REDACT_WINDOW]).decode("utf-8", "replace")
    else:
        text = text[:_REDACT_WINDOW]
    for secret in secrets:
        if secret and len(secret) >= 4:
            text = text.replace(secret, _REDACTED)
    text = _CREDENTIALS.sub(_redact_match, text).strip()
    if len(text) > limit:
        text = text[:limit].rstrip() + "…"
    return text


def sent_secrets(headers: Mapping[str, str]) -> tuple[str, ...]:
    """The values of a request's headers that an error page must not repeat: all but
    the protocol's own, which say nothing secret (and, for ``Scheme credentials``
    values, the credentials alone too).

    Example:
        >>> sent_secrets({"Authorization": "Bearer abc.def", "Accept": "application/json"})
        ('Bearer abc.def', 'abc.def')
    """
    out: list[str] = []
    for k, v in headers.items():
        if not isinstance(v, str) or k.lower() in _PLAIN_HEADERS or len(v) < 4:
            continue
        out.append(v)
        scheme, _, credentials = v.partition(" ")
        if credentials and len(credentials.strip()) >= 4:
            out.append(credentials.strip())
    return tuple(out)


_PLAIN_HEADERS = frozenset(
    {
        "user-agent", "content-type", "content-length", "accept", "accept-encoding", "host", "connection",
        "cache-control", "last-event-id", "mcp-protocol-version", "mcp-method", "mcp-name",
    }
)


def status_error(
    status: int,
    url: str,
    body: bytes = b"",
    headers: Mapping[str, str] | None = None,
    *,
    secrets: Any = (),
    session: bool = True,
) -> MCPError:
    """The error for an HTTP status that carries no JSON-RPC message.

    The mapping is :func:`mcpsync._errors.error_from_http_status` (``Retry-After`` of
    ``headers`` included); this only words the message, quoting at most
    :data:`SNIPPET` characters of ``body`` after :func:`redact` (``secrets``: the
    request's own header values, never quoted).
    """
    snippet = redact(body, secrets) if body else ""
    text = f"HTTP {status} from {url}" + (f": {snippet}" if snippet else "")
    return error_from_http_status(status, text, headers=headers, session=session)


class _DeadlineTimeout(urllib3.Timeout):
    """A urllib3 timeout whose connect and read timeouts never outlast a deadline.

    urllib3 reads ``connect_timeout`` after the pool wait and ``read_timeout`` after the
    request is written (and again on the retried connect), so each phase gets only
    what is left (clones keep the deadline).
    """

    def __init__(self, deadline: float, connect: float, read: float) -> None:
        super().__init__(connect=connect, read=read)
        self.deadline = deadline
        self._connect_s = connect
        self._read_s = read

    def clone(self) -> "_DeadlineTimeout":
        return _DeadlineTimeout(self.deadline, self._connect_s, self._read_s)

    @property
    def connect_timeout(self) -> float:  # type: ignore[override]
        return max(0.001, min(self._connect_s, self.deadline - time.monotonic()))

    @property
    def read_timeout(self) -> float:  # type: ignore[override]
        return max(0.001, min(self._read_s, self.deadline - time.monotonic()))


def request_timeout(deadline: float | None, connect: float, read: float) -> tuple[dict[str, Any], float | None]:
    """urllib3 keyword arguments for one request attempt under ``deadline`` (monotonic).

    Returns:
        (kwargs, pool_timeout): ``timeout`` in kwargs; ``pool_timeout`` is what is left
        for the wait for a free pooled connection (None: no deadline).

    Raises:
        RequestTimeout: the deadline has passed already.
    """
    if deadline is None:
        return {"timeout": urllib3.Timeout(connect=connect, read=read)}, None
    left = deadline - time.monotonic()
    if left <= 0:
        raise RequestTimeout("the request's time ran out before it could be sent")
    return {"timeout": _DeadlineTimeout(deadline, connect, read)}, left


# --------------------------------------------------------------------------- MCP header helpers

_HEADER_SAFE = re.compile(r"^[\x20-\x7E]*$")
_B64_SENTINEL = re.compile(r"^=\?base64\?.*\?=$")
_TOKEN = re.compile(r"^[!#$%&'*+\-.^_`|~0-9A-Za-z]+$")
_PRIMITIVE = ("string", "integer", "boolean")
_SUB_ONE = ("additionalProperties", "items", "contains", "not", "if", "then", "else", "propertyNames",
            "unevaluatedItems", "unevaluatedProperties", "contentSchema", "additionalItems")
_SUB_LIST = ("allOf", "anyOf", "oneOf", "prefixItems")
_SUB_MAP = ("patternProperties", "dependentSchemas", "$defs", "definitions")
_X_HEADER = "x-mcp-header"


def encode_header_value(value: str) -> str:
    """A header value as is when it is plain printable ASCII, else ``=?base64?…?=``."""
    if _HEADER_SAFE.match(value) and value == value.strip() and not _B64_SENTINEL.match(value):
        return value
    return "=?base64?" + base64.b64encode(value.encode("utf-8")).decode("ascii") + "?="


def _schema_positions(root: Any) -> list[tuple[tuple[str, ...] | None, dict[str, Any]]]:
    """Every subschema of ``root`` with its pure-``properties`` path (None when off that chain)."""
    out: list[tuple[tuple[str, ...] | None, dict[str, Any]]] = []
    stack: list[tuple[tuple[str, ...] | None, Any]] = [((), root)]
    budget = 10_000
    while stack and budget > 0:
        budget -= 1
        path, schema = stack.pop()
        if not isinstance(schema, dict):
            continue
        out.append((path, schema))
        for kw, val in schema.items():
            if kw == "properties" and isinstance(val, dict):
                for name, sub in val.items():
                    stack.append(((*path, name) if path is not None else None, sub))
            elif kw in _SUB_ONE:
                stack.append((None, val))
            elif kw in _SUB_LIST and isinstance(val, list):
                stack.extend((None, sub) for sub in val)
            elif kw in _SUB_MAP and isinstance(val, dict):
                stack.extend((None, sub) for sub in val.values())
    return out


def header_annotation_error(input_schema: Any) -> str | None:
    """Why the ``x-mcp-header`` annotations of a tool's input schema are invalid, or None.

    A valid annotation sits on a property reached from the root through ``properties``
    only, is an RFC 9110 token, annotates a string / integer / boolean property, and is
    unique (case-insensitively). Tools with an invalid annotation are dropped by the
    client.
    """
    seen: set[str] = set()
    for path, schema in _schema_positions(input_schema):
        if _X_HEADER not in schema:
            continue
        if not path:
            return "x-mcp-header outside a pure properties chain"
        token = schema[_X_HEADER]
        if not isinstance(token, str) or not _TOKEN.match(token):
            return f"x-mcp-header on {'.'.join(path)!r} is not an HTTP token"
        if schema.get("type") not in _PRIMITIVE:
            return f"x-mcp-header on {'.'.join(path)!r} is not on a string/integer/boolean property"
        if token.lower() in seen:
            return f"x-mcp-header {token!r} appears twice"
        seen.add(token.lower())
    return None


def header_annotations(input_schema: Any) -> dict[tuple[str, ...], str]:
    """Property path → header token, for a schema :func:`header_annotation_error` accepts."""
    return {
        path: schema[_X_HEADER]
        for path, schema in _schema_positions(input_schema)
        if path and isinstance(schema.get(_X_HEADER), str)
    }


def mcp_param_headers(annotations: Mapping[tuple[str, ...], str], arguments: Any) -> dict[str, str]:
    """The ``Mcp-Param-<token>`` headers mirroring ``arguments`` (absent values omitted)."""
    headers: dict[str, str] = {}
    for path, token in annotations.items():
        node: Any = arguments
        for key in path:
            node = node.get(key) if isinstance(node, dict) else None
        if node is None:
            continue
        if isinstance(node, bool):
            rendered = "true" if node else "false"
        elif isinstance(node, (str, int, float)):
            rendered = str(node)
        else:
            continue
        headers["Mcp-Param-" + token] = encode_header_value(rendered)
    return headers


def call_auth_headers(auth: Any, url: str, method: str) -> dict[str, str]:
    """Headers from the auth hook; a failing hook is an :class:`AuthError`."""
    if auth is None:
        return {}
    try:
        return dict(auth.headers(url, method) or {})
    except MCPError:
        raise
    except Exception as exc:  # the hook is user / OAuth code
        raise AuthError(f"the auth hook failed to provide headers for {url}: {exc}") from exc


#: DPoP nonce challenges answered per HTTP request (RFC 9449 §9), apart from the one auth retry.
MAX_DPOP_NONCE_RETRIES = 2
_USE_DPOP_NONCE = re.compile(r'\berror\s*=\s*"?use_dpop_nonce\b', re.IGNORECASE)


def dpop_nonce_challenge(status: int, headers: Mapping[str, str]) -> bool:
    """A 401 asking the client to put the server's ``DPoP-Nonce`` in its proof (RFC 9449 §9):
    a request to answer with the nonce, not a failed authorization."""
    return (
        status == 401
        and bool(headers.get("DPoP-Nonce"))
        and bool(_USE_DPOP_NONCE.search(headers.get("WWW-Authenticate") or ""))
    )


def auth_retry(auth: Any, url: str, method: str, status: int, headers: Mapping[str, str]) -> bool:
    """Ask the auth hook whether a 401/403 should be retried with fresh headers."""
    if auth is None or not hasattr(auth, "on_response"):
        return False
    try:
        return bool(auth.on_response(url, method, status, headers))
    except MCPError:
        raise
    except Exception as exc:
        raise AuthError(f"the auth hook failed on HTTP {status} from {url}: {exc}") from exc


def read_body(resp: Any, limit: int, url: str, deadline: float | None = None) -> bytes:
    """Read a whole (non-stream) response body, refusing more than ``limit`` bytes.

    The size is checked as the bytes arrive (and against ``Content-Length`` before any
    is read): an oversized body is refused without being kept whole. With a
    ``deadline`` (monotonic) each read after the first waits only for what is left.

    Raises:
        MessageTooLarge: more than ``limit`` bytes (``head`` / ``tail``: redacted edges).
        RequestTimeout: the body did not arrive by the deadline.
    """
    declared = resp.headers.get("content-length")
    if declared is not None and declared.isdigit() and int(declared) > limit:
        _discard(resp)
        raise MessageTooLarge(
            f"response from {url} is {declared} bytes, over the limit of {limit} bytes",
            size=int(declared),
            limit=limit,
            head=b"",
            tail=b"",
        )
    read = resp.read1 if hasattr(resp, "read1") else resp.read
    chunks: list[bytes] = []
    size = 0
    try:
        while True:
            if deadline is not None and chunks:
                left = deadline - time.monotonic()
                if left <= 0:
                    _discard(resp)
                    raise RequestTimeout(f"the answer from {url} did not arrive in time")
                if getattr(resp, "length_remaining", None) != 0:  # 0: the next read is EOF, at once
                    sock = getattr(getattr(resp, "connection", None), "sock", None)
                    if sock is not None:
                        sock.settimeout(left)
            chunk = read(65536)
            if not chunk:
                break
            size += len(chunk)
            if size > limit:  # refused as it arrives: what came so far is never joined
                raise _oversized(resp, url, limit, size, chunks[0] if chunks else chunk, chunk)
            chunks.append(chunk)
    except MCPError:
        raise
    except Exception as exc:
        raise translate(exc, url, fatal=False) from exc
    if len(chunks) == 1:
        return chunks[0]
    return b"".join(chunks)


def _discard(resp: Any) -> None:
    """Close ``resp``'s connection (the rest of the body is never read) and release it."""
    try:
        resp.close()
        resp.release_conn()
    except Exception:  # noqa: BLE001
        pass


def _oversized(resp: Any, url: str, limit: int, size: int, start: bytes, last: bytes) -> MessageTooLarge:
    _discard(resp)
    return MessageTooLarge(
        f"response from {url} exceeds the limit of {limit} bytes",
        size=size,
        limit=limit,
        head=redact(start[:_EDGE], limit=_EDGE).encode(),
        tail=redact(last[-_EDGE:], limit=_EDGE).encode(),
    )
