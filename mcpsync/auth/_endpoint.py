"""HTTP to the authorization server: client authentication, form posts (with DPoP proofs and
their nonce retry), the token endpoint's answer turned into a :class:`TokenSet`, revocation.

One :class:`TokenEndpoint` per :class:`~mcpsync.auth.OAuth`; it holds no token state, only the
HTTP session, the timeout, the DPoP binding and the client's signing key.
"""

from __future__ import annotations

import base64
import logging
import time
from typing import Any
from urllib.parse import quote

from .._errors import AuthError, ConnectError, TokenEndpointError
from ._dpop import DPoPBinding
from ._jose import SigningKey, client_assertion
from ._metadata import AuthMetadata, AuthServerMetadata
from .storage import ClientInfo, TokenSet

__all__ = ["TokenEndpoint", "ASSERTION_TYPE_JWT"]

log = logging.getLogger("mcpsync.auth")

ASSERTION_TYPE_JWT = "urn:ietf:params:oauth:client-assertion-type:jwt-bearer"


def new_session(verify: Any = True, cert: Any = None, proxy: str | None = None) -> Any:
    """A ``requests.Session`` for the OAuth requests that trusts, shows and goes through
    what the HTTP transports do: the TLS context of
    :func:`mcpsync.transports._tls.tls_context` (``verify``, ``cert``), and ``proxy``
    (None: requests reads ``HTTP(S)_PROXY`` / ``NO_PROXY`` as always).

    Raises:
        TypeError, ValueError, ImportError: as :func:`~mcpsync.transports._tls.check_tls`.
    """
    import requests

    from ..transports._http_options import check_proxy
    from ..transports._tls import check_tls, tls_context

    verify, pair = check_tls(verify, cert)
    session = requests.Session()
    session.mount("https://", _tls_adapter(tls_context(verify, pair)))
    if proxy is not None:
        proxy = check_proxy(proxy)
        session.proxies = {"http": proxy, "https": proxy}
        session.trust_env = False  # else requests lets HTTP(S)_PROXY win over the session's own
    return session


def _tls_adapter(context: Any) -> Any:
    """requests' ``HTTPAdapter`` whose every https pool uses ``context`` as it is."""
    from requests.adapters import HTTPAdapter

    class TLSAdapter(HTTPAdapter):
        def build_connection_pool_key_attributes(self, request: Any, verify: Any, cert: Any = None) -> Any:
            host, _ = super().build_connection_pool_key_attributes(request, True, None)
            pool = {"ssl_context": context, "cert_reqs": context.verify_mode}
            if not context.check_hostname:
                pool["assert_hostname"] = False
            return host, pool

        def cert_verify(self, conn: Any, url: str, verify: Any, cert: Any) -> None:
            pass  # the context decides: no CA bundle or certificate loaded into it per request

    return TLSAdapter()


def refused(what: str, url: str, status: int, error: str | None, description: str | None) -> TokenEndpointError:
    """The error for an OAuth error answer (no secret of the request appears in it)."""
    text = f"{what} at {url} refused (HTTP {status})"
    if error:
        text += f": {error}"
    if description:
        text += f" ({description})"
    return TokenEndpointError(text, error=error, status=status)


