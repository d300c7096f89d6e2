"""Unit tests of the OAuth pieces: challenge parsing, canonical URIs, discovery order, PKCE, JOSE
(checked with PyJWT, an independent implementation), the loopback listener, and token refresh on
simulated expiry against a small in-process token endpoint."""

from __future__ import annotations

import base64
import hashlib
import http.server
import json
import threading
import time
from typing import Any, Iterator
from urllib.parse import parse_qs

import pytest
import requests

from mcpsync._errors import AuthError
from mcpsync.auth import (
    AuthorizationCode,
    ClientCredentials,
    Env,
    JWTBearer,
    DPoPKey,
    LoopbackRedirect,
    MemoryTokenStore,
    OAuth,
    SigningKey,
    TokenSet,
    canonical_resource,
    clear_metadata_cache,
    parse_www_authenticate,
)
from mcpsync.auth._jose import client_assertion, pkce_pair, s256
from mcpsync.auth._metadata import (
    AuthServerMetadata,
    authorization_server_metadata_urls,
    protected_resource_metadata_urls,
    resource_covers,
)

jwt = pytest.importorskip("jwt")


# ------------------------------------------------------------------------------ WWW-Authenticate


def test_parse_challenges() -> None:
    cs = parse_www_authenticate(
        'Bearer error="insufficient_scope", scope="files:read files:write", '
        'resource_metadata="https://mcp.example.com/.well-known/oauth-protected-resource/mcp", '
        'error_description="needs \\"write\\", sorry", DPoP algs="ES256 RS256", error=use_dpop_nonce'
    )
    assert [c.scheme for c in cs] == ["bearer", "dpop"]
    assert cs[0].error == "insufficient_scope"
    assert cs[0].scope == "files:read files:write"
    assert cs[0].resource_metadata.endswith("/oauth-protected-resource/mcp")
    assert cs[0].params["error_description"] == 'needs "write", sorry'
    assert cs[1].params["algs"] == "ES256 RS256" and cs[1].error == "use_dpop_nonce"
    assert parse_www_authenticate(None) == [] and parse_www_authenticate("") == []
    assert parse_www_authenticate("Bearer")[0].params == {}


# ------------------------------------------------------------------------------ URIs and order


def test_canonical_resource() -> None:
    assert canonical_resource("HTTPS://MCP.Example.com:443/mcp") == "https://mcp.example.com/mcp"
    assert canonical_resource("http://127.0.0.1:8080/") == "http://127.0.0.1:8080"
    assert canonical_resource("https://x.example/a/b?q=1#f") == "https://x.example/a/b"
    with pytest.raises(AuthError):
        canonical_resource("ftp://x.example/")


def test_resource_covers() -> None:
    assert resource_covers("https://x.example/mcp", "https://X.example/mcp")
    assert resource_covers("https://x.example", "https://x.example/mcp")
    assert resource_covers("https://x.example/api", "https://x.example/api/mcp")
    assert not resource_covers("https://x.example/api", "https://x.example/apifoo")
    assert not resource_covers("https://evil.example/mcp", "https://x.example/mcp")
    assert not resource_covers("https://x.example/other", "https://x.example/mcp")


def test_protected_resource_metadata_order() -> None:
    assert protected_resource_metadata_urls("https://x.example/public/mcp", "https://x.example/custom") == [
        "https://x.example/custom",
        "https://x.example/.well-known/oauth-protected-resource/public/mcp",
        "https://x.example/.well-known/oauth-protected-resource",
    ]
    assert protected_resource_metadata_urls("https://x.example") == ["https://x.example/.well-known/oauth-protected-resource"]


def test_authorization_server_metadata_order() -> None:
    assert authorization_server_metadata_urls("https://as.example/tenant1") == [
        "https://as.example/.well-known/oauth-authorization-server/tenant1",
        "https://as.example/.well-known/openid-configuration/tenant1",
        "https://as.example/tenant1/.well-known/openid-configuration",
    ]
    assert authorization_server_metadata_urls("https://as.example") == [
        "https://as.example/.well-known/oauth-authorization-server",
        "https://as.example/.well-known/openid-configuration",
    ]


def test_legacy_defaults() -> None:
    md = AuthServerMetadata.legacy("https://x.example")
    assert (md.authorization_endpoint, md.token_endpoint, md.registration_endpoint) == (
        "https://x.example/authorize", "https://x.example/token", "https://x.example/register",
    )


