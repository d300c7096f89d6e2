"""A private certificate authority made at test time (``cryptography``): the CA, a server
certificate for 127.0.0.1 / localhost and a client certificate, as PEM files. Not a test
module.

Example:
    pki = make_pki(tmp_path)
    pki.ca          # the CA's certificate (a bundle to trust)
    pki.server      # (certfile, keyfile) for 127.0.0.1 and localhost
    pki.client      # (certfile, keyfile) signed by the CA, for mTLS
    pki.client_pem  # certificate and key in one file
"""

from __future__ import annotations

import datetime
import ipaddress
from dataclasses import dataclass
from pathlib import Path

__all__ = ["PKI", "make_pki"]


@dataclass(frozen=True)
class PKI:
    ca: str
    server: tuple[str, str]
    client: tuple[str, str]
    client_pem: str
    ca_dir: str  # a directory holding the CA under its OpenSSL hash name (c_rehash layout)


def make_pki(where: Path) -> PKI:
    from cryptography import x509
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.hazmat.primitives.asymmetric import ec
    from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

    where.mkdir(parents=True, exist_ok=True)
    now = datetime.datetime.now(datetime.timezone.utc)

    def name(cn: str) -> x509.Name:
        return x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, cn)])

    def key_pem(key: ec.EllipticCurvePrivateKey) -> bytes:
        return key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption())

    ca_key = ec.generate_private_key(ec.SECP256R1())
    ca_cert = (
        x509.CertificateBuilder().subject_name(name("mcpsync test CA")).issuer_name(name("mcpsync test CA"))
        .public_key(ca_key.public_key()).serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(minutes=5)).not_valid_after(now + datetime.timedelta(days=2))
        .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
        .add_extension(x509.KeyUsage(digital_signature=True, key_cert_sign=True, crl_sign=True, content_commitment=False,
                                     key_encipherment=False, data_encipherment=False, key_agreement=False,
                                     encipher_only=False, decipher_only=False), critical=True)
        .add_extension(x509.SubjectKeyIdentifier.from_public_key(ca_key.public_key()), critical=False)
        .sign(ca_key, hashes.SHA256())
    )

    def leaf(cn: str, usage: x509.ObjectIdentifier, san: list[x509.GeneralName] | None) -> tuple[bytes, bytes]:
        key = ec.generate_private_key(ec.SECP256R1())
        builder = (
            x509.CertificateBuilder().subject_name(name(cn)).issuer_name(ca_cert.subject).public_key(key.public_key())
            .serial_number(x509.random_serial_number())
            .not_valid_before(now - datetime.timedelta(minutes=5)).not_valid_after(now + datetime.timedelta(days=1))
            .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
            .add_extension(x509.ExtendedKeyUsage([usage]), critical=False)
            .add_extension(x509.AuthorityKeyIdentifier.from_issuer_public_key(ca_key.public_key()), critical=False)
        )
        if san:
            builder = builder.add_extension(x509.SubjectAlternativeName(san), critical=False)
        cert = builder.sign(ca_key, hashes.SHA256())
        return cert.public_bytes(serialization.Encoding.PEM), key_pem(key)

    ca = where / "ca.pem"
    ca.write_bytes(ca_cert.public_bytes(serialization.Encoding.PEM))
    server_cert, server_key = leaf("127.0.0.1", ExtendedKeyUsageOID.SERVER_AUTH,
                                   [x509.IPAddress(ipaddress.ip_address("127.0.0.1")), x509.DNSName("localhost")])
    client_cert, client_key = leaf("mcpsync test client", ExtendedKeyUsageOID.CLIENT_AUTH, None)
    files = {}
    for label, data in (("server.pem", server_cert), ("server.key", server_key),
                        ("client.pem", client_cert), ("client.key", client_key), ("client-both.pem", client_cert + client_key)):
        path = where / label
        path.write_bytes(data)
        path.chmod(0o600)
        files[label] = str(path)
    ca_dir = where / "ca-dir"
    ca_dir.mkdir(exist_ok=True)
    (ca_dir / f"{_subject_hash(str(ca))}.0").write_bytes(ca.read_bytes())
    return PKI(str(ca), (files["server.pem"], files["server.key"]), (files["client.pem"], files["client.key"]),
               files["client-both.pem"], str(ca_dir))


def _subject_hash(cert: str) -> str:
    """OpenSSL's subject hash of ``cert`` (the file name a CA directory looks it up by)."""
    import subprocess

    out = subprocess.run(["openssl", "x509", "-noout", "-subject_hash", "-in", cert], check=True, capture_output=True,
                         text=True, timeout=30)
    return out.stdout.strip()
