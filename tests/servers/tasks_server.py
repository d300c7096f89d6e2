"""An MCP server (2026-07-28 era) of the tasks extension, written to SEP-2663's text
(``io.modelcontextprotocol/tasks``), over stdio or Streamable HTTP (JSON answers, stateless).

A ``tools/call`` of a task tool whose request declares the extension in its
``_meta`` client capabilities is answered with a task (``resultType: "task"``); without the
declaration the server answers -32021 naming the extension it requires (``quick`` runs
either way). ``tasks/get`` gives the task with its ``result``, ``error`` or ``inputRequests``
inline; ``tasks/update`` takes ``inputResponses``; ``tasks/cancel`` acknowledges. Over HTTP a
``tasks/*`` request whose ``Mcp-Name`` header is not its ``params.taskId`` is refused (HTTP
400, -32020), as a balancer routing on it would misroute it.

Tools:
  slow {seconds, text}   working for ``seconds`` (default 0.3), then completed "done: <text>"
  steps {steps, seconds} working, its statusMessage "step i/n" moving on every ``seconds``
  ask {rounds, lag}      input_required: one elicitation per round (keys ``name-1``, ``name-2``…),
                         then completed "Hello, <names>"; an answer takes effect ``lag`` seconds
                         after tasks/update (eventual consistency: polls meanwhile show it again)
  sample {}              input_required: a sampling/createMessage, then completed with its text
  fail {}                failed with the JSON-RPC error -32603 "boom"
  tool_error {}          completed with an isError result
  forever {}             working until cancelled (tasks/cancel: status cancelled)
  quick {}               a plain CallToolResult: the server decides not to make a task
Every tool takes ``poll_ms`` (the task's pollIntervalMs; default ``--poll-ms``).

``test/log`` answers ``{"requests": [{"method", "params", "headers", "t"}, ...]}``: every
request so far (HTTP headers in lower case; ``t``: the server's monotonic clock).

Usage: tasks_server.py [--http PORT] [--poll-ms N]
"""

from __future__ import annotations

import argparse
import json
import sys
import threading
import time
import uuid
from datetime import datetime, timezone
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

MODERN = "2026-07-28"
EXT = "io.modelcontextprotocol/tasks"
META_VERSION = "io.modelcontextprotocol/protocolVersion"
META_CAPS = "io.modelcontextprotocol/clientCapabilities"
TASK_TOOLS = ("slow", "steps", "ask", "sample", "fail", "tool_error", "forever")


def now_iso() -> str:
    return datetime.now(timezone.utc).isoformat().replace("+00:00", "Z")


def text(s: str, error: bool = False) -> dict[str, Any]:
    return {"content": [{"type": "text", "text": s}], "isError": error}


class Failure(Exception):
    def __init__(self, code: int, message: str, data: Any = None) -> None:
        super().__init__(message)
        self.code, self.message, self.data = code, message, data


