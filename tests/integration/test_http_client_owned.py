"""What one HTTP client owns (issue 29): its sockets and its cookies, on both HTTP paths.

- Two clients of one origin never share a socket: a raw server on 127.0.0.1 counts the
  ``Authorization`` values each TCP connection carried; each carried one.
- Cookies: a client keeps what ``Set-Cookie`` gives it (several lines, an ``Expires``
  with a comma) and sends it on every later request; another client of the same
  origin gets none of them; a client whose jar is empty never asks it.
- Both transports of a client (Streamable HTTP and its HTTP+SSE fallback) share them.
"""

from __future__ import annotations

import json
import threading
from typing import Any

import pytest

from mcpsync import Client
from mcpsync.transports import _http_cookies
from mcpsync.transports._http_pools import ClientConnections
from mcpsync.transports.streamable_http import StreamableHTTPTransport
from tests.servers.wire_server import WireServer

pytestmark = [pytest.mark.timeout(60), pytest.mark.usefixtures("http_path")]  # both HTTP paths: fast and urllib3


def _seen(client: Client) -> dict[str, str]:
    """The Authorization and Cookie headers the server saw on this call."""
    return json.loads(client.call_tool("echo", {}).text)  # type: ignore[no-any-return]


def test_two_clients_of_one_origin_never_share_a_socket() -> None:
    with WireServer() as server:
        alice = Client.http(server.url, mode="legacy", headers={"Authorization": "Bearer alice"})
        bob = Client.http(server.url, mode="legacy", headers={"Authorization": "Bearer bob"})
        try:
            # one after the other: each call finds the other client's socket idle
            for _ in range(5):
                assert _seen(alice)["authorization"] == "Bearer alice"
                assert _seen(bob)["authorization"] == "Bearer bob"
            # and at once, from several threads each
            errors: list[BaseException] = []

            def run(client: Client, token: str) -> None:
                try:
                    for _ in range(10):
                        assert _seen(client)["authorization"] == token
                except BaseException as exc:  # noqa: BLE001
                    errors.append(exc)

            threads = [threading.Thread(target=run, args=(c, t)) for c, t in
                       [(alice, "Bearer alice"), (bob, "Bearer bob")] * 3]
            for th in threads:
                th.start()
            for th in threads:
                th.join(30)
            assert not errors, errors[:3]
        finally:
            alice.close()
            bob.close()
        per_connection = server.values("authorization")
    assert {v for values in per_connection.values() for v in values} == {"Bearer alice", "Bearer bob"}
    shared = {n: values for n, values in per_connection.items() if len(values) > 1}
    assert not shared, f"connections that carried both clients' requests: {shared}"


def test_a_client_keeps_its_cookies_and_sends_them_on_every_request() -> None:
    cookies = ["SRV=one; Path=/", "pref=a%2Cb; Path=/mcp; Expires=Wed, 09 Jun 2100 10:18:14 GMT", "gone=1; Path=/elsewhere"]
    with WireServer(set_cookies=cookies) as server:
        with Client.http(server.url, mode="legacy") as alice, Client.http(server.url, mode="legacy") as bob:
            assert sorted(_seen(alice)["cookie"].split("; ")) == ["SRV=one", "pref=a%2Cb"]
            assert sorted(_seen(bob)["cookie"].split("; ")) == ["SRV=one", "pref=a%2Cb"]  # its own, from its initialize
            for _ in range(3):
                assert sorted(_seen(alice)["cookie"].split("; ")) == ["SRV=one", "pref=a%2Cb"]
        requests = [h for reqs in server.seen.values() for h in reqs]
    # every request after the initialize answer carried them, notifications included
    assert [h.get("cookie", "") != "" for h in requests].count(False) == 2  # the two initialize requests
    assert all("gone=" not in h.get("cookie", "") for h in requests)  # another path's cookie stays home


def test_cookies_never_cross_clients() -> None:
    with WireServer(set_cookies=["SRV=one; Path=/"]) as server:
        with Client.http(server.url, mode="legacy") as alice:
            assert _seen(alice)["cookie"] == "SRV=one"
        server.set_cookies = []  # the next client is given none
        with Client.http(server.url, mode="legacy") as bob:
            assert _seen(bob)["cookie"] == ""


def test_a_cookie_the_caller_set_is_not_replaced() -> None:
    with WireServer(set_cookies=["SRV=one; Path=/"]) as server:
        with Client.http(server.url, mode="legacy", headers={"Cookie": "mine=1"}) as client:
            assert _seen(client)["cookie"] == "mine=1"


def test_an_empty_jar_is_never_asked(monkeypatch: pytest.MonkeyPatch) -> None:
    asked: list[str] = []
    real = _http_cookies.Cookies.headers

    def spy(self: Any, url: str, headers: Any) -> Any:
        asked.append(url)
        return real(self, url, headers)

    monkeypatch.setattr(_http_cookies.Cookies, "headers", spy)
    with WireServer() as server:
        with Client.http(server.url, mode="legacy") as client:
            for _ in range(3):
                _seen(client)
    assert asked == []
    with WireServer(set_cookies=["SRV=one"]) as server:
        with Client.http(server.url, mode="legacy") as client:
            _seen(client)
    assert asked  # once one is held, every request asks the jar


def test_transports_of_one_client_share_pools_and_cookies() -> None:
    with WireServer(set_cookies=["SRV=one; Path=/"]) as server:
        conns = ClientConnections()
        first = StreamableHTTPTransport(server.url, connections=conns)
        second = StreamableHTTPTransport(server.url, connections=conns)
        try:
            first.connect(5)
            second.connect(5)
            assert first.exchange.pools is second.exchange.pools
            first.send(b'{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25",'
                       b'"capabilities":{},"clientInfo":{"name":"t","version":"1"}}}', 5)
            assert first.receive(5) is not None
            assert conns.cookies.held
            second.send(b'{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"echo"}}', 5)
            answer = json.loads(second.receive(5) or b"{}")
            assert json.loads(answer["result"]["content"][0]["text"])["cookie"] == "SRV=one"
        finally:
            first.close()
            second.close()
        assert not conns.in_use()  # the last close gave the sockets back


@pytest.mark.skipif(not hasattr(__import__("os"), "fork"), reason="needs fork")
def test_a_forked_child_opens_its_own_sockets_for_the_same_client() -> None:
    """After os.fork() the parent's pooled sockets stay the parent's: the client's pools
    are forgotten in the child, whose calls on the same client connect anew."""
    from tests.helpers import run_in_child

    with WireServer() as server:
        client = Client.http(server.url, mode="legacy", headers={"Authorization": "parent"})
        try:
            _seen(client)  # the parent holds idle pooled sockets now
            with server.lock:
                before = {n: len(reqs) for n, reqs in server.seen.items()}

            def child() -> bytes:
                return b"ok" if _seen(client)["authorization"] == "parent" else b"crossed"

            assert run_in_child(child, timeout=20) == b"ok"
            with server.lock:
                after = {n: len(reqs) for n, reqs in server.seen.items()}
            # the child connected anew: nothing it sent went over a socket the parent holds
            assert {n: after[n] for n in before} == before, (before, after)
            assert len(after) > len(before)
            assert _seen(client)["authorization"] == "parent"
        finally:
            client.close()
