"""Streamable HTTP and HTTP+SSE against servers written with the official ``mcp`` SDK.

Every server runs in a subprocess under uvicorn on 127.0.0.1 (tests/servers/http_sdk_server.py).
"""

from __future__ import annotations

import json
import sys
import threading
from pathlib import Path
from typing import Any, Iterator

import pytest
import urllib3

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "servers"))

import http_support as hs  # noqa: E402

from mcpsync._errors import MessageTooLarge  # noqa: E402
from mcpsync.transports.sse import SSETransport  # noqa: E402
from mcpsync.transports.streamable_http import StreamableHTTPTransport, forget_url, known_kind  # noqa: E402
from tests.helpers import hammer, wait_until  # noqa: E402

pytestmark = pytest.mark.usefixtures("http_path")  # both HTTP paths: fast and urllib3


def _serve(*flags: str) -> Iterator[str]:
    port = hs.free_port()
    with hs.run_server(hs.sdk_server_argv(port, *flags), port):
        yield f"http://127.0.0.1:{port}"


@pytest.fixture(scope="module")
def sse_server() -> Iterator[str]:
    """Stateful Streamable HTTP, SSE responses, resumable (event store, retry 100 ms)."""
    yield from _serve("--event-store", "--retry-ms", "100")


@pytest.fixture(scope="module")
def json_server() -> Iterator[str]:
    """Stateful Streamable HTTP answering with application/json."""
    yield from _serve("--json")


@pytest.fixture(scope="module")
def legacy_sse_server() -> Iterator[str]:
    """The SDK's HTTP+SSE (2024-11-05) app."""
    yield from _serve("--transport", "sse")


@pytest.fixture
def client_for() -> Iterator[Any]:
    made: list[hs.RawClient] = []

    def make(url: str, **kw: Any) -> hs.RawClient:
        t = StreamableHTTPTransport(url, **kw)
        t.connect(5)
        c = hs.RawClient(t)
        made.append(c)
        return c

    yield make
    for c in made:
        c.close()


def _echo(c: hs.RawClient, text: str, modern: bool = False) -> str:
    params = {"name": "echo", "arguments": {"message": text}}
    answer = c.modern("tools/call", params) if modern else c.request("tools/call", params)
    return hs.text_of(answer)


# ------------------------------------------------------------------ modern (2026-07-28)


@pytest.mark.parametrize("server", ["json_server", "sse_server"])
def test_modern_discover_and_call(server: str, request: pytest.FixtureRequest, client_for: Any) -> None:
    base = request.getfixturevalue(server)
    c = client_for(f"{base}/mcp")
    found = c.modern("server/discover")
    assert "2026-07-28" in found["result"]["supportedVersions"]
    assert _echo(c, "hi", modern=True) == "Echo: hi"
    assert c.t.session_info()["session_id"] is None  # stateless era: no session


def test_modern_sse_response_carries_progress_before_the_result(sse_server: str, client_for: Any) -> None:
    c = client_for(f"{sse_server}/mcp")
    answer = c.modern("tools/call", {"name": "progress", "arguments": {"steps": 3}, "_meta": {"progressToken": "tok"}})
    assert hs.text_of(answer) == "done"
    progress = [n for n in c.notifications if n["method"] == "notifications/progress"]
    assert [n["params"]["progress"] for n in progress] == [1, 2, 3]


def _modern_client(url: str) -> Any:
    """The user's path: a Client in the modern era (the tools layer computes Mcp-Param-*)."""
    from mcpsync import Client

    return Client.http(url, mode="modern", sse_fallback=False)


def test_modern_param_header_learned_from_tools_list(json_server: str) -> None:
    with _modern_client(f"{json_server}/mcp") as c:
        assert "routed" in {t.name for t in c.list_tools()}
        assert c.call_tool("routed", {"region": "eu-west", "n": 2}).text == "eu-west:2"


def test_modern_header_mismatch_relists_and_retries(json_server: str, caplog: pytest.LogCaptureFixture) -> None:
    # no tools/list yet: the first POST lacks Mcp-Param-Region, the server says
    # HeaderMismatch, the tools layer re-lists the tools and retries once
    import logging

    caplog.set_level(logging.INFO, logger="mcpsync")
    with _modern_client(f"{json_server}/mcp") as c:
        assert c.call_tool("routed", {"region": "café", "n": 1}).text == "café:1"
        assert "header mismatch" in caplog.text


def test_modern_error_answer_is_delivered(json_server: str, client_for: Any) -> None:
    c = client_for(f"{json_server}/mcp")
    answer = c.modern("no/such/method")
    assert answer["error"]["code"] == -32601


# ------------------------------------------------------------------ legacy Streamable HTTP


