"""OAuth 2.1 for remote MCP servers: the :class:`OAuth` object the HTTP transports call.

The flow, as the MCP authorization spec orders it:

1. **Discovery** (:mod:`._metadata`): the 401's ``WWW-Authenticate``, protected-resource
   metadata (RFC 9728), authorization-server metadata (RFC 8414 / OIDC), cached.
2. **Registration**, in order: a pre-registered client (arguments, environment, or the token
   store), a Client ID Metadata Document (when the server advertises support and a document URL
   is configured), Dynamic Client Registration (RFC 7591, ``application_type: native``).
   Registrations are stored per issuer.
3. **Authorization**: authorization code + PKCE S256 (a server that does not advertise S256 is
   refused), ``state`` and RFC 9207 ``iss`` checked, RFC 8707 ``resource`` on every authorization
   and token request, the redirect received on a loopback listener on ``127.0.0.1`` with its exact
   port; the URL opened with :mod:`webbrowser` or handed to a hook. Or the device grant
   (RFC 8628), client credentials, an RFC 7523 JWT-bearer assertion, or the enterprise
   RFC 8693 token exchange for an ID-JAG followed by the JWT-bearer grant.
4. **Use**: :meth:`OAuth.headers` gives ``Authorization: Bearer …`` (or ``DPoP …`` with a
   proof, RFC 9449) for every request; :meth:`OAuth.on_response` handles 401 (refresh, else a
   new authorization), 403 ``insufficient_scope`` (step-up with the union of scopes, bounded) and
   DPoP nonces.
5. **Refresh** on a background thread before expiry, so callers never wait for it.

Tokens live in a :class:`~mcpsync.auth.storage.TokenStore` (the OS keyring by default). No token,
secret, code or verifier appears in logs, exception messages or ``repr``.
"""

from __future__ import annotations

import base64
import contextlib
import hmac
import logging
import os
import secrets
import sys
import threading
import time
import weakref
from dataclasses import dataclass, field, replace
from typing import Any, Callable, Iterable, Iterator, Mapping
from urllib.parse import quote, urlencode, urlsplit

from .._errors import AuthError, ConnectError, PermissionDenied
from ._jose import DPoPKey, SigningKey, client_assertion, pkce_pair
from ._loopback import LoopbackRedirect
from ._metadata import (
    AuthMetadata,
    AuthServerMetadata,
    canonical_resource,
    clear_metadata_cache,
    discover_auth_metadata,
    parse_www_authenticate,
)
from .storage import ClientInfo, MemoryTokenStore, TokenSet, TokenStore, default_store, key_lock

__all__ = [
    "OAuth",
    "AuthorizationRequest",
    "DeviceAuthorization",
    "EnterpriseIdentity",
    "initiate_authorization",
    "exchange_code",
    "refresh_access_token",
    "get_valid_token",
    "discover_auth_metadata",
]

log = logging.getLogger("mcpsync.auth")

GRANT_CODE = "authorization_code"
GRANT_REFRESH = "refresh_token"
GRANT_CLIENT_CREDENTIALS = "client_credentials"
GRANT_DEVICE = "urn:ietf:params:oauth:grant-type:device_code"
GRANT_JWT_BEARER = "urn:ietf:params:oauth:grant-type:jwt-bearer"
GRANT_TOKEN_EXCHANGE = "urn:ietf:params:oauth:grant-type:token-exchange"
TOKEN_TYPE_ID_JAG = "urn:ietf:params:oauth:token-type:id-jag"
TOKEN_TYPE_ID_TOKEN = "urn:ietf:params:oauth:token-type:id_token"
ASSERTION_TYPE_JWT = "urn:ietf:params:oauth:client-assertion-type:jwt-bearer"

_GRANTS = {
    "authorization_code": GRANT_CODE,
    "device_code": GRANT_DEVICE,
    "client_credentials": GRANT_CLIENT_CREDENTIALS,
    "jwt_bearer": GRANT_JWT_BEARER,
    "enterprise": GRANT_JWT_BEARER,
}


@dataclass(frozen=True, slots=True)
class AuthorizationRequest:
    """An authorization request in flight: the URL to open and what checks its answer.

    Iterates as ``(url, verifier)``, the seed interface's pair.
    """

    url: str = field(repr=False)  # carries the state: not for logs
    verifier: str = field(repr=False)
    state: str = field(repr=False)
    redirect_uri: str = ""
    scopes: tuple[str, ...] = ()
    resource: str = ""
    client: ClientInfo | None = field(default=None, repr=False)
    metadata: AuthMetadata | None = field(default=None, repr=False)

    def __iter__(self):  # type: ignore[no-untyped-def]
        return iter((self.url, self.verifier))


@dataclass(frozen=True, slots=True)
class DeviceAuthorization:
    """What a user must do to approve a device-grant request (RFC 8628 §3.2)."""

    user_code: str
    verification_uri: str
    verification_uri_complete: str | None
    expires_in: float
    interval: float


@dataclass(frozen=True, slots=True)
class EnterpriseIdentity:
    """Enterprise-managed authorization (the MCP ``enterprise-managed-authorization`` extension):
    an identity-provider token is exchanged (RFC 8693) at the IdP for an ID-JAG, which is then
    presented to the MCP authorization server with the RFC 7523 JWT-bearer grant.

    Attributes:
        idp_token_endpoint: the identity provider's token endpoint.
        subject_token: a callable giving the user's current IdP token (an ID token by default).
        subject_token_type: the RFC 8693 type of that token.
        idp_client_id: the client id at the IdP; ``idp_client_secret`` its secret, if any.
    """

    idp_token_endpoint: str
    subject_token: Callable[[], str] = field(repr=False)
    subject_token_type: str = TOKEN_TYPE_ID_TOKEN
    idp_client_id: str | None = None
    idp_client_secret: str | None = field(default=None, repr=False)


_registry: "weakref.WeakValueDictionary[str, OAuth]" = weakref.WeakValueDictionary()
_registry_lock = threading.Lock()


def get_valid_token(server_id: str) -> str:
    """A valid access token for the server registered as ``server_id`` (see :class:`OAuth`).

    Raises:
        AuthError: no :class:`OAuth` is registered under that id, or no valid token can be had.
    """
    with _registry_lock:
        auth = _registry.get(server_id)
    if auth is None:
        raise AuthError(f"no OAuth configuration for server {server_id!r}")
    return auth.get_valid_token()


def _session() -> Any:
    import requests

    return requests.Session()


def _is_loopback(uri: str) -> bool:
    parts = urlsplit(uri)
    return parts.scheme == "http" and parts.hostname in ("127.0.0.1", "localhost", "::1")


class _ThreadState(threading.local):
    generation: int = -1


