"""HTTP servers that misbehave: every failure is a typed error, nothing hangs."""

from __future__ import annotations

import json
import os
import socket
import sys
import threading
import time
from pathlib import Path
from typing import Any, Iterator

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "servers"))

import http_support as hs  # noqa: E402
from http_faulty import FaultyServer  # noqa: E402

from mcpsync._errors import (  # noqa: E402
    AuthError,
    ConnectError,
    ConnectionClosed,
    NetworkError,
    PermissionDenied,
    ProtocolError,
    RequestTimeout,
)
from mcpsync.transports.sse import SSETransport  # noqa: E402
from mcpsync.transports.streamable_http import StreamableHTTPTransport, forget_url  # noqa: E402
from tests.helpers import run_in_child, wait_until  # noqa: E402

pytestmark = pytest.mark.usefixtures("http_path")  # both HTTP paths: fast and urllib3

REQ = json.dumps({"jsonrpc": "2.0", "id": 1, "method": "tools/list"}).encode()
NOTE = json.dumps({"jsonrpc": "2.0", "method": "notifications/initialized"}).encode()


@pytest.fixture(scope="module")
def faulty() -> Iterator[FaultyServer]:
    server = FaultyServer().start()
    yield server
    server.stop()


@pytest.fixture
def transport(faulty: FaultyServer) -> Iterator[Any]:
    made: list[StreamableHTTPTransport] = []

    def make(path: str, **kw: Any) -> StreamableHTTPTransport:
        url = faulty.url(path)
        forget_url(url)
        kw.setdefault("sse_fallback", False)
        t = StreamableHTTPTransport(url, **kw)
        t.connect(5)
        made.append(t)
        return t

    yield make
    for t in made:
        t.close()


def test_garbage_json_is_a_protocol_error(transport: Any) -> None:
    with pytest.raises(ProtocolError, match="malformed JSON"):
        transport("/garbage").send(REQ, 5)


def test_an_answer_broken_inside_its_result_fails_its_call_at_once(faulty: FaultyServer) -> None:
    # it starts and ends like the answer to the request just sent, so it is queued
    # without a look inside; the dispatcher cannot decode it and fails that call with
    # a ProtocolError instead of leaving it to time out
    from mcpsync import Client

    url = faulty.url("/brokenresult")
    forget_url(url)
    with Client(lambda: StreamableHTTPTransport(url, sse_fallback=False), mode="legacy") as c:
        with pytest.raises(ProtocolError, match="malformed JSON") as info:
            c.call_tool("anything", {}, timeout=60)
        assert not isinstance(info.value, RequestTimeout)


def test_wrong_content_type_is_a_protocol_error(transport: Any) -> None:
    with pytest.raises(ProtocolError, match="text/html"):
        transport("/html").send(REQ, 5)


def test_http_500_is_a_network_error_with_its_status(transport: Any) -> None:
    with pytest.raises(NetworkError) as info:
        transport("/500").send(REQ, 5)
    assert info.value.status == 500
    assert "boom" in str(info.value)


def test_empty_answer_to_a_request_is_a_protocol_error(transport: Any) -> None:
    t = transport("/empty")
    with pytest.raises(ProtocolError, match="no response"):
        t.send(REQ, 5)
    t.send(NOTE, 5)  # a notification may get an empty / null body


def test_404_without_a_session_is_not_a_hang(transport: Any) -> None:
    with pytest.raises(ProtocolError) as info:
        transport("/nowhere").send(REQ, 5)
    assert info.value.status == 404


def test_connection_refused_is_a_connect_error() -> None:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    t = StreamableHTTPTransport(f"http://127.0.0.1:{port}/mcp", connect_timeout=2)
    t.connect(2)
    try:
        with pytest.raises(ConnectError):
            t.send(REQ, 5)
    finally:
        t.close()


def test_slow_server_read_timeout(transport: Any) -> None:
    with pytest.raises(RequestTimeout):
        transport("/slow").send(REQ, 0.3)


def test_dropped_stream_modern_reissues_then_fails(transport: Any, faulty: FaultyServer) -> None:
    t = transport("/drop")
    c = hs.RawClient(t)
    try:
        before = faulty.hits[("POST", "/drop")]
        with pytest.raises(NetworkError):
            c.modern("tools/list", timeout=10)
        assert faulty.hits[("POST", "/drop")] - before == 3  # first try + two re-issues
        assert t.alive()
    finally:
        c.close()


