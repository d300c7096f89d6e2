"""Discovery: ``WWW-Authenticate`` challenges, protected-resource metadata (RFC 9728) and
authorization-server metadata (RFC 8414 / OpenID Connect Discovery), in the MCP spec's order.

Order for the protected-resource metadata of ``https://host/path``:

1. the ``resource_metadata`` URL of the 401 challenge, if any;
2. ``https://host/.well-known/oauth-protected-resource/path``;
3. ``https://host/.well-known/oauth-protected-resource``.

Order for the authorization-server metadata of an issuer ``https://as/tenant`` (with a path)::

    https://as/.well-known/oauth-authorization-server/tenant
    https://as/.well-known/openid-configuration/tenant
    https://as/tenant/.well-known/openid-configuration

and for an issuer without a path: ``/.well-known/oauth-authorization-server`` then
``/.well-known/openid-configuration``. The ``issuer`` member must equal the issuer exactly.

A server without protected-resource metadata is treated as a 2025-03-26-era server: its
origin is the authorization server; without metadata there either, the default endpoints
``/authorize``, ``/token`` and ``/register`` are used.
"""

from __future__ import annotations

import re
import threading
import time
from dataclasses import dataclass, field
from typing import Any, Iterable, Mapping
from urllib.parse import urlsplit, urlunsplit

from .._errors import AuthError, ConnectError
from ..transports._http_options import wire_url

# OAuth grant types and token types (RFC 6749, 8628, 7523, 8693; ID-JAG).
GRANT_CODE = "authorization_code"
GRANT_REFRESH = "refresh_token"
GRANT_CLIENT_CREDENTIALS = "client_credentials"
GRANT_DEVICE = "urn:ietf:params:oauth:grant-type:device_code"
GRANT_JWT_BEARER = "urn:ietf:params:oauth:grant-type:jwt-bearer"
GRANT_TOKEN_EXCHANGE = "urn:ietf:params:oauth:grant-type:token-exchange"
TOKEN_TYPE_ID_JAG = "urn:ietf:params:oauth:token-type:id-jag"
TOKEN_TYPE_ID_TOKEN = "urn:ietf:params:oauth:token-type:id_token"

__all__ = [
    "Challenge",
    "parse_www_authenticate",
    "ProtectedResourceMetadata",
    "AuthServerMetadata",
    "AuthMetadata",
    "canonical_resource",
    "resource_covers",
    "protected_resource_metadata_urls",
    "authorization_server_metadata_urls",
    "discover_auth_metadata",
    "clear_metadata_cache",
]

_AUTH_PARAM = re.compile(r'\s*([A-Za-z0-9_\-\.]+)\s*=\s*("(?:[^"\\]|\\.)*"|[^\s,]*)\s*,?')
_SCHEME = re.compile(r"\s*([A-Za-z][A-Za-z0-9_\-\.!#$%&'*+^`|~]*)(?:\s+|$)")


@dataclass(frozen=True, slots=True)
class Challenge:
    """One challenge of a ``WWW-Authenticate`` header (RFC 9110 §11.6.1).

    Attributes:
        scheme: the auth scheme, lower-cased (``bearer``, ``dpop``).
        params: its parameters (names lower-cased, quotes removed).
    """

    scheme: str
    params: Mapping[str, str] = field(default_factory=dict)

    @property
    def error(self) -> str | None:
        return self.params.get("error")

    @property
    def scope(self) -> str | None:
        return self.params.get("scope")

    @property
    def resource_metadata(self) -> str | None:
        return self.params.get("resource_metadata")


