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
import time
from pathlib import Path
from typing import Callable

import pytest
from urllib3.exceptions import ClosedPoolError, EmptyPoolError, NewConnectionError, ProtocolError, ReadTimeoutError

from mcpsync.transports._fasthttp import FastPoolManager, http_path
from mcpsync.transports._http_options import HeaderBlock

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "servers"))

from wire_edges import ScriptedServer  # noqa: E402  (reply(sock, n) -> keep serving)

pytest.importorskip("httptools")

Script = Callable[[socket.socket, int], bool]  # (connection, request number) -> keep serving


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


def test_plain_headers_are_formatted_once_per_content_and_every_change_is_sent(serve) -> None:
    server = serve(_json)
    manager = FastPoolManager(maxsize=1, block=True)
    headers = {"Accept": "application/json", "Cookie": "a=1"}
    sent = [dict(headers), dict(headers), {"Accept": "application/json", "Cookie": "a=2"}]
    for h in sent:  # equal dicts (not the same object), then a changed one
        resp = manager.request("POST", server.url, body=b"{}", headers=h, timeout=5)
        resp.read()
        resp.release_conn()
    headers["Cookie"] = "a=3"  # the dict sent first, changed since: its new content goes out
    resp = manager.request("POST", server.url, body=b"{}", headers=headers, timeout=5)
    resp.read()
    resp.release_conn()
    cookies = [r.split(b"\r\nCookie: ", 1)[1].split(b"\r\n", 1)[0] for r in server.requests]
    assert cookies == [b"a=1", b"a=1", b"a=2", b"a=3"]
    with pytest.raises(ValueError):  # after good ones, a bad one is still refused, nothing sent
        manager.request("POST", server.url, body=b"{}", headers={**headers, "Cookie": "a=3\r\nX: 1"}, timeout=5)
    assert len(server.requests) == 4


def test_which_path_a_client_takes(monkeypatch) -> None:
    monkeypatch.delenv("MCPSYNC_HTTP", raising=False)
    assert http_path(None) == "fast"
    assert http_path("http://proxy.example:3128") == "urllib3"
    monkeypatch.setenv("MCPSYNC_HTTP", "urllib3")
    assert http_path(None) == "urllib3"


# --------------------------------------------------------------------------- wire edges (issue 29)
# The Client-level table of wire edges, run on both HTTP paths, is test_wire_edges.py;
# these pin the fast path's own promises on FastPoolManager directly.


def _answer(body: bytes, extra: bytes = b"") -> bytes:
    return b"HTTP/1.1 200 OK\r\nContent-Length: %d\r\n%s\r\n%s" % (len(body), extra, body)


def test_interim_answers_are_read_past_to_the_requests_own(serve) -> None:
    """100, 102 and 103 announce the answer; they are never taken for it, whether they
    come with it or a while before it, and the socket's next answer is the next request's."""
    sent_first = threading.Event()

    def reply(conn: socket.socket, n: int) -> bool:
        if n == 1:  # all in one write
            conn.sendall(b"HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 103 Early Hints\r\nLink: </x>\r\n\r\n" + _answer(b"one"))
        elif n == 2:  # the interim answer, then the real one later
            conn.sendall(b"HTTP/1.1 102 Processing\r\n\r\n")
            sent_first.wait(5)
            conn.sendall(_answer(b"two"))
        else:
            conn.sendall(_answer(b"three"))
        return True

    server = serve(reply)
    manager = FastPoolManager(maxsize=1, block=True)
    for n, want in ((1, b"one"), (2, b"two"), (3, b"three")):
        if n == 2:
            threading.Timer(0.2, sent_first.set).start()
        resp = manager.request("POST", server.url, body=b"{}", timeout=5)
        assert (resp.status, resp.read()) == (200, want)
        assert "link" not in resp.headers  # the interim answer's fields are not the answer's
        resp.release_conn()
    assert server.accepted == 1