# ------------------------------------------------------------------------------ PKCE and JOSE


def test_pkce() -> None:
    verifier, challenge = pkce_pair()
    assert 43 <= len(verifier) <= 128
    assert set(verifier) <= set("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-._~")
    expected = base64.urlsafe_b64encode(hashlib.sha256(verifier.encode()).digest()).rstrip(b"=").decode()
    assert challenge == expected == s256(verifier)
    assert pkce_pair()[0] != verifier


def _verify(token: str, jwk: dict[str, Any], **kw: Any) -> dict[str, Any]:
    header = jwt.get_unverified_header(token)
    key = jwt.PyJWK.from_dict(jwk)
    return jwt.decode(token, key.key, algorithms=[header["alg"]], options={"verify_aud": "audience" in kw}, **kw)


@pytest.mark.parametrize("kind", ["ec", "rsa"])
def test_client_assertion_verifies_with_pyjwt(kind: str) -> None:
    if kind == "ec":
        key = SigningKey.generate()
    else:
        from cryptography.hazmat.primitives.asymmetric import rsa

        key = SigningKey(rsa.generate_private_key(public_exponent=65537, key_size=2048))
    token = client_assertion(key, "my-client", "https://as.example/token")
    claims = _verify(token, key.public_jwk(), audience="https://as.example/token")
    assert claims["iss"] == claims["sub"] == "my-client"
    assert claims["exp"] > claims["iat"] and claims["jti"]
    assert jwt.get_unverified_header(token)["kid"] == key.kid
    assert "d" not in key.public_jwk()  # never a private member


def test_dpop_proof_verifies_with_pyjwt() -> None:
    dpop = DPoPKey()
    proof = dpop.proof("post", "https://rs.example/mcp?x=1#frag", access_token="tok")
    header = jwt.get_unverified_header(proof)
    assert header["typ"] == "dpop+jwt" and header["alg"] == "ES256"
    claims = _verify(proof, header["jwk"])
    assert claims["htm"] == "POST" and claims["htu"] == "https://rs.example/mcp"
    assert claims["ath"] == base64.urlsafe_b64encode(hashlib.sha256(b"tok").digest()).rstrip(b"=").decode()
    assert "nonce" not in claims
    assert dpop.remember_nonce("https://rs.example/other", "n-1") is True
    assert dpop.remember_nonce("https://rs.example/other", "n-1") is False
    again = _verify(dpop.proof("GET", "https://rs.example/mcp", access_token="tok"), header["jwk"])
    assert again["nonce"] == "n-1" and again["jti"] != claims["jti"]
    # Nonces are per origin and per role: the token endpoint's are kept apart from the resource's.
    assert "nonce" not in _verify(dpop.proof("GET", "https://as.example/token"), header["jwk"])
    assert "nonce" not in _verify(dpop.proof("POST", "https://rs.example/token"), header["jwk"])
    dpop.remember_nonce("https://rs.example/token", "as-1", resource=False)
    assert _verify(dpop.proof("POST", "https://rs.example/token"), header["jwk"])["nonce"] == "as-1"
    assert _verify(dpop.proof("GET", "https://rs.example/mcp", access_token="t"), header["jwk"])["nonce"] == "n-1"


def test_oauth_dpop_headers_and_nonce_challenge() -> None:
    store = MemoryTokenStore()
    url = "https://rs.example/mcp"
    store.save_tokens(canonical_resource(url), TokenSet("bound-token", token_type="DPoP"))
    with OAuth(url, storage=store, dpop=True) as auth:
        h = auth.headers(url, "POST")
        assert h["Authorization"] == "DPoP bound-token"
        claims = jwt.decode(h["DPoP"], options={"verify_signature": False})
        assert claims["htm"] == "POST" and "ath" in claims
        retry = auth.on_response(url, "POST", 401, {
            "WWW-Authenticate": 'DPoP error="use_dpop_nonce", error_description="nonce"',
            "DPoP-Nonce": "server-nonce-1",
        })
        assert retry is True
        claims = jwt.decode(auth.headers(url, "POST")["DPoP"], options={"verify_signature": False})
        assert claims["nonce"] == "server-nonce-1"


