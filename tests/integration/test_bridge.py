"""The bridge as users run it: ``python -m mcpsync.server.bridge ... -- CMD``, a real process."""

from __future__ import annotations

import os
import select
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any, Iterator

import pytest

pytest.importorskip("websockets")
pytest.importorskip("grpc")

from mcpsync import AuthError, Client, ConnectError, ConnectionClosed, MCPError, NetworkError
from mcpsync.server.bridge import parse_address
from mcpsync.transports.grpc import GrpcTransport
from mcpsync.transports.websocket import WebSocketTransport
from tests.conftest import ROOT, free_port, server_command
from tests.helpers import scripted_server, wait_until
from tests.servers.chaos_support import children_of

pytestmark = pytest.mark.timeout(90)


class BridgeProcess:
    def __init__(self, proc: subprocess.Popen[bytes], ws: str | None, grpc_target: str | None) -> None:
        self.proc = proc
        self.ws = ws
        self.grpc = grpc_target

    def children(self) -> list[int]:
        return children_of(self.proc.pid)  # its upstream servers (not their watchdog)


def spawn_bridge(*args: str, command: list[str] | None = None) -> BridgeProcess:
    argv = [sys.executable, "-m", "mcpsync.server.bridge", *args]
    if command is not None:
        argv += ["--", *command]
    proc = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, cwd=ROOT, start_new_session=True)
    assert proc.stdout is not None
    ws = grpc_target = None
    deadline = time.monotonic() + 20
    buf = b""
    while time.monotonic() < deadline:
        r, _, _ = select.select([proc.stdout], [], [], 0.5)
        if not r:
            if proc.poll() is not None:
                break
            continue
        chunk = os.read(proc.stdout.fileno(), 4096)
        if not chunk:
            break
        buf += chunk
        for line in buf.decode().splitlines():
            if line.startswith("mcpsync-bridge: websocket "):
                ws = line.split()[-1]
            elif line.startswith("mcpsync-bridge: grpc "):
                grpc_target = line.split()[-1]
        if "mcpsync-bridge: upstream" in buf.decode():
            return BridgeProcess(proc, ws, grpc_target)
    proc.kill()
    proc.wait(5)
    raise AssertionError(f"the bridge did not start: {buf!r}")


