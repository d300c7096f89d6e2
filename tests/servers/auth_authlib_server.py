"""A real Authlib (Flask) authorization server for the device grant (RFC 8628), client credentials
(client_secret_basic / client_secret_post / private_key_jwt, RFC 7523), DPoP (RFC 9449, proofs checked
with joserfc, server nonces at both the token endpoint and /mcp) and strict RFC 8707 checks,
in front of a small bearer-protected JSON-RPC endpoint at /mcp that answers like an MCP server.

Strict RFC 8707: every device-authorization and token request must carry exactly one ``resource``,
equal to this server's /mcp URL (or ``--expected-resource``); anything else is ``invalid_target``.
Tokens are bound to the resource they were issued for.

Clients (fixed): ``device-client`` (public, device grant + refresh), ``machine-basic`` and
``machine-post`` (secret ``machine-secret``), ``machine-jwt`` (private_key_jwt, its public JWK
from ``--jwk``).

The test approves a device request by GET /device/approve?user_code=… (the user's browser).
GET /token/requests counts the token endpoint's requests.
Prints READY when listening.
"""

from __future__ import annotations

import argparse
import json
import os
import secrets
import threading
import time

os.environ["AUTHLIB_INSECURE_TRANSPORT"] = "1"  # plain http, 127.0.0.1 only

import base64
import hashlib

from flask import Flask, g, jsonify, request
from joserfc import jws
from joserfc import jwk as joserfc_jwk
from werkzeug.serving import make_server

from authlib.integrations.flask_oauth2 import AuthorizationServer
from authlib.oauth2.rfc6749 import ClientMixin, grants
from authlib.oauth2.rfc7523 import JWTBearerClientAssertion
from authlib.oauth2.rfc8628 import DeviceAuthorizationEndpoint, DeviceCodeGrant, DeviceCredentialDict

p = argparse.ArgumentParser()
p.add_argument("--port", type=int, required=True)
p.add_argument("--token-lifetime", type=int, default=3600)
p.add_argument("--expected-resource")
p.add_argument("--jwk")
p.add_argument("--jwt-audience", choices=["any", "issuer"], default="any",
               help="the private_key_jwt audiences accepted: the token URL or the issuer (any), "
                    "or only the issuer identifier (issuer; what the MCP conformance suite accepts)")
p.add_argument("--dpop", action="store_true", help="DPoP-bound tokens (RFC 9449) with server nonces")
p.add_argument("--dpop-rotate-nonce", action="store_true",
               help="a new resource nonce with every use_dpop_nonce challenge: a client never catches up "
                    "(GET /mcp-posts counts the POSTs to /mcp)")
p.add_argument("--dpop-challenge", action="store_true",
               help="DPoP as the conformance suite's server does it: the protected-resource metadata does "
                    "not require it, a request without a token gets a `DPoP` challenge without a nonce, and "
                    "the resource's nonce comes only with a use_dpop_nonce challenge")
p.add_argument("--slow-down", action="store_true",
               help="answer a device code's first pending poll with slow_down, then hold the client to "
                    "the interval plus 5 s (RFC 8628 §3.5); GET /device/slow-downs counts those sent")
p.add_argument("--issuer-path", default="", help="an issuer with a path component, e.g. /tenant1")
p.add_argument("--metadata-at", default="oauth",
               choices=["oauth", "oidc-inserted", "oidc-appended"],
               help="where the metadata lives: RFC 8414 / OIDC with the path after / before the well-known part")
args = p.parse_args()

DPOP = args.dpop or args.dpop_challenge
ORIGIN = f"http://127.0.0.1:{args.port}"
ISSUER = ORIGIN + args.issuer_path
RESOURCE = ORIGIN + "/mcp"
EXPECTED = args.expected_resource or RESOURCE
TOKEN_URL = ORIGIN + "/token"


class Client(ClientMixin):
    def __init__(self, client_id, secret, method, grants_, scope="mcp", jwk=None):
        self.client_id, self.secret, self.method, self.grants, self.scope, self.jwk = (
            client_id, secret, method, grants_, scope, jwk,
        )

    def get_client_id(self):
        return self.client_id

    def get_default_redirect_uri(self):
        return None

    def get_allowed_scope(self, scope):
        if not scope:
            return ""
        allowed = set(self.scope.split())
        return " ".join(s for s in scope.split() if s in allowed)

    def check_redirect_uri(self, redirect_uri):
        return False

    def check_client_secret(self, client_secret):
        return self.secret is not None and secrets.compare_digest(self.secret, client_secret)

    def check_endpoint_auth_method(self, method, endpoint):
        return method == self.method

    def check_response_type(self, response_type):
        return False

    def check_grant_type(self, grant_type):
        return grant_type in self.grants


CLIENTS = {
    "device-client": Client("device-client", None, "none",
                            [DeviceCodeGrant.GRANT_TYPE], "mcp"),
    "machine-basic": Client("machine-basic", "machine-secret", "client_secret_basic", ["client_credentials"]),
    "machine-post": Client("machine-post", "machine-secret", "client_secret_post", ["client_credentials"]),
    "machine-jwt": Client("machine-jwt", None, "private_key_jwt", ["client_credentials"],
                          jwk=json.loads(args.jwk) if args.jwk else None),
}
TOKENS: dict[str, dict] = {}
DEVICE: dict[str, DeviceCredentialDict] = {}
GRANTS: dict[str, tuple[str, bool]] = {}
LOCK = threading.Lock()