def test_oauth_bearer_header_from_store_and_reprs() -> None:
    store = MemoryTokenStore()
    url = "https://rs.example/mcp"
    store.save_tokens(url, TokenSet("held-token-value", expires_at=time.time() + 3600))
    grant = AuthorizationCode(client_secret="client-secret-value", client_id="c")
    with OAuth(url, grant, storage=store) as auth:
        assert auth.headers(url, "GET") == {"Authorization": "Bearer held-token-value"}
        assert auth.token_env() == {"MCP_ACCESS_TOKEN": "held-token-value"}
        assert auth.token_env("GITHUB_TOKEN") == {"GITHUB_TOKEN": "held-token-value"}
        assert auth.get_valid_token() == "held-token-value"
        text = repr(auth) + repr(auth.tokens) + repr(store) + repr(grant)
        assert "held-token-value" not in text and "client-secret-value" not in text


def test_bad_grant_configuration() -> None:
    with pytest.raises(TypeError, match="grant object"):
        OAuth("https://x.example/mcp", "implicit", storage=MemoryTokenStore())  # type: ignore[arg-type]
    with pytest.raises(TypeError):
        JWTBearer(client_id="c")  # type: ignore[call-arg]  # the assertion is required


def test_env_values_are_read_when_the_oauth_is_made(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("MCPSYNC_TEST_CLIENT_ID", "from-env")
    monkeypatch.delenv("MCPSYNC_TEST_SECRET", raising=False)
    grant = ClientCredentials(client_id=Env("MCPSYNC_TEST_CLIENT_ID"), client_secret=Env("MCPSYNC_TEST_SECRET"))
    with OAuth("https://x.example/mcp", grant, storage=MemoryTokenStore()) as auth:
        client = auth._registrar.known_client(_md())
        assert client is not None and client.client_id == "from-env"
        assert client.client_secret is None and client.token_endpoint_auth_method == "none"


# ------------------------------------------------------------------------------ loopback listener


def test_loopback_listener_exact_port_and_path() -> None:
    with LoopbackRedirect() as lb:
        port = lb.port
        assert lb.redirect_uri == f"http://127.0.0.1:{port}/callback"
        # The port is taken: a second listener on it fails clearly.
        with pytest.raises(AuthError, match=str(port)):
            LoopbackRedirect(port)
        assert requests.get(f"http://127.0.0.1:{port}/other", timeout=5).status_code == 404
        r = requests.get(lb.redirect_uri, params={"code": "c1", "state": "s1"}, timeout=5)
        assert r.status_code == 200 and "close this window" in r.text
        assert lb.wait(5) == {"code": "c1", "state": "s1"}
    # Reusable at once, exactly (what a stored registration's redirect URI needs).
    with LoopbackRedirect(port) as again:
        assert again.port == port


def test_loopback_listener_wait_is_bounded() -> None:
    with LoopbackRedirect() as lb:
        with pytest.raises(AuthError, match="no authorization response"):
            lb.wait(0.2)


# ------------------------------------------------------------------------------ refresh on simulated expiry


class _TokenEndpoint(http.server.BaseHTTPRequestHandler):
    issued: list[str] = []
    forms: list[dict[str, str]] = []
    lifetime = 1

    def log_message(self, *a: Any) -> None:
        return

    def _json(self, status: int, data: dict[str, Any]) -> None:
        body = json.dumps(data).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def do_GET(self) -> None:  # noqa: N802
        origin = f"http://127.0.0.1:{self.server.server_address[1]}"
        if self.path == "/.well-known/oauth-protected-resource/mcp":
            self._json(200, {"resource": origin + "/mcp", "authorization_servers": [origin]})
        elif self.path == "/.well-known/oauth-authorization-server":
            self._json(200, {"issuer": origin, "token_endpoint": origin + "/token",
                             "authorization_endpoint": origin + "/authorize",
                             "grant_types_supported": ["authorization_code", "refresh_token"],
                             "code_challenge_methods_supported": ["S256"]})
        else:
            self._json(404, {})

    def do_POST(self) -> None:  # noqa: N802
        length = int(self.headers.get("Content-Length", 0))
        form = {k: v[0] for k, v in parse_qs(self.rfile.read(length).decode()).items()}
        type(self).forms.append(form)
        if form.get("grant_type") != "refresh_token" or not form.get("refresh_token", "").startswith("rt-"):
            self._json(400, {"error": "invalid_grant"})
            return
        n = len(type(self).issued)
        token = f"at-{n}"
        type(self).issued.append(token)
        self._json(200, {"access_token": token, "token_type": "bearer", "expires_in": type(self).lifetime,
                         "refresh_token": f"rt-{n}"})


@pytest.fixture()
def token_endpoint() -> Iterator[str]:
    _TokenEndpoint.issued = []
    _TokenEndpoint.forms = []
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _TokenEndpoint)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    clear_metadata_cache()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()
        thread.join(timeout=5)
        clear_metadata_cache()