def test_a_protocol_switch_is_refused_and_the_socket_not_reused(serve) -> None:
    def reply(conn: socket.socket, n: int) -> bool:
        if n == 1:
            conn.sendall(b"HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n\r\n")
            return True
        return _json(conn, n)

    server = serve(reply)
    manager = FastPoolManager(maxsize=1, block=True)
    with pytest.raises(ProtocolError, match="101"):
        manager.request("GET", server.url, timeout=5)
    assert _json_after(manager, serve) == b'{"n": 1}'  # the pool's place was given back


def _endless_head(conn: socket.socket, n: int) -> bool:
    conn.sendall(b"HTTP/1.1 200 OK\r\n")
    try:
        while True:
            conn.sendall(b"X-Filler: " + b"a" * 1000 + b"\r\n")
    except OSError:
        return False


@pytest.mark.parametrize(
    "head",
    [
        pytest.param(b"HTTP/1.1 200 OK\r\nX-Big: " + b"a" * (1 << 20) + b"\r\nContent-Length: 0\r\n\r\n", id="1MB-line"),
        pytest.param(b"HTTP/1.1 200 OK\r\n" + b"X-F: 1\r\n" * 10_000 + b"Content-Length: 0\r\n\r\n", id="10000-fields"),
        pytest.param(b"HTTP/1.1 200 OK\r\n" + b"X-F: 1\r\n" * 101 + b"Content-Length: 0\r\n\r\n", id="101-fields"),
        pytest.param(b"HTTP/1.1 200 OK\r\nX-Big: " + b"a" * 70_000 + b"\r\nContent-Length: 0\r\n\r\n", id="70KB-field"),
        pytest.param(None, id="endless"),
    ],
)
def test_a_head_over_the_limits_is_refused_without_being_kept(serve, head: bytes | None) -> None:
    import tracemalloc

    def reply(conn: socket.socket, n: int) -> bool:
        if head is None:
            return _endless_head(conn, n)
        try:
            conn.sendall(head)
        except OSError:
            pass
        return False

    manager = FastPoolManager(maxsize=1, block=True)
    tracemalloc.start()
    try:
        with pytest.raises(ProtocolError, match="header field|head"):
            manager.request("GET", serve(reply).url, timeout=10)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert peak < 8 * (1 << 20), peak  # the head limit (256 KiB) and what reading it costs, not the megabyte sent


def test_a_long_head_trickled_in_pieces_is_read_whole(serve) -> None:
    """Past the first few KiB a stretch without body is kept back until a line ends: what
    is fed is the same head, and the answer is whole."""
    fields = b"".join(b"X-F%d: %s\r\n" % (i, b"v" * 300) for i in range(60))  # ~19 KB
    head = b"HTTP/1.1 200 OK\r\n" + fields + b"X-Long: " + b"w" * 40_000 + b"\r\nContent-Length: 4\r\n\r\n"

    def reply(conn: socket.socket, n: int) -> bool:
        conn.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        for i in range(0, len(head), 997):
            conn.sendall(head[i : i + 997])
        conn.sendall(b"body")
        return True

    manager = FastPoolManager(maxsize=1, block=True)
    resp = manager.request("GET", serve(reply).url, timeout=10)
    assert resp.status == 200 and resp.headers["x-long"] == "w" * 40_000 and resp.headers["x-f59"] == "v" * 300
    assert resp.read() == b"body"
    resp.release_conn()


def _trickle(data: bytes, gap: float) -> Script:
    def reply(conn: socket.socket, n: int) -> bool:
        try:
            for i in range(len(data)):
                conn.sendall(data[i : i + 1])
                time.sleep(gap)
        except OSError:
            pass
        return False

    return reply


def test_a_trickled_head_keeps_to_the_deadline(serve) -> None:
    """Each byte in less than the read timeout: only the deadline can end it."""
    import time as _time

    manager = FastPoolManager(maxsize=1, block=True)
    url = serve(_trickle(b"HTTP/1.1 200 OK\r\nX-Slow: " + b"s" * 400 + b"\r\n\r\n", 0.05)).url
    started = _time.monotonic()
    with pytest.raises((ReadTimeoutError, TimeoutError)):  # (both are RequestTimeout to the transports)
        manager.exchange("GET", url, None, None, started + 1.0, 5.0, 5.0)
    assert _time.monotonic() - started < 4.0  # the deadline (1 s) and a generous margin, not 400 × 0.05 s


