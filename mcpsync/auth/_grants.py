"""The grants: one small strategy object per way of obtaining tokens, given to
:class:`~mcpsync.auth.OAuth` as ``grant=``.

Every grant carries the client's identity (``client_id``, ``client_secret``, ``private_key``,
each of which may be an :class:`Env` read when the :class:`OAuth` is made) and knows how to
obtain a first token set from the authorization server:

- :class:`AuthorizationCode`: a user in a browser; PKCE S256, ``state`` and RFC 9207 ``iss``
  checked, the redirect received on a loopback listener (the default grant).
- :class:`DeviceCode`: a user somewhere else (RFC 8628).
- :class:`ClientCredentials`: machine to machine, with a secret or ``private_key_jwt`` (RFC 7523).
- :class:`JWTBearer`: an assertion from the workload's identity (RFC 7523 §2.1).
- :class:`IdJag`: enterprise-managed authorization: the user's identity-provider token is
  exchanged (RFC 8693) for an ID-JAG, presented with the JWT-bearer grant.

Refreshing, storing, single flight and step-up are the :class:`OAuth` object's, the same for all.
"""

from __future__ import annotations

import hmac
import os
import secrets
import sys
import time
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Callable, ClassVar, Iterable, Iterator, Mapping, Protocol
from urllib.parse import quote, urlencode, urlsplit

from .._errors import AuthError, TokenEndpointError
from ._jose import SigningKey, pkce_pair
from ._loopback import LoopbackRedirect
from ._metadata import (
    GRANT_CLIENT_CREDENTIALS,
    GRANT_CODE,
    GRANT_DEVICE,
    GRANT_JWT_BEARER,
    GRANT_TOKEN_EXCHANGE,
    TOKEN_TYPE_ID_JAG,
    TOKEN_TYPE_ID_TOKEN,
    AuthMetadata,
)
from .storage import ClientInfo, TokenSet

if TYPE_CHECKING:
    import threading
    from contextlib import AbstractContextManager

    from ._endpoint import TokenEndpoint
    from ._registration import Registrar
    from .storage import TokenStore


class GrantContext(Protocol):
    """What a grant uses of the :class:`~mcpsync.auth.OAuth` running it (a protocol, so that
    this module does not import the one that imports it)."""

    server_url: str
    _registrar: "Registrar"
    _endpoint: "TokenEndpoint"
    _store: "TokenStore"
    _interactive_timeout: float
    _device_stop: "threading.Event"

    def _listening(self, listener: LoopbackRedirect) -> "AbstractContextManager[None]": ...

    def initiate_authorization(
        self,
        metadata: AuthMetadata | None = None,
        scopes: Iterable[str] | None = None,
        *,
        redirect_uri: str | None = None,
    ) -> AuthorizationRequest: ...

    def _exchange(self, req: AuthorizationRequest, params: Mapping[str, str], *, check_state: bool) -> TokenSet: ...

__all__ = [
    "Env",
    "Grant",
    "AuthorizationCode",
    "DeviceCode",
    "ClientCredentials",
    "JWTBearer",
    "IdJag",
    "AuthorizationRequest",
    "DeviceAuthorization",
]


@dataclass(frozen=True, slots=True)
class Env:
    """A value read from the environment variable ``name`` (when the :class:`OAuth` is made),
    so that no secret is written in code.

    Example:
        >>> ClientCredentials(client_id=Env("MCP_CLIENT_ID"), client_secret=Env("MCP_CLIENT_SECRET"))
        ClientCredentials(client_id=Env(name='MCP_CLIENT_ID'), auth_method=None)
    """

    name: str

    def get(self) -> str | None:
        """The variable's value; None when unset or empty."""
        return os.environ.get(self.name) or None


def resolve(value: str | Env | None) -> str | None:
    """A configured value: itself, or an :class:`Env`'s current value."""
    return value.get() if isinstance(value, Env) else value