def _seeded(origin: str, expires_in: float) -> tuple[MemoryTokenStore, str]:
    from mcpsync.auth import ClientInfo

    store = MemoryTokenStore()
    url = origin + "/mcp"
    now = time.time()
    store.save_tokens(url, TokenSet("at-old", expires_at=now + expires_in, refresh_token="rt-old", obtained_at=now - 2))
    store.save_client(origin, ClientInfo("cid", None, "none", (), origin, None, "dynamic"))
    return store, url


def test_simulated_expiry_is_refreshed_in_background(token_endpoint: str) -> None:
    # Lifetime 4 s, 2 s left: the refresher is due 1 s before expiry (a quarter of the lifetime).
    store, url = _seeded(token_endpoint, expires_in=2.0)
    with OAuth(url, storage=store, interactive=False) as auth:
        assert auth.headers(url, "POST") == {"Authorization": "Bearer at-old"}  # still valid now
        deadline = time.monotonic() + 15
        while auth.stats["background_refreshes"] < 1 and time.monotonic() < deadline:
            time.sleep(0.02)
        assert auth.stats["background_refreshes"] >= 1
        assert auth.headers(url, "POST")["Authorization"].startswith("Bearer at-")
        assert store.load_tokens(url).access_token != "at-old"
        form = _TokenEndpoint.forms[0]
        assert form["refresh_token"] == "rt-old" and form["resource"] == url and form["client_id"] == "cid"


def test_expired_token_refreshed_inline_by_get_valid_token(token_endpoint: str) -> None:
    store, url = _seeded(token_endpoint, expires_in=-5)  # already expired
    with OAuth(url, storage=store, interactive=False) as auth:
        token = auth.get_valid_token()
        assert token.startswith("at-") and token != "at-old"


def test_refused_refresh_drops_tokens_and_raises(token_endpoint: str) -> None:
    from mcpsync.auth import ClientInfo

    store = MemoryTokenStore()
    url = token_endpoint + "/mcp"
    store.save_tokens(url, TokenSet("at-old", expires_at=time.time() - 5, refresh_token="bogus"))
    store.save_client(token_endpoint, ClientInfo("cid", None, "none", (), token_endpoint))
    with OAuth(url, storage=store, interactive=False) as auth:
        with pytest.raises(AuthError) as info:
            auth.get_valid_token()
        assert "bogus" not in str(info.value)
        assert store.load_tokens(url) is None


def test_close_cancels_a_pending_browser_flow(token_endpoint: str) -> None:
    opened: list[str] = []
    auth = OAuth(token_endpoint + "/mcp", AuthorizationCode(client_id="cid", open_browser=opened.append),
                 storage=MemoryTokenStore(), interactive_timeout=30)
    threading.Timer(0.3, auth.close).start()
    with pytest.raises(AuthError, match="cancelled"):
        auth.authorize()
    assert opened and "code_challenge_method=S256" in opened[0]
    with pytest.raises(AuthError, match="closed"):
        auth.authorize()


def test_unclosed_oauth_is_collected_and_its_refresher_ends(token_endpoint: str) -> None:
    import gc
    import weakref

    store, url = _seeded(token_endpoint, expires_in=3600)
    auth = OAuth(url, storage=store, interactive=False)
    assert auth.headers(url, "GET")  # loads the tokens, starts the refresher
    thread = auth._refresher
    assert thread is not None and thread.is_alive()
    ref = weakref.ref(auth)
    del auth
    gc.collect()
    assert ref() is None
    thread.join(timeout=10)
    assert not thread.is_alive()


def test_default_store_is_the_os_keyring() -> None:
    from mcpsync.auth import KeyringTokenStore

    with OAuth("https://x.example/mcp") as auth:
        assert isinstance(auth._store, KeyringTokenStore)


