"""WebSocket transport ⇄ mcpsync bridge ⇄ real MCP servers, and misbehaving WebSocket peers."""

from __future__ import annotations

import json
import threading
import time
from typing import Any, Iterator

import pytest

pytest.importorskip("websockets")

import websocket as wsclient
from websockets.sync.server import serve

from mcpsync import AuthError, Client, ConnectError, ConnectionClosed, NetworkError, ProtocolError
from mcpsync.server._upstream import upstream_factory
from mcpsync.server.bridge import Bridge
from mcpsync.transports.websocket import WebSocketTransport
from tests.conftest import everything_command
from tests.helpers import hammer, wait_until

pytestmark = pytest.mark.timeout(60)

DOC = "demo://resource/static/document/architecture.md"
INIT = {
    "jsonrpc": "2.0", "id": 0, "method": "initialize",
    "params": {"protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "raw", "version": "1"}},
}


@pytest.fixture(scope="module")
def everything_bridge() -> Iterator[str]:
    with Bridge(upstream_factory(everything_command("stdio"))) as bridge:
        yield bridge.serve_websocket("127.0.0.1", 0).url


@pytest.fixture(scope="module")
def guarded_bridge() -> Iterator[str]:
    with Bridge(upstream_factory(everything_command("stdio")), token="s3cret") as bridge:
        yield bridge.serve_websocket("127.0.0.1", 0).url


def _sampling(params: Any) -> dict:
    return {"role": "assistant", "content": {"type": "text", "text": "sampled through the bridge"},
            "model": "test-model", "stopReason": "endTurn"}


def _elicit(params: Any) -> dict:
    return {"action": "accept", "content": {"color": "blue"}}


def _recv_id(t: WebSocketTransport, rid: Any, limit: int = 50) -> dict:
    for _ in range(limit):
        msg = t.receive(10)
        assert msg is not None, f"no answer to {rid}"
        obj = json.loads(msg)
        if obj.get("id") == rid and "method" not in obj:
            return obj
    raise AssertionError(f"no answer to {rid} in {limit} messages")


# --------------------------------------------------------------------------- real servers


def test_raw_json_rpc_through_the_bridge(everything_bridge: str) -> None:
    with WebSocketTransport(everything_bridge) as t:
        t.connect(10)
        assert t.session_info()["subprotocol"] == "mcp"
        t.send(json.dumps(INIT).encode())
        assert _recv_id(t, 0)["result"]["serverInfo"]["name"] == "mcp-servers/everything"
        t.send(b'{"jsonrpc":"2.0","method":"notifications/initialized"}')
        t.send(b'{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"echo","arguments":{"message":"hi"}}}')
        assert _recv_id(t, 1)["result"]["content"][0]["text"] == "Echo: hi"


def test_client_lists_and_calls_tools(everything_bridge: str) -> None:
    with Client(lambda: WebSocketTransport(everything_bridge)) as client:
        assert client.era == "legacy" and client.server_info.name == "mcp-servers/everything"
        names = {t.name for t in client.list_tools()}
        assert {"echo", "get-sum", "toggle-subscriber-updates"} <= names
        assert client.call_tool("echo", {"message": "over websocket"}).text == "Echo: over websocket"
        assert "7" in client.call_tool("get-sum", {"a": 3, "b": 4}).text


def test_subscription_update_arrives(everything_bridge: str) -> None:
    updated = threading.Event()
    seen: list[Any] = []
    with Client(lambda: WebSocketTransport(everything_bridge)) as client:
        client.on_notification("notifications/resources/updated", lambda p: (seen.append(p), updated.set()))
        client.request("resources/subscribe", {"uri": DOC})
        client.call_tool("toggle-subscriber-updates", {})
        assert updated.wait(15), "no notifications/resources/updated through the bridge"
        assert seen[0]["uri"] == DOC


def test_sampling_and_elicitation_reach_the_client(everything_bridge: str) -> None:
    asked: list[str] = []

    def sampling(params: Any) -> dict:
        asked.append("sampling")
        return _sampling(params)

    def elicit(params: Any) -> dict:
        asked.append("elicitation")
        return _elicit(params)

    with Client(lambda: WebSocketTransport(everything_bridge), sampling_handler=sampling, elicitation_handler=elicit) as client:
        r = client.call_tool("trigger-sampling-request", {"prompt": "hello", "maxTokens": 5})
        assert "sampled through the bridge" in r.text
        r = client.call_tool("trigger-elicitation-request", {})
        assert "accept" in r.text.lower() or "blue" in r.text
    assert asked == ["sampling", "elicitation"]


def test_sixteen_threads_share_one_client(everything_bridge: str) -> None:
    with Client(lambda: WebSocketTransport(everything_bridge)) as client:
        client.connect()
        hammer(client, threads=16, calls=5, timeout=20, join=40)


def test_sixteen_threads_send_on_one_transport(everything_bridge: str) -> None:
    with WebSocketTransport(everything_bridge) as t:
        t.connect(10)
        t.send(json.dumps(INIT).encode())
        _recv_id(t, 0)
        t.send(b'{"jsonrpc":"2.0","method":"notifications/initialized"}')
        barrier = threading.Barrier(16)

        def send(i: int) -> None:
            barrier.wait(10)
            msg = {"jsonrpc": "2.0", "id": 100 + i, "method": "tools/call", "params": {"name": "echo", "arguments": {"message": f"n{i}"}}}
            t.send(json.dumps(msg).encode())

        threads = [threading.Thread(target=send, args=(i,)) for i in range(16)]
        for th in threads:
            th.start()
        for th in threads:
            th.join(20)
        answers: dict[int, str] = {}
        for _ in range(200):
            if len(answers) == 16:
                break
            msg = t.receive(10)
            assert msg is not None
            obj = json.loads(msg)
            if isinstance(obj.get("id"), int) and obj["id"] >= 100:
                answers[obj["id"]] = obj["result"]["content"][0]["text"]
        assert answers == {100 + i: f"Echo: n{i}" for i in range(16)}


def test_keepalive_pings_are_answered(everything_bridge: str) -> None:
    with WebSocketTransport(everything_bridge, ping_interval=0.05) as t:
        t.connect(10)
        assert wait_until(lambda: t.pongs >= 2, 4)


def test_bridge_checks_the_bearer_token(guarded_bridge: str) -> None:
    for headers in ({}, {"Authorization": "Bearer wrong"}):
        t = WebSocketTransport(guarded_bridge, headers=headers)
        with pytest.raises(AuthError, match="401"):
            t.connect(10)
    with pytest.raises(AuthError):
        Client(lambda: WebSocketTransport(guarded_bridge, token="wrong")).connect()
    with Client(lambda: WebSocketTransport(guarded_bridge, token="s3cret")) as client:
        assert client.call_tool("echo", {"message": "ok"}).text == "Echo: ok"


def test_bridge_rejects_binary_frames_and_answers_garbage(everything_bridge: str) -> None:
    ws = wsclient.create_connection(everything_bridge, subprotocols=["mcp"], timeout=10)
    try:
        ws.send("this is not json")
        reply = json.loads(ws.recv())
        assert reply["error"]["code"] == -32700 and reply["id"] is None
        ws.send_binary(b'{"jsonrpc":"2.0","id":1,"method":"ping"}')
        opcode, frame = ws.recv_data_frame(control_frame=True)
        assert opcode == wsclient.ABNF.OPCODE_CLOSE
        assert int.from_bytes(frame.data[:2], "big") == 1003
    finally:
        ws.shutdown()


def test_bridge_refuses_clients_without_the_mcp_subprotocol(everything_bridge: str) -> None:
    # a 400 is the client's own mistake (the one HTTP status mapping): not retried, not counted
    with pytest.raises(ProtocolError, match="400"):
        WebSocketTransport(everything_bridge, subprotocols=("chat",)).connect(10)


# --------------------------------------------------------------------------- rogue peers


@pytest.fixture()
def rogue() -> Iterator[Any]:
    """A WebSocket server whose behaviour each test chooses: rogue(handler, subprotocols)."""
    servers: list[Any] = []

    def start(handler: Any, subprotocols: list[str] | None = ["mcp"]) -> str:  # noqa: B006
        server = serve(handler, "127.0.0.1", 0, subprotocols=subprotocols, compression=None)
        threading.Thread(target=server.serve_forever, daemon=True).start()
        servers.append(server)
        return f"ws://127.0.0.1:{server.socket.getsockname()[1]}/"

    yield start
    for s in servers:
        s.shutdown()


def _answer_initialize(conn: Any) -> None:
    req = json.loads(conn.recv(10))
    conn.send(json.dumps({"jsonrpc": "2.0", "id": req["id"], "result": {
        "protocolVersion": "2025-11-25", "capabilities": {"tools": {}}, "serverInfo": {"name": "rogue", "version": "0"}}}))


def test_a_server_without_the_subprotocol_is_refused(rogue: Any) -> None:
    url = rogue(lambda conn: conn.recv(5), subprotocols=None)
    with pytest.raises(ConnectError, match="subprotocol"):
        WebSocketTransport(url).connect(10)


def test_a_binary_frame_is_a_protocol_error(rogue: Any) -> None:
    def handler(conn: Any) -> None:
        conn.recv(10)
        conn.send(b'{"jsonrpc":"2.0","id":1,"result":{}}')  # bytes → a binary frame
        time.sleep(1)

    with WebSocketTransport(rogue(handler)) as t:
        t.connect(10)
        t.send(b'{"jsonrpc":"2.0","id":1,"method":"ping"}')
        with pytest.raises(ProtocolError, match="binary"):
            for _ in range(50):
                t.receive(1)
        with pytest.raises(ConnectionClosed):
            t.receive(1)
        with pytest.raises(ConnectionClosed):
            t.send(b"{}")


def test_a_binary_frame_fails_a_pending_client_call(rogue: Any) -> None:
    def handler(conn: Any) -> None:
        _answer_initialize(conn)
        for _ in range(5):
            msg = json.loads(conn.recv(10))
            if msg.get("method") == "tools/call":
                conn.send(b"\x00\x01binary")
                time.sleep(1)
                return

    with Client(lambda: WebSocketTransport(rogue(handler)), mode="legacy") as client:
        with pytest.raises((NetworkError, ProtocolError)):
            client.call_tool("x", {}, timeout=20, validate=False, task=False)  # no hidden tools/list: a rogue peer


def test_garbage_text_is_skipped_and_the_answer_still_arrives(rogue: Any) -> None:
    def handler(conn: Any) -> None:
        _answer_initialize(conn)
        for _ in range(5):
            msg = json.loads(conn.recv(10))
            if msg.get("method") == "tools/call":
                conn.send("garbage {{{")
                conn.send("[1, 2, 3]")
                conn.send(json.dumps({"jsonrpc": "2.0", "id": msg["id"], "result": {"content": [{"type": "text", "text": "fine"}]}}))
                conn.recv(10)

    with Client(lambda: WebSocketTransport(rogue(handler)), mode="legacy") as client:
        assert client.call_tool("x", {}, timeout=20, validate=False, task=False).text == "fine"  # no hidden tools/list: a rogue peer


def test_server_closing_mid_call_is_connection_closed(rogue: Any) -> None:
    def handler(conn: Any) -> None:
        _answer_initialize(conn)
        for _ in range(5):
            if json.loads(conn.recv(10)).get("method") == "tools/call":
                conn.close(1011, "going away")
                return

    with Client(lambda: WebSocketTransport(rogue(handler)), mode="legacy") as client:
        with pytest.raises(ConnectionClosed):
            client.call_tool("x", {}, timeout=20, validate=False, task=False)  # no hidden tools/list: a rogue peer


def test_close_from_another_thread_wakes_the_reader(rogue: Any) -> None:
    with WebSocketTransport(rogue(lambda conn: conn.recv(30))) as t:
        t.connect(10)
        got: list[BaseException] = []

        def reader() -> None:
            try:
                t.receive(20)
            except BaseException as exc:  # noqa: BLE001
                got.append(exc)

        th = threading.Thread(target=reader)
        th.start()
        time.sleep(0.1)
        t.close()
        th.join(10)
        assert not th.is_alive()
        assert got and isinstance(got[0], ConnectionClosed)
        t.close()  # idempotent


def test_unreachable_server_is_a_connect_error() -> None:
    from tests.conftest import free_port

    with pytest.raises(ConnectError):
        WebSocketTransport(f"ws://127.0.0.1:{free_port()}/").connect(5)


def test_bridge_refuses_foreign_browser_origins(everything_bridge: str) -> None:
    from mcpsync import PermissionDenied

    with pytest.raises(PermissionDenied, match="403"):
        WebSocketTransport(everything_bridge, headers={"Origin": "https://evil.example"}).connect(10)
    t = WebSocketTransport(everything_bridge, headers={"Origin": "http://localhost:3000"})
    t.connect(10)
    t.close()


@pytest.fixture()
def raw_peer() -> Iterator[Any]:
    """A bare-socket WebSocket server: completes the handshake (subprotocol mcp), then
    writes the given raw frame bytes and otherwise stays silent (it never answers pings)."""
    import base64
    import hashlib
    import socket

    listeners: list[socket.socket] = []
    conns: list[socket.socket] = []

    def start(frames: bytes = b"") -> str:
        lsock = socket.socket()
        lsock.bind(("127.0.0.1", 0))
        lsock.listen(1)
        listeners.append(lsock)

        def serve() -> None:
            conn, _ = lsock.accept()
            conns.append(conn)
            conn.settimeout(10)
            request = b""
            while b"\r\n\r\n" not in request:
                request += conn.recv(4096)
            key = next(line.split(b":", 1)[1].strip() for line in request.split(b"\r\n")
                       if line.lower().startswith(b"sec-websocket-key:"))
            accept = base64.b64encode(hashlib.sha1(key + b"258EAFA5-E914-47DA-95CA-C5AB0DC85B11").digest())
            conn.sendall(b"HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"
                         b"Sec-WebSocket-Accept: " + accept + b"\r\nSec-WebSocket-Protocol: mcp\r\n\r\n" + frames)

        threading.Thread(target=serve, daemon=True).start()
        return f"ws://127.0.0.1:{lsock.getsockname()[1]}/"

    yield start
    for s in conns + listeners:
        s.close()


def test_a_text_frame_that_is_not_utf8_is_a_protocol_error(raw_peer: Any) -> None:
    with WebSocketTransport(raw_peer(b"\x81\x02\xff\xfe")) as t:
        t.connect(10)
        with pytest.raises(ProtocolError, match="UTF-8"):
            for _ in range(50):
                t.receive(1)


def test_unanswered_pings_end_the_connection(raw_peer: Any) -> None:
    with WebSocketTransport(raw_peer(), ping_interval=0.05) as t:
        t.connect(10)
        with pytest.raises(ConnectionClosed, match="keepalive"):
            for _ in range(100):
                t.receive(0.1)


def test_a_peer_that_stops_reading_times_the_write_out(raw_peer: Any) -> None:
    from mcpsync import RequestTimeout

    with WebSocketTransport(raw_peer(), ping_interval=None, io_timeout=0.5) as t:
        t.connect(10)
        chunk = b'{"jsonrpc":"2.0","method":"x","params":{"pad":"' + b"p" * (1024 * 1024) + b'"}}'
        with pytest.raises(RequestTimeout):
            for _ in range(128):  # the socket buffers fill up long before this
                t.send(chunk)
        with pytest.raises(ConnectionClosed):
            t.send(b"{}")
