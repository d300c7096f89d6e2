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

Elsewhere (not Linux, or ``prctl`` unavailable), or with ``MCPSYNC_NO_PDEATHSIG=1`` in
the environment (a server meant to outlive its client), :func:`popen` is
``subprocess.Popen``.
"""

from __future__ import annotations

import logging
import os
import queue
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
        return prctl  # type: ignore[no-any-return]
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
                proc: subprocess.Popen[bytes] = subprocess.Popen(job.argv, preexec_fn=_die_with(parent), **job.kwargs)
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