def stop(b: BridgeProcess) -> None:
    if b.proc.poll() is None:
        try:
            os.killpg(b.proc.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
    b.proc.wait(10)


@pytest.fixture()
def sdk_bridge() -> Iterator[BridgeProcess]:
    b = spawn_bridge("--websocket", "127.0.0.1:0", "--grpc", "127.0.0.1:0", command=server_command("sdk_bridge_server.py"))
    yield b
    stop(b)


def _gone(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().split()[2] == "Z"  # a zombie of an exited parent counts as gone
    except OSError:
        return True


@pytest.mark.parametrize("mode", ["modern", "legacy"])
def test_sdk_server_over_websocket(sdk_bridge: BridgeProcess, mode: str) -> None:
    assert sdk_bridge.ws is not None
    with Client(lambda: WebSocketTransport(sdk_bridge.ws), mode=mode,
                elicitation_handler=lambda p: {"action": "accept", "content": {"answer": "yes"}}) as client:
        assert client.era == mode
        assert client.server_info.name == "mcpsync-bridge-sdk-test"
        assert client.call_tool("add", {"a": 20, "b": 22}).structured_content == {"result": 42}
        assert client.call_tool("echo", {"message": "é ☃"}).text == "Echo: é ☃"
        if mode == "legacy":
            assert client.call_tool("ask", {"question": "ok?"}).text == "answer: yes"


def test_each_connection_gets_its_own_upstream(sdk_bridge: BridgeProcess) -> None:
    assert sdk_bridge.ws is not None and sdk_bridge.grpc is not None
    with Client(lambda: WebSocketTransport(sdk_bridge.ws), mode="legacy") as a, \
            Client(lambda: GrpcTransport(sdk_bridge.grpc), mode="legacy") as b:
        assert a.call_tool("echo", {"message": "a"}).text == "Echo: a"
        assert b.call_tool("echo", {"message": "b"}).text == "Echo: b"
        assert len(sdk_bridge.children()) == 2
    # closing the downstream connections stops their upstream processes
    assert wait_until(lambda: not sdk_bridge.children(), 5), sdk_bridge.children()


def test_sigterm_shuts_down_cleanly(sdk_bridge: BridgeProcess) -> None:
    assert sdk_bridge.ws is not None
    client = Client(lambda: WebSocketTransport(sdk_bridge.ws), mode="legacy")
    try:
        assert client.call_tool("echo", {"message": "x"}).text == "Echo: x"
        kids = sdk_bridge.children()
        assert len(kids) == 1
        sdk_bridge.proc.send_signal(signal.SIGTERM)
        assert sdk_bridge.proc.wait(15) == 0
        assert all(_gone(pid) for pid in kids)
        with pytest.raises(MCPError):
            client.call_tool("echo", {"message": "after"}, timeout=5)
    finally:
        client.close()


@pytest.mark.parametrize("transport", ["websocket", "grpc"])
def test_killing_the_bridge_mid_call_is_a_typed_error(sdk_bridge: BridgeProcess, transport: str) -> None:
    make: Any = (lambda: WebSocketTransport(sdk_bridge.ws)) if transport == "websocket" else (lambda: GrpcTransport(sdk_bridge.grpc))
    outcome: list[BaseException | str] = []
    started = threading.Event()
    with Client(make, mode="legacy") as client:
        client.connect()

        def call() -> None:
            started.set()
            try:
                outcome.append(client.call_tool("sleep", {"seconds": 20}, timeout=30).text)
            except BaseException as exc:  # noqa: BLE001
                outcome.append(exc)

        th = threading.Thread(target=call)
        th.start()
        assert started.wait(5)
        # the request has left the client: it waits for its answer on the one connection
        assert wait_until(lambda: client.diagnostics().in_flight == 1 and client.diagnostics().connections[0].pending == 1, 10)
        os.killpg(sdk_bridge.proc.pid, signal.SIGKILL)
        th.join(15)
        assert not th.is_alive(), "the pending call hung after the bridge died"
    assert len(outcome) == 1 and isinstance(outcome[0], NetworkError), outcome


def test_bearer_token_from_the_environment() -> None:
    env_token = "from-env"
    os.environ["MCPSYNC_BRIDGE_TOKEN"] = env_token
    try:
        b = spawn_bridge("--websocket", ":0", command=[sys.executable, "-m", "mcpsync.server.demo"])
    finally:
        del os.environ["MCPSYNC_BRIDGE_TOKEN"]
    try:
        assert b.ws is not None and b.ws.startswith("ws://127.0.0.1:")
        with pytest.raises(AuthError):
            WebSocketTransport(b.ws, token="wrong").connect(10)
        with Client(lambda: WebSocketTransport(b.ws, token=env_token)) as client:
            assert client.call_tool("echo", {"message": "demo"}).text == "demo"
    finally:
        stop(b)


def test_an_upstream_that_cannot_start_is_a_typed_error() -> None:
    b = spawn_bridge("--websocket", "127.0.0.1:0", "--grpc", "127.0.0.1:0", command=["/nonexistent/mcp-server"])
    try:
        with pytest.raises(NetworkError):
            Client(lambda: WebSocketTransport(b.ws), mode="legacy", name="ws").connect()
        with pytest.raises((ConnectError, ConnectionClosed)):
            Client(lambda: GrpcTransport(b.grpc), mode="legacy", name="grpc").connect()
        assert b.proc.poll() is None  # the bridge itself stays up
    finally:
        stop(b)


def test_command_line_errors() -> None:
    def run(*args: str) -> subprocess.CompletedProcess[bytes]:
        return subprocess.run([sys.executable, "-m", "mcpsync.server.bridge", *args], capture_output=True, timeout=30)

    assert run("--", "true").returncode == 2  # no listener
    assert run("--websocket", ":0").returncode == 2  # no upstream
    assert run("--websocket", ":0", "--url", "http://127.0.0.1:1/mcp", "--", "true").returncode == 2  # both
    port = free_port()
    with __import__("socket").socket() as s:
        s.bind(("127.0.0.1", port))
        s.listen()
        busy = run("--websocket", f"127.0.0.1:{port}", "--", "true")
    assert busy.returncode == 1 and b"cannot listen" in busy.stderr


def test_parse_address() -> None:
    assert parse_address("8765") == ("127.0.0.1", 8765)
    assert parse_address(":8765") == ("127.0.0.1", 8765)
    assert parse_address("0.0.0.0:1") == ("0.0.0.0", 1)
    assert parse_address("[::1]:9") == ("::1", 9)
    with pytest.raises(ValueError):
        parse_address("host:port")


@pytest.fixture()
def http_sdk_server() -> Iterator[str]:
    import socket

    port = free_port()
    proc = subprocess.Popen(server_command("http_sdk_server.py", "--port", str(port)),
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:

        def listening() -> bool:
            if proc.poll() is not None:
                pytest.fail("the HTTP SDK server did not start")
            try:
                socket.create_connection(("127.0.0.1", port), 0.2).close()
                return True
            except OSError:
                return False

        assert wait_until(listening, 20, interval=0.05)
        yield f"http://127.0.0.1:{port}/mcp"
    finally:
        proc.kill()
        proc.wait(10)


@pytest.mark.parametrize("mode", ["modern", "legacy"])
def test_upstream_url(http_sdk_server: str, mode: str) -> None:
    b = spawn_bridge("--websocket", "127.0.0.1:0", "--grpc", "127.0.0.1:0", "--url", http_sdk_server)
    try:
        for make in (lambda: WebSocketTransport(b.ws), lambda: GrpcTransport(b.grpc)):
            with Client(make, mode=mode, elicitation_handler=lambda p: {"action": "accept", "content": {"answer": "via http"}}) as client:
                assert client.era == mode
                assert client.call_tool("echo", {"message": "u"}).text == "Echo: u"
                if mode == "legacy":  # a server→client request over the upstream's SSE stream
                    assert client.call_tool("ask", {"question": "?"}).text == "answer: via http"
    finally:
        stop(b)


@pytest.fixture(scope="module")
def tls_files(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    """A self-signed certificate for 127.0.0.1 / localhost."""
    import datetime
    import ipaddress

    x509 = pytest.importorskip("cryptography.x509")
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.hazmat.primitives.asymmetric import ec
    from cryptography.x509.oid import NameOID

    key = ec.generate_private_key(ec.SECP256R1())
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "localhost")])
    now = datetime.datetime.now(datetime.timezone.utc)
    cert = (
        x509.CertificateBuilder().subject_name(name).issuer_name(name).public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(minutes=5)).not_valid_after(now + datetime.timedelta(days=1))
        .add_extension(x509.SubjectAlternativeName([x509.DNSName("localhost"), x509.IPAddress(ipaddress.ip_address("127.0.0.1"))]), critical=False)
        .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
        .sign(key, hashes.SHA256())
    )
    d = tmp_path_factory.mktemp("tls")
    cert_path, key_path = d / "cert.pem", d / "key.pem"
    cert_path.write_bytes(cert.public_bytes(serialization.Encoding.PEM))
    key_path.write_bytes(key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()))
    return cert_path, key_path