def test_a_trickled_body_keeps_to_the_deadline(serve) -> None:
    from mcpsync._errors import RequestTimeout
    from mcpsync.transports._http_errors import read_body

    body = b"x" * 400
    head = b"HTTP/1.1 200 OK\r\nContent-Length: %d\r\n\r\n" % len(body)

    def reply(conn: socket.socket, n: int) -> bool:
        conn.sendall(head)
        return _trickle(body, 0.05)(conn, n)

    manager = FastPoolManager(maxsize=1, block=True)
    resp = manager.request("GET", serve(reply).url, timeout=5)
    started = time.monotonic()
    with pytest.raises(RequestTimeout):
        read_body(resp, 1 << 20, "http://test/", started + 1.0)
    assert time.monotonic() - started < 4.0
    assert resp.connection is None  # closed on the way out, never left held


def test_gzip_and_deflate_answers_are_decoded_within_the_limit(serve) -> None:
    import gzip
    import zlib

    from mcpsync._errors import MessageTooLarge
    from mcpsync.transports._http_errors import read_body

    doc = b'{"jsonrpc":"2.0","id":1,"result":{"x":"' + b"y" * 5000 + b'"}}'
    bomb = gzip.compress(b"0" * (20 << 20))  # 20 MiB of zeros in ~20 KB

    def reply(conn: socket.socket, n: int) -> bool:
        if n == 1:
            conn.sendall(_answer(gzip.compress(doc), b"Content-Encoding: gzip\r\n"))
        elif n == 2:
            conn.sendall(_answer(zlib.compress(doc), b"Content-Encoding: deflate\r\n"))
        elif n == 3:
            conn.sendall(_answer(bomb, b"Content-Encoding: gzip\r\n"))
        else:
            conn.sendall(_answer(b"?", b"Content-Encoding: br\r\n"))
        return True

    server = serve(reply)
    manager = FastPoolManager(maxsize=1, block=True)
    for _ in range(2):
        resp = manager.request("POST", server.url, body=b"{}", timeout=5)
        assert read_body(resp, 1 << 20, server.url) == doc
        resp.release_conn()
    resp = manager.request("POST", server.url, body=b"{}", timeout=5)
    with pytest.raises(MessageTooLarge):
        read_body(resp, 1 << 20, server.url)
    with pytest.raises(ProtocolError, match="content coding"):
        manager.request("POST", server.url, body=b"{}", timeout=5)


def test_an_answer_dropped_unreleased_gives_its_socket_back(serve) -> None:
    """A caller interrupted between two bytecodes may drop an answer it holds: the socket
    is closed and its place freed when the answer is collected, at once."""
    server = serve(_json)
    manager = FastPoolManager(maxsize=1, block=True)
    resp = manager.request("GET", server.url, timeout=5)
    del resp  # never read, never released
    resp = manager.request("GET", server.url, timeout=5, pool_timeout=0.5)  # not EmptyPoolError
    assert resp.read() == b'{"n": 2}'
    resp.release_conn()


def test_a_closed_manager_closes_what_comes_back(serve) -> None:
    closed = threading.Event()

    def reply(conn: socket.socket, n: int) -> bool:
        _json(conn, n)
        conn.settimeout(10)
        try:
            if not conn.recv(1):
                closed.set()
        except OSError:
            closed.set()
        return False

    server = serve(reply)
    manager = FastPoolManager(maxsize=1, block=True)
    resp = manager.request("GET", server.url, timeout=5)
    assert resp.read() == b'{"n": 1}'
    manager.clear()  # the client closed while this answer was held
    resp.release_conn()  # not kept in a closed pool: closed
    assert closed.wait(10)
    with pytest.raises(ClosedPoolError):
        manager.request("GET", server.url, timeout=5)


