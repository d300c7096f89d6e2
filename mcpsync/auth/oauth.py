"""OAuth 2.1 for remote MCP servers: the :class:`OAuth` object the HTTP transports call.

The flow, as the MCP authorization spec orders it, each step in its own module:

1. **Discovery** (:mod:`._metadata`): the 401's ``WWW-Authenticate``, protected-resource
   metadata (RFC 9728), authorization-server metadata (RFC 8414 / OIDC), cached.
2. **Registration** (:mod:`._registration`): a pre-registered client, a stored registration,
   a Client ID Metadata Document, or Dynamic Client Registration (RFC 7591).
3. **The grant** (:mod:`._grants`), one strategy object: :class:`AuthorizationCode` (PKCE S256,
   loopback redirect), :class:`DeviceCode` (RFC 8628), :class:`ClientCredentials` (secret or
   ``private_key_jwt``), :class:`JWTBearer` (RFC 7523) or :class:`IdJag` (RFC 8693 token
   exchange for an ID-JAG, then JWT-bearer); requests go through :mod:`._endpoint`.
4. **Use**: :meth:`OAuth.headers` gives ``Authorization: Bearer …`` (or ``DPoP …`` with a
   proof, :mod:`._dpop`) for every request; :meth:`OAuth.on_response` handles 401 (refresh, else
   a new authorization), 403 ``insufficient_scope`` (step-up with the union of scopes, bounded)
   and DPoP nonces.
5. **Refresh** on a background thread before expiry, so callers never wait for it; tokens live
   in a :class:`~mcpsync.auth.storage.TokenStore` (the OS keyring by default), renewed once
   across threads, objects and processes sharing it.

No token, secret, code or verifier appears in logs, exception messages or ``repr``.
"""

from __future__ import annotations

import contextlib
import logging
import threading
import time
import weakref
from dataclasses import replace
from typing import Any, Iterable, Iterator, Mapping

from .._errors import AuthError, PermissionDenied
from ._dpop import DPoPBinding, DPoPKey
from ._endpoint import TokenEndpoint, new_session
from ._grants import (
    AuthorizationCode,
    AuthorizationRequest,
    Grant,
    authorization_request,
    check_code_support,
    code_exchange_form,
    resolve,
)
from ._loopback import LoopbackRedirect
from ._metadata import GRANT_REFRESH, AuthMetadata, canonical_resource, discover_auth_metadata, parse_www_authenticate
from ._registration import Registrar
from .storage import TokenSet, TokenStore, default_store, key_lock

__all__ = ["OAuth"]

log = logging.getLogger("mcpsync.auth")


class _ThreadState(threading.local):
    generation: int = -1


