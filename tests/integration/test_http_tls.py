"""Trust and client certificates (issue 29), on both HTTP paths, against real TLS servers on
127.0.0.1 whose private CA, server and client certificates are made at test time.

- ``cert=`` (mTLS): the official SDK's server behind uvicorn requiring a client certificate
  signed by the CA (Streamable HTTP and HTTP+SSE): with the certificate the call works,
  without it a typed :class:`ConnectError` naming TLS; the OAuth requests show it too.
- ``verify=``: a CA file, a CA directory, an ``ssl.SSLContext``, ``"system"`` (truststore),
  and with ``verify=True`` the bundle ``REQUESTS_CA_BUNDLE`` / ``CURL_CA_BUNDLE`` /
  ``SSL_CERT_FILE`` / ``SSL_CERT_DIR`` names; without any, the private CA is refused.
"""

from __future__ import annotations

import json
import ssl
from pathlib import Path
from typing import Any, Iterator

import pytest

from mcpsync import Client, ClientSpec
from mcpsync._errors import ConnectError
from mcpsync.transports._tls import CA_VARIABLES, tls_context
from tests.servers import http_support as hs
from tests.servers.pki import PKI, make_pki
from tests.servers.wire_server import WireServer

pytestmark = [pytest.mark.timeout(90), pytest.mark.usefixtures("http_path")]  # both HTTP paths: fast and urllib3


@pytest.fixture(scope="module")
def pki(tmp_path_factory: pytest.TempPathFactory) -> PKI:
    import shutil

    if shutil.which("openssl") is None:
        pytest.skip("openssl is not installed (it names the CA directory's file)")
    return make_pki(tmp_path_factory.mktemp("pki"))


@pytest.fixture(scope="module")
def mtls(pki: PKI) -> Iterator[dict[str, str]]:
    """The SDK's servers over TLS that require a client certificate: Streamable HTTP and HTTP+SSE."""
    tls = ["--tls", *pki.server, "--client-ca", pki.ca]
    ports = hs.free_port(), hs.free_port()
    with hs.run_server(hs.sdk_server_argv(ports[0], "--json", *tls), ports[0]), \
            hs.run_server(hs.sdk_server_argv(ports[1], "--transport", "sse", *tls), ports[1]):
        yield {"http": f"https://127.0.0.1:{ports[0]}/mcp", "sse": f"https://127.0.0.1:{ports[1]}/sse",
               "health": f"https://127.0.0.1:{ports[0]}/admin/health"}


@pytest.fixture
def tls_wire(pki: PKI) -> Iterator[WireServer]:
    """A raw HTTPS server (no client certificate asked) whose certificate the private CA signed."""
    context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    context.load_cert_chain(*pki.server)
    with WireServer(tls=context) as server:
        yield server


@pytest.fixture
def no_ca_variables(monkeypatch: pytest.MonkeyPatch) -> pytest.MonkeyPatch:
    for name in CA_VARIABLES:
        monkeypatch.delenv(name, raising=False)
    return monkeypatch


def _client(kind: str, url: str, **options: Any) -> Client:
    maker = Client.http if kind == "http" else Client.sse
    return maker(url, name=kind, **options)  # type: ignore[operator]


@pytest.mark.parametrize("kind", ["http", "sse"])
@pytest.mark.parametrize("form", ["pair", "one-file"])
def test_a_client_certificate_opens_an_mtls_server(pki: PKI, mtls: dict[str, str], kind: str, form: str) -> None:
    cert = pki.client if form == "pair" else pki.client_pem
    with _client(kind, mtls[kind], verify=pki.ca, cert=cert) as client:
        assert client.call_tool("echo", {"message": "mtls"}).text == "Echo: mtls"


@pytest.mark.parametrize("kind", ["http", "sse"])
def test_without_the_certificate_an_mtls_server_is_a_connect_error_naming_tls(pki: PKI, mtls: dict[str, str], kind: str) -> None:
    client = _client(kind, mtls[kind], verify=pki.ca)
    try:
        with pytest.raises(ConnectError, match="TLS") as info:
            client.call_tool("echo", {"message": "no cert"}, timeout=15)
        assert "certificate" in str(info.value).lower()
    finally:
        client.close()


