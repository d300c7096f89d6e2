"""Connect errors are fast and honest.

- A wrong URL on a real HTTP server that answers 404 with an HTML page (to the POST and to
  the HTTP+SSE fallback's GET alike): one attempt, a :class:`ProtocolError` with ``status``
  404 and a message that says what to fix; never retried, never counted by the breaker.
- Other 4xx answers likewise; 401/403/408/429 keep their own handling.
- A refused port or an unknown host on a server never reached before: a ConnectError
  within 1 s (the reconnect schedule is for servers that were reached).
"""

from __future__ import annotations

import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Iterator

import pytest

from mcpsync import BreakerState, Client, ConnectError, ProtocolError, Timeouts
from tests.servers.http_support import free_port

pytestmark = pytest.mark.timeout(60)


class _Pages(BaseHTTPRequestHandler):
    """Answers every request with the status in its path's first segment (``/404/...``,
    default 404) and an HTML page, counting what it got."""

    seen: list[str] = []

    def _answer(self) -> None:
        length = int(self.headers.get("Content-Length") or 0)
        if length:
            self.rfile.read(length)
        first = self.path.strip("/").split("/")[0]
        status = int(first) if first.isdigit() else 404
        body = f"<html><body><h1>{status}</h1><p>nginx</p></body></html>".encode()
        self.seen.append(f"{self.command} {self.path}")
        self.send_response(status)
        self.send_header("Content-Type", "text/html")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    do_GET = do_POST = do_DELETE = _answer

    def log_message(self, *args: object) -> None:
        pass


@pytest.fixture(scope="module")
def pages() -> Iterator[str]:
    server = ThreadingHTTPServer(("127.0.0.1", 0), _Pages)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()


@pytest.mark.parametrize("path", ["/wrong", "/mcp"])
def test_a_404_page_is_a_wrong_url_said_at_once(pages: str, path: str):
    _Pages.seen.clear()
    client = Client.http(pages + path, name="site")
    began = time.monotonic()
    try:
        with pytest.raises(ProtocolError) as info:
            client.list_tools(timeout=30)
        took = time.monotonic() - began
        err = info.value
        assert err.status == 404
        assert str(err).startswith(f"HTTP 404 at {pages}{path}: not an MCP endpoint"), str(err)
        if path == "/wrong":
            assert "MCP servers usually serve /mcp" in str(err)
        assert took < 2.0, took
        assert len(err.retry_history) == 1  # one attempt
        assert _Pages.seen == [f"POST {path}", f"GET {path}"]  # Streamable HTTP, then the HTTP+SSE fallback
        assert client.breaker_state is BreakerState.CLOSED and client.diagnostics().breaker_transitions == ()
        for _ in range(6):  # again and again: still one attempt each, and the breaker never opens
            with pytest.raises(ProtocolError):
                client.list_tools(timeout=30)
        assert client.breaker_state is BreakerState.CLOSED
    finally:
        client.close()


@pytest.mark.parametrize("status", [400, 405, 410, 415])
def test_other_client_errors_are_not_retried_either(pages: str, status: int):
    client = Client.http(f"{pages}/{status}/mcp", name="site", sse_fallback=False)
    try:
        with pytest.raises(ProtocolError) as info:
            client.list_tools(timeout=30)
        assert info.value.status == status and len(info.value.retry_history) == 1
        assert f"HTTP {status} at " in str(info.value)
    finally:
        client.close()


def test_the_sse_transport_says_the_same(pages: str):
    client = Client.sse(pages + "/sse", name="site")
    try:
        with pytest.raises(ProtocolError) as info:
            client.list_tools(timeout=30)
        assert info.value.status == 404 and len(info.value.retry_history) == 1
    finally:
        client.close()


@pytest.mark.parametrize("url", ["http://127.0.0.1:{port}/mcp", "http://no-such-host.invalid/mcp"],
                         ids=["refused", "unknown-host"])
def test_a_server_never_reached_fails_within_a_second(url: str):
    client = Client.http(url.format(port=free_port()), name="nowhere", timeouts=Timeouts(connect=5))
    try:
        began = time.monotonic()
        with pytest.raises(ConnectError) as info:
            client.list_tools(timeout=30)
        assert time.monotonic() - began < 1.0
        assert "could not be reached" in str(info.value) and info.value.unreached is True
        began = time.monotonic()  # and the next call tries afresh, as fast
        with pytest.raises(ConnectError):
            client.call_tool("echo", {"message": "x"}, timeout=30)
        assert time.monotonic() - began < 1.0
    finally:
        client.close()
