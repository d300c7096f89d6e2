"""A deliberately misbehaving HTTP server for the HTTP transport fault tests.

Runs in a thread of the test process on 127.0.0.1 (``FaultyServer().start()``). Each
path misbehaves in one way; ``hits`` counts requests per (method, path) and
``seen_headers`` keeps the headers of the last request per path; ``arrived`` is
released once per request to ``/slowpool``.

Paths of the robustness tests (issue 16):

* POST ``/429``, ``/429date``, ``/503``, ``/503json``: refused with ``Retry-After`` (7 s;
  an HTTP-date 60 s ahead; 3 s; 2 s with a JSON-RPC error body that answers no id).
* GET ``/sse-429`` and ``/sse-gone``: HTTP+SSE streams whose endpoints answer 429, and
  404 (the session is unknown).
* POST ``/echo-auth``: a proxy's 502 error page that echoes the request's headers.
* POST ``/huge`` (chunked) and ``/huge-cl`` (with Content-Length): a 64 MiB JSON answer.
* POST ``/forget``: sessions are forgotten at once: every request (not notification) after
  ``initialize`` gets 404 with the TypeScript SDK's ``-32001 Session not found`` body.
* POST ``/slowpool?s=SECONDS``: answers after SECONDS (at most 10); POST ``/hang``: 10 s.
* POST ``/streams``: a legacy session whose calls answer on SSE streams that stay open
  (pinging) until the client goes; its GET stream stays open too.
"""

from __future__ import annotations

import email.utils
import json
import threading
import time
from collections import Counter
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import parse_qs, urlsplit

_INIT = {"protocolVersion": "2025-11-25", "capabilities": {"tools": {}}, "serverInfo": {"name": "faulty", "version": "0"}}
_DISCOVER = {
    "supportedVersions": ["2026-07-28"],
    "capabilities": {"tools": {}},
    "_meta": {"io.modelcontextprotocol/serverInfo": {"name": "faulty", "version": "0"}},
}
_HOLD = 10.0  # the longest any handler keeps a connection open


