"""What many tests need, in one place: bounded waits, forked children, thread hammers and
small scripted stdio servers.

Every wait here takes a timeout and returns (or raises) when it runs out: a test that hangs
tells nobody what broke. None of these helpers reads a client's private attributes; what a
test needs to see of a client's insides comes from ``Client.diagnostics()``.
"""

from __future__ import annotations

import os
import select
import signal
import sys
import threading
import time
from pathlib import Path
from typing import Any, Callable

__all__ = ["hammer", "run_in_child", "scripted_server", "wait_until"]


def wait_until(
    predicate: Callable[[], object],
    timeout: float = 10.0,
    *,
    interval: float = 0.01,
    event: threading.Event | None = None,
) -> bool:
    """Wait (bounded) until ``predicate()`` is true; return whether it became true.

    Args:
        predicate: checked at once, then after each pause; a true value ends the wait.
        timeout: seconds to wait at most.
        interval: the longest pause between two checks.
        event: set by whoever changes what ``predicate`` looks at, it ends a pause at once
            (the check is still what decides).

    Returns:
        True once the predicate held, False if ``timeout`` ran out first.
    """
    deadline = time.monotonic() + timeout
    pause = event if event is not None else threading.Event()
    while True:
        if predicate():
            return True
        left = deadline - time.monotonic()
        if left <= 0:
            return bool(predicate())
        pause.wait(min(interval, left))
        if event is not None:
            event.clear()


def run_in_child(body: Callable[[], bytes], timeout: float = 20.0) -> bytes:
    """Fork; run ``body()`` in the child and return the bytes it returned (64 at most).

    A child that does not answer within ``timeout`` is killed and the answer is ``b"hung"``;
    one that raised answers nothing (``b""``). The child leaves with ``os._exit`` so that
    nothing of the parent's (atexit hooks, pytest) runs twice.
    """
    r, w = os.pipe()
    pid = os.fork()
    if pid == 0:  # pragma: no cover - the child's coverage is not collected
        try:
            os.write(w, body())
        finally:
            os._exit(0)
    os.close(w)
    try:
        ready, _, _ = select.select([r], [], [], timeout)
        answer = os.read(r, 64) if ready else b"hung"
        if not ready:
            os.kill(pid, signal.SIGKILL)
        os.waitpid(pid, 0)
    finally:
        os.close(r)
    return answer


def hammer(
    client: Any = None,
    *,
    threads: int = 16,
    calls: int = 5,
    ask: Callable[[str], str] | None = None,
    expect: Callable[[str], str] = lambda msg: f"Echo: {msg}",
    timeout: float = 60.0,
    join: float = 150.0,
) -> None:
    """Many threads call at once; assert every answer reached the thread that asked.

    Thread ``t`` asks ``calls`` times with its own messages ``"t{t}-c{i}"`` and checks each
    answer against ``expect(message)``; the threads start together behind a barrier.

    Args:
        client: a :class:`~mcpsync.Client` (or anything with ``call_tool``); by default each
            call is ``client.call_tool("echo", {"message": msg}, timeout=timeout).text``.
        threads: how many threads.
        calls: calls per thread.
        ask: sends one message and returns the answer's text (replaces the default call,
            for raw clients and transports).
        expect: the answer a message must get.
        timeout: each call's timeout (default call only).
        join: how long to wait for all the threads at most.

    Raises:
        AssertionError: a thread did not return, a call failed, or an answer went astray.
    """
    if ask is None:
        if client is None:
            raise TypeError("hammer() needs a client or ask=")

        def ask(msg: str) -> str:
            return client.call_tool("echo", {"message": msg}, timeout=timeout).text

    errors: list[str] = []
    counts = [0] * threads
    start = threading.Barrier(threads)

    def worker(t: int) -> None:
        try:
            start.wait(30)
        except threading.BrokenBarrierError:
            errors.append(f"thread {t}: the others never started")
            return
        for i in range(calls):
            msg = f"t{t}-c{i}"
            try:
                got = ask(msg)
            except Exception as exc:  # noqa: BLE001 - recorded and asserted below
                errors.append(f"{msg}: {exc!r}")
                continue
            if got != expect(msg):
                errors.append(f"{msg}: got {got!r}")
            else:
                counts[t] += 1

    workers = [threading.Thread(target=worker, args=(t,), name=f"hammer-{t}", daemon=True) for t in range(threads)]
    for th in workers:
        th.start()
    deadline = time.monotonic() + join
    for th in workers:
        th.join(max(0.0, deadline - time.monotonic()))
    assert not [th for th in workers if th.is_alive()], "a caller never returned"
    assert not errors, errors[:5]
    assert counts == [calls] * threads


_SCRIPT = r'''
import json, sys

INIT = {init}


class Silent(Exception):
    """Raised by answer(): the request is never answered."""


{body}


for line in sys.stdin:
    msg = json.loads(line)
    rid, method = msg.get("id"), msg.get("method")
    if rid is None:
        continue
    if method == "initialize":
        res = INIT
    else:
        try:
            res = answer(method, msg.get("params") or {{}})
        except Silent:
            continue
    if res is None:
        print(json.dumps({{"jsonrpc": "2.0", "id": rid, "error": {{"code": -32601, "message": "no"}}}}), flush=True)
    else:
        print(json.dumps({{"jsonrpc": "2.0", "id": rid, "result": res}}), flush=True)
'''


def while_reading(read_once: Callable[[], None], work: Callable[[int], None], *, threads: int = 8) -> None:
    """Run ``work(t)`` on ``threads`` threads while another calls ``read_once()`` over and
    over until they end (a reader racing writers); each join is bounded."""
    stop = threading.Event()

    def read() -> None:
        while not stop.is_set():
            read_once()

    reader = threading.Thread(target=read)
    reader.start()
    workers = [threading.Thread(target=work, args=(t,)) for t in range(threads)]
    try:
        for w in workers:
            w.start()
        for w in workers:
            w.join(60)
    finally:
        stop.set()
        reader.join(60)


def scripted_server(
    directory: Path,
    body: str,
    *,
    name: str = "scripted",
    capabilities: dict[str, Any] | None = None,
    version: str = "2025-11-25",
) -> tuple[str, list[str]]:
    """Write a small legacy-era stdio server to ``directory`` and return its ``(command, args)``.

    The server answers ``initialize`` with ``capabilities`` (default: tools), ignores
    notifications, and asks ``answer(method, params)`` -- defined by ``body`` -- for every
    other request: a dict is the result, ``None`` is "method not found" (-32601), and
    ``raise Silent`` leaves the request unanswered.

    Args:
        directory: where the script goes (a test's ``tmp_path``).
        body: Python source defining ``def answer(method, params)``.
        name: the server's name in its ``serverInfo``.
        capabilities: its capabilities.
        version: the protocol version it answers with.
    """
    init = {
        "protocolVersion": version,
        "capabilities": capabilities if capabilities is not None else {"tools": {}},
        "serverInfo": {"name": name, "version": "1"},
    }
    script = Path(directory) / f"{name}.py"
    script.write_text(_SCRIPT.format(init=repr(init), body=body))
    return sys.executable, [str(script)]
