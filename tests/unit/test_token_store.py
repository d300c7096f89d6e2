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


# -- concurrency: per-key locks, the retry, the stress of many threads and processes -------------


class FlakyBackend:
    """A keyring backend (pure logic, a dict) whose next ``failures`` calls raise ``error``."""

    def __init__(self, failures: int = 0, error: type[Exception] | None = None) -> None:
        self.data: dict[tuple[str, str], str] = {}
        self.failures = failures
        self.error = error or type("ItemNotFoundException", (Exception,), {})
        self.calls = 0

    def _maybe_fail(self) -> None:
        self.calls += 1
        if self.failures > 0:
            self.failures -= 1
            raise self.error("failed, and the message quotes " + SECRET)

    def get_password(self, service: str, username: str) -> str | None:
        self._maybe_fail()
        return self.data.get((service, username))

    def set_password(self, service: str, username: str, password: str) -> None:
        self._maybe_fail()
        self.data[(service, username)] = password

    def delete_password(self, service: str, username: str) -> None:
        self._maybe_fail()
        self.data.pop((service, username), None)


def test_a_store_error_is_retried_once_then_surfaces_without_the_secret() -> None:
    backend = FlakyBackend(failures=1)
    store = KeyringTokenStore(backend)
    store.save_tokens("http://a/mcp", tokens())  # the first attempt fails, the retry succeeds
    assert backend.calls == 2 and store.load_tokens("http://a/mcp").access_token == SECRET
    backend.failures, backend.calls = 2, 0
    with pytest.raises(AuthError, match="writing the OS credential store failed: ItemNotFoundException") as info:
        store.save_tokens("http://a/mcp", tokens(access_token="next"))
    assert backend.calls == 2
    assert SECRET not in str(info.value) and info.value.__cause__ is None and info.value.__context__ is None
    backend.failures = 1
    assert store.load_tokens("http://a/mcp").access_token == SECRET  # reads are retried too


def test_a_locked_keyring_is_not_retried() -> None:
    backend = FlakyBackend(failures=5, error=type("KeyringLocked", (Exception,), {}))
    with pytest.raises(AuthError, match="KeyringLocked"):
        KeyringTokenStore(backend).save_tokens("http://a/mcp", tokens())
    assert backend.calls == 1  # a retry would prompt the user a second time


def test_writes_of_one_key_never_overlap_across_threads() -> None:
    inside = [0]
    overlaps = [0]
    guard = threading.Lock()

    class Watching(FlakyBackend):
        def set_password(self, service: str, username: str, password: str) -> None:
            with guard:
                inside[0] += 1
                overlaps[0] += inside[0] > 1
            time.sleep(0.001)  # a write that takes a little while, as a D-Bus round trip does
            super().set_password(service, username, password)
            with guard:
                inside[0] -= 1

    store = KeyringTokenStore(Watching())

    def work(i: int) -> None:
        for j in range(20):
            store.save_tokens("http://a/mcp", tokens(access_token=f"{i}-{j}"))

    threads = [threading.Thread(target=work, args=(i,)) for i in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=60)
    assert overlaps[0] == 0


LOCK_HOLDER = r"""
import sys
from mcpsync.auth.storage import key_lock
with key_lock(sys.argv[1]) as held:
    print("HELD" if held else "NOT", flush=True)
    sys.stdin.readline()
"""


def test_key_lock_excludes_another_process() -> None:
    from mcpsync.auth.storage import _locks_dir, key_lock

    if _locks_dir() is None:
        pytest.skip("no private lock directory (or no fcntl) here")
    key = f"test:{uuid.uuid4().hex}"
    child = subprocess.Popen([sys.executable, "-c", LOCK_HOLDER, key], stdin=subprocess.PIPE,
                             stdout=subprocess.PIPE, text=True, env={**os.environ, "PYTHONPATH": os.getcwd()})
    try:
        assert child.stdout.readline().strip() == "HELD"
        with key_lock(key, timeout=0.2) as held:
            assert held is False  # the other process holds it: a bounded wait, then on without it
        with key_lock(key, timeout=0.2, shared=True) as held:
            assert held is False  # a reader waits for a writer too
        with key_lock("other:" + key, timeout=0.2) as held:
            assert held is True  # other keys are not held up
        child.stdin.write("\n")
        child.stdin.flush()
        assert child.wait(10) == 0
        with key_lock(key, timeout=5) as held:
            assert held is True
    finally:
        if child.poll() is None:
            child.kill()
            child.wait(5)


@pytest.fixture()
def busy_cpu():
    """The other CPU busy for the test's duration (the failure was seen on a loaded machine)."""
    proc = subprocess.Popen([sys.executable, "-c", "while True: pass"])
    try:
        yield
    finally:
        proc.kill()
        proc.wait(5)


