"""OAuth end to end against the official mcp SDK's authorization server (tests/servers/auth_sdk_server.py).

Every test starts a real server in a subprocess on 127.0.0.1 and talks to its bearer-protected MCP
endpoint with ``requests`` driven by an :class:`mcpsync.auth.OAuth` object, exactly as the HTTP
transports do: ``headers()`` before each request, ``on_response()`` on 401/403, one retry.
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import select
import subprocess
import threading
import time
from typing import Any, Iterator

import pytest
import requests

from mcpsync._errors import AuthError, PermissionDenied
from mcpsync.auth import (
    AuthorizationCode,
    Env,
    Grant,
    IdJag,
    JWTBearer,
    KeyringTokenStore,
    LoopbackRedirect,
    MemoryTokenStore,
    OAuth,
    canonical_resource,
    clear_metadata_cache,
)
from tests.conftest import PYTHON, SERVERS, free_port
from tests.helpers import wait_until

pytestmark = pytest.mark.timeout(90)

PROTOCOL = "2025-06-18"


@contextlib.contextmanager
def auth_server(*flags: str, layout: str = "one-origin", lifetime: int = 3600) -> Iterator[dict[str, str]]:
    port = free_port()
    argv = [PYTHON, str(SERVERS / "auth_sdk_server.py"), "--port", str(port), "--layout", layout,
            "--token-lifetime", str(lifetime), *flags]
    as_port = port
    if layout == "split":
        as_port = free_port()
        argv += ["--as-port", str(as_port)]
    proc = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        deadline = time.monotonic() + 30
        line = ""
        while time.monotonic() < deadline:
            ready, _, _ = select.select([proc.stdout], [], [], 0.5)
            if ready:
                line = proc.stdout.readline()
                if "READY" in line or not line:
                    break
            if proc.poll() is not None:
                break
        if "READY" not in line:
            proc.kill()
            raise RuntimeError("auth server did not start: " + (proc.stderr.read() or "")[-2000:])
        clear_metadata_cache()
        yield {
            "mcp": f"http://127.0.0.1:{port}/mcp",
            "rs": f"http://127.0.0.1:{port}",
            "as": f"http://127.0.0.1:{as_port}",
        }
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=5)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(timeout=5)
        clear_metadata_cache()


def browser(url: str) -> None:
    """The harness's 'browser': follow the authorization URL's redirects (to the loopback listener)."""
    requests.get(url, allow_redirects=True, timeout=10).close()


_ids = iter(range(1, 1_000_000))


def rpc(method: str, params: dict[str, Any] | None = None) -> dict[str, Any]:
    return {"jsonrpc": "2.0", "id": next(_ids), "method": method, "params": params or {}}


def initialize() -> dict[str, Any]:
    return rpc("initialize", {"protocolVersion": PROTOCOL, "capabilities": {}, "clientInfo": {"name": "t", "version": "0"}})


def call(auth: OAuth, url: str, body: dict[str, Any]) -> requests.Response:
    """POST one JSON-RPC message the way a transport does: auth headers, on 401/403 one retry."""
    for attempt in range(2):
        headers = {
            "Content-Type": "application/json",
            "Accept": "application/json, text/event-stream",
            "MCP-Protocol-Version": PROTOCOL,
            **auth.headers(url, "POST"),
        }
        resp = requests.post(url, json=body, headers=headers, timeout=10)
        if resp.status_code in (401, 403) and attempt == 0:
            if auth.on_response(url, "POST", resp.status_code, resp.headers):
                continue
        return resp
    return resp


def raw(url: str, token: str | None, body: dict[str, Any]) -> requests.Response:
    headers = {"Content-Type": "application/json", "Accept": "application/json, text/event-stream",
               "MCP-Protocol-Version": PROTOCOL}
    if token:
        headers["Authorization"] = f"Bearer {token}"
    return requests.post(url, json=body, headers=headers, timeout=10)


def tool(name: str, **arguments: Any) -> dict[str, Any]:
    return rpc("tools/call", {"name": name, "arguments": arguments})


def tool_text(resp: requests.Response) -> str:
    assert resp.status_code == 200, (resp.status_code, resp.text[:300])
    return resp.json()["result"]["content"][0]["text"]


def make_auth(urls: dict[str, str], store=None, grant: Grant | None = None, **kw: Any) -> OAuth:
    kw.setdefault("interactive_timeout", 10.0)
    grant = grant if grant is not None else AuthorizationCode(open_browser=browser)
    return OAuth(urls["mcp"], grant, storage=store if store is not None else MemoryTokenStore(), **kw)


# ---------------------------------------------------------------------------------- full flow


@pytest.mark.parametrize("layout", ["one-origin", "split"])
def test_full_lifecycle(layout: str, caplog: pytest.LogCaptureFixture) -> None:
    """discovery → registration → authorize → token → call → expiry → background refresh →
    step-up → revoke → 401 again."""
    caplog.set_level(logging.DEBUG)
    with auth_server(layout=layout, lifetime=3) as urls:
        store = MemoryTokenStore()
        with make_auth(urls, store) as auth:
            # 401 → discovery → DCR → authorize (loopback redirect) → token → retried call.
            resp = call(auth, urls["mcp"], initialize())
            assert resp.status_code == 200, resp.text[:300]
            assert resp.json()["result"]["serverInfo"]["name"].startswith("auth-test")
            assert auth.stats["authorizations"] == 1
            md = auth.discover_auth_metadata()
            assert md.issuer == urls["as"]
            assert md.authorization_server.token_endpoint == urls["as"] + "/token"
            assert md.protected_resource is not None and md.resource == urls["mcp"]
            client = store.load_client(urls["as"])
            assert client is not None and client.source == "dynamic"
            assert client.redirect_uris and client.redirect_uris[0].startswith("http://127.0.0.1:")
            first = store.load_tokens(urls["mcp"])
            assert first is not None and first.refresh_token
            # offline_access is asked for because the server advertises it.
            assert first.scopes == {"mcp", "offline_access"}
            who = json.loads(tool_text(call(auth, urls["mcp"], tool("whoami"))))
            assert who["client_id"] == client.client_id and "mcp" in who["scopes"]

            # Expiry (3 s lifetime) → refreshed in the background, before it expires.
            assert wait_until(lambda: auth.stats["background_refreshes"] >= 1, 20)
            second = auth.tokens
            assert second is not None and second.access_token != first.access_token
            assert store.load_tokens(urls["mcp"]) == second
            # The server rotated: the old token is dead, the new one works without another authorization.
            assert raw(urls["mcp"], first.access_token, tool("whoami")).status_code == 401
            assert tool_text(call(auth, urls["mcp"], tool("whoami")))
            assert auth.stats["authorizations"] == 1

            # Step-up: admin_echo answers 403 insufficient_scope → re-authorize with the union.
            assert tool_text(call(auth, urls["mcp"], tool("admin_echo", text="hi"))) == "admin: hi"
            assert auth.stats["step_ups"] == 1
            assert {"mcp", "admin"} <= auth.tokens.scopes

            # Revoke → the server forgets the token → 401 again; nothing is stored locally.
            token = auth.tokens.access_token
            assert auth.revoke() is True
            assert auth.tokens is None and store.load_tokens(urls["mcp"]) is None
            assert raw(urls["mcp"], token, tool("whoami")).status_code == 401

            # And the next call authorizes afresh (the registration is reused).
            assert tool_text(call(auth, urls["mcp"], tool("whoami")))
            assert auth.stats["authorizations"] == 3
            assert store.load_client(urls["as"]) == client
            secrets_seen = [first.access_token, first.refresh_token, second.access_token, token]
    text = caplog.text + repr(auth) + repr(store) + repr(first) + repr(client)
    for secret in secrets_seen:
        assert secret not in text


def test_concurrent_401s_share_one_authorization() -> None:
    with auth_server() as urls, make_auth(urls) as auth:
        results: list[int] = []
        errors: list[BaseException] = []

        def worker() -> None:
            try:
                results.append(call(auth, urls["mcp"], tool("whoami")).status_code)
            except BaseException as exc:  # pragma: no cover - reported below
                errors.append(exc)

        threads = [threading.Thread(target=worker) for _ in range(8)]
        for t in threads:
            t.start()
        for t in threads:
            t.join(timeout=60)
        assert not errors and results == [200] * 8
        assert auth.stats["authorizations"] == 1


@pytest.mark.parametrize("layout", ["one-origin", "split"])
def test_401_triggers_one_refresh_and_retry(layout: str) -> None:
    """The server drops every access token early (refresh tokens survive): the next call's 401
    is answered by one refresh and one retry — no new authorization."""
    with auth_server(layout=layout) as urls, make_auth(urls) as auth:
        assert call(auth, urls["mcp"], initialize()).status_code == 200
        held = auth.tokens
        requests.post(urls["as"] + "/test/expire-access", timeout=5).close()
        assert raw(urls["mcp"], held.access_token, initialize()).status_code == 401
        assert tool_text(call(auth, urls["mcp"], tool("whoami")))
        assert auth.stats["refreshes"] == 1 and auth.stats["authorizations"] == 1
        assert auth.tokens.access_token != held.access_token


def test_refresh_refused_falls_back_to_authorization() -> None:
    """Access and refresh tokens both dead: the refresh is refused, the flow starts again."""
    with auth_server() as urls:
        store = MemoryTokenStore()
        with make_auth(urls, store) as auth:
            assert call(auth, urls["mcp"], initialize()).status_code == 200
            held = auth.tokens
            requests.post(urls["as"] + "/test/expire-all", timeout=5).close()
            assert tool_text(call(auth, urls["mcp"], tool("whoami")))
            assert auth.stats["refreshes"] == 0 and auth.stats["authorizations"] == 2
            assert store.load_tokens(urls["mcp"]).refresh_token != held.refresh_token


def test_resource_metadata_naming_another_server_aborts() -> None:
    """Reached as http://localhost:…, the server's metadata names http://127.0.0.1:…: refused."""
    with auth_server() as urls:
        url = urls["mcp"].replace("127.0.0.1", "localhost")
        store = MemoryTokenStore()
        with OAuth(url, AuthorizationCode(open_browser=browser), storage=store, interactive_timeout=10) as auth:
            with pytest.raises(AuthError, match="not the server"):
                call(auth, url, initialize())
            assert store.load_tokens(canonical_resource(url)) is None


