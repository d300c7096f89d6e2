"""Raw-socket HTTP servers whose answers are scripted byte by byte (issue 29's wire tests).

Runs in threads of the test process, on 127.0.0.1 (or ``::1``), plain or TLS. Nothing here
parses HTTP the way a library would: each request's head is split as it came, kept raw,
and each answer is whatever bytes a script writes, so a test sees exactly what reached
the wire and decides exactly what leaves it.

* :class:`RawServer` — accepts connections, reads each request (head, ``Content-Length``
  body), records it as a :class:`Request` and asks ``handler(wire, request)`` to answer;
  the handler returns whether the connection serves another request. Counts connections
  accepted and still open (a connection is open until either side closes it).
* :class:`Wire` — what a handler does with the connection: ``send``, ``trickle`` (a byte
  at a time), ``pause``, ``hold`` (until the client hangs up), ``reset`` (RST through
  ``SO_LINGER`` 0), ``half_close``, ``close`` (a FIN; on TLS without ``close_notify``).
* :class:`ScriptedServer` — the fast path's own tests' server: ``reply(sock, n) -> keep``.
* :class:`ConnectProxy` — an HTTP ``CONNECT`` proxy (``HTTPS_PROXY``), which puts a client
  on the urllib3 path (the fast path takes no proxy).
* :class:`MCPServer` — enough MCP for ``mcpsync.Client.http``: both eras
  (``server/discover``; ``initialize`` with an ``Mcp-Session-Id``, 202 for notifications,
  405 for the GET stream), ``tools/list`` and ``tools/call`` of ``echo`` and ``edge``, whose
  result is ``"<the caller's Authorization value>|<message>"`` so an answer handed to the
  wrong request or client is seen at once. A ``script`` answers the requests ``when``
  picks (by default: ``tools/call`` of ``edge``) instead of the default answer.
* :func:`private_ca` — a CA made at test time (``cryptography``) and a server certificate
  it signed for 127.0.0.1 / localhost / ::1.
* :func:`answer` / :func:`chunked` — HTTP answer bytes, for scripts.
"""

from __future__ import annotations

import datetime
import ipaddress
import json
import select
import socket
import ssl
import struct
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Iterable

__all__ = [
    "HOLD", "ConnectProxy", "MCPServer", "RawServer", "Request", "ScriptedServer", "TLSFiles", "Wire", "answer", "chunked",
    "private_ca", "rpc_result",
]

HOLD = 10.0  # the longest any script keeps a connection waiting (nothing outlives a test for long)
_HEAD_LIMIT = 1 << 20  # a request head larger than this is recorded cut and the connection closed
_IDLE = 30.0  # an idle keep-alive connection is closed after this long


@dataclass
class Request:
    """One request as it reached the server.

    Attributes:
        n: its number on the server (1-based, in arrival order).
        conn: the number of the connection it came on (1-based, in accept order).
        head: the head as it came, up to (not including) the blank line.
        line: the request line.
        lines: the header lines, split at CR LF only (a bare CR or LF stays inside its line).
        body: the body (``Content-Length`` bytes; empty when the head was unreadable).
        malformed: why the server could not frame it ("" when it could).
    """

    n: int
    conn: int
    head: bytes
    body: bytes
    malformed: str = ""
    line: bytes = field(init=False)
    lines: list[bytes] = field(init=False)
    message: Any = field(init=False, default=None)

    def __post_init__(self) -> None:
        first, *rest = self.head.split(b"\r\n")
        self.line, self.lines = first, rest
        if self.body[:1] == b"{":
            try:
                self.message = json.loads(self.body)
            except ValueError:
                self.message = None

    @property
    def raw(self) -> bytes:
        """The whole request as it came (head, blank line, body)."""
        return self.head + b"\r\n\r\n" + self.body

    @property
    def verb(self) -> str:
        return self.line.split(b" ", 1)[0].decode("latin-1")

    @property
    def target(self) -> str:
        """The request target as sent (e.g. ``/mcp/%C3%BC``)."""
        parts = self.line.split(b" ")
        return parts[1].decode("latin-1") if len(parts) > 1 else ""

    @property
    def path(self) -> str:
        return self.target.split("?", 1)[0]

    def values(self, name: str) -> list[str]:
        """The value of every header line called ``name`` (any case), in order."""
        want = name.lower().encode()
        out = []
        for line in self.lines:
            key, sep, value = line.partition(b":")
            if sep and key.strip().lower() == want:
                out.append(value.strip().decode("latin-1"))
        return out

    def header(self, name: str) -> str | None:
        """The first value of header ``name`` (None: not sent)."""
        found = self.values(name)
        return found[0] if found else None

    @property
    def method(self) -> str | None:
        """The JSON-RPC method of the body (None: no JSON-RPC request or notification)."""
        return self.message.get("method") if isinstance(self.message, dict) else None

    @property
    def rid(self) -> Any:
        return self.message.get("id") if isinstance(self.message, dict) else None

    @property
    def tool(self) -> str | None:
        """The tool a ``tools/call`` names."""
        if self.method != "tools/call":
            return None
        params = self.message.get("params") or {}
        return params.get("name")

    @property
    def arguments(self) -> dict[str, Any]:
        params = (self.message.get("params") or {}) if isinstance(self.message, dict) else {}
        return params.get("arguments") or {}


