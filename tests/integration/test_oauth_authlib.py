"""OAuth machine and headless flows against Authlib's authorization server
(tests/servers/auth_authlib_server.py): the device grant (RFC 8628), client credentials with
client_secret_basic / client_secret_post / private_key_jwt (RFC 7523), strict RFC 8707 resource
checks, and the background renewal of machine tokens before expiry."""

from __future__ import annotations

import contextlib
import json
import select
import subprocess
import threading
import time
from typing import Any, Iterator

import pytest
import requests

from mcpsync._errors import AuthError
from mcpsync.auth import ClientCredentials, DeviceCode, MemoryTokenStore, OAuth, SigningKey, clear_metadata_cache
from tests.conftest import PYTHON, SERVERS, free_port
from tests.integration.test_oauth_sdk import call, initialize, raw, tool, tool_text
from tests.helpers import wait_until

pytest.importorskip("authlib")
pytest.importorskip("flask")
pytestmark = pytest.mark.timeout(90)


@contextlib.contextmanager
def authlib_server(*flags: str, lifetime: int = 3600) -> Iterator[dict[str, str]]:
    port = free_port()
    proc = subprocess.Popen(
        [PYTHON, str(SERVERS / "auth_authlib_server.py"), "--port", str(port), "--token-lifetime", str(lifetime), *flags],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )
    try:
        deadline = time.monotonic() + 30
        line = ""
        while time.monotonic() < deadline and proc.poll() is None:
            ready, _, _ = select.select([proc.stdout], [], [], 0.5)
            if ready:
                line = proc.stdout.readline()
                break
        if "READY" not in line:
            proc.kill()
            raise RuntimeError("authlib server did not start: " + (proc.stderr.read() or "")[-2000:])
        clear_metadata_cache()
        origin = f"http://127.0.0.1:{port}"
        yield {"mcp": origin + "/mcp", "as": origin}
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=5)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(timeout=5)
        clear_metadata_cache()


def test_device_grant() -> None:
    with authlib_server() as urls:
        shown: list[Any] = []

        def user_approves(info: Any) -> None:
            # The user reads the code and approves on another device, a little later
            # (so the client's first poll sees authorization_pending).
            shown.append(info)
            threading.Timer(1.2, lambda: requests.get(urls["as"] + "/device/approve",
                                                      params={"user_code": info.user_code}, timeout=5)).start()

        store = MemoryTokenStore()
        with OAuth(urls["mcp"], DeviceCode(client_id="device-client", on_device_code=user_approves), storage=store,
                   interactive_timeout=20) as auth:
            assert call(auth, urls["mcp"], initialize()).status_code == 200
            assert shown and shown[0].verification_uri == urls["as"] + "/device"
            who = json.loads(tool_text(call(auth, urls["mcp"], tool("whoami"))))
            assert who["client_id"] == "device-client"
            assert store.load_tokens(urls["mcp"]) is not None


def test_device_grant_slow_down_adds_five_seconds_to_every_later_poll() -> None:
    """RFC 8628 §3.5: after ``slow_down`` the client polls at its interval plus 5 s, for
    that poll and every later one. The server tells the first pending poll to slow down,
    and again any poll sooner than 6 s after the one before; the user approves 3 s in, so
    a client that kept its 1 s interval would be told at least twice."""
    with authlib_server("--slow-down") as urls:
        def user_approves(info: Any) -> None:
            threading.Timer(3.0, lambda: requests.get(urls["as"] + "/device/approve",
                                                      params={"user_code": info.user_code}, timeout=5)).start()

        store = MemoryTokenStore()
        with OAuth(urls["mcp"], DeviceCode(client_id="device-client", on_device_code=user_approves), storage=store,
                   interactive_timeout=40) as auth:
            auth.authorize()
            told = requests.get(urls["as"] + "/device/slow-downs", timeout=5).json()["count"]
            assert told == 1
            assert store.load_tokens(urls["mcp"]) is not None
            who = json.loads(tool_text(call(auth, urls["mcp"], tool("whoami"))))
            assert who["client_id"] == "device-client"


def test_device_grant_denied() -> None:
    with authlib_server() as urls:
        def user_denies(info: Any) -> None:
            requests.get(urls["as"] + "/device/approve", params={"user_code": info.user_code, "deny": 1}, timeout=5)

        store = MemoryTokenStore()
        with OAuth(urls["mcp"], DeviceCode(client_id="device-client", on_device_code=user_denies), storage=store,
                   interactive_timeout=20) as auth:
            with pytest.raises(AuthError, match="access_denied"):
                auth.authorize()
            assert store.load_tokens(urls["mcp"]) is None


@pytest.mark.parametrize("client_id, method", [("machine-basic", "client_secret_basic"),
                                               ("machine-post", "client_secret_post")])
def test_client_credentials(client_id: str, method: str) -> None:
    with authlib_server() as urls:
        with OAuth(urls["mcp"],
                   ClientCredentials(client_id=client_id, client_secret="machine-secret", auth_method=method),
                   storage=MemoryTokenStore()) as auth:
            who = json.loads(tool_text(call(auth, urls["mcp"], tool("whoami"))))
            assert who["client_id"] == client_id