def test_preregistered_confidential_client_basic_auth(monkeypatch: pytest.MonkeyPatch) -> None:
    port = free_port()
    redirect = f"http://127.0.0.1:{port}/callback"
    client = {
        "client_id": "pre-registered",
        "client_secret": "pre-secret-value",
        "token_endpoint_auth_method": "client_secret_basic",
        "redirect_uris": [redirect],
        "grant_types": ["authorization_code", "refresh_token"],
        "scope": "mcp admin offline_access",
    }
    monkeypatch.setenv("MY_MCP_CLIENT_ID", "pre-registered")
    monkeypatch.setenv("MY_MCP_CLIENT_SECRET", "pre-secret-value")
    with auth_server("--preregister", json.dumps(client)) as urls:
        store = MemoryTokenStore()
        grant = AuthorizationCode(client_id=Env("MY_MCP_CLIENT_ID"), client_secret=Env("MY_MCP_CLIENT_SECRET"),
                                  redirect_port=port, open_browser=browser)
        with make_auth(urls, store, grant) as auth:
            assert call(auth, urls["mcp"], initialize()).status_code == 200
            assert store.load_client(urls["as"]) is None  # pre-registered: nothing registered
            before = auth.tokens
            after = auth.refresh_access_token()  # refresh authenticates with client_secret_basic too
            assert after.access_token != before.access_token
            assert "pre-secret-value" not in repr(auth) + repr(after)