def _md(**asm: Any):
    from mcpsync.auth import AuthMetadata, ProtectedResourceMetadata

    base = dict(issuer="https://as.example", authorization_endpoint="https://as.example/authorize",
                token_endpoint="https://as.example/token")
    base.update(asm)
    prm = ProtectedResourceMetadata("https://x.example/mcp", ("https://as.example",), scopes_supported=("files",))
    return AuthMetadata("https://x.example/mcp", "https://x.example/mcp", prm, AuthServerMetadata(**base))


def test_scope_selection_rules() -> None:
    # The resource's scopes_supported; offline_access only when the server offers it and refresh.
    assert _md().choose_scopes(None) == ["files"]
    assert _md(scopes_supported=("files", "offline_access")).choose_scopes(None) == ["files"]
    md = _md(scopes_supported=("files", "offline_access"), grant_types_supported=("authorization_code", "refresh_token"))
    assert md.choose_scopes(None) == ["files", "offline_access"]
    assert md.choose_scopes(None, offline=False) == ["files"]
    # The challenge's scope wins over scopes_supported.
    from dataclasses import replace

    assert replace(_md(), challenge_scope="a b").choose_scopes(None) == ["a", "b"]
    assert _md().choose_scopes(["explicit"]) == ["explicit"]


def test_token_endpoint_auth_method_choice() -> None:
    with OAuth("https://x.example/mcp", storage=MemoryTokenStore()) as oauth:
        auth = oauth._registrar
        asm = _md().authorization_server
        assert auth.pick_method(asm, has_secret=False) == "none"
        assert auth.pick_method(asm, has_secret=True) == "client_secret_basic"  # RFC 8414 default
        post_only = _md(token_endpoint_auth_methods_supported=("client_secret_post",)).authorization_server
        assert auth.pick_method(post_only, has_secret=True) == "client_secret_post"
        jwt_only = _md(token_endpoint_auth_methods_supported=("private_key_jwt",)).authorization_server
        with pytest.raises(AuthError, match="no token-endpoint auth method"):
            auth.pick_method(jwt_only, has_secret=True)
    grant = ClientCredentials(client_id="c", private_key=SigningKey.generate())
    with OAuth("https://x.example/mcp", grant, storage=MemoryTokenStore()) as oauth:
        assert oauth._registrar.pick_method(jwt_only, has_secret=False) == "private_key_jwt"


def test_pkce_s256_refused_when_not_advertised() -> None:
    with OAuth("https://x.example/mcp", AuthorizationCode(client_id="c"), storage=MemoryTokenStore()) as auth:
        with pytest.raises(AuthError, match="S256"):
            auth.initiate_authorization(_md(code_challenge_methods_supported=("plain",)),
                                        redirect_uri="http://127.0.0.1:1/callback")
        req = auth.initiate_authorization(_md(code_challenge_methods_supported=("S256",)),
                                          redirect_uri="http://127.0.0.1:1/callback")
        q = parse_qs(req.url.split("?", 1)[1])
        assert q["code_challenge_method"] == ["S256"] and q["resource"] == ["https://x.example/mcp"]
        assert q["code_challenge"] == [s256(req.verifier)] and len(q["state"][0]) >= 32
        assert q["scope"] == ["files"] and q["client_id"] == ["c"]


class _RootOnly(_TokenEndpoint):
    def do_GET(self) -> None:  # noqa: N802
        origin = f"http://127.0.0.1:{self.server.server_address[1]}"
        if self.path == "/.well-known/oauth-protected-resource":  # root only, no path-based document
            self._json(200, {"resource": origin, "authorization_servers": [origin + "/tenant"]})
        elif self.path == "/tenant/.well-known/openid-configuration":  # OIDC, path appended
            self._json(200, {"issuer": origin + "/tenant", "token_endpoint": origin + "/tenant/token"})
        else:
            self._json(404, {})


def test_discovery_falls_back_to_root_resource_metadata_and_oidc() -> None:
    from mcpsync.auth import discover_auth_metadata

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _RootOnly)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        origin = f"http://127.0.0.1:{server.server_address[1]}"
        md = discover_auth_metadata(origin + "/deep/mcp", use_cache=False)
        assert md.protected_resource.url == origin + "/.well-known/oauth-protected-resource"
        assert md.resource == origin  # a parent of the server URL on the same origin
        assert md.issuer == origin + "/tenant"
        assert md.authorization_server.url == origin + "/tenant/.well-known/openid-configuration"
    finally:
        server.shutdown()
        server.server_close()
        thread.join(timeout=5)
