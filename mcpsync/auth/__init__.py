"""OAuth 2.1 authorization for remote MCP servers, tokens in the OS credential store.

:class:`OAuth` is the ``auth=`` object of the HTTP transports (Streamable HTTP and HTTP+SSE): they
call ``auth.headers(url, method)`` before every request and ``auth.on_response(url, method,
status, headers)`` on a 401/403, retrying once when it returns True. A first 401 runs the whole
flow (discovery, registration, the grant, token); tokens are refreshed on a background thread
before they expire; a 403 ``insufficient_scope`` steps up to the union of scopes.

How tokens are obtained is the ``grant=``, one small object that also carries the client's
identity: :class:`AuthorizationCode` (the default), :class:`DeviceCode`,
:class:`ClientCredentials`, :class:`JWTBearer`, :class:`IdJag`. A secret can be an
:class:`Env` (read from the environment when the :class:`OAuth` is made).

Lazy: importing :mod:`mcpsync.auth` loads nothing heavy; ``requests`` comes with the OAuth
machinery on first use, ``keyring`` only when the keyring store is first touched, and
``cryptography`` only for DPoP and ``private_key_jwt``.

Example:
    >>> from mcpsync.auth import OAuth, MemoryTokenStore
    >>> auth = OAuth("https://mcp.example.com/mcp", storage=MemoryTokenStore())
    >>> auth.headers("https://mcp.example.com/mcp", "POST")
    {}
    >>> auth.close()

Typical set-ups (the default storage is the OS keyring)::

    # A user on a desktop: the browser opens, the redirect lands on 127.0.0.1.
    auth = OAuth("https://mcp.example.com/mcp")
    client = Client.http(auth.server_url, auth=auth)

    # A headless machine with a user somewhere: RFC 8628 device grant.
    auth = OAuth(url, DeviceCode(client_id=Env("MCP_CLIENT_ID"),
                                 on_device_code=lambda d: print(d.verification_uri, d.user_code)))

    # Machine to machine: client credentials (secret or RFC 7523 private_key_jwt), DPoP-bound.
    auth = OAuth(url, ClientCredentials(client_id=Env("MCP_CLIENT_ID"),
                                        client_secret=Env("MCP_CLIENT_SECRET")), dpop=True)

    # Enterprise-managed: the IdP token → ID-JAG (RFC 8693) → jwt-bearer grant (RFC 7523).
    auth = OAuth(url, IdJag(idp_token_endpoint, subject_token=get_id_token,
                            client_id=..., client_secret=Env("MCP_CLIENT_SECRET")))

    # A stdio server that wants the token in its environment.
    env = {**os.environ, **auth.token_env("MCP_ACCESS_TOKEN")}
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

__all__ = [
    "OAuth",
    "Env",
    "Grant",
    "AuthorizationCode",
    "DeviceCode",
    "ClientCredentials",
    "JWTBearer",
    "IdJag",
    "AuthorizationRequest",
    "DeviceAuthorization",
    "discover_auth_metadata",
    "clear_metadata_cache",
    "AuthMetadata",
    "AuthServerMetadata",
    "ProtectedResourceMetadata",
    "Challenge",
    "parse_www_authenticate",
    "canonical_resource",
    "TokenSet",
    "ClientInfo",
    "TokenStore",
    "MemoryTokenStore",
    "KeyringTokenStore",
    "default_store",
    "SigningKey",
    "DPoPKey",
    "LoopbackRedirect",
]

_WHERE = {
    "OAuth": "oauth",
    "Env": "_grants",
    "Grant": "_grants",
    "AuthorizationCode": "_grants",
    "DeviceCode": "_grants",
    "ClientCredentials": "_grants",
    "JWTBearer": "_grants",
    "IdJag": "_grants",
    "AuthorizationRequest": "_grants",
    "DeviceAuthorization": "_grants",
    "discover_auth_metadata": "_metadata",
    "clear_metadata_cache": "_metadata",
    "AuthMetadata": "_metadata",
    "AuthServerMetadata": "_metadata",
    "ProtectedResourceMetadata": "_metadata",
    "Challenge": "_metadata",
    "parse_www_authenticate": "_metadata",
    "canonical_resource": "_metadata",
    "TokenSet": "storage",
    "ClientInfo": "storage",
    "TokenStore": "storage",
    "MemoryTokenStore": "storage",
    "KeyringTokenStore": "storage",
    "default_store": "storage",
    "SigningKey": "_jose",
    "DPoPKey": "_dpop",
    "LoopbackRedirect": "_loopback",
}

if TYPE_CHECKING:
    from ._dpop import DPoPKey
    from ._grants import (
        AuthorizationCode,
        AuthorizationRequest,
        ClientCredentials,
        DeviceAuthorization,
        DeviceCode,
        Env,
        Grant,
        IdJag,
        JWTBearer,
    )
    from ._jose import SigningKey
    from ._loopback import LoopbackRedirect
    from ._metadata import (
        AuthMetadata,
        AuthServerMetadata,
        Challenge,
        ProtectedResourceMetadata,
        canonical_resource,
        clear_metadata_cache,
        discover_auth_metadata,
        parse_www_authenticate,
    )
    from .oauth import OAuth
    from .storage import ClientInfo, KeyringTokenStore, MemoryTokenStore, TokenSet, TokenStore, default_store


def __getattr__(name: str) -> Any:
    module = _WHERE.get(name)
    if module is None:
        raise AttributeError(f"module 'mcpsync.auth' has no attribute {name!r}")
    value = getattr(importlib.import_module(f"{__name__}.{module}"), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(__all__)
