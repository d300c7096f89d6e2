"""DPoP (RFC 9449): the key that signs proofs, and the binding an :class:`~mcpsync.auth.OAuth`
keeps with it (configured on or off, or switched on when the resource asks).

The binding is told what the resource server answers (``DPoP-Nonce`` headers, ``DPoP``
challenges, ``dpop_bound_access_tokens_required`` in its metadata) and gives the headers of
every request: ``Authorization: DPoP …`` plus a fresh proof for a DPoP-bound token, ``Bearer``
otherwise. Signing needs ``cryptography``, imported on first use.
"""

from __future__ import annotations

import hashlib
import threading
import time
import uuid
from typing import Any
from urllib.parse import urlsplit

from .._errors import AuthError
from ._jose import SigningKey, b64url, htu
from .storage import TokenSet

__all__ = ["DPoPKey", "DPoPBinding"]


class DPoPKey:
    """A DPoP key pair (RFC 9449) and the server nonces it has been given.

    One proof per HTTP request: ``typ: dpop+jwt``, the public JWK in the header, and the
    ``jti``, ``htm``, ``htu``, ``iat`` claims (plus ``ath`` on resource requests, which are the
    ones made with an access token, and the latest ``nonce`` that server sent).

    Example:
        >>> dpop = DPoPKey()
        >>> proof = dpop.proof("POST", "https://as.example.com/token")
        >>> proof.count(".")
        2
    """

    def __init__(self, key: SigningKey | None = None) -> None:
        self.key = key or SigningKey.generate()
        self._nonces: dict[tuple[str, bool], str] = {}
        self._lock = threading.Lock()

    def __repr__(self) -> str:
        return f"DPoPKey(jkt={self.key.thumbprint()!r})"

    @property
    def jkt(self) -> str:
        """The key's thumbprint (the ``cnf.jkt`` a server binds tokens to)."""
        return self.key.thumbprint()

    @staticmethod
    def _origin(url: str) -> str:
        parts = urlsplit(url)
        return f"{parts.scheme}://{parts.netloc}"

    def remember_nonce(self, url: str, nonce: str | None, *, resource: bool = True) -> bool:
        """Record a ``DPoP-Nonce`` a server sent; True if it is new.

        Nonces are kept per origin and per role (authorization server vs resource server), since
        both may share an origin and still issue different nonces.
        """
        if not nonce:
            return False
        key = (self._origin(url), resource)
        with self._lock:
            changed = self._nonces.get(key) != nonce
            self._nonces[key] = nonce
        return changed

    def proof(self, method: str, url: str, access_token: str | None = None) -> str:
        claims: dict[str, Any] = {
            "jti": str(uuid.uuid4()),
            "htm": method.upper(),
            "htu": htu(url),
            "iat": int(time.time()),
        }
        with self._lock:
            nonce = self._nonces.get((self._origin(url), access_token is not None))
        if nonce:
            claims["nonce"] = nonce
        if access_token is not None:
            claims["ath"] = b64url(hashlib.sha256(access_token.encode("ascii")).digest())
        return self.key.sign_jwt({"typ": "dpop+jwt", "jwk": self.key.public_jwk()}, claims)


class DPoPBinding:
    """Whether tokens are DPoP-bound, and the nonces that arrived before a key existed.

    ``setting`` is the ``dpop=`` of :class:`~mcpsync.auth.OAuth`: True or a :class:`DPoPKey`
    (always), False (never), None (only when the resource asks for it). Thread-safe.
    """

    def __init__(self, setting: bool | DPoPKey | None) -> None:
        self.key: DPoPKey | None = setting if isinstance(setting, DPoPKey) else (DPoPKey() if setting else None)
        self.auto = setting is None
        self._early_nonce: tuple[str, str] | None = None
        self._lock = threading.Lock()

    def enable(self) -> None:
        """Turn DPoP on (``dpop=None`` only: never when configured off), keeping a nonce the
        resource sent before the key existed."""
        if not self.auto:
            return
        with self._lock:
            if self.key is not None:
                return
            key = self.key = DPoPKey()
            early, self._early_nonce = self._early_nonce, None
        if early is not None:
            key.remember_nonce(*early)

    def on_resource_answer(
        self, url: str, lower_headers: dict[str, str], schemes: set[str], error: str | None
    ) -> bool | None:
        """Take in a resource server's 401/403: a ``DPoP`` challenge switches DPoP on (RFC 9449
        §7.1), a ``DPoP-Nonce`` is remembered. For a ``use_dpop_nonce`` challenge the answer is
        decided here (True: retry with the new nonce; False: the nonce was not new); None: the
        401/403 is for the caller to handle."""
        if self.key is None and "dpop" in schemes:
            self.enable()
        nonce = lower_headers.get("dpop-nonce")
        if not nonce:
            return None
        key = self.key
        if key is not None:
            fresh = key.remember_nonce(url, nonce)
            return fresh if error == "use_dpop_nonce" else None
        if self.auto:
            with self._lock:  # kept for the key DPoP auto-enabling may create next
                self._early_nonce = (url, nonce)
        return None

    def headers(self, tokens: TokenSet, url: str, method: str) -> dict[str, str]:
        """The headers that present ``tokens`` on one request to the resource."""
        if tokens.token_type.lower() == "dpop":
            key = self.key
            if key is None:
                raise AuthError("a DPoP-bound token is held but no DPoP key is configured")
            return {"Authorization": f"DPoP {tokens.access_token}", "DPoP": key.proof(method, url, tokens.access_token)}
        return {"Authorization": f"Bearer {tokens.access_token}"}
