"""Start server children that die with the process that started them, even on SIGKILL.

A worker process (a Ray actor, a ``multiprocessing`` worker) can be killed outright: it
then runs no clean-up, and a server child that does not exit on EOF of its stdin (one
that is busy, or ignores EOF) would live on as an orphan. On Linux each child asks the
kernel for ``SIGKILL`` when its parent dies (``prctl(PR_SET_PDEATHSIG)``, set between
fork and exec).

The kernel's "parent" there is the *thread* that forked the child, and mcpsync starts
connections on short-lived threads; so children are forked by one long-lived daemon
thread per process (started on first use, again in a forked child), which ends only
with the process.

In a process that has loaded grpcio (whose fork handlers abort a child that runs Python
code before exec) the child is started through util-linux's ``setpriv --pdeathsig KILL``
instead, which sets the same signal and execs the command. Elsewhere (not Linux, or
``prctl`` unavailable), or with ``MCPSYNC_NO_PDEATHSIG=1`` in the environment (a server
meant to outlive its client), :func:`popen` is ``subprocess.Popen``.

A server runs in a process group of its own (a new session): a terminal's Ctrl-C, which
the terminal sends to its foreground group, reaches the client only, and the server's
whole tree (``npx`` → ``npm exec`` → ``sh`` → ``node``) can be ended as one. The death
signal reaches the direct child only, so each process that starts servers also starts
one **watchdog** (on first use, again in a forked child): a POSIX shell that reads the
groups to guard from a pipe whose other end only this process holds. The kernel closes
that end however the process ends, SIGKILL included; at EOF the watchdog sends SIGTERM
to every group still listed, waits the grace the client gave (``timeouts.close``), then
SIGKILL. A shell, not Python: it starts in about a millisecond and lives in about a
megabyte. A group is signalled only while it is still ours: its leader's pid is gone,
or still names the process started then (same start time; a pid is reused once the
whole group has ended, and ``pid_max`` may be as low as 32768).
"""

from __future__ import annotations

import errno
import logging
import os
import queue
import shutil
import signal
import subprocess
import sys
import threading
import time
from typing import Any, Callable

__all__ = ["popen", "PDEATHSIG", "Group", "stop", "DEFAULT_ENV_VARS", "server_environment"]

log = logging.getLogger("mcpsync.transports.spawn")

_PR_SET_PDEATHSIG = 1

#: The variables a server inherits unless asked for everything (as the official SDK): what
#: a shell and package runners (``npx``, ``uvx``) need to find their tools and caches.
#: Nothing else of the client's environment (API keys, tokens) reaches a server by default.
DEFAULT_ENV_VARS: tuple[str, ...] = (
    ("APPDATA", "HOMEDRIVE", "HOMEPATH", "LOCALAPPDATA", "PATH", "PATHEXT", "PROCESSOR_ARCHITECTURE",
     "SYSTEMDRIVE", "SYSTEMROOT", "TEMP", "USERNAME", "USERPROFILE")
    if os.name == "nt"
    else ("HOME", "LOGNAME", "PATH", "SHELL", "TERM", "USER")
)


def server_environment(extra: "dict[str, str] | None" = None, *, inherit: bool = False) -> dict[str, str]:
    """The environment a server process starts with: :data:`DEFAULT_ENV_VARS` of this
    process's (``inherit``: all of it), then ``extra`` over it.

    Example:
        >>> env = server_environment({"API_KEY": "k"})
        >>> env["API_KEY"], set(env) <= {"API_KEY", *DEFAULT_ENV_VARS}
        ('k', True)
    """
    if inherit:
        base = dict(os.environ)
    else:  # a value starting "()" is a shell function exported by bash: not a variable to pass on
        base = {k: v for k in DEFAULT_ENV_VARS if (v := os.environ.get(k)) is not None and not v.startswith("()")}
    base.update(extra or {})
    return base


def _load_prctl() -> Callable[..., int] | None:
    if not sys.platform.startswith("linux") or os.environ.get("MCPSYNC_NO_PDEATHSIG"):
        return None
    try:
        import ctypes

        libc = ctypes.CDLL(None, use_errno=True)
        prctl = libc.prctl
        prctl.restype = ctypes.c_int
        return prctl
    except (OSError, AttributeError):  # pragma: no cover - no libc prctl
        return None


_prctl = _load_prctl()
#: True when children are tied to this process's life (Linux).
PDEATHSIG = _prctl is not None


def _die_with(parent: int) -> Callable[[], None]:
    prctl = _prctl
    assert prctl is not None
    sig = int(signal.SIGKILL)

    def preexec() -> None:  # in the child, between fork and exec: no locks, no imports
        prctl(_PR_SET_PDEATHSIG, sig, 0, 0, 0)
        if os.getppid() != parent:  # the parent died before the prctl took effect
            os._exit(1)

    return preexec