STRESS_CHILD = r"""
import sys, threading
from mcpsync.auth import KeyringTokenStore, TokenSet
store = KeyringTokenStore()
servers = sys.argv[1:]
errors = []
def work(i):
    try:
        for j in range(5):
            server = servers[(i + j) % len(servers)]
            store.save_tokens(server, TokenSet(access_token=f"p-{i}-{j}"))
            if store.load_tokens(server) is None:
                errors.append("lost")
    except Exception as exc:
        errors.append(repr(exc))
threads = [threading.Thread(target=work, args=(i,)) for i in range(4)]
for t in threads: t.start()
for t in threads: t.join(60)
print("ERRORS", errors, flush=True)
sys.exit(1 if errors else 0)
"""


@needs_keyring
def test_keyring_store_many_threads_and_processes_under_load(busy_cpu: None) -> None:
    """16 threads here (four on each of four keys, plus a key of their own) and two other
    processes writing the same keys, against the real gnome-keyring with the CPU busy."""
    store = KeyringTokenStore()
    shared = [f"http://127.0.0.1:1/mcp-{uuid.uuid4().hex}" for _ in range(4)]
    own = [f"http://127.0.0.1:1/mcp-{uuid.uuid4().hex}" for _ in range(16)]
    errors: list[BaseException] = []
    written: dict[str, set[str]] = {s: set() for s in shared}
    lock = threading.Lock()

    def work(i: int) -> None:
        try:
            for j in range(6):
                server = shared[i % 4]
                value = f"{i}-{j}"
                with lock:
                    written[server].add(value)
                store.save_tokens(server, tokens(access_token=value))
                assert store.load_tokens(server) is not None
                store.save_tokens(own[i], tokens(access_token=value))
                assert store.load_tokens(own[i]).access_token == value  # nobody else writes it
        except BaseException as exc:  # reported below
            errors.append(exc)

    env = {**os.environ, "PYTHONPATH": os.getcwd()}
    children = [subprocess.Popen([sys.executable, "-c", STRESS_CHILD, *shared], stdout=subprocess.PIPE,
                                 stderr=subprocess.PIPE, text=True, env=env) for _ in range(2)]
    threads = [threading.Thread(target=work, args=(i,)) for i in range(16)]
    try:
        for t in threads:
            t.start()
        for t in threads:
            t.join(timeout=120)
        outs = [c.communicate(timeout=120) for c in children]
        assert not errors, errors[:3]
        assert all(c.returncode == 0 for c in children), [o[-1000:] + e[-1000:] for o, e in outs]
        for server in shared:
            last = store.load_tokens(server).access_token
            assert last in written[server] or last.startswith("p-")
    finally:
        for c in children:
            if c.poll() is None:
                c.kill()
                c.wait(5)
        for s in shared + own:
            store.delete_tokens(s)


# -- the Secret Service on one connection per process --------------------------------------------


def _connections_opened_so_far() -> int:
    """The session bus's count of connections so far: a new connection's unique name is
    ``:1.N`` with N one more than the last one's."""
    from jeepney.io.blocking import open_dbus_connection

    with open_dbus_connection(bus="SESSION") as probe:
        return int(probe.unique_name.rsplit(".", 1)[1])


@needs_keyring
def test_keyring_store_keeps_one_connection_to_the_secret_service() -> None:
    """keyring alone opens and closes a D-Bus connection and a session per operation;
    gnome-keyring aborts on a race in that cycle when many clients do it at once (see
    mcpsync/auth/_secret_service.py). The store's operations, from any number of threads and
    store objects, share one connection."""
    servers = [f"http://127.0.0.1:1/mcp-{uuid.uuid4().hex}" for _ in range(8)]
    KeyringTokenStore().load_tokens(servers[0])  # the process's connection is open from here on
    errors: list[BaseException] = []

    def work(server: str) -> None:
        try:
            store = KeyringTokenStore()  # a store object of its own: the connection is the process's
            for j in range(5):
                store.save_tokens(server, tokens(access_token=f"{server}-{j}"))
                assert store.load_tokens(server).access_token == f"{server}-{j}"
            store.delete_tokens(server)
            assert store.load_tokens(server) is None
        except BaseException as exc:  # reported below
            errors.append(exc)

    before = _connections_opened_so_far()
    threads = [threading.Thread(target=work, args=(s,)) for s in servers]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=60)
    opened = _connections_opened_so_far() - before - 1  # less the second probe itself
    assert not errors, errors[:3]
    # 88 operations; with a connection each, 88 (and as many sessions). Nothing else on this
    # test's private bus connects meanwhile; a little slack all the same.
    assert opened <= 2, f"{opened} D-Bus connections for 88 store operations"