@pytest.mark.parametrize("server", ["json_server", "sse_server"])
def test_legacy_session(server: str, request: pytest.FixtureRequest, client_for: Any) -> None:
    base = request.getfixturevalue(server)
    c = client_for(f"{base}/mcp")
    init = c.initialize()
    assert init["result"]["serverInfo"]["name"] == "mcpsync-http-test"
    info = c.t.session_info()
    assert info["session_id"]
    assert info["protocol_version"] == "2025-11-25"
    assert _echo(c, "one") == "Echo: one"
    seen = json.loads(hs.text_of(c.request("tools/call", {"name": "headers", "arguments": {}})))
    assert seen["mcp-session-id"] == info["session_id"]
    assert seen["mcp-protocol-version"] == "2025-11-25"


def test_legacy_server_request_inside_a_stream(sse_server: str) -> None:
    t = StreamableHTTPTransport(f"{sse_server}/mcp")
    t.connect(5)
    asked: list[Any] = []

    def answer(method: str, params: Any) -> Any:
        asked.append((method, params["message"]))
        return {"action": "accept", "content": {"answer": "42"}}

    c = hs.RawClient(t, on_request=answer)
    try:
        c.initialize({"elicitation": {}})
        result = c.request("tools/call", {"name": "ask", "arguments": {"question": "meaning?"}})
        assert hs.text_of(result) == "answer: 42"
        assert asked == [("elicitation/create", "meaning?")]
    finally:
        c.close()


def test_legacy_get_stream_carries_resource_updates(sse_server: str, client_for: Any) -> None:
    c = client_for(f"{sse_server}/mcp")
    c.initialize()
    assert hs.text_of(c.request("tools/call", {"name": "touch", "arguments": {"uri": "test://greeting"}})) == "touched"
    note = c.wait_notification("notifications/resources/updated", 5)
    assert note["params"]["uri"] == "test://greeting"
    assert c.t.session_info()["get_stream"] is True


def test_resumption_after_the_server_drops_the_stream(sse_server: str, client_for: Any) -> None:
    c = client_for(f"{sse_server}/mcp")
    c.initialize()
    answer = c.request("tools/call", {"name": "drop_stream", "arguments": {}})
    assert hs.text_of(answer) == "resumed"
    logged = [n["params"]["data"] for n in c.notifications if n["method"] == "notifications/message"]
    assert logged == ["before drop", "after drop"]


def _legacy_client(url: str) -> Any:
    """The user's path: a Client in the legacy era (the session layer renews expired sessions)."""
    from mcpsync import Client

    return Client.http(url, mode="legacy", sse_fallback=False)


@pytest.mark.parametrize("server", ["json_server", "sse_server"])
def test_session_expiry_reinitializes_transparently(server: str, request: pytest.FixtureRequest) -> None:
    base = request.getfixturevalue(server)
    with _legacy_client(f"{base}/mcp") as c:
        assert c.call_tool("echo", {"message": "before"}).text == "Echo: before"
        old = c.diagnostics().session_id
        assert old
        http = urllib3.PoolManager()
        assert int(http.request("POST", f"{base}/admin/expire").data) >= 1
        # tools/call is not safe to repeat: it goes again only because the 404 proves it never ran
        assert c.call_tool("echo", {"message": "after"}).text == "Echo: after"
        new = c.diagnostics().session_id
        assert new and new != old
        assert c.call_tool("echo", {"message": "again"}).text == "Echo: again"  # ids stay unique in the new session
        assert len(c.diagnostics().connections) == 1  # renewed on the same connection


def test_close_deletes_the_session(json_server: str) -> None:
    t = StreamableHTTPTransport(f"{json_server}/mcp")
    t.connect(5)
    c = hs.RawClient(t)
    c.initialize()
    sid = t.session_info()["session_id"]
    c.close()
    http = urllib3.PoolManager()
    r = http.request(
        "POST",
        f"{json_server}/mcp",
        body=json.dumps({"jsonrpc": "2.0", "id": 9, "method": "tools/list"}),
        headers={
            "Content-Type": "application/json",
            "Accept": "application/json, text/event-stream",
            "Mcp-Session-Id": sid,
            "MCP-Protocol-Version": "2025-11-25",
        },
    )
    assert r.status == 404


def test_max_message_size_json(json_server: str, client_for: Any) -> None:
    c = client_for(f"{json_server}/mcp", max_message_size=50_000)
    c.initialize()
    with pytest.raises(MessageTooLarge):
        c.request("tools/call", {"name": "big", "arguments": {"size": 200_000}})
    assert _echo(c, "still fine") == "Echo: still fine"