class TaskState:
    def __init__(self, tool: str, args: dict[str, Any], poll_ms: int) -> None:
        self.id = uuid.uuid4().hex  # unguessable, as the SEP asks
        self.tool = tool
        self.args = args
        self.poll_ms = int(args.get("poll_ms", poll_ms))
        self.created = now_iso()
        self.updated = self.created
        self.started = time.monotonic()
        self.cancelled = False
        self.answers: dict[str, Any] = {}
        self.answered_at: dict[str, float] = {}

    def outstanding(self) -> dict[str, Any]:
        """The input requests not answered yet (a point-in-time snapshot)."""
        if self.tool == "ask":
            lag = float(self.args.get("lag", 0))
            for i in range(1, int(self.args.get("rounds", 1)) + 1):
                key = f"name-{i}"
                at = self.answered_at.get(key)
                if at is None or time.monotonic() - at < lag:  # (an answer shows up only after ``lag``)
                    return {key: {"method": "elicitation/create", "params": {
                        "mode": "form", "message": f"Please enter name {i}.",
                        "requestedSchema": {"type": "object", "properties": {"name": {"type": "string"}},
                                            "required": ["name"]}}}}
        if self.tool == "sample" and "s-1" not in self.answers:
            return {"s-1": {"method": "sampling/createMessage", "params": {
                "messages": [{"role": "user", "content": {"type": "text", "text": "Say something"}}],
                "maxTokens": 20}}}
        return {}

    def view(self) -> dict[str, Any]:
        """The task as tasks/get shows it now (DetailedTask)."""
        base: dict[str, Any] = {"taskId": self.id, "createdAt": self.created, "lastUpdatedAt": self.updated,
                                "ttlMs": 600_000, "pollIntervalMs": self.poll_ms}
        if self.cancelled:
            return {**base, "status": "cancelled", "statusMessage": "cancelled by the client"}
        elapsed = time.monotonic() - self.started
        tool, args = self.tool, self.args
        if tool == "slow":
            if elapsed < float(args.get("seconds", 0.3)):
                return {**base, "status": "working"}
            return {**base, "status": "completed", "result": text(f"done: {args.get('text', '')}")}
        if tool == "steps":
            n, each = int(args.get("steps", 3)), float(args.get("seconds", 0.2))
            step = int(elapsed / each) + 1
            if step <= n:
                return {**base, "status": "working", "statusMessage": f"step {step}/{n}"}
            return {**base, "status": "completed", "result": text(f"{n} steps")}
        if tool in ("ask", "sample"):
            pending = self.outstanding()
            if pending:
                return {**base, "status": "input_required", "inputRequests": pending}
            if tool == "ask":
                names = [a.get("content", {}).get("name", "?") for _k, a in sorted(self.answers.items())]
                return {**base, "status": "completed", "result": text("Hello, " + " and ".join(names))}
            said = self.answers["s-1"].get("content", {}).get("text", "")
            return {**base, "status": "completed", "result": text(f"the model said: {said}")}
        if tool == "fail":
            return {**base, "status": "failed", "statusMessage": "Tool execution failed: boom",
                    "error": {"code": -32603, "message": "boom"}}
        if tool == "tool_error":
            return {**base, "status": "completed", "result": text("bad input", error=True)}
        return {**base, "status": "working"}  # forever

    def update(self, responses: dict[str, Any]) -> None:
        for key, answer in responses.items():
            if key in self.outstanding() and key not in self.answers:  # others are ignored, as the SEP asks
                self.answers[key] = answer
                self.answered_at[key] = time.monotonic()
        self.updated = now_iso()


