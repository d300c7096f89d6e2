"""A real OAuth-protected MCP server for the tests: the official ``mcp`` SDK's auth routes
(metadata, /register, /authorize, /token, /revoke, protected-resource metadata, bearer check)
with an in-memory provider whose /authorize approves at once, in front of a bearer-protected
MCPServer streamable-HTTP endpoint.

Layouts:
  one-origin  the authorization server and the MCP endpoint share http://127.0.0.1:PORT
  split       the authorization server on http://127.0.0.1:AS_PORT, the MCP endpoint on PORT
              pointing at it through protected-resource metadata

--sse serves the 2024-11-05 HTTP+SSE transport (/sse + /messages/) instead of streamable HTTP.

Misbehaviours for the negative tests (each a flag): --no-s256, --issuer-mismatch, --bad-iss,
--wrong-state, --expected-resource URL (anything else is refused with invalid_target), --iss
(send and advertise RFC 9207 iss), --legacy (no protected-resource metadata: a 2025-03-26-era
server whose authorization-server metadata sits at its root).

Enterprise-managed authorization (--idp-port Q): a small identity provider on Q exchanges its ID
tokens (RFC 8693) for ID-JAGs, which the SDK's jwt-bearer grant (identity_assertion_enabled) takes
from the pre-registered confidential client ``enterprise-client``.

Step-up: calling the tool ``admin_echo`` without the ``admin`` scope gets a 403
``insufficient_scope`` challenge asking for ``mcp admin``.

Usage: python auth_sdk_server.py --port P [--layout split --as-port Q] [--token-lifetime S]
Prints READY when both listeners are up.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import secrets
import sys
import time
import warnings
from typing import Any

import uvicorn
from joserfc import jws
from joserfc.jwk import ECKey
from starlette.applications import Starlette

from mcp.server.auth.middleware.auth_context import get_access_token
from mcp.server.auth.provider import (
    AccessToken,
    AuthorizationCode,
    AuthorizationParams,
    AuthorizeError,
    RefreshToken,
    TokenError,
    construct_redirect_uri,
)
from mcp.server.auth.routes import create_auth_routes
from mcp.server.auth.settings import AuthSettings, ClientRegistrationOptions, RevocationOptions
from mcp.server.mcpserver import MCPServer
from mcp.shared.auth import JWT_BEARER_GRANT_TYPE, OAuthClientInformationFull, OAuthToken
from starlette.requests import Request
from starlette.responses import JSONResponse
from starlette.routing import Route

warnings.simplefilter("ignore")


class ApprovingProvider:
    """In-memory OAuthAuthorizationServerProvider; /authorize approves immediately."""

    def __init__(self, args: argparse.Namespace, issuer: str, resource: str) -> None:
        self.args = args
        self.issuer = issuer
        self.resource = resource
        self.clients: dict[str, OAuthClientInformationFull] = {}
        self.codes: dict[str, AuthorizationCode] = {}
        self.access: dict[str, AccessToken] = {}
        self.refresh: dict[str, RefreshToken] = {}
        self.pairs: dict[str, str] = {}  # access → refresh
        self.idp: IdentityProvider | None = None
        for spec in args.preregister or []:
            data = json.loads(spec)
            self.clients[data["client_id"]] = OAuthClientInformationFull.model_validate(data)

    def _check_resource(self, resource: str | None) -> None:
        expected = self.args.expected_resource
        if expected and resource != expected:
            raise AuthorizeError("invalid_target", f"resource {resource!r} is not served here")

    async def get_client(self, client_id: str) -> OAuthClientInformationFull | None:
        client = self.clients.get(client_id)
        if client is None and self.args.cimd and client_id.startswith(("https://", "http://127.0.0.1:")):
            client = await self._fetch_metadata_document(client_id)
        return client

    async def _fetch_metadata_document(self, url: str) -> OAuthClientInformationFull | None:
        """Client ID Metadata Documents: the client_id is a URL serving the client's metadata."""
        import urllib.request

        def fetch() -> Any:
            with urllib.request.urlopen(url, timeout=5) as resp:  # 127.0.0.1 only in these tests
                return json.loads(resp.read())

        try:
            data = await asyncio.to_thread(fetch)
        except Exception:
            return None
        if not isinstance(data, dict) or data.get("client_id") != url:
            return None  # the document must name itself
        data = {k: v for k, v in data.items() if k != "client_secret"}
        return OAuthClientInformationFull.model_validate({**data, "token_endpoint_auth_method": "none"})

    async def register_client(self, client_info: OAuthClientInformationFull) -> None:
        self.clients[client_info.client_id] = client_info

    async def authorize(self, client: OAuthClientInformationFull, params: AuthorizationParams) -> str:
        self._check_resource(params.resource)
        code = secrets.token_urlsafe(32)
        granted = [sc for sc in (params.scopes or []) if sc not in (self.args.deny_scope or [])]
        self.codes[code] = AuthorizationCode(
            code=code,
            scopes=granted,
            expires_at=time.time() + 300,
            client_id=client.client_id,
            code_challenge=params.code_challenge,
            redirect_uri=params.redirect_uri,
            redirect_uri_provided_explicitly=params.redirect_uri_provided_explicitly,
            resource=params.resource,
            subject="test-user",
        )
        state = "forged-" + secrets.token_urlsafe(8) if self.args.wrong_state else params.state
        iss = None
        if self.args.bad_iss:
            iss = "http://127.0.0.1:1/evil"
        elif self.args.iss:
            iss = self.issuer
        return construct_redirect_uri(str(params.redirect_uri), code=code, state=state, iss=iss)

    async def load_authorization_code(self, client: OAuthClientInformationFull, authorization_code: str):
        return self.codes.get(authorization_code)

    def _issue(self, client_id: str, scopes: list[str], resource: str | None) -> OAuthToken:
        access = "at-" + secrets.token_urlsafe(24)
        refresh = "rt-" + secrets.token_urlsafe(24)
        now = int(time.time())
        self.access[access] = AccessToken(
            token=access,
            client_id=client_id,
            scopes=scopes,
            expires_at=now + self.args.token_lifetime,
            resource=resource,
            subject="test-user",
        )
        self.refresh[refresh] = RefreshToken(
            token=refresh, client_id=client_id, scopes=scopes, resource=resource, subject="test-user"
        )
        self.pairs[access] = refresh
        return OAuthToken(
            access_token=access,
            token_type="Bearer",
            expires_in=self.args.token_lifetime,
            scope=" ".join(scopes),
            refresh_token=refresh,
        )

    async def exchange_authorization_code(self, client: OAuthClientInformationFull, authorization_code: AuthorizationCode):
        self.codes.pop(authorization_code.code, None)
        if self.args.expected_resource and authorization_code.resource != self.args.expected_resource:
            raise TokenError("invalid_target", "resource not served here")
        return self._issue(client.client_id, authorization_code.scopes, authorization_code.resource)

    async def load_refresh_token(self, client: OAuthClientInformationFull, refresh_token: str):
        return self.refresh.get(refresh_token)

    async def exchange_refresh_token(self, client: OAuthClientInformationFull, refresh_token: RefreshToken, scopes: list[str]):
        # Rotate both tokens.
        self.refresh.pop(refresh_token.token, None)
        for a, r in list(self.pairs.items()):
            if r == refresh_token.token:
                self.access.pop(a, None)
                self.pairs.pop(a, None)
        return self._issue(client.client_id, scopes, refresh_token.resource)

    async def load_access_token(self, token: str) -> AccessToken | None:
        return self.access.get(token)

    async def revoke_token(self, token: AccessToken | RefreshToken) -> None:
        if isinstance(token, AccessToken):
            self.access.pop(token.token, None)
            r = self.pairs.pop(token.token, None)
            if r:
                self.refresh.pop(r, None)
        else:
            self.refresh.pop(token.token, None)
            for a, r in list(self.pairs.items()):
                if r == token.token:
                    self.access.pop(a, None)
                    self.pairs.pop(a, None)

    async def exchange_identity_assertion(self, client, params):
        """SEP-990 leg 2: verify the ID-JAG the enterprise IdP signed, then issue a token."""
        idp = self.idp
        if idp is None:
            raise TokenError("unsupported_grant_type", "not supported")
        try:
            obj = jws.deserialize_compact(params.assertion, idp.public_key, algorithms=["ES256"])
            header = obj.headers()
            claims = json.loads(obj.payload)
        except Exception:
            raise TokenError("invalid_grant", "assertion signature invalid") from None
        now = time.time()
        if (
            header.get("typ") != "oauth-id-jag+jwt"
            or claims.get("iss") != idp.origin
            or claims.get("aud") != self.issuer
            or not claims.get("sub")
            or claims.get("exp", 0) < now
            or claims.get("client_id") != client.client_id
            or claims.get("jti") in idp.seen
        ):
            raise TokenError("invalid_grant", "assertion rejected")
        idp.seen.add(claims["jti"])
        if claims.get("resource") != self.resource:
            raise TokenError("invalid_target", "assertion is for another resource")
        scopes = (claims.get("scope") or "mcp").split()
        token = self._issue(client.client_id, scopes, claims["resource"])
        token.refresh_token = None
        return token