app = Flask(__name__)


def query_client(client_id):
    return CLIENTS.get(client_id)


def save_token(token, req):
    with LOCK:
        TOKENS[token["access_token"]] = {
            "client_id": req.client.get_client_id(),
            "scope": token.get("scope", ""),
            "expires_at": time.time() + token.get("expires_in", args.token_lifetime),
            "resource": request.form.get("resource"),
            "jkt": g.get("dpop_jkt"),
        }


app.config["OAUTH2_TOKEN_EXPIRES_IN"] = {
    "client_credentials": args.token_lifetime,
    DeviceCodeGrant.GRANT_TYPE: args.token_lifetime,
}
server = AuthorizationServer(app, query_client=query_client, save_token=save_token)


class PrivateKeyJWT(JWTBearerClientAssertion):
    CLIENT_AUTH_METHOD = "private_key_jwt"

    def get_audiences(self):
        return [ISSUER] if args.jwt_audience == "issuer" else [TOKEN_URL, ISSUER]

    def resolve_client_public_key(self, client):
        return client.jwk

    def validate_jti(self, claims, jti):
        return True


class ClientCredentials(grants.ClientCredentialsGrant):
    TOKEN_ENDPOINT_AUTH_METHODS = ["client_secret_basic", "client_secret_post", "private_key_jwt"]


class Device(DeviceCodeGrant):
    def query_device_credential(self, device_code):
        return DEVICE.get(device_code)

    def query_user_grant(self, user_code):
        return GRANTS.get(user_code)

    def should_slow_down(self, credential):
        # --slow-down: the first pending poll is told to slow down; from then on a poll
        # sooner than the interval plus 5 s (less a little slack) is told again
        if not args.slow_down:
            return False
        code = credential.get("device_code")
        now = time.monotonic()
        last = POLLS.get(code)
        POLLS[code] = now
        if last is None or now - last < DeviceEndpoint.INTERVAL + 5 - 0.5:
            SLOW_DOWNS.append(code)
            return True
        return False


POLLS: dict[str, float] = {}  # device code → when it was last polled (--slow-down)
SLOW_DOWNS: list[str] = []  # the device codes told to slow down, once per time


class DeviceEndpoint(DeviceAuthorizationEndpoint):
    INTERVAL = 1
    EXPIRES_IN = 60

    def get_verification_uri(self):
        return ORIGIN + "/device"

    def save_device_credential(self, client_id, scope, data):
        DEVICE[data["device_code"]] = DeviceCredentialDict(
            client_id=client_id, scope=scope, expires_at=time.time() + data["expires_in"], **data
        )


server.register_client_auth_method(PrivateKeyJWT.CLIENT_AUTH_METHOD, PrivateKeyJWT())
server.register_grant(ClientCredentials)
server.register_grant(Device)
server.register_endpoint(DeviceEndpoint)


NONCES = {"as": secrets.token_urlsafe(12), "rs": secrets.token_urlsafe(12)}
SEEN_JTI: set[str] = set()


def check_dpop(htu: str, which: str, access_token: str | None = None):
    """Verify the request's DPoP proof with joserfc; returns (jkt, None) or (None, error)."""
    proof = request.headers.get("DPoP")
    if not proof:
        return None, "invalid_dpop_proof"
    try:
        header = jws.extract_compact(proof.encode()).headers()
        if header.get("typ") != "dpop+jwt" or "jwk" not in header:
            return None, "invalid_dpop_proof"
        key = joserfc_jwk.import_key(header["jwk"])
        claims = json.loads(jws.deserialize_compact(proof, key, algorithms=["ES256", "RS256"]).payload)
    except Exception:
        return None, "invalid_dpop_proof"
    if claims.get("htm") != request.method or claims.get("htu") != htu:
        return None, "invalid_dpop_proof"
    if abs(time.time() - claims.get("iat", 0)) > 60 or claims.get("jti") in SEEN_JTI:
        return None, "invalid_dpop_proof"
    if access_token is not None:
        ath = base64.urlsafe_b64encode(hashlib.sha256(access_token.encode()).digest()).rstrip(b"=").decode()
        if claims.get("ath") != ath:
            return None, "invalid_dpop_proof"
    if claims.get("nonce") != NONCES[which]:
        return None, "use_dpop_nonce"
    SEEN_JTI.add(claims["jti"])
    return key.thumbprint(), None


@app.before_request
def dpop_at_token_endpoint():
    if DPOP and request.path == "/token" and request.method == "POST":
        jkt, error = check_dpop(TOKEN_URL, "as")
        if error:
            return jsonify(error=error), 400, {"DPoP-Nonce": NONCES["as"]}
        g.dpop_jkt = jkt
    return None