def _result(rid: Any, result: Any) -> bytes:
    return json.dumps({"jsonrpc": "2.0", "id": rid, "result": result}).encode()


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    server: "_Server"

    def log_message(self, format: str, *args: Any) -> None:  # noqa: A002 - quiet
        pass

    # -- helpers
    def _body(self) -> dict[str, Any]:
        n = int(self.headers.get("Content-Length") or 0)
        raw = self.rfile.read(n) if n else b""
        try:
            return json.loads(raw) if raw else {}
        except ValueError:
            return {}

    def _send(self, status: int, body: bytes = b"", ctype: str | None = "application/json", **headers: str) -> None:
        self.send_response(status)
        if ctype:
            self.send_header("Content-Type", ctype)
        for k, v in headers.items():
            self.send_header(k.replace("_", "-"), v)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def _start_sse(self, **headers: str) -> None:
        self.send_response(200)
        self.send_header("Content-Type", "text/event-stream")
        self.send_header("Connection", "close")
        for k, v in headers.items():
            self.send_header(k.replace("_", "-"), v)
        self.end_headers()
        self.close_connection = True

    def _event(self, data: bytes, event_id: str | None = None, event: str | None = None) -> None:
        out = b""
        if event_id is not None:
            out += b"id: " + event_id.encode() + b"\n"
        if event is not None:
            out += b"event: " + event.encode() + b"\n"
        out += b"data: " + data + b"\n\n"
        self.wfile.write(out)
        self.wfile.flush()

    def _hold_sse(self) -> None:
        """Keep an SSE stream open with pings until the client goes (at most _HOLD s)."""
        deadline = time.monotonic() + _HOLD
        try:
            while time.monotonic() < deadline:
                self.wfile.write(b": ping\n\n")
                self.wfile.flush()
                time.sleep(0.1)
        except OSError:
            pass

    def _huge(self, with_length: bool) -> None:
        size = 64 * 1024 * 1024
        piece = b" " * (1024 * 1024)
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        if with_length:
            self.send_header("Content-Length", str(size))
        else:
            self.send_header("Transfer-Encoding", "chunked")
        self.end_headers()
        self.close_connection = True
        try:
            for _ in range(size // len(piece)):
                if with_length:
                    self.wfile.write(piece)
                else:
                    self.wfile.write(b"%x\r\n" % len(piece) + piece + b"\r\n")
            if not with_length:
                self.wfile.write(b"0\r\n\r\n")
            self.wfile.flush()
        except OSError:
            pass  # the client stopped reading: what the test wants

    def _note(self) -> None:
        self.server.hits[(self.command, self.path.split("?")[0])] += 1
        self.server.seen_headers[self.path.split("?")[0]] = dict(self.headers)

    # -- verbs
    def do_DELETE(self) -> None:  # noqa: N802
        self._note()
        self._send(200, b"")

    def do_GET(self) -> None:  # noqa: N802
        self._note()
        path = self.path.split("?")[0]
        if path == "/resume":
            last = self.headers.get("Last-Event-ID")
            if last is None:
                self._send(405, b"", None)
                return
            self._start_sse()
            self._event(_result(self.server.pending_id, {"content": [{"type": "text", "text": "resumed"}]}), "2")
            return
        if path == "/getloop":
            # the standalone stream: one event with an id, then a clean close, every time
            self._start_sse()
            n = self.server.hits[("GET", "/getloop")]
            self._event(json.dumps({"jsonrpc": "2.0", "method": "notifications/message", "params": {"level": "info", "data": n}}).encode(), f"g{n}")
            return
        if path == "/dropcall":
            self._send(405, b"", None)
            return
        if path == "/getflaky":
            if self.server.hits[("GET", "/getflaky")] <= 2:
                self._send(500, b"not yet", "text/plain")
                return
            self._start_sse()
            self._event(json.dumps({"jsonrpc": "2.0", "method": "notifications/message", "params": {"level": "info", "data": "up"}}).encode())
            time.sleep(1)
            return
        if path == "/getquiet":
            self._start_sse()  # closes at once, nothing delivered
            return
        if path == "/sse-evil":
            self._start_sse()
            self._event(b"http://evil.example.com/messages", event="endpoint")
            time.sleep(0.5)
            return
        if path == "/sse-html":
            self._send(200, b"<html></html>", "text/html")
            return
        if path == "/sse-quiet":
            self._start_sse()
            time.sleep(3)
            return
        if path in ("/sse-429", "/sse-gone", "/sse-moved"):
            self._start_sse()
            self._event(path.encode() + b"/messages", event="endpoint")
            self._hold_sse()
            return
        if path == "/streams":
            self._start_sse()
            self._hold_sse()
            return
        self._send(404, b"not here", "text/plain")

    def do_POST(self) -> None:  # noqa: N802
        self._note()
        path = self.path.split("?")[0]
        msg = self._body()
        rid = msg.get("id")
        if path in ("/429", "/sse-429/messages"):
            self._send(429, b"slow down", "text/plain", Retry_After="7" if path == "/429" else "4")
        elif path == "/sse-gone/messages":
            self._send(404, b"Could not find session", "text/plain")
        elif path == "/sse-moved/messages":  # the endpoint moved, within the origin
            self._send(307, b"", None, Location="/sse-moved/messages/")
        elif path == "/sse-moved/messages/":
            self._send(202, b"", None)
        elif path == "/429date":
            self._send(429, b"slow down", "text/plain", Retry_After=email.utils.formatdate(time.time() + 60, usegmt=True))
        elif path == "/503":
            self._send(503, b"busy", "text/plain", Retry_After="3")
        elif path == "/503json":
            body = {"jsonrpc": "2.0", "error": {"code": -32603, "message": "Service unavailable"}, "id": None}
            self._send(503, json.dumps(body).encode(), Retry_After="2")
        elif path == "/echo-auth":
            # a proxy error page that repeats what it was sent, credentials included
            first = [(k, v) for k, v in self.headers.items() if k.lower() in ("authorization", "x-custom-key")]
            echoed = "".join(f"{k}: {v}\n" for k, v in first + [kv for kv in self.headers.items() if kv not in first])
            page = f"<html><body><h1>502 Bad Gateway</h1><pre>{echoed}</pre>"
            page += '<p>debug: {"access_token": "at-SECRET-7", "api_key": "ak-SECRET-8"} token=tk-SECRET-9</p>'
            page += "<p>eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiJTRUNSRVQifQ.c2lnbmF0dXJlU0VDUkVU</p></body></html>"
            self._send(502, page.encode(), "text/html")
        elif path in ("/huge", "/huge-cl"):
            self._huge(with_length=path == "/huge-cl")
        elif path == "/forget":
            self.server.forget_posts.append((msg.get("method"), self.headers.get("Mcp-Session-Id")))
            if msg.get("method") == "initialize":
                self.server.sessions += 1
                self._send(200, _result(rid, _INIT), Mcp_Session_Id=f"f-{self.server.sessions}")
            elif self.headers.get("Mcp-Session-Id") is None:
                self._send(400, b"no session", "text/plain")
            elif rid is None:
                self._send(202, b"", None)  # notifications are taken
            else:
                body = {"jsonrpc": "2.0", "error": {"code": -32001, "message": "Session not found"}, "id": None}
                self._send(404, json.dumps(body).encode())
        elif path == "/slowpool":
            self.server.arrived.release()
            seconds = float(parse_qs(urlsplit(self.path).query).get("s", ["1"])[0])
            time.sleep(min(seconds, _HOLD))
            self._send(200, _result(rid, {}))
        elif path == "/hang":
            time.sleep(_HOLD)
            self._send(200, _result(rid, {}))
        elif path == "/streams":
            if msg.get("method") == "initialize":
                self._send(200, _result(rid, _INIT), Mcp_Session_Id="st-1")
            elif rid is None or msg.get("method") is None:
                self._send(202, b"", None)
            elif msg.get("method") == "ping":
                self._start_sse()
                self._event(_result(rid, {}))
            else:
                self._start_sse()
                self._hold_sse()
        elif path == "/garbage":
            self._send(200, b"this is {not json")
        elif path == "/brokenresult":  # a legacy session whose answers break inside their result
            if msg.get("method") == "initialize":
                self._send(200, _result(rid, _INIT), Mcp_Session_Id="br-1")
            elif rid is None or msg.get("method") is None:
                self._send(202, b"", None)
            else:
                self._send(200, b'{"jsonrpc":"2.0","id":%s,"result":{"content":[oops}}' % json.dumps(rid).encode())
        elif path == "/html":
            self._send(200, b"<html>hello</html>", "text/html; charset=utf-8")
        elif path == "/500":
            self._send(500, b"boom", "text/plain")
        elif path == "/empty":
            self._send(200, b"" if rid is not None or msg.get("method") == "a" else b"null")
        elif path == "/drop":
            self._start_sse()
            self._event(json.dumps({"jsonrpc": "2.0", "method": "notifications/message", "params": {"level": "info", "data": "x"}}).encode())
            # and the connection closes without the response
        elif path == "/resume":
            if msg.get("method") == "initialize":
                self._send(200, _result(rid, {"protocolVersion": "2025-11-25", "capabilities": {}, "serverInfo": {"name": "faulty", "version": "0"}}), Mcp_Session_Id="s-1")
            elif rid is None:
                self._send(202, b"", None)
            else:
                self.server.pending_id = rid
                self._start_sse()
                self._event(b"", "1")  # priming event, no data
                self._event(json.dumps({"jsonrpc": "2.0", "method": "notifications/message", "params": {"level": "info", "data": "before"}}).encode(), "1b")
        elif path == "/listen":
            # 1st listen: acknowledged, then the stream breaks; 2nd: an update, then held open
            n = self.server.hits[("POST", "/listen")]
            self.server.listen_ids.append(rid)
            self._start_sse()
            sub = {"_meta": {"io.modelcontextprotocol/subscriptionId": rid}}
            self._event(json.dumps({"jsonrpc": "2.0", "method": "notifications/subscriptions/acknowledged", "params": {**sub, "notifications": {}}}).encode())
            if n >= 2:
                self._event(json.dumps({"jsonrpc": "2.0", "method": "notifications/resources/updated", "params": {**sub, "uri": "x://1"}}).encode())
                time.sleep(2)
        elif path in ("/tools", "/tools-changing"):
            schema_ok = {"type": "object", "properties": {"r": {"type": "string", "x-mcp-header": "R"}}}
            schema_bad = {"type": "object", "properties": {"f": {"type": "number", "x-mcp-header": "F"}}}
            tools = [
                {"name": "good", "inputSchema": schema_ok},
                {"name": "bad", "inputSchema": schema_bad},
                {"name": "plain", "inputSchema": {"type": "object"}},
            ]
            if path == "/tools-changing" and msg.get("method") == "tools/list":
                # odd listings annotate "good"; even ones (a client's relisting) show no annotation
                self.server.hits[("LIST", path)] += 1
                if self.server.hits[("LIST", path)] % 2 == 0:
                    tools = [{"name": "good", "inputSchema": {"type": "object", "properties": {"r": {"type": "string"}}}},
                             {"name": "plain", "inputSchema": {"type": "object"}}]
            if msg.get("method") == "tools/list":
                self._send(200, _result(rid, {"tools": tools}))
            elif msg.get("method") == "server/discover":
                self._send(200, _result(rid, _DISCOVER))
            else:
                self._send(200, _result(rid, {"content": [{"type": "text", "text": self.headers.get("Mcp-Param-R", "-")}]}))
        elif path == "/dropcall":
            if msg.get("method") == "initialize":
                self._send(200, _result(rid, {"protocolVersion": "2025-11-25", "capabilities": {"tools": {}}, "serverInfo": {"name": "faulty", "version": "0"}}), Mcp_Session_Id="s-3")
            elif rid is None:
                self._send(202, b"", None)
            elif msg.get("method") == "tools/call":
                self._start_sse()  # and hang up without an answer
            else:
                self._send(200, _result(rid, {}))
        elif path in ("/getloop", "/getquiet", "/getflaky"):
            if msg.get("method") == "initialize":
                self._send(200, _result(rid, {"protocolVersion": "2025-11-25", "capabilities": {}, "serverInfo": {"name": "faulty", "version": "0"}}), Mcp_Session_Id="s-2")
            else:
                self._send(202, b"", None)
        elif path == "/auth":
            if self.headers.get("Authorization") != "Bearer good":
                self._send(401, b'{"error":"invalid_token"}', WWW_Authenticate='Bearer error="invalid_token"')
            else:
                self._send(200, _result(rid, {"ok": True}))
        elif path == "/forbidden":
            self._send(403, b"no", "text/plain")
        elif path == "/slow":
            time.sleep(2)
            self._send(200, _result(rid, {}))
        elif path == "/hang-sse":
            self._start_sse()
            time.sleep(3)
        else:
            self._send(404, b"not found", "text/plain")


class _Server(ThreadingHTTPServer):
    daemon_threads = True
    hits: Counter[tuple[str, str]]
    seen_headers: dict[str, dict[str, str]]
    pending_id: Any = None
    listen_ids: list[Any]
    sessions: int = 0
    arrived: threading.Semaphore

    def handle_error(self, request: Any, client_address: Any) -> None:
        pass  # clients that hang up early are part of the tests


class FaultyServer:
    """Start with :meth:`start`, stop with :meth:`stop`; ``url(path)`` builds URLs."""

    def __init__(self) -> None:
        self.httpd = _Server(("127.0.0.1", 0), _Handler)
        self.httpd.hits = Counter()
        self.httpd.seen_headers = {}
        self.httpd.listen_ids = []
        self.httpd.forget_posts = []  # (method, Mcp-Session-Id) of every POST to /forget
        self.httpd.arrived = threading.Semaphore(0)
        self.port = self.httpd.server_address[1]
        self._thread = threading.Thread(target=self.httpd.serve_forever, kwargs={"poll_interval": 0.1}, daemon=True)

    def start(self) -> "FaultyServer":
        self._thread.start()
        return self

    def stop(self) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()

    def url(self, path: str) -> str:
        return f"http://127.0.0.1:{self.port}{path}"

    @property
    def hits(self) -> Counter[tuple[str, str]]:
        return self.httpd.hits

    @property
    def seen_headers(self) -> dict[str, dict[str, str]]:
        return self.httpd.seen_headers

    @property
    def arrived(self) -> threading.Semaphore:
        return self.httpd.arrived