def test_oauth_requests_show_the_client_certificate(pki: PKI, mtls: dict[str, str], no_ca_variables: Any) -> None:
    from mcpsync.auth import MemoryTokenStore, OAuth

    with_cert = OAuth(mtls["http"], storage=MemoryTokenStore(), verify=pki.ca, cert=pki.client)
    without = OAuth(mtls["http"], storage=MemoryTokenStore(), verify=pki.ca)
    untrusting = OAuth(mtls["http"], storage=MemoryTokenStore(), cert=pki.client)
    try:
        # the SDK's server publishes no metadata: discovery reads its answers (404s) and falls back
        md = with_cert.discover_auth_metadata(use_cache=False)
        assert md.authorization_server.token_endpoint.startswith("https://127.0.0.1:")
        assert with_cert._endpoint.http.get(mtls["health"], timeout=10).text == "ok"
        with pytest.raises(ConnectError):  # no certificate shown: the server closes the connection
            without.discover_auth_metadata(use_cache=False)
        with pytest.raises(ConnectError, match="SSLError"):  # the server's CA is not trusted
            untrusting.discover_auth_metadata(use_cache=False)
    finally:
        for auth in (with_cert, without, untrusting):
            auth.close()


def test_oauth_takes_verify_or_a_session_not_both() -> None:
    import requests

    from mcpsync.auth import MemoryTokenStore, OAuth

    with pytest.raises(ValueError, match="session"):
        OAuth("https://127.0.0.1:1/mcp", storage=MemoryTokenStore(), session=requests.Session(), verify=False)


def _who(client: Client) -> str:
    return json.loads(client.call_tool("echo", {}).text)["authorization"]  # type: ignore[no-any-return]


def _refused(url: str, **options: Any) -> None:
    client = Client.http(url, mode="legacy", **options)
    try:
        with pytest.raises(ConnectError, match="TLS failure .*CERTIFICATE_VERIFY_FAILED"):
            client.call_tool("echo", {}, timeout=10)
    finally:
        client.close()


def test_the_private_ca_is_refused_by_default(tls_wire: WireServer, no_ca_variables: Any) -> None:
    _refused(tls_wire.url)


@pytest.mark.parametrize("how", ["file", "directory", "context"])
def test_verify_takes_a_ca_file_a_ca_directory_or_a_context(pki: PKI, tls_wire: WireServer, no_ca_variables: Any, how: str) -> None:
    verify: Any = {"file": pki.ca, "directory": pki.ca_dir, "context": ssl.create_default_context(cafile=pki.ca)}[how]
    with Client.http(tls_wire.url, mode="legacy", verify=verify, headers={"Authorization": how}) as client:
        assert _who(client) == how


@pytest.mark.parametrize("variable", CA_VARIABLES)
def test_verify_true_honours_the_ca_variables(pki: PKI, tls_wire: WireServer, no_ca_variables: pytest.MonkeyPatch, variable: str) -> None:
    no_ca_variables.setenv(variable, pki.ca_dir if variable == "SSL_CERT_DIR" else pki.ca)
    with Client.http(tls_wire.url, mode="legacy", headers={"Authorization": variable}) as client:
        assert _who(client) == variable


def test_a_ca_variable_naming_nothing_is_a_clear_error(no_ca_variables: pytest.MonkeyPatch, tmp_path: Path) -> None:
    no_ca_variables.setenv("REQUESTS_CA_BUNDLE", str(tmp_path / "missing.pem"))
    with pytest.raises(ValueError, match="REQUESTS_CA_BUNDLE"):
        Client.http("https://127.0.0.1:1/mcp")


