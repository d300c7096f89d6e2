"""An auth hook's headers reach the WebSocket and gRPC handshakes (bridge with a bearer check)."""

from __future__ import annotations

import subprocess
import sys

import pytest

from mcpsync import AuthError, Client, ConnectError
from tests.conftest import free_port

pytestmark = [pytest.mark.timeout(60), pytest.mark.usefixtures("http_path")]  # both HTTP paths: fast and urllib3


class Hook:
    """The transports' auth protocol, with a token that can change between connects."""

    def __init__(self, token: str) -> None:
        self.token = token
        self.asked = 0

    def headers(self, url: str, method: str) -> dict[str, str]:
        self.asked += 1
        return {"Authorization": f"Bearer {self.token}"}

    def on_response(self, url, method, status, headers) -> bool:
        return False


@pytest.fixture(params=["websocket", "grpc"])
def bridge(request):
    if request.param == "grpc":
        pytest.importorskip("grpc")
    else:
        pytest.importorskip("websockets")
    port = free_port()
    proc = subprocess.Popen(
        [sys.executable, "-m", "mcpsync.server.bridge", f"--{request.param}", f"127.0.0.1:{port}", "--token", "s3cret",
         "--", sys.executable, "-m", "mcpsync.server.demo"],
        stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True,
    )
    try:
        assert "mcpsync-bridge" in proc.stdout.readline()
        yield request.param, port
    finally:
        proc.terminate()
        proc.wait(10)


def make(kind: str, port: int, hook: Hook) -> Client:
    if kind == "websocket":
        return Client.websocket(f"ws://127.0.0.1:{port}", auth=hook)
    return Client.grpc(f"127.0.0.1:{port}", auth=hook)


def test_hook_headers_authorize_the_handshake(bridge):
    kind, port = bridge
    hook = Hook("s3cret")
    with make(kind, port, hook) as c:
        assert c.call_tool("echo", {"message": "authorized"}).text == "authorized"
    assert hook.asked >= 1


def test_wrong_token_from_the_hook_is_an_auth_error(bridge):
    kind, port = bridge
    c = make(kind, port, Hook("wrong"))
    with pytest.raises((AuthError, ConnectError)) as info:
        c.connect()
    err = info.value
    assert isinstance(err, AuthError) or isinstance(err.__cause__, AuthError) or "401" in str(err) or "UNAUTHENTICATED" in str(err)
    c.close()