def parse_www_authenticate(value: str | None) -> list[Challenge]:
    """Parse a ``WWW-Authenticate`` value into its challenges (tolerant of sloppy servers).

    Example:
        >>> c = parse_www_authenticate('Bearer error="insufficient_scope", scope="a b"')[0]
        >>> c.scheme, c.error, c.scope
        ('bearer', 'insufficient_scope', 'a b')
    """
    if not value:
        return []
    out: list[Challenge] = []
    pos = 0
    text = value.strip()
    while pos < len(text):
        m = _SCHEME.match(text, pos)
        if not m:
            break
        scheme = m.group(1).lower()
        pos = m.end()
        params: dict[str, str] = {}
        while pos < len(text):
            pm = _AUTH_PARAM.match(text, pos)
            if not pm:
                break
            # A bare token followed by a space and not "=" starts the next challenge.
            name, raw = pm.group(1), pm.group(2)
            if raw.startswith('"'):
                raw = re.sub(r"\\(.)", r"\1", raw[1:-1])
            params[name.lower()] = raw
            pos = pm.end()
        out.append(Challenge(scheme, params))
        while pos < len(text) and text[pos] in ", ":
            pos += 1
    return out


def canonical_resource(url: str) -> str:
    """The canonical URI of an MCP server (RFC 8707 / MCP spec): lower-case scheme and host
    (an international one in its IDNA 2008 form, as it is reached), no default port, no
    userinfo, no fragment, no query, no lone trailing ``/``.

    Example:
        >>> canonical_resource("HTTP://Example.COM:80/mcp#x")
        'http://example.com/mcp'
        >>> canonical_resource("https://straße.test/mcp")
        'https://xn--strae-oqa.test/mcp'
    """
    try:
        wire, _ = wire_url(url)  # as the transports send it: IDNA 2008 host, no userinfo
    except ValueError as exc:
        raise AuthError(f"not a usable server URL: {exc}") from None
    parts = urlsplit(wire)
    if parts.scheme.lower() not in ("http", "https") or not parts.hostname:
        raise AuthError(f"not an http(s) server URL: {wire!r}")
    scheme = parts.scheme.lower()
    host = parts.hostname.lower()
    if ":" in host:
        host = f"[{host}]"
    port = parts.port
    netloc = host if port is None or (scheme, port) in (("http", 80), ("https", 443)) else f"{host}:{port}"
    path = parts.path
    if path == "/":
        path = ""
    return urlunsplit((scheme, netloc, path, "", ""))


def _origin(url: str) -> str:
    parts = urlsplit(canonical_resource(url))
    return f"{parts.scheme}://{parts.netloc}"


def resource_covers(resource: str, server_url: str) -> bool:
    """Whether a protected-resource ``resource`` identifies ``server_url``: the same canonical URI,
    or a parent of it on the same origin (a path prefix ending at a ``/`` boundary)."""
    try:
        res = canonical_resource(resource)
        srv = canonical_resource(server_url)
    except AuthError:
        return False
    if res == srv:
        return True
    if _origin(res) != _origin(srv):
        return False
    res_path = urlsplit(res).path.rstrip("/")
    srv_path = urlsplit(srv).path
    return res_path == "" or srv_path.startswith(res_path + "/")


def protected_resource_metadata_urls(server_url: str, header_url: str | None = None) -> list[str]:
    """The URLs tried for protected-resource metadata, in order."""
    canon = canonical_resource(server_url)
    origin = _origin(canon)
    path = urlsplit(canon).path
    urls = []
    if header_url:
        urls.append(header_url)
    if path:
        urls.append(f"{origin}/.well-known/oauth-protected-resource{path}")
    urls.append(f"{origin}/.well-known/oauth-protected-resource")
    seen: list[str] = []
    for u in urls:
        if u not in seen:
            seen.append(u)
    return seen


def authorization_server_metadata_urls(issuer: str) -> list[str]:
    """The URLs tried for an issuer's metadata, in the MCP spec's order."""
    parts = urlsplit(issuer)
    origin = f"{parts.scheme}://{parts.netloc}"
    path = parts.path.rstrip("/")
    if path:
        return [
            f"{origin}/.well-known/oauth-authorization-server{path}",
            f"{origin}/.well-known/openid-configuration{path}",
            f"{origin}{path}/.well-known/openid-configuration",
        ]
    return [f"{origin}/.well-known/oauth-authorization-server", f"{origin}/.well-known/openid-configuration"]