def test_verify_system_uses_the_operating_systems_store(pki: PKI, tls_wire: WireServer, no_ca_variables: pytest.MonkeyPatch) -> None:
    truststore = pytest.importorskip("truststore")
    assert isinstance(tls_context("system"), truststore.SSLContext)
    _refused(tls_wire.url, verify="system")  # the private CA is not in it
    # OpenSSL's own variable points the system store at another bundle (as a corporate setup may)
    no_ca_variables.setenv("SSL_CERT_FILE", pki.ca)
    with Client.http(tls_wire.url, mode="legacy", verify="system", headers={"Authorization": "system"}) as client:
        assert _who(client) == "system"


@pytest.mark.parametrize(
    "options, error",
    [
        ({"verify": "/no/such/ca.pem"}, ValueError),
        ({"verify": 3}, TypeError),
        ({"cert": "/no/such/client.pem"}, ValueError),
        ({"cert": ("a", "b", "c")}, TypeError),
        ({"cert": "x", "verify": ssl.create_default_context()}, ValueError),
        ({"proxy": "socks5://127.0.0.1:1080"}, ValueError),
        ({"proxy": "http://user:s3cret@127.0.0.1:notaport"}, ValueError),
    ],
)
def test_bad_tls_and_proxy_options_fail_the_constructor(options: dict[str, Any], error: type[Exception]) -> None:
    with pytest.raises(error) as info:
        Client.http("https://127.0.0.1:1/mcp", **options)
    assert "s3cret" not in str(info.value)


def test_a_context_does_not_travel_in_a_spec(pki: PKI) -> None:
    with pytest.raises(TypeError, match="SSLContext"):
        ClientSpec.http("https://127.0.0.1:1/mcp", verify=ssl.create_default_context())
    spec = ClientSpec.http("https://127.0.0.1:1/mcp", verify=pki.ca, cert=pki.client)  # paths travel
    import pickle

    assert pickle.loads(pickle.dumps(spec)) == spec


def test_a_config_file_sets_verify_cert_and_proxy(pki: PKI, mtls: dict[str, str], monkeypatch: pytest.MonkeyPatch) -> None:
    from mcpsync import ConfigError, load_config

    monkeypatch.setenv("CLIENT_KEY", pki.client[1])
    doc = {"mcpServers": {"api": {"url": mtls["http"], "verify": pki.ca, "cert": [pki.client[0], "${CLIENT_KEY}"]}}}
    with Client.from_config(doc, "api") as client:
        assert client.call_tool("echo", {"message": "cfg"}).text == "Echo: cfg"
    server = load_config(doc)["api"]
    assert server.cert == (pki.client[0], pki.client[1]) and "${CLIENT_KEY}" in repr(server)
    with pytest.raises(ConfigError, match="http and sse"):
        load_config({"mcpServers": {"ws": {"url": "ws://127.0.0.1:1/mcp", "proxy": "http://127.0.0.1:3128"}}}, strict=True)
    with pytest.raises(ConfigError, match="verify"):
        load_config({"mcpServers": {"api": {"url": mtls["http"], "verify": 3}}}, strict=True)


def test_a_refusing_alert_is_a_connect_error_and_the_request_was_never_read(pki: PKI) -> None:
    """A server that ends the handshake with an alert (OpenSSL's blocking servers, Go's, ...)
    over a missing certificate: a ConnectError saying so (TLS 1.3 delivers the alert after
    the client wrote its request, which the server never read)."""
    context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    context.load_cert_chain(*pki.server)
    context.verify_mode = ssl.CERT_REQUIRED
    context.load_verify_locations(cafile=pki.ca)
    with WireServer(tls=context) as server:
        client = Client.http(server.url, mode="legacy", verify=pki.ca)
        try:
            with pytest.raises(ConnectError, match="TLS failure .*requires a client certificate"):
                client.call_tool("echo", {}, timeout=10)
        finally:
            client.close()
        assert not [h for reqs in server.seen.values() for h in reqs]  # no request was read
        with Client.http(server.url, mode="legacy", verify=pki.ca, cert=pki.client, headers={"Authorization": "mtls"}) as client:
            assert _who(client) == "mtls"
