"""Ctrl-C storm on an HTTP client: SIGINT about every millisecond to the main thread while it
and other threads call a real server; then every pooled socket must be back in its pool.

Usage: ``http_interrupt_storm.py URL SECONDS MODE`` (``MCPSYNC_HTTP=urllib3`` picks that
path). Prints one JSON line: interrupts delivered and caught, calls made, other threads'
failures, and per blocking pool of the fast path the sockets still counted as in use after
the storm (must be 0).
"""

from __future__ import annotations

import faulthandler
import gc
import json
import os
import signal
import sys
import threading
import time

from mcpsync import Client


def in_use_after(settle: float = 20.0) -> list[int]:
    """Sockets each blocking pool of the fast path still counts as in use once every call
    has ended (the standalone GET stream, when there is one, is in the other pool). A
    response stream of a call abandoned by an interrupt ends when the server answers it
    (the server works through the abandoned calls): waited for, up to ``settle`` seconds."""
    from mcpsync.transports._fastconn import _OriginPool

    pools = [obj for obj in gc.get_objects() if isinstance(obj, _OriginPool) and obj.block and not obj.closed]

    def counts() -> list[int]:
        out = []
        for pool in pools:
            with pool.lock:
                out.append(pool.open_count() - len(pool.idle))
        return out

    ends = time.monotonic() + settle
    while any(counts()) and time.monotonic() < ends:
        time.sleep(0.1)
    return counts()


def main() -> None:
    faulthandler.dump_traceback_later(float(os.environ.get("STORM_WEDGED_AFTER", "90")), exit=True)  # a wedge: say where
    url, seconds, mode = sys.argv[1], float(sys.argv[2]), sys.argv[3]
    client = Client.http(url, mode=mode)
    client.list_tools()
    # warm: what a first call imports lazily is imported now (an interrupt inside an import
    # can leave CPython's import lock held for good, whatever the client does)
    client.call_tool("echo", {"message": "warm"}, timeout=20)
    stop = threading.Event()
    calls = [0]
    failures: list[str] = []

    def worker() -> None:
        while not stop.is_set():
            try:
                client.call_tool("echo", {"message": "x"}, timeout=20)
                calls[0] += 1
            except Exception as exc:  # noqa: BLE001 - counted: another thread's call must not fail
                failures.append(f"{type(exc).__name__}: {exc}"[:200])

    workers = [threading.Thread(target=worker) for _ in range(4)]
    for w in workers:
        w.start()
    interrupts = [0]
    go = threading.Event()

    def interrupter() -> None:
        go.wait()
        end = time.monotonic() + seconds
        while time.monotonic() < end:
            if not os.environ.get("STORM_NOINT"):
                os.kill(os.getpid(), signal.SIGINT)
            interrupts[0] += 1
            time.sleep(0.001)
        stop.set()

    storm = threading.Thread(target=interrupter)
    storm.start()
    caught = 0
    in_call = [False]

    def interrupt(signum: int, frame: object) -> None:
        if in_call[0]:  # anywhere in the client's code, never in this loop's own
            raise KeyboardInterrupt

    signal.signal(signal.SIGINT, interrupt)
    go.set()
    while not stop.is_set():
        try:
            in_call[0] = True
            client.call_tool("echo", {"message": "main"}, timeout=20)
            in_call[0] = False
            calls[0] += 1
        except KeyboardInterrupt:
            in_call[0] = False
            caught += 1
    storm.join()
    for w in workers:
        w.join(60)
    after = [client.call_tool("echo", {"message": "after"}, timeout=20).text for _ in range(3)]
    print(json.dumps({
        "interrupts": interrupts[0], "caught": caught, "calls": calls[0], "failures": failures[:5],
        "failed": len(failures), "in_use": in_use_after(), "after": after,
        "workers_alive": sum(w.is_alive() for w in workers)
    }), flush=True)
    client.close()
    faulthandler.cancel_dump_traceback_later()


if __name__ == "__main__":
    main()
