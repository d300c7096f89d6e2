"""HTTP failures as mcpsync errors, and what of a response may be shown.

* :func:`translate` — the one place where urllib3 / socket exceptions become
  :mod:`mcpsync._errors` types; :func:`status_error` words an HTTP error status and
  leaves its mapping to :func:`mcpsync._status_errors.error_from_http_status`.
* :func:`redirect_target` — same-origin 307 / 308 redirects only.
* :func:`redact` — what of an error body may reach a message or a log line.
* :func:`request_timeout` — one deadline for an HTTP request: the pool wait, the
  connect and each read get what is left of it.
* :func:`read_body` — a whole response body, bounded in size and time.
"""

from __future__ import annotations

import re
import ssl
import time
from typing import Any, Mapping
from urllib.parse import urljoin

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
    ConnectError,
    ConnectionClosed,
    MCPError,
    MessageTooLarge,
    NetworkError,
    ProtocolError,
    RequestTimeout,
)
from .._status_errors import error_from_http_status
from ._fastconn import FastResponse
from ._http_options import EDGE, origin_of, wire_url
from ._tls import refusal
from ._urllib3_path import guard

def translate(
    exc: BaseException, url: str, *, connecting: bool = False, fatal: bool = True, written: bool | None = None
) -> MCPError:
    """Map a urllib3 / socket exception to the mcpsync error tree (not raised).

    Connection refused is a :class:`ConnectError`, never a timeout; a read timeout is
    a :class:`RequestTimeout`; a connection dropped mid-response is
    :class:`ConnectionClosed` when it ends the session (``fatal``), else a plain
    :class:`NetworkError` (one HTTP exchange failed; the transport stays usable).
    ``written`` (urllib3's path: :func:`._urllib3_path.was_written`) says whether the
    request had begun to go out: a TLS failure after that may have reached the server.
    The message names the failure, never the data it carried.
    """
    if isinstance(exc, MCPError):
        return exc
    reason: BaseException = exc
    if isinstance(exc, MaxRetryError) and exc.reason is not None:
        reason = exc.reason
    said = refusal(reason)
    if said is not None:  # a TLS alert: the server's side of the handshake failed, the request unread
        return ConnectError(f"TLS failure talking to {url}: {said}")
    if written and isinstance(reason, ProxyError) and not isinstance(reason.original_error, TimeoutError):
        # urllib3 calls a tunnel that broke after the request went through it "unable to
        # connect to proxy": it was written, so it may have been acted on
        return NetworkError(
            f"connection to {url} broke before the answer: {_describe(reason.original_error)}{_tls_hint(url)}", sent=True
        )
    if isinstance(reason, (NewConnectionError, ConnectTimeoutError, ProxyError)):
        return ConnectError(f"cannot connect to {url}: {_describe(reason)}")
    if isinstance(reason, EmptyPoolError):
        return RequestTimeout(f"no free connection to {url} in time: every pooled connection is busy")
    if isinstance(reason, SSLError):
        hint = _tls_hint(url) if isinstance(reason.args[0] if reason.args else None, ssl.SSLEOFError) else ""
        if written:
            return NetworkError(
                f"TLS failure talking to {url} after the request was sent: {_describe(reason)}{hint}", sent=True
            )
        return ConnectError(f"TLS failure talking to {url}: {_describe(reason)}{hint}")
    if isinstance(reason, ReadTimeoutError) or isinstance(reason, TimeoutError):
        return RequestTimeout(f"no data from {url} within the read timeout")
    if isinstance(reason, (Urllib3ProtocolError, ConnectionError)):
        if connecting:
            # the connection was up and the request written (or being written) when it
            # broke: the server may have acted on it, so it must not count as unsent;
            # and one broken exchange does not end the transport
            return NetworkError(f"connection to {url} broke before the answer: {_describe(reason)}{_tls_hint(url)}", sent=True)
        if not fatal:
            return NetworkError(f"connection to {url} dropped mid-response: {_describe(reason)}")
        return ConnectionClosed(f"connection to {url} dropped: {_describe(reason)}")
    if isinstance(reason, (HTTPError, OSError)):
        hint = _tls_hint(url) if isinstance(reason, ssl.SSLEOFError) else ""  # a TLS connection cut
        if not fatal:
            return NetworkError(f"HTTP failure talking to {url}: {_describe(reason)}{hint}")
        return ConnectionClosed(f"HTTP failure talking to {url}: {_describe(reason)}{hint}")
    return NetworkError(f"HTTP failure talking to {url}: {_describe(reason)}")


def _describe(exc: BaseException) -> str:
    """An exception for a message: its kind and text (redacted, cut), never its arguments
    (a ``UnicodeEncodeError``'s are the whole text it failed on: headers, tokens)."""
    if isinstance(exc, UnicodeError):
        return f"{type(exc).__name__} ({getattr(exc, 'reason', '')})"
    text = redact(str(exc))
    return f"{type(exc).__name__}: {text}" if text else type(exc).__name__