def test_max_message_size_sse(sse_server: str, client_for: Any) -> None:
    c = client_for(f"{sse_server}/mcp", max_message_size=50_000)
    c.initialize()
    with pytest.raises(MessageTooLarge):
        c.request("tools/call", {"name": "big", "arguments": {"size": 200_000}})
    assert _echo(c, "still fine") == "Echo: still fine"


def test_custom_headers_and_auth_hook(json_server: str, client_for: Any) -> None:
    calls: list[tuple[str, str]] = []

    class Auth:
        def headers(self, url: str, method: str) -> dict[str, str]:
            calls.append((url, method))
            return {"Authorization": "Bearer t0ken"}

        def on_response(self, url: str, method: str, status: int, headers: Any) -> bool:
            return False

    c = client_for(f"{json_server}/mcp", headers={"X-Team": "blue"}, auth=Auth())
    c.initialize()
    seen = json.loads(hs.text_of(c.request("tools/call", {"name": "headers", "arguments": {}})))
    assert seen["x-team"] == "blue"
    assert seen["authorization"] == "Bearer t0ken"
    assert (f"{json_server}/mcp", "POST") in calls  # asked before every request
    assert (f"{json_server}/mcp", "GET") in calls  # the standalone stream too


@pytest.mark.parametrize("server,modern", [("json_server", True), ("sse_server", False), ("json_server", False)])
def test_sixteen_threads_share_one_transport(server: str, modern: bool, request: pytest.FixtureRequest, client_for: Any) -> None:
    base = request.getfixturevalue(server)
    c = client_for(f"{base}/mcp")
    if not modern:
        c.initialize()
    hammer(ask=lambda msg: _echo(c, msg, modern=modern), threads=16, calls=4, join=30)


# ------------------------------------------------------------------ HTTP+SSE (2024-11-05)


def test_legacy_sse_transport_direct(legacy_sse_server: str) -> None:
    t = SSETransport(f"{legacy_sse_server}/sse")
    t.connect(5)
    assert t.endpoint is not None and t.endpoint.startswith(f"{legacy_sse_server}/messages/")
    c = hs.RawClient(t)
    try:
        c.initialize(version="2024-11-05")
        assert _echo(c, "sse") == "Echo: sse"
    finally:
        c.close()


def test_bare_url_falls_back_to_http_sse_and_remembers(legacy_sse_server: str) -> None:
    url = f"{legacy_sse_server}/sse"
    forget_url(url)
    for _ in range(2):
        t = StreamableHTTPTransport(url)
        t.connect(5)
        c = hs.RawClient(t)
        try:
            c.initialize()
            assert t.session_info()["transport"] == "sse"
            assert _echo(c, "fallback") == "Echo: fallback"
        finally:
            c.close()
        assert known_kind(url) == "sse"


# ------------------------------------------------------------------ cancellation, TLS


def test_modern_cancel_closes_the_response_stream(sse_server: str, client_for: Any) -> None:
    import time

    c = client_for(f"{sse_server}/mcp")
    t = c.t
    meta = {**hs.modern_meta(), "progressToken": "s"}
    params = {"name": "sleep", "arguments": {"seconds": 5, "tick": True}, "_meta": meta}
    t.send(json.dumps({"jsonrpc": "2.0", "id": 77, "method": "tools/call", "params": params}).encode(), 10)
    c.wait_notification("notifications/progress", 5)  # the stream is open
    assert t.session_info()["inflight_streams"] == 1
    t.send(json.dumps({"jsonrpc": "2.0", "method": "notifications/cancelled", "params": {"requestId": 77}}).encode(), 1)
    assert wait_until(lambda: t.session_info()["inflight_streams"] == 0, 5)
    assert _echo(c, "next", modern=True) == "Echo: next"
    assert 77 not in c._waiting  # no late answer to the cancelled call


@pytest.fixture(scope="module")
def tls_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[str, str]]:
    import shutil
    import subprocess

    if shutil.which("openssl") is None:
        pytest.skip("openssl is not installed")
    d = tmp_path_factory.mktemp("tls")
    cert, key = d / "cert.pem", d / "key.pem"
    subprocess.run(
        ["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "1", "-subj", "/CN=127.0.0.1",
         "-addext", "subjectAltName=IP:127.0.0.1", "-keyout", str(key), "-out", str(cert)],
        check=True, capture_output=True, timeout=30,
    )
    port = hs.free_port()
    with hs.run_server(hs.sdk_server_argv(port, "--json", "--tls", str(cert), str(key)), port):
        yield f"https://127.0.0.1:{port}", str(cert)


def test_tls_is_verified_by_default(tls_server: tuple[str, str]) -> None:
    from mcpsync._errors import ConnectError

    base, cert = tls_server
    t = StreamableHTTPTransport(f"{base}/mcp")
    t.connect(5)
    try:
        with pytest.raises(ConnectError, match="TLS|certificate|SSL"):
            c = hs.RawClient(t)
            c.initialize()
    finally:
        t.close()