def test_client_credentials_wrong_secret() -> None:
    with authlib_server() as urls:
        store = MemoryTokenStore()
        with OAuth(urls["mcp"], ClientCredentials(client_id="machine-basic", client_secret="not-the-secret"),
                   storage=store) as auth:
            with pytest.raises(AuthError, match="invalid_client"):
                call(auth, urls["mcp"], initialize())
            assert store.load_tokens(urls["mcp"]) is None
            assert "not-the-secret" not in repr(auth)


def test_private_key_jwt_client_credentials() -> None:
    key = SigningKey.generate()
    with authlib_server("--jwk", json.dumps(key.public_jwk())) as urls:
        with OAuth(urls["mcp"], ClientCredentials(client_id="machine-jwt", private_key=key),
                   storage=MemoryTokenStore()) as auth:
            who = json.loads(tool_text(call(auth, urls["mcp"], tool("whoami"))))
            assert who["client_id"] == "machine-jwt"


def test_private_key_jwt_audience_is_the_issuer() -> None:
    """The assertion's ``aud`` is the authorization server's issuer identifier (RFC 7523 §3): a
    server that accepts only its issuer (as the MCP conformance suite's does) issues a token."""
    key = SigningKey.generate()
    with authlib_server("--jwk", json.dumps(key.public_jwk()), "--jwt-audience", "issuer") as urls:
        with OAuth(urls["mcp"], ClientCredentials(client_id="machine-jwt", private_key=key),
                   storage=MemoryTokenStore()) as auth:
            who = json.loads(tool_text(call(auth, urls["mcp"], tool("whoami"))))
            assert who["client_id"] == "machine-jwt"


def test_private_key_jwt_wrong_key_is_refused() -> None:
    registered, other = SigningKey.generate(), SigningKey.generate()
    with authlib_server("--jwk", json.dumps(registered.public_jwk())) as urls:
        with OAuth(urls["mcp"], ClientCredentials(client_id="machine-jwt", private_key=other),
                   storage=MemoryTokenStore()) as auth:
            with pytest.raises(AuthError, match="invalid_client"):
                auth.authorize()


def test_strict_resource_rejected() -> None:
    with authlib_server("--expected-resource", "http://127.0.0.1:1/elsewhere") as urls:
        store = MemoryTokenStore()
        with OAuth(urls["mcp"], ClientCredentials(client_id="machine-basic", client_secret="machine-secret"),
                   storage=store) as auth:
            with pytest.raises(AuthError, match="invalid_target"):
                auth.authorize()
            assert store.load_tokens(urls["mcp"]) is None


def test_machine_token_renewed_in_background() -> None:
    """No refresh token for client credentials: the grant itself is re-run before expiry."""
    with authlib_server(lifetime=2) as urls:
        with OAuth(urls["mcp"], ClientCredentials(client_id="machine-basic", client_secret="machine-secret"),
                   storage=MemoryTokenStore()) as auth:
            assert call(auth, urls["mcp"], initialize()).status_code == 200
            first = auth.tokens.access_token
            assert wait_until(lambda: auth.tokens is not None and auth.tokens.access_token != first, 20)
            assert auth.stats["authorizations"] >= 2
            assert tool_text(call(auth, urls["mcp"], tool("whoami")))
            # The expired one is refused by the resource server (bounded wait for its expiry).
            assert wait_until(lambda: raw(urls["mcp"], first, initialize()).status_code == 401, 10, interval=0.25)


def test_dpop_bound_tokens_with_server_nonces() -> None:
    """DPoP (RFC 9449): a proof per token request and per resource request, the DPoP scheme, and
    the use_dpop_nonce dance at both the authorization server and the resource server."""
    with authlib_server("--dpop") as urls:
        with OAuth(urls["mcp"], ClientCredentials(client_id="machine-basic", client_secret="machine-secret"),
                   storage=MemoryTokenStore(), dpop=True) as auth:
            who = json.loads(tool_text(call(auth, urls["mcp"], tool("whoami"))))
            assert who["client_id"] == "machine-basic"
            assert auth.tokens.token_type == "DPoP"
            # The token is bound: as a plain bearer token it is refused.
            assert raw(urls["mcp"], auth.tokens.access_token, initialize()).status_code == 401
            # Later requests reuse the resource server's nonce: no more nonce round trips.
            assert tool_text(call(auth, urls["mcp"], tool("whoami")))
            headers = auth.headers(urls["mcp"], "POST")
            assert headers["Authorization"].startswith("DPoP ")
            resp = requests.post(urls["mcp"], json=initialize(), headers=headers, timeout=10)
            assert resp.status_code == 200


def test_dpop_enabled_when_the_resource_requires_it() -> None:
    with authlib_server("--dpop") as urls:
        with OAuth(urls["mcp"], ClientCredentials(client_id="machine-basic", client_secret="machine-secret"),
                   storage=MemoryTokenStore()) as auth:
            assert tool_text(call(auth, urls["mcp"], tool("whoami")))
            assert auth.tokens.token_type == "DPoP"