def _tls_hint(url: str) -> str:
    """A TLS server that refuses the client's certificate may close without an alert (Python's
    asyncio servers do): the connection ends before the answer, and this says why it may."""
    if url[:6].lower() != "https:":
        return ""
    return " (TLS: a server that requires a client certificate, cert=, closes so when it is shown none it accepts)"


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
    try:
        target, _ = wire_url(urljoin(url, str(location)))  # never the Location's userinfo
    except ValueError as exc:
        raise ProtocolError(f"{url} redirects to an address that cannot be used: {exc}", status=resp.status) from None
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

    The mapping is :func:`mcpsync._status_errors.error_from_http_status` (``Retry-After`` of
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
    what is left (clones keep the deadline). ``FastPoolManager.request`` reads its
    ``deadline`` and limits instead (the transports' fast path makes no such object).
    """

    def __init__(self, deadline: float, connect: float, read: float) -> None:
        super().__init__(connect=connect, read=read)
        self.deadline = deadline
        self.connect_limit = connect
        self.read_limit = read

    def clone(self) -> "_DeadlineTimeout":
        return _DeadlineTimeout(self.deadline, self.connect_limit, self.read_limit)

    @property
    def connect_timeout(self) -> float:
        left = self.deadline - time.monotonic()
        return self.connect_limit if left >= self.connect_limit else (left if left > 0.001 else 0.001)

    @property
    def read_timeout(self) -> float:
        left = self.deadline - time.monotonic()
        return self.read_limit if left >= self.read_limit else (left if left > 0.001 else 0.001)


def time_left(deadline: float | None) -> float | None:
    """What is left of ``deadline`` (monotonic) for a request about to be sent, in
    seconds (None: no deadline); :func:`request_timeout` without urllib3's timeout.

    Raises:
        RequestTimeout: the deadline has passed already.
    """
    if deadline is None:
        return None
    left = deadline - time.monotonic()
    if left <= 0:
        raise RequestTimeout("the request's time ran out before it could be sent")
    return left


def request_timeout(deadline: float | None, connect: float, read: float) -> tuple[dict[str, Any], float | None]:
    """urllib3 keyword arguments for one request attempt under ``deadline`` (monotonic).

    Returns:
        (kwargs, pool_timeout): ``timeout`` in kwargs; ``pool_timeout`` is what is left
        for the wait for a free pooled connection (None: no deadline). The fast path
        needs no timeout object: it takes :func:`time_left` and the plain values.

    Raises:
        RequestTimeout: the deadline has passed already.
    """
    if deadline is None:
        return {"timeout": urllib3.Timeout(connect=connect, read=read)}, None
    left = deadline - time.monotonic()
    if left <= 0:
        raise RequestTimeout("the request's time ran out before it could be sent")
    return {"timeout": _DeadlineTimeout(deadline, connect, read)}, left


def read_body(resp: Any, limit: int, url: str, deadline: float | None = None) -> bytes:
    """Read a whole (non-stream) response body, refusing more than ``limit`` bytes.

    The size is checked as the bytes arrive (and against ``Content-Length`` before any
    is read): an oversized body is refused without being kept whole. With a
    ``deadline`` (monotonic) the whole body must arrive by it, however it trickles. On
    every failure (and an exception raised by a signal handler) the connection is
    closed, never left held.

    Raises:
        MessageTooLarge: more than ``limit`` bytes (``head`` / ``tail``: redacted edges).
        RequestTimeout: the body did not arrive by the deadline.
    """
    fast = resp.__class__ is FastResponse
    if fast:
        whole: bytes | None = resp.whole(limit)
        if whole is not None:  # arrived with the head (a small JSON answer): nothing to wait for
            return whole
        resp.deadline = deadline  # every read of the fast path keeps to it
    try:
        declared = resp.headers.get("content-length")
        if declared is not None and declared.isdigit() and int(declared) > limit:
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
        sock = None if fast else getattr(getattr(resp, "connection", None), "sock", None)
        with guard(None if fast else deadline, sock):  # urllib3's reads, by the deadline too
            while True:
                if deadline is not None and chunks:
                    left = deadline - time.monotonic()
                    if left <= 0:
                        raise RequestTimeout(f"the answer from {url} did not arrive in time")
                    if sock is not None and getattr(resp, "length_remaining", None) != 0:  # 0: EOF, at once
                        sock.settimeout(left)
                chunk = read(65536)
                if not chunk:
                    break
                size += len(chunk)
                if size > limit:  # refused as it arrives: what came so far is never joined
                    raise _oversized(url, limit, size, chunks[0] if chunks else chunk, chunk)
                chunks.append(chunk)
    except BaseException as exc:
        _discard(resp)
        if isinstance(exc, MCPError) or not isinstance(exc, Exception):
            raise
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


def _oversized(url: str, limit: int, size: int, start: bytes, last: bytes) -> MessageTooLarge:
    return MessageTooLarge(
        f"response from {url} exceeds the limit of {limit} bytes",
        size=size,
        limit=limit,
        head=redact(start[:EDGE], limit=EDGE).encode(),
        tail=redact(last[-EDGE:], limit=EDGE).encode(),
    )