@pytest.mark.filterwarnings("ignore::urllib3.exceptions.InsecureRequestWarning")
@pytest.mark.parametrize("verify", ["bundle", False])
def test_tls_with_a_ca_bundle_or_verification_off(tls_server: tuple[str, str], verify: Any) -> None:
    base, cert = tls_server
    t = StreamableHTTPTransport(f"{base}/mcp", verify=cert if verify == "bundle" else False)
    t.connect(5)
    c = hs.RawClient(t)
    try:
        c.initialize()
        assert _echo(c, "secure") == "Echo: secure"
    finally:
        c.close()


@pytest.mark.parametrize("server", ["json_server", "sse_server"])
def test_concurrent_requests_on_an_expired_session_share_one_reinit(server: str, request: pytest.FixtureRequest) -> None:
    base = request.getfixturevalue(server)
    with _legacy_client(f"{base}/mcp") as c:
        old = c.diagnostics().session_id
        barrier = threading.Barrier(17, timeout=20)
        results: dict[int, str] = {}
        errors: list[BaseException] = []

        def work(n: int) -> None:
            try:
                c.call_tool("echo", {"message": f"warm {n}"})
                barrier.wait()  # everyone warmed up
                barrier.wait()  # the session has been expired
                results[n] = c.call_tool("echo", {"message": f"after {n}"}).text
            except BaseException as exc:  # noqa: BLE001
                errors.append(exc)

        threads = [threading.Thread(target=work, args=(n,)) for n in range(16)]
        for th in threads:
            th.start()
        barrier.wait()
        urllib3.PoolManager().request("POST", f"{base}/admin/expire")
        barrier.wait()
        for th in threads:
            th.join(30)
        assert not errors
        assert results == {n: f"Echo: after {n}" for n in range(16)}
        new = c.diagnostics().session_id
        assert new != old
        sessions = int(urllib3.PoolManager().request("POST", f"{base}/admin/expire").data)
        assert sessions == 1  # one re-initialize, not one per thread


@pytest.mark.parametrize("server", ["json_server", "sse_server"])
def test_modern_resource_update_over_subscriptions_listen(server: str, request: pytest.FixtureRequest, client_for: Any) -> None:
    base = request.getfixturevalue(server)
    c = client_for(f"{base}/mcp")
    params = {"notifications": {"resourceSubscriptions": ["test://greeting"]}, "_meta": hs.modern_meta()}
    c.t.send(json.dumps({"jsonrpc": "2.0", "id": "listen-1", "method": "subscriptions/listen", "params": params}).encode(), 5)
    ack = c.wait_notification("notifications/subscriptions/acknowledged", 5)
    assert ack["params"]["notifications"]["resourceSubscriptions"] == ["test://greeting"]
    assert hs.text_of(c.modern("tools/call", {"name": "touch", "arguments": {"uri": "test://greeting"}})) == "touched"
    note = c.wait_notification("notifications/resources/updated", 5)
    assert note["params"]["uri"] == "test://greeting"
    assert note["params"]["_meta"]["io.modelcontextprotocol/subscriptionId"] == "listen-1"


def test_same_origin_redirect_is_followed_and_kept(json_server: str, client_for: Any) -> None:
    c = client_for(f"{json_server}/mcp/")  # the app redirects /mcp/ to /mcp (307)
    c.initialize()
    assert c.t.url == f"{json_server}/mcp"
    assert _echo(c, "redirected") == "Echo: redirected"


def test_a_session_lost_on_the_get_stream_is_renewed_without_a_call(sse_server: str) -> None:
    """The standalone GET stream finds the session gone: the session layer renews it at
    once (not at the next call), and the new session's GET stream carries updates."""
    got = threading.Event()
    with _legacy_client(f"{sse_server}/mcp") as c:
        c.on_notification("notifications/resources/updated", lambda params: got.set())
        old = c.diagnostics().session_id
        assert old
        urllib3.PoolManager().request("POST", f"{sse_server}/admin/expire")
        assert wait_until(lambda: c.diagnostics().session_id not in (None, old), 10)
        assert c.call_tool("touch", {"uri": "test://greeting"}).text == "touched"
        assert got.wait(5), "no update on the new session's GET stream"


def test_a_notification_on_an_expired_session_renews_it(json_server: str) -> None:
    with _legacy_client(f"{json_server}/mcp") as c:
        old = c.diagnostics().session_id
        urllib3.PoolManager().request("POST", f"{json_server}/admin/expire")
        c.notify("notifications/roots/list_changed")  # 404 → renewed → sent again
        assert c.diagnostics().session_id not in (None, old)
        assert c.call_tool("echo", {"message": "on"}).text == "Echo: on"
