"""The Linux Secret Service on one D-Bus connection per process.

keyring's Secret Service backend opens a D-Bus connection, negotiates a session and closes both
again for every read, write and delete. gnome-keyring-daemon (42 to 50 at least) has a race in
exactly that cycle when clients come and go at once: it loses track of a client that has just
left, fails an assertion and aborts (``gkd_secret_service_get_pkcs11_session: assertion 'client'
failed``, then GLib's ``invoke_get_property_in_idle_cb``), and every application's secrets are gone
until the daemon is started again, locked. A token store shared by many threads churns that cycle:
this project's own stress test took the daemon down about once in a dozen runs.

So when keyring chooses its Secret Service backend, :class:`~mcpsync.auth.KeyringTokenStore`
reaches the service through :class:`SharedSecretService`: one connection and one encrypted session
per process, opened at first use, used by one thread at a time (jeepney's blocking connection is
not thread-safe), dropped after any failure so the next attempt starts afresh (the daemon restarted,
the bus went away) and forgotten by a forked child. The entries are the ones keyring reads and
writes (keyring's own attributes, from the backend), so keyring and ``secret-tool`` find them.
"""

from __future__ import annotations

import os
import threading
from typing import Any, Callable, TypeVar

__all__ = ["SharedSecretService", "shared_secret_service"]

T = TypeVar("T")

_links: dict[str | None, SharedSecretService] = {}
_links_lock = threading.Lock()


class SharedSecretService:
    """``get_password``/``set_password``/``delete_password`` as keyring's Secret Service backend
    answers them, on one connection and session kept open between calls.

    Args:
        backend: keyring's ``keyring.backends.SecretService.Keyring``; its attributes, its
            preferred collection and its unlock rule are the ones used here.
    """

    def __init__(self, backend: Any) -> None:
        self._backend = backend
        self._lock = threading.Lock()
        self._collection: Any = None  # on its own connection (``.connection``), with its session

    def __repr__(self) -> str:
        return f"SharedSecretService(open={self._collection is not None})"

    def _attributes(self, service: str, username: str, **more: str) -> dict[str, str]:
        """The item's attributes as keyring's backend names them (its ``schemes``, ``scheme``)."""
        names = self._backend.schemes[self._backend.scheme]
        return {names["username"]: username, names["service"]: service, **more}

    def get_password(self, service: str, username: str) -> str | None:
        def op(collection: Any) -> str | None:
            for item in collection.search_items(self._attributes(service, username)):
                self._backend.unlock(item)
                return str(item.get_secret().decode("utf-8"))
            return None

        return self._run(op)

    def set_password(self, service: str, username: str, password: str) -> None:
        attributes = self._attributes(service, username, application=self._backend.appid)
        label = f"Password for '{username}' on '{service}'"
        self._run(lambda collection: collection.create_item(label, attributes, password, replace=True))

    def delete_password(self, service: str, username: str) -> None:
        def op(collection: Any) -> None:
            for item in collection.search_items(self._attributes(service, username)):
                item.delete()
                return
            from keyring.errors import PasswordDeleteError

            raise PasswordDeleteError("No such password!")

        self._run(op)

    def _run(self, op: Callable[[Any], T]) -> T:
        with self._lock:
            collection = self._open()
            try:
                return op(collection)
            except BaseException as exc:  # an interrupt may leave half a message on the socket
                if type(exc).__name__ != "PasswordDeleteError":  # an answer, not a failure
                    self._drop()
                raise

    def _open(self) -> Any:
        """The collection on the open connection, unlocked (the user is asked if it is locked,
        as keyring does), opening both first if need be."""
        import secretstorage
        from keyring.errors import InitError, KeyringLocked
        from secretstorage.util import open_session

        if self._collection is None:
            connection = secretstorage.dbus_init()
            try:
                path = getattr(self._backend, "preferred_collection", None)
                # One session for the connection's life: an item found by a search carries the
                # collection's, so no read opens (and leaves behind) a session of its own.
                session = open_session(connection)
                if path is not None:
                    collection = secretstorage.Collection(connection, path, session)
                else:
                    collection = secretstorage.get_default_collection(connection, session)
            except BaseException as exc:
                connection.close()
                if isinstance(exc, secretstorage.exceptions.SecretStorageException):
                    raise InitError(f"Failed to open the collection: {type(exc).__name__}") from None
                raise
            self._collection = collection
        collection = self._collection
        try:
            if collection.is_locked():
                collection.unlock()
                if collection.is_locked():  # the user dismissed the prompt
                    raise KeyringLocked("Failed to unlock the collection!")
        except BaseException:
            self._drop()
            raise
        return collection

    def _drop(self) -> None:
        collection, self._collection = self._collection, None
        if collection is not None:
            try:
                collection.connection.close()
            except OSError:
                pass


def shared_secret_service(backend: Any) -> SharedSecretService:
    """The process's :class:`SharedSecretService` for keyring's Secret Service ``backend``
    (one per preferred collection)."""
    key = getattr(backend, "preferred_collection", None)
    with _links_lock:
        link = _links.get(key)
        if link is None:
            link = _links[key] = SharedSecretService(backend)
        return link


def _after_fork_in_child() -> None:
    # The parent's connection is the parent's: a child that used it would interleave its
    # messages with the parent's on one socket. A lock held by a parent thread at the fork
    # would never be released here.
    global _links_lock
    _links_lock = threading.Lock()
    for link in list(_links.values()):
        link._lock = threading.Lock()
        link._drop()


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_after_fork_in_child)
