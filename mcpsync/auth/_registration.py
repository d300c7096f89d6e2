"""Which client this is at an authorization server, in the MCP spec's order: a pre-registered
client (its id given, or read from the environment), a registration kept in the token store, a
Client ID Metadata Document (when the server supports it and a document URL is configured),
else Dynamic Client Registration (RFC 7591, ``application_type: native``). Registrations are
stored per issuer.
"""

from __future__ import annotations

import logging
from typing import Any

from .._errors import AuthError, ConnectError
from ._endpoint import TokenEndpoint
from ._metadata import GRANT_CODE, GRANT_REFRESH, AuthMetadata, AuthServerMetadata
from .storage import ClientInfo, TokenStore

__all__ = ["Registrar"]

log = logging.getLogger("mcpsync.auth")


class Registrar:
    """Finds or registers the client for an authorization server.

    Args:
        client_id, client_secret: a pre-registered client (already read from the environment).
        has_private_key: a key for ``private_key_jwt`` is configured.
        auth_method: a forced token-endpoint auth method, else what the server advertises.
        client_metadata_url: this client's Client ID Metadata Document URL, if it has one.
        client_name: the ``client_name`` of a dynamic registration.
        grant_types: the grants a dynamic registration asks for (``refresh_token`` is added
            when the server offers it).
        scopes: the configured scopes (a registration also asks for every scope offered).
    """

    def __init__(
        self,
        *,
        client_id: str | None,
        client_secret: str | None,
        has_private_key: bool,
        auth_method: str | None,
        client_metadata_url: str | None,
        client_name: str,
        grant_types: tuple[str, ...],
        scopes: tuple[str, ...] | None,
        store: TokenStore,
        endpoint: TokenEndpoint,
    ) -> None:
        self.client_id = client_id
        self.client_secret = client_secret
        self.has_private_key = has_private_key
        self.auth_method = auth_method
        self.client_metadata_url = client_metadata_url
        self.client_name = client_name
        self.grant_types = grant_types
        self.scopes = scopes
        self.store = store
        self.endpoint = endpoint

    def pick_method(self, asm: AuthServerMetadata, has_secret: bool) -> str:
        """The token-endpoint auth method for a pre-registered client, as the server advertises."""
        if self.auth_method:
            return self.auth_method
        advertised = asm.token_endpoint_auth_methods_supported
        if self.has_private_key and (advertised is None or "private_key_jwt" in advertised):
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

    def known_client(self, md: AuthMetadata) -> ClientInfo | None:
        """The pre-registered, stored or metadata-document client; None if one must be registered."""
        asm = md.authorization_server
        if self.client_id:
            method = self.pick_method(asm, bool(self.client_secret))
            return ClientInfo(self.client_id, self.client_secret, method, (), asm.issuer, None, "preregistered")
        stored = self.store.load_client(asm.issuer)
        if stored is not None and not stored.secret_expired():
            return stored
        if self.client_metadata_url and asm.client_id_metadata_document_supported:
            return ClientInfo(self.client_metadata_url, None, "none", (), asm.issuer, None, "metadata_document")
        return None

    def client_for(self, md: AuthMetadata, redirect_uri: str | None) -> ClientInfo:
        """Registration in the spec's order: pre-registered, stored, metadata document, dynamic."""
        asm = md.authorization_server
        client = self.known_client(md)
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
        return self.register(md, redirect_uri)

    def register(self, md: AuthMetadata, redirect_uri: str | None) -> ClientInfo:
        """Dynamic Client Registration (RFC 7591); the registration is stored under the issuer."""
        import requests

        asm = md.authorization_server
        assert asm.registration_endpoint is not None
        method = self.auth_method
        if method is None:
            advertised = asm.token_endpoint_auth_methods_supported
            if advertised is None or "none" in advertised:
                method = "none"
            else:
                method = next((m for m in advertised if m in ("client_secret_post", "client_secret_basic")), "none")
        grants = list(self.grant_types)
        if asm.supports_grant(GRANT_REFRESH) or asm.grant_types_supported is None:
            grants.append(GRANT_REFRESH)
        body: dict[str, Any] = {
            "client_name": self.client_name,
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
        scopes = md.choose_scopes(self.scopes)
        for s in asm.scopes_supported or ():
            if s not in scopes:
                scopes.append(s)
        if scopes:
            body["scope"] = " ".join(scopes)
        http, timeout = self.endpoint.http, self.endpoint.timeout
        try:
            resp = http.post(asm.registration_endpoint, json=body, timeout=timeout, allow_redirects=False)
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
        self.store.save_client(asm.issuer, client)
        return client
