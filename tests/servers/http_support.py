"""Helpers for the HTTP transport tests: start real servers on 127.0.0.1, talk raw JSON-RPC.

Not a test module; the test files import it by path.
"""

from __future__ import annotations

import itertools
import json
import os
import signal
import socket
import subprocess
import sys
import threading
import time
from contextlib import contextmanager
from pathlib import Path
from typing import Any, Callable, Iterator

SERVERS = Path(__file__).resolve().parent
ROOT = SERVERS.parent.parent
PYTHON = sys.executable
MODERN = "2026-07-28"
LEGACY = "2025-11-25"
CLIENT_INFO = {"name": "mcpsync-tests", "version": "0"}


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def wait_port(port: int, proc: subprocess.Popen[bytes], timeout: float = 20.0) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise RuntimeError(f"server exited with {proc.returncode}: {_stderr(proc)}")
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=0.2):
                return
        except OSError:
            time.sleep(0.05)
    raise RuntimeError(f"server did not listen on {port} within {timeout} s")


def _stderr(proc: subprocess.Popen[bytes]) -> str:
    try:
        return (proc.stderr.read() if proc.stderr else b"").decode(errors="replace")[-2000:]
    except Exception:  # noqa: BLE001
        return ""


def stop(proc: subprocess.Popen[bytes]) -> None:
    if proc.poll() is None:
        proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(3)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(3)


@contextmanager
def run_server(argv: list[str], port: int, env: dict[str, str] | None = None) -> Iterator[subprocess.Popen[bytes]]:
    proc = subprocess.Popen(
        argv,
        cwd=str(ROOT),
        env={**os.environ, **(env or {})},
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        start_new_session=True,
    )
    try:
        wait_port(port, proc)
        yield proc
    finally:
        stop(proc)
        if proc.stderr:
            proc.stderr.close()


def sdk_server_argv(port: int, *flags: str) -> list[str]:
    return [PYTHON, str(SERVERS / "http_sdk_server.py"), "--port", str(port), *flags]


def modern_meta() -> dict[str, Any]:
    return {
        "io.modelcontextprotocol/protocolVersion": MODERN,
        "io.modelcontextprotocol/clientCapabilities": {},
        "io.modelcontextprotocol/clientInfo": CLIENT_INFO,
    }


class RawClient:
    """A tiny JSON-RPC driver over a Transport, standing in for the dispatcher.

    One reader thread pulls messages and routes responses to waiting callers; server
    requests are answered by ``on_request(method, params) -> result``; notifications are
    recorded in ``notifications``. Thread-safe.
    """

    def __init__(self, transport: Any, on_request: Callable[[str, Any], Any] | None = None) -> None:
        self.t = transport
        self.on_request = on_request
        self.notifications: list[dict[str, Any]] = []
        self.errors: list[BaseException] = []
        self.failed: dict[Any, BaseException] = {}
        self._ids = itertools.count(1)
        self._lock = threading.Lock()
        self._waiting: dict[Any, dict[str, Any]] = {}
        self._events: dict[Any, threading.Event] = {}
        self._stop = threading.Event()
        if hasattr(transport, "set_failure_handler"):
            transport.set_failure_handler(self._on_failure)
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()

    def _on_failure(self, rid: Any, exc: BaseException) -> None:
        with self._lock:
            self.failed[rid] = exc
            ev = self._events.get(rid)
        if ev:
            ev.set()

    def _read(self) -> None:
        while not self._stop.is_set():
            try:
                data = self.t.receive(0.2)
            except Exception as exc:  # noqa: BLE001
                self.errors.append(exc)
                if type(exc).__name__ == "ConnectionClosed":
                    return
                continue
            if data is None:
                continue
            try:
                msg = json.loads(data)
            except ValueError as exc:
                self.errors.append(exc)
                continue
            if "method" in msg and "id" in msg:
                threading.Thread(target=self._answer, args=(msg,), daemon=True).start()
            elif "method" in msg:
                with self._lock:
                    self.notifications.append(msg)
            else:
                with self._lock:
                    self._waiting[msg.get("id")] = msg
                    ev = self._events.get(msg.get("id"))
                if ev:
                    ev.set()

    def _answer(self, msg: dict[str, Any]) -> None:
        if self.on_request is None:
            reply = {"jsonrpc": "2.0", "id": msg["id"], "error": {"code": -32601, "message": "no handler"}}
        else:
            reply = {"jsonrpc": "2.0", "id": msg["id"], "result": self.on_request(msg["method"], msg.get("params"))}
        self.t.send(json.dumps(reply).encode())

    def request(self, method: str, params: Any = None, timeout: float = 10.0, rid: Any = None) -> dict[str, Any]:
        rid = next(self._ids) if rid is None else rid
        ev = threading.Event()
        with self._lock:
            self._events[rid] = ev
        body: dict[str, Any] = {"jsonrpc": "2.0", "id": rid, "method": method}
        if params is not None:
            body["params"] = params
        try:
            self.t.send(json.dumps(body).encode(), timeout)
            if not ev.wait(timeout):
                raise TimeoutError(f"no answer to {method} #{rid}")
            with self._lock:
                if rid in self.failed:
                    raise self.failed.pop(rid)
                return self._waiting.pop(rid)
        finally:
            with self._lock:
                self._events.pop(rid, None)

    def notify(self, method: str, params: Any = None) -> None:
        body: dict[str, Any] = {"jsonrpc": "2.0", "method": method}
        if params is not None:
            body["params"] = params
        self.t.send(json.dumps(body).encode())

    def initialize(self, capabilities: dict[str, Any] | None = None, version: str = LEGACY) -> dict[str, Any]:
        answer = self.request(
            "initialize",
            {"protocolVersion": version, "capabilities": capabilities or {}, "clientInfo": CLIENT_INFO},
        )
        self.t.set_protocol_version(answer["result"]["protocolVersion"])
        self.notify("notifications/initialized")
        return answer

    def modern(self, method: str, params: dict[str, Any] | None = None, timeout: float = 10.0) -> dict[str, Any]:
        p = dict(params or {})
        p["_meta"] = {**modern_meta(), **p.get("_meta", {})}
        return self.request(method, p, timeout)

    def wait_notification(self, method: str, timeout: float = 10.0, pred: Callable[[dict[str, Any]], bool] | None = None) -> dict[str, Any]:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            with self._lock:
                for n in self.notifications:
                    if n.get("method") == method and (pred is None or pred(n)):
                        return n
            time.sleep(0.02)
        raise TimeoutError(f"no {method} notification within {timeout} s")

    def close(self) -> None:
        self._stop.set()
        self.t.close()
        self._reader.join(2)


def text_of(answer: dict[str, Any]) -> str:
    return "".join(c.get("text", "") for c in answer["result"]["content"])