def test_dpop_refused_when_switched_off() -> None:
    with authlib_server("--dpop") as urls:
        store = MemoryTokenStore()
        with OAuth(urls["mcp"], ClientCredentials(client_id="machine-basic", client_secret="machine-secret"),
                   storage=store, dpop=False) as auth:
            with pytest.raises(AuthError, match="invalid_dpop_proof"):
                auth.authorize()
            assert store.load_tokens(urls["mcp"]) is None


@pytest.mark.parametrize("issuer_path, where", [
    ("", "oidc-inserted"),            # no path: RFC 8414 missing, OpenID discovery found second
    ("/tenant1", "oauth"),            # /.well-known/oauth-authorization-server/tenant1
    ("/tenant1", "oidc-inserted"),    # /.well-known/openid-configuration/tenant1
    ("/tenant1", "oidc-appended"),    # /tenant1/.well-known/openid-configuration
])
def test_authorization_server_metadata_locations(issuer_path: str, where: str) -> None:
    with authlib_server("--issuer-path", issuer_path, "--metadata-at", where) as urls:
        with OAuth(urls["mcp"], ClientCredentials(client_id="machine-basic", client_secret="machine-secret"),
                   storage=MemoryTokenStore()) as auth:
            assert tool_text(call(auth, urls["mcp"], tool("whoami")))
            md = auth.discover_auth_metadata()
            assert md.issuer == urls["as"] + issuer_path
            assert md.authorization_server.url.endswith(
                {"oauth": "/.well-known/oauth-authorization-server" + issuer_path,
                 "oidc-inserted": "/.well-known/openid-configuration" + issuer_path,
                 "oidc-appended": issuer_path + "/.well-known/openid-configuration"}[where])


def _whoami_over_transport(url: str, auth: OAuth) -> dict[str, Any]:
    """One tool call through the real Streamable HTTP transport (its own 401 handling)."""
    from mcpsync import Client

    with Client.http(url, auth=auth, mode="legacy", sse_fallback=False) as client:
        return json.loads(client.call_tool("whoami", {}).text)


def test_dpop_nonce_challenge_after_authorization_is_answered() -> None:
    """RFC 9449 §9: the request retried with the new token meets ``401 use_dpop_nonce``; the
    transport answers the nonce challenge instead of counting it as its one auth retry."""
    with authlib_server("--dpop-challenge") as urls:
        with OAuth(urls["mcp"], ClientCredentials(client_id="machine-basic", client_secret="machine-secret"),
                   storage=MemoryTokenStore(), dpop=True) as auth:
            assert _whoami_over_transport(urls["mcp"], auth)["client_id"] == "machine-basic"
            assert auth.tokens.token_type == "DPoP"
            assert auth.stats["authorizations"] == 1


def test_dpop_followed_from_the_challenge() -> None:
    """Default options: a ``WWW-Authenticate: DPoP`` challenge turns DPoP on although the
    protected-resource metadata does not require it (the authorization server refuses a token
    request without a proof)."""
    with authlib_server("--dpop-challenge") as urls:
        with OAuth(urls["mcp"], ClientCredentials(client_id="machine-basic", client_secret="machine-secret"),
                   storage=MemoryTokenStore()) as auth:
            assert _whoami_over_transport(urls["mcp"], auth)["client_id"] == "machine-basic"
            assert auth.tokens.token_type == "DPoP"


def test_dpop_challenge_not_followed_when_switched_off() -> None:
    with authlib_server("--dpop-challenge") as urls:
        with OAuth(urls["mcp"], ClientCredentials(client_id="machine-basic", client_secret="machine-secret"),
                   storage=MemoryTokenStore(), dpop=False) as auth:
            with pytest.raises(AuthError, match="invalid_dpop_proof"):
                _whoami_over_transport(urls["mcp"], auth)


def test_dpop_nonce_challenges_are_bounded() -> None:
    """A resource that answers every proof with a new nonce: the transport answers a bounded
    number of nonce challenges, then fails with the 401, without authorizing again."""
    from mcpsync._errors import AuthError as _AuthError  # the 401 the transport gives up on
    from mcpsync.transports._http_headers import MAX_DPOP_NONCE_RETRIES

    with authlib_server("--dpop-challenge", "--dpop-rotate-nonce") as urls:
        with OAuth(urls["mcp"], ClientCredentials(client_id="machine-basic", client_secret="machine-secret"),
                   storage=MemoryTokenStore(), dpop=True) as auth:
            with pytest.raises(_AuthError, match="401"):
                _whoami_over_transport(urls["mcp"], auth)
            assert auth.stats["authorizations"] == 1
        posts = requests.get(urls["as"] + "/mcp-posts", timeout=5).json()["count"]
        # the bare request, the one with the new token, and the nonce retries: no more
        assert posts == 2 + MAX_DPOP_NONCE_RETRIES
