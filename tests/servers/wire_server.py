"""A raw-socket MCP server (legacy era, JSON answers) run in the test's process on
127.0.0.1, that records what each TCP connection carried. Not a test module.

It speaks just enough of 2025-11-25 for ``Client.http(url, mode="legacy")``:
``initialize`` (with an ``Mcp-Session-Id``), notifications (202), ``tools/list`` (one
tool, ``echo``), ``tools/call`` (answers the ``Authorization`` and ``Cookie`` headers the
request carried), 405 for the GET stream. Each answer to ``initialize`` may set cookies
(``set_cookies``). Everything each connection carried is in :attr:`WireServer.seen`.

Example:
    with WireServer(set_cookies=["SRV=one; Path=/"]) as server:
        client = Client.http(server.url, mode="legacy")
        ...
        server.seen  # {connection number: [headers of each request]}
"""

from __future__ import annotations

import json
import socket
import ssl
import threading
from typing import Any, Sequence

__all__ = ["WireServer"]


class WireServer:
    """Serves each accepted connection on its own daemon thread (keep-alive).

    Args:
        set_cookies: ``Set-Cookie`` values sent with the answer to ``initialize``, one
            header line each.
        tls: a server-side context: the server speaks HTTPS.
    """

    def __init__(self, *, set_cookies: Sequence[str] = (), tls: ssl.SSLContext | None = None) -> None:
        self.set_cookies = list(set_cookies)
        self.tls = tls
        self.sock = socket.create_server(("127.0.0.1", 0))
        self.sock.settimeout(0.2)
        self.port = self.sock.getsockname()[1]
        self.lock = threading.Lock()
        #: connection number → the headers (lower-case names) of each request it carried
        self.seen: dict[int, list[dict[str, str]]] = {}
        self._conns: list[socket.socket] = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._accept, name=f"wire-{self.port}", daemon=True)
        self._thread.start()

    @property
    def url(self) -> str:
        return f"{'https' if self.tls else 'http'}://127.0.0.1:{self.port}/mcp"

    def values(self, header: str) -> dict[int, set[str]]:
        """Per connection, the values of ``header`` its requests carried ("" when absent)."""
        with self.lock:
            return {n: {h.get(header, "") for h in reqs} for n, reqs in self.seen.items()}

    def _accept(self) -> None:
        n = 0
        while not self._stop.is_set():
            try:
                conn, _ = self.sock.accept()
            except socket.timeout:
                continue
            except OSError:
                return
            n += 1
            with self.lock:
                self.seen[n] = []
                self._conns.append(conn)
            threading.Thread(target=self._serve, args=(conn, n), daemon=True).start()

    def _serve(self, conn: socket.socket, n: int) -> None:
        conn.settimeout(30)
        try:
            if self.tls is not None:
                conn = self.tls.wrap_socket(conn, server_side=True, do_handshake_on_connect=False)
                try:
                    conn.do_handshake()
                except ssl.SSLError:
                    # the alert is on its way: close a moment later, as servers that linger do,
                    # so that the client's request (already sent, in TLS 1.3) does not turn the
                    # close into a reset that could overtake the alert
                    self._stop.wait(0.5)
                    return
            buf = b""
            while not self._stop.is_set():
                while b"\r\n\r\n" not in buf:
                    data = conn.recv(65536)
                    if not data:
                        return
                    buf += data
                head, _, buf = buf.partition(b"\r\n\r\n")
                lines = head.decode("latin-1").split("\r\n")
                method = lines[0].split(" ", 1)[0]
                headers: dict[str, str] = {}
                for line in lines[1:]:
                    name, _, value = line.partition(":")
                    headers[name.strip().lower()] = value.strip()
                length = int(headers.get("content-length", "0"))
                while len(buf) < length:
                    data = conn.recv(65536)
                    if not data:
                        return
                    buf += data
                body, buf = buf[:length], buf[length:]
                with self.lock:
                    self.seen[n].append(headers)
                conn.sendall(self._answer(method, headers, body))
        except (OSError, ValueError):
            return
        finally:
            conn.close()

    def _answer(self, method: str, headers: dict[str, str], body: bytes) -> bytes:
        if method != "POST":
            return b"HTTP/1.1 405 Method Not Allowed\r\nContent-Length: 0\r\n\r\n"
        msg: dict[str, Any] = json.loads(body)
        extra: list[str] = []
        if "id" not in msg:
            return b"HTTP/1.1 202 Accepted\r\nContent-Length: 0\r\n\r\n"
        name = msg.get("method")
        if name == "initialize":
            result: Any = {"protocolVersion": msg["params"]["protocolVersion"], "capabilities": {"tools": {}},
                           "serverInfo": {"name": "wire", "version": "1"}}
            extra = ["Mcp-Session-Id: s-1"] + [f"Set-Cookie: {c}" for c in self.set_cookies]
        elif name == "tools/list":
            result = {"tools": [{"name": "echo", "inputSchema": {"type": "object"}}]}
        elif name == "tools/call":
            seen = {"authorization": headers.get("authorization", ""), "cookie": headers.get("cookie", "")}
            result = {"content": [{"type": "text", "text": json.dumps(seen)}], "isError": False}
        else:
            result = {}
        data = json.dumps({"jsonrpc": "2.0", "id": msg["id"], "result": result}).encode()
        head = ["HTTP/1.1 200 OK", "Content-Type: application/json", f"Content-Length: {len(data)}", *extra]
        return ("\r\n".join(head) + "\r\n\r\n").encode("latin-1") + data

    def close(self) -> None:
        self._stop.set()
        self.sock.close()
        with self.lock:
            conns, self._conns = self._conns, []
        for conn in conns:
            try:
                conn.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass
        self._thread.join(5)

    def __enter__(self) -> "WireServer":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