@dataclass(frozen=True, slots=True)
class AuthorizationRequest:
    """An authorization request in flight: the URL to open and what checks its answer.

    Iterates as ``(url, verifier)``.
    """

    url: str = field(repr=False)  # carries the state: not for logs
    verifier: str = field(repr=False)
    state: str = field(repr=False)
    redirect_uri: str = ""
    scopes: tuple[str, ...] = ()
    resource: str = ""
    client: ClientInfo | None = field(default=None, repr=False)
    metadata: AuthMetadata | None = field(default=None, repr=False)

    def __iter__(self) -> Iterator[str]:
        return iter((self.url, self.verifier))


@dataclass(frozen=True, slots=True)
class DeviceAuthorization:
    """What a user must do to approve a device-grant request (RFC 8628 §3.2)."""

    user_code: str
    verification_uri: str
    verification_uri_complete: str | None
    expires_in: float
    interval: float


@dataclass(frozen=True, slots=True, kw_only=True)
class Grant:
    """What every grant carries: the client's identity at the authorization server.

    Attributes:
        client_id: a pre-registered client's id (a string or an :class:`Env`); None: a stored
            registration, a Client ID Metadata Document or dynamic registration.
        client_secret: that client's secret, if it has one (a string or an :class:`Env`).
        private_key: a :class:`~mcpsync.auth.SigningKey` (or PEM) for ``private_key_jwt``.
        auth_method: force a token-endpoint auth method (``none``, ``client_secret_basic``,
            ``client_secret_post``, ``private_key_jwt``); default: what the server advertises.
        client_metadata_url: the HTTPS URL of this client's Client ID Metadata Document.
        client_name: the ``client_name`` sent on dynamic registration.
    """

    client_id: str | Env | None = None
    client_secret: str | Env | None = field(default=None, repr=False)
    private_key: SigningKey | bytes | str | None = field(default=None, repr=False)
    auth_method: str | None = None
    client_metadata_url: str | None = field(default=None, repr=False)
    client_name: str = field(default="mcpsync", repr=False)

    #: a user takes part (never started from the background refresher, nor when interactive=False)
    needs_user: ClassVar[bool] = False
    #: the grant types a dynamic registration asks for
    registers: ClassVar[tuple[str, ...]] = ()

    def signing_key(self) -> SigningKey | None:
        key = self.private_key
        return key if key is None or isinstance(key, SigningKey) else SigningKey(key)

    def obtain(self, auth: GrantContext, md: AuthMetadata, scopes: Iterable[str] | None) -> TokenSet:
        """Obtain tokens from the authorization server (they are stored by the caller)."""
        raise NotImplementedError


def _machine_grant(
    auth: GrantContext, md: AuthMetadata, scopes: Iterable[str] | None, form: dict[str, str]
) -> TokenSet:
    client = auth._registrar.client_for(md, None)
    chosen = md.choose_scopes(scopes, offline=False)
    if chosen:
        form["scope"] = " ".join(chosen)
    return auth._endpoint.token_request(md, client, form, requested_scopes=tuple(chosen))


@dataclass(frozen=True, slots=True, kw_only=True)
class AuthorizationCode(Grant):
    """Authorization code + PKCE S256 for a user with a browser (the default grant).

    Attributes:
        open_browser: called with the authorization URL (default :func:`webbrowser.open`); if it
            returns the redirect URL (a string starting with the redirect URI) that is used
            instead of waiting for the loopback listener.
        redirect_port: the loopback listener's port (0: any free port, registered exactly).
    """

    open_browser: Callable[[str], Any] | None = field(default=None, repr=False)
    redirect_port: int = 0

    needs_user: ClassVar[bool] = True
    registers: ClassVar[tuple[str, ...]] = (GRANT_CODE,)

    def obtain(self, auth: GrantContext, md: AuthMetadata, scopes: Iterable[str] | None) -> TokenSet:
        port = self.redirect_port
        stored = auth._store.load_client(md.issuer)
        if not port and stored is not None:
            for uri in stored.redirect_uris:
                p = urlsplit(uri).port
                if _is_loopback(uri) and p and LoopbackRedirect.port_free(p):
                    port = p  # reuse the exact port the stored registration names
                    break
        with LoopbackRedirect(port) as listener, auth._listening(listener):
            req = auth.initiate_authorization(md, scopes, redirect_uri=listener.redirect_uri)
            opener = self.open_browser
            if opener is None:
                import webbrowser

                opener = webbrowser.open
            returned = opener(req.url)
            if isinstance(returned, str) and returned.startswith(req.redirect_uri):
                listener.deliver(returned)
            params = listener.wait(auth._interactive_timeout)
        return auth._exchange(req, params, check_state=True)


