"""The fast HTTP path (``transports/_fasthttp.py``) against a scripted HTTP server on a
real socket: keep-alive reuse, every body framing, a socket the server dropped while idle,
malformed answers, refused connections, a full pool, and a reader woken by ``shutdown``.

The HTTP transports' own suites run on this path and on urllib3's (the ``http_path``
fixture); these tests pin what the transports take for granted of it.
"""

from __future__ import annotations

import socket
import sys
import threading
from pathlib import Path

import pytest
from urllib3.exceptions import EmptyPoolError, NewConnectionError, ProtocolError

from mcpsync.transports._fasthttp import FastPoolManager, http_path
from mcpsync.transports._http_options import HeaderBlock

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "servers"))

from wire_edges import ScriptedServer  # noqa: E402  (reply(sock, n) -> keep serving)

pytest.importorskip("httptools")


@pytest.fixture
def serve():
    made: list[ScriptedServer] = []

    def start(reply) -> ScriptedServer:
        server = ScriptedServer(reply)
        made.append(server)
        return server

    yield start
    for server in made:
        server.close()


def _json(conn: socket.socket, n: int) -> bool:
    body = b'{"n": %d}' % n
    conn.sendall(b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n%s" % (len(body), body))
    return True


def test_keep_alive_reuses_one_socket_and_sends_the_body(serve) -> None:
    server = serve(_json)
    manager = FastPoolManager(maxsize=2, block=True)
    for n in (1, 2, 3):
        resp = manager.request("POST", server.url, body=b'{"x": 1}', headers={"Content-Type": "application/json"}, timeout=5)
        assert resp.status == 200
        assert resp.headers["content-type"] == "application/json"
        assert resp.headers.get("Content-Type") == "application/json"
        assert resp.read() == b'{"n": %d}' % n
        resp.release_conn()
    assert server.accepted == 1
    first = server.requests[0]
    assert first.startswith(b"POST /mcp HTTP/1.1\r\nHost: 127.0.0.1:")
    assert b"Content-Length: 8\r\n" in first and first.endswith(b'{"x": 1}')


def test_chunked_and_close_delimited_bodies(serve) -> None:
    def reply(conn: socket.socket, n: int) -> bool:
        if n == 1:
            conn.sendall(b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n3\r\nabc\r\n2\r\nde\r\n0\r\n\r\n")
            return True
        conn.sendall(b"HTTP/1.1 200 OK\r\nConnection: close\r\n\r\nuntil the end")
        return False

    server = serve(reply)
    manager = FastPoolManager(maxsize=1, block=True)
    resp = manager.request("GET", server.url, timeout=5)
    pieces = []
    while piece := resp.read1(2):
        pieces.append(piece)
    assert b"".join(pieces) == b"abcde" and all(len(p) <= 2 for p in pieces)
    resp.release_conn()
    resp = manager.request("GET", server.url, timeout=5)
    assert resp.read() == b"until the end"
    resp.release_conn()  # not kept: the server said close
    assert _json_after(manager, serve) == b'{"n": 1}'


def _json_after(manager: FastPoolManager, serve) -> bytes:
    server = serve(_json)
    resp = manager.request("GET", server.url, timeout=5)
    try:
        return resp.read()
    finally:
        resp.release_conn()


def test_a_socket_the_server_dropped_while_idle_is_not_reused(serve) -> None:
    closed = threading.Event()

    def once(conn: socket.socket, n: int) -> bool:
        _json(conn, n)
        conn.close()  # after every answer, without saying so
        closed.set()
        return False

    server = serve(once)
    manager = FastPoolManager(maxsize=1, block=True)
    for n in (1, 2):
        resp = manager.request("GET", server.url, timeout=5)
        assert resp.read() == b'{"n": %d}' % n
        resp.release_conn()
        assert closed.wait(10)
        closed.clear()
    assert server.accepted == 2


def test_an_answer_cut_short_is_a_protocol_error(serve) -> None:
    def short(conn: socket.socket, n: int) -> bool:
        conn.sendall(b"HTTP/1.1 200 OK\r\nContent-Length: 10\r\n\r\nabc")
        return False

    manager = FastPoolManager(maxsize=1, block=True)
    resp = manager.request("GET", serve(short).url, timeout=5)
    with pytest.raises(ProtocolError):
        resp.read()


def test_a_malformed_answer_is_a_protocol_error(serve) -> None:
    def garbage(conn: socket.socket, n: int) -> bool:
        conn.sendall(b"NOT HTTP AT ALL\r\n\r\n")
        return False

    manager = FastPoolManager(maxsize=1, block=True)
    with pytest.raises(ProtocolError):
        manager.request("GET", serve(garbage).url, timeout=5)


def test_a_refused_connection_is_a_new_connection_error() -> None:
    sock = socket.create_server(("127.0.0.1", 0))
    port = sock.getsockname()[1]
    sock.close()
    manager = FastPoolManager(maxsize=1, block=True)
    with pytest.raises(NewConnectionError):
        manager.request("GET", f"http://127.0.0.1:{port}/", timeout=5)
    # the failed connect gave its place back: the pool is not stuck at its size
    with pytest.raises(NewConnectionError):
        manager.request("GET", f"http://127.0.0.1:{port}/", timeout=5, pool_timeout=1)


def test_a_full_blocking_pool_waits_then_gives_up(serve) -> None:
    server = serve(_json)
    manager = FastPoolManager(maxsize=1, block=True)
    held = manager.request("GET", server.url, timeout=5)
    with pytest.raises(EmptyPoolError):
        manager.request("GET", server.url, timeout=5, pool_timeout=0.2)
    held.read()
    held.release_conn()
    resp = manager.request("GET", server.url, timeout=5, pool_timeout=0.2)
    assert resp.read() == b'{"n": 2}'
    resp.release_conn()


def test_shutdown_wakes_a_reader_blocked_on_a_stream(serve) -> None:
    started = threading.Event()

    def stream(conn: socket.socket, n: int) -> bool:
        conn.sendall(b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nTransfer-Encoding: chunked\r\n\r\n")
        started.set()
        conn.recv(1)  # hold the stream open until the client goes
        return False

    manager = FastPoolManager(maxsize=1, block=False)
    resp = manager.request("GET", serve(stream).url, timeout=30)
    assert started.wait(10)
    out: list[object] = []
    reader = threading.Thread(target=lambda: out.append(_read_or_error(resp)))
    reader.start()
    resp.shutdown()
    reader.join(10)
    assert not reader.is_alive() and out


def _read_or_error(resp) -> object:
    try:
        return resp.read1()
    except (OSError, ProtocolError) as exc:
        return exc


def test_bytes_after_a_whole_answer_spoil_the_socket(serve) -> None:
    """A second answer nobody asked for (one reused parser would read it as the next
    request's) leaves the first answer standing and the socket closed, never reused."""

    def extra(conn: socket.socket, n: int) -> bool:
        body = b'{"n": %d}' % n
        answer = b"HTTP/1.1 200 OK\r\nContent-Length: %d\r\n\r\n%s" % (len(body), body)
        conn.sendall(answer + (b"HTTP/1.1 200 OK\r\nContent-Length: 5\r\n\r\nstale" if n == 1 else b""))
        return True

    server = serve(extra)
    manager = FastPoolManager(maxsize=1, block=True)
    for n in (1, 2):
        resp = manager.request("GET", server.url, timeout=5)
        assert resp.status == 200 and resp.read() == b'{"n": %d}' % n
        resp.release_conn()
    assert server.accepted == 2  # the first socket was not given the second request


def test_repeated_headers_are_joined_and_names_fold_case(serve) -> None:
    def reply(conn: socket.socket, n: int) -> bool:
        conn.sendall(
            b"HTTP/1.1 401 Unauthorized\r\nWWW-Authenticate: Bearer realm=\"a\"\r\n"
            b"www-authenticate: DPoP algs=\"ES256\"\r\nX-Cafe: caf\xe9\r\nContent-Length: 0\r\n\r\n"
        )
        return True

    manager = FastPoolManager(maxsize=1, block=True)
    resp = manager.request("GET", serve(reply).url, timeout=5)
    assert resp.status == 401
    assert resp.headers.get("WWW-Authenticate") == 'Bearer realm="a", DPoP algs="ES256"'
    assert resp.headers["x-cafe"] == "caf\xe9"  # ISO-8859-1, as http.client reads it
    assert resp.read() == b""
    resp.release_conn()


def test_a_header_block_is_sent_as_given_and_stays_read_only(serve) -> None:
    server = serve(_json)
    manager = FastPoolManager(maxsize=1, block=True)
    block = HeaderBlock({"Accept": "application/json", "Mcp-Session-Id": "s1"})
    for _ in range(2):
        resp = manager.request("POST", server.url, body=b"{}", headers=block, timeout=5)
        resp.read()
        resp.release_conn()
    assert all(b"\r\nAccept: application/json\r\nMcp-Session-Id: s1\r\n" in r for r in server.requests)
    with pytest.raises(TypeError):
        block["Authorization"] = "Bearer x"
    assert dict(block, Authorization="Bearer x")["Authorization"] == "Bearer x"


def test_which_path_a_client_takes(monkeypatch) -> None:
    monkeypatch.delenv("MCPSYNC_HTTP", raising=False)
    assert http_path(None) == "fast"
    assert http_path("http://proxy.example:3128") == "urllib3"
    monkeypatch.setenv("MCPSYNC_HTTP", "urllib3")
    assert http_path(None) == "urllib3"
