"""Tools: listing through the tool cache, one tool's definition, and ``tools/call``.

``tools/call`` has one body (:meth:`Tools.call`). What it needs to know about the tool
(retry safety from its annotations, whether it runs only as a task, its
``outputSchema``) comes from the tool cache when the cache holds the server's list.
On a cold cache the call goes out first, and the tool is learned only when that
matters: after a failure (is it safe to retry? is it a task-only tool?) or after a
result with structured content (to check it). Learning is a ``tools/list`` bounded by
what is left of the call's time (at most 10 s, no retries); when it fails, results go
unchecked for a minute.

A ``-32042`` URL-elicitation-required error is shown to the elicitation handler and,
when every URL was accepted, the call is retried once.

Modern-era (2026-07-28) ``Mcp-Param-*`` headers live here too: every ``tools/list``
page the tools layer fetches teaches its :class:`ParamHeaders` the ``x-mcp-header``
annotations of each tool's input schema (a tool whose annotations are invalid is dropped
from the listing, with a warning); the session holds the same :class:`ParamHeaders` and
asks it to turn a call's arguments into the header values, which it passes down with the
request for the HTTP transport to send.
A ``-32020`` HeaderMismatch answer to a modern ``tools/call`` re-lists the tools (every
page, through the normal path) and retries the call once.
"""

from __future__ import annotations

import logging
import time
from operator import attrgetter
from typing import Any, Callable, Mapping

import msgspec

from ._cache import EXPLICIT, LIST_CHANGED, ToolCache, ToolSet
from ._errors import HEADER_MISMATCH, URL_ELICITATION_REQUIRED, MCPError, RemoteError
from ._retry import tool_is_retry_safe
from ._messages import CallToolResult, ListToolsResult, Tool
from ._paging import paginate
from ._policies import RetryPolicy
from ._tasks import Tasks
from ._schema import validate_output
from ._ports import Requester
from ._settings import Settings
from .transports._http_headers import header_annotation_error, header_annotations, mcp_param_headers

__all__ = ["Tools", "ParamHeaders", "call_facts", "call_plan"]

log = logging.getLogger("mcpsync.client")

_monotonic = time.monotonic

#: Seconds a failed hidden discovery keeps get_tool from trying again.
DISCOVERY_BACKOFF = 60.0


def call_facts(tool: Tool) -> tuple[bool, bool]:
    """(retry safe, task-only) of a listed tool (kept with its listing: :func:`call_plan`)."""
    return tool_is_retry_safe(tool), _task_only(tool)


def call_plan(listed: ToolSet, name: str) -> tuple[Tool, bool, bool, bool] | None:
    """(tool, retry safe, task-only, may have an ``outputSchema``) of the tool ``name`` in
    ``listed`` (None: not listed), worked out on its first call and kept on the listing:
    ``call_tool`` asks on every call. (The schema itself is decoded on the first result to
    check: a tool that sent none has nothing to decode, or look up, on any call.)"""
    plan: tuple[Tool, bool, bool, bool] | None = listed.plans.get(name)
    if plan is None:
        tool = listed.by_name.get(name)
        if tool is None:
            return None
        plan = listed.plans[name] = (tool, *call_facts(tool), len(tool.output_schema_json) > 0)
    return plan


_X_MCP_HEADER = b"x-mcp-header"
_JOIN = b"".join  # takes the schemas' msgspec.Raw buffers as they are
_INPUT_SCHEMA = attrgetter("input_schema_json")


def _header_annotations(tool: Tool) -> tuple[dict[tuple[str, ...], str], str | None]:
    """(property path → header token, why they are invalid or None) of a listed tool.

    Only a schema whose JSON names ``x-mcp-header`` is decoded for it."""
    if _X_MCP_HEADER not in bytes(tool.input_schema_json):
        return {}, None
    try:
        schema: Any = msgspec.json.decode(tool.input_schema_json)
    except msgspec.DecodeError:
        return {}, None
    problem = header_annotation_error(schema)
    return ({} if problem is not None else header_annotations(schema)), problem