def _strs(value: Any) -> tuple[str, ...] | None:
    if value is None:
        return None
    if isinstance(value, str):
        return tuple(value.split())
    if isinstance(value, (list, tuple)):
        return tuple(str(v) for v in value)
    return None


@dataclass(frozen=True, slots=True)
class ProtectedResourceMetadata:
    """RFC 9728 protected-resource metadata (the members the client uses, plus ``raw``)."""

    resource: str
    authorization_servers: tuple[str, ...]
    scopes_supported: tuple[str, ...] | None = None
    bearer_methods_supported: tuple[str, ...] | None = None
    dpop_signing_alg_values_supported: tuple[str, ...] | None = None
    dpop_bound_access_tokens_required: bool = False
    url: str | None = None
    raw: Mapping[str, Any] = field(default_factory=dict, repr=False, compare=False)

    @classmethod
    def from_json(cls, data: Mapping[str, Any], url: str | None = None) -> "ProtectedResourceMetadata":
        resource = data.get("resource")
        servers = _strs(data.get("authorization_servers"))
        if not isinstance(resource, str) or not servers:
            raise AuthError(f"protected-resource metadata at {url} lacks resource or authorization_servers")
        return cls(
            resource=resource,
            authorization_servers=servers,
            scopes_supported=_strs(data.get("scopes_supported")),
            bearer_methods_supported=_strs(data.get("bearer_methods_supported")),
            dpop_signing_alg_values_supported=_strs(data.get("dpop_signing_alg_values_supported")),
            dpop_bound_access_tokens_required=bool(data.get("dpop_bound_access_tokens_required")),
            url=url,
            raw=dict(data),
        )


@dataclass(frozen=True, slots=True)
class AuthServerMetadata:
    """RFC 8414 / OIDC authorization-server metadata.

    Attributes:
        legacy_defaults: True when no metadata document existed and the 2025-03-26 default
            endpoints (``/authorize``, ``/token``, ``/register``) were assumed.
    """

    issuer: str
    authorization_endpoint: str | None
    token_endpoint: str
    registration_endpoint: str | None = None
    revocation_endpoint: str | None = None
    device_authorization_endpoint: str | None = None
    scopes_supported: tuple[str, ...] | None = None
    response_types_supported: tuple[str, ...] | None = None
    grant_types_supported: tuple[str, ...] | None = None
    code_challenge_methods_supported: tuple[str, ...] | None = None
    token_endpoint_auth_methods_supported: tuple[str, ...] | None = None
    revocation_endpoint_auth_methods_supported: tuple[str, ...] | None = None
    dpop_signing_alg_values_supported: tuple[str, ...] | None = None
    client_id_metadata_document_supported: bool = False
    authorization_response_iss_parameter_supported: bool = False
    legacy_defaults: bool = False
    url: str | None = None
    raw: Mapping[str, Any] = field(default_factory=dict, repr=False, compare=False)

    @classmethod
    def from_json(cls, data: Mapping[str, Any], url: str | None = None) -> "AuthServerMetadata":
        issuer = data.get("issuer")
        token = data.get("token_endpoint")
        if not isinstance(issuer, str) or not isinstance(token, str):
            raise AuthError(f"authorization-server metadata at {url} lacks issuer or token_endpoint")

        def s(name: str) -> str | None:
            v = data.get(name)
            return v if isinstance(v, str) and v else None

        return cls(
            issuer=issuer,
            authorization_endpoint=s("authorization_endpoint"),
            token_endpoint=token,
            registration_endpoint=s("registration_endpoint"),
            revocation_endpoint=s("revocation_endpoint"),
            device_authorization_endpoint=s("device_authorization_endpoint"),
            scopes_supported=_strs(data.get("scopes_supported")),
            response_types_supported=_strs(data.get("response_types_supported")),
            grant_types_supported=_strs(data.get("grant_types_supported")),
            code_challenge_methods_supported=_strs(data.get("code_challenge_methods_supported")),
            token_endpoint_auth_methods_supported=_strs(data.get("token_endpoint_auth_methods_supported")),
            revocation_endpoint_auth_methods_supported=_strs(data.get("revocation_endpoint_auth_methods_supported")),
            dpop_signing_alg_values_supported=_strs(data.get("dpop_signing_alg_values_supported")),
            client_id_metadata_document_supported=bool(data.get("client_id_metadata_document_supported")),
            authorization_response_iss_parameter_supported=bool(
                data.get("authorization_response_iss_parameter_supported")
            ),
            url=url,
            raw=dict(data),
        )

    @classmethod
    def legacy(cls, base: str) -> "AuthServerMetadata":
        """The 2025-03-26 default endpoints relative to the server's origin."""
        return cls(
            issuer=base,
            authorization_endpoint=base + "/authorize",
            token_endpoint=base + "/token",
            registration_endpoint=base + "/register",
            legacy_defaults=True,
        )

    def supports_grant(self, grant: str) -> bool:
        """RFC 8414: an absent ``grant_types_supported`` means authorization_code + implicit."""
        if self.grant_types_supported is None:
            return grant == "authorization_code" or (self.legacy_defaults and grant == "refresh_token")
        return grant in self.grant_types_supported