class OAuth:
    """OAuth 2.1 authorization for one remote MCP server; the ``auth=`` object of the HTTP transports.

    Implements the transports' protocol: :meth:`headers` before every request, :meth:`on_response`
    on 401/403. Thread-safe: one instance serves every thread of a client; concurrent 401s share
    one refresh or authorization.

    Args:
        server_url: the MCP endpoint, e.g. ``https://mcp.example.com/mcp``.
        store: where tokens and registrations live (default: the OS keyring).
        server_id: the key for :func:`get_valid_token` (default: the server's canonical URL).
        scopes: scopes to ask for (default: the challenge's, else the resource's
            ``scopes_supported``, else none).
        client_id: a pre-registered client's id (never hard-code a client: pass values read
            from the environment or a vault).
        client_secret: that client's secret, if it has one.
        client_id_env: an environment variable holding a pre-registered client's id.
        client_secret_env: an environment variable holding its secret.
        client_metadata_url: the HTTPS URL of this client's Client ID Metadata Document.
        token_endpoint_auth_method: force one (``none``, ``client_secret_basic``,
            ``client_secret_post``, ``private_key_jwt``); default: what the server advertises.
        private_key: a :class:`SigningKey` (or PEM) for ``private_key_jwt`` (RFC 7523).
        grant: ``authorization_code`` (default), ``device_code``, ``client_credentials``,
            ``jwt_bearer`` (with ``assertion``) or ``enterprise`` (with ``enterprise``).
        assertion: a callable returning a JWT for the ``jwt_bearer`` grant (workload identity).
        enterprise: an :class:`EnterpriseIdentity` for the ``enterprise`` grant.
        open_browser: called with the authorization URL (default :func:`webbrowser.open`); a
            harness without a browser passes its own. If it returns the redirect URL (a string
            starting with the redirect URI) that is used instead of waiting for the listener.
        on_device_code: called with a :class:`DeviceAuthorization` (default: print to stderr).
        redirect_port: the loopback listener's port (0: any free port, registered exactly).
        dpop: use DPoP-bound tokens (True, or a :class:`DPoPKey`); ``None`` (default): only when the
            protected-resource metadata says ``dpop_bound_access_tokens_required``; False: never.
        client_name: the ``client_name`` sent on dynamic registration.
        timeout: per-HTTP-request timeout in seconds.
        interactive_timeout: how long to wait for the user (redirect or device approval).
        refresh_margin: refresh this many seconds before expiry (at most; at least a fifth of a
            short token's lifetime is kept as margin).
        max_step_up: step-up authorizations allowed per scope set.
        interactive: allow flows that need a user (False: only refresh and machine grants).
        session: a ``requests.Session`` for the OAuth requests.

    Example:
        >>> auth = OAuth("https://mcp.example.com/mcp", store=MemoryTokenStore())
        >>> auth.headers("https://mcp.example.com/mcp", "POST")   # no token yet: a 401 starts the flow
        {}
    """

    def __init__(
        self,
        server_url: str,
        *,
        store: TokenStore | None = None,
        server_id: str | None = None,
        scopes: Iterable[str] | None = None,
        client_id: str | None = None,
        client_secret: str | None = None,
        client_id_env: str | None = None,
        client_secret_env: str | None = None,
        client_metadata_url: str | None = None,
        token_endpoint_auth_method: str | None = None,
        private_key: SigningKey | bytes | str | None = None,
        grant: str = "authorization_code",
        assertion: Callable[[], str] | None = None,
        enterprise: EnterpriseIdentity | None = None,
        open_browser: Callable[[str], Any] | None = None,
        on_device_code: Callable[[DeviceAuthorization], Any] | None = None,
        redirect_port: int = 0,
        dpop: bool | DPoPKey | None = None,
        client_name: str = "mcpsync",
        timeout: float = 10.0,
        interactive_timeout: float = 300.0,
        refresh_margin: float = 60.0,
        max_step_up: int = 2,
        interactive: bool = True,
        session: Any = None,
    ) -> None:
        if grant not in _GRANTS:
            raise ValueError(f"unknown grant {grant!r}; one of {sorted(_GRANTS)}")
        self.server_url = server_url
        self.resource_key = canonical_resource(server_url)
        self.server_id = server_id or self.resource_key
        self._store: TokenStore = store if store is not None else default_store()
        self._scopes = tuple(scopes) if scopes is not None else None
        if client_id is None and client_id_env:
            client_id = os.environ.get(client_id_env) or None
        if client_secret is None and client_secret_env:
            client_secret = os.environ.get(client_secret_env) or None
        self._client_id = client_id
        self._client_secret = client_secret
        self._client_metadata_url = client_metadata_url
        self._auth_method = token_endpoint_auth_method
        if private_key is not None and not isinstance(private_key, SigningKey):
            private_key = SigningKey(private_key)
        self._private_key = private_key
        self.grant = grant
        self._assertion = assertion
        self._enterprise = enterprise
        if grant == "jwt_bearer" and assertion is None:
            raise ValueError("grant='jwt_bearer' needs assertion=")
        if grant == "enterprise" and enterprise is None:
            raise ValueError("grant='enterprise' needs enterprise=")
        self._open_browser = open_browser
        self._on_device_code = on_device_code
        self._redirect_port = redirect_port
        self._dpop: DPoPKey | None = dpop if isinstance(dpop, DPoPKey) else (DPoPKey() if dpop else None)
        self._dpop_auto = dpop is None
        self._early_nonce: tuple[str, str] | None = None
        self._listener: LoopbackRedirect | None = None
        self._client_name = client_name
        self._timeout = timeout
        self._interactive_timeout = interactive_timeout
        self._refresh_margin = refresh_margin
        self._max_step_up = max_step_up
        self._interactive = interactive
        self._http = session if session is not None else _session()

        self._lock = threading.Lock()  # guards the fields below; never held during I/O
        self._flow_lock = threading.Lock()  # one refresh/authorization at a time (single flight)
        self._cond = threading.Condition(self._lock)
        self._tokens: TokenSet | None = None
        self._loaded = False
        self._generation = 0
        self._metadata: AuthMetadata | None = None
        self._pending: AuthorizationRequest | None = None
        self._step_ups: dict[frozenset[str], int] = {}
        self._bg_failed_generation = -1
        self._closed = False
        self._refresher: threading.Thread | None = None
        self._local = _ThreadState()
        self._device_stop = threading.Event()
        #: counters for tests and metrics: refreshes (background / inline), authorizations.
        self.stats = {"background_refreshes": 0, "refreshes": 0, "authorizations": 0, "step_ups": 0}
        with _registry_lock:
            _registry[self.server_id] = self

    def __repr__(self) -> str:
        with self._lock:
            state = "token" if self._tokens is not None else "no token"
        return f"OAuth({self.server_url!r}, grant={self.grant!r}, {state})"

    # ------------------------------------------------------------------ transport protocol

    def headers(self, url: str, method: str) -> dict[str, str]:
        """Headers for one HTTP request to the server (empty while no token is held).

        A token past its expiry is refreshed here (the background refresher normally got there
        first); without any token the request goes out bare and its 401 starts the flow in
        :meth:`on_response`.
        """
        tokens, generation = self._current()
        if tokens is not None and tokens.expired(leeway=0.5) and self._can_renew_silently(tokens):
            try:
                self._renew(generation, background=False)
            except AuthError:
                pass  # the 401 that follows takes the full path
            tokens, generation = self._current()
        self._local.generation = generation
        if tokens is None:
            return {}
        return self._auth_headers(tokens, url, method)

    def on_response(self, url: str, method: str, status: int, headers: Mapping[str, str]) -> bool:
        """React to a 401/403. True: retry the request once (fresh :meth:`headers`).

        Raises:
            AuthError: the authorization the 401 demanded failed (message says why).
            PermissionDenied: a 403 ``insufficient_scope`` that step-up could not satisfy.
        """
        lower = {k.lower(): v for k, v in headers.items()}
        challenges = parse_www_authenticate(lower.get("www-authenticate"))
        challenge = next((c for c in challenges if c.scheme in ("bearer", "dpop")), None)
        used_generation = self._local.generation
        if self._dpop is None and self._dpop_auto and any(c.scheme == "dpop" for c in challenges):
            self._enable_dpop()  # the resource asks for sender-constrained tokens (RFC 9449 §7.1)
        if "dpop-nonce" in lower:
            if self._dpop is not None:
                fresh_nonce = self._dpop.remember_nonce(url, lower["dpop-nonce"])
                if challenge is not None and challenge.error == "use_dpop_nonce":
                    return fresh_nonce
            elif self._dpop_auto:
                with self._lock:  # kept for the key DPoP auto-enabling may create next
                    self._early_nonce = (url, lower["dpop-nonce"])
        if status == 401:
            return self._on_unauthorized(used_generation, lower.get("www-authenticate"), challenge)
        if status == 403 and challenge is not None and challenge.error == "insufficient_scope":
            return self._step_up(used_generation, challenge.scope, lower.get("www-authenticate"))
        return False

    # ------------------------------------------------------------------ seed interface

    def discover_auth_metadata(
        self, server_url: str | None = None, *, www_authenticate: str | None = None, use_cache: bool = True
    ) -> AuthMetadata:
        """Discovery for this server (cached); see :func:`mcpsync.auth.discover_auth_metadata`."""
        md = discover_auth_metadata(
            server_url or self.server_url,
            www_authenticate=www_authenticate,
            session=self._http,
            timeout=self._timeout,
            use_cache=use_cache,
        )
        with self._lock:
            previous = self._metadata
            self._metadata = md
        if previous is not None and previous.issuer != md.issuer:
            log.info("authorization server of %s changed issuer; its old registration is not reused", self.server_url)
        return md

    def initiate_authorization(
        self,
        metadata: AuthMetadata | None = None,
        scopes: Iterable[str] | None = None,
        *,
        redirect_uri: str | None = None,
    ) -> AuthorizationRequest:
        """Build an authorization-code + PKCE request: the URL to open and its verifier.

        Registers a client first if none is known for the issuer. Without ``redirect_uri`` the
        loopback URI of ``redirect_port`` is used (a fixed port must then be configured).

        Raises:
            AuthError: the server does not advertise PKCE S256, or no client can be registered.
        """
        md = metadata or self._metadata_or_discover()
        asm = md.authorization_server
        if asm.authorization_endpoint is None:
            raise AuthError(f"authorization server {asm.issuer} has no authorization_endpoint")
        if not asm.legacy_defaults and "S256" not in (asm.code_challenge_methods_supported or ()):
            raise AuthError(
                f"authorization server {asm.issuer} does not advertise PKCE S256 "
                "(code_challenge_methods_supported); refusing to authorize"
            )
        if asm.response_types_supported is not None and "code" not in asm.response_types_supported:
            raise AuthError(f"authorization server {asm.issuer} does not support response_type=code")
        if redirect_uri is None:
            if not self._redirect_port:
                raise AuthError("initiate_authorization needs redirect_uri= or a fixed redirect_port")
            redirect_uri = f"http://127.0.0.1:{self._redirect_port}/callback"
        client = self._client_for(md, redirect_uri)
        chosen = self._choose_scopes(md, scopes)
        verifier, challenge = pkce_pair()
        state = secrets.token_urlsafe(32)
        params = {
            "response_type": "code",
            "client_id": client.client_id,
            "redirect_uri": redirect_uri,
            "code_challenge": challenge,
            "code_challenge_method": "S256",
            "state": state,
            "resource": md.resource,
        }
        if chosen:
            params["scope"] = " ".join(chosen)
        sep = "&" if urlsplit(asm.authorization_endpoint).query else "?"
        url = asm.authorization_endpoint + sep + urlencode(params, quote_via=quote)
        req = AuthorizationRequest(url, verifier, state, redirect_uri, tuple(chosen), md.resource, client, md)
        with self._lock:
            self._pending = req
        return req

    def exchange_code(
        self, code: str, verifier: str, *, state: str | None = None, iss: str | None = None
    ) -> TokenSet:
        """Exchange an authorization code (from :meth:`initiate_authorization`'s request) for tokens.

        ``state`` and ``iss``, when given, are checked as the redirect's parameters would be.
        """
        with self._lock:
            req = self._pending
        if req is None:
            raise AuthError("exchange_code without a pending initiate_authorization()")
        params: dict[str, str] = {"code": code}
        if state is not None:
            params["state"] = state
        if iss is not None:
            params["iss"] = iss
        return self._complete(replace(req, verifier=verifier), params, check_state=state is not None)

    def complete_authorization(self, callback_url: str, request: AuthorizationRequest | None = None) -> TokenSet:
        """Finish a request with the full redirect URL it came back on (state and iss checked)."""
        from urllib.parse import parse_qs

        with self._lock:
            req = request or self._pending
        if req is None:
            raise AuthError("no pending authorization request")
        query = urlsplit(callback_url).query
        params = {k: v[0] for k, v in parse_qs(query, keep_blank_values=True).items()}
        return self._complete(req, params, check_state=True)

    def refresh_access_token(self, refresh_token: str | None = None) -> TokenSet:
        """Use a refresh token (default: the held one) for new tokens; stores them.

        Raises:
            AuthError: no refresh token, or the server refused it (the held tokens are dropped).
        """
        md = self._metadata_or_discover()
        tokens, _ = self._current()
        rt = refresh_token or (tokens.refresh_token if tokens else None)
        if not rt:
            raise AuthError("no refresh token to use")
        client = self._stored_or_preregistered_client(md)
        if client is None:
            raise AuthError("no registered client to refresh with")
        form = {"grant_type": GRANT_REFRESH, "refresh_token": rt, "resource": md.resource}
        try:
            new = self._token_request(md, client, form, previous=tokens)
        except AuthError:
            if tokens is not None and tokens.refresh_token == rt:
                self._drop_tokens()
            raise
        self._install(new)
        return new

    def get_valid_token(self, server_id: str | None = None) -> str:
        """A valid access token: the held one, else refreshed, else newly authorized.

        Raises:
            AuthError: none could be had.
        """
        if server_id is not None and server_id != self.server_id:
            return get_valid_token(server_id)
        tokens, generation = self._current()
        if tokens is not None and not tokens.expired(leeway=1.0):
            return tokens.access_token
        self._renew(generation, background=False, allow_interactive=True)
        tokens, _ = self._current()
        if tokens is None or tokens.expired():
            raise AuthError(f"no valid token for {self.server_url}")
        return tokens.access_token

    # ------------------------------------------------------------------ other public API

    def authorize(self, scopes: Iterable[str] | None = None, *, www_authenticate: str | None = None) -> TokenSet:
        """Run the configured grant now (a browser/device flow for user grants). Stores the tokens."""
        with self._flow():
            return self._authorize_locked(scopes, www_authenticate)

    def token_env(self, name: str = "MCP_ACCESS_TOKEN") -> dict[str, str]:
        """The token as an environment entry for a stdio server: ``{name: token}``.

        Example:
            >>> env = {**os.environ, **auth.token_env()}          # doctest: +SKIP
            >>> StdioTransport(["my-server"], env=env)             # doctest: +SKIP
        """
        return {name: self.get_valid_token()}

    def revoke(self) -> bool:
        """Revoke the held tokens at the server (RFC 7009, when it has a revocation endpoint)
        and forget them locally. True if the server accepted the revocation."""
        with self._flow():
            tokens, _ = self._current()
            self._drop_tokens()
            if tokens is None:
                return False
            md = self._metadata_or_discover()
            asm = md.authorization_server
            client = self._stored_or_preregistered_client(md)
            if asm.revocation_endpoint is None or client is None:
                return False
            ok = True
            for token, hint in ((tokens.refresh_token, "refresh_token"), (tokens.access_token, "access_token")):
                if not token:
                    continue
                form = {"token": token, "token_type_hint": hint}
                ok = self._revoke_one(asm, client, form) and ok
            return ok

    def forget_client(self) -> None:
        """Drop the stored registration for the current authorization server."""
        md = self._metadata_or_discover()
        self._store.delete_client(md.issuer)

    @property
    def tokens(self) -> TokenSet | None:
        """The held token set (its ``repr`` hides the secrets)."""
        return self._current()[0]

    @property
    def generation(self) -> int:
        """Incremented every time the held tokens change."""
        with self._lock:
            return self._generation

    def close(self) -> None:
        """Stop the background refresher and any device-grant polling."""
        with self._cond:
            self._closed = True
            self._cond.notify_all()
            thread = self._refresher
            listener, self._listener = self._listener, None
        self._device_stop.set()
        if listener is not None:
            listener.close()
        if thread is not None and thread is not threading.current_thread():
            thread.join(timeout=2.0)
        with _registry_lock:
            if _registry.get(self.server_id) is self:
                del _registry[self.server_id]
        close = getattr(self._http, "close", None)
        if close is not None:
            close()

    def __enter__(self) -> "OAuth":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # ------------------------------------------------------------------ state

    @contextlib.contextmanager
    def _flow(self) -> Iterator[None]:
        """The single-flight lock for refreshes and authorizations, with a bounded wait."""
        limit = self._interactive_timeout + 6 * self._timeout
        if not self._flow_lock.acquire(timeout=limit):
            raise AuthError(
                f"gave up after {limit:g} s waiting for another thread's authorization of {self.server_url}"
            )
        try:
            if self._closed:
                raise AuthError("this OAuth object is closed")
            yield
        finally:
            self._flow_lock.release()

    def _current(self) -> tuple[TokenSet | None, int]:
        with self._lock:
            if self._loaded:
                return self._tokens, self._generation
        stored = self._store.load_tokens(self.resource_key)  # I/O outside the lock
        start = False
        with self._lock:
            if not self._loaded:
                self._loaded = True
                if stored is not None and self._tokens is None:
                    self._tokens = stored
                    self._generation += 1
                    start = True
            result = (self._tokens, self._generation)
        if start:
            self._ensure_refresher()
        return result

    def _install(self, tokens: TokenSet) -> None:
        self._store.save_tokens(self.resource_key, tokens)
        with self._cond:
            self._tokens = tokens
            self._loaded = True
            self._generation += 1
            self._cond.notify_all()
        self._ensure_refresher()

    def _drop_tokens(self) -> None:
        try:
            self._store.delete_tokens(self.resource_key)
        finally:
            with self._cond:
                self._tokens = None
                self._loaded = True
                self._generation += 1
                self._cond.notify_all()

    def _metadata_or_discover(self) -> AuthMetadata:
        with self._lock:
            md = self._metadata
        return md if md is not None else self.discover_auth_metadata()

    def _can_renew_silently(self, tokens: TokenSet) -> bool:
        return bool(tokens.refresh_token) or self.grant in ("client_credentials", "jwt_bearer", "enterprise")

    def _auth_headers(self, tokens: TokenSet, url: str, method: str) -> dict[str, str]:
        if tokens.token_type.lower() == "dpop":
            if self._dpop is None:
                raise AuthError("a DPoP-bound token is held but no DPoP key is configured")
            return {
                "Authorization": f"DPoP {tokens.access_token}",
                "DPoP": self._dpop.proof(method, url, tokens.access_token),
            }
        return {"Authorization": f"Bearer {tokens.access_token}"}

    # ------------------------------------------------------------------ 401 / 403

    def _on_unauthorized(self, used_generation: int, www_authenticate: str | None, challenge: Any) -> bool:
        with self._flow():
            tokens, generation = self._current()
            if used_generation != generation and tokens is not None:
                return True  # another thread already replaced the token this request used
            with self._renewal(tokens) as adopted:
                if adopted:
                    return True  # another OAuth object or process renewed them meanwhile
                # A fresh look first (401s are rare: tokens are renewed ahead of expiry): the server
                # may have moved to another authorization server, whose registration (keyed by
                # issuer) is then a new one, and which must never see the old server's refresh token.
                self.discover_auth_metadata(www_authenticate=www_authenticate, use_cache=False)
                if tokens is not None and tokens.refresh_token:
                    try:
                        self._refresh_locked(tokens)
                        return True
                    except AuthError as exc:
                        log.info("refresh for %s failed (%s); authorizing again", self.server_url, exc)
                self._authorize_locked(None, None)
                return True

    def _step_up(self, used_generation: int, scope: str | None, www_authenticate: str | None) -> bool:
        with self._flow():
            tokens, generation = self._current()
            if used_generation != generation and tokens is not None:
                return True
            wanted = set((scope or "").split())
            if not wanted:
                # A challenge without a scope: ask for everything the server offers.
                md = self._metadata_or_discover()
                wanted = set(md.authorization_server.scopes_supported or ()) or set(md.default_scopes())
            have = set(tokens.scopes if tokens else ()) | set(self._scopes or ())
            union = frozenset(have | wanted)
            if tokens is not None and wanted and wanted <= tokens.scopes:
                raise PermissionDenied(
                    f"{self.server_url} still answers insufficient_scope although the token has {sorted(wanted)}"
                )
            with self._lock:
                attempts = self._step_ups.get(union, 0)
                if attempts >= self._max_step_up:
                    raise PermissionDenied(
                        f"{self.server_url} needs scopes {sorted(union)}; "
                        f"{attempts} step-up authorizations did not obtain them"
                    )
                self._step_ups[union] = attempts + 1
            self.stats["step_ups"] += 1
            self._authorize_locked(sorted(union), www_authenticate, step_up=True)
            return True

    # ------------------------------------------------------------------ renewing

    def _renew(self, generation: int, *, background: bool, allow_interactive: bool = False) -> None:
        with self._flow():
            tokens, current = self._current()
            if current != generation and tokens is not None and not tokens.expired(leeway=1.0):
                return  # someone else renewed meanwhile
            with self._renewal(tokens) as adopted:
                if adopted:
                    return  # another OAuth object or process renewed them meanwhile
                if tokens is not None and tokens.refresh_token:
                    try:
                        self._refresh_locked(tokens)
                        if background:
                            self.stats["background_refreshes"] += 1
                        return
                    except AuthError:
                        if background and self.grant in ("authorization_code", "device_code"):
                            raise  # a user flow never starts from the background thread
                if self.grant in ("client_credentials", "jwt_bearer", "enterprise"):
                    self._authorize_locked(None, None)
                    return
                if allow_interactive:
                    self._authorize_locked(None, None)
                    return
                raise AuthError(f"the token for {self.server_url} expired and cannot be renewed silently")

    @contextlib.contextmanager
    def _renewal(self, held: TokenSet | None) -> Iterator[bool]:
        """One renewal of this server's tokens at a time across OAuth objects and processes
        sharing a store (single flight beyond ``_flow``, which covers this object's threads):
        the renewer holds the server's ``renew`` lock (:func:`~mcpsync.auth.storage.key_lock`)
        until the new tokens are stored. Yields True when, once the lock is held, the store
        already has tokens newer than ``held`` (another renewer's): they are adopted instead."""
        limit = self._interactive_timeout + 6 * self._timeout
        processes = getattr(self._store, "across_processes", True)
        with key_lock("renew:" + self.resource_key, timeout=limit, processes=processes):
            yield self._adopt_stored(held)

    def _adopt_stored(self, held: TokenSet | None) -> bool:
        stored = self._store.load_tokens(self.resource_key)
        if stored is None or stored.expired(leeway=1.0):
            return False
        if held is not None and (stored.access_token == held.access_token or stored.obtained_at <= held.obtained_at):
            return False
        due = self._due(stored)
        if due is not None and due <= time.time():
            return False
        with self._cond:
            self._tokens = stored
            self._loaded = True
            self._generation += 1
            self._cond.notify_all()
        self._ensure_refresher()
        return True

    def _refresh_locked(self, tokens: TokenSet) -> TokenSet:
        md = self._metadata_or_discover()
        if tokens.issuer is not None and tokens.issuer != md.issuer:
            # Never hand one authorization server's refresh token to another.
            self._drop_tokens()
            raise AuthError(f"the tokens for {self.server_url} came from {tokens.issuer}, not {md.issuer}")
        if not md.authorization_server.supports_grant(GRANT_REFRESH) and md.authorization_server.grant_types_supported:
            raise AuthError(f"{md.issuer} does not advertise the refresh_token grant")
        new = self.refresh_access_token(tokens.refresh_token)
        self.stats["refreshes"] += 1
        return new

    def _ensure_refresher(self) -> None:
        with self._lock:
            if self._refresher is not None or self._closed:
                return
            # The thread holds only a weak reference: an OAuth object nobody closed can still be
            # collected, and the finalizer wakes the thread so that it ends.
            self._refresher = threading.Thread(
                target=_refresh_loop, args=(weakref.ref(self),), name="mcpsync-oauth-refresh", daemon=True
            )
            weakref.finalize(self, _wake, self._cond)
            thread = self._refresher
        thread.start()

    def _due(self, tokens: TokenSet) -> float | None:
        if tokens.expires_at is None or not self._can_renew_silently(tokens):
            return None
        lifetime = max(tokens.expires_at - tokens.obtained_at, 0.0)
        margin = min(self._refresh_margin, max(lifetime * 0.25, 0.2))
        return tokens.expires_at - margin

    # ------------------------------------------------------------------ grants

    def _authorize_locked(
        self, scopes: Iterable[str] | None, www_authenticate: str | None, step_up: bool = False
    ) -> TokenSet:
        if www_authenticate:
            md = self.discover_auth_metadata(www_authenticate=www_authenticate)
        else:
            md = self._metadata_or_discover()
        prm = md.protected_resource
        if self._dpop is None and self._dpop_auto and prm is not None and prm.dpop_bound_access_tokens_required:
            self._enable_dpop()  # the resource demands sender-constrained tokens
        if self.grant == "authorization_code":
            if not self._interactive:
                raise AuthError(f"{self.server_url} needs a user authorization, and interactive flows are off")
            tokens = self._code_flow(md, scopes)
        elif self.grant == "device_code":
            if not self._interactive:
                raise AuthError(f"{self.server_url} needs a user authorization, and interactive flows are off")
            tokens = self._device_flow(md, scopes)
        elif self.grant == "client_credentials":
            tokens = self._client_credentials(md, scopes)
        elif self.grant == "jwt_bearer":
            assert self._assertion is not None
            tokens = self._jwt_bearer(md, scopes, self._assertion())
        else:
            tokens = self._jwt_bearer(md, scopes, self._id_jag(md, scopes))
        self.stats["authorizations"] += 1
        return tokens

    def _enable_dpop(self) -> None:
        """Turn DPoP on (``dpop=None`` only: never when configured off), keeping a nonce the
        resource sent before the key existed."""
        with self._lock:
            if self._dpop is not None:
                return
            key = self._dpop = DPoPKey()
            early, self._early_nonce = self._early_nonce, None
        if early is not None:
            key.remember_nonce(*early)

    def _code_flow(self, md: AuthMetadata, scopes: Iterable[str] | None) -> TokenSet:
        port = self._redirect_port
        stored = self._store.load_client(md.issuer)
        if not port and stored is not None:
            for uri in stored.redirect_uris:
                p = urlsplit(uri).port
                if _is_loopback(uri) and p and LoopbackRedirect.port_free(p):
                    port = p  # reuse the exact port the stored registration names
                    break
        with LoopbackRedirect(port) as listener:
            with self._lock:
                self._listener = listener  # close() cancels a pending wait
            req = self.initiate_authorization(md, scopes, redirect_uri=listener.redirect_uri)
            opener = self._open_browser
            if opener is None:
                import webbrowser

                opener = webbrowser.open
            returned = opener(req.url)
            if isinstance(returned, str) and returned.startswith(req.redirect_uri):
                listener.deliver(returned)
            try:
                params = listener.wait(self._interactive_timeout)
            finally:
                with self._lock:
                    self._listener = None
        return self._complete(req, params, check_state=True)

    def _complete(self, req: AuthorizationRequest, params: Mapping[str, str], *, check_state: bool) -> TokenSet:
        md = req.metadata or self._metadata_or_discover()
        asm = md.authorization_server
        if "error" in params:
            desc = params.get("error_description")
            detail = f" ({desc})" if desc else ""
            raise AuthError(f"authorization refused by {asm.issuer}: {params['error']}{detail}")
        if check_state and not hmac.compare_digest(params.get("state", ""), req.state):
            raise AuthError("the authorization response's state does not match the request: possible CSRF; ignored")
        iss = params.get("iss")
        if iss is not None and iss != asm.issuer:
            raise AuthError(f"the authorization response came from issuer {iss!r}, expected {asm.issuer!r} (RFC 9207)")
        if iss is None and asm.authorization_response_iss_parameter_supported:
            raise AuthError(f"the authorization response lacks the iss parameter {asm.issuer} promised (RFC 9207)")
        code = params.get("code")
        if not code:
            raise AuthError("the authorization response carries no code")
        client = req.client or self._client_for(md, req.redirect_uri)
        form = {
            "grant_type": GRANT_CODE,
            "code": code,
            "redirect_uri": req.redirect_uri,
            "code_verifier": req.verifier,
            "resource": md.resource,
        }
        tokens = self._token_request(md, client, form, requested_scopes=req.scopes)
        self._install(tokens)
        with self._lock:
            self._pending = None
        return tokens

    def _device_flow(self, md: AuthMetadata, scopes: Iterable[str] | None) -> TokenSet:
        asm = md.authorization_server
        if not asm.device_authorization_endpoint:
            raise AuthError(f"{asm.issuer} has no device_authorization_endpoint (RFC 8628)")
        client = self._client_for(md, None)
        chosen = self._choose_scopes(md, scopes)
        form = {"client_id": client.client_id, "resource": md.resource}
        if chosen:
            form["scope"] = " ".join(chosen)
        data = self._post_form(asm.device_authorization_endpoint, form, client, md, what="device authorization")
        try:
            device_code = data["device_code"]
            info = DeviceAuthorization(
                user_code=data["user_code"],
                verification_uri=str(data.get("verification_uri") or data["verification_url"]),
                verification_uri_complete=data.get("verification_uri_complete"),
                expires_in=float(data.get("expires_in", 600)),
                interval=float(data.get("interval", 5)),
            )
        except (KeyError, TypeError, ValueError):
            raise AuthError(f"{asm.issuer} sent a malformed device authorization response") from None
        if self._on_device_code is not None:
            self._on_device_code(info)
        else:
            print(
                f"To authorize mcpsync, visit {info.verification_uri_complete or info.verification_uri} "
                f"and enter the code {info.user_code}",
                file=sys.stderr,
            )
        deadline = time.monotonic() + min(info.expires_in, self._interactive_timeout)
        interval = max(info.interval, 0.0)
        poll = {"grant_type": GRANT_DEVICE, "device_code": device_code, "resource": md.resource}
        while True:
            if self._device_stop.wait(interval):
                raise AuthError("device authorization cancelled")
            if time.monotonic() > deadline:
                raise AuthError(f"the device code for {self.server_url} expired before it was approved")
            try:
                tokens = self._token_request(md, client, poll, requested_scopes=tuple(chosen))
            except _TokenEndpointError as exc:
                if exc.error == "authorization_pending":
                    continue
                if exc.error == "slow_down":
                    interval += 5.0
                    continue
                raise AuthError(str(exc)) from None
            self._install(tokens)
            return tokens

    def _client_credentials(self, md: AuthMetadata, scopes: Iterable[str] | None) -> TokenSet:
        client = self._client_for(md, None)
        if client.token_endpoint_auth_method == "none":
            raise AuthError("the client_credentials grant needs a confidential client (secret or private key)")
        form = {"grant_type": GRANT_CLIENT_CREDENTIALS, "resource": md.resource}
        chosen = self._choose_scopes(md, scopes, offline=False)
        if chosen:
            form["scope"] = " ".join(chosen)
        tokens = self._token_request(md, client, form, requested_scopes=tuple(chosen))
        self._install(tokens)
        return tokens

    def _jwt_bearer(self, md: AuthMetadata, scopes: Iterable[str] | None, assertion: str) -> TokenSet:
        client = self._client_for(md, None)
        form = {"grant_type": GRANT_JWT_BEARER, "assertion": assertion, "resource": md.resource}
        chosen = self._choose_scopes(md, scopes, offline=False)
        if chosen:
            form["scope"] = " ".join(chosen)
        tokens = self._token_request(md, client, form, requested_scopes=tuple(chosen))
        self._install(tokens)
        return tokens

    def _id_jag(self, md: AuthMetadata, scopes: Iterable[str] | None) -> str:
        """RFC 8693 at the enterprise IdP: the user's IdP token → an ID-JAG for this server."""
        ent = self._enterprise
        assert ent is not None
        form = {
            "grant_type": GRANT_TOKEN_EXCHANGE,
            "requested_token_type": TOKEN_TYPE_ID_JAG,
            "audience": md.issuer,
            "resource": md.resource,
            "subject_token": ent.subject_token(),
            "subject_token_type": ent.subject_token_type,
        }
        chosen = self._choose_scopes(md, scopes, offline=False)
        if chosen:
            form["scope"] = " ".join(chosen)
        idp_client = ClientInfo(
            client_id=ent.idp_client_id or "",
            client_secret=ent.idp_client_secret,
            token_endpoint_auth_method="client_secret_basic" if ent.idp_client_secret else "none",
        )
        if ent.idp_client_id:
            form["client_id"] = ent.idp_client_id
        data = self._post_form(ent.idp_token_endpoint, form, idp_client, None, what="identity-provider token exchange")
        jag = data.get("access_token")
        if not isinstance(jag, str) or data.get("issued_token_type") not in (None, TOKEN_TYPE_ID_JAG):
            raise AuthError("the identity provider did not issue an ID-JAG")
        return jag

    # ------------------------------------------------------------------ clients

    def _choose_scopes(self, md: AuthMetadata, scopes: Iterable[str] | None, offline: bool = True) -> list[str]:
        if scopes is not None:
            chosen = list(scopes)
        elif self._scopes is not None:
            chosen = list(self._scopes)
        else:
            chosen = md.default_scopes()
        asm = md.authorization_server
        if (
            offline
            and "offline_access" not in chosen
            and asm.scopes_supported is not None
            and "offline_access" in asm.scopes_supported
            and asm.supports_grant(GRANT_REFRESH)
        ):
            chosen.append("offline_access")
        seen: list[str] = []
        for s in chosen:
            if s not in seen:
                seen.append(s)
        return seen

    def _pick_method(self, asm: AuthServerMetadata, has_secret: bool) -> str:
        """The token-endpoint auth method for a pre-registered client, as the server advertises."""
        if self._auth_method:
            return self._auth_method
        advertised = asm.token_endpoint_auth_methods_supported
        if self._private_key is not None and (advertised is None or "private_key_jwt" in advertised):
            return "private_key_jwt"
        if not has_secret:
            return "none"
        # client_secret_basic first: every server must support it (RFC 6749 §2.3.1), and it is
        # RFC 8414's default when nothing is advertised.
        if advertised is None or "client_secret_basic" in advertised:
            return "client_secret_basic"
        if "client_secret_post" in advertised:
            return "client_secret_post"
        raise AuthError(
            f"{asm.issuer} advertises no token-endpoint auth method this client supports: {list(advertised)}"
        )

    def _stored_or_preregistered_client(self, md: AuthMetadata) -> ClientInfo | None:
        asm = md.authorization_server
        if self._client_id:
            method = self._pick_method(asm, bool(self._client_secret))
            return ClientInfo(self._client_id, self._client_secret, method, (), asm.issuer, None, "preregistered")
        stored = self._store.load_client(asm.issuer)
        if stored is not None and not stored.secret_expired():
            return stored
        if self._client_metadata_url and asm.client_id_metadata_document_supported:
            return ClientInfo(self._client_metadata_url, None, "none", (), asm.issuer, None, "metadata_document")
        return None

    def _client_for(self, md: AuthMetadata, redirect_uri: str | None) -> ClientInfo:
        """Registration in the spec's order: pre-registered, stored, metadata document, dynamic."""
        asm = md.authorization_server
        client = self._stored_or_preregistered_client(md)
        if client is not None:
            if (
                client.source == "dynamic"
                and redirect_uri is not None
                and client.redirect_uris
                and redirect_uri not in client.redirect_uris
            ):
                log.info("stored registration at %s lacks this redirect URI; registering again", asm.issuer)
            else:
                return client
        if not asm.registration_endpoint:
            raise AuthError(
                f"no client registration for {asm.issuer}: it offers neither Client ID Metadata Documents "
                "(or none is configured) nor dynamic registration; pass client_id="
            )
        return self._register(md, redirect_uri)

    def _register(self, md: AuthMetadata, redirect_uri: str | None) -> ClientInfo:
        import requests

        asm = md.authorization_server
        assert asm.registration_endpoint is not None
        method = self._auth_method
        if method is None:
            advertised = asm.token_endpoint_auth_methods_supported
            if advertised is None or "none" in advertised:
                method = "none"
            else:
                method = next((m for m in advertised if m in ("client_secret_post", "client_secret_basic")), "none")
        grants = [GRANT_CODE] if self.grant == "authorization_code" else []
        if self.grant == "device_code":
            grants.append(GRANT_DEVICE)
        if asm.supports_grant(GRANT_REFRESH) or asm.grant_types_supported is None:
            grants.append(GRANT_REFRESH)
        body: dict[str, Any] = {
            "client_name": self._client_name,
            "redirect_uris": [redirect_uri] if redirect_uri else [],
            "grant_types": grants,
            "response_types": ["code"] if GRANT_CODE in grants else [],
            "token_endpoint_auth_method": method,
            "application_type": "native",
        }
        if not body["redirect_uris"]:
            del body["redirect_uris"]
        # Register for every scope the server offers (a later step-up may need any of them;
        # some servers refuse an authorization request for scopes beyond the registration).
        scopes = self._choose_scopes(md, None)
        for s in asm.scopes_supported or ():
            if s not in scopes:
                scopes.append(s)
        if scopes:
            body["scope"] = " ".join(scopes)
        try:
            resp = self._http.post(asm.registration_endpoint, json=body, timeout=self._timeout, allow_redirects=False)
        except requests.RequestException as exc:
            raise ConnectError(
                f"dynamic client registration at {asm.registration_endpoint} failed: {type(exc).__name__}"
            ) from exc
        with resp:
            try:
                data = resp.json()
            except ValueError:
                data = {}
        if resp.status_code not in (200, 201) or not isinstance(data, dict) or "client_id" not in data:
            err = data.get("error") if isinstance(data, dict) else None
            desc = data.get("error_description") if isinstance(data, dict) else None
            raise AuthError(
                f"dynamic client registration at {asm.issuer} refused (HTTP {resp.status_code})"
                + (f": {err}" if err else "")
                + (f" ({desc})" if desc else "")
            )
        client = ClientInfo(
            client_id=str(data["client_id"]),
            client_secret=data.get("client_secret") or None,
            token_endpoint_auth_method=data.get("token_endpoint_auth_method") or method,
            redirect_uris=tuple(str(u) for u in (data.get("redirect_uris") or body.get("redirect_uris", []))),
            issuer=asm.issuer,
            client_secret_expires_at=data.get("client_secret_expires_at") or None,
            source="dynamic",
        )
        self._store.save_client(asm.issuer, client)
        return client

    # ------------------------------------------------------------------ HTTP to the authorization server

    def _client_auth(self, client: ClientInfo, audience: str, form: dict[str, str]) -> dict[str, str]:
        headers: dict[str, str] = {}
        method = client.token_endpoint_auth_method
        if client.client_id:
            form["client_id"] = client.client_id
        if method == "client_secret_basic":
            if not client.client_secret:
                raise AuthError("client_secret_basic without a client secret")
            raw = f"{quote(client.client_id, safe='')}:{quote(client.client_secret, safe='')}"
            headers["Authorization"] = "Basic " + base64.b64encode(raw.encode()).decode()
        elif method == "client_secret_post":
            if not client.client_secret:
                raise AuthError("client_secret_post without a client secret")
            form["client_secret"] = client.client_secret
        elif method == "private_key_jwt":
            if self._private_key is None:
                raise AuthError("private_key_jwt without private_key=")
            form["client_assertion_type"] = ASSERTION_TYPE_JWT
            form["client_assertion"] = client_assertion(self._private_key, client.client_id, audience)
        elif method != "none":
            raise AuthError(f"unsupported token-endpoint auth method {method!r}")
        return headers

    def _post_form(
        self, url: str, form: dict[str, str], client: ClientInfo, md: AuthMetadata | None, *, what: str
    ) -> dict[str, Any]:
        import requests

        form = {k: v for k, v in form.items() if v is not None and v != ""}
        # A private_key_jwt assertion is addressed to the authorization server's issuer
        # identifier (RFC 7523 §3, RFC 8414 §2 and the MCP spec), not to the endpoint's URL.
        audience = md.issuer if md is not None else url
        for attempt in range(2):
            headers = {"Accept": "application/json", **self._client_auth(client, audience, form)}
            if self._dpop is not None and md is not None:
                headers["DPoP"] = self._dpop.proof("POST", url)
            try:
                resp = self._http.post(url, data=form, headers=headers, timeout=self._timeout, allow_redirects=False)
            except requests.RequestException as exc:
                raise ConnectError(f"{what} at {url} failed: {type(exc).__name__}") from exc
            with resp:
                try:
                    data = resp.json()
                except ValueError:
                    data = None
                nonce = resp.headers.get("DPoP-Nonce")
            if resp.status_code == 200 and isinstance(data, dict):
                if self._dpop is not None and nonce:
                    self._dpop.remember_nonce(url, nonce, resource=False)
                return data
            error = data.get("error") if isinstance(data, dict) else None
            if error == "use_dpop_nonce" and self._dpop is not None and nonce and attempt == 0:
                self._dpop.remember_nonce(url, nonce, resource=False)
                continue
            desc = data.get("error_description") if isinstance(data, dict) else None
            raise _TokenEndpointError(what, url, resp.status_code, error, desc)
        raise AssertionError("unreachable")  # pragma: no cover

    def _token_request(
        self,
        md: AuthMetadata,
        client: ClientInfo,
        form: dict[str, str],
        *,
        previous: TokenSet | None = None,
        requested_scopes: tuple[str, ...] = (),
    ) -> TokenSet:
        asm = md.authorization_server
        what = f"token request ({form['grant_type'].rsplit(':', 1)[-1]})"
        data = self._post_form(asm.token_endpoint, dict(form), client, md, what=what)
        access = data.get("access_token")
        if not isinstance(access, str) or not access:
            raise AuthError(f"{asm.issuer} answered the {what} without an access_token")
        token_type = str(data.get("token_type") or "Bearer")
        if token_type.lower() == "bearer":
            token_type = "Bearer"
        elif token_type.lower() == "dpop":
            if self._dpop is None:
                raise AuthError(f"{asm.issuer} issued a DPoP-bound token to a client without a DPoP key")
            token_type = "DPoP"
        else:
            raise AuthError(f"{asm.issuer} issued an unsupported token type {token_type!r}")
        now = time.time()
        expires_at = None
        if data.get("expires_in") is not None:
            try:
                expires_at = now + float(data["expires_in"])
            except (TypeError, ValueError):
                expires_at = None
        scope = data.get("scope")
        if not isinstance(scope, str):
            scope = " ".join(requested_scopes) if requested_scopes else (previous.scope if previous else None)
        refresh = data.get("refresh_token")
        if not isinstance(refresh, str) or not refresh:
            refresh = previous.refresh_token if previous is not None else None
        return TokenSet(
            access_token=access,
            token_type=token_type,
            expires_at=expires_at,
            refresh_token=refresh,
            scope=scope,
            issuer=asm.issuer,
            resource=md.resource,
            obtained_at=now,
        )

    def _revoke_one(self, asm: AuthServerMetadata, client: ClientInfo, form: dict[str, str]) -> bool:
        import requests

        assert asm.revocation_endpoint is not None
        headers = {"Accept": "application/json", **self._client_auth(client, asm.issuer, form)}
        if client.token_endpoint_auth_method == "none":
            # RFC 6749 §2.3.1 lets an empty secret be sent; some servers (the mcp SDK) demand the field.
            form.setdefault("client_secret", "")
        try:
            resp = self._http.post(
                asm.revocation_endpoint, data=form, headers=headers, timeout=self._timeout, allow_redirects=False
            )
        except requests.RequestException as exc:
            log.info("revocation at %s failed: %s", asm.revocation_endpoint, type(exc).__name__)
            return False
        with resp:
            return bool(resp.status_code == 200)