Handler = Callable[["Wire", Request], bool]


class Wire:
    """One accepted connection, as a handler writes to it."""

    def __init__(self, server: "RawServer", sock: socket.socket, number: int) -> None:
        self.server = server
        self.sock = sock
        self.number = number
        self.gone = False  # the client closed (or reset) it, or a write failed

    def send(self, data: bytes) -> bool:
        """Write ``data`` whole; False when the client is gone."""
        if self.gone:
            return False
        try:
            self.sock.sendall(data)
            return True
        except OSError:
            self.gone = True
            return False

    def trickle(self, data: bytes, every: float = 0.0, *, limit: float = HOLD) -> bool:
        """Write ``data`` one byte per ``send``, ``every`` seconds apart, for ``limit``
        seconds at most; False when the client went (or time ran out) first."""
        ends = time.monotonic() + limit
        for i in range(len(data)):
            if not self.send(data[i:i + 1]):
                return False
            if every:
                if time.monotonic() >= ends or self.hold(every):
                    return False
            elif i % 64 == 63:
                time.sleep(0.0005)  # let the bytes leave as segments of their own
        return True

    def pause(self, seconds: float) -> bool:
        """Wait ``seconds`` (False at once if the server is closing)."""
        return not self.server._stop.wait(seconds)

    def hold(self, limit: float = HOLD) -> bool:
        """Wait until the client closes the connection (True) or ``limit`` passes (False).

        Nothing is read: bytes the client sends meanwhile stay for the next request."""
        ends = time.monotonic() + limit
        raw = self.sock.fileno()
        while not self.gone:
            left = ends - time.monotonic()
            if left <= 0 or self.server._stop.is_set():
                return False
            try:
                readable, _, _ = select.select([raw], [], [], min(left, 0.1))
                if not readable:
                    continue
                data = socket.socket.recv(self.sock, 1, socket.MSG_PEEK)  # the raw bytes, TLS or not
            except (OSError, ValueError):
                data = b""
            if not data:
                self.gone = True
            else:  # something is waiting to be read: a close can no longer be seen, only time
                self.server._stop.wait(max(0.0, min(left, 0.1)))
        return True

    def reset(self) -> None:
        """Close with a TCP reset (``SO_LINGER`` 0): the client's next read fails."""
        try:
            self.sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
        except OSError:
            pass
        self._close()

    def half_close(self) -> None:
        """Shut the server's side for writing (a FIN); reading goes on."""
        try:
            socket.socket.shutdown(self.sock, socket.SHUT_WR)
        except OSError:
            pass

    def close(self) -> None:
        """Close (a FIN; a TLS connection ends without ``close_notify``)."""
        try:
            socket.socket.shutdown(self.sock, socket.SHUT_RDWR)
        except OSError:
            pass
        self._close()

    def _close(self) -> None:
        self.gone = True
        try:
            socket.socket.close(self.sock) if isinstance(self.sock, ssl.SSLSocket) else self.sock.close()
        except OSError:
            pass


