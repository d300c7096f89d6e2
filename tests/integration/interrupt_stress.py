"""Ctrl-C under load, as a program of its own (run by tests/integration/test_interrupts.py).

Usage: interrupt_stress.py TRANSPORT SERVER [--interrupts N] [--seconds S] [--threads T] [--storm]

TRANSPORT is ``stdio``, ``http``, ``sse`` (legacy HTTP+SSE) or ``inprocess``; SERVER is ``everything`` (npm
server-everything), ``chaos`` (tests/servers/chaos_server.py, stdio), ``raw``
(tests/servers/raw_server.py, stdio) or ``sdk`` (tests/servers/http_sdk_server.py over HTTP;
in process, an official SDK ``MCPServer`` with the same ``echo``: every answer reaches the
reading thread through the transport's queue). The main thread calls ``echo``
in a loop while T other threads do the same on the same Client, and a thread sends the
process SIGINT about every millisecond (at random, 0.2-1.8 ms apart): the default handler
raises KeyboardInterrupt in the main thread at whatever bytecode it is running, inside the
client. The handler is armed only while the main thread is inside ``call_tool``, so the
interrupts land in the client, never in this harness's own bookkeeping; it fires once per
call, or (``--storm``) at every signal until the call has left, the client's own clean-up
after an interrupt included. After N interrupts delivered (or S seconds), the interrupter stops; then:

* the client must still work: a call on the main thread answers within 10 s;
* no call of another thread may have failed (each may only succeed);
* ``close()`` must end a stdio server (its pid is gone) within 10 s.

The last line printed is a JSON object of the figures (``delivered``, ``main_calls``,
``main_interrupted``, ``other_calls``, ``other_failed``, ``after_ok``, ``close_s``,
``server_gone``, ``failures``); the exit code is 0 when every check held, 1 otherwise.
A wedge shows as the test's hard timeout killing this process.
"""

from __future__ import annotations

import argparse
import faulthandler
import json
import os
import random
import signal
import sys
import threading
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent.parent
sys.path.insert(0, str(ROOT))

from mcpsync import Client, Timeouts  # noqa: E402
from tests.conftest import everything_command, free_port, server_command  # noqa: E402
from tests.servers.chaos_support import is_gone  # noqa: E402
from tests.servers.http_support import run_server, sdk_server_argv  # noqa: E402

armed = [False]
delivered = [0]
storm = [False]  # --storm: every SIGINT while the main thread is inside call_tool raises, not only the first


def on_sigint(signum: int, frame: Any) -> None:
    if armed[0]:
        armed[0] = storm[0]
        delivered[0] += 1
        raise KeyboardInterrupt


def echo_args(server: str, text: str) -> dict[str, Any]:
    return {"key": text} if server == "chaos" else {"message": text}


def echo_text(server: str, text: str) -> str:
    return text if server in ("chaos", "raw") else f"Echo: {text}"  # (everything, sdk, sdk-json)