def _task_only(tool: Tool) -> bool:
    execution = tool.execution
    return bool(execution) and execution.get("taskSupport") == "required"  # type: ignore[union-attr]


class ParamHeaders:
    """The modern era's ``Mcp-Param-*`` headers: what the tools part learned from its listings,
    asked by the session on every modern ``tools/call`` (one object, held by both)."""

    def __init__(self) -> None:
        #: tool name → its x-mcp-header annotations (property path → header token), as
        #: the last listing of the modern era showed them; only tools that have some (the
        #: session reads it on every modern tools/call: empty, it skips :meth:`headers`)
        self.annotations: dict[str, dict[tuple[str, ...], str]] = {}

    def learn(self, page: ListToolsResult, modern: Callable[[], bool]) -> ListToolsResult:
        """Learn the page's ``x-mcp-header`` annotations (modern era) and drop the tools
        whose annotations are invalid."""
        known = self.annotations
        tools = page.tools
        # one search of every input schema at once (joined in C, no copy per schema): a
        # listing where none names x-mcp-header, the usual one, has no tool to look into
        if _X_MCP_HEADER not in _JOIN(map(_INPUT_SCHEMA, tools)):
            if known:
                for tool in tools:
                    known.pop(tool.name, None)
            return page
        dropped = False
        kept: list[Tool] = []
        is_modern: bool | None = None
        for tool in tools:
            annotations, problem = _header_annotations(tool)
            if annotations or problem is not None:
                if is_modern is None:
                    is_modern = modern()  # only tools that carry annotations ask
                if not is_modern:
                    annotations, problem = {}, None
            if problem is not None:
                log.warning("tool %r dropped: %s", tool.name, problem)
                known.pop(tool.name, None)
                dropped = True
                continue
            if annotations:
                known[tool.name] = annotations
            else:
                known.pop(tool.name, None)
            kept.append(tool)
        return msgspec.structs.replace(page, tools=kept) if dropped else page

    def headers(self, params: Mapping[str, Any]) -> dict[str, str] | None:
        """The ``Mcp-Param-*`` headers of a modern ``tools/call`` with these ``params``
        (None when the tool has no ``x-mcp-header`` annotations, or none applies)."""
        known = self.annotations
        if not known:
            return None
        annotations = known.get(params.get("name"))  # type: ignore[arg-type]
        if annotations is None:
            return None
        arguments = params.get("arguments")
        if type(arguments) is msgspec.Raw:
            arguments = msgspec.json.decode(arguments)
        return mcp_param_headers(annotations, arguments) or None