def test_dropped_stream_legacy_without_event_ids_fails_typed(transport: Any) -> None:
    t = transport("/drop")
    c = hs.RawClient(t)
    try:
        with pytest.raises(NetworkError):
            c.request("tools/list", timeout=10)
    finally:
        c.close()


def test_dropped_stream_without_a_failure_handler_answers_with_an_error(transport: Any) -> None:
    t = transport("/drop")
    t.send(REQ, 5)
    got = []
    for _ in range(50):
        data = t.receive(0.2)
        if data is not None:
            got.append(json.loads(data))
            if "id" in got[-1]:
                break
    answer = got[-1]
    assert answer["id"] == 1
    assert answer["error"]["data"]["mcpsync/transportError"] == "ConnectionClosed"


def test_legacy_stream_resumed_with_last_event_id(transport: Any, faulty: FaultyServer) -> None:
    t = transport("/resume")
    c = hs.RawClient(t)
    try:
        c.initialize()
        answer = c.request("tools/call", {"name": "x", "arguments": {}}, timeout=10)
        assert hs.text_of(answer) == "resumed"
        assert faulty.seen_headers["/resume"].get("Last-Event-ID") == "1b"
        assert [n["params"]["data"] for n in c.notifications if n["method"] == "notifications/message"] == ["before"]
    finally:
        c.close()


def test_auth_hook_refreshes_on_401_and_retries_once(transport: Any) -> None:
    class Auth:
        token = "bad"
        told: list[int] = []

        def headers(self, url: str, method: str) -> dict[str, str]:
            return {"Authorization": f"Bearer {self.token}"}

        def on_response(self, url: str, method: str, status: int, headers: Any) -> bool:
            self.told.append(status)
            assert "invalid_token" in headers.get("WWW-Authenticate", "")
            self.token = "good"
            return True

    auth = Auth()
    t = transport("/auth", auth=auth)
    t.send(REQ, 5)
    assert json.loads(t.receive(5))["result"] == {"ok": True}
    assert auth.told == [401]


def test_final_401_is_an_auth_error(transport: Any) -> None:
    class NoLuck:
        def headers(self, url: str, method: str) -> dict[str, str]:
            return {"Authorization": "Bearer bad"}

        def on_response(self, url: str, method: str, status: int, headers: Any) -> bool:
            return True  # keeps asking: retried once only

    with pytest.raises(AuthError):
        transport("/auth", auth=NoLuck()).send(REQ, 5)


def test_403_is_permission_denied(transport: Any) -> None:
    with pytest.raises(PermissionDenied):
        transport("/forbidden").send(REQ, 5)


def test_close_unblocks_a_silent_stream(transport: Any) -> None:
    t = transport("/hang-sse")
    t.send(REQ, 5)
    closer = threading.Thread(target=t.close)
    closer.start()
    closer.join(5)
    assert not closer.is_alive()
    assert not t.alive()
    with pytest.raises(ConnectionClosed):
        t.receive(0.1)
    with pytest.raises(ConnectionClosed):
        t.send(REQ, 1)


def test_batches_are_never_sent(transport: Any) -> None:
    with pytest.raises(ProtocolError, match="batch"):
        transport("/garbage").send(b"[" + REQ + b"]", 5)


def test_sse_endpoint_on_another_origin_is_refused(faulty: FaultyServer) -> None:
    t = SSETransport(faulty.url("/sse-evil"))
    try:
        with pytest.raises(ConnectError, match="another origin"):
            t.connect(5)
    finally:
        t.close()


def test_sse_endpoint_redirected_within_its_origin_is_followed_and_kept(faulty: FaultyServer) -> None:
    t = SSETransport(faulty.url("/sse-moved"))
    try:
        t.connect(5)
        old, new = ("POST", "/sse-moved/messages"), ("POST", "/sse-moved/messages/")
        before = faulty.hits[old], faulty.hits[new]  # the server is shared by the module's tests
        ping = b'{"jsonrpc":"2.0","method":"notifications/initialized"}'
        t.send(ping, 5)
        assert t.endpoint == faulty.url("/sse-moved/messages/") and t.url == faulty.url("/sse-moved")
        t.send(ping, 5)  # straight to the new endpoint: one redirect in all
        assert (faulty.hits[old] - before[0], faulty.hits[new] - before[1]) == (1, 2)
    finally:
        t.close()