def _wake(cond: threading.Condition) -> None:
    # Never block in a finalizer: it may run on the refresher thread while it holds the lock
    # (that thread then finds the object gone at its next wake-up, within a minute).
    if cond.acquire(blocking=False):
        try:
            cond.notify_all()
        finally:
            cond.release()


def _refresh_loop(ref: "weakref.ref[OAuth]") -> None:
    """The background refresher: renews the held tokens shortly before they expire."""
    while True:
        auth = ref()
        if auth is None:
            return
        cond = auth._cond
        with cond:
            if auth._closed:
                return
            tokens, generation = auth._tokens, auth._generation
            due = auth._due(tokens) if tokens is not None else None
            failed = generation == auth._bg_failed_generation
            wait = 60.0 if due is None or failed else due - time.time()
            if wait > 0:
                del auth  # never sleep holding a strong reference
                cond.wait(min(wait, 60.0))
                continue
        try:
            auth._renew(generation, background=True)
        except Exception as exc:  # a background failure only means the next 401 re-authorizes
            log.info("background token refresh for %s failed: %s", auth.server_url, type(exc).__name__)
            with auth._lock:
                if auth._generation == generation:
                    auth._bg_failed_generation = generation
        del auth


class _TokenEndpointError(AuthError):
    """The authorization server answered an OAuth error (its ``error`` code is kept)."""

    error: str | None
    status: int

    def __init__(self, what: str, url: str, status: int, error: str | None, description: str | None) -> None:
        text = f"{what} at {url} refused (HTTP {status})"
        if error:
            text += f": {error}"
        if description:
            text += f" ({description})"
        super().__init__(text, error=error, status=status)