def run(client: Client, server: str, interrupts: int, seconds: float, nthreads: int, pid_of: Any) -> dict[str, Any]:
    failures: list[str] = []
    stop = threading.Event()
    other_calls = [0] * nthreads
    other_failed: list[str] = []

    def other(i: int) -> None:
        n = 0
        while not stop.is_set():
            text = f"t{i}-{n}"
            try:
                got = client.call_tool("echo", echo_args(server, text), timeout=30).text
                if got != echo_text(server, text):
                    other_failed.append(f"thread {i}: {got!r} for {text!r}")
            except Exception as exc:  # noqa: BLE001 - every failure is a lost call
                other_failed.append(f"thread {i}: {type(exc).__name__}: {exc}")
            n += 1
            other_calls[i] = n

    # the first call connects (uninterrupted)
    assert client.call_tool("echo", echo_args(server, "hello")).text == echo_text(server, "hello")
    pid = pid_of()
    threads = [threading.Thread(target=other, args=(i,), daemon=True) for i in range(nthreads)]
    for t in threads:
        t.start()
    main_id = threading.main_thread().ident
    assert main_id is not None

    def interrupter() -> None:
        rnd = random.Random(1)
        while not stop.is_set():
            signal.pthread_kill(main_id, signal.SIGINT)
            time.sleep(rnd.uniform(0.0002, 0.0018))

    signal.signal(signal.SIGINT, on_sigint)
    ticker = threading.Thread(target=interrupter, daemon=True)
    main_calls = main_interrupted = 0
    ends = time.monotonic() + seconds
    ticker.start()
    while delivered[0] < interrupts and time.monotonic() < ends:
        text = f"main-{main_calls}"
        try:
            armed[0] = True
            got = client.call_tool("echo", echo_args(server, text), timeout=30).text
            armed[0] = False
            main_calls += 1
            if got != echo_text(server, text):
                failures.append(f"main: {got!r} for {text!r}")
        except KeyboardInterrupt:
            armed[0] = False
            main_interrupted += 1
        except Exception as exc:  # noqa: BLE001
            armed[0] = False
            failures.append(f"main: {type(exc).__name__}: {exc}")
            if len(failures) > 20:
                break
    armed[0] = False
    stop.set()
    ticker.join(5)
    signal.signal(signal.SIGINT, signal.default_int_handler)
    for t in threads:
        t.join(40)
        if t.is_alive():
            failures.append(f"{t.name} still calling 40 s after the interrupts stopped")
    after_ok = False
    try:
        after_ok = client.call_tool("echo", echo_args(server, "after"), timeout=10).text == echo_text(server, "after")
    except Exception as exc:  # noqa: BLE001
        failures.append(f"after: {type(exc).__name__}: {exc}")
    if not after_ok:
        failures.append("the client no longer works after the interrupts")
    if other_failed:
        failures.append(f"{len(other_failed)} calls of other threads failed, e.g. {other_failed[:3]}")
    started = time.monotonic()
    client.close()
    close_s = time.monotonic() - started
    gone = True
    if pid is not None:
        deadline = time.monotonic() + 10
        while not is_gone(pid) and time.monotonic() < deadline:
            time.sleep(0.02)
        gone = is_gone(pid)
        if not gone:
            failures.append(f"the server (pid {pid}) still runs after close()")
    return {
        "delivered": delivered[0], "main_calls": main_calls, "main_interrupted": main_interrupted,
        "other_calls": sum(other_calls), "other_failed": len(other_failed), "after_ok": after_ok,
        "close_s": round(close_s, 3), "server_gone": gone, "failures": failures,
    }


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("transport", choices=["stdio", "http", "sse", "inprocess"])
    ap.add_argument("server", choices=["everything", "chaos", "raw", "sdk", "sdk-json"])
    ap.add_argument("--interrupts", type=int, default=3000)
    ap.add_argument("--seconds", type=float, default=60.0)
    ap.add_argument("--threads", type=int, default=4)
    ap.add_argument("--storm", action="store_true", help="raise at every SIGINT inside a call (cleanup included)")
    opts = ap.parse_args()
    faulthandler.register(signal.SIGUSR1, all_threads=True)  # the test's view of a wedge
    storm[0] = opts.storm
    timeouts = Timeouts(close=2.0)
    if opts.transport == "stdio":
        argv = {"everything": lambda: everything_command("stdio"), "chaos": lambda: server_command("chaos_server.py"),
                "raw": lambda: server_command("raw_server.py")}[opts.server]()
        client = Client.stdio(argv[0], argv[1:], timeouts=timeouts, name=opts.server)

        report = run(client, opts.server, opts.interrupts, opts.seconds, opts.threads,
                     lambda: client.diagnostics().pids[0])
    elif opts.transport == "inprocess":
        from mcp.server.mcpserver import MCPServer

        server = MCPServer("echo")

        @server.tool()
        def echo(message: str) -> str:
            """Echo the message back."""
            return f"Echo: {message}"

        client = Client.local(server, timeouts=timeouts, name=opts.server)
        report = run(client, opts.server, opts.interrupts, opts.seconds, opts.threads, lambda: None)
    elif opts.transport == "sse":  # server-everything's legacy HTTP+SSE endpoint: answers come on the GET stream
        port = free_port()
        with run_server(everything_command("sse"), port, {"PORT": str(port)}):
            client = Client.sse(f"http://127.0.0.1:{port}/sse", timeouts=timeouts, name=opts.server)
            report = run(client, opts.server, opts.interrupts, opts.seconds, opts.threads, lambda: None)
    else:
        port = free_port()
        if opts.server == "everything":
            argv, env, url = everything_command("streamableHttp"), {"PORT": str(port)}, f"http://127.0.0.1:{port}/mcp"
        else:
            flags = ["--json"] if opts.server == "sdk-json" else []
            argv, env, url = sdk_server_argv(port, *flags), {}, f"http://127.0.0.1:{port}/mcp"
        with run_server(argv, port, env):
            client = Client.http(url, timeouts=timeouts, name=opts.server)
            report = run(client, opts.server, opts.interrupts, opts.seconds, opts.threads, lambda: None)
    print(json.dumps(report), flush=True)
    return 0 if not report["failures"] else 1


if __name__ == "__main__":
    sys.exit(main())