def test_closing_the_manager_wakes_a_request_in_flight_and_closes_its_socket(serve) -> None:
    """A POST whose answer has not come when the client closes ends at once, its socket
    closed: none outlives close()."""
    asked = threading.Event()
    gone = threading.Event()

    def silent(conn: socket.socket, n: int) -> bool:
        asked.set()
        conn.settimeout(30)
        try:
            conn.recv(1)  # never answers; sees the client's socket close
        except OSError:
            pass
        gone.set()
        return False

    manager = FastPoolManager(maxsize=1, block=True)
    url = serve(silent).url
    out: list[BaseException] = []

    def post() -> None:
        try:
            manager.request("POST", url, body=b"{}", timeout=30)
        except BaseException as exc:  # noqa: BLE001 - recorded
            out.append(exc)

    poster = threading.Thread(target=post)
    poster.start()
    assert asked.wait(10)
    manager.clear()
    poster.join(10)
    assert not poster.is_alive() and out and not isinstance(out[0], TimeoutError)
    assert gone.wait(10)


@pytest.mark.parametrize(
    "headers",
    [
        {"X-Api-Key": "abc\r\nX-Injected: 1"},
        {"X-Api-Key": "abc\nX-Injected: 1"},
        {"X-Api-Key\r\nX-Injected": "1"},
        {"X-Nul": "a\x00b"},
        {"X-User": "café €"},
        {"Content-Length": "40"},
        {"Transfer-Encoding": "chunked"},
    ],
    ids=["crlf-value", "lf-value", "crlf-name", "nul", "beyond-latin-1", "content-length", "transfer-encoding"],
)
def test_headers_that_cannot_go_on_the_wire_are_refused_before_anything_is_sent(serve, headers) -> None:
    server = serve(_json)
    manager = FastPoolManager(maxsize=1, block=True)
    with pytest.raises(ValueError) as info:
        manager.request("POST", server.url, body=b"{}", headers={"Authorization": "Bearer s3cret-token", **headers}, timeout=5)
    assert "s3cret" not in str(info.value) and "abc" not in str(info.value) and "caf" not in str(info.value)
    assert server.accepted == 0


def test_a_users_host_replaces_the_urls(serve) -> None:
    server = serve(_json)
    manager = FastPoolManager(maxsize=1, block=True)
    for headers in ({"Host": "example.test"}, {"host": "example.test"}, HeaderBlock({"HOST": "example.test"})):
        resp = manager.request("POST", server.url, body=b"{}", headers=headers, timeout=5)
        resp.read()
        resp.release_conn()
    for request in server.requests:
        head = request.split(b"\r\n\r\n", 1)[0].lower()
        assert head.count(b"\r\nhost:") == 1 and b"host: example.test" in head
        assert head.count(b"\r\ncontent-length:") == 1


def test_a_target_that_is_not_percent_encoded_is_refused(serve) -> None:
    manager = FastPoolManager(maxsize=1, block=True)
    for url in ("http://127.0.0.1:9/mcp/ü", "http://127.0.0.1:9/a b"):
        with pytest.raises(ValueError, match="percent-encoded"):
            manager.request("GET", url, timeout=5)


def test_trailers_and_chunk_extensions_are_bounded_too(serve) -> None:
    def reply(conn: socket.socket, n: int) -> bool:
        if n == 1:
            conn.sendall(b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n3;ext=1;name=\"v\"\r\nabc\r\n0\r\nX-T: 1\r\n\r\n")
            return True
        conn.sendall(b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n3\r\nabc\r\n0\r\n" + b"X-T: 1\r\n" * 500 + b"\r\n")
        return False

    server = serve(reply)
    manager = FastPoolManager(maxsize=1, block=True)
    resp = manager.request("GET", server.url, timeout=5)
    assert resp.read() == b"abc"
    resp.release_conn()
    with pytest.raises(ProtocolError, match="header fields"):  # at the head, or at the body's end
        manager.request("GET", server.url, timeout=5).read()
