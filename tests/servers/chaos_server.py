"""A small stdio MCP server (legacy era: the initialize handshake) for the chaos tests.

Usage: chaos_server.py [--log PATH] [--fail-if PATH] [--hang-if PATH] [--unannotated PATH]
                       [--linger] [--ignore-term]

  --log PATH      append one line per process start (``start <pid>``) and per
                  ``tools/call`` (``call <pid> <tool> <key>``) to PATH, written with one
                  O_APPEND ``write`` *before* the answer, so that a call the client saw
                  succeed is always in the log, and a call the server saw twice is there
                  twice (duplicate detection across killed processes).
  --fail-if PATH  if PATH exists at start, log the start and exit 1 at once: a command
                  that starts, then dies (reconnection fails until PATH is removed).
  --hang-if PATH  if PATH exists at start, log the start and never answer (a server that
                  starts but hangs before its handshake: every connect times out).
  --unannotated PATH  if PATH exists at start, list every tool without annotations (a
                  server whose new version no longer declares ``readOnlyHint``).
  --linger        keep running after stdin closes (a server that ignores EOF).
  --ignore-term   ignore SIGTERM (only SIGKILL ends it).

Tools (``key`` is any string; the client makes it unique per call):
  echo(key)        no annotations: side effects assumed, never retried after it was sent
  lookup(key)      ``readOnlyHint``: retried after any transient failure
  die_once(token)  ``readOnlyHint``: the first call with a token (a marker file path) creates
                   the file and kills this process before answering; later calls answer
  die_once_unsafe(token)  the same, without annotations
  pid()            ``readOnlyHint``: this process's pid
  touch(uri)       sends ``notifications/resources/updated`` if ``uri`` is subscribed here
  shout(key)       sends the notification ``notifications/chaos/shout`` ``{"key": key}``
  close_stdin()    answers, then closes its stdin and lingers (stdout open): the client's
                   next write fails with EPIPE, a message that never reached a live reader
  sleep(seconds)   answers after ``seconds`` (on a thread: other requests go on)
Resources: ``chaos://a`` and ``chaos://b``, subscribable (subscriptions are per process).
"""

from __future__ import annotations

import json
import os
import signal
import sys
import threading
import time


