"""Trust and client certificates: the one place an HTTP client's TLS context is made.

Both HTTP paths (the fast one and urllib3's) and the OAuth requests take the
:class:`ssl.SSLContext` that :func:`tls_context` makes from the ``verify`` and ``cert``
options, so that every request of a client trusts the same authorities and shows the
same certificate.

``verify`` is

* ``True`` (the default): the CA bundle named by the environment as requests reads it
  (``REQUESTS_CA_BUNDLE``, then ``CURL_CA_BUNDLE``), then OpenSSL's variables
  (``SSL_CERT_FILE``, ``SSL_CERT_DIR``); without any of them certifi's bundle;
* ``False``: nothing is checked (the connection is encrypted, not authenticated);
* ``"system"``: the operating system's trust store (where corporate CAs are installed),
  through the ``truststore`` package (``pip install 'mcpsync[truststore]'``);
* a path: a CA bundle file, or a directory of CA certificates (``c_rehash`` layout);
* an :class:`ssl.SSLContext`: used as it is.

``cert`` is a client certificate as requests spells it: the path of one PEM file holding
the certificate and its key, or a ``(certfile, keyfile)`` pair.

Example:
    >>> context = tls_context(False)
    >>> context.verify_mode == ssl.CERT_NONE
    True
    >>> check_tls("no/such/bundle.pem", None)
    Traceback (most recent call last):
    ...
    ValueError: verify='no/such/bundle.pem': no such CA bundle file or directory
"""

from __future__ import annotations

import importlib.util
import os
import ssl
from typing import Any, Union

__all__ = ["Cert", "Verify", "check_tls", "environment_ca", "refusal", "tls_context"]

#: what ``verify=`` takes
Verify = Union[bool, str, ssl.SSLContext]
#: what ``cert=`` takes (a list, as a configuration file gives it, is read as a pair)
Cert = Union[str, "tuple[str, str]", None]

#: the variables that name a CA bundle for ``verify=True``, in the order they are read
CA_VARIABLES = ("REQUESTS_CA_BUNDLE", "CURL_CA_BUNDLE", "SSL_CERT_FILE", "SSL_CERT_DIR")

SYSTEM = "system"


def environment_ca() -> tuple[str, str] | None:
    """(variable, path) of the CA bundle the environment names for ``verify=True``, or None."""
    for name in CA_VARIABLES:
        value = os.environ.get(name, "").strip()
        if value:
            return name, value
    return None


def check_tls(verify: Any, cert: Any) -> tuple[Verify, tuple[str, str | None] | None]:
    """``verify`` and ``cert`` checked, ``cert`` as ``(certfile, keyfile or None)``.

    Raises:
        TypeError: an option of the wrong type.
        ValueError: a file or directory that does not exist, a client certificate beside
            an :class:`ssl.SSLContext` (load it into the context instead).
        ImportError: ``verify="system"`` without the ``truststore`` package.
    """
    if not isinstance(verify, (bool, str, ssl.SSLContext)):
        raise TypeError(f"verify= takes True, False, 'system', a CA bundle path or an ssl.SSLContext, not {type(verify).__name__}")
    if verify == SYSTEM:
        if importlib.util.find_spec("truststore") is None:
            raise ImportError("verify='system' reads the operating system's trust store through truststore: "
                              "pip install 'mcpsync[truststore]'")
    elif isinstance(verify, str) and not os.path.exists(verify):
        raise ValueError(f"verify={verify!r}: no such CA bundle file or directory")
    elif verify is True:
        named = environment_ca()
        if named is not None and not os.path.exists(named[1]):
            raise ValueError(f"{named[0]}={named[1]!r}: no such CA bundle file or directory")
    if cert is None:
        return verify, None
    if isinstance(verify, ssl.SSLContext):
        raise ValueError("cert= beside an ssl.SSLContext: load the certificate into the context "
                         "(context.load_cert_chain(certfile, keyfile)) instead")
    if isinstance(cert, (str, os.PathLike)):
        pair: tuple[str, str | None] = (os.fspath(cert), None)
    elif isinstance(cert, (tuple, list)) and len(cert) == 2 and all(isinstance(p, (str, os.PathLike)) for p in cert):
        pair = (os.fspath(cert[0]), os.fspath(cert[1]))
    else:
        raise TypeError("cert= takes the path of a PEM file with the certificate and its key, or (certfile, keyfile)")
    for path in pair:
        if path is not None and not os.path.isfile(path):
            raise ValueError(f"cert: no such file {path!r}")
    return verify, pair


