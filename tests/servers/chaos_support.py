"""Helpers shared by the chaos, fork, exit and reconnect tests (not a server).

Everything here is bounded: every wait takes a timeout and returns or raises.
"""

from __future__ import annotations

import os
import signal
import threading
import time
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from mcpsync._errors import may_have_reached_server

SERVERS = Path(__file__).resolve().parent


def pool_pids(client: Any) -> list[int]:
    """Pids of the live stdio server processes of ``client``'s connections, oldest first."""
    return list(client.diagnostics().pids)


def noticed_dead(client: Any, pids: list[int]) -> bool:
    """True once ``client`` holds no live connection to any of ``pids`` (it noticed the deaths)."""
    return not any(c.alive and c.pid in pids for c in client.diagnostics().connections)


def is_gone(pid: int) -> bool:
    """True once ``pid`` no longer runs (a zombie counts as gone: it runs no code)."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0] == "Z"
    except OSError:
        return True


def wait_gone(pids: list[int], timeout: float = 10.0) -> list[int]:
    """Wait (bounded) for every pid to be gone; return the ones still running."""
    deadline = time.monotonic() + timeout
    left = [p for p in pids if not is_gone(p)]
    while left and time.monotonic() < deadline:
        time.sleep(0.02)
        left = [p for p in left if not is_gone(p)]
    return left


def kill(pid: int) -> bool:
    try:
        os.kill(pid, signal.SIGKILL)
        return True
    except ProcessLookupError:
        return False


def children_of(pid: int) -> list[int]:
    """Direct children of ``pid`` (from /proc/<pid>/task/*/children), its servers' watchdog
    left out (one per process that starts stdio servers: mcpsync/transports/_spawn.py)."""
    out: list[int] = []
    for task in Path(f"/proc/{pid}/task").glob("*"):
        try:
            out += [int(p) for p in (task / "children").read_text().split()]
        except OSError:
            pass
    return [p for p in out if not is_watchdog(p)]


def is_watchdog(pid: int) -> bool:
    """Whether ``pid`` is a client process's watchdog (``mcpsync-watchdog``)."""
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes().startswith(b"mcpsync-watchdog\0")
    except OSError:
        return False


@dataclass
class ChaosLog:
    """The ``--log`` file of chaos_server.py, parsed."""

    starts: list[int] = field(default_factory=list)
    calls: list[tuple[int, str, str]] = field(default_factory=list)  # (pid, tool, key)
    subscribes: list[tuple[int, str]] = field(default_factory=list)

    @classmethod
    def read(cls, path: Path) -> "ChaosLog":
        log = cls()
        if not path.exists():
            return log
        for line in path.read_text().splitlines():
            parts = line.split(" ")
            if parts[0] == "start" and len(parts) == 2:
                log.starts.append(int(parts[1]))
            elif parts[0] == "call" and len(parts) == 4:
                log.calls.append((int(parts[1]), parts[2], parts[3]))
            elif parts[0] == "subscribe" and len(parts) == 3:
                log.subscribes.append((int(parts[1]), parts[2]))
        return log

    def seen(self, tool: str) -> Counter[str]:
        """How many times the servers saw each key of ``tool``."""
        return Counter(key for _, t, key in self.calls if t == tool)


@dataclass
class Tally:
    """What the calling threads saw, thread-safely counted."""

    lock: threading.Lock = field(default_factory=threading.Lock)
    issued: list[str] = field(default_factory=list)
    ok: dict[str, str] = field(default_factory=dict)  # key -> text received
    failed: dict[str, BaseException] = field(default_factory=dict)
    durations: list[float] = field(default_factory=list)
    ok_after: dict[int, int] = field(default_factory=dict)  # thread -> successes after the calm point
    took: dict[str, float] = field(default_factory=dict)  # key -> seconds the call took

    def summary(self) -> str:
        kinds = Counter(type(e).__name__ for e in self.failed.values())
        return f"issued={len(self.issued)} ok={len(self.ok)} failed={len(self.failed)} {dict(kinds)}"

    def laggards(self, threads: int, least: int, last: int = 8) -> str:
        """For each caller thread with fewer than ``least`` successes after the calm
        point: how many calls it issued, and how its ``last`` calls ended and took."""
        out = []
        for t in range(threads):
            if self.ok_after.get(t, 0) >= least:
                continue
            keys = [k for k in self.issued if k.startswith(f"t{t}-")]
            ends = [
                f"{'ok' if k in self.ok else type(self.failed.get(k)).__name__}:{self.took.get(k, float('nan')):.2f}s"
                for k in keys[-last:]
            ]
            out.append(f"thread {t}: issued {len(keys)}, last {ends}")
        return "; ".join(out)


def resent_after_reaching(failed: dict[str, BaseException]) -> list[str]:
    """Keys of failed calls that were retried after an attempt that may have reached the
    server (for an unannotated tool that must never happen). A call may be retried after
    attempts that never left the client; ``exc.retried_errors`` holds those attempts'
    errors and ``may_have_reached_server`` judges each."""
    out = []
    for key, exc in failed.items():
        if any(may_have_reached_server(e) for e in getattr(exc, "retried_errors", ())):
            out.append(key)
    return out