def main() -> None:
    argv = sys.argv[1:]
    opts: dict[str, str | bool] = {}
    i = 0
    while i < len(argv):
        a = argv[i]
        if a in ("--log", "--fail-if", "--hang-if", "--unannotated"):
            opts[a] = argv[i + 1]
            i += 2
        else:
            opts[a] = True
            i += 1
    log_path = opts.get("--log")
    log_fd = os.open(log_path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644) if isinstance(log_path, str) else -1
    pid = os.getpid()

    def log(line: str) -> None:
        if log_fd >= 0:
            os.write(log_fd, (line + "\n").encode())

    log(f"start {pid}")
    fail_if = opts.get("--fail-if")
    if isinstance(fail_if, str) and os.path.exists(fail_if):
        os._exit(1)
    hang_if = opts.get("--hang-if")
    if isinstance(hang_if, str) and os.path.exists(hang_if):
        time.sleep(120)
        os._exit(1)
    if opts.get("--ignore-term"):
        signal.signal(signal.SIGTERM, signal.SIG_IGN)

    out = sys.stdout.buffer
    lock = threading.Lock()
    subscribed: set[str] = set()
    closing = threading.Event()

    def write(obj: object) -> None:
        data = json.dumps(obj, separators=(",", ":")).encode() + b"\n"
        with lock:
            out.write(data)
            out.flush()

    key_schema = {"type": "object", "properties": {"key": {"type": "string"}}}
    token_schema = {"type": "object", "properties": {"token": {"type": "string"}}}
    ro = {"readOnlyHint": True}
    tools = [
        {"name": "echo", "inputSchema": key_schema},
        {"name": "lookup", "inputSchema": key_schema, "annotations": ro},
        {"name": "die_once", "inputSchema": token_schema, "annotations": ro},
        {"name": "die_once_unsafe", "inputSchema": token_schema},
        {"name": "pid", "inputSchema": {"type": "object"}, "annotations": ro},
        {"name": "touch", "inputSchema": {"type": "object", "properties": {"uri": {"type": "string"}}}},
        {"name": "sleep", "inputSchema": {"type": "object", "properties": {"seconds": {"type": "number"}}}},
        {"name": "shout", "inputSchema": key_schema},
        {"name": "close_stdin", "inputSchema": {"type": "object"}},
    ]
    unannotated = opts.get("--unannotated")
    if isinstance(unannotated, str) and os.path.exists(unannotated):
        for tool in tools:
            tool.pop("annotations", None)
    resources = [{"uri": "chaos://a", "name": "a"}, {"uri": "chaos://b", "name": "b"}]

    def result(rid: object, res: dict) -> None:
        write({"jsonrpc": "2.0", "id": rid, "result": res})

    def text(s: str) -> dict:
        return {"content": [{"type": "text", "text": s}], "isError": False}

    def call(rid: object, params: dict) -> None:
        name = params.get("name")
        args = params.get("arguments") or {}
        key = str(args.get("key", args.get("token", args.get("uri", ""))))
        log(f"call {pid} {name} {key}")
        if name in ("echo", "lookup"):
            result(rid, text(key))
        elif name in ("die_once", "die_once_unsafe"):
            try:
                os.close(os.open(key, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644))
            except FileExistsError:
                result(rid, text(f"survived {key}"))
                return
            os.kill(pid, signal.SIGKILL)
        elif name == "close_stdin":
            result(rid, text("closing stdin"))
            closing.set()
        elif name == "shout":
            write({"jsonrpc": "2.0", "method": "notifications/chaos/shout", "params": {"key": key}})
            result(rid, text("shouted"))
        elif name == "sleep":
            def later() -> None:
                time.sleep(float(args.get("seconds", 1)))
                result(rid, text("slept"))

            threading.Thread(target=later, daemon=True).start()
        elif name == "pid":
            result(rid, text(str(pid)))
        elif name == "touch":
            sent = key in subscribed
            if sent:
                write({"jsonrpc": "2.0", "method": "notifications/resources/updated", "params": {"uri": key}})
            result(rid, text("sent" if sent else "not subscribed"))
        else:
            write({"jsonrpc": "2.0", "id": rid, "error": {"code": -32602, "message": f"Unknown tool: {name}"}})

    for line in sys.stdin.buffer:
        try:
            msg = json.loads(line)
        except ValueError:
            continue
        method = msg.get("method")
        rid = msg.get("id")
        if method is None or rid is None:
            continue
        params = msg.get("params") or {}
        if method == "initialize":
            result(rid, {
                "protocolVersion": "2025-11-25",
                "capabilities": {"tools": {}, "resources": {"subscribe": True}},
                "serverInfo": {"name": "chaos", "version": "1"},
            })
        elif method == "ping":
            result(rid, {})
        elif method == "tools/list":
            result(rid, {"tools": tools})
        elif method == "tools/call":
            call(rid, params)
        elif method == "resources/list":
            result(rid, {"resources": resources})
        elif method == "resources/read":
            uri = params.get("uri")
            result(rid, {"contents": [{"uri": uri, "text": f"{uri} from {pid}"}]})
        elif method == "resources/subscribe":
            subscribed.add(str(params.get("uri")))
            log(f"subscribe {pid} {params.get('uri')}")
            result(rid, {})
        elif method == "resources/unsubscribe":
            subscribed.discard(str(params.get("uri")))
            result(rid, {})
        else:
            write({"jsonrpc": "2.0", "id": rid, "error": {"code": -32601, "message": "Method not found"}})
        if closing.is_set():
            os.close(0)
            time.sleep(60)
            return
    if opts.get("--linger"):
        time.sleep(120)


if __name__ == "__main__":
    main()