def test_preregistered_client_from_the_store() -> None:
    """A pre-registered client kept in the credential store (keyed by issuer) is used as is."""
    port = free_port()
    client = {
        "client_id": "stored-client", "client_secret": "stored-secret",
        "token_endpoint_auth_method": "client_secret_post", "redirect_uris": [f"http://127.0.0.1:{port}/callback"],
        "grant_types": ["authorization_code", "refresh_token"], "scope": "mcp offline_access",
    }
    from mcpsync.auth import ClientInfo

    with auth_server("--preregister", json.dumps(client)) as urls:
        store = MemoryTokenStore()
        store.save_client(urls["as"], ClientInfo("stored-client", "stored-secret", "client_secret_post",
                                                 (f"http://127.0.0.1:{port}/callback",), urls["as"]))
        with make_auth(urls, store) as auth:
            who = json.loads(tool_text(call(auth, urls["mcp"], tool("whoami"))))
            assert who["client_id"] == "stored-client"  # no dynamic registration happened
            req = auth.initiate_authorization(redirect_uri=f"http://127.0.0.1:{port}/callback")
            assert "state" not in repr(req) and req.verifier not in repr(req)


def test_legacy_server_without_protected_resource_metadata() -> None:
    """A 2025-03-26-era server: no RFC 9728 document, authorization-server metadata at its root."""
    with auth_server("--legacy") as urls, make_auth(urls, scopes=["mcp"]) as auth:
        assert call(auth, urls["mcp"], initialize()).status_code == 200
        md = auth.discover_auth_metadata()
        assert md.protected_resource is None
        assert md.issuer == urls["as"] and md.resource == urls["mcp"]