@dataclass(frozen=True, slots=True)
class AuthMetadata:
    """Everything discovery found for one MCP server.

    Attributes:
        server_url: the MCP endpoint as given.
        resource: the RFC 8707 resource indicator to send (the metadata's ``resource``, else the
            server's canonical URI).
        protected_resource: its RFC 9728 metadata, or ``None`` for a 2025-03-26-era server.
        authorization_server: the chosen authorization server's metadata.
        challenge_scope: the ``scope`` of the 401 challenge that started discovery, if any.
    """

    server_url: str
    resource: str
    protected_resource: ProtectedResourceMetadata | None
    authorization_server: AuthServerMetadata
    challenge_scope: str | None = None

    @property
    def issuer(self) -> str:
        return self.authorization_server.issuer

    def default_scopes(self) -> list[str]:
        """Scope selection: the challenge's, else the resource's ``scopes_supported``, else none."""
        if self.challenge_scope:
            return self.challenge_scope.split()
        if self.protected_resource is not None and self.protected_resource.scopes_supported:
            return list(self.protected_resource.scopes_supported)
        return []

    def choose_scopes(self, asked: Iterable[str] | None, offline: bool = True) -> list[str]:
        """The scopes to request: ``asked`` (the caller's or the configured ones), else
        :meth:`default_scopes`; ``offline_access`` added for grants that get a refresh token
        when the server offers it; duplicates dropped, order kept."""
        chosen = list(asked) if asked is not None else self.default_scopes()
        asm = self.authorization_server
        if (
            offline
            and "offline_access" not in chosen
            and asm.scopes_supported is not None
            and "offline_access" in asm.scopes_supported
            and asm.supports_grant(GRANT_REFRESH)
        ):
            chosen.append("offline_access")
        return list(dict.fromkeys(chosen))


_CACHE_TTL = 3600.0
_cache: dict[tuple[str, str | None], tuple[float, AuthMetadata]] = {}
_cache_lock = threading.Lock()


def clear_metadata_cache() -> None:
    """Forget every cached discovery result."""
    with _cache_lock:
        _cache.clear()


def _get_json(session: Any, url: str, timeout: float) -> Mapping[str, Any] | None:
    import requests

    try:
        resp = session.get(url, headers={"Accept": "application/json"}, timeout=timeout, allow_redirects=False)
    except requests.RequestException as exc:
        raise ConnectError(f"OAuth discovery could not reach {url}: {type(exc).__name__}") from exc
    try:
        if resp.status_code != 200:
            return None
        try:
            data = resp.json()
        except ValueError:
            return None
        return data if isinstance(data, dict) else None
    finally:
        resp.close()