class Server:
    def __init__(self, poll_ms: int) -> None:
        self.poll_ms = poll_ms
        self.lock = threading.Lock()
        self.tasks: dict[str, TaskState] = {}
        self.log: list[dict[str, Any]] = []

    def handle(self, msg: dict[str, Any], headers: dict[str, str] | None = None) -> dict[str, Any] | None:
        rid, method = msg.get("id"), msg.get("method")
        params = msg.get("params") or {}
        if method is None or rid is None:
            return None  # a notification or a response: nothing to answer
        with self.lock:
            self.log.append({"method": method, "params": params, "headers": headers or {}, "t": time.monotonic()})
        try:
            result = self.dispatch(method, params)
        except Failure as exc:
            error: dict[str, Any] = {"code": exc.code, "message": exc.message}
            if exc.data is not None:
                error["data"] = exc.data
            return {"jsonrpc": "2.0", "id": rid, "error": error}
        return {"jsonrpc": "2.0", "id": rid, "result": {"resultType": "complete", **result}}

    @staticmethod
    def declares(params: dict[str, Any]) -> bool:
        caps = (params.get("_meta") or {}).get(META_CAPS) or {}
        return EXT in (caps.get("extensions") or {})

    def dispatch(self, method: str, params: dict[str, Any]) -> dict[str, Any]:
        if method == "server/discover":
            return {"supportedVersions": [MODERN], "ttlMs": 0, "cacheScope": "public",
                    "capabilities": {"tools": {}, "extensions": {EXT: {}}},
                    "_meta": {"io.modelcontextprotocol/serverInfo": {"name": "tasks", "version": "1"}}}
        if method == "test/log":
            with self.lock:
                return {"requests": list(self.log)}
        if method == "tools/list":
            tools = [{"name": n, "inputSchema": {"type": "object"}} for n in (*TASK_TOOLS, "quick")]
            return {"tools": tools, "ttlMs": 0, "cacheScope": "public"}
        if method == "tools/call":
            name = params.get("name")
            if name == "quick":
                return text("quick")
            if name not in TASK_TOOLS:
                raise Failure(-32602, f"Unknown tool: {name}")
            if not self.declares(params):
                raise Failure(-32021, "Missing required client capability",
                              {"requiredCapabilities": {"extensions": {EXT: {}}}})
            task = TaskState(name, params.get("arguments") or {}, self.poll_ms)
            with self.lock:
                self.tasks[task.id] = task
            seed = {k: v for k, v in task.view().items() if k not in ("result", "error", "inputRequests")}
            return {**seed, "status": "working", "resultType": "task"}
        if method in ("tasks/get", "tasks/update", "tasks/cancel"):
            if not self.declares(params):
                raise Failure(-32021, "Missing required client capability",
                              {"requiredCapabilities": {"extensions": {EXT: {}}}})
            with self.lock:
                task = self.tasks.get(params.get("taskId"))  # type: ignore[arg-type]
                if task is None:
                    raise Failure(-32602, "Failed to retrieve task: Task not found")
                if method == "tasks/get":
                    return task.view()
                if method == "tasks/update":
                    task.update(params.get("inputResponses") or {})
                    return {}
                if task.view()["status"] not in ("completed", "failed"):
                    task.cancelled = True
                return {}
        raise Failure(-32601, f"Method not found: {method}")


def serve_stdio(server: Server) -> None:
    out = sys.stdout
    lock = threading.Lock()
    for line in sys.stdin:
        try:
            msg = json.loads(line)
        except ValueError:
            continue
        reply = server.handle(msg)
        if reply is not None:
            with lock:
                out.write(json.dumps(reply) + "\n")
                out.flush()


def serve_http(server: Server, port: int) -> None:
    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def log_message(self, *args: Any) -> None:
            pass

        def do_POST(self) -> None:
            body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
            headers = {k.lower(): v for k, v in self.headers.items()}
            try:
                msg = json.loads(body)
            except ValueError:
                self.reply(400, {"jsonrpc": "2.0", "id": None, "error": {"code": -32700, "message": "Parse error"}})
                return
            method = msg.get("method") or ""
            if method.startswith("tasks/") and headers.get("mcp-name") != (msg.get("params") or {}).get("taskId"):
                self.reply(400, {"jsonrpc": "2.0", "id": msg.get("id"), "error": {
                    "code": -32020, "message": f"Mcp-Name {headers.get('mcp-name')!r} is not the taskId"}})
                with server.lock:
                    server.log.append({"method": method, "params": msg.get("params") or {}, "headers": headers,
                                       "t": time.monotonic(), "refused": True})
                return
            reply = server.handle(msg, headers)
            if reply is None:
                self.send_response(202)
                self.send_header("Content-Length", "0")
                self.end_headers()
                return
            self.reply(200, reply)

        def reply(self, status: int, obj: dict[str, Any]) -> None:
            data = json.dumps(obj).encode()
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def do_GET(self) -> None:
            self.send_response(405)
            self.send_header("Content-Length", "0")
            self.end_headers()

        do_DELETE = do_GET

    httpd = ThreadingHTTPServer(("127.0.0.1", port), Handler)
    httpd.daemon_threads = True
    httpd.serve_forever()


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--http", type=int, default=0)
    ap.add_argument("--poll-ms", type=int, default=50)
    opts = ap.parse_args()
    server = Server(opts.poll_ms)
    if opts.http:
        serve_http(server, opts.http)
    else:
        serve_stdio(server)


if __name__ == "__main__":
    main()
