"""The Streamable HTTP transport's JSON lane (issue 35, ``mcpsync/_speedups/_pyhttp.py``)
against a raw server that echoes each call's ``Authorization``: an auth hook's headers as
they change (a new dict, or the same dict changed in place), a hook that fails, both eras,
both HTTP paths (urllib3's never takes the lane: the same answers are due).
"""

from __future__ import annotations

import sys
import threading
from pathlib import Path
from typing import Iterator

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "servers"))

from wire_edges import MCPServer  # noqa: E402

from mcpsync import AuthError, Client  # noqa: E402
from tests.helpers import hammer  # noqa: E402
from mcpsync._channel import MessageFacts  # noqa: E402
from mcpsync.transports.streamable_http import StreamableHTTPTransport  # noqa: E402

pytestmark = [pytest.mark.timeout(60), pytest.mark.usefixtures("http_path")]


class Hook:
    """A bearer hook: a new dict per request, or one dict changed in place (``same``)."""

    def __init__(self, same: bool) -> None:
        self.same = same
        self.token = "t0"
        self.given = {"Authorization": "Bearer t0"}
        self.asked = 0
        self.fail = False

    def headers(self, url: str, method: str) -> dict[str, str]:
        self.asked += 1
        if self.fail:
            raise RuntimeError("the token store is gone")
        if self.same:
            self.given["Authorization"] = f"Bearer {self.token}"
            return self.given
        return {"Authorization": f"Bearer {self.token}"}

    def on_response(self, url: str, method: str, status: int, headers: object) -> bool:
        return False


@pytest.fixture
def server() -> Iterator[MCPServer]:
    srv = MCPServer()
    try:
        yield srv
    finally:
        srv.close()


@pytest.mark.parametrize("mode", ["legacy", "auto"])
@pytest.mark.parametrize("same", [False, True], ids=["new-dict", "same-dict"])
def test_each_call_carries_the_hooks_headers_of_its_moment(server: MCPServer, mode: str, same: bool) -> None:
    hook = Hook(same)
    with Client.http(server.url, mode=mode, auth=hook) as client:
        client.list_tools()
        for i in range(12):
            hook.token = f"t{i // 3}"
            asked = hook.asked
            text = client.call_tool("echo", {"message": str(i)}).text
            assert text == f"Bearer t{i // 3}|{i}"
            assert hook.asked == asked + 1  # asked once a request, the lane's or not
    calls = server.calls("echo")
    assert [r.header("Authorization") for r in calls] == [f"Bearer t{i // 3}" for i in range(12)]
    assert len({r.conn for r in calls}) == 1  # one kept-alive socket for all


@pytest.mark.parametrize("mode", ["legacy", "auto"])
def test_a_hook_that_fails_is_an_auth_error_and_nothing_is_sent(server: MCPServer, mode: str) -> None:
    hook = Hook(False)
    with Client.http(server.url, mode=mode, auth=hook) as client:
        for i in range(3):
            client.call_tool("echo", {"message": str(i)})
        hook.fail = True
        asked = hook.asked
        with pytest.raises(AuthError, match="the token store is gone"):
            client.call_tool("echo", {"message": "never"})
        assert hook.asked == asked + 1
        hook.fail = False
        assert client.call_tool("echo", {"message": "after"}).text == "Bearer t0|after"
    assert "never" not in [r.arguments.get("message") for r in server.calls("echo")]


class Counted(StreamableHTTPTransport):
    """The transport, counting the requests its JSON lane hands to the general path."""

    __slots__ = ("general",)

    def __init__(self, url: str) -> None:
        self.general = 0
        super().__init__(url)

    def _send(self, message: bytes, timeout: float | None = None, facts: MessageFacts | None = None) -> None:
        self.general += 1
        super()._send(message, timeout, facts)


@pytest.mark.parametrize("mode", ["legacy", "auto"])
def test_the_lane_takes_the_common_call_of_either_era(server: MCPServer, http_path: str, mode: str) -> None:
    made: list[Counted] = []
    with Client(lambda: made.append(Counted(server.url)) or made[-1], mode=mode) as client:
        client.list_tools()
        client.call_tool("echo", {"message": "first"})  # (the kind's first request: the general path's)
        before = made[-1].general
        for i in range(10):
            assert client.call_tool("echo", {"message": str(i)}).text == f"-|{i}"
        # the urllib3 path never takes the lane (its pools are not the fast path's)
        assert made[-1].general - before == (10 if http_path == "urllib3" else 0)


class PerThread:
    """A hook whose token is its caller's thread: every request's headers differ from the last."""

    def headers(self, url: str, method: str) -> dict[str, str]:
        return {"Authorization": f"Bearer {threading.current_thread().name}"}

    def on_response(self, url: str, method: str, status: int, headers: object) -> bool:
        return False


@pytest.mark.parametrize("mode", ["legacy", "auto"])
def test_threads_with_their_own_tokens_each_send_their_own(server: MCPServer, mode: str) -> None:
    """What the lane keeps between requests (the route, the kind's block, the hook's last
    merge) is read as one consistent set, whatever other threads change meanwhile."""
    with Client.http(server.url, mode=mode, auth=PerThread(), pool_size=4) as client:
        client.list_tools()
        interval = sys.getswitchinterval()
        sys.setswitchinterval(1e-6)  # threads taking turns between any two bytecodes of the pure twin
        try:  # (each answer names the token its request carried: the asking thread's own)
            hammer(client, threads=8, calls=40, join=60.0,
                   expect=lambda msg: f"Bearer {threading.current_thread().name}|{msg}")
        finally:
            sys.setswitchinterval(interval)