class TokenEndpoint:
    """Requests to an authorization server on behalf of one client configuration."""

    def __init__(self, session: Any, timeout: float, dpop: DPoPBinding, private_key: SigningKey | None) -> None:
        self.http = session if session is not None else new_session()
        self.timeout = timeout
        self.dpop = dpop
        self.private_key = private_key

    def close(self) -> None:
        close = getattr(self.http, "close", None)
        if close is not None:
            close()

    def client_auth(self, client: ClientInfo, audience: str, form: dict[str, str]) -> dict[str, str]:
        """Authenticate ``client`` on ``form`` (RFC 6749 §2.3, RFC 7523): the headers to add."""
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
            if self.private_key is None:
                raise AuthError("private_key_jwt without private_key=")
            form["client_assertion_type"] = ASSERTION_TYPE_JWT
            form["client_assertion"] = client_assertion(self.private_key, client.client_id, audience)
        elif method != "none":
            raise AuthError(f"unsupported token-endpoint auth method {method!r}")
        return headers

    def post_form(
        self, url: str, form: dict[str, str], client: ClientInfo, md: AuthMetadata | None, *, what: str
    ) -> dict[str, Any]:
        """POST ``form`` as ``client``; the JSON object of a 200, else :class:`TokenEndpointError`.
        With ``md`` (the MCP server's authorization server) DPoP proofs go along when enabled."""
        import requests

        form = {k: v for k, v in form.items() if v is not None and v != ""}
        # A private_key_jwt assertion is addressed to the authorization server's issuer
        # identifier (RFC 7523 §3, RFC 8414 §2 and the MCP spec), not to the endpoint's URL.
        audience = md.issuer if md is not None else url
        for attempt in range(2):
            headers = {"Accept": "application/json", **self.client_auth(client, audience, form)}
            key = self.dpop.key
            if key is not None and md is not None:
                headers["DPoP"] = key.proof("POST", url)
            try:
                resp = self.http.post(url, data=form, headers=headers, timeout=self.timeout, allow_redirects=False)
            except requests.RequestException as exc:
                raise ConnectError(f"{what} at {url} failed: {type(exc).__name__}") from exc
            with resp:
                try:
                    data = resp.json()
                except ValueError:
                    data = None
                nonce = resp.headers.get("DPoP-Nonce")
            if resp.status_code == 200 and isinstance(data, dict):
                if key is not None and nonce:
                    key.remember_nonce(url, nonce, resource=False)
                return data
            error = data.get("error") if isinstance(data, dict) else None
            if error == "use_dpop_nonce" and key is not None and nonce and attempt == 0:
                key.remember_nonce(url, nonce, resource=False)
                continue
            desc = data.get("error_description") if isinstance(data, dict) else None
            raise refused(what, url, resp.status_code, error, desc)
        raise AssertionError("unreachable")  # pragma: no cover

    def token_request(
        self,
        md: AuthMetadata,
        client: ClientInfo,
        form: dict[str, str],
        *,
        previous: TokenSet | None = None,
        requested_scopes: tuple[str, ...] = (),
    ) -> TokenSet:
        """One grant at the token endpoint; the tokens it issued (not yet stored)."""
        asm = md.authorization_server
        what = f"token request ({form['grant_type'].rsplit(':', 1)[-1]})"
        data = self.post_form(asm.token_endpoint, dict(form), client, md, what=what)
        access = data.get("access_token")
        if not isinstance(access, str) or not access:
            raise AuthError(f"{asm.issuer} answered the {what} without an access_token")
        token_type = str(data.get("token_type") or "Bearer")
        if token_type.lower() == "bearer":
            token_type = "Bearer"
        elif token_type.lower() == "dpop":
            if self.dpop.key is None:
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

    def revoke(self, asm: AuthServerMetadata, client: ClientInfo, form: dict[str, str]) -> bool:
        """RFC 7009 revocation of one token; True if the server accepted it."""
        import requests

        assert asm.revocation_endpoint is not None
        headers = {"Accept": "application/json", **self.client_auth(client, asm.issuer, form)}
        if client.token_endpoint_auth_method == "none":
            # RFC 6749 §2.3.1 lets an empty secret be sent; some servers (the mcp SDK) demand the field.
            form.setdefault("client_secret", "")
        try:
            resp = self.http.post(
                asm.revocation_endpoint, data=form, headers=headers, timeout=self.timeout, allow_redirects=False
            )
        except requests.RequestException as exc:
            log.info("revocation at %s failed: %s", asm.revocation_endpoint, type(exc).__name__)
            return False
        with resp:
            return bool(resp.status_code == 200)
