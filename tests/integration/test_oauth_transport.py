"""OAuth through mcpsync's own Streamable HTTP transport and Client (not raw requests), against
the mcp SDK's authorization server: 401 → authorization, background refresh, step-up on 403,
and a revoked token forcing a fresh authorization — all inside ordinary ``call_tool`` calls."""

from __future__ import annotations

import json

import pytest

from mcpsync.auth import AuthorizationCode, MemoryTokenStore, OAuth
from tests.integration.test_oauth_sdk import auth_server, browser, make_auth, raw, tool
from tests.helpers import wait_until

transport_mod = pytest.importorskip("mcpsync.transports.streamable_http")
pytestmark = [pytest.mark.timeout(90), pytest.mark.usefixtures("http_path")]  # both HTTP paths: fast and urllib3


@pytest.mark.parametrize("layout", ["one-origin", "split"])
def test_client_over_streamable_http_with_oauth(layout: str) -> None:
    from mcpsync import Client, PoolLimits, RetryPolicy

    with auth_server(layout=layout, lifetime=3) as urls:
        with make_auth(urls) as auth:
            client = Client(
                lambda: transport_mod.StreamableHTTPTransport(urls["mcp"], auth=auth),
                pool=PoolLimits.SINGLE,
                retry=RetryPolicy.NONE,
            )
            with client:
                assert {t.name for t in client.list_tools()} >= {"whoami", "admin_echo"}
                who = json.loads(client.call_tool("whoami", {}).content[0].text)
                assert "mcp" in who["scopes"]
                assert auth.stats["authorizations"] == 1

                # Step-up inside a call: 403 insufficient_scope → re-authorize → retried once.
                assert client.call_tool("admin_echo", {"text": "x"}).content[0].text == "admin: x"
                assert auth.stats["step_ups"] == 1

                # Expiry: refreshed in the background; calls keep working without a new authorization.
                first = auth.tokens.access_token
                assert wait_until(lambda: auth.stats["background_refreshes"] >= 1, 20)
                assert auth.tokens.access_token != first
                assert json.loads(client.call_tool("whoami", {}).content[0].text)["client_id"] == who["client_id"]
                assert auth.stats["authorizations"] == 2

                # Revoked → the old token gets 401; the next call authorizes again transparently.
                old = auth.tokens.access_token
                assert auth.revoke()
                assert raw(urls["mcp"], old, tool("whoami")).status_code == 401
                assert client.call_tool("whoami", {}).content[0].text
                assert auth.stats["authorizations"] == 3


@pytest.mark.parametrize("layout", ["one-origin", "split"])
def test_client_over_sse_with_oauth(layout: str) -> None:
    """The 2024-11-05 HTTP+SSE transport: the GET stream and every POST carry the token."""
    sse_mod = pytest.importorskip("mcpsync.transports.sse")
    from mcpsync import Client, PoolLimits, RetryPolicy

    with auth_server("--sse", layout=layout) as urls:
        sse_url = urls["rs"] + "/sse"
        with OAuth(sse_url, AuthorizationCode(open_browser=browser), storage=MemoryTokenStore(),
                   interactive_timeout=10) as auth:
            client = Client(lambda: sse_mod.SSETransport(sse_url, auth=auth), pool=PoolLimits.SINGLE,
                            retry=RetryPolicy.NONE)
            with client:
                who = json.loads(client.call_tool("whoami", {}).content[0].text)
                assert "mcp" in who["scopes"]
                assert client.call_tool("admin_echo", {"text": "y"}).content[0].text == "admin: y"
                assert auth.stats["authorizations"] == 2 and auth.stats["step_ups"] == 1