def test_iss_parameter_checked_when_advertised() -> None:
    with auth_server("--iss") as urls, make_auth(urls) as auth:
        assert auth.discover_auth_metadata().authorization_server.authorization_response_iss_parameter_supported
        assert call(auth, urls["mcp"], initialize()).status_code == 200


def test_keyring_store_end_to_end() -> None:
    if os.environ.get("PYTHON_KEYRING_BACKEND") != "keyring.backends.SecretService.Keyring":
        pytest.skip("needs the gnome-keyring Secret Service (tests/setup/with-keyring.sh)")
    with auth_server() as urls:
        store = KeyringTokenStore()
        try:
            with make_auth(urls, store) as auth:
                assert call(auth, urls["mcp"], initialize()).status_code == 200
                token = auth.tokens.access_token
            # A new object (a new process, say) finds the token in the keyring: no new authorization.
            no_browser = AuthorizationCode(open_browser=lambda url: pytest.fail("re-authorized"))
            with make_auth(urls, KeyringTokenStore(), no_browser) as again:
                assert again.tokens is not None and again.tokens.access_token == token
                assert tool_text(call(again, urls["mcp"], tool("whoami")))
                assert again.stats["authorizations"] == 0
        finally:
            store.delete_tokens(urls["mcp"])
            store.delete_client(urls["as"])


# ---------------------------------------------------------------------------------- negative cases


def _assert_nothing_stored(store: MemoryTokenStore, urls: dict[str, str], client_too: bool = False) -> None:
    assert store.load_tokens(urls["mcp"]) is None
    if client_too:
        assert store.load_client(urls["as"]) is None