class IdentityProvider:
    """A tiny enterprise IdP: RFC 8693 token exchange of its ID tokens for ID-JAGs."""

    def __init__(self, origin: str, as_issuer: str, resource: str) -> None:
        self.origin = origin
        self.as_issuer = as_issuer
        self.resource = resource
        self.key = ECKey.generate_key("P-256", private=True)
        self.public_key = ECKey.import_key(self.key.as_dict(private=False))
        self.seen: set[str] = set()
        self.id_tokens = {"idp-id-token-alice": "alice"}

    async def token(self, request: Request) -> JSONResponse:
        form = await request.form()
        if form.get("grant_type") != "urn:ietf:params:oauth:grant-type:token-exchange":
            return JSONResponse({"error": "unsupported_grant_type"}, 400)
        user = self.id_tokens.get(str(form.get("subject_token")))
        if user is None or form.get("subject_token_type") != "urn:ietf:params:oauth:token-type:id_token":
            return JSONResponse({"error": "invalid_grant"}, 400)
        if form.get("requested_token_type") != "urn:ietf:params:oauth:token-type:id-jag":
            return JSONResponse({"error": "invalid_request"}, 400)
        if form.get("audience") != self.as_issuer or form.get("resource") != self.resource:
            return JSONResponse({"error": "invalid_target"}, 400)
        now = int(time.time())
        claims = {
            "iss": self.origin, "sub": user, "aud": self.as_issuer, "client_id": "enterprise-client",
            "resource": self.resource, "scope": form.get("scope") or "mcp", "iat": now, "exp": now + 300,
            "jti": secrets.token_urlsafe(12),
        }
        jag = jws.serialize_compact({"alg": "ES256", "typ": "oauth-id-jag+jwt"}, json.dumps(claims), self.key)
        return JSONResponse({
            "access_token": jag, "issued_token_type": "urn:ietf:params:oauth:token-type:id-jag",
            "token_type": "N_A", "expires_in": 300,
        })


