"""The ``proxy=`` option and the proxy variables, through a real forward proxy (Debian's
tinyproxy, on 127.0.0.1): every request of both HTTP transports goes through it (plain
requests carry its ``Via``, https ones are tunnelled with ``CONNECT``), the option wins
over ``HTTP(S)_PROXY`` / ``NO_PROXY``, the variables keep working without it, a proxy's
credentials are sent and never quoted, and the OAuth requests take the same option.
"""

from __future__ import annotations

import ssl
from pathlib import Path
from typing import Iterator

import pytest

from mcpsync import Client
from mcpsync._errors import MCPError
from tests.servers import http_support as hs
from tests.servers.forward_proxy import TinyProxy, tinyproxy, tinyproxy_binary
from tests.servers.pki import make_pki
from tests.servers.wire_server import WireServer

pytestmark = [
    pytest.mark.timeout(90),
    pytest.mark.skipif(tinyproxy_binary() is None, reason="tinyproxy is not installed (tests/setup/55-tinyproxy.sh)"),
]

_VARIABLES = ("HTTP_PROXY", "HTTPS_PROXY", "ALL_PROXY", "NO_PROXY", "http_proxy", "https_proxy", "all_proxy", "no_proxy")


@pytest.fixture
def clean_env(monkeypatch: pytest.MonkeyPatch) -> pytest.MonkeyPatch:
    for name in _VARIABLES:
        monkeypatch.delenv(name, raising=False)
    return monkeypatch


@pytest.fixture
def proxy(tmp_path: Path) -> Iterator[TinyProxy]:
    with tinyproxy(tmp_path / "tinyproxy") as p:
        yield p


def _vias(server: WireServer) -> list[str]:
    """The ``Via`` of each connection's first request. tinyproxy adds its own to the first
    request of each connection it opens to the server (and relays the rest as they are):
    a connection made without it has none."""
    return [reqs[0].get("via", "") for reqs in server.seen.values() if reqs]


def test_an_explicit_proxy_carries_every_request(proxy: TinyProxy, clean_env: pytest.MonkeyPatch) -> None:
    with WireServer() as server:
        with Client.http(server.url, mode="legacy", proxy=proxy.url) as client:
            for _ in range(3):
                client.call_tool("echo", {})
        vias = _vias(server)
    assert vias and all("tinyproxy" in v for v in vias), vias
    assert any(r.startswith(f"POST {server.url} ") for r in proxy.requests())


def test_the_option_wins_over_the_variables(proxy: TinyProxy, clean_env: pytest.MonkeyPatch) -> None:
    clean_env.setenv("HTTP_PROXY", "http://127.0.0.1:1")  # nothing listens there
    clean_env.setenv("NO_PROXY", "127.0.0.1")
    with WireServer() as server:
        with Client.http(server.url, mode="legacy", proxy=proxy.url) as client:
            client.call_tool("echo", {})
        assert _vias(server) and all("tinyproxy" in v for v in _vias(server))


def test_the_variables_keep_working(proxy: TinyProxy, clean_env: pytest.MonkeyPatch) -> None:
    clean_env.setenv("HTTP_PROXY", proxy.url)
    with WireServer() as server:
        with Client.http(server.url, mode="legacy") as client:
            client.call_tool("echo", {})
        assert _vias(server) and all("tinyproxy" in v for v in _vias(server))
    clean_env.setenv("NO_PROXY", "127.0.0.1")
    with WireServer() as server:
        with Client.http(server.url, mode="legacy") as client:
            client.call_tool("echo", {})
        assert not any(_vias(server))


def test_a_proxys_credentials_are_sent_and_never_quoted(tmp_path: Path, clean_env: pytest.MonkeyPatch) -> None:
    with tinyproxy(tmp_path / "tp", auth=("agent", "s3cret-pw")) as p, WireServer() as server:
        with Client.http(server.url, mode="legacy", proxy=f"http://agent:s3cret-pw@127.0.0.1:{p.port}") as client:
            client.call_tool("echo", {})
        assert _vias(server) and all("tinyproxy" in v for v in _vias(server))
        client = Client.http(server.url, mode="legacy", proxy=f"http://agent:wr0ng-pw@127.0.0.1:{p.port}")
        try:
            with pytest.raises(MCPError) as info:
                client.call_tool("echo", {}, timeout=10)
        finally:
            client.close()
        assert "wr0ng-pw" not in str(info.value)  # (tinyproxy answers 407 and resets the connection)


def test_https_is_tunnelled_through_the_proxy(proxy: TinyProxy, clean_env: pytest.MonkeyPatch, tmp_path: Path) -> None:
    pki = make_pki(tmp_path / "pki")
    context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    context.load_cert_chain(*pki.server)
    with WireServer(tls=context) as server:
        with Client.http(server.url, mode="legacy", proxy=proxy.url, verify=pki.ca) as client:
            client.call_tool("echo", {})
        assert _vias(server) and not any(_vias(server))  # through a tunnel: the proxy added nothing
    assert any(r.startswith(f"CONNECT 127.0.0.1:{server.port} ") for r in proxy.requests())


def test_http_sse_goes_through_the_proxy(proxy: TinyProxy, clean_env: pytest.MonkeyPatch) -> None:
    port = hs.free_port()
    with hs.run_server(hs.sdk_server_argv(port, "--transport", "sse"), port):
        with Client.sse(f"http://127.0.0.1:{port}/sse", proxy=proxy.url) as client:
            assert client.call_tool("echo", {"message": "via"}).text == "Echo: via"
    lines = proxy.requests()
    assert f"GET http://127.0.0.1:{port}/sse HTTP/1.1" in lines
    assert any(r.startswith(f"POST http://127.0.0.1:{port}/messages/") for r in lines)


def test_oauth_requests_take_the_proxy(proxy: TinyProxy, clean_env: pytest.MonkeyPatch) -> None:
    from mcpsync.auth import MemoryTokenStore, OAuth

    with WireServer() as server:
        auth = OAuth(server.url, storage=MemoryTokenStore(), proxy=proxy.url)
        try:
            auth.discover_auth_metadata(use_cache=False)  # 405s there: discovery falls back
        finally:
            auth.close()
    assert any("/.well-known/oauth-protected-resource" in r for r in proxy.requests())