class RawServer:
    """A threaded server on 127.0.0.1 (or ``host``) that hands each request to ``handler``.

    Args:
        handler: ``handler(wire, request) -> keep serving this connection``.
        host: ``"127.0.0.1"`` or ``"::1"``.
        tls: a server-side context: each connection is wrapped (its handshake on its thread).
    """

    def __init__(self, handler: Handler, *, host: str = "127.0.0.1", tls: ssl.SSLContext | None = None) -> None:
        self.handler = handler
        self.tls = tls
        family = socket.AF_INET6 if ":" in host else socket.AF_INET
        self.sock = socket.create_server((host, 0), family=family)
        self.host = host
        self.port: int = self.sock.getsockname()[1]
        self.accepted = 0
        self.open = 0
        self.log: list[Request] = []
        self._lock = threading.RLock()  # wait()'s predicates read under it too
        self._changed = threading.Condition(self._lock)
        self._conns: dict[int, socket.socket] = {}  # open connections by number (TLS: the wrapped socket)
        self._count = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._accept, name="wire-accept", daemon=True)
        self._thread.start()

    @property
    def origin(self) -> str:
        scheme = "https" if self.tls is not None else "http"
        host = f"[{self.host}]" if ":" in self.host else self.host
        return f"{scheme}://{host}:{self.port}"

    @property
    def url(self) -> str:
        return self.origin + "/mcp"

    @property
    def requests(self) -> list[bytes]:
        """Every request as it came (head, blank line, body), in order."""
        with self._lock:
            return [r.raw for r in self.log]

    def connections(self) -> set[int]:
        """The numbers of the connections still open (neither side has closed them)."""
        with self._lock:
            return set(self._conns)

    def wait(self, predicate: Callable[[], object], timeout: float = 10.0) -> bool:
        """Wait (bounded) until ``predicate()`` holds; it is checked whenever a request
        arrives or a connection opens or closes."""
        ends = time.monotonic() + timeout
        with self._changed:
            while not predicate():
                left = ends - time.monotonic()
                if left <= 0:
                    return False
                self._changed.wait(min(left, 0.1))
        return True

    def close(self) -> None:
        self._stop.set()
        try:
            self.sock.shutdown(socket.SHUT_RDWR)  # wakes the thread blocked in accept()
        except OSError:
            pass
        try:
            self.sock.close()
        except OSError:
            pass
        with self._lock:
            conns = list(self._conns.values())
        for conn in conns:
            try:
                socket.socket.shutdown(conn, socket.SHUT_RDWR)
            except OSError:
                pass
        self._thread.join(5)

    # ------------------------------------------------------------- serving

    def _accept(self) -> None:
        while not self._stop.is_set():
            try:
                conn, _ = self.sock.accept()
            except OSError:
                return
            with self._changed:
                self.accepted += 1
                self.open += 1
                number = self.accepted
                self._conns[number] = conn
                self._changed.notify_all()
            threading.Thread(target=self._serve, args=(conn, number), name="wire-conn", daemon=True).start()

    def _serve(self, conn: socket.socket, number: int) -> None:
        sock = conn
        try:
            conn.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            if self.tls is not None:
                conn.settimeout(10)
                sock = self.tls.wrap_socket(conn, server_side=True)
                with self._lock:
                    self._conns[number] = sock
            wire = Wire(self, sock, number)
            buf = b""
            while not self._stop.is_set() and not wire.gone:
                request, buf = self._read(sock, buf, number)
                if request is None:
                    return
                with self._changed:
                    self.log.append(request)
                    self._changed.notify_all()
                if request.malformed or not self.handler(wire, request):
                    return
        except (OSError, ssl.SSLError):
            return
        finally:
            try:
                sock.close()
            except OSError:
                pass
            with self._changed:
                self.open -= 1
                self._conns.pop(number, None)
                self._changed.notify_all()

    def _read(self, sock: socket.socket, buf: bytes, number: int) -> tuple[Request | None, bytes]:
        """The next request on ``sock`` (None: the client closed it, or it stayed idle)."""
        sock.settimeout(_IDLE)
        while b"\r\n\r\n" not in buf:
            if len(buf) > _HEAD_LIMIT:
                return self._request(number, buf[:_HEAD_LIMIT], b"", "head too large"), b""
            try:
                data = sock.recv(65536)
            except (OSError, ssl.SSLError):
                data = b""
            if not data:
                return None, b""
            buf += data
        head, _, buf = buf.partition(b"\r\n\r\n")
        lengths = set()
        for line in head.split(b"\r\n")[1:]:
            name, sep, value = line.partition(b":")
            if sep and name.strip().lower() == b"content-length":
                lengths.add(value.strip())
        if len(lengths) > 1 or any(not v.isdigit() for v in lengths):
            return self._request(number, head, b"", f"Content-Length {sorted(lengths)}"), b""
        length = int(lengths.pop()) if lengths else 0
        while len(buf) < length:
            try:
                data = sock.recv(65536)
            except (OSError, ssl.SSLError):
                data = b""
            if not data:
                return self._request(number, head, buf, "body cut short"), b""
            buf += data
        return self._request(number, head, buf[:length]), buf[length:]

    def _request(self, number: int, head: bytes, body: bytes, malformed: str = "") -> Request:
        with self._lock:
            self._count += 1
            n = self._count
        return Request(n, number, head, body, malformed)


