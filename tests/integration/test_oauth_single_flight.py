"""Token renewal is single-flight (issue 16, symptom 16), against Authlib's authorization
server (tests/servers/auth_authlib_server.py, which counts its token requests): the threads
of one OAuth object, several OAuth objects sharing a store, and several processes sharing
the real OS keyring all renew an expired token with one token request, and all use its result.
"""

from __future__ import annotations

import hashlib
import os
import subprocess
import sys
import threading
import time
import uuid

import pytest
import requests

from mcpsync.auth import ClientCredentials, KeyringTokenStore, MemoryTokenStore, OAuth, TokenSet
from tests.conftest import PYTHON
from tests.integration.test_oauth_authlib import authlib_server

pytest.importorskip("authlib")
pytest.importorskip("flask")
pytestmark = pytest.mark.timeout(120)

needs_keyring = pytest.mark.skipif(
    os.environ.get("PYTHON_KEYRING_BACKEND") != "keyring.backends.SecretService.Keyring",
    reason="needs the gnome-keyring Secret Service (tests/setup/with-keyring.sh)",
)

MACHINE = ClientCredentials(client_id="machine-basic", client_secret="machine-secret",
                            auth_method="client_secret_basic")


def token_requests(urls: dict[str, str]) -> int:
    return int(requests.get(urls["as"] + "/token/requests", timeout=5).json()["count"])


def stale(urls: dict[str, str]) -> TokenSet:
    """Tokens that expired a minute ago: every user of the store must renew them."""
    return TokenSet(access_token="stale-" + uuid.uuid4().hex, expires_at=time.time() - 60,
                    obtained_at=time.time() - 3660, issuer=urls["as"], resource=urls["mcp"])


def run_together(n: int, work) -> list[object]:
    """``work(i)`` on ``n`` threads released at once; returns results (or exceptions)."""
    barrier = threading.Barrier(n)
    results: list[object] = [None] * n

    def run(i: int) -> None:
        try:
            barrier.wait(10)
            results[i] = work(i)
        except BaseException as exc:  # noqa: BLE001 - asserted by the caller
            results[i] = exc

    threads = [threading.Thread(target=run, args=(i,), daemon=True) for i in range(n)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)
    assert not any(t.is_alive() for t in threads)
    return results


def test_threads_of_one_oauth_object_renew_once() -> None:
    with authlib_server() as urls:
        store = MemoryTokenStore()
        store.save_tokens(urls["mcp"], stale(urls))
        with OAuth(urls["mcp"], MACHINE, storage=store) as auth:
            before = token_requests(urls)
            got = run_together(16, lambda i: auth.get_valid_token())
        assert token_requests(urls) - before == 1
        assert len(set(got)) == 1 and isinstance(got[0], str) and not got[0].startswith("stale-")


def test_oauth_objects_sharing_a_store_renew_once() -> None:
    """Eight clients of one server in one process (each its own OAuth object, one store)."""
    with authlib_server() as urls:
        store = MemoryTokenStore()
        store.save_tokens(urls["mcp"], stale(urls))
        auths = [OAuth(urls["mcp"], MACHINE, storage=store) for _ in range(8)]
        try:
            before = token_requests(urls)
            got = run_together(8, lambda i: auths[i].get_valid_token())
        finally:
            for auth in auths:
                auth.close()
        # before the fix: 8 token requests, 8 writes, each object with its own token
        assert token_requests(urls) - before == 1, f"{len(set(got))} different tokens"
        assert len(set(got)) == 1 and isinstance(got[0], str)
        assert store.load_tokens(urls["mcp"]).access_token == got[0]


CHILD = r"""
import hashlib, sys
from mcpsync.auth import ClientCredentials, KeyringTokenStore, OAuth
url = sys.argv[1]
print("READY", flush=True)
sys.stdin.readline()  # the parent releases every child at once
grant = ClientCredentials(client_id="machine-basic", client_secret="machine-secret", auth_method="client_secret_basic")
with OAuth(url, grant, storage=KeyringTokenStore()) as auth:
    token = auth.get_valid_token()
print("TOKEN", hashlib.sha256(token.encode()).hexdigest(), flush=True)
"""


@needs_keyring
def test_processes_sharing_the_os_keyring_renew_once() -> None:
    with authlib_server() as urls:
        store = KeyringTokenStore()
        store.save_tokens(urls["mcp"], stale(urls))
        env = {**os.environ, "PYTHONPATH": os.pathsep.join(p for p in (os.getcwd(), os.environ.get("PYTHONPATH")) if p)}
        children = [
            subprocess.Popen([PYTHON, "-c", CHILD, urls["mcp"]], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                             stderr=subprocess.PIPE, text=True, env=env)
            for _ in range(4)
        ]
        try:
            for child in children:
                assert child.stdout.readline().strip() == "READY", child.stderr.read()
            before = token_requests(urls)
            for child in children:
                child.stdin.write("go\n")
                child.stdin.flush()
            outs = [child.communicate(timeout=60) for child in children]
            assert all(child.returncode == 0 for child in children), [err[-2000:] for _, err in outs]
            hashes = {out.split()[-1] for out, _ in outs}
            # before the fix: four token requests, four writes racing in the keyring
            assert token_requests(urls) - before == 1
            assert len(hashes) == 1
            assert hashlib.sha256(store.load_tokens(urls["mcp"]).access_token.encode()).hexdigest() in hashes
        finally:
            for child in children:
                if child.poll() is None:
                    child.kill()
                    child.wait(5)
            store.delete_tokens(urls["mcp"])