def test_wrong_verifier_is_refused() -> None:
    with auth_server() as urls:
        store = MemoryTokenStore()
        with make_auth(urls, store) as auth, LoopbackRedirect() as lb:
            md = auth.discover_auth_metadata()
            req = auth.initiate_authorization(md, ["mcp"], redirect_uri=lb.redirect_uri)
            url, verifier = req  # the seed's (URL, verifier) pair
            assert "code_challenge_method=S256" in url and "resource=" in url
            browser(url)
            params = lb.wait(10)
            with pytest.raises(AuthError, match="invalid_grant"):
                auth.exchange_code(params["code"], "x" * 64, state=params["state"])
            _assert_nothing_stored(store, urls)


def test_seed_exchange_code_with_right_verifier() -> None:
    with auth_server() as urls:
        store = MemoryTokenStore()
        with make_auth(urls, store) as auth, LoopbackRedirect() as lb:
            req = auth.initiate_authorization(auth.discover_auth_metadata(), ["mcp"], redirect_uri=lb.redirect_uri)
            browser(req.url)
            params = lb.wait(10)
            tokens = auth.exchange_code(params["code"], req.verifier, state=params["state"])
            assert store.load_tokens(urls["mcp"]) == tokens
            assert auth.get_valid_token() == tokens.access_token


@pytest.mark.parametrize(
    "flag, message, client_too",
    [
        ("--wrong-state", "state does not match", False),
        ("--bad-iss", "RFC 9207", False),
        ("--issuer-mismatch", "expected exactly", True),
        ("--no-s256", "S256", True),
    ],
)
def test_misbehaving_server_is_refused(flag: str, message: str, client_too: bool) -> None:
    with auth_server(flag) as urls:
        store = MemoryTokenStore()
        with make_auth(urls, store) as auth:
            with pytest.raises(AuthError, match=message):
                call(auth, urls["mcp"], initialize())
            _assert_nothing_stored(store, urls, client_too)


def test_rejected_resource() -> None:
    with auth_server("--expected-resource", "http://127.0.0.1:1/somewhere-else") as urls:
        store = MemoryTokenStore()
        with make_auth(urls, store) as auth:
            with pytest.raises(AuthError, match="invalid_target"):
                auth.authorize()
            _assert_nothing_stored(store, urls)


def test_foreign_redirect_uri_is_refused() -> None:
    """A pre-registered client whose registered redirect URI is not this listener's: the server
    refuses to redirect, so no code ever arrives; the flow ends in a clear, bounded AuthError."""
    client = {
        "client_id": "elsewhere",
        "token_endpoint_auth_method": "none",
        "redirect_uris": ["http://127.0.0.1:9/callback"],
        "grant_types": ["authorization_code", "refresh_token"],
        "scope": "mcp",
    }
    with auth_server("--preregister", json.dumps(client)) as urls:
        store = MemoryTokenStore()
        seen: list[int] = []

        def strict_browser(url: str) -> None:
            r = requests.get(url, allow_redirects=False, timeout=10)
            seen.append(r.status_code)

        grant = AuthorizationCode(client_id="elsewhere", open_browser=strict_browser)
        with make_auth(urls, store, grant, interactive_timeout=1.5) as auth:
            with pytest.raises(AuthError, match="no authorization response"):
                auth.authorize()
        assert seen == [400]
        _assert_nothing_stored(store, urls)


def test_step_up_is_bounded() -> None:
    """A server that keeps answering insufficient_scope gets PermissionDenied, not a loop."""
    with auth_server() as urls, make_auth(urls) as auth:
        assert call(auth, urls["mcp"], initialize()).status_code == 200
        headers = {"WWW-Authenticate": 'Bearer error="insufficient_scope", scope="mcp nonexistent"'}
        with pytest.raises(AuthError):
            # The server refuses the unknown scope at /authorize (invalid_scope) → AuthError.
            auth.on_response(urls["mcp"], "POST", 403, headers)
        held = auth.tokens
        with pytest.raises(PermissionDenied):
            # Already holding every scope asked for, yet refused: no point in asking again.
            auth.on_response(urls["mcp"], "POST", 403,
                             {"WWW-Authenticate": f'Bearer error="insufficient_scope", scope="{held.scope}"'})


