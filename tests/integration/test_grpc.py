"""gRPC transport ⇄ mcpsync bridge ⇄ real MCP servers, size limits, auth and rogue peers."""

from __future__ import annotations

import json
import threading
from concurrent.futures import ThreadPoolExecutor
from typing import Any, Iterator

import pytest

grpc = pytest.importorskip("grpc")

from mcpsync import (
    AuthError,
    Client,
    ConnectError,
    ConnectionClosed,
    MessageTooLarge,
    NetworkError,
    RequestTimeout,
)
from mcpsync.server._upstream import upstream_factory
from mcpsync.server.bridge import Bridge
from mcpsync.transports.grpc import SERVICE, GrpcTransport, decode_frame, encode_frame
from tests.conftest import everything_command, free_port, server_command
from tests.helpers import hammer, wait_until

pytestmark = pytest.mark.timeout(90)

DOC = "demo://resource/static/document/architecture.md"
MIB = 1024 * 1024
INIT = {
    "jsonrpc": "2.0", "id": 0, "method": "initialize",
    "params": {"protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "raw", "version": "1"}},
}
MODERN_META = {
    "io.modelcontextprotocol/protocolVersion": "2026-07-28",
    "io.modelcontextprotocol/clientCapabilities": {},
    "io.modelcontextprotocol/clientInfo": {"name": "raw", "version": "1"},
}


@pytest.fixture(scope="module")
def everything() -> Iterator[str]:
    with Bridge(upstream_factory(everything_command("stdio"))) as bridge:
        yield bridge.serve_grpc("127.0.0.1", 0).target


@pytest.fixture(scope="module")
def sdk() -> Iterator[str]:
    with Bridge(upstream_factory(server_command("sdk_bridge_server.py")), token="tok") as bridge:
        yield bridge.serve_grpc("127.0.0.1", 0).target


def _recv_id(t: GrpcTransport, rid: Any, limit: int = 50) -> dict:
    for _ in range(limit):
        msg = t.receive(15)
        assert msg is not None, f"no answer to {rid}"
        obj = json.loads(msg)
        if obj.get("id") == rid and "method" not in obj:
            return obj
    raise AssertionError(f"no answer to {rid}")


# --------------------------------------------------------------------------- everything


def test_raw_session_through_the_bridge(everything: str) -> None:
    with GrpcTransport(everything) as t:
        t.connect(10)
        assert len(t.session_info()["session_id"]) == 32
        t.send(json.dumps(INIT).encode())
        assert _recv_id(t, 0)["result"]["serverInfo"]["name"] == "mcp-servers/everything"
        t.send(b'{"jsonrpc":"2.0","method":"notifications/initialized"}')
        t.send(b'{"jsonrpc":"2.0","id":1,"method":"tools/list"}')
        assert any(tool["name"] == "echo" for tool in _recv_id(t, 1)["result"]["tools"])


def test_client_lists_and_calls_tools(everything: str) -> None:
    with Client(lambda: GrpcTransport(everything)) as client:
        assert client.era == "legacy"
        assert "get-sum" in {t.name for t in client.list_tools()}
        assert client.call_tool("echo", {"message": "over grpc"}).text == "Echo: over grpc"


def test_subscription_update_arrives(everything: str) -> None:
    updated = threading.Event()
    seen: list[Any] = []
    with Client(lambda: GrpcTransport(everything)) as client:
        client.on_notification("notifications/resources/updated", lambda p: (seen.append(p), updated.set()))
        client.request("resources/subscribe", {"uri": DOC})
        client.call_tool("toggle-subscriber-updates", {})
        assert updated.wait(15)
        assert seen[0]["uri"] == DOC


def test_sampling_and_elicitation_reach_the_client(everything: str) -> None:
    asked: list[str] = []

    def sampling(params: Any) -> dict:
        asked.append("sampling")
        return {"role": "assistant", "content": {"type": "text", "text": "sampled over grpc"}, "model": "m", "stopReason": "endTurn"}

    def elicit(params: Any) -> dict:
        asked.append("elicitation")
        return {"action": "decline"}

    with Client(lambda: GrpcTransport(everything), sampling_handler=sampling, elicitation_handler=elicit) as client:
        assert "sampled over grpc" in client.call_tool("trigger-sampling-request", {"prompt": "p"}).text
        assert "decline" in client.call_tool("trigger-elicitation-request", {}).text.lower()
    assert asked == ["sampling", "elicitation"]


def test_sixteen_threads_share_one_client(everything: str) -> None:
    with Client(lambda: GrpcTransport(everything)) as client:
        client.connect()
        hammer(client, threads=16, calls=4, timeout=20, join=40)


def test_messages_above_four_mib_pass(everything: str) -> None:
    text = "x" * (5 * MIB)
    with Client(lambda: GrpcTransport(everything)) as client:
        assert client.call_tool("echo", {"message": text}, timeout=30).text == "Echo: " + text


def test_sending_over_the_limit_raises_and_the_session_survives(everything: str) -> None:
    with Client(lambda: GrpcTransport(everything, max_message_size=1 * MIB)) as client:
        with pytest.raises(MessageTooLarge):
            client.call_tool("echo", {"message": "x" * (2 * MIB)})
        assert client.call_tool("echo", {"message": "small"}).text == "Echo: small"


# --------------------------------------------------------------------------- the SDK server


@pytest.mark.parametrize("mode", ["modern", "legacy"])
def test_sdk_server_over_a_session(sdk: str, mode: str) -> None:
    prog: list[tuple] = []
    with Client(lambda: GrpcTransport(sdk, token="tok"), mode=mode,
                elicitation_handler=lambda p: {"action": "accept", "content": {"answer": "42"}}) as client:
        assert client.era == mode
        assert client.call_tool("add", {"a": 2, "b": 3}).structured_content == {"result": 5}
        assert client.call_tool("progress", {"steps": 3}, progress=lambda *a: prog.append(a)).text == "done"
        if mode == "legacy":  # a server→client request relayed by the bridge
            assert client.call_tool("ask", {"question": "?"}).text == "answer: 42"
    assert wait_until(lambda: len(prog) == 3, 5) and [p[0] for p in prog] == [1, 2, 3]


def test_sdk_server_over_request_scoped_calls(sdk: str) -> None:
    with Client(lambda: GrpcTransport(sdk, token="tok", scope="request"), mode="modern") as client:
        assert client.era == "modern"
        assert {"echo", "add", "sleep"} <= {t.name for t in client.list_tools()}
        with ThreadPoolExecutor(16) as pool:
            futures = {i: pool.submit(client.call_tool, "add", {"a": i, "b": 1000}, timeout=20) for i in range(32)}
            got = {i: f.result(timeout=40).structured_content["result"] for i, f in futures.items()}
        assert got == {i: i + 1000 for i in range(32)}
        prog: list[tuple] = []
        assert client.call_tool("progress", {"steps": 2}, progress=lambda *a: prog.append(a)).text == "done"
        assert wait_until(lambda: len(prog) == 2, 5) and [p[0] for p in prog] == [1, 2]
        with pytest.raises(RequestTimeout):  # the RPC is cancelled, which cancels the request
            client.call_tool("sleep", {"seconds": 20}, timeout=0.5)
        assert client.call_tool("echo", {"message": "after"}).text == "Echo: after"


def test_raw_request_scoped_call(sdk: str) -> None:
    with GrpcTransport(sdk, token="tok", scope="request") as t:
        assert t.request_scoped
        t.connect(10)
        t.send(json.dumps({"jsonrpc": "2.0", "id": "a", "method": "server/discover", "params": {"_meta": MODERN_META}}).encode())
        assert "2026-07-28" in _recv_id(t, "a")["result"]["supportedVersions"]
        t.send(json.dumps({"jsonrpc": "2.0", "id": 7, "method": "tools/call",
                           "params": {"name": "echo", "arguments": {"message": "c"}, "_meta": MODERN_META}}).encode())
        assert _recv_id(t, 7)["result"]["content"][0]["text"] == "Echo: c"


def test_answer_over_the_client_limit_is_typed(sdk: str) -> None:
    with Client(lambda: GrpcTransport(sdk, token="tok", max_message_size=1 * MIB), mode="legacy") as client:
        with pytest.raises((MessageTooLarge, ConnectionClosed)) as info:
            client.call_tool("big", {"size": 2 * MIB}, timeout=20)
        assert "RESOURCE_EXHAUSTED" in str(info.value) or "too large" in str(info.value)


def test_wrong_or_missing_token_is_an_auth_error(sdk: str) -> None:
    for kwargs in ({}, {"token": "wrong"}, {"metadata": {"Authorization": "Bearer nope"}}):
        with pytest.raises(AuthError, match="UNAUTHENTICATED"):
            GrpcTransport(sdk, **kwargs).connect(10)
    with pytest.raises(AuthError):
        Client(lambda: GrpcTransport(sdk, token="wrong")).connect()
    with pytest.raises(AuthError):
        Client(lambda: GrpcTransport(sdk, token="wrong", scope="request"), mode="modern").connect()


# --------------------------------------------------------------------------- failures


def test_unreachable_target_is_a_connect_error() -> None:
    with pytest.raises(ConnectError):
        GrpcTransport(f"127.0.0.1:{free_port()}").connect(1.0)


@pytest.fixture()
def rogue() -> Iterator[Any]:
    """A gRPC server of the McpTransport service with a test-chosen Session handler."""
    servers: list[Any] = []

    def start(session: Any, serializer: Any = encode_frame) -> str:
        server = grpc.server(ThreadPoolExecutor(4))
        handler = grpc.stream_stream_rpc_method_handler(session, request_deserializer=decode_frame, response_serializer=serializer)
        server.add_generic_rpc_handlers((grpc.method_handlers_generic_handler(SERVICE, {"Session": handler}),))
        port = server.add_insecure_port("127.0.0.1:0")
        server.start()
        servers.append(server)
        return f"127.0.0.1:{port}"

    yield start
    for s in servers:
        s.stop(0)


def test_a_frame_that_is_not_protobuf_closes_the_session(rogue: Any) -> None:
    def session(requests: Any, context: Any) -> Iterator[bytes]:
        next(requests)
        yield b"\xff\xff\xff"

    with GrpcTransport(rogue(session, serializer=lambda b: b)) as t:
        t.connect(10)
        t.send(b'{"jsonrpc":"2.0","id":1,"method":"ping"}')
        with pytest.raises(ConnectionClosed):
            for _ in range(30):
                t.receive(1)


def test_server_status_ends_pending_calls(rogue: Any) -> None:
    def session(requests: Any, context: Any) -> Iterator[bytes]:
        req = json.loads(next(requests))
        yield json.dumps({"jsonrpc": "2.0", "id": req["id"], "result": {
            "protocolVersion": "2025-11-25", "capabilities": {}, "serverInfo": {"name": "rogue", "version": "0"}}}).encode()
        for raw in requests:
            if json.loads(raw).get("method") == "tools/call":
                context.abort(grpc.StatusCode.UNAVAILABLE, "going down")

    with Client(lambda: GrpcTransport(rogue(session)), mode="legacy") as client:
        with pytest.raises(ConnectionClosed, match="UNAVAILABLE"):
            client.call_tool("x", {}, timeout=20, validate=False, task=False)  # no hidden tools/list: a rogue peer


def test_garbage_json_in_a_frame_is_skipped(rogue: Any) -> None:
    def session(requests: Any, context: Any) -> Iterator[bytes]:
        req = json.loads(next(requests))
        yield json.dumps({"jsonrpc": "2.0", "id": req["id"], "result": {
            "protocolVersion": "2025-11-25", "capabilities": {}, "serverInfo": {"name": "rogue", "version": "0"}}}).encode()
        for raw in requests:
            msg = json.loads(raw)
            if msg.get("method") == "tools/call":
                yield b"not json at all"
                yield json.dumps({"jsonrpc": "2.0", "id": msg["id"], "result": {"content": [{"type": "text", "text": "ok"}]}}).encode()

    with Client(lambda: GrpcTransport(rogue(session)), mode="legacy") as client:
        assert client.call_tool("x", {}, timeout=20, validate=False, task=False).text == "ok"  # no hidden tools/list: a rogue peer


def test_close_from_another_thread_wakes_the_reader(everything: str) -> None:
    t = GrpcTransport(everything)
    t.connect(10)
    got: list[BaseException] = []

    def reader() -> None:
        try:
            t.receive(20)
        except BaseException as exc:  # noqa: BLE001
            got.append(exc)

    th = threading.Thread(target=reader)
    th.start()
    t.close()
    th.join(10)
    assert not th.is_alive() and got and isinstance(got[0], NetworkError)
    t.close()
