"""mcpsync's own conformance scenarios: client behaviour the official suite has no scenario
for (the tasks extension, SEP-2663; ``skills/get``, dynamic skills, invalid entries and the
limits of SEP-2640; the extension declaration of SEP-2133).

Written the way the official ones are: a scenario is a server, started on 127.0.0.1, that
answers the client under test and records what it sent; once the client has run, the
scenario judges that traffic and reports checks (``id``, ``name``, ``description``,
``status`` SUCCESS / FAILURE / SKIPPED / INFO, ``errorMessage``, ``specReferences``). The
client is any command: it gets the server URL as its last argument and, in its environment,
``MCP_CONFORMANCE_SCENARIO`` (the scenario's name), ``MCP_CONFORMANCE_PROTOCOL_VERSION`` and
``MCP_CONFORMANCE_CONTEXT`` (JSON: what the scenario wants done, e.g. ``toolCalls``), as the
official harness gives them. A scenario passes when no check failed and one succeeded.

Usage (as the official harness, for any client):
    python -m tests.conformance.own_scenarios list
    python -m tests.conformance.own_scenarios run --scenario NAME [--spec-version V] --command "CLIENT ARGS"
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import shlex
import subprocess
import sys
import threading
import time
import uuid
from dataclasses import dataclass, field
from datetime import datetime, timezone
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

MODERN = "2026-07-28"
LEGACY = "2025-11-25"
TASKS = "io.modelcontextprotocol/tasks"
SKILLS = "io.modelcontextprotocol/skills"
META_CAPS = "io.modelcontextprotocol/clientCapabilities"
SEP_2663 = {"id": "SEP-2663", "url": "https://github.com/modelcontextprotocol/ext-tasks/blob/main/specification/2026-07-28/tasks.md"}
SEP_2640 = {"id": "SEP-2640", "url": "https://github.com/modelcontextprotocol/ext-skills/blob/main/specification/stable/skills.mdx"}
SEP_2133 = {"id": "SEP-2133", "url": "https://modelcontextprotocol.io/specification/2026-07-28/basic/extensions"}


class Refuse(Exception):
    """A JSON-RPC error answer."""

    def __init__(self, code: int, message: str, data: Any = None) -> None:
        super().__init__(message)
        self.code, self.message, self.data = code, message, data


@dataclass
class Seen:
    method: str
    params: dict[str, Any]
    headers: dict[str, str]
    t: float
    id: Any = None


def now_iso() -> str:
    return datetime.now(timezone.utc).isoformat().replace("+00:00", "Z")


def digest(data: bytes) -> str:
    return "sha256:" + hashlib.sha256(data).hexdigest()


def text_result(text: str, error: bool = False) -> dict[str, Any]:
    return {"content": [{"type": "text", "text": text}], "isError": error}


class Scenario:
    """One scenario: the server side (:meth:`handle`) and the judge (:meth:`checks`)."""

    name = ""
    description = ""
    versions: tuple[str, ...] = (MODERN,)
    context: dict[str, Any] = {}
    tools: list[dict[str, Any]] = []

    def __init__(self, version: str = MODERN) -> None:
        self.version = version
        self.seen: list[Seen] = []
        self.lock = threading.Lock()

    # -- the server

    def capabilities(self) -> dict[str, Any]:
        return {"tools": {}}

    def answer(self, msg: dict[str, Any], headers: dict[str, str]) -> dict[str, Any] | None:
        method, params, rid = msg.get("method"), msg.get("params") or {}, msg.get("id")
        if not isinstance(method, str):
            return None
        with self.lock:
            self.seen.append(Seen(method, params, headers, time.monotonic(), rid))
        if rid is None:
            return None  # a notification
        try:
            if method == "server/discover":
                result = {"supportedVersions": [MODERN], "capabilities": self.capabilities(), "ttlMs": 0,
                          "cacheScope": "public", "_meta": {"io.modelcontextprotocol/serverInfo":
                                                             {"name": f"mcpsync-conformance/{self.name}", "version": "1"}}}
            elif method == "initialize":
                result = {"protocolVersion": LEGACY, "capabilities": self.capabilities(),
                          "serverInfo": {"name": f"mcpsync-conformance/{self.name}", "version": "1"}}
            elif method == "tools/list":
                result = {"tools": self.tools, "ttlMs": 0, "cacheScope": "public"}
            elif method == "ping":
                result = {}
            else:
                result = self.handle(method, params)
        except Refuse as exc:
            error: dict[str, Any] = {"code": exc.code, "message": exc.message}
            if exc.data is not None:
                error["data"] = exc.data
            return {"jsonrpc": "2.0", "id": rid, "error": error}
        if method != "initialize" and "_meta" in params:  # a modern request
            result = {"resultType": "complete", **result}
        return {"jsonrpc": "2.0", "id": rid, "result": result}

    def handle(self, method: str, params: dict[str, Any]) -> dict[str, Any]:
        raise Refuse(-32601, f"Method not found: {method}")

    # -- the judge

    def requests(self, method: str | None = None) -> list[Seen]:
        with self.lock:
            return [s for s in self.seen if method is None or s.method == method]

    def check(self, check_id: str, description: str, ok: bool | None, why: str = "", ref: dict[str, str] = SEP_2663,
              details: Any = None) -> dict[str, Any]:
        """One check: ``ok`` None is SKIPPED (the client never got that far)."""
        status = "SKIPPED" if ok is None else "SUCCESS" if ok else "FAILURE"
        out: dict[str, Any] = {"id": check_id, "name": check_id, "description": description, "status": status,
                               "timestamp": now_iso(), "specReferences": [ref]}
        if status != "SUCCESS" and why:
            out["errorMessage"] = why
        if details is not None:
            out["details"] = details
        return out

    def checks(self) -> list[dict[str, Any]]:
        return []


# ============================================================================ tasks (SEP-2663)


def _declares(params: dict[str, Any], ext: str = TASKS) -> bool:
    caps = (params.get("_meta") or {}).get(META_CAPS) or {}
    extensions = caps.get("extensions") if isinstance(caps, dict) else None
    return isinstance(extensions, dict) and isinstance(extensions.get(ext), dict)


class _Task:
    def __init__(self, poll_ms: int) -> None:
        self.id = uuid.uuid4().hex
        self.created = now_iso()
        self.poll_ms = poll_ms
        self.started = time.monotonic()
        self.status = "working"
        self.extra: dict[str, Any] = {}
        self.ended_at: float | None = None

    def view(self) -> dict[str, Any]:
        return {"taskId": self.id, "status": self.status, "createdAt": self.created, "lastUpdatedAt": now_iso(),
                "ttlMs": 600_000, "pollIntervalMs": self.poll_ms, **self.extra}

    def end(self, status: str, **extra: Any) -> None:
        if self.ended_at is None:
            self.status, self.extra, self.ended_at = status, extra, time.monotonic()


class _TaskScenario(Scenario):
    """A task server: ``tools/call`` of a tool in :attr:`task_tools` makes a task; each
    ``tasks/get`` asks :meth:`advance` for its state. ``-32021`` without the extension."""

    poll_ms = 200
    tools = [{"name": n, "inputSchema": {"type": "object"}} for n in ("render", "greet", "forever", "explode")]

    def __init__(self, version: str = MODERN) -> None:
        super().__init__(version)
        self.tasks: dict[str, _Task] = {}
        self.answered: dict[str, float] = {}  # input request key -> when its answer came
        self.answers: dict[str, Any] = {}

    def capabilities(self) -> dict[str, Any]:
        return {"tools": {}, "extensions": {TASKS: {}}}

    def handle(self, method: str, params: dict[str, Any]) -> dict[str, Any]:
        missing = Refuse(-32021, "Missing required client capability", {"requiredCapabilities": {"extensions": {TASKS: {}}}})
        if method == "tools/call":
            if not _declares(params):
                raise missing
            task = _Task(self.poll_ms)
            with self.lock:
                self.tasks[task.id] = task
            self.created(task, params)
            return {**task.view(), "resultType": "task"}
        if method in ("tasks/get", "tasks/update", "tasks/cancel"):
            if not _declares(params):
                raise missing
            with self.lock:
                task = self.tasks.get(params.get("taskId"))  # type: ignore[arg-type]
            if task is None:
                raise Refuse(-32602, "Failed to retrieve task: Task not found")
            if method == "tasks/get":
                self.advance(task)
                return task.view()
            if method == "tasks/update":
                self.update(task, params.get("inputResponses") or {})
                return {}
            if task.ended_at is None:
                task.end("cancelled")
            return {}
        raise Refuse(-32601, f"Method not found: {method}")

    def created(self, task: _Task, params: dict[str, Any]) -> None:
        pass

    def advance(self, task: _Task) -> None:
        pass

    def update(self, task: _Task, responses: dict[str, Any]) -> None:
        pass

    # -- common judgements

    def task_ids(self) -> list[str]:
        return list(self.tasks)

    def common_checks(self) -> list[dict[str, Any]]:
        calls = self.requests("tools/call")
        tasks_requests = [s for s in self.seen if s.method.startswith("tasks/")]
        out = [
            self.check("sep-2663-client-declares-extension",
                       "The client declares io.modelcontextprotocol/tasks in the client capabilities of its tools/call "
                       "requests (and of its tasks/* requests, which a server refuses otherwise).",
                       None if not calls else all(_declares(s.params) for s in calls + tasks_requests),
                       "a tools/call or tasks/* request did not declare the extension"),
            self.check("sep-2663-no-2025-flow",
                       "The client neither asks for a task on tools/call (the 'task' parameter) nor uses tasks/result: "
                       "both are gone in SEP-2663; the server alone decides.",
                       None if not calls else not any("task" in s.params for s in calls) and not self.requests("tasks/result"),
                       "the client used the 2025-11-25 task flow"),
        ]
        named = [s for s in tasks_requests if s.headers]
        out.append(self.check(
            "sep-2663-mcp-name-header",
            "Over Streamable HTTP each tasks/get, tasks/update and tasks/cancel request sets Mcp-Name to its taskId "
            "and Mcp-Method to its method.",
            None if not named else all(s.headers.get("mcp-name") == s.params.get("taskId")
                                       and s.headers.get("mcp-method") == s.method for s in named),
            "a tasks/* request without the right Mcp-Name / Mcp-Method",
            details=[{"method": s.method, "mcp-name": s.headers.get("mcp-name")} for s in named][:10]))
        with self.lock:
            cancelled = [s for s in self.seen if s.method == "notifications/cancelled"]
        call_ids = {s.id for s in calls}
        out.append(self.check(
            "sep-2663-no-notifications-cancelled",
            "notifications/cancelled is not used to cancel a task (tasks/cancel is).",
            None if not calls else not any(s.params.get("requestId") in call_ids for s in cancelled),
            "the client sent notifications/cancelled for the tools/call that made the task"))
        return out

    def polls(self, task_id: str) -> list[Seen]:
        return [s for s in self.requests("tasks/get") if s.params.get("taskId") == task_id]


class TaskPolling(_TaskScenario):
    name = "mcpsync/sep-2663-task-polling"
    description = ("A tools/call answered with a task (resultType 'task'): the client polls tasks/get at the "
                   "server's pollIntervalMs until the task completes, takes the result inline, and stops.")
    context = {"toolCalls": [{"name": "render", "arguments": {"scene": 1}}]}
    poll_ms = 300

    def advance(self, task: _Task) -> None:
        if time.monotonic() - task.started >= 1.0:
            task.end("completed", result=text_result("rendered scene 1"))

    def checks(self) -> list[dict[str, Any]]:
        out = self.common_checks()
        task = next(iter(self.tasks.values()), None)
        polls = self.polls(task.id) if task else []
        call = next(iter(self.requests("tools/call")), None)
        out.append(self.check("sep-2663-client-polls-tasks-get",
                              "After a CreateTaskResult the client polls tasks/get with its taskId.",
                              None if task is None else bool(polls), "no tasks/get for the task"))
        if task is not None and polls and call is not None:
            times = [call.t] + [s.t for s in polls]
            gaps = [b - a for a, b in zip(times, times[1:])]
            out.append(self.check("sep-2663-poll-interval",
                                  "Clients SHOULD respect pollIntervalMs: no poll comes sooner than it after the "
                                  "previous one (or the task's creation).",
                                  all(g >= 0.9 * task.poll_ms / 1000 for g in gaps),
                                  f"polls {['%.3f' % g for g in gaps]} s apart; the server asked {task.poll_ms} ms",
                                  details={"gaps": gaps}))
            after = [s for s in polls if task.ended_at is not None and s.t > task.ended_at]
            out.append(self.check("sep-2663-stops-at-terminal",
                                  "The client stops polling once tasks/get showed the task completed (the result is "
                                  "inline), and does not cancel an ended task.",
                                  task.ended_at is not None and not after and not self.requests("tasks/cancel"),
                                  "polled again or cancelled after the task completed"
                                  if task.ended_at is not None else "the client gave up before the task completed"))
        return out


class TaskInputRequests(_TaskScenario):
    name = "mcpsync/sep-2663-input-requests"
    description = ("A task that needs input (status input_required, inputRequests with elicitations): the client "
                   "answers each request once, through tasks/update with inputResponses, even while later polls "
                   "still show an answered request (eventual consistency), then takes the result.")
    context = {"toolCalls": [{"name": "greet", "arguments": {}}], "elicitation": {"name": "Luca"}}
    poll_ms = 50
    LAG = 0.3  # an answer takes effect this long after tasks/update: polls meanwhile show it again

    def _outstanding(self) -> dict[str, Any]:
        for key in ("name", "city"):
            at = self.answered.get(key)
            if at is None or time.monotonic() - at < self.LAG:
                return {key: {"method": "elicitation/create", "params": {
                    "mode": "form", "message": f"Please enter your {key}.",
                    "requestedSchema": {"type": "object", "properties": {"name": {"type": "string"}}}}}}
        return {}

    def advance(self, task: _Task) -> None:
        if task.ended_at is not None:
            return
        pending = self._outstanding()
        if pending:
            task.status, task.extra = "input_required", {"inputRequests": pending}
        else:
            task.end("completed", result=text_result(f"Hello, {self.answers['name'].get('content', {}).get('name')}!"))

    def update(self, task: _Task, responses: dict[str, Any]) -> None:
        outstanding = self._outstanding()
        for key, answer in responses.items():
            if key in outstanding and key not in self.answered:
                self.answered[key], self.answers[key] = time.monotonic(), answer

    def checks(self) -> list[dict[str, Any]]:
        out = self.common_checks()
        updates = self.requests("tasks/update")
        keys = [k for s in updates for k in (s.params.get("inputResponses") or {})]
        asked = bool(self.polls(next(iter(self.tasks), "")))
        out.append(self.check("sep-2663-input-via-tasks-update",
                              "The client answers a task's inputRequests with tasks/update {taskId, inputResponses}, "
                              "keyed as the requests were.",
                              None if not asked else bool(updates) and set(keys) == {"name", "city"}
                              and all(s.params.get("taskId") in self.tasks for s in updates),
                              f"answered keys {keys}"))
        out.append(self.check("sep-2663-input-answered-once",
                              "Clients SHOULD deduplicate inputRequests keys across polls: each request is answered "
                              "once, though polls showed it until the answer took effect.",
                              None if not updates else len(keys) == len(set(keys)),
                              f"keys answered {keys}"))
        answer = self.answers.get("name")
        out.append(self.check("sep-2663-input-through-elicitation",
                              "An elicitation in inputRequests is treated as an elicitation/create: the client's "
                              "elicitation answer ({action, content}) is what goes back.",
                              None if answer is None else answer.get("action") == "accept"
                              and answer.get("content", {}).get("name") == "Luca",
                              f"the answer was {answer!r:.200}"))
        return out


class TaskCancelOnTimeout(_TaskScenario):
    name = "mcpsync/sep-2663-cancel-on-timeout"
    description = ("A task that never ends, called with a 1.5 s timeout: the client gives up and asks the server to "
                   "cancel it with tasks/cancel (never notifications/cancelled) before it reports the timeout.")
    context = {"toolCalls": [{"name": "forever", "arguments": {}, "timeout": 1.5}]}
    poll_ms = 100

    def checks(self) -> list[dict[str, Any]]:
        out = self.common_checks()
        cancels = self.requests("tasks/cancel")
        out.append(self.check("sep-2663-cancel-on-give-up",
                              "A client that stops waiting for a task sends tasks/cancel with its taskId.",
                              None if not self.tasks else any(s.params.get("taskId") in self.tasks for s in cancels),
                              "no tasks/cancel for the task"))
        return out


class TaskFailed(_TaskScenario):
    name = "mcpsync/sep-2663-failed-task"
    description = ("A task that fails with a JSON-RPC error (status failed, error inline): the client takes the error "
                   "from tasks/get, stops polling, and neither cancels it nor asks tasks/result.")
    context = {"toolCalls": [{"name": "explode", "arguments": {}}]}
    poll_ms = 100

    def advance(self, task: _Task) -> None:
        if time.monotonic() - task.started >= 0.3:
            task.end("failed", statusMessage="Tool execution failed: boom", error={"code": -32603, "message": "boom"})

    def checks(self) -> list[dict[str, Any]]:
        out = self.common_checks()
        task = next(iter(self.tasks.values()), None)
        if task is None or task.ended_at is None:
            out.append(self.check("sep-2663-failed-is-terminal", "The client stops at a failed task.", None))
            return out
        after = [s for s in self.polls(task.id) if s.t > task.ended_at]
        out.append(self.check("sep-2663-failed-is-terminal",
                              "failed is terminal: no poll after it, no tasks/cancel, no tasks/result.",
                              not after and not self.requests("tasks/cancel") and not self.requests("tasks/result"),
                              "the client went on after the task failed"))
        return out


# ============================================================================ extensions (SEP-2133)


class ExtensionsDeclared(Scenario):
    name = "mcpsync/sep-2133-extensions-declared"
    description = ("The client declares the extensions it implements under capabilities.extensions (identifier -> "
                   "settings object): in initialize (2025 era) and in every request's _meta client capabilities "
                   "(2026-07-28).")
    versions = (MODERN, LEGACY)
    tools = [{"name": "echo", "inputSchema": {"type": "object"}}]
    context = {"toolCalls": [{"name": "echo", "arguments": {}}]}

    def handle(self, method: str, params: dict[str, Any]) -> dict[str, Any]:
        if method == "tools/call":
            return text_result("echo")
        raise Refuse(-32601, f"Method not found: {method}")

    def checks(self) -> list[dict[str, Any]]:
        def good(ext: Any) -> bool:
            return isinstance(ext, dict) and bool(ext) and all("/" in k and isinstance(v, dict) for k, v in ext.items())

        if self.version == LEGACY:
            init = self.requests("initialize")
            ext = ((init[0].params.get("capabilities") or {}).get("extensions")) if init else None
            return [self.check("sep-2133-initialize-declares-extensions",
                               "initialize's client capabilities carry the extensions, each with a settings object.",
                               None if not init else good(ext), f"extensions: {ext!r:.200}", SEP_2133),
                    self.check("sep-2133-declares-tasks-and-skills",
                               "mcpsync declares the two extensions it implements (tasks, skills).",
                               None if not init else good(ext) and {TASKS, SKILLS} <= set(ext), f"{ext!r:.200}", SEP_2133)]
        modern = [s for s in self.seen if s.id is not None and "_meta" in s.params]
        exts = [((s.params["_meta"].get(META_CAPS) or {}).get("extensions")) for s in modern]
        return [self.check("sep-2133-every-request-declares-extensions",
                           "Every request's _meta client capabilities carry the extensions (the 2026-07-28 era has "
                           "no session to remember them).",
                           None if not modern else all(good(e) for e in exts), f"{exts[:3]!r:.300}", SEP_2133),
                self.check("sep-2133-declares-tasks-and-skills",
                           "mcpsync declares the two extensions it implements (tasks, skills).",
                           None if not exts else all(good(e) and {TASKS, SKILLS} <= set(e) for e in exts),
                           f"{exts[:1]!r:.200}", SEP_2133)]


# ============================================================================ skills (SEP-2640)


def skill_md(name: str, description: str, body: str = "Do the thing.\n") -> bytes:
    return f"---\nname: {name}\ndescription: {description}\n---\n{body}".encode()


class _SkillsScenario(Scenario):
    """A skills server: :attr:`files` (uri -> bytes) read with resources/read, :attr:`listed`
    (skills/list), :attr:`served` (skills/get), :attr:`directories` (resources/directory/read)."""

    declare: dict[str, Any] | None = {}

    def __init__(self, version: str = MODERN) -> None:
        super().__init__(version)
        self.files: dict[str, bytes] = {}
        self.listed: list[dict[str, Any]] = []
        self.served: dict[str, dict[str, Any]] = {}
        self.directories: dict[str, list[tuple[str, str]]] = {}
        self.build()

    def build(self) -> None:
        pass

    def entry(self, uri: str, name: str, description: str, members: list[str] | str) -> dict[str, Any]:
        resources: Any = members if isinstance(members, str) else [
            {"uri": u, "digest": digest(self.files[u]), "size": len(self.files[u])} for u in members]
        return {"uri": uri, "frontmatter": {"name": name, "description": description}, "resources": resources}

    def capabilities(self) -> dict[str, Any]:
        caps: dict[str, Any] = {"resources": {}}
        if self.declare is not None:
            caps["extensions"] = {SKILLS: self.declare}
        return caps

    def handle(self, method: str, params: dict[str, Any]) -> dict[str, Any]:
        if method == "skills/list":
            return {"skills": self.listed, "ttlMs": 0, "cacheScope": "public"}
        if method == "skills/get":
            entry = self.served.get(params.get("uri"))  # type: ignore[arg-type]
            if entry is None:
                raise Refuse(-32602, f"No skill is served at {params.get('uri')}")
            return {"skill": entry, "ttlMs": 0, "cacheScope": "public"}
        if method == "resources/read":
            uri = params.get("uri")
            data = self.files.get(uri)  # type: ignore[arg-type]
            if data is None:
                raise Refuse(-32602, f"Resource not found: {uri}")
            return {"contents": [{"uri": uri, "mimeType": "text/markdown", "text": data.decode()}]}
        if method == "resources/directory/read":
            children = self.directories.get(params.get("uri"))  # type: ignore[arg-type]
            if children is None:
                raise Refuse(-32602, f"{params.get('uri')} is not a directory resource")
            return {"resources": [{"uri": u, "name": u.rsplit("/", 1)[-1], "mimeType": m} for u, m in children]}
        raise Refuse(-32601, f"Method not found: {method}")

    def reads(self) -> list[str]:
        return [s.params.get("uri") for s in self.requests("resources/read")]  # type: ignore[misc]


class SkillsGetUnlisted(_SkillsScenario):
    name = "mcpsync/sep-2640-skills-get-unlisted"
    description = ("A partial (empty) listing and a skill known by its URI alone: the client loads it through "
                   "skills/get (which answers for skills not listed), then reads and verifies its SKILL.md.")
    URI = "skill://acme/billing/refunds/SKILL.md"
    context = {"skillUris": [URI]}

    def build(self) -> None:
        self.files = {self.URI: skill_md("refunds", "Process refunds"),
                      "skill://acme/billing/refunds/examples/email.md": b"Dear customer\n"}
        self.served = {self.URI: self.entry(self.URI, "refunds", "Process refunds", list(self.files))}

    def checks(self) -> list[dict[str, Any]]:
        gets = [s for s in self.requests("skills/get") if s.params.get("uri") == self.URI]
        return [self.check("sep-2640-load-by-uri-alone",
                           "Hosts MUST support loading a skill given only its URI: skills/get for it, though no "
                           "listing named it.", bool(gets), "no skills/get for the unlisted skill's URI", SEP_2640),
                self.check("sep-2640-unlisted-skill-read",
                           "The skill got from skills/get is loaded: its SKILL.md is read (its files after it).",
                           None if not gets else self.URI in self.reads(), "SKILL.md was not read", SEP_2640)]


class SkillsDynamic(_SkillsScenario):
    name = "mcpsync/sep-2640-dynamic-skill"
    description = ("A listed skill whose resources is \"dynamic\" (no manifest): the client lists it, loads it "
                   "(SKILL.md), finds its files with resources/directory/read (declared) and reads them.")
    declare = {"directoryRead": True}
    ROOT = "skill://reports/daily"

    def build(self) -> None:
        self.files = {f"{self.ROOT}/SKILL.md": skill_md("daily", "Today's report"),
                      f"{self.ROOT}/data/today.csv": b"a,b\n1,2\n"}
        self.listed = [self.entry(f"{self.ROOT}/SKILL.md", "daily", "Today's report", "dynamic"),
                       {"uri": "skill://bad/SKILL.md", "frontmatter": {"name": "bad", "description": "x"},
                        "resources": "generated"}]  # neither a manifest nor "dynamic": never loaded
        self.served = {e["uri"]: e for e in self.listed}
        self.directories = {self.ROOT: [(f"{self.ROOT}/SKILL.md", "text/markdown"), (f"{self.ROOT}/data", "inode/directory")],
                            f"{self.ROOT}/data": [(f"{self.ROOT}/data/today.csv", "text/csv")]}

    def checks(self) -> list[dict[str, Any]]:
        reads = self.reads()
        listed = bool(self.requests("skills/list"))
        return [self.check("sep-2640-dynamic-listed-and-loaded",
                           "An entry with resources \"dynamic\" is a valid skill: the client loads it (reads its "
                           "SKILL.md) instead of failing on the listing.",
                           None if not listed else f"{self.ROOT}/SKILL.md" in reads, "SKILL.md not read", SEP_2640),
                self.check("sep-2640-dynamic-files-by-directory-read",
                           "A dynamic skill's files are found by resources/directory/read (the server declared "
                           "directoryRead) and read.",
                           None if not listed else bool(self.requests("resources/directory/read"))
                           and f"{self.ROOT}/data/today.csv" in reads, f"reads: {reads}", SEP_2640),
                self.check("sep-2640-invalid-resources-not-loaded",
                           "An entry whose resources is neither an array nor \"dynamic\" is invalid: hosts MUST NOT "
                           "load it.", None if not listed else "skill://bad/SKILL.md" not in reads,
                           "the invalid entry's SKILL.md was read", SEP_2640)]


class SkillsInvalidEntries(_SkillsScenario):
    name = "mcpsync/sep-2640-invalid-entries"
    description = ("A listing with one valid skill and invalid entries (no resources; a name that is not the URI's "
                   "last segment; a manifest file outside the skill): only the valid skill is loaded.")

    def build(self) -> None:
        self.files = {u: skill_md(n, "d") for u, n in [("skill://good/SKILL.md", "good"),
                                                       ("skill://no-resources/SKILL.md", "no-resources"),
                                                       ("skill://mismatch/SKILL.md", "other"),
                                                       ("skill://escape/SKILL.md", "escape")]}
        self.files["skill://good/SKILL.md"] = skill_md("good", "d")
        bad_escape = self.entry("skill://escape/SKILL.md", "escape", "d", ["skill://escape/SKILL.md"])
        bad_escape["resources"].append({"uri": "skill://good/SKILL.md", "digest": digest(self.files["skill://good/SKILL.md"]),
                                        "size": len(self.files["skill://good/SKILL.md"])})
        no_resources = {"uri": "skill://no-resources/SKILL.md", "frontmatter": {"name": "no-resources", "description": "d"}}
        mismatch = self.entry("skill://mismatch/SKILL.md", "other", "d", ["skill://mismatch/SKILL.md"])
        self.listed = [no_resources, mismatch, bad_escape,  # the valid one last: a client that stops early fails
                       self.entry("skill://good/SKILL.md", "good", "d", ["skill://good/SKILL.md"])]
        self.served = {e["uri"]: e for e in self.listed}

    def checks(self) -> list[dict[str, Any]]:
        reads, listed = self.reads(), bool(self.requests("skills/list"))
        return [self.check("sep-2640-valid-entry-loaded", "The valid skill is loaded.",
                           None if not listed else "skill://good/SKILL.md" in reads, "its SKILL.md was not read", SEP_2640),
                self.check("sep-2640-invalid-entries-not-loaded",
                           "Entries the SEP calls invalid are never loaded: no read of their SKILL.md.",
                           None if not listed else not {"skill://no-resources/SKILL.md", "skill://mismatch/SKILL.md",
                                                        "skill://escape/SKILL.md"} & set(reads),
                           f"reads: {reads}", SEP_2640)]


class SkillsLimits(_SkillsScenario):
    name = "mcpsync/sep-2640-limits"
    description = ("Three skills: one at the limits every host must accept (512 files, 16 MiB in all), one with 513 "
                   "files, one of 16 MiB + 1 byte: the first is loaded, the others are declined before any read.")
    context = {"readFiles": False}
    MIB16 = 16 * 1024 * 1024

    def build(self) -> None:
        for name in ("at-limit", "too-many", "too-big"):
            self.files[f"skill://{name}/SKILL.md"] = skill_md(name, "limits")

        def manifest(name: str, count: int, total: int) -> dict[str, Any]:
            uri = f"skill://{name}/SKILL.md"
            md = self.files[uri]
            items = [{"uri": uri, "digest": digest(md), "size": len(md)}]
            rest = total - len(md)
            for i in range(count - 1):
                size = rest if i == 0 else 0
                items.append({"uri": f"skill://{name}/f{i}.bin", "digest": digest(b"\0" * 0 if size == 0 else b"x"),
                              "size": size})
            return {"uri": uri, "frontmatter": {"name": name, "description": "limits"}, "resources": items}

        self.listed = [manifest("at-limit", 512, self.MIB16), manifest("too-many", 513, 1000),
                       manifest("too-big", 2, self.MIB16 + 1)]
        self.served = {e["uri"]: e for e in self.listed}

    def checks(self) -> list[dict[str, Any]]:
        reads, listed = self.reads(), bool(self.requests("skills/list"))
        return [self.check("sep-2640-limits-supported",
                           "Hosts MUST support skills up to and including 512 files and 16 MiB: the skill at the "
                           "limits is loaded.", None if not listed else "skill://at-limit/SKILL.md" in reads,
                           "the skill at the limits was not loaded", SEP_2640),
                self.check("sep-2640-over-limits-declined-before-reading",
                           "A skill over a limit is declined from its entry alone, before any file is read.",
                           None if not listed else not any(u.startswith(("skill://too-many/", "skill://too-big/"))
                                                           for u in reads), f"reads: {reads}", SEP_2640)]


class SkillsNotDeclared(_SkillsScenario):
    name = "mcpsync/sep-2640-not-declared"
    description = ("A server that does not declare the skills extension (yet answers skills/list): the client "
                   "issues no skills/* and no resources/directory/read request.")
    declare = None

    def build(self) -> None:
        self.files = {"skill://x/SKILL.md": skill_md("x", "d")}
        self.listed = [self.entry("skill://x/SKILL.md", "x", "d", ["skill://x/SKILL.md"])]
        self.served = {e["uri"]: e for e in self.listed}

    def checks(self) -> list[dict[str, Any]]:
        asked = [s.method for s in self.seen if s.method.startswith("skills/") or s.method == "resources/directory/read"]
        handshake = bool(self.requests("server/discover") or self.requests("initialize"))
        return [self.check("sep-2640-no-requests-without-declaration",
                           "Clients issue skills/list and skills/get only after observing the server's declaration.",
                           None if not handshake else not asked, f"asked {asked}", SEP_2640)]


class SkillsDirectoryReadUndeclared(_SkillsScenario):
    name = "mcpsync/sep-2640-directory-read-undeclared"
    description = ("A server that declares the skills extension without directoryRead, with a dynamic skill: the "
                   "client loads it but never calls resources/directory/read.")
    declare = {}

    def build(self) -> None:
        self.files = {"skill://live/SKILL.md": skill_md("live", "d")}
        self.listed = [self.entry("skill://live/SKILL.md", "live", "d", "dynamic")]
        self.served = {e["uri"]: e for e in self.listed}
        self.directories = {"skill://live": [("skill://live/SKILL.md", "text/markdown")]}

    def checks(self) -> list[dict[str, Any]]:
        listed = bool(self.requests("skills/list"))
        return [self.check("sep-2640-dynamic-loaded", "The dynamic skill is loaded.",
                           None if not listed else "skill://live/SKILL.md" in self.reads(), "not loaded", SEP_2640),
                self.check("sep-2640-no-directory-read-undeclared",
                           "Clients MUST NOT call resources/directory/read against a server that has not declared "
                           "directoryRead: true.", None if not listed else not self.requests("resources/directory/read"),
                           "resources/directory/read was called", SEP_2640)]


SCENARIOS: dict[str, type[Scenario]] = {cls.name: cls for cls in (
    TaskPolling, TaskInputRequests, TaskCancelOnTimeout, TaskFailed, ExtensionsDeclared, SkillsGetUnlisted,
    SkillsDynamic, SkillsInvalidEntries, SkillsLimits, SkillsNotDeclared, SkillsDirectoryReadUndeclared,
)}


# ============================================================================ the harness


def serve(scenario: Scenario) -> tuple[ThreadingHTTPServer, str]:
    """The scenario's server on 127.0.0.1 (a free port), in a thread: (server, URL)."""

    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def log_message(self, *args: Any) -> None:
            pass

        def do_POST(self) -> None:
            length = int(self.headers.get("Content-Length") or 0)
            if length > 4 * 1024 * 1024:
                self.reply(413, None)
                return
            body = self.rfile.read(length)
            try:
                msg = json.loads(body)
            except ValueError:
                self.reply(400, {"jsonrpc": "2.0", "id": None, "error": {"code": -32700, "message": "Parse error"}})
                return
            headers = {k.lower(): v for k, v in self.headers.items() if k.lower().startswith("mcp-")}
            answer = scenario.answer(msg, headers) if isinstance(msg, dict) else None
            self.reply(200 if answer is not None else 202, answer)

        def reply(self, status: int, obj: Any) -> None:
            data = json.dumps(obj).encode() if obj is not None else b""
            self.send_response(status)
            if data:
                self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def do_GET(self) -> None:
            self.reply(405, None)

        do_DELETE = do_GET

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    server.daemon_threads = True
    threading.Thread(target=server.serve_forever, name=f"scenario-{scenario.name}", daemon=True).start()
    return server, f"http://127.0.0.1:{server.server_address[1]}/mcp"