# ---------------------------------------------------------------------------------- enterprise


@pytest.mark.parametrize("layout", ["one-origin", "split"])
def test_enterprise_managed_authorization(layout: str) -> None:
    """RFC 8693 at the IdP (ID token → ID-JAG), then the SDK's RFC 7523 jwt-bearer grant."""
    idp_port = free_port()
    with auth_server("--idp-port", str(idp_port), layout=layout) as urls:
        ent = IdJag(
            idp_token_endpoint=f"http://127.0.0.1:{idp_port}/token",
            subject_token=lambda: "idp-id-token-alice",
            client_id="enterprise-client",
            client_secret="enterprise-secret",
        )
        store = MemoryTokenStore()
        with make_auth(urls, store, ent) as auth:  # an IdJag grant has no browser to open
            who = json.loads(tool_text(call(auth, urls["mcp"], tool("whoami"))))
            assert who["client_id"] == "enterprise-client"
            assert store.load_tokens(urls["mcp"]).refresh_token is None  # the IdP controls the session


def test_enterprise_unknown_user_is_refused() -> None:
    idp_port = free_port()
    with auth_server("--idp-port", str(idp_port)) as urls:
        ent = IdJag(idp_token_endpoint=f"http://127.0.0.1:{idp_port}/token", subject_token=lambda: "not-an-id-token",
                    client_id="enterprise-client", client_secret="enterprise-secret")
        store = MemoryTokenStore()
        with make_auth(urls, store, ent) as auth:
            with pytest.raises(AuthError, match="identity-provider token exchange.*invalid_grant"):
                auth.authorize()
            assert store.load_tokens(urls["mcp"]) is None


# ---------------------------------------------------------------------------------- registration order


@contextlib.contextmanager
def metadata_document(redirect_uri: str) -> Iterator[str]:
    """This client's Client ID Metadata Document, served on 127.0.0.1."""
    import http.server

    holder: dict[str, str] = {}

    class Handler(http.server.BaseHTTPRequestHandler):
        def log_message(self, *a: Any) -> None:
            return

        def do_GET(self) -> None:  # noqa: N802
            body = json.dumps({
                "client_id": holder["url"], "client_name": "mcpsync tests", "redirect_uris": [redirect_uri],
                "grant_types": ["authorization_code", "refresh_token"], "response_types": ["code"],
                "token_endpoint_auth_method": "none", "scope": "mcp admin offline_access",
            }).encode()
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    holder["url"] = f"http://127.0.0.1:{server.server_address[1]}/client.json"
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield holder["url"]
    finally:
        server.shutdown()
        server.server_close()
        thread.join(timeout=5)


def test_client_id_metadata_document_preferred_over_dynamic_registration() -> None:
    port = free_port()
    with auth_server("--cimd") as urls, metadata_document(f"http://127.0.0.1:{port}/callback") as doc:
        store = MemoryTokenStore()
        with make_auth(urls, store, AuthorizationCode(client_metadata_url=doc, redirect_port=port,
                                                      open_browser=browser)) as auth:
            assert auth.discover_auth_metadata().authorization_server.client_id_metadata_document_supported
            who = json.loads(tool_text(call(auth, urls["mcp"], tool("whoami"))))
            assert who["client_id"] == doc  # the URL is the client id; nothing was registered
            assert store.load_client(urls["as"]) is None


def test_metadata_document_ignored_when_not_advertised() -> None:
    with auth_server() as urls:
        store = MemoryTokenStore()
        grant = AuthorizationCode(client_metadata_url="https://client.example/meta.json", open_browser=browser)
        with make_auth(urls, store, grant) as auth:
            assert call(auth, urls["mcp"], initialize()).status_code == 200
            assert store.load_client(urls["as"]).source == "dynamic"  # fell back to DCR


