"""OAuth 2.1 authorization for remote MCP servers, tokens in the OS credential store.

:class:`OAuth` is the ``auth=`` object of the HTTP transports (Streamable HTTP and HTTP+SSE): they
call ``auth.headers(url, method)`` before every request and ``auth.on_response(url, method,
status, headers)`` on a 401/403, retrying once when it returns True. A first 401 runs the whole
flow (discovery, registration, authorization, token); tokens are refreshed on a background thread
before they expire; a 403 ``insufficient_scope`` steps up to the union of scopes.

Lazy: importing :mod:`mcpsync.auth` loads nothing heavy; ``requests`` comes with the OAuth
machinery on first use, ``keyring`` only when the keyring store is first touched, and
``cryptography`` only for DPoP and ``private_key_jwt``.

Example:
    >>> from mcpsync.auth import OAuth, MemoryTokenStore
    >>> auth = OAuth("https://mcp.example.com/mcp", store=MemoryTokenStore())
    >>> auth.headers("https://mcp.example.com/mcp", "POST")
    {}
    >>> auth.close()

Typical set-ups (the default store is the OS keyring)::

    # A user on a desktop: the browser opens, the redirect lands on 127.0.0.1.
    auth = OAuth("https://mcp.example.com/mcp")
    client = Client(lambda: StreamableHTTPTransport(auth.server_url, auth=auth))

    # A headless machine with a user somewhere: RFC 8628 device grant.
    auth = OAuth(url, grant="device_code", client_id_env="MCP_CLIENT_ID",
                 on_device_code=lambda d: print(d.verification_uri, d.user_code))

    # Machine to machine: client credentials (secret or RFC 7523 private_key_jwt), DPoP-bound.
    auth = OAuth(url, grant="client_credentials", client_id_env="MCP_CLIENT_ID",
                 client_secret_env="MCP_CLIENT_SECRET", dpop=True)

    # Enterprise-managed: the IdP token → ID-JAG (RFC 8693) → jwt-bearer grant (RFC 7523).
    auth = OAuth(url, grant="enterprise", client_id=..., client_secret=...,
                 enterprise=EnterpriseIdentity(idp_token_endpoint, subject_token=get_id_token))

    # A stdio server that wants the token in its environment.
    env = {**os.environ, **auth.token_env("MCP_ACCESS_TOKEN")}
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

__all__ = [
    "OAuth",
    "AuthorizationRequest",
    "DeviceAuthorization",
    "EnterpriseIdentity",
    "discover_auth_metadata",
    "initiate_authorization",
    "exchange_code",
    "refresh_access_token",
    "get_valid_token",
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
    "AuthorizationRequest": "oauth",
    "DeviceAuthorization": "oauth",
    "EnterpriseIdentity": "oauth",
    "initiate_authorization": "oauth",
    "exchange_code": "oauth",
    "refresh_access_token": "oauth",
    "get_valid_token": "oauth",
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
    "DPoPKey": "_jose",
    "LoopbackRedirect": "_loopback",
}

if TYPE_CHECKING:
    from ._jose import DPoPKey, SigningKey
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
    from .oauth import (
        AuthorizationRequest,
        DeviceAuthorization,
        EnterpriseIdentity,
        OAuth,
        exchange_code,
        get_valid_token,
        initiate_authorization,
        refresh_access_token,
    )
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