class Tools:
    """The tool methods of one Client, over its :class:`~mcpsync._cache.ToolCache`.

    Args:
        settings: the Client's settings (name, request timeout, cache credential).
        session: where requests go.
        cache: the tool cache (the Client's, shared with its diagnostics).
        tasks: the tasks part (a call the server makes a task, or a task-only tool).
        headers: the ``Mcp-Param-*`` annotations it learns (the session reads them).
        url_prerequisites: shows a ``-32042`` error's URL elicitations to the user's
            handler; True when every one was accepted (the handlers part).
    """

    def __init__(
        self, settings: Settings, session: Requester, cache: ToolCache, tasks: Tasks, headers: ParamHeaders,
        url_prerequisites: Callable[[RemoteError], bool],
    ) -> None:
        self.name = settings.name
        self.credential = settings.credential
        self.request_timeout = settings.timeouts.request
        self.session = session
        self.cache = cache
        self.tasks = tasks
        self.headers = headers
        self.url_prerequisites = url_prerequisites
        self.discovery_backoff_until = 0.0  # a failed hidden tools/list is not retried before

    # ------------------------------------------------------------------ listing

    def list_tools(self, timeout: float | None, refresh: bool) -> list[Tool]:
        if refresh:
            self.cache.invalidate(self.name, EXPLICIT)
        found = self.cache.fetch(self.name, lambda: self.pages(timeout), self.credential)
        return list(found.tools)

    def list_changed(self) -> None:
        """``notifications/tools/list_changed``: rediscover on next use, and at once if a
        failed discovery was holding lookups back."""
        self.discovery_backoff_until = 0.0
        self.cache.invalidate(self.name, LIST_CHANGED)

    def pages(self, timeout: float | None, retry: RetryPolicy | None = None) -> list[ListToolsResult]:
        session = self.session
        learn = self.headers.learn

        def fetch(cursor: str | None) -> ListToolsResult:
            page: ListToolsResult = session.request("tools/list", {"cursor": cursor} if cursor else None, timeout, None, None, None, retry)
            return learn(page, self._modern)

        return list(paginate(fetch, server=self.name, method="tools/list"))

    def _modern(self) -> bool:
        return self.session.facts().era == "modern"

    def get(self, name: str, timeout: float | None) -> Tool | None:
        """The definition of one tool, from the tool cache (discovering once if needed)."""
        cache = self.cache
        cred = self.credential
        found = None
        if cache.peek(self.name, cred) is None:
            if time.monotonic() < self.discovery_backoff_until:
                return None
            bound = min(timeout if timeout is not None else self.request_timeout, 10.0)
            try:
                found = cache.fetch(self.name, lambda: self.pages(bound, retry=RetryPolicy.NONE), cred)
            except MCPError as exc:
                self.discovery_backoff_until = time.monotonic() + DISCOVERY_BACKOFF
                log.info("%s: tools/list failed (%s); tool results go unchecked for a minute", self.name, exc)
                return None
        tool: Tool | None = cache.lookup(self.name, name, cred)
        if tool is None and found is not None:  # (not kept: a change came while it was asked for; still the server's word)
            tool = found.by_name.get(name)
        return tool

    def check_result(self, tool: Tool | str, result: CallToolResult) -> CallToolResult:
        """Validate ``result.structured_content`` against the tool's ``outputSchema``
        (``isError`` results are not checked)."""
        info = self.get(tool, None) if isinstance(tool, str) else tool
        if info is None or info.output_schema is None or result.is_error:
            return result
        validate_output(info.output_schema, result.structured_content, tool=info.name)
        return result

    # ------------------------------------------------------------------ calling

    def call(
        self,
        name: str,
        arguments: Mapping[str, Any] | None,
        timeout: float | None,
        progress: Any,
        meta: Mapping[str, Any] | None,
        retry_safe: bool,
        task: bool | None,
        validate: bool,
    ) -> CallToolResult:
        """``tools/call``, the one body (see the module's docstring)."""
        began = _monotonic()  # a task the server makes of the call is waited for in what is left
        listed = self.cache.peek(self.name, self.credential)  # harness work: not counted
        plan = None if listed is None else listed.plans.get(name) or call_plan(listed, name)
        definition = None
        schema = False  # the tool may have an outputSchema to check its result against
        ends = 0.0
        if listed is None:  # cold: what the call may spend on learning the tool after its answer
            ends = time.monotonic() + (self.request_timeout if timeout is None else timeout)
        safe: bool | Callable[[], bool] = retry_safe
        as_task = task is True
        if plan is not None:
            definition, tool_safe, task_only, schema = plan
            safe = tool_safe or retry_safe
            as_task = as_task or (task is None and task_only)  # task-only: run as a task, wait for it
        elif listed is None and not retry_safe:
            # the annotations that decide retry safety matter only after a failure:
            # the call goes out first, and the tool cache is filled only then
            safe = self._safe_once_learned(name, ends)
        if as_task:
            return self._as_task(name, arguments, timeout, meta, validate, definition, began)
        params: dict[str, Any] = {"name": name, "arguments": arguments if arguments is not None else {}}
        if meta:
            params["_meta"] = dict(meta)
        session = self.session  # (Client.request's body, without its frame: this runs on every call)
        try:
            result = session.request("tools/call", params, timeout, progress, safe, name, None)
        except RemoteError as exc:
            if exc.code == URL_ELICITATION_REQUIRED and self.url_prerequisites(exc):
                # every prerequisite was accepted: one retry of the same call
                result = session.request("tools/call", params, timeout, progress, safe, name, None)
            elif exc.code == HEADER_MISMATCH and self._modern():
                # the server wants Mcp-Param-* headers this client did not know of (or
                # knew stale): learn the tools' annotations again, then one retry
                log.info("%s: header mismatch on tools/call %r (%s): re-listing tools", self.name, name, exc)
                try:
                    self.list_tools(timeout, refresh=True)
                except MCPError as relist:
                    log.info("%s: re-listing tools failed: %s", self.name, relist)
                result = session.request("tools/call", params, timeout, progress, safe, name, None)
            else:
                learned = self._learn(name, ends) if listed is None and task is None else None
                if learned is None or not _task_only(learned):
                    raise
                return self._as_task(name, arguments, timeout, meta, validate, learned, began)  # learned only now
        if not isinstance(result, CallToolResult):  # the server made it a task: followed in the call's time
            result = self.tasks.follow(result, name, self._left(timeout, began))
        elif result.is_error and listed is None and task is None:
            # some servers refuse a task-only tool called plainly with an isError result
            # (not an error): learned only now, it is run as a task
            learned = self._learn(name, ends)
            if learned is not None and _task_only(learned):
                return self._as_task(name, arguments, timeout, meta, validate, learned, began)
        if validate:
            if definition is not None:
                if schema and definition.output_schema is not None:
                    self.check_result(definition, result)
            elif listed is None:
                self._check_late(name, result, ends)
        answer: CallToolResult = result  # the typed decode made it one
        return answer

    def _as_task(
        self,
        name: str,
        arguments: Mapping[str, Any] | None,
        timeout: float | None,
        meta: Mapping[str, Any] | None,
        validate: bool,
        definition: Tool | None,
        began: float,
    ) -> CallToolResult:
        """A call run as a task: its result, waited for in what is left of the call's time
        (``Client.call_tool_task`` hands back the task itself)."""
        tasks = self.tasks
        handle = tasks.start(name, arguments, timeout=timeout, meta=meta)
        result = tasks.follow(handle, name, self._left(timeout, began))
        if validate and definition is not None:
            self.check_result(definition, result)
        return result

    def _left(self, timeout: float | None, began: float) -> float:
        """What is left of a call's time that began at ``began`` (at least a millisecond: a
        wait with none left ends at once, cancelling the task)."""
        bound = self.request_timeout if timeout is None else timeout
        return max(bound - (_monotonic() - began), 0.001)

    def _learn(self, name: str, ends: float) -> Tool | None:
        """The definition of ``name`` learned after its call's answer or failure: a
        discovery bounded by what is left of the call's time (at most 10 s, no retries)."""
        left = ends - time.monotonic()
        if left <= 0.05:
            if self.cache.peek(self.name, self.credential) is None:
                return None
            return self.cache.lookup(self.name, name, self.credential)  # type: ignore[no-any-return]
        return self.get(name, left)

    def _safe_once_learned(self, name: str, ends: float) -> Callable[[], bool]:
        """Retry safety asked only after a failure (a closure made here, not in
        :meth:`call`, whose every run would pay for its cells)."""
        return lambda: self._learned_safe(name, ends)

    def _learned_safe(self, name: str, ends: float) -> bool:
        """After a failed first call of ``name`` on a cold tool cache: whether its
        annotations make it safe to retry."""
        definition = self._learn(name, ends)
        return definition is not None and call_facts(definition)[0]

    def _check_late(self, name: str, result: CallToolResult, ends: float) -> None:
        """Check a first call's result against the tool's ``outputSchema``, learned now
        that there is a result to check (only when it carries structured content)."""
        if result.structured_content is None or result.is_error:
            return
        learned = self._learn(name, ends)
        if learned is not None and learned.output_schema is not None:
            self.check_result(learned, result)