class ScriptedServer(RawServer):
    """A :class:`RawServer` whose answers are ``reply(sock, n) -> keep serving`` (``n``: the
    request's number): the fast path's own tests write every byte themselves."""

    def __init__(self, reply: Callable[[socket.socket, int], bool]) -> None:
        super().__init__(lambda wire, request: reply(wire.sock, request.n))


class ConnectProxy(RawServer):
    """An HTTP proxy on 127.0.0.1 that takes ``CONNECT host:port`` only (what a client sends
    for an ``https`` origin through ``HTTPS_PROXY``) and pipes the tunnel's bytes both ways
    until either end closes. ``tunnels`` counts the tunnels opened."""

    def __init__(self) -> None:
        self.tunnels = 0
        super().__init__(self._tunnel)

    def _tunnel(self, wire: Wire, request: Request) -> bool:
        if request.verb != "CONNECT":
            wire.send(answer(405))
            return False
        host, _, port = request.target.rpartition(":")
        try:
            upstream = socket.create_connection((host.strip("[]"), int(port)), timeout=5)
        except (OSError, ValueError):
            wire.send(answer(502))
            return False
        with self._lock:
            self.tunnels += 1
        wire.send(b"HTTP/1.1 200 Connection established\r\n\r\n")
        back = threading.Thread(target=_pipe, args=(upstream, wire.sock), name="wire-tunnel", daemon=True)
        back.start()
        _pipe(wire.sock, upstream)
        back.join(HOLD)
        return False


def _pipe(src: socket.socket, dst: socket.socket) -> None:
    """Copy ``src`` to ``dst`` until ``src`` ends (then ``dst`` is told: a FIN, or a reset
    when ``src`` was reset)."""
    src.settimeout(HOLD)
    reset = False
    try:
        while True:
            data = src.recv(65536)
            if not data:
                break
            dst.sendall(data)
    except ConnectionResetError:
        reset = True
    except OSError:
        pass
    try:
        if reset:
            dst.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
            dst.close()
        else:
            dst.shutdown(socket.SHUT_WR)
    except OSError:
        pass


# --------------------------------------------------------------------------- answers


def answer(status: int = 200, body: bytes = b"", headers: Iterable[tuple[str, str]] = (), *,
           reason: str = "", framing: str = "length", version: str = "HTTP/1.1") -> bytes:
    """An HTTP answer's bytes.

    Args:
        framing: ``"length"`` (a ``Content-Length``), ``"chunked"`` (one chunk and the last)
            or ``"close"`` (neither: the body ends when the connection does).
    """
    lines = [f"{version} {status} {reason or _REASONS.get(status, 'Whatever')}"]
    lines += [f"{k}: {v}" for k, v in headers]
    if framing == "length":
        lines.append(f"Content-Length: {len(body)}")
        payload = body
    elif framing == "chunked":
        lines.append("Transfer-Encoding: chunked")
        payload = chunked(body)
    else:
        payload = body
    return ("\r\n".join(lines) + "\r\n\r\n").encode("latin-1") + payload