def tls_context(verify: Verify, cert: tuple[str, str | None] | None = None) -> ssl.SSLContext:
    """The TLS context of a client's requests (see the module's docstring).

    ``verify`` and ``cert`` as :func:`check_tls` returns them. An
    :class:`ssl.SSLContext` is returned as it is.

    Raises:
        OSError, ssl.SSLError: a bundle or certificate that cannot be read.
    """
    if isinstance(verify, ssl.SSLContext):
        return verify
    if verify is False:
        context = ssl.create_default_context()
        context.check_hostname = False
        context.verify_mode = ssl.CERT_NONE
    elif verify == SYSTEM:
        import truststore

        context = truststore.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
    else:
        where: str | None = verify if isinstance(verify, str) else None
        if where is None:
            named = environment_ca()
            where = named[1] if named is not None else _certifi()
        if where is None:  # pragma: no cover - certifi ships with requests
            context = ssl.create_default_context()
        elif os.path.isdir(where):
            context = ssl.create_default_context(capath=where)
        else:
            context = ssl.create_default_context(cafile=where)
    if cert is not None:
        context.load_cert_chain(cert[0], cert[1])
    return context


def _certifi() -> str | None:
    try:
        import certifi
    except ImportError:  # pragma: no cover - certifi ships with requests
        return None
    return str(certifi.where())


#: OpenSSL's names of the alerts a server sends when its side of the handshake fails over
#: the client's certificate, and what each says. In TLS 1.3 they arrive after the client
#: has finished its side and written the request: the server never read it.
_REFUSALS = {
    "TLSV13_ALERT_CERTIFICATE_REQUIRED": "the server requires a client certificate (cert=)",
    "SSLV3_ALERT_BAD_CERTIFICATE": "the server refused the client certificate",
    "SSLV3_ALERT_CERTIFICATE_UNKNOWN": "the server refused the client certificate",
    "SSLV3_ALERT_UNSUPPORTED_CERTIFICATE": "the server refused the client certificate",
    "SSLV3_ALERT_CERTIFICATE_EXPIRED": "the server refused the client certificate as expired",
    "SSLV3_ALERT_CERTIFICATE_REVOKED": "the server refused the client certificate as revoked",
    "TLSV1_ALERT_UNKNOWN_CA": "the server does not trust the client certificate's CA",
    "TLSV1_ALERT_ACCESS_DENIED": "the server denied access to the client certificate",
}


def refusal(exc: BaseException | None) -> str | None:
    """What a TLS alert in ``exc`` (or what it wraps) says of a handshake the server refused
    over the client's certificate; None when ``exc`` holds no such alert.

    Example:
        >>> err = ssl.SSLError(1, "[SSL: TLSV13_ALERT_CERTIFICATE_REQUIRED] tlsv13 alert certificate required")
        >>> err.reason = "TLSV13_ALERT_CERTIFICATE_REQUIRED"
        >>> refusal(err)
        'the server requires a client certificate (cert=)'
    """
    seen = 0
    while exc is not None and seen < 8:  # urllib3 wraps it: MaxRetryError(reason=SSLError(ssl.SSLError))
        seen += 1
        if isinstance(exc, ssl.SSLError):
            said = _REFUSALS.get(getattr(exc, "reason", None) or "")
            if said is not None:
                return said
        inner = getattr(exc, "reason", None)
        if not isinstance(inner, BaseException):
            inner = next((a for a in getattr(exc, "args", ()) if isinstance(a, BaseException)), None)
        exc = inner if inner is not None else (exc.__cause__ or exc.__context__)
    return None
