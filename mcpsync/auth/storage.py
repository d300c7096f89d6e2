"""Where OAuth tokens and client credentials live.

:class:`TokenStore` is the interface; :class:`KeyringTokenStore` (the default) keeps everything
in the OS credential store through ``keyring`` (macOS Keychain, Windows Credential Manager,
the Linux Secret Service); :class:`MemoryTokenStore` keeps it in process memory, for tests.

Layout in the keyring: one entry set per MCP server, never shared between servers::

    service "mcpsync-oauth:<canonical server URL>"   username "tokens"  → the TokenSet (JSON)
    service "mcpsync-oauth-client:<issuer>"           username "client"  → the ClientInfo (JSON)

Client credentials are keyed by the authorization server's issuer (a client id is only
meaningful at the server that issued it). No token or secret is ever written to a plain file,
a log line, an exception message or a ``repr``.

Concurrency: the keyring store reads and writes one entry at a time per key, within a process
(a lock per key) and across processes (an advisory ``flock`` on an empty lock file per key, see
:func:`key_lock`), and retries a failed operation once before it raises. On the Linux Secret Service
it keeps one D-Bus connection per process (:mod:`._secret_service` says why). :func:`key_lock` also
makes a token renewal single-flight across OAuth objects and processes: the renewer holds the
server's ``renew`` lock while it asks the token endpoint and stores the answer; the others
wait, then find the new tokens in the store.

Example:
    >>> from mcpsync.auth import MemoryTokenStore, TokenSet
    >>> store = MemoryTokenStore()
    >>> store.save_tokens("https://mcp.example.com/mcp", TokenSet(access_token="s3cret"))
    >>> store.load_tokens("https://mcp.example.com/mcp")
    TokenSet(token_type='Bearer', expires_at=None, scope=None, refresh_token=None)
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import logging
import os
import stat
import tempfile
import threading
import time
from dataclasses import asdict, dataclass, field
from typing import Any, Iterator, Protocol, runtime_checkable

from .._errors import AuthError

try:
    import fcntl
except ImportError:  # Windows: in-process locks only
    fcntl = None  # type: ignore[assignment]

__all__ = [
    "TokenSet",
    "ClientInfo",
    "TokenStore",
    "MemoryTokenStore",
    "KeyringTokenStore",
    "default_store",
    "key_lock",
]

log = logging.getLogger("mcpsync.auth")

#: How long a store operation waits for another thread or process working on the same key.
LOCK_TIMEOUT = 10.0
#: The pause before the one retry of a failed keyring operation.
RETRY_PAUSE = 0.05

_TOKEN_SERVICE = "mcpsync-oauth:"
_CLIENT_SERVICE = "mcpsync-oauth-client:"


@dataclass(frozen=True, slots=True)
class TokenSet:
    """The tokens issued for one MCP server.

    Attributes:
        access_token: the access token (never shown by ``repr``).
        token_type: ``Bearer`` or ``DPoP``.
        expires_at: wall-clock expiry (``time.time()`` seconds) or ``None`` if unknown.
        refresh_token: the refresh token, if one was issued (never shown by ``repr``).
        scope: the granted scopes, space separated, as the server reported them (or as asked).
        issuer: the issuer of the authorization server that minted them.
        resource: the RFC 8707 resource they were issued for.
        obtained_at: when they were obtained (``time.time()``).
    """

    access_token: str = field(repr=False)
    token_type: str = "Bearer"
    expires_at: float | None = None
    refresh_token: str | None = field(default=None, repr=False)
    scope: str | None = None
    issuer: str | None = field(default=None, repr=False, compare=False)
    resource: str | None = field(default=None, repr=False, compare=False)
    obtained_at: float = field(default_factory=time.time, repr=False, compare=False)

    def __repr__(self) -> str:
        # An explicit repr: tokens never appear, and ``refresh_token`` only says whether one exists.
        return (
            f"TokenSet(token_type={self.token_type!r}, expires_at={self.expires_at!r}, "
            f"scope={self.scope!r}, refresh_token={'<set>' if self.refresh_token else None})"
        )

    @property
    def scopes(self) -> frozenset[str]:
        """The granted scopes as a set."""
        return frozenset((self.scope or "").split())

    def expired(self, leeway: float = 0.0, now: float | None = None) -> bool:
        """Whether the access token is expired (or will be within ``leeway`` seconds)."""
        if self.expires_at is None:
            return False
        return (time.time() if now is None else now) + leeway >= self.expires_at

    def to_json(self) -> str:
        """Serialise (for a credential store only — the result holds the secrets)."""
        return json.dumps(asdict(self), separators=(",", ":"))

    @classmethod
    def from_json(cls, text: str) -> "TokenSet":
        data = json.loads(text)
        known = {k: data[k] for k in cls.__dataclass_fields__ if k in data}
        return cls(**known)


@dataclass(frozen=True, slots=True)
class ClientInfo:
    """An OAuth client registration at one authorization server.

    Attributes:
        client_id: the client identifier (a URL for Client ID Metadata Documents).
        client_secret: the secret of a confidential client (never shown by ``repr``).
        token_endpoint_auth_method: ``none``, ``client_secret_basic``, ``client_secret_post``
            or ``private_key_jwt``.
        redirect_uris: the redirect URIs registered (exact, port included).
        issuer: the issuer the registration belongs to.
        client_secret_expires_at: 0 or ``None`` for never, else epoch seconds.
        source: how it was obtained: ``preregistered``, ``metadata_document`` or ``dynamic``.
    """

    client_id: str
    client_secret: str | None = field(default=None, repr=False)
    token_endpoint_auth_method: str = "none"
    redirect_uris: tuple[str, ...] = ()
    issuer: str | None = None
    client_secret_expires_at: float | None = None
    source: str = "preregistered"

    def __repr__(self) -> str:
        return (
            f"ClientInfo(client_id={self.client_id!r}, token_endpoint_auth_method="
            f"{self.token_endpoint_auth_method!r}, redirect_uris={self.redirect_uris!r}, "
            f"issuer={self.issuer!r}, source={self.source!r}, "
            f"client_secret={'<set>' if self.client_secret else None})"
        )

    def secret_expired(self, now: float | None = None) -> bool:
        if not self.client_secret_expires_at:
            return False
        return (time.time() if now is None else now) >= self.client_secret_expires_at

    def to_json(self) -> str:
        data = asdict(self)
        data["redirect_uris"] = list(self.redirect_uris)
        return json.dumps(data, separators=(",", ":"))

    @classmethod
    def from_json(cls, text: str) -> "ClientInfo":
        data = json.loads(text)
        known = {k: data[k] for k in cls.__dataclass_fields__ if k in data}
        known["redirect_uris"] = tuple(known.get("redirect_uris") or ())
        return cls(**known)


@runtime_checkable
class TokenStore(Protocol):
    """Persists token sets per MCP server and client registrations per issuer.

    Implementations must be thread-safe and must never write secrets anywhere but a credential
    store (no plain files, no logs). An optional class attribute ``across_processes`` (default
    True) says whether other processes see the same entries; OAuth then makes token renewals
    single-flight across processes too.
    """

    def load_tokens(self, server: str) -> TokenSet | None: ...

    def save_tokens(self, server: str, tokens: TokenSet) -> None: ...

    def delete_tokens(self, server: str) -> None: ...

    def load_client(self, issuer: str) -> ClientInfo | None: ...

    def save_client(self, issuer: str, client: ClientInfo) -> None: ...

    def delete_client(self, issuer: str) -> None: ...


class MemoryTokenStore:
    """A :class:`TokenStore` in process memory (tests, short-lived processes).

    Example:
        >>> store = MemoryTokenStore()
        >>> store.load_client("https://auth.example.com") is None
        True
    """

    #: Seen by this process only: its renewals need no lock across processes.
    across_processes = False

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._tokens: dict[str, TokenSet] = {}
        self._clients: dict[str, ClientInfo] = {}

    def __repr__(self) -> str:
        with self._lock:
            return f"MemoryTokenStore(servers={len(self._tokens)}, clients={len(self._clients)})"

    def load_tokens(self, server: str) -> TokenSet | None:
        with self._lock:
            return self._tokens.get(server)

    def save_tokens(self, server: str, tokens: TokenSet) -> None:
        with self._lock:
            self._tokens[server] = tokens

    def delete_tokens(self, server: str) -> None:
        with self._lock:
            self._tokens.pop(server, None)

    def load_client(self, issuer: str) -> ClientInfo | None:
        with self._lock:
            return self._clients.get(issuer)

    def save_client(self, issuer: str, client: ClientInfo) -> None:
        with self._lock:
            self._clients[issuer] = client

    def delete_client(self, issuer: str) -> None:
        with self._lock:
            self._clients.pop(issuer, None)

    def servers(self) -> list[str]:
        """The servers that have tokens (for tests)."""
        with self._lock:
            return list(self._tokens)


_key_locks: dict[str, threading.Lock] = {}
_key_locks_guard = threading.Lock()
_lock_dir: str | None = None
_lock_dir_checked = False


_OPEN_FLAGS = os.O_RDWR | os.O_CREAT | getattr(os, "O_CLOEXEC", 0) | getattr(os, "O_NOFOLLOW", 0)


def _forget_locks_after_fork() -> None:
    # A forked child has only the forking thread: locks other threads held stay held for
    # ever in the child's copy, so it starts afresh.
    global _key_locks, _key_locks_guard
    _key_locks, _key_locks_guard = {}, threading.Lock()


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_forget_locks_after_fork)


def _thread_lock(key: str) -> threading.Lock:
    with _key_locks_guard:
        lock = _key_locks.get(key)
        if lock is None:
            lock = _key_locks[key] = threading.Lock()
        return lock


def _private_dir(path: str) -> bool:
    """``path`` is (made) a real directory owned by this user and closed to others."""
    try:
        os.makedirs(path, mode=0o700, exist_ok=True)
        st = os.lstat(path)
    except OSError:
        return False
    return stat.S_ISDIR(st.st_mode) and st.st_uid == os.getuid() and not st.st_mode & 0o077


def _locks_dir() -> str | None:
    """Where the cross-process lock files live: ``$XDG_RUNTIME_DIR/mcpsync/locks`` (per user,
    on tmpfs, removed at logout), else ``<tmp>/mcpsync-<uid>/locks``; None if neither is a
    private directory of this user (then only threads are serialised)."""
    global _lock_dir, _lock_dir_checked
    with _key_locks_guard:
        if _lock_dir_checked:
            return _lock_dir
        found = None
        if fcntl is not None and hasattr(os, "getuid"):
            runtime = os.environ.get("XDG_RUNTIME_DIR")
            bases = [os.path.join(runtime, "mcpsync")] if runtime and os.path.isabs(runtime) else []
            bases.append(os.path.join(tempfile.gettempdir(), f"mcpsync-{os.getuid()}"))
            for base in bases:
                if _private_dir(base) and _private_dir(os.path.join(base, "locks")):
                    found = os.path.join(base, "locks")
                    break
        _lock_dir, _lock_dir_checked = found, True
        return found


@contextlib.contextmanager
def key_lock(
    key: str, *, timeout: float = LOCK_TIMEOUT, shared: bool = False, processes: bool = True
) -> Iterator[bool]:
    """Hold ``key`` against the other threads of this process and, where ``fcntl.flock``
    exists, against other processes of this user.

    The cross-process part is an advisory lock on an empty file named by a hash of the key (no
    URL, token or secret is written anywhere), in a private per-user directory (see
    ``_locks_dir``). Waits are bounded: after ``timeout`` seconds the caller goes on without
    the lock (yielding False) rather than hang behind a stuck process.

    Args:
        key: what to serialise on, e.g. ``"keyring:<service>"`` or ``"renew:<server>"``.
        timeout: the longest wait, in seconds.
        shared: a reader's lock across processes (writers exclude readers; readers share).
            Threads of one process always take turns.
        processes: also lock against other processes (False: a store only this process
            sees, such as :class:`MemoryTokenStore`).

    Yields:
        True if the lock is held, False if the wait timed out.
    """
    deadline = time.monotonic() + timeout
    lock = _thread_lock(key)
    if not lock.acquire(timeout=max(timeout, 0.0)):
        log.warning("waited %.0f s for another thread using the token store; going on", timeout)
        yield False
        return
    fd = -1
    try:
        folder = _locks_dir() if processes else None
        if folder is not None:
            name = hashlib.sha256(key.encode("utf-8", "surrogatepass")).hexdigest()[:40] + ".lock"
            try:
                fd = os.open(os.path.join(folder, name), _OPEN_FLAGS, 0o600)
            except OSError:
                log.debug("no lock file for the token store; serialising threads only", exc_info=True)
        if fd >= 0 and not _flock(fd, shared, deadline):
            log.warning("waited %.0f s for another process using the token store; going on", timeout)
            yield False
        else:
            yield True
    finally:
        if fd >= 0:
            os.close(fd)  # releases the flock
        lock.release()


def _flock(fd: int, shared: bool, deadline: float) -> bool:
    """``flock`` with a deadline (polling with ``LOCK_NB``: flock itself has no timeout)."""
    mode = (fcntl.LOCK_SH if shared else fcntl.LOCK_EX) | fcntl.LOCK_NB
    pause = 0.002
    while True:
        try:
            fcntl.flock(fd, mode)
            return True
        except BlockingIOError:
            pass
        except OSError:
            log.debug("flock on the token store's lock file failed; threads only", exc_info=True)
            return True  # e.g. a filesystem without locks: serialise threads only
        remaining = deadline - time.monotonic()
        if remaining <= 0:
            return False
        time.sleep(min(pause, remaining))
        pause = min(pause * 2, 0.05)


def _insecure_backend(backend: Any) -> bool:
    """A keyring backend that is not an OS credential store (plaintext files, the null backend)."""
    cls = type(backend)
    module = cls.__module__
    name = cls.__name__.lower()
    if module.startswith("keyrings.alt") or "plaintext" in name or "file" in module.rsplit(".", 1)[-1]:
        return True
    if module == "keyring.backends.fail" or module == "keyring.backends.null":
        return True
    # A chainer whose only members are insecure is insecure too.
    members = getattr(backend, "backends", None)
    if module == "keyring.backends.chainer" and members is not None:
        return not members or all(_insecure_backend(b) for b in members)
    return False


class KeyringTokenStore:
    """A :class:`TokenStore` in the OS credential store, through ``keyring`` (the default).

    ``keyring`` is an optional extra (``pip install mcpsync[keyring]``), imported on first use.
    A backend that is not an OS credential store (the fail backend, plaintext files) is refused
    with :class:`~mcpsync.AuthError` rather than silently used.

    Args:
        backend: a ``keyring.backend.KeyringBackend`` to use instead of the active one.
        namespace: prefix of the keyring service names (default ``mcpsync-oauth``).

    Example:
        >>> store = KeyringTokenStore()          # doctest: +SKIP
        >>> store.save_tokens("https://mcp.example.com/mcp", tokens)   # doctest: +SKIP
    """

    #: Shared by every process of the user: renewals are single-flight across processes.
    across_processes = True

    def __init__(self, backend: Any = None, *, namespace: str = "mcpsync-oauth") -> None:
        self._backend = backend
        self._token_service = namespace + ":"
        self._client_service = namespace + "-client:"
        self._ops: Any = None  # what reads and writes, once checked: the backend, or the shared Secret Service link
        self._lock = threading.Lock()

    def __repr__(self) -> str:
        return f"KeyringTokenStore(backend={type(self._backend).__name__ if self._backend else 'default'})"

    def _kr(self) -> Any:
        with self._lock:
            if self._ops is not None:
                return self._ops
            backend = self._backend
            if backend is None:
                try:
                    import keyring  # optional extra, imported lazily
                except ImportError as exc:
                    raise AuthError(
                        "the keyring token store needs the 'keyring' package: pip install mcpsync[keyring]"
                    ) from exc
                try:
                    backend = keyring.get_keyring()
                except Exception as exc:  # keyring raises plain exceptions when a backend is misnamed
                    raise AuthError(f"no usable OS credential store: {type(exc).__name__}") from exc
            if _insecure_backend(backend):
                raise AuthError(
                    f"no OS credential store available (keyring backend {type(backend).__module__}."
                    f"{type(backend).__name__} is not one); pass another TokenStore"
                )
            self._backend = backend
            ops = backend
            if type(backend).__module__ == "keyring.backends.SecretService" and type(backend).__name__ == "Keyring":
                from ._secret_service import shared_secret_service

                ops = shared_secret_service(backend)  # one connection per process, see there
            self._ops = ops
            return ops

    def _call(self, what: str, service: str, op: Any, *, shared: bool = False) -> Any:
        """Run ``op(backend)`` holding the key (see :func:`key_lock`); a failure is retried
        once (after ``RETRY_PAUSE``) before it surfaces as :class:`AuthError`, except a
        locked keyring (retrying would prompt the user again)."""
        backend = self._kr()
        name = ""
        with key_lock("keyring:" + service, shared=shared):
            for attempt in (1, 2):
                try:
                    return op(backend)
                except Exception as exc:
                    name = type(exc).__name__
                if name == "PasswordDeleteError" and what == "deleting from":
                    return None  # nothing to delete: done
                if attempt == 2 or name == "KeyringLocked":
                    break
                log.info("%s the OS credential store failed (%s); retrying once", what, name)
                time.sleep(RETRY_PAUSE)
        # Raised outside the handler, chained to nothing: the keyring's exception may quote
        # the value being written.
        raise AuthError(f"{what} the OS credential store failed: {name}")

    def _get(self, service: str, username: str) -> str | None:
        value = self._call("reading", service, lambda b: b.get_password(service, username), shared=True)
        return value if isinstance(value, str) else None

    def _set(self, service: str, username: str, value: str) -> None:
        self._call("writing", service, lambda b: b.set_password(service, username, value))

    def _delete(self, service: str, username: str) -> None:
        self._call("deleting from", service, lambda b: b.delete_password(service, username))

    def load_tokens(self, server: str) -> TokenSet | None:
        text = self._get(self._token_service + server, "tokens")
        if not text:
            return None
        try:
            return TokenSet.from_json(text)
        except (ValueError, TypeError):
            return None

    def save_tokens(self, server: str, tokens: TokenSet) -> None:
        self._set(self._token_service + server, "tokens", tokens.to_json())

    def delete_tokens(self, server: str) -> None:
        self._delete(self._token_service + server, "tokens")

    def load_client(self, issuer: str) -> ClientInfo | None:
        text = self._get(self._client_service + issuer, "client")
        if not text:
            return None
        try:
            return ClientInfo.from_json(text)
        except (ValueError, TypeError):
            return None

    def save_client(self, issuer: str, client: ClientInfo) -> None:
        self._set(self._client_service + issuer, "client", client.to_json())

    def delete_client(self, issuer: str) -> None:
        self._delete(self._client_service + issuer, "client")


def default_store() -> TokenStore:
    """The default store: the OS credential store via ``keyring``."""
    return KeyringTokenStore()