class _Spawner:
    """The long-lived thread that forks children on behalf of other threads."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._queue: queue.SimpleQueue[Any] | None = None
        self._pid = 0
        self._thread: threading.Thread | None = None

    def submit(self, argv: Any, kwargs: dict[str, Any], timeout: float) -> subprocess.Popen[bytes]:
        with self._lock:
            if self._pid != os.getpid() or self._thread is None or not self._thread.is_alive():
                self._pid = os.getpid()  # first use, or a forked child: the parent's thread is gone
                self._queue = queue.SimpleQueue()
                self._thread = threading.Thread(target=self._run, args=(self._queue,), name="mcpsync-spawner",
                                                daemon=True)
                self._thread.start()
            q = self._queue
        assert q is not None
        job = _Job(argv, kwargs)
        q.put(job)
        if not job.done.wait(timeout):
            with job.lock:
                job.abandoned = True
                proc = job.proc
            if proc is None:
                raise TimeoutError(f"starting {argv[0]!r} took longer than {timeout:.1f} s")
        if job.error is not None:
            raise job.error
        assert job.proc is not None
        return job.proc

    @staticmethod
    def _run(q: "queue.SimpleQueue[_Job]") -> None:
        parent = os.getpid()
        while True:
            job = q.get()
            try:
                if _fork_unsafe():
                    if _SETPRIV is not None:
                        proc: subprocess.Popen[bytes] = subprocess.Popen(_through_setpriv(job.argv, job.kwargs), **job.kwargs)
                    else:  # no way to tie the child without Python after fork: start it plainly
                        proc = subprocess.Popen(job.argv, **job.kwargs)
                else:
                    proc = subprocess.Popen(job.argv, preexec_fn=_die_with(parent), **job.kwargs)
            except BaseException as exc:  # handed to the caller
                job.error = exc
                job.done.set()
                continue
            with job.lock:
                job.proc = proc
                abandoned = job.abandoned
            job.done.set()
            if abandoned:  # the caller gave up waiting: nobody owns this child (nor its group)
                if job.kwargs.get("start_new_session"):
                    Group(proc, 0.0, listed=False).signal(signal.SIGKILL)
                proc.kill()
                proc.wait()


class _Job:
    __slots__ = ("argv", "kwargs", "proc", "error", "done", "lock", "abandoned")

    def __init__(self, argv: Any, kwargs: dict[str, Any]) -> None:
        self.argv = argv
        self.kwargs = kwargs
        self.proc: subprocess.Popen[bytes] | None = None
        self.error: BaseException | None = None
        self.done = threading.Event()
        self.lock = threading.Lock()
        self.abandoned = False


_spawner = _Spawner()


def popen(argv: Any, *, timeout: float = 30.0, **kwargs: Any) -> "subprocess.Popen[bytes]":
    """``subprocess.Popen(argv, **kwargs)`` for a child that dies with this process.

    Args:
        argv: the command line.
        timeout: the longest wait for the fork (the spawning thread is shared).
        **kwargs: the other arguments of ``Popen`` (not ``preexec_fn``).

    Raises:
        OSError: the command cannot be started (as from ``Popen``).
        TimeoutError: the fork did not happen within ``timeout`` (the child, if it
            starts later, is killed).
    """
    if _prctl is None:
        return subprocess.Popen(argv, **kwargs)
    return _spawner.submit(argv, kwargs, timeout)


#: util-linux's ``setpriv``: sets the death signal and execs the command, so that no Python
#: code runs between fork and exec (see :func:`_fork_unsafe`)
_SETPRIV = shutil.which("setpriv")


def _fork_unsafe() -> bool:
    """Whether running Python code between fork and exec is unsafe in this process.

    ``preexec_fn`` makes ``Popen`` fork (not spawn) and run the ``prctl`` in the child;
    grpcio's own fork handlers then abort the child now and then (seen: a bridge process,
    which serves gRPC, lost about one upstream in ten under load, exit code -6; Ray's
    workers load grpcio too). Such a process starts its children through ``setpriv``.
    """
    return "grpc" in sys.modules


def _through_setpriv(argv: Any, kwargs: dict[str, Any]) -> list[str]:
    """``argv`` run by ``setpriv --pdeathsig KILL``, its command resolved first so that a
    missing or non-executable one still fails as ``Popen`` itself would."""
    argv = [os.fspath(a) for a in argv]
    env = kwargs.get("env")
    path = (env if env is not None else os.environ).get("PATH", os.defpath)
    command = argv[0]
    if os.sep in command:
        where = os.path.join(os.fspath(kwargs.get("cwd") or "."), command)
        if not os.path.exists(where):
            raise FileNotFoundError(errno.ENOENT, os.strerror(errno.ENOENT), command)
        if not os.access(where, os.X_OK) or os.path.isdir(where):
            raise PermissionError(errno.EACCES, os.strerror(errno.EACCES), command)
        resolved = os.path.abspath(where)
    else:
        found = shutil.which(command, path=path)
        if found is None:
            raise FileNotFoundError(errno.ENOENT, os.strerror(errno.ENOENT), command)
        resolved = found
    return [_SETPRIV, "--pdeathsig", "KILL", "--", resolved, *argv[1:]]



# ----------------------------------------------------------------------------- process groups

#: the shell the watchdog runs in (POSIX sh; dash on Debian)
_SH = "/bin/sh" if os.path.exists("/bin/sh") else shutil.which("sh")
#: the watchdog: reads "+ <pgid>:<leader start time>:<grace ms>" and "- <same>" lines; at
#: EOF, SIGTERM to every group still listed (and still ours), the longest grace, SIGKILL
_WATCHDOG_SCRIPT = r"""
trap '' INT HUP QUIT TERM PIPE
g=' '
while read -r op e; do
  case $op in
    +) g="$g$e " ;;
    -) case $g in *" $e "*) g="${g%%" $e "*} ${g#*" $e "}" ;; esac ;;
  esac