def fetch_protected_resource_metadata(
    session: Any, server_url: str, header_url: str | None, timeout: float
) -> ProtectedResourceMetadata | None:
    """RFC 9728 metadata for ``server_url``; AuthError if its ``resource`` does not match."""
    for url in protected_resource_metadata_urls(server_url, header_url):
        data = _get_json(session, url, timeout)
        if data is None:
            continue
        prm = ProtectedResourceMetadata.from_json(data, url)
        if not resource_covers(prm.resource, server_url):
            raise AuthError(
                f"protected-resource metadata at {url} names resource {prm.resource!r}, "
                f"which is not the server {canonical_resource(server_url)!r}: refusing to authorize"
            )
        return prm
    return None


def fetch_authorization_server_metadata(session: Any, issuer: str, timeout: float) -> AuthServerMetadata | None:
    """RFC 8414 / OIDC metadata of ``issuer``; AuthError if its ``issuer`` differs."""
    for url in authorization_server_metadata_urls(issuer):
        data = _get_json(session, url, timeout)
        if data is None:
            continue
        meta = AuthServerMetadata.from_json(data, url)
        if meta.issuer != issuer:
            raise AuthError(
                f"authorization-server metadata at {url} names issuer {meta.issuer!r}, "
                f"expected exactly {issuer!r}: refusing it"
            )
        return meta
    return None


def discover_auth_metadata(
    server_url: str,
    *,
    www_authenticate: str | None = None,
    session: Any = None,
    timeout: float = 10.0,
    use_cache: bool = True,
) -> AuthMetadata:
    """Discover how to authorize against the MCP server at ``server_url``.

    Args:
        server_url: the MCP endpoint (e.g. ``https://mcp.example.com/mcp``).
        www_authenticate: the ``WWW-Authenticate`` value of a 401, if discovery follows one.
        session: a ``requests.Session`` to use (default: a new one).
        timeout: per-request timeout in seconds.
        use_cache: reuse a result from the last hour (keyed by server and metadata URL).

    Returns:
        The :class:`AuthMetadata`.

    Raises:
        AuthError: metadata that contradicts itself (resource or issuer mismatch).
        ConnectError: a metadata URL could not be reached.

    Example:
        >>> md = discover_auth_metadata("http://127.0.0.1:8000/mcp")  # doctest: +SKIP
        >>> md.authorization_server.token_endpoint                    # doctest: +SKIP
        'http://127.0.0.1:8000/token'
    """
    challenge = None
    for c in parse_www_authenticate(www_authenticate):
        if c.scheme in ("bearer", "dpop"):
            challenge = c
            break
    header_url = challenge.resource_metadata if challenge else None
    key = (canonical_resource(server_url), header_url)
    if use_cache:
        with _cache_lock:
            hit = _cache.get(key)
        if hit is not None and hit[0] > time.monotonic():
            md = hit[1]
            scope = challenge.scope if challenge else None
            if scope != md.challenge_scope and scope is not None:
                md = AuthMetadata(md.server_url, md.resource, md.protected_resource, md.authorization_server, scope)
            return md

    own = session is None
    if own:
        import requests

        session = requests.Session()
    try:
        prm = fetch_protected_resource_metadata(session, server_url, header_url, timeout)
        if prm is not None:
            asm = None
            for issuer in prm.authorization_servers:
                asm = fetch_authorization_server_metadata(session, issuer, timeout)
                if asm is not None:
                    break
            if asm is None:
                raise AuthError(
                    f"none of the authorization servers {list(prm.authorization_servers)} publishes metadata"
                )
            resource = prm.resource
        else:
            base = _origin(server_url)
            asm = fetch_authorization_server_metadata(session, base, timeout) or AuthServerMetadata.legacy(base)
            resource = canonical_resource(server_url)
    finally:
        if own:
            session.close()
    md = AuthMetadata(server_url, resource, prm, asm, challenge.scope if challenge else None)
    with _cache_lock:
        _cache[key] = (time.monotonic() + _CACHE_TTL, md)
    return md