class OAuth:
    """OAuth 2.1 authorization for one remote MCP server; the ``auth=`` object of the HTTP transports.

    Implements the transports' protocol: :meth:`headers` before every request, :meth:`on_response`
    on 401/403. Thread-safe: one instance serves every thread of a client; concurrent 401s share
    one refresh or authorization.

    Args:
        server_url: the MCP endpoint, e.g. ``https://mcp.example.com/mcp``.
        grant: how tokens are obtained, with the client's identity: an
            :class:`AuthorizationCode` (the default), :class:`DeviceCode`,
            :class:`ClientCredentials`, :class:`JWTBearer` or :class:`IdJag`.
        storage: where tokens and registrations live (default: the OS keyring).
        scopes: scopes to ask for (default: the challenge's, else the resource's
            ``scopes_supported``, else none).
        dpop: use DPoP-bound tokens (True, or a :class:`DPoPKey`); ``None`` (default): only when the
            resource asks for them; False: never.
        interactive: allow grants that need a user (False: only refresh and machine grants).
        timeout: per-HTTP-request timeout in seconds.
        interactive_timeout: how long to wait for the user (redirect or device approval).
        refresh_margin: refresh this many seconds before expiry (at most; at least a fifth of a
            short token's lifetime is kept as margin).
        max_step_up: step-up authorizations allowed per scope set.
        session: a ``requests.Session`` for the OAuth requests (then ``verify``, ``cert`` and
            ``proxy`` are its own business).
        verify: whom TLS trusts on the OAuth requests, as for ``Client.http``: True (the CA
            bundle the environment names, else certifi's), False, ``"system"`` (the
            operating system's store, through ``truststore``), a CA file or directory, or an
            ``ssl.SSLContext``.
        cert: a client certificate for the OAuth requests (mTLS): a PEM file with its key,
            or ``(certfile, keyfile)``.
        proxy: a forward proxy for the OAuth requests (None: ``HTTP(S)_PROXY`` / ``NO_PROXY``).

    Example:
        >>> from mcpsync.auth import MemoryTokenStore
        >>> auth = OAuth("https://mcp.example.com/mcp", storage=MemoryTokenStore())
        >>> auth.headers("https://mcp.example.com/mcp", "POST")   # no token yet: a 401 starts the flow
        {}
        >>> auth.close()
    """

    def __init__(
        self,
        server_url: str,
        grant: Grant | None = None,
        *,
        storage: TokenStore | None = None,
        scopes: Iterable[str] | None = None,
        dpop: bool | DPoPKey | None = None,
        interactive: bool = True,
        timeout: float = 10.0,
        interactive_timeout: float = 300.0,
        refresh_margin: float = 60.0,
        max_step_up: int = 2,
        session: Any = None,
        verify: Any = True,
        cert: Any = None,
        proxy: str | None = None,
    ) -> None:
        if grant is None:
            grant = AuthorizationCode()
        if not isinstance(grant, Grant):
            raise TypeError(
                f"grant= takes a grant object (AuthorizationCode(), DeviceCode(), ClientCredentials(), "
                f"JWTBearer(), IdJag()), not {type(grant).__name__}"
            )
        self.server_url = server_url
        self.resource_key = canonical_resource(server_url)
        self.grant = grant
        self._store: TokenStore = storage if storage is not None else default_store()
        self._scopes = tuple(scopes) if scopes is not None else None
        self._dpop = DPoPBinding(dpop)
        if session is not None and (verify is not True or cert is not None or proxy is not None):
            raise ValueError("OAuth(session=...) sends through that session: set verify, cert and proxy on it "
                             "(or pass verify=/cert=/proxy= without a session)")
        if session is None:
            session = new_session(verify, cert, proxy)
        self._endpoint = TokenEndpoint(session, timeout, self._dpop, grant.signing_key())
        self._registrar = Registrar(
            client_id=resolve(grant.client_id),
            client_secret=resolve(grant.client_secret),
            has_private_key=grant.private_key is not None,
            auth_method=grant.auth_method,
            client_metadata_url=grant.client_metadata_url,
            client_name=grant.client_name,
            grant_types=grant.registers,
            scopes=self._scopes,
            store=self._store,
            endpoint=self._endpoint,
        )
        self._listener: LoopbackRedirect | None = None
        self._interactive_timeout = interactive_timeout
        self._refresh_margin = refresh_margin
        self._max_step_up = max_step_up
        self._interactive = interactive

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
        return self._dpop.headers(tokens, url, method)

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
        schemes = {c.scheme for c in challenges}
        decided = self._dpop.on_resource_answer(url, lower, schemes, challenge.error if challenge else None)
        if decided is not None:
            return decided
        if status == 401:
            return self._on_unauthorized(used_generation, lower.get("www-authenticate"), challenge)
        if status == 403 and challenge is not None and challenge.error == "insufficient_scope":
            return self._step_up(used_generation, challenge.scope, lower.get("www-authenticate"))
        return False

    # ------------------------------------------------------------------ the steps, one by one

    def discover_auth_metadata(
        self, server_url: str | None = None, *, www_authenticate: str | None = None, use_cache: bool = True
    ) -> AuthMetadata:
        """Discovery for this server (cached); see :func:`mcpsync.auth.discover_auth_metadata`."""
        md = discover_auth_metadata(
            server_url or self.server_url,
            www_authenticate=www_authenticate,
            session=self._endpoint.http,
            timeout=self._endpoint.timeout,
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
        loopback URI of the grant's ``redirect_port`` is used (a fixed port must then be set).

        Raises:
            AuthError: the server does not advertise PKCE S256, or no client can be registered.
        """
        md = metadata or self._metadata_or_discover()
        check_code_support(md)
        if redirect_uri is None:
            port = self.grant.redirect_port if isinstance(self.grant, AuthorizationCode) else 0
            if not port:
                raise AuthError("initiate_authorization needs redirect_uri= or a fixed redirect_port")
            redirect_uri = f"http://127.0.0.1:{port}/callback"
        client = self._registrar.client_for(md, redirect_uri)
        chosen = md.choose_scopes(scopes if scopes is not None else self._scopes)
        req = authorization_request(client, md, chosen, redirect_uri)
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
        from urllib.parse import parse_qs, urlsplit

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
        client = self._registrar.known_client(md)
        if client is None:
            raise AuthError("no registered client to refresh with")
        form = {"grant_type": GRANT_REFRESH, "refresh_token": rt, "resource": md.resource}
        try:
            new = self._endpoint.token_request(md, client, form, previous=tokens)
        except AuthError:
            if tokens is not None and tokens.refresh_token == rt:
                self._drop_tokens()
            raise
        self._install(new)
        return new

    def get_valid_token(self) -> str:
        """A valid access token: the held one, else refreshed, else newly authorized.

        Raises:
            AuthError: none could be had.
        """
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
            client = self._registrar.known_client(md)
            if asm.revocation_endpoint is None or client is None:
                return False
            ok = True
            for token, hint in ((tokens.refresh_token, "refresh_token"), (tokens.access_token, "access_token")):
                if not token:
                    continue
                form = {"token": token, "token_type_hint": hint}
                ok = self._endpoint.revoke(asm, client, form) and ok
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
        self._endpoint.close()

    def __enter__(self) -> "OAuth":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # ------------------------------------------------------------------ state

    @contextlib.contextmanager
    def _flow(self) -> Iterator[None]:
        """The single-flight lock for refreshes and authorizations, with a bounded wait."""
        limit = self._interactive_timeout + 6 * self._endpoint.timeout
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
        return bool(tokens.refresh_token) or not self.grant.needs_user

    @contextlib.contextmanager
    def _listening(self, listener: LoopbackRedirect) -> Iterator[None]:
        """While a redirect is awaited: :meth:`close` cancels the wait."""
        with self._lock:
            self._listener = listener
        try:
            yield
        finally:
            with self._lock:
                self._listener = None

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
            self._authorize_locked(sorted(union), www_authenticate)
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
                        if background and self.grant.needs_user:
                            raise  # a user flow never starts from the background thread
                if not self.grant.needs_user:
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
        limit = self._interactive_timeout + 6 * self._endpoint.timeout
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

    def _authorize_locked(self, scopes: Iterable[str] | None, www_authenticate: str | None) -> TokenSet:
        if www_authenticate:
            md = self.discover_auth_metadata(www_authenticate=www_authenticate)
        else:
            md = self._metadata_or_discover()
        prm = md.protected_resource
        if prm is not None and prm.dpop_bound_access_tokens_required:
            self._dpop.enable()  # the resource demands sender-constrained tokens
        if self.grant.needs_user and not self._interactive:
            raise AuthError(f"{self.server_url} needs a user authorization, and interactive flows are off")
        tokens = self.grant.obtain(self, md, scopes if scopes is not None else self._scopes)
        self._install(tokens)
        self.stats["authorizations"] += 1
        return tokens

    def _exchange(self, req: AuthorizationRequest, params: Mapping[str, str], *, check_state: bool) -> TokenSet:
        """Check the authorization response to ``req`` and exchange its code (not stored yet)."""
        md = req.metadata or self._metadata_or_discover()
        form = code_exchange_form(req, md, params, check_state)
        client = req.client or self._registrar.client_for(md, req.redirect_uri)
        tokens = self._endpoint.token_request(md, client, form, requested_scopes=req.scopes)
        with self._lock:
            self._pending = None
        return tokens

    def _complete(self, req: AuthorizationRequest, params: Mapping[str, str], *, check_state: bool) -> TokenSet:
        tokens = self._exchange(req, params, check_state=check_state)
        self._install(tokens)
        return tokens


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