def test_tls_for_websocket_and_grpc(tls_files: tuple[Path, Path]) -> None:
    cert, key = tls_files
    b = spawn_bridge("--websocket", "127.0.0.1:0", "--grpc", "127.0.0.1:0", "--tls-cert", str(cert), "--tls-key", str(key),
                     command=[sys.executable, "-m", "mcpsync.server.demo"])
    try:
        assert b.ws is not None and b.ws.startswith("wss://") and b.grpc is not None
        with Client(lambda: WebSocketTransport(b.ws, sslopt={"ca_certs": str(cert)})) as client:
            assert client.call_tool("echo", {"message": "wss"}).text == "wss"
        with Client(lambda: GrpcTransport(b.grpc, root_certificates=cert.read_bytes())) as client:
            assert client.call_tool("echo", {"message": "tls"}).text == "tls"
        with pytest.raises(ConnectError):  # the system roots do not trust a self-signed certificate
            WebSocketTransport(b.ws).connect(5)
        with pytest.raises(ConnectError):  # a plaintext client never gets a ready channel
            GrpcTransport(b.grpc).connect(1.0)
    finally:
        stop(b)


DYING_SERVER = r"""
def answer(method, params):
    if method == "tools/call":
        sys.exit(3)
    return None
"""


@pytest.mark.parametrize("transport", ["websocket", "grpc"])
def test_upstream_exiting_mid_call_is_connection_closed(transport: str, tmp_path: Path) -> None:
    from mcpsync.server._upstream import upstream_factory
    from mcpsync.server.bridge import Bridge

    command, args = scripted_server(tmp_path, DYING_SERVER, name="dying")
    with Bridge(upstream_factory([command, *args])) as bridge:
        if transport == "websocket":
            url = bridge.serve_websocket().url
            make: Any = lambda: WebSocketTransport(url)  # noqa: E731
        else:
            target = bridge.serve_grpc().target
            make = lambda: GrpcTransport(target)  # noqa: E731
        with Client(make, mode="legacy") as client:
            assert client.server_info.name == "dying"
            with pytest.raises(ConnectionClosed, match="upstream"):
                client.call_tool("anything", {}, timeout=20)
        assert wait_until(lambda: bridge.sessions() == 0, 5), bridge.sessions()