class Verifier:
    def __init__(self, provider: ApprovingProvider) -> None:
        self.provider = provider

    async def verify_token(self, token: str) -> AccessToken | None:
        return await self.provider.load_access_token(token)


class SwitchableResource:
    """Split layout with --second-as-port: POST /test/switch-as moves the resource server to the
    second authorization server (its protected-resource metadata and its token verifier)."""

    def __init__(self, app: Any, verifier: Verifier, second: ApprovingProvider, metadata_path: str) -> None:
        self.app = app
        self.verifier = verifier
        self.second = second
        self.metadata_path = metadata_path
        self.switched = False

    async def __call__(self, scope: dict, receive: Any, send: Any) -> None:
        if scope["type"] == "http" and scope["path"] == "/test/switch-as":
            self.switched = True
            self.verifier.provider = self.second
            await send({"type": "http.response.start", "status": 204, "headers": []})
            await send({"type": "http.response.body", "body": b""})
            return
        if self.switched and scope["type"] == "http" and scope["path"] == self.metadata_path:
            body = json.dumps({"resource": self.second.resource, "authorization_servers": [self.second.issuer],
                               "scopes_supported": ["mcp"]}).encode()
            await send({"type": "http.response.start", "status": 200,
                        "headers": [(b"content-type", b"application/json"), (b"content-length", str(len(body)).encode())]})
            await send({"type": "http.response.body", "body": body})
            return
        await self.app(scope, receive, send)