def authorization_request(
    client: ClientInfo, md: AuthMetadata, chosen: list[str], redirect_uri: str
) -> AuthorizationRequest:
    """The authorization-code + PKCE request for ``client`` (the server must offer S256)."""
    asm = md.authorization_server
    assert asm.authorization_endpoint is not None  # check_code_support() came first
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
    return AuthorizationRequest(url, verifier, state, redirect_uri, tuple(chosen), md.resource, client, md)


def check_code_support(md: AuthMetadata) -> None:
    """Refuse a server that cannot do authorization code + PKCE S256."""
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


def code_exchange_form(
    req: AuthorizationRequest, md: AuthMetadata, params: Mapping[str, str], check_state: bool
) -> dict[str, str]:
    """Check an authorization response (error, ``state``, RFC 9207 ``iss``); the token form."""
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
    return {
        "grant_type": GRANT_CODE,
        "code": code,
        "redirect_uri": req.redirect_uri,
        "code_verifier": req.verifier,
        "resource": md.resource,
    }


@dataclass(frozen=True, slots=True, kw_only=True)
class DeviceCode(Grant):
    """The device authorization grant (RFC 8628): a user approves on another device.

    Attributes:
        on_device_code: called with a :class:`DeviceAuthorization` (default: print to stderr).
    """

    on_device_code: Callable[[DeviceAuthorization], Any] | None = field(default=None, repr=False)

    needs_user: ClassVar[bool] = True
    registers: ClassVar[tuple[str, ...]] = (GRANT_DEVICE,)

    def obtain(self, auth: GrantContext, md: AuthMetadata, scopes: Iterable[str] | None) -> TokenSet:
        asm = md.authorization_server
        if not asm.device_authorization_endpoint:
            raise AuthError(f"{asm.issuer} has no device_authorization_endpoint (RFC 8628)")
        endpoint = auth._endpoint
        client = auth._registrar.client_for(md, None)
        chosen = md.choose_scopes(scopes)
        form = {"client_id": client.client_id, "resource": md.resource}
        if chosen:
            form["scope"] = " ".join(chosen)
        data = endpoint.post_form(asm.device_authorization_endpoint, form, client, md, what="device authorization")
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
        if self.on_device_code is not None:
            self.on_device_code(info)
        else:
            print(
                f"To authorize mcpsync, visit {info.verification_uri_complete or info.verification_uri} "
                f"and enter the code {info.user_code}",
                file=sys.stderr,
            )
        deadline = time.monotonic() + min(info.expires_in, auth._interactive_timeout)
        interval = max(info.interval, 0.0)
        poll = {"grant_type": GRANT_DEVICE, "device_code": device_code, "resource": md.resource}
        while True:
            if auth._device_stop.wait(interval):
                raise AuthError("device authorization cancelled")
            if time.monotonic() > deadline:
                raise AuthError(f"the device code for {auth.server_url} expired before it was approved")
            try:
                return endpoint.token_request(md, client, poll, requested_scopes=tuple(chosen))
            except TokenEndpointError as exc:
                if exc.error == "authorization_pending":
                    continue
                if exc.error == "slow_down":
                    interval += 5.0
                    continue
                raise AuthError(str(exc)) from None


