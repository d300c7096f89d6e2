"""The small amount of JOSE the OAuth client needs: PKCE, compact JWS and RFC 7523 client
assertions (DPoP proofs, RFC 9449, are built on it in :mod:`._dpop`).

Signing uses ``cryptography`` (imported on first use, so the package imports without it).
Supported keys: EC P-256 (``ES256``) and RSA (``RS256``).
"""

from __future__ import annotations

import base64
import hashlib
import json
import secrets
import time
import uuid
from typing import Any
from urllib.parse import urlsplit, urlunsplit

from .._errors import AuthError

__all__ = [
    "b64url",
    "pkce_pair",
    "s256",
    "SigningKey",
    "client_assertion",
    "htu",
]


def b64url(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode("ascii")


def s256(verifier: str) -> str:
    """The PKCE S256 challenge of ``verifier`` (RFC 7636 §4.2)."""
    return b64url(hashlib.sha256(verifier.encode("ascii")).digest())


def pkce_pair() -> tuple[str, str]:
    """A fresh (verifier, S256 challenge): 64 unreserved characters, 384 bits of entropy."""
    verifier = secrets.token_urlsafe(48)
    return verifier, s256(verifier)


def htu(url: str) -> str:
    """The DPoP ``htu`` of a request URL: without query and fragment (RFC 9449 §4.2)."""
    parts = urlsplit(url)
    return urlunsplit((parts.scheme, parts.netloc, parts.path, "", ""))


def _crypto() -> Any:
    try:
        from cryptography.hazmat.primitives import hashes, serialization
        from cryptography.hazmat.primitives.asymmetric import ec, padding, rsa, utils
    except ImportError as exc:  # pragma: no cover - cryptography ships with the keyring extra
        raise AuthError("signing keys (DPoP, private_key_jwt) need the 'cryptography' package") from exc
    return hashes, serialization, ec, padding, rsa, utils


class SigningKey:
    """A private key that signs compact JWS: EC P-256 (ES256) or RSA (RS256).

    Args:
        key: a ``cryptography`` private key object, or PEM bytes / str.
        kid: the key id put in JWS headers (default: the RFC 7638 thumbprint).

    Example:
        >>> key = SigningKey.generate()
        >>> key.alg
        'ES256'
    """

    def __init__(self, key: Any, kid: str | None = None) -> None:
        hashes, serialization, ec, padding, rsa, utils = _crypto()
        if isinstance(key, (bytes, str)):
            key = serialization.load_pem_private_key(key.encode() if isinstance(key, str) else key, password=None)
        if isinstance(key, ec.EllipticCurvePrivateKey):
            if key.curve.name != "secp256r1":
                raise AuthError("only P-256 EC keys are supported (ES256)")
            self.alg = "ES256"
        elif isinstance(key, rsa.RSAPrivateKey):
            self.alg = "RS256"
        else:
            raise AuthError("unsupported signing key type")
        self._key = key
        self.kid = kid or self.thumbprint()

    def __repr__(self) -> str:
        return f"SigningKey(alg={self.alg!r}, kid={self.kid!r})"

    @classmethod
    def generate(cls) -> "SigningKey":
        """A fresh EC P-256 key (ES256)."""
        _, _, ec, _, _, _ = _crypto()
        return cls(ec.generate_private_key(ec.SECP256R1()))

    def public_jwk(self) -> dict[str, str]:
        """The public key as a JWK (no private members)."""
        numbers = self._key.public_key().public_numbers()
        if self.alg == "ES256":
            return {
                "kty": "EC",
                "crv": "P-256",
                "x": b64url(numbers.x.to_bytes(32, "big")),
                "y": b64url(numbers.y.to_bytes(32, "big")),
            }
        n = numbers.n.to_bytes((numbers.n.bit_length() + 7) // 8, "big")
        e = numbers.e.to_bytes((numbers.e.bit_length() + 7) // 8, "big")
        return {"kty": "RSA", "n": b64url(n), "e": b64url(e)}

    def thumbprint(self) -> str:
        """The RFC 7638 JWK thumbprint (SHA-256, base64url)."""
        jwk = self.public_jwk()
        members = ("crv", "kty", "x", "y") if jwk["kty"] == "EC" else ("e", "kty", "n")
        canonical = json.dumps({k: jwk[k] for k in members}, separators=(",", ":"), sort_keys=True)
        return b64url(hashlib.sha256(canonical.encode()).digest())

    def sign_jwt(self, header: dict[str, Any], claims: dict[str, Any]) -> str:
        """A compact JWS over ``claims`` with ``header`` (``alg`` is filled in)."""
        hashes, _, ec, padding, _, utils = _crypto()
        head = {"alg": self.alg, **header}
        signing_input = (
            b64url(json.dumps(head, separators=(",", ":")).encode())
            + "."
            + b64url(json.dumps(claims, separators=(",", ":")).encode())
        ).encode("ascii")
        if self.alg == "ES256":
            der = self._key.sign(signing_input, ec.ECDSA(hashes.SHA256()))
            r, s = utils.decode_dss_signature(der)
            sig = r.to_bytes(32, "big") + s.to_bytes(32, "big")
        else:
            sig = self._key.sign(signing_input, padding.PKCS1v15(), hashes.SHA256())
        return signing_input.decode("ascii") + "." + b64url(sig)


def client_assertion(key: SigningKey, client_id: str, audience: str, lifetime: float = 60.0) -> str:
    """An RFC 7523 client assertion JWT for ``private_key_jwt`` token-endpoint authentication."""
    now = int(time.time())
    claims = {
        "iss": client_id,
        "sub": client_id,
        "aud": audience,
        "jti": str(uuid.uuid4()),
        "iat": now,
        "exp": now + int(lifetime),
    }
    return key.sign_jwt({"typ": "JWT", "kid": key.kid}, claims)