# ---------------------------------------------------------------------- seed free functions


def initiate_authorization(
    metadata: AuthMetadata,
    scopes: Iterable[str] | None = None,
    *,
    redirect_uri: str,
    client_id: str | None = None,
    client_secret: str | None = None,
    store: TokenStore | None = None,
) -> AuthorizationRequest:
    """Seed interface: an authorization URL and PKCE verifier for ``metadata``.

    Uses (or registers) a client at the issuer; ``store`` keeps the registration (default: memory).
    Pass the result to :func:`exchange_code` together with the code that came back.
    """
    auth = OAuth(
        metadata.server_url,
        store=store or MemoryTokenStore(),
        client_id=client_id,
        client_secret=client_secret,
        server_id=f"adhoc:{id(metadata)}:{secrets.token_hex(4)}",
    )
    with auth._lock:
        auth._metadata = metadata
    req = auth.initiate_authorization(metadata, scopes, redirect_uri=redirect_uri)
    with _registry_lock:
        while len(_adhoc) >= _ADHOC_MAX:
            _adhoc.pop(next(iter(_adhoc))).close()
        _adhoc[req.state] = auth
    return req


_adhoc: dict[str, OAuth] = {}  # state → the object that made the request (bounded below)
_ADHOC_MAX = 64


def exchange_code(code: str, verifier: str, *, request: AuthorizationRequest, state: str | None = None) -> TokenSet:
    """Seed interface: exchange ``code`` (from ``request``'s redirect) with its PKCE ``verifier``."""
    with _registry_lock:
        auth = _adhoc.pop(request.state, None)
    if auth is None:
        raise AuthError("unknown authorization request")
    try:
        with auth._lock:
            auth._pending = request
        return auth.exchange_code(code, verifier, state=state)
    finally:
        auth.close()


def refresh_access_token(
    refresh_token: str,
    *,
    metadata: AuthMetadata,
    client: ClientInfo,
    store: TokenStore | None = None,
) -> TokenSet:
    """Seed interface: a refresh-token grant against ``metadata``'s token endpoint."""
    st = store or MemoryTokenStore()
    st.save_client(metadata.issuer, client)
    with OAuth(metadata.server_url, store=st, server_id=f"adhoc-refresh:{secrets.token_hex(6)}") as auth:
        with auth._lock:
            auth._metadata = metadata
        return auth.refresh_access_token(refresh_token)


__all__ += ["clear_metadata_cache", "SigningKey", "DPoPKey", "LoopbackRedirect"]