@dataclass(frozen=True, slots=True, kw_only=True)
class ClientCredentials(Grant):
    """The client credentials grant: machine to machine, the client authenticated with its
    secret or, given ``private_key``, an RFC 7523 ``private_key_jwt`` assertion."""

    def obtain(self, auth: GrantContext, md: AuthMetadata, scopes: Iterable[str] | None) -> TokenSet:
        client = auth._registrar.client_for(md, None)
        if client.token_endpoint_auth_method == "none":
            raise AuthError("the client_credentials grant needs a confidential client (secret or private key)")
        return _machine_grant(auth, md, scopes, {"grant_type": GRANT_CLIENT_CREDENTIALS, "resource": md.resource})


@dataclass(frozen=True, slots=True, kw_only=True)
class JWTBearer(Grant):
    """The RFC 7523 JWT-bearer grant: ``assertion()`` gives a JWT from the workload's identity
    (a fresh one on every authorization)."""

    assertion: Callable[[], str] = field(repr=False)

    def obtain(self, auth: GrantContext, md: AuthMetadata, scopes: Iterable[str] | None) -> TokenSet:
        form = {"grant_type": GRANT_JWT_BEARER, "assertion": self.assertion(), "resource": md.resource}
        return _machine_grant(auth, md, scopes, form)


@dataclass(frozen=True, slots=True, kw_only=True)
class IdJag(Grant):
    """Enterprise-managed authorization (the MCP ``enterprise-managed-authorization``
    extension): the user's identity-provider token is exchanged (RFC 8693) at the IdP for an
    ID-JAG, which is presented to the MCP authorization server with the JWT-bearer grant.

    Attributes:
        idp_token_endpoint: the identity provider's token endpoint.
        subject_token: a callable giving the user's current IdP token (an ID token by default).
        subject_token_type: the RFC 8693 type of that token.
        idp_client_id: the client id at the IdP; ``idp_client_secret`` its secret, if any.
    """

    idp_token_endpoint: str
    subject_token: Callable[[], str] = field(repr=False)
    subject_token_type: str = TOKEN_TYPE_ID_TOKEN
    idp_client_id: str | Env | None = None
    idp_client_secret: str | Env | None = field(default=None, repr=False)

    def obtain(self, auth: GrantContext, md: AuthMetadata, scopes: Iterable[str] | None) -> TokenSet:
        form = {"grant_type": GRANT_JWT_BEARER, "assertion": self.id_jag(auth, md, scopes), "resource": md.resource}
        return _machine_grant(auth, md, scopes, form)

    def id_jag(self, auth: GrantContext, md: AuthMetadata, scopes: Iterable[str] | None) -> str:
        """RFC 8693 at the enterprise IdP: the user's IdP token → an ID-JAG for this server."""
        form = {
            "grant_type": GRANT_TOKEN_EXCHANGE,
            "requested_token_type": TOKEN_TYPE_ID_JAG,
            "audience": md.issuer,
            "resource": md.resource,
            "subject_token": self.subject_token(),
            "subject_token_type": self.subject_token_type,
        }
        chosen = md.choose_scopes(scopes, offline=False)
        if chosen:
            form["scope"] = " ".join(chosen)
        client_id, secret = resolve(self.idp_client_id), resolve(self.idp_client_secret)
        idp_client = ClientInfo(
            client_id=client_id or "",
            client_secret=secret,
            token_endpoint_auth_method="client_secret_basic" if secret else "none",
        )
        if client_id:
            form["client_id"] = client_id
        data = auth._endpoint.post_form(
            self.idp_token_endpoint, form, idp_client, None, what="identity-provider token exchange"
        )
        jag = data.get("access_token")
        if not isinstance(jag, str) or data.get("issued_token_type") not in (None, TOKEN_TYPE_ID_JAG):
            raise AuthError("the identity provider did not issue an ID-JAG")
        return jag


def _is_loopback(uri: str) -> bool:
    parts = urlsplit(uri)
    return parts.scheme == "http" and parts.hostname in ("127.0.0.1", "localhost", "::1")