@needs_keyring
@pytest.mark.skipif(not hasattr(os, "fork"), reason="needs fork")
def test_a_forked_child_opens_its_own_connection_even_with_the_lock_held() -> None:
    """A child forked while a parent thread is mid-operation (holding the connection's lock)
    neither waits for that lock forever nor writes on the parent's socket."""
    from mcpsync.auth._secret_service import shared_secret_service

    server = f"http://127.0.0.1:1/mcp-{uuid.uuid4().hex}"
    store = KeyringTokenStore()
    store.save_tokens(server, tokens())
    link = store._kr()
    assert link is shared_secret_service(link._backend)
    held, release = threading.Event(), threading.Event()

    def hold() -> None:
        with link._lock:
            held.set()
            release.wait(60)

    holder = threading.Thread(target=hold)
    holder.start()
    try:
        assert held.wait(30)
        pid = os.fork()
        if pid == 0:  # the child: report through the exit code, never return into pytest
            code = 3
            try:
                import signal

                signal.alarm(60)  # a deadlock ends the child rather than the test run
                ok = store.load_tokens(server).access_token == SECRET
                store.save_tokens(server, tokens(access_token="from-the-child"))
                code = 0 if ok else 1
            finally:
                os._exit(code)
        deadline = time.monotonic() + 90
        while True:
            done, status = os.waitpid(pid, os.WNOHANG)
            if done or time.monotonic() > deadline:
                break
            time.sleep(0.05)
        if not done:
            os.kill(pid, 9)
            os.waitpid(pid, 0)
        assert done and os.waitstatus_to_exitcode(status) == 0, "the forked child could not use the store"
    finally:
        release.set()
        holder.join(30)
    # The parent's connection is untouched by the child's use of its own.
    assert store.load_tokens(server).access_token == "from-the-child"
    store.delete_tokens(server)


RESTART_CHILD = r"""
import os, signal, subprocess, sys, time
from jeepney import DBusAddress, new_method_call
from jeepney.io.blocking import open_dbus_connection
from mcpsync.auth import KeyringTokenStore, TokenSet

PASSWORD = "restart-test-" + str(os.getpid())
BUS = DBusAddress("/org/freedesktop/DBus", bus_name="org.freedesktop.DBus", interface="org.freedesktop.DBus")

def owner_pid():
    with open_dbus_connection(bus="SESSION") as c:
        has, = c.send_and_get_reply(new_method_call(BUS, "NameHasOwner", "s", ("org.freedesktop.secrets",))).body
        if not has:
            return None
        pid, = c.send_and_get_reply(new_method_call(BUS, "GetConnectionUnixProcessID", "s", ("org.freedesktop.secrets",))).body
        return pid

def until(test):
    deadline = time.monotonic() + 30
    while not test():
        assert time.monotonic() < deadline, "the keyring daemon did not come or go"
        time.sleep(0.05)

def start_daemon():
    subprocess.run(["gnome-keyring-daemon", "--unlock", "--components=secrets"], input=PASSWORD.encode(),
                   stdout=subprocess.DEVNULL, check=True, timeout=60)
    until(lambda: owner_pid() is not None)

server = "http://127.0.0.1:1/mcp-restart"
start_daemon()
store = KeyringTokenStore()
store.save_tokens(server, TokenSet(access_token="before"))
assert store.load_tokens(server).access_token == "before"
first = owner_pid()
os.kill(first, signal.SIGKILL)  # what gnome-keyring's abort looks like from here
until(lambda: owner_pid() is None)
start_daemon()  # the user's session starts it again and unlocks it
assert owner_pid() != first
# The kept connection's session belonged to the dead daemon: the first attempt fails, the
# connection is dropped, the retry opens a new one.
assert store.load_tokens(server).access_token == "before"
store.save_tokens(server, TokenSet(access_token="after"))
assert KeyringTokenStore().load_tokens(server).access_token == "after"
os.kill(owner_pid(), signal.SIGTERM)
print("OK", flush=True)
"""


@pytest.mark.skipif(shutil.which("gnome-keyring-daemon") is None or shutil.which("dbus-run-session") is None,
                    reason="needs gnome-keyring-daemon and dbus-run-session (tests/setup/30-keyring.sh)")
def test_the_kept_connection_survives_a_restart_of_the_keyring_daemon(tmp_path: Path) -> None:
    """On a private bus and keyring of its own: the daemon is killed and started again between
    two operations of one store; the store reconnects and finds what it wrote."""
    pytest.importorskip("keyring")
    run = tmp_path / "run"
    run.mkdir(mode=0o700)
    env = {**os.environ, "PYTHONPATH": os.getcwd(), "XDG_DATA_HOME": str(tmp_path / "data"),
           "XDG_RUNTIME_DIR": str(run), "PYTHON_KEYRING_BACKEND": "keyring.backends.SecretService.Keyring"}
    env.pop("DBUS_SESSION_BUS_ADDRESS", None)
    out = subprocess.run(["dbus-run-session", "--", sys.executable, "-c", RESTART_CHILD],
                         capture_output=True, text=True, env=env, timeout=240)
    assert out.returncode == 0 and out.stdout.strip().endswith("OK"), out.stdout[-2000:] + out.stderr[-3000:]