class RewriteMetadata:
    """Wraps the authorization server app to misbehave in its metadata document."""

    def __init__(self, app: Any, args: argparse.Namespace, provider: "ApprovingProvider | None" = None) -> None:
        self.app = app
        self.args = args
        self.provider = provider

    async def __call__(self, scope: dict, receive: Any, send: Any) -> None:
        hooks = ("/test/expire-access", "/test/expire-all")
        if scope["type"] == "http" and scope["path"] in hooks and self.provider is not None:
            # Test hooks: every access token dies early (key rotation, say); with expire-all the
            # refresh tokens too (the user's session ended).
            self.provider.access.clear()
            self.provider.pairs.clear()
            if scope["path"] == "/test/expire-all":
                self.provider.refresh.clear()
            await send({"type": "http.response.start", "status": 204, "headers": []})
            await send({"type": "http.response.body", "body": b""})
            return
        if scope["type"] != "http" or scope["path"] != "/.well-known/oauth-authorization-server":
            await self.app(scope, receive, send)
            return
        start: dict[str, Any] = {}
        chunks: list[bytes] = []

        async def capture(message: dict) -> None:
            if message["type"] == "http.response.start":
                start.update(message)
            elif message["type"] == "http.response.body":
                chunks.append(message.get("body", b""))
                if not message.get("more_body"):
                    body = b"".join(chunks)
                    if start.get("status") == 200:
                        data = json.loads(body)
                        if self.args.no_s256:
                            data.pop("code_challenge_methods_supported", None)
                        if self.args.issuer_mismatch:
                            data["issuer"] = data["issuer"] + "/elsewhere"
                        if self.args.iss:
                            data["authorization_response_iss_parameter_supported"] = True
                        if self.args.cimd:
                            data["client_id_metadata_document_supported"] = True
                        body = json.dumps(data).encode()
                    headers = [(k, v) for k, v in start.get("headers", []) if k.lower() != b"content-length"]
                    headers.append((b"content-length", str(len(body)).encode()))
                    await send({"type": "http.response.start", "status": start["status"], "headers": headers})
                    await send({"type": "http.response.body", "body": body})

        await self.app(scope, receive, capture)


class StepUp:
    """Wraps the MCP app: tools/call of admin_echo needs the admin scope (403 otherwise)."""

    def __init__(self, app: Any, provider: ApprovingProvider, metadata_url: str) -> None:
        self.app = app
        self.provider = provider
        self.metadata_url = metadata_url

    async def __call__(self, scope: dict, receive: Any, send: Any) -> None:
        if scope["type"] != "http" or scope["method"] != "POST" or not scope["path"].startswith(("/mcp", "/messages")):
            await self.app(scope, receive, send)
            return
        body = b""
        more = True
        while more:
            message = await receive()
            body += message.get("body", b"")
            more = message.get("more_body", False)
        needs_admin = False
        try:
            msg = json.loads(body)
            needs_admin = (
                isinstance(msg, dict)
                and msg.get("method") == "tools/call"
                and (msg.get("params") or {}).get("name") == "admin_echo"
            )
        except ValueError:
            pass
        if needs_admin:
            auth = dict(scope.get("headers", [])).get(b"authorization", b"").decode()
            token = await self.provider.load_access_token(auth[7:]) if auth.lower().startswith("bearer ") else None
            if token is not None and "admin" not in token.scopes:
                challenge = (
                    f'Bearer error="insufficient_scope", scope="mcp admin", '
                    f'resource_metadata="{self.metadata_url}", error_description="admin_echo needs admin"'
                ).encode()
                payload = b'{"error":"insufficient_scope"}'
                await send(
                    {
                        "type": "http.response.start",
                        "status": 403,
                        "headers": [
                            (b"content-type", b"application/json"),
                            (b"content-length", str(len(payload)).encode()),
                            (b"www-authenticate", challenge),
                        ],
                    }
                )
                await send({"type": "http.response.body", "body": payload})
                return
        sent = False

        async def replay() -> dict:
            nonlocal sent
            if not sent:
                sent = True
                return {"type": "http.request", "body": body, "more_body": False}
            return await receive()

        await self.app(scope, replay, send)