def chunked(body: bytes, *, size: int = 0) -> bytes:
    """``body`` as chunks of ``size`` bytes (0: one chunk) and the last, empty one."""
    size = size or len(body) or 1
    out = b"".join(b"%x\r\n%s\r\n" % (len(body[i:i + size]), body[i:i + size]) for i in range(0, len(body), size))
    return out + b"0\r\n\r\n"


_REASONS = {100: "Continue", 101: "Switching Protocols", 102: "Processing", 103: "Early Hints", 200: "OK",
            202: "Accepted", 307: "Temporary Redirect", 308: "Permanent Redirect", 400: "Bad Request",
            404: "Not Found", 405: "Method Not Allowed"}
_JSON = (("Content-Type", "application/json"),)


def rpc_result(rid: Any, result: Any) -> bytes:
    return json.dumps({"jsonrpc": "2.0", "id": rid, "result": result}, separators=(",", ":")).encode()


def _rpc_error(rid: Any, code: int, message: str) -> bytes:
    return json.dumps({"jsonrpc": "2.0", "id": rid, "error": {"code": code, "message": message}}, separators=(",", ":")).encode()


# --------------------------------------------------------------------------- MCP


_MESSAGE = {"type": "object", "properties": {"message": {"type": "string"}}}
TOOLS = [{"name": name, "inputSchema": _MESSAGE} for name in ("echo", "edge")]
_DISCOVER = {
    "supportedVersions": ["2026-07-28"],
    "capabilities": {"tools": {}},
    "_meta": {"io.modelcontextprotocol/serverInfo": {"name": "wire", "version": "0"}},
}
_INIT = {"protocolVersion": "2025-11-25", "capabilities": {"tools": {}}, "serverInfo": {"name": "wire", "version": "0"}}
Script = Callable[[Wire, Request], bool]


def _edge_call(request: Request) -> bool:
    return request.tool == "edge"


class MCPServer(RawServer):
    """A :class:`RawServer` that speaks enough MCP for ``Client.http``.

    Args:
        script: ``script(wire, request) -> keep serving``, for the requests ``when`` picks;
            :meth:`reply` sends the default answer (a script may call it).
        when: which requests the script answers (default: ``tools/call`` of ``edge``).
        era: ``"both"``; ``"legacy"`` refuses ``server/discover`` (-32601) so an
            ``auto`` client falls back to ``initialize``.
        session_id: the raw ``Mcp-Session-Id`` value ``initialize`` is answered with.
        host, tls: as for :class:`RawServer`.
    """

    def __init__(self, script: Script | None = None, *, when: Callable[[Request], bool] = _edge_call,
                 era: str = "both", session_id: bytes = b"wire-1", host: str = "127.0.0.1",
                 tls: ssl.SSLContext | None = None) -> None:
        self.script = script
        self.when = when
        self.era = era
        self.session_id = session_id
        super().__init__(self._handle, host=host, tls=tls)

    def calls(self, tool: str | None = None) -> list[Request]:
        """The ``tools/call`` requests that reached the server (of ``tool``, when given)."""
        with self._lock:
            return [r for r in self.log if r.method == "tools/call" and (tool is None or r.tool == tool)]

    def _handle(self, wire: Wire, request: Request) -> bool:
        if self.script is not None and self.when(request):
            return self.script(wire, request)
        return self.reply(wire, request)

    def reply(self, wire: Wire, request: Request) -> bool:
        """Send the default answer to ``request``; True (keep the connection)."""
        return wire.send(self.default(request))

    def default(self, request: Request) -> bytes:
        """The default answer's bytes."""
        if request.verb == "GET":
            return answer(405)
        if request.verb == "DELETE":
            return answer(200)
        msg = request.message
        if not isinstance(msg, dict):
            return answer(400, b"not JSON-RPC", (("Content-Type", "text/plain"), ("Connection", "close")))
        if "id" not in msg:
            return answer(202)
        return answer(200, self.result(request), _JSON + self._extra(request))

    def result(self, request: Request) -> bytes:
        """The JSON-RPC answer (bytes) to ``request``."""
        rid, method = request.rid, request.method
        if method == "server/discover":
            if self.era == "legacy":
                return _rpc_error(rid, -32601, "Method not found")
            return rpc_result(rid, _DISCOVER)
        if method == "initialize":
            return rpc_result(rid, _INIT)
        if method == "tools/list":
            return rpc_result(rid, {"tools": TOOLS})
        if method == "tools/call":
            return rpc_result(rid, {"content": [{"type": "text", "text": self.echo_text(request)}]})
        if method == "ping":
            return rpc_result(rid, {})
        return _rpc_error(rid, -32601, "Method not found")

    @staticmethod
    def echo_text(request: Request) -> str:
        """``"<Authorization value>|<message>"``: names the caller and the call."""
        return f"{request.header('Authorization') or '-'}|{request.arguments.get('message', '')}"

    def _extra(self, request: Request) -> tuple[tuple[str, str], ...]:
        if request.method == "initialize":
            return (("Mcp-Session-Id", self.session_id.decode("latin-1")),)
        return ()