def test_sse_wrong_content_type_is_a_connect_error(faulty: FaultyServer) -> None:
    t = SSETransport(faulty.url("/sse-html"))
    try:
        with pytest.raises(ConnectError, match="text/html"):
            t.connect(5)
    finally:
        t.close()


def test_sse_without_endpoint_event_times_out_as_connect_error(faulty: FaultyServer) -> None:
    t = SSETransport(faulty.url("/sse-quiet"))
    try:
        with pytest.raises(ConnectError):
            t.connect(0.5)
    finally:
        t.close()


def test_get_stream_reconnects_with_last_event_id(transport: Any, faulty: FaultyServer) -> None:
    t = transport("/getloop")
    c = hs.RawClient(t)
    before = faulty.hits[("GET", "/getloop")]  # the server is shared by the module's tests
    try:
        c.initialize()
        c.wait_notification("notifications/message", 5, pred=lambda n: n["params"]["data"] >= before + 2)
        # every reconnect names the last event seen
        assert faulty.seen_headers["/getloop"].get("Last-Event-ID", "").startswith("g")
    finally:
        c.close()


def test_idle_get_stream_that_closes_at_once_backs_off(transport: Any, faulty: FaultyServer) -> None:
    t = transport("/getquiet")
    c = hs.RawClient(t)
    before = faulty.hits[("GET", "/getquiet")]  # the server is shared by the module's tests
    try:
        c.initialize()
        time.sleep(2.5)  # the window whose reconnects are counted (not a synchronisation)
        hits = faulty.hits[("GET", "/getquiet")] - before
        # delays of 1 s, 2 s, 4 s ... not a reconnect every second forever (nor a tight loop)
        assert 1 <= hits <= 3
    finally:
        c.close()


def test_environment_proxy_is_used(monkeypatch: pytest.MonkeyPatch) -> None:
    import urllib3

    from mcpsync.transports._http_options import HTTPOptions
    from mcpsync.transports._http_pools import ClientConnections

    monkeypatch.setenv("HTTP_PROXY", "http://127.0.0.1:3128")
    monkeypatch.setenv("NO_PROXY", "internal.example")
    conns = ClientConnections()
    pools = conns.acquire("http://mcp.example.com/mcp", HTTPOptions())
    try:
        assert isinstance(pools.main, urllib3.ProxyManager)
        assert pools.main.proxy is not None and pools.main.proxy.port == 3128
    finally:
        conns.release(pools)
    pools = conns.acquire("http://internal.example/mcp", HTTPOptions())
    try:
        assert not isinstance(pools.main, urllib3.ProxyManager)
    finally:
        conns.release(pools)


def test_one_client_shares_its_pools_per_origin_and_releases_them(faulty: FaultyServer) -> None:
    from mcpsync.transports._http_pools import ClientConnections

    conns = ClientConnections()
    a = StreamableHTTPTransport(faulty.url("/garbage"), connections=conns)
    b = StreamableHTTPTransport(faulty.url("/html"), connections=conns)
    alone = StreamableHTTPTransport(faulty.url("/html"))  # another client's: its own pools
    for t in (a, b, alone):
        t.connect(1)
    try:
        assert a.exchange.pools is b.exchange.pools
        assert alone.exchange.pools is not a.exchange.pools
    finally:
        a.close()
        assert conns.in_use() == [b.exchange.pools]
        b.close()
        alone.close()
    assert not conns.in_use()


def test_exhausted_pool_is_a_bounded_wait(transport: Any, faulty: FaultyServer, http_path: str) -> None:
    """The fast path waits for its one socket within the call's time; urllib3's pools never
    block (an interrupted caller could leave their queue short for good: the client's own
    pool bounds calls in flight), so there the call opens another socket, and ends in time."""
    t = transport("/slow", pool_size=1)
    before = faulty.hits[("POST", "/slow")]
    first = threading.Thread(target=lambda: t.send(REQ, 5))
    first.start()
    # the only connection is busy once the server holds the first request
    assert wait_until(lambda: faulty.hits[("POST", "/slow")] > before, 10)
    try:
        started = time.monotonic()
        with pytest.raises(RequestTimeout, match="no free connection" if http_path == "fast" else None):
            t.send(REQ, 0.3)
        assert time.monotonic() - started < 3.0
    finally:
        first.join(10)


def test_get_stream_keeps_retrying_after_failures(transport: Any) -> None:
    t = transport("/getflaky")
    c = hs.RawClient(t)
    try:
        c.initialize()
        # 500, 500, then a stream: retried after 1 s and 2 s, not given up
        assert c.wait_notification("notifications/message", 8)["params"]["data"] == "up"
    finally:
        c.close()