@app.after_request
def dpop_token_type(response):
    if DPOP and request.path == "/token" and response.status_code == 200:
        data = response.get_json()
        data["token_type"] = "DPoP"
        response.set_data(json.dumps(data))
    return response


@app.before_request
def strict_resource():
    if request.path in ("/token", "/device_authorization") and request.method == "POST":
        resources = request.form.getlist("resource")
        if len(resources) != 1 or resources[0] != EXPECTED:
            return jsonify(error="invalid_target", error_description="resource must name this MCP server"), 400
    return None


_METADATA_PATH = {
    "oauth": "/.well-known/oauth-authorization-server" + args.issuer_path,
    "oidc-inserted": "/.well-known/openid-configuration" + args.issuer_path,
    "oidc-appended": args.issuer_path + "/.well-known/openid-configuration",
}[args.metadata_at]


@app.get(_METADATA_PATH)
def metadata():
    return jsonify(
        issuer=ISSUER,
        token_endpoint=TOKEN_URL,
        device_authorization_endpoint=ORIGIN + "/device_authorization",
        grant_types_supported=["client_credentials", DeviceCodeGrant.GRANT_TYPE],
        token_endpoint_auth_methods_supported=["client_secret_basic", "client_secret_post", "private_key_jwt", "none"],
        token_endpoint_auth_signing_alg_values_supported=["ES256", "RS256"],
        scopes_supported=["mcp"],
        dpop_signing_alg_values_supported=["ES256", "RS256"] if DPOP else None,
        response_types_supported=["code"],
        code_challenge_methods_supported=["S256"],
    )


@app.get("/.well-known/oauth-protected-resource/mcp")
def protected_resource():
    return jsonify(resource=RESOURCE, authorization_servers=[ISSUER], scopes_supported=["mcp"],
                   dpop_bound_access_tokens_required=args.dpop)


TOKEN_REQUESTS: list[str] = []  # the grant_type of every token request (GET /token/requests)


@app.post("/token")
def token():
    TOKEN_REQUESTS.append(request.form.get("grant_type", ""))
    return server.create_token_response()


@app.get("/token/requests")
def token_requests():
    return jsonify(count=len(TOKEN_REQUESTS), grant_types=TOKEN_REQUESTS)


@app.post("/device_authorization")
def device_authorization():
    return server.create_endpoint_response(DeviceEndpoint.ENDPOINT_NAME)


@app.get("/device/slow-downs")
def slow_downs():
    return jsonify(count=len(SLOW_DOWNS))


@app.get("/device/approve")
def approve():
    user_code = request.args["user_code"]
    GRANTS[user_code] = ({"id": "device-user"}, request.args.get("deny") is None)
    return "ok"


MCP_POSTS = [0]


@app.get("/mcp-posts")
def mcp_posts():
    return jsonify(count=MCP_POSTS[0])


@app.post("/mcp")
def mcp():
    MCP_POSTS[0] += 1
    challenge = f'Bearer resource_metadata="{ORIGIN}/.well-known/oauth-protected-resource/mcp"'
    auth = request.headers.get("Authorization", "")
    scheme, _, token = auth.partition(" ")
    info = TOKENS.get(token) if scheme.lower() in ("bearer", "dpop") else None
    if args.dpop_challenge and info is None:
        return jsonify(error="invalid_token"), 401, {"WWW-Authenticate": "DPoP" + challenge[len("Bearer"):]}
    if info is None or info["expires_at"] < time.time() or info["resource"] != RESOURCE:
        headers = {"WWW-Authenticate": challenge + ', error="invalid_token"'}
        if args.dpop:
            headers["DPoP-Nonce"] = NONCES["rs"]  # RFC 9449 §9: a nonce may come with any 401
        return jsonify(error="invalid_token"), 401, headers
    if info.get("jkt"):
        # A DPoP-bound token: only with the DPoP scheme and a proof from the bound key (RFC 9449 §7).
        if scheme.lower() != "dpop":
            return jsonify(error="invalid_token"), 401, {"WWW-Authenticate": 'DPoP error="invalid_token"'}
        jkt, error = check_dpop(RESOURCE, "rs", access_token=token)
        if error or jkt != info["jkt"]:
            headers = {"WWW-Authenticate": f'DPoP error="{error or "invalid_dpop_proof"}"', "DPoP-Nonce": NONCES["rs"]}
            if error == "use_dpop_nonce" and args.dpop_rotate_nonce:
                NONCES["rs"] = secrets.token_urlsafe(12)  # stale before the client can use it
            return jsonify(error=error or "invalid_dpop_proof"), 401, headers
    msg = request.get_json()
    if msg.get("method") == "initialize":
        result = {"protocolVersion": "2025-06-18", "capabilities": {}, "serverInfo": {"name": "authlib-rs", "version": "0"}}
    else:
        result = {"content": [{"type": "text", "text": json.dumps({"client_id": info["client_id"], "scope": info["scope"]})}]}
    return jsonify(jsonrpc="2.0", id=msg.get("id"), result=result)


if __name__ == "__main__":
    httpd = make_server("127.0.0.1", args.port, app, threaded=True)
    print("READY", flush=True)
    httpd.serve_forever()
