"""Token stores: the in-memory one, and the keyring one against the real gnome-keyring Secret
Service (run under tests/setup/with-keyring.sh; skipped without it)."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import threading
import time
import uuid
from pathlib import Path

import pytest

from mcpsync._errors import AuthError
from mcpsync.auth import ClientInfo, KeyringTokenStore, MemoryTokenStore, TokenSet, TokenStore

SECRET = "at-" + "s3cr3t" * 4
REFRESH = "rt-" + "r3fr3sh" * 4

needs_keyring = pytest.mark.skipif(
    os.environ.get("PYTHON_KEYRING_BACKEND") != "keyring.backends.SecretService.Keyring",
    reason="needs the gnome-keyring Secret Service (tests/setup/with-keyring.sh)",
)


def tokens(**kw) -> TokenSet:
    base = dict(access_token=SECRET, refresh_token=REFRESH, expires_at=time.time() + 3600, scope="mcp offline_access",
                issuer="http://127.0.0.1:1", resource="http://127.0.0.1:1/mcp")
    base.update(kw)
    return TokenSet(**base)


def test_reprs_hide_secrets() -> None:
    t = tokens()
    c = ClientInfo("cid", "client-secret-value", "client_secret_basic", ("http://127.0.0.1:5/callback",), "iss")
    text = repr(t) + str(t) + repr(c) + str(c)
    assert SECRET not in text and REFRESH not in text and "client-secret-value" not in text
    assert "refresh_token=<set>" in repr(t) and "client_secret=<set>" in repr(c)


def test_tokenset_roundtrip_and_expiry() -> None:
    t = tokens(expires_at=time.time() + 10)
    assert TokenSet.from_json(t.to_json()) == t
    assert not t.expired() and t.expired(leeway=20)
    assert TokenSet("x").expired() is False  # no expiry known
    assert t.scopes == {"mcp", "offline_access"}
    c = ClientInfo("cid", None, "none", ("a", "b"), "iss", None, "dynamic")
    assert ClientInfo.from_json(c.to_json()) == c


def test_memory_store_is_a_token_store_and_per_server() -> None:
    store = MemoryTokenStore()
    assert isinstance(store, TokenStore)
    store.save_tokens("http://a/mcp", tokens())
    store.save_tokens("http://b/mcp", tokens(access_token="other"))
    assert store.load_tokens("http://a/mcp").access_token == SECRET
    assert store.load_tokens("http://b/mcp").access_token == "other"
    store.delete_tokens("http://a/mcp")
    store.delete_tokens("http://a/mcp")  # idempotent
    assert store.load_tokens("http://a/mcp") is None and store.servers() == ["http://b/mcp"]
    store.save_client("iss", ClientInfo("cid"))
    assert store.load_client("iss").client_id == "cid"
    store.delete_client("iss")
    assert store.load_client("iss") is None


def test_memory_store_threads() -> None:
    store = MemoryTokenStore()

    def work(i: int) -> None:
        for j in range(200):
            store.save_tokens(f"s{i}", tokens(access_token=f"{i}-{j}"))
            assert store.load_tokens(f"s{i}").access_token.startswith(f"{i}-")

    threads = [threading.Thread(target=work, args=(i,)) for i in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=30)
    assert sorted(store.servers()) == sorted(f"s{i}" for i in range(8))


def test_keyring_store_refuses_plaintext_and_fail_backends() -> None:
    pytest.importorskip("keyring")
    from keyring.backends import fail

    with pytest.raises(AuthError, match="no OS credential store"):
        KeyringTokenStore(fail.Keyring()).save_tokens("http://a/mcp", tokens())
    try:
        from keyrings.alt.file import PlaintextKeyring  # type: ignore[import-not-found]
    except ImportError:
        return
    with pytest.raises(AuthError):
        KeyringTokenStore(PlaintextKeyring()).save_tokens("http://a/mcp", tokens())


def test_import_does_not_load_keyring() -> None:
    code = (
        "import sys, mcpsync, mcpsync.auth\n"
        "from mcpsync.auth import OAuth, KeyringTokenStore, MemoryTokenStore\n"
        "s = KeyringTokenStore()\n"
        "assert 'keyring' not in sys.modules, 'keyring imported eagerly'\n"
        "assert 'requests' not in sys.modules or 'mcpsync.auth.oauth' in sys.modules\n"
        "import mcpsync.auth.storage\n"
        "assert 'keyring' not in sys.modules\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr


def test_bare_import_mcpsync_auth_is_light() -> None:
    code = "import sys, mcpsync.auth; bad = [m for m in ('keyring', 'requests', 'cryptography') if m in sys.modules]; print(bad)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    # mcpsync itself may pull requests in through its transports; keyring and cryptography never.
    assert "keyring" not in out.stdout and "cryptography" not in out.stdout


@needs_keyring
def test_keyring_store_real_secret_service(tmp_path: Path) -> None:
    store = KeyringTokenStore()
    server = f"http://127.0.0.1:1/mcp-{uuid.uuid4().hex}"
    issuer = f"http://127.0.0.1:1/issuer-{uuid.uuid4().hex}"
    try:
        assert store.load_tokens(server) is None
        saved = tokens()
        store.save_tokens(server, saved)
        got = store.load_tokens(server)
        assert got == saved and got.access_token == SECRET and got.obtained_at == saved.obtained_at
        # One entry set per server: another server sees nothing.
        assert store.load_tokens(server + "-other") is None
        store.save_client(issuer, ClientInfo("cid", "client-secret-value", "client_secret_post", (), issuer))
        assert store.load_client(issuer).client_secret == "client-secret-value"

        # A second, independent reader of the Secret Service finds the entry where we said it is.
        if shutil.which("secret-tool"):
            out = subprocess.run(
                ["secret-tool", "lookup", "service", "mcpsync-oauth:" + server, "username", "tokens"],
                capture_output=True, text=True, timeout=30,
            )
            assert out.returncode == 0 and SECRET in out.stdout

        # And no plain file anywhere under the keyring's data directory holds the token.
        data_home = Path(os.environ.get("XDG_DATA_HOME", ""))
        if data_home.is_dir():
            for f in data_home.rglob("*"):
                if f.is_file():
                    assert SECRET.encode() not in f.read_bytes(), f

        # A fresh store object (another process, say) reads the same entry.
        assert KeyringTokenStore().load_tokens(server).refresh_token == REFRESH
        store.delete_tokens(server)
        store.delete_tokens(server)  # idempotent
        assert store.load_tokens(server) is None
    finally:
        store.delete_tokens(server)
        store.delete_client(issuer)


@needs_keyring
def test_keyring_store_from_another_process() -> None:
    server = f"http://127.0.0.1:1/mcp-{uuid.uuid4().hex}"
    store = KeyringTokenStore()
    try:
        store.save_tokens(server, tokens())
        code = (
            "import sys\nfrom mcpsync.auth import KeyringTokenStore\n"
            f"t = KeyringTokenStore().load_tokens({server!r})\n"
            "print(t.access_token == sys.argv[1], repr(t))\n"
        )
        out = subprocess.run([sys.executable, "-c", code, SECRET], capture_output=True, text=True, timeout=60)
        assert out.returncode == 0, out.stderr
        assert out.stdout.startswith("True") and SECRET not in out.stdout
    finally:
        store.delete_tokens(server)


@needs_keyring
def test_keyring_store_concurrent_threads() -> None:
    store = KeyringTokenStore()
    servers = [f"http://127.0.0.1:1/mcp-{uuid.uuid4().hex}" for _ in range(4)]
    errors: list[BaseException] = []

    def work(server: str) -> None:
        try:
            for j in range(4):
                store.save_tokens(server, tokens(access_token=f"{server}-{j}"))
                assert store.load_tokens(server).access_token == f"{server}-{j}"
        except BaseException as exc:  # reported below
            errors.append(exc)

    threads = [threading.Thread(target=work, args=(s,)) for s in servers]
    try:
        for t in threads:
            t.start()
        for t in threads:
            t.join(timeout=60)
        assert not errors
        assert [store.load_tokens(s).access_token for s in servers] == [f"{s}-3" for s in servers]
    finally:
        for s in servers:
            store.delete_tokens(s)