done
ours() {
  s=''
  read -r s 2>/dev/null </proc/$1/stat || return 0
  s=${s##*) }
  set -- "$2" $s
  [ "$1" = "" ] || [ "${21}" = "$1" ]
}
t=0
live=''
for e in $g; do
  p=${e%%:*}; r=${e#*:}; st=${r%%:*}; ms=${r#*:}
  if ours "$p" "$st" && kill -15 -"$p" 2>/dev/null; then
    live="$live $p"
    [ "$ms" -gt "$t" ] && t=$ms
  fi
done
n=$((t / 50))
while [ -n "$live" ] && [ "$n" -gt 0 ]; do
  sleep 0.05
  n=$((n - 1))
  rest=''
  for p in $live; do kill -0 -"$p" 2>/dev/null && rest="$rest $p"; done
  live=$rest
done
for p in $live; do kill -9 -"$p" 2>/dev/null; done
"""
#: argv[0] of the watchdog, as ``ps`` shows it
WATCHDOG_NAME = "mcpsync-watchdog"


def _start_time(pid: int) -> str:
    """A process's start time in clock ticks since boot (``/proc/<pid>/stat`` field 22): with
    its pid, it names one process for good. ``""`` when unknown (gone, or no ``/proc``)."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            data = f.read()
        return data.rsplit(b")", 1)[1].split()[19].decode()
    except (OSError, IndexError):
        return ""


class _Watchdog:
    """This process's watchdog (see the module's docstring): started on first use, again in
    a forked child or when it died; told of each group as it starts and ends."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._fd = -1  # our end of its pipe: only this process holds it (close-on-exec)
        self._pid = 0  # the watchdog's pid
        self._owner = 0  # the process that started it
        self._listed: dict[str, None] = {}  # entries, so that a new watchdog learns them all
        self.enabled = os.name == "posix" and _SH is not None and not os.environ.get("MCPSYNC_NO_PDEATHSIG")

    def add(self, entry: str) -> None:
        with self._lock:
            self._listed[entry] = None
            self._send(b"+ " + entry.encode() + b"\n")

    def remove(self, entry: str) -> None:
        with self._lock:
            if self._listed.pop(entry, 0) is None and self._owner == os.getpid() and self._fd >= 0:
                self._send(b"- " + entry.encode() + b"\n")

    def pid(self) -> int | None:
        """The watchdog's pid (None before the first group)."""
        return self._pid if self._owner == os.getpid() and self._fd >= 0 else None

    def _send(self, line: bytes) -> None:  # under the lock
        for _attempt in range(2):
            if self._owner != os.getpid() or self._fd < 0:
                if not self._start():
                    return
                if not line.startswith(b"+"):
                    return  # a new watchdog was told of every listed group
            try:
                os.write(self._fd, line)  # one write under PIPE_BUF: never interleaved
                return
            except OSError:  # it died (killed by someone): reap it, start another
                self._drop()

    def _start(self) -> bool:
        r, w = os.pipe()
        try:
            self._pid = os.posix_spawn(
                _SH,  # type: ignore[arg-type]
                [WATCHDOG_NAME, "-c", _WATCHDOG_SCRIPT],
                {"PATH": os.environ.get("PATH") or os.defpath},
                file_actions=[
                    (os.POSIX_SPAWN_DUP2, r, 0),
                    (os.POSIX_SPAWN_OPEN, 1, os.devnull, os.O_WRONLY, 0),
                    (os.POSIX_SPAWN_OPEN, 2, os.devnull, os.O_WRONLY, 0),
                ],
                setsid=True,  # no terminal signal reaches it
            )
        except (OSError, AttributeError, TypeError) as exc:
            os.close(w)
            log.warning("no watchdog for the servers' process groups (%s): a SIGKILLed client may leave "
                        "servers' grandchildren running", exc)
            self.enabled = False
            return False
        finally:
            os.close(r)
        self._fd, self._owner = w, os.getpid()
        if self._listed:
            os.write(w, b"".join(b"+ " + e.encode() + b"\n" for e in self._listed))
        return True

    def _drop(self) -> None:
        try:
            os.close(self._fd)
        except OSError:
            pass
        self._fd = -1
        try:
            os.waitpid(self._pid, os.WNOHANG)
        except ChildProcessError:
            pass

    def after_fork_in_child(self) -> None:
        # the parent's groups are the parent's; this process starts its own watchdog
        if self._fd >= 0:
            try:
                os.close(self._fd)
            except OSError:
                pass
        self._lock = threading.Lock()
        self._fd, self._pid, self._owner = -1, 0, 0
        self._listed = {}


_watchdog = _Watchdog()
os.register_at_fork(after_in_child=_watchdog.after_fork_in_child)


def watchdog_pid() -> int | None:
    """The pid of this process's watchdog, None while it has none (for tests and diagnostics)."""
    return _watchdog.pid()


class Group:
    """The process group (session) of one server child, started with ``start_new_session``.

    Args:
        proc: the child, leader of its group.
        grace: seconds the watchdog waits between SIGTERM and SIGKILL (``timeouts.close``).
        listed: tell the watchdog (False: a group about to be killed anyway).
    """

    __slots__ = ("pgid", "start", "entry")

    def __init__(self, proc: "subprocess.Popen[bytes]", grace: float, *, listed: bool = True) -> None:
        self.pgid = proc.pid
        self.start = _start_time(proc.pid)
        self.entry = f"{self.pgid}:{self.start}:{max(int(grace * 1000), 0)}"
        if listed and _watchdog.enabled:
            _watchdog.add(self.entry)
        else:
            self.entry = ""

    def ours(self) -> bool:
        """Whether the group id still names our group: its leader is gone (the id is then
        held by our remaining members only, or by nobody) or is the same process."""
        now = _start_time(self.pgid)
        return not now or not self.start or now == self.start

    def signal(self, sig: int) -> bool:
        """Send ``sig`` to every process of the group; False when none was left (or the id
        names another group now)."""
        if not self.ours():
            return False
        try:
            os.killpg(self.pgid, sig)
            return True
        except (ProcessLookupError, PermissionError):
            return False

    def empty(self) -> bool:
        return not self.signal(0)

    def release(self) -> None:
        """Off the watchdog's list (the group has ended)."""
        if self.entry:
            _watchdog.remove(self.entry)
            self.entry = ""


def _wait_all(proc: "subprocess.Popen[bytes]", group: Group | None, deadline: float) -> bool:
    """Wait until ``deadline`` for the child to exit and its group to empty; True if both did."""
    try:
        proc.wait(max(deadline - time.monotonic(), 0.0))
    except subprocess.TimeoutExpired:
        return False
    if group is None:
        return True
    pause = 0.001
    while not group.empty():
        left = deadline - time.monotonic()
        if left <= 0:
            return False
        time.sleep(min(pause, left))  # no event tells of a grandchild's exit: a short, growing poll
        pause = min(pause * 2, 0.05)
    return True


def stop(proc: "subprocess.Popen[bytes]", group: Group | None, wait: float, first: float | None = None) -> int | None:
    """End a server child whose input was closed: wait ``first`` s (default ``wait``) for it
    and its whole group to end on their own, then SIGTERM the group and wait ``wait`` s, then
    SIGKILL it; the child is always reaped, the group taken off the watchdog's list.

    Returns:
        The child's exit code when it ended on its own in the first wait, else None.
    """
    try:
        if _wait_all(proc, group, time.monotonic() + (wait if first is None else first)):
            return proc.returncode
        code = proc.returncode  # it may have exited, leaving grandchildren behind
        for sig, bound in ((signal.SIGTERM, wait), (signal.SIGKILL, 5.0)):
            if group is None or not group.signal(sig):
                if proc.returncode is None:
                    proc.send_signal(sig)
            if _wait_all(proc, group, time.monotonic() + bound):
                break
        else:  # pragma: no cover - a process SIGKILL cannot end
            log.warning("stdio server (pid %s) or its group did not end on SIGKILL", proc.pid)
        return code
    finally:
        if group is not None:
            group.release()