@dataclass
class Outcome:
    returncode: int
    checks: list[dict[str, Any]]
    output: str = field(repr=False, default="")

    @property
    def passed(self) -> bool:
        statuses = [c["status"] for c in self.checks]
        return "FAILURE" not in statuses and "SUCCESS" in statuses

    def explain(self) -> str:
        bad = [f"  {c['id']}: {c['status']} {c.get('errorMessage', '')}" for c in self.checks
               if c["status"] not in ("SUCCESS", "INFO")]
        return f"client exit {self.returncode}\n" + "\n".join(bad) + "\n--- client output (tail) ---\n" + self.output[-4000:]


def run(name: str, command: list[str], version: str | None = None, timeout: float = 60.0,
        env: dict[str, str] | None = None) -> Outcome:
    """One scenario against the client ``command`` (the URL appended), bounded by ``timeout``."""
    cls = SCENARIOS[name]
    scenario = cls(version or cls.versions[0])
    server, url = serve(scenario)
    try:
        child_env = {**os.environ, **(env or {}), "MCP_CONFORMANCE_SCENARIO": name,
                     "MCP_CONFORMANCE_PROTOCOL_VERSION": scenario.version,
                     "MCP_CONFORMANCE_CONTEXT": json.dumps(cls.context)}
        try:
            proc = subprocess.run([*command, url], capture_output=True, text=True, timeout=timeout, env=child_env)
            code, output = proc.returncode, proc.stdout + proc.stderr
        except subprocess.TimeoutExpired as exc:
            partial = exc.stderr or b""
            return Outcome(-1, [], f"client still running after {timeout:g} s\n"
                           + (partial.decode(errors="replace") if isinstance(partial, bytes) else partial))
        return Outcome(code, scenario.checks(), output)
    finally:
        server.shutdown()
        server.server_close()


def main(argv: list[str]) -> int:
    ap = argparse.ArgumentParser(prog="own_scenarios")
    sub = ap.add_subparsers(dest="what", required=True)
    sub.add_parser("list")
    one = sub.add_parser("run")
    one.add_argument("--scenario", required=True, choices=sorted(SCENARIOS))
    one.add_argument("--spec-version")
    one.add_argument("--command", required=True)
    args = ap.parse_args(argv)
    if args.what == "list":
        for name, cls in SCENARIOS.items():
            print(f"- {name} [{', '.join(cls.versions)}]: {cls.description}")
        return 0
    outcome = run(args.scenario, shlex.split(args.command), args.spec_version)
    print(json.dumps(outcome.checks, indent=2))
    return 0 if outcome.passed else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))