def build(args: argparse.Namespace) -> list[tuple[Any, int]]:
    rs_origin = f"http://127.0.0.1:{args.port}"
    as_origin = f"http://127.0.0.1:{args.as_port}" if args.layout == "split" else rs_origin
    resource = rs_origin + ("/sse" if args.sse else "/mcp")
    provider = ApprovingProvider(args, as_origin, resource)
    extra: list[tuple[Any, int]] = []
    if args.idp_port:
        idp = IdentityProvider(f"http://127.0.0.1:{args.idp_port}", as_origin, resource)
        provider.idp = idp
        provider.clients["enterprise-client"] = OAuthClientInformationFull(
            client_id="enterprise-client", client_secret="enterprise-secret",
            token_endpoint_auth_method="client_secret_basic", grant_types=[JWT_BEARER_GRANT_TYPE],
            redirect_uris=None, scope="mcp admin",
        )
        extra.append((Starlette(routes=[Route("/token", idp.token, methods=["POST"])]), args.idp_port))
    registration = ClientRegistrationOptions(
        enabled=True, valid_scopes=["mcp", "admin", "offline_access"], default_scopes=["mcp"]
    )
    revocation = RevocationOptions(enabled=True)

    def tools(server: MCPServer) -> None:
        @server.tool()
        def whoami() -> str:
            """Who the bearer token belongs to."""
            tok = get_access_token()
            return json.dumps({"client_id": tok.client_id if tok else None, "scopes": tok.scopes if tok else None})

        @server.tool()
        def admin_echo(text: str) -> str:
            """Echo, for admins only."""
            return "admin: " + text

    metadata_url = f"{rs_origin}/.well-known/oauth-protected-resource" + ("/sse" if args.sse else "/mcp")

    def http_app(server: MCPServer) -> Any:
        if args.sse:
            return server.sse_app()
        return server.streamable_http_app(json_response=True, stateless_http=True)

    apps: list[tuple[Any, int]] = []
    if args.layout == "one-origin":
        settings = AuthSettings(
            issuer_url=as_origin,
            resource_server_url=None if args.legacy else resource,
            client_registration_options=registration,
            revocation_options=revocation,
            required_scopes=["mcp"],
            validate_token_resource=not args.legacy,
            identity_assertion_enabled=bool(args.idp_port),
        )
        server = MCPServer("auth-test", auth_server_provider=provider, auth=settings)
        tools(server)
        app = http_app(server)
        apps.append((RewriteMetadata(StepUp(app, provider, metadata_url), args, provider), args.port))
    else:
        as_settings = AuthSettings(
            issuer_url=as_origin,
            resource_server_url=None,
            client_registration_options=registration,
            revocation_options=revocation,
            identity_assertion_enabled=bool(args.idp_port),
        )
        as_app = Starlette(
            routes=create_auth_routes(
                provider=provider,
                issuer_url=as_settings.issuer_url,
                client_registration_options=registration,
                revocation_options=revocation,
                identity_assertion_enabled=bool(args.idp_port),
            )
        )
        apps.append((RewriteMetadata(as_app, args, provider), args.as_port))
        rs_settings = AuthSettings(
            issuer_url=as_origin,
            resource_server_url=resource,
            required_scopes=["mcp"],
            validate_token_resource=True,
        )
        verifier = Verifier(provider)
        server = MCPServer("auth-test-rs", token_verifier=verifier, auth=rs_settings)
        tools(server)
        app: Any = StepUp(http_app(server), provider, metadata_url)
        if args.second_as_port:
            second_origin = f"http://127.0.0.1:{args.second_as_port}"
            second = ApprovingProvider(args, second_origin, resource)
            second_settings = AuthSettings(issuer_url=second_origin, resource_server_url=None,
                                           client_registration_options=registration, revocation_options=revocation)
            second_app = Starlette(routes=create_auth_routes(
                provider=second, issuer_url=second_settings.issuer_url,
                client_registration_options=registration, revocation_options=revocation,
            ))
            apps.append((RewriteMetadata(second_app, args, second), args.second_as_port))
            app = SwitchableResource(app, verifier, second, metadata_url.split(rs_origin, 1)[1])
        apps.append((app, args.port))
    return apps + extra


async def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("--port", type=int, required=True)
    p.add_argument("--as-port", type=int, default=0)
    p.add_argument("--layout", choices=["one-origin", "split"], default="one-origin")
    p.add_argument("--token-lifetime", type=int, default=3600)
    p.add_argument("--preregister", action="append")
    p.add_argument("--expected-resource")
    p.add_argument("--no-s256", action="store_true")
    p.add_argument("--issuer-mismatch", action="store_true")
    p.add_argument("--bad-iss", action="store_true")
    p.add_argument("--wrong-state", action="store_true")
    p.add_argument("--iss", action="store_true")
    p.add_argument("--legacy", action="store_true", help="2025-03-26 era: no protected-resource metadata")
    p.add_argument("--deny-scope", action="append", help="never grant this scope (silent down-scoping)")
    p.add_argument("--sse", action="store_true", help="serve the 2024-11-05 HTTP+SSE transport at /sse")
    p.add_argument("--second-as-port", type=int, default=0,
                   help="split layout: a second authorization server the resource can move to")
    p.add_argument("--cimd", action="store_true", help="accept Client ID Metadata Document URLs as client ids")
    p.add_argument("--idp-port", type=int, default=0, help="run an enterprise IdP (RFC 8693 → ID-JAG) there")
    args = p.parse_args()
    servers = [
        uvicorn.Server(uvicorn.Config(app, host="127.0.0.1", port=port, log_level="warning", lifespan="on"))
        for app, port in build(args)
    ]
    tasks = [asyncio.create_task(s.serve()) for s in servers]
    for _ in range(200):
        if all(s.started for s in servers):
            break
        await asyncio.sleep(0.05)
    print("READY", flush=True)
    await asyncio.gather(*tasks)


if __name__ == "__main__":
    try:
        asyncio.run(main())
    except KeyboardInterrupt:
        sys.exit(0)