# --------------------------------------------------------------------------- TLS


@dataclass(frozen=True)
class TLSFiles:
    """A private CA's certificate and a server certificate (and key) it signed."""

    ca: Path
    cert: Path
    key: Path

    def server_context(self) -> ssl.SSLContext:
        context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        context.load_cert_chain(str(self.cert), str(self.key))
        return context


def private_ca(directory: Path) -> TLSFiles:
    """Make a CA and a server certificate for 127.0.0.1 / ::1 / localhost in ``directory``."""
    from cryptography import x509
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.hazmat.primitives.asymmetric import ec
    from cryptography.x509.oid import NameOID

    now = datetime.datetime.now(datetime.timezone.utc)
    ca_key = ec.generate_private_key(ec.SECP256R1())
    ca_name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "mcpsync wire-test CA")])
    ca = (
        x509.CertificateBuilder().subject_name(ca_name).issuer_name(ca_name).public_key(ca_key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(minutes=5)).not_valid_after(now + datetime.timedelta(days=1))
        .add_extension(x509.BasicConstraints(ca=True, path_length=0), critical=True)
        .add_extension(x509.KeyUsage(digital_signature=True, key_cert_sign=True, crl_sign=True, content_commitment=False,
                                     key_encipherment=False, data_encipherment=False, key_agreement=False,
                                     encipher_only=False, decipher_only=False), critical=True)
        .add_extension(x509.SubjectKeyIdentifier.from_public_key(ca_key.public_key()), critical=False)
        .sign(ca_key, hashes.SHA256())
    )
    key = ec.generate_private_key(ec.SECP256R1())
    names = [x509.DNSName("localhost"), x509.IPAddress(ipaddress.ip_address("127.0.0.1")),
             x509.IPAddress(ipaddress.ip_address("::1"))]
    cert = (
        x509.CertificateBuilder().subject_name(x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "localhost")]))
        .issuer_name(ca_name).public_key(key.public_key()).serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(minutes=5)).not_valid_after(now + datetime.timedelta(days=1))
        .add_extension(x509.SubjectAlternativeName(names), critical=False)
        .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
        .add_extension(x509.ExtendedKeyUsage([x509.oid.ExtendedKeyUsageOID.SERVER_AUTH]), critical=False)
        .add_extension(x509.AuthorityKeyIdentifier.from_issuer_public_key(ca_key.public_key()), critical=False)
        .sign(ca_key, hashes.SHA256())
    )
    files = TLSFiles(directory / "ca.pem", directory / "server.pem", directory / "server-key.pem")
    files.ca.write_bytes(ca.public_bytes(serialization.Encoding.PEM))
    files.cert.write_bytes(cert.public_bytes(serialization.Encoding.PEM))
    files.key.write_bytes(key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                                            serialization.NoEncryption()))
    return files