def test_registration_is_per_issuer() -> None:
    """Credentials are keyed by the authorization server's issuer: a second server (a new issuer)
    gets its own registration, never the first one's."""
    with auth_server() as first, auth_server() as second:
        store = MemoryTokenStore()
        with make_auth(first, store) as a:
            assert call(a, first["mcp"], initialize()).status_code == 200
        with make_auth(second, store) as b:
            assert call(b, second["mcp"], initialize()).status_code == 200
        c1, c2 = store.load_client(first["as"]), store.load_client(second["as"])
        assert c1 is not None and c2 is not None and c1.client_id != c2.client_id
        assert c1.issuer == first["as"] and c2.issuer == second["as"]
        assert store.load_tokens(first["mcp"]) != store.load_tokens(second["mcp"])


def test_workload_identity_jwt_bearer_grant() -> None:
    """JWTBearer: the assertion comes from the workload's own identity source (here, the
    enterprise IdP's token exchange, fetched by the callable)."""
    idp_port = free_port()
    with auth_server("--idp-port", str(idp_port)) as urls:
        def assertion() -> str:
            r = requests.post(f"http://127.0.0.1:{idp_port}/token", data={
                "grant_type": "urn:ietf:params:oauth:grant-type:token-exchange",
                "requested_token_type": "urn:ietf:params:oauth:token-type:id-jag",
                "subject_token": "idp-id-token-alice",
                "subject_token_type": "urn:ietf:params:oauth:token-type:id_token",
                "audience": urls["as"], "resource": urls["mcp"],
            }, timeout=10)
            return r.json()["access_token"]

        grant = JWTBearer(assertion=assertion, client_id="enterprise-client", client_secret="enterprise-secret")
        with make_auth(urls, grant=grant) as auth:
            assert json.loads(tool_text(call(auth, urls["mcp"], tool("whoami"))))["client_id"] == "enterprise-client"


def test_step_up_attempts_are_bounded_when_the_server_downscopes() -> None:
    """The server silently never grants admin: each call may step up once, at most max_step_up
    times in all; then PermissionDenied instead of an endless re-authorization loop."""
    with auth_server("--deny-scope", "admin") as urls, make_auth(urls, max_step_up=2) as auth:
        assert tool_text(call(auth, urls["mcp"], tool("whoami")))  # authorized for mcp
        assert call(auth, urls["mcp"], tool("admin_echo", text="a")).status_code == 403
        assert call(auth, urls["mcp"], tool("admin_echo", text="b")).status_code == 403
        with pytest.raises(PermissionDenied, match="step-up"):
            call(auth, urls["mcp"], tool("admin_echo", text="c"))
        assert auth.stats["step_ups"] == 2
        assert tool_text(call(auth, urls["mcp"], tool("whoami")))  # the rest still works


def test_authorization_server_moves_reregisters_and_never_leaks_refresh_token() -> None:
    """The resource server moves to another authorization server (a new issuer): the next 401
    re-discovers, drops the old issuer's tokens (its refresh token is never sent to the new one),
    registers afresh there and authorizes again."""
    second_port = free_port()
    with auth_server("--second-as-port", str(second_port), layout="split") as urls:
        store = MemoryTokenStore()
        second = f"http://127.0.0.1:{second_port}"
        with make_auth(urls, store) as auth:
            assert tool_text(call(auth, urls["mcp"], tool("whoami")))
            old = auth.tokens
            assert old.issuer == urls["as"]
            requests.post(urls["rs"] + "/test/switch-as", timeout=5).close()
            assert tool_text(call(auth, urls["mcp"], tool("whoami")))
            assert auth.discover_auth_metadata().issuer == second
            assert auth.tokens.issuer == second and auth.stats["authorizations"] == 2
            assert auth.stats["refreshes"] == 0  # the old refresh token went nowhere
            first_client, second_client = store.load_client(urls["as"]), store.load_client(second)
            assert first_client is not None and second_client is not None
            assert first_client.client_id != second_client.client_id