def test_tools_with_invalid_header_annotations_are_dropped(faulty: FaultyServer, caplog: pytest.LogCaptureFixture) -> None:
    from mcpsync import Client

    url = faulty.url("/tools")
    forget_url(url)
    with Client.http(url, mode="modern", sse_fallback=False) as c:
        assert [tool.name for tool in c.list_tools()] == ["good", "plain"]
        assert "tool 'bad' dropped" in caplog.text
        # the good tool's annotation became its Mcp-Param-R header (the server echoes it)
        assert c.call_tool("good", {"r": "north"}).text == "north"


def test_header_annotations_a_relisting_no_longer_shows_are_forgotten(faulty: FaultyServer) -> None:
    from mcpsync import Client

    url = faulty.url("/tools-changing")
    forget_url(url)
    with Client.http(url, mode="modern", sse_fallback=False) as c:
        assert [tool.name for tool in c.list_tools()] == ["good", "plain"]
        assert c.call_tool("good", {"r": "north"}).text == "north"
        # no schema of this listing names x-mcp-header (the one search finds none): the
        # annotation learned before goes, and the call sends no Mcp-Param-R any more
        assert [tool.name for tool in c.list_tools(refresh=True)] == ["good", "plain"]
        assert c.call_tool("good", {"r": "north"}).text == "-"


def test_dropped_stream_through_the_client_is_an_error_not_a_hang(faulty: FaultyServer) -> None:
    client_mod = pytest.importorskip("mcpsync._client")
    from mcpsync._errors import MCPError

    url = faulty.url("/dropcall")
    forget_url(url)
    with client_mod.Client(lambda: StreamableHTTPTransport(url), mode="legacy") as c:
        with pytest.raises(MCPError) as info:
            c.call_tool("anything", {}, timeout=10)
        assert not isinstance(info.value, RequestTimeout)
        c.ping()  # the client is still usable


def test_modern_listen_stream_is_reopened_under_the_same_id(transport: Any, faulty: FaultyServer) -> None:
    t = transport("/listen")
    c = hs.RawClient(t)
    try:
        params = {"notifications": {"resourceSubscriptions": ["x://1"]}, "_meta": hs.modern_meta()}
        t.send(json.dumps({"jsonrpc": "2.0", "id": "sub-7", "method": "subscriptions/listen", "params": params}).encode(), 5)
        note = c.wait_notification("notifications/resources/updated", 8)
        assert note["params"]["_meta"]["io.modelcontextprotocol/subscriptionId"] == "sub-7"
        assert faulty.httpd.listen_ids[-2:] == ["sub-7", "sub-7"]
        t.send(json.dumps({"jsonrpc": "2.0", "method": "notifications/cancelled", "params": {"requestId": "sub-7"}}).encode(), 1)
    finally:
        c.close()


def test_connect_timeout_is_a_connect_error_within_the_callers_budget() -> None:
    # a listening socket whose accept queue is full drops further SYNs: connects time out
    srv = socket.socket()
    srv.bind(("127.0.0.1", 0))
    srv.listen(0)
    port = srv.getsockname()[1]
    fillers = []
    for _ in range(3):
        s = socket.socket()
        s.setblocking(False)
        try:
            s.connect(("127.0.0.1", port))
        except BlockingIOError:
            pass
        fillers.append(s)
    t = StreamableHTTPTransport(f"http://127.0.0.1:{port}/mcp")
    t.connect(1)
    try:
        with pytest.raises(ConnectError, match="timed out"):
            t.send(REQ, 1.0)  # two connect attempts of 0.5 s each
    finally:
        t.close()
        for s in fillers:
            s.close()
        srv.close()


@pytest.mark.skipif(not hasattr(os, "fork"), reason="needs fork")
def test_a_forked_child_gets_its_own_connections_and_threads(transport: Any, faulty: FaultyServer) -> None:
    parent = transport("/drop")
    parent.send(REQ, 5)  # a stream thread ran and is parked; the pool holds a connection
    assert parent.receive(5) is not None

    def child() -> bytes:
        fresh = StreamableHTTPTransport(faulty.url("/drop"), sse_fallback=False)
        fresh.connect(2)
        fresh.send(REQ, 5)
        return b"ok" if fresh.receive(5) is not None else b"no answer"

    assert run_in_child(child, timeout=15) == b"ok"  # b"hung" if the child hung, b"" if it raised
