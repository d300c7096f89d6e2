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
from typing import Any, Callable

__all__ = ["popen", "PDEATHSIG"]

log = logging.getLogger("mcpsync.transports.spawn")

_PR_SET_PDEATHSIG = 1


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
            if abandoned:  # the caller gave up waiting: nobody owns this child
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
