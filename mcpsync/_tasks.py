"""Tasks: tool calls the server runs in the background, in both protocol eras.

The 2026-07-28 era (the tasks extension, SEP-2663, ``io.modelcontextprotocol/tasks``): the
client declares the extension in every request's client capabilities (a Client does by
default, :mod:`mcpsync._extensions`), and the *server* decides, call by call, to answer a
``tools/call`` with a task (``resultType: "task"``) instead of its result. The client then
polls ``tasks/get`` at the server's ``pollIntervalMs``; the answer carries the result of a
``completed`` task, the JSON-RPC error of a ``failed`` one, or the ``inputRequests`` of an
``input_required`` one, which the client answers through its sampling / elicitation / roots
handlers with ``tasks/update`` (each request key once); ``tasks/cancel`` asks the server to
stop. Over Streamable HTTP each ``tasks/*`` request names its task in ``Mcp-Name``.

The 2025-11-25 era (experimental tasks): the client asks for a task with a ``task`` member
on ``tools/call`` (a tool listed with ``execution.taskSupport: "required"`` is run so
transparently), polls ``tasks/get`` and fetches the result with ``tasks/result``; server
requests made meanwhile reach the handlers as server→client requests.

One public API over both: ``Client.call_tool`` follows a task transparently within its
timeout (on expiry, or any other way out, the task is cancelled: within the call's time,
keeping a share of it for ``tasks/cancel``; after an interrupt, in the background), and
``Client.call_tool_task`` gives a :class:`ToolTask` handle to poll, cancel or wait on
(with a status callback). ``Client.task(task_id)`` makes a handle for a task id kept from
an earlier run.

Example:
    >>> handle = client.call_tool_task("render", {"scene": 3})       # doctest: +SKIP
    >>> handle.status                                                      # doctest: +SKIP
    'working'
    >>> result = handle.wait(timeout=600, on_status=lambda t: print(t.status_message))  # doctest: +SKIP
"""

from __future__ import annotations

import logging
import threading
import time
from typing import Any, Callable, Mapping

from ._errors import (
    Cancelled,
    ConnectionClosed,
    MCPError,
    ProtocolError,
    RequestTimeout,
    attach_fields,
    error_from_code,
)
from ._decoders import decode_result
from ._messages import CallToolResult, encode
from ._mrtr import answer_all
from ._paging import paginate
from ._ports import Requester
from ._protocol_types import CreateTaskResult, ListTasksResult, Task
from ._settings import Settings

__all__ = ["Tasks", "ToolTask", "DEFAULT_POLL"]

log = logging.getLogger("mcpsync.client")

#: Seconds between two polls when the server names no interval.
DEFAULT_POLL = 1.0
#: Polls never come closer than this, whatever interval the server names.
MIN_POLL = 0.01
#: Seconds a ``tasks/cancel`` sent in the background may take.
CANCEL_TIMEOUT = 5.0
#: A wait that cancels on timeout keeps this share of its time (at most ``CANCEL_RESERVE`` s)
#: to send ``tasks/cancel`` before it returns: the call's timeout bounds the cancel too.
CANCEL_SHARE, CANCEL_RESERVE = 0.2, 1.0


class ToolTask:
    """A tool call the server runs as a task: poll it, cancel it, wait for its result.

    Made by ``Client.call_tool_task(...)`` or ``Client.task(task_id)``. Thread-safe:
    any thread may poll, cancel or wait; an input request is answered once, by whichever
    thread sees it first.

    Attributes:
        tool: the tool's name (None for a handle made from a bare task id).
        modern: True for a task of the 2026-07-28 tasks extension (SEP-2663), False for
            one of the 2025-11-25 experimental flow.

    Example:
        >>> handle = client.call_tool_task("crawl", {"url": u})   # doctest: +SKIP
        >>> handle.poll().status                                        # doctest: +SKIP
        'working'
        >>> handle.cancel()                                             # doctest: +SKIP
    """

    def __init__(self, tasks: "Tasks", task: Task | None, tool: str | None, *, modern: bool,
                 result: CallToolResult | None = None) -> None:
        self._tasks = tasks
        self._task = task
        self._result = result
        self.tool = tool
        self.modern = modern
        self._lock = threading.Lock()
        self._answering = threading.Lock()  # one thread answers input requests at a time
        self._answered: set[str] = set()  # input request keys the server acknowledged
        self._pending: dict[str, Any] = {}  # answers given but not yet acknowledged
        self._cancel_sent = False

    def __repr__(self) -> str:
        return f"ToolTask({self.tool!r}, task_id={self.task_id!r}, status={self.status!r})"

    @property
    def task_id(self) -> str | None:
        """The server's id of the task (None when the server answered without one)."""
        task = self._task
        return None if task is None else task.task_id

    @property
    def task(self) -> Task | None:
        """The latest state seen (None when the server answered at once, without a task)."""
        return self._task

    @property
    def status(self) -> str:
        """``working``, ``input_required``, ``completed``, ``failed`` or ``cancelled`` (as last seen)."""
        task = self._task
        return "completed" if task is None else task.status

    @property
    def done(self) -> bool:
        """True once the task reached a terminal status (as last seen)."""
        task = self._task
        return task is None or task.done

    def poll(self, *, timeout: float | None = None) -> Task | None:
        """One ``tasks/get``: the task's state now. Input requests it shows are answered
        (through the client's handlers, with ``tasks/update``) before this returns.
        None when the server answered without a task."""
        if self._task is None:
            return None
        return self._tasks.get(self, timeout)

    def cancel(self, *, timeout: float | None = None) -> None:
        """Ask the server to cancel the task (``tasks/cancel``). Cancellation is cooperative:
        the task may still finish; :meth:`poll` or :meth:`wait` tell how it ended."""
        if self._task is not None and not self._task.done:
            self._tasks.cancel(self, timeout)

    def wait(
        self, *, timeout: float | None = None, on_status: Callable[[Task], None] | None = None,
        cancel_on_timeout: bool = True,
    ) -> CallToolResult:
        """Poll until the task ends and return its result (a tool error is a result with
        ``is_error``).

        Args:
            timeout: seconds (default the client's request timeout).
            on_status: ``on_status(task)`` on this thread whenever the status or its
                message changes (progress for a caller who waits).
            cancel_on_timeout: ask the server to cancel the task when ``timeout`` passes.

        Raises:
            RequestTimeout: the task did not end in time (``task_id`` on the error).
            RemoteError: the task failed with a JSON-RPC error (its code and message).
            Cancelled: the task was cancelled.
            InputRequestError: it asked for input this client could not give.
        """
        return self._tasks.wait(self, timeout, on_status, cancel_on_timeout)

    def _seen(self, task: Task) -> None:
        with self._lock:
            self._task = task


class Tasks:
    """The task flows of one Client, over its collaborators.

    Args:
        settings: the Client's settings (the server's name, the request timeout).
        session: where requests go; its era, its worker (a cancellation off the caller's
            thread) and its ``stopping`` event (set when the client closes: a wait between
            polls ends at once).
        answer: ``answer(method, params)``: the client's answer to one server request (the handlers part).
    """

    def __init__(self, settings: Settings, session: Requester, answer: Callable[[str, Mapping[str, Any]], Any]) -> None:
        self.server = settings.name
        self.settings = settings
        self.session = session
        self._answer = answer
        self._default = settings.timeouts.request

    def _era(self) -> str:
        return self.session.facts().era

    # ------------------------------------------------------------------ starting

    def start(
        self, name: str, arguments: Mapping[str, Any] | None, *, ttl: int | None = None,
        timeout: float | None = None, meta: Mapping[str, Any] | None = None,
    ) -> ToolTask:
        """Call ``name`` and hand back its task (a finished handle when the server answered
        at once). 2025-11-25: the call asks for a task (``task`` member, with ``ttl``);
        2026-07-28: the server decides."""
        self.settings.need_lasting_session("call_tool_task()")
        modern = self._era() == "modern"
        params: dict[str, Any] = {"name": name, "arguments": dict(arguments) if arguments else {}}
        if not modern:
            params["task"] = {"ttl": ttl} if ttl is not None else {}
        if meta:
            params["_meta"] = dict(meta)
        answer = self.session.request("tools/call", params, timeout=timeout, tool=name)
        return self.handle_for(answer, name)

    def handle_for(self, answer: Any, tool: str | None) -> ToolTask:
        """The handle of a ``tools/call`` answer: a task (either era) or a plain result."""
        if isinstance(answer, Task):
            return ToolTask(self, answer, tool, modern=True)
        if isinstance(answer, CreateTaskResult):
            return ToolTask(self, answer.task, tool, modern=False)
        if isinstance(answer, CallToolResult):
            return ToolTask(self, None, tool, modern=self._era() == "modern", result=answer)
        raise ProtocolError(f"{self.server} answered tools/call {tool} with neither a result nor a task", code=-32600)

    def resume(self, task_id: str, tool: str | None = None) -> ToolTask:
        """A handle for a task id kept from earlier (its state is fetched by the first poll)."""
        if not isinstance(task_id, str) or not task_id:
            raise ValueError("task_id must be a non-empty string")
        self.settings.need_lasting_session("task()")
        return ToolTask(self, Task(task_id=task_id), tool, modern=self._era() == "modern")

    def follow(self, answer: Any, tool: str, timeout: float | None) -> CallToolResult:
        """``call_tool``'s transparent path: wait for the task the server made of the call
        (``answer``: its ``tools/call`` answer, or a :class:`ToolTask`) within ``timeout``.
        Any way out before the task ended cancels it: a timeout or a failed input request
        within the call's time, an interrupt in the background."""
        handle = answer if isinstance(answer, ToolTask) else self.handle_for(answer, tool)
        end = time.monotonic() + (self._default if timeout is None else timeout)
        try:
            return self.wait(handle, timeout, None, True)
        except Exception:
            if not handle.done:
                self._cancel_by(handle, min(end, time.monotonic() + CANCEL_RESERVE))
            raise
        except BaseException:  # an interrupt: the cancel goes off this thread
            if not handle.done:
                self.cancel_later(handle)
            raise

    # ------------------------------------------------------------------ the wire

    def get(self, handle: ToolTask, timeout: float | None) -> Task:
        """One ``tasks/get``; an ``input_required`` answer's new input requests are answered."""
        task = self.session.request("tasks/get", {"taskId": handle.task_id}, timeout=timeout)
        if not isinstance(task, Task):
            raise ProtocolError(f"{self.server} answered tasks/get with {type(task).__name__}, not a task", code=-32600)
        handle._seen(task)
        if handle.modern and task.status == "input_required":
            self._answer_inputs(handle, task, timeout)
        return task

    def cancel(self, handle: ToolTask, timeout: float | None) -> None:
        handle._cancel_sent = True
        answer = self.session.request("tasks/cancel", {"taskId": handle.task_id}, timeout=timeout)
        if isinstance(answer, Task):  # 2025-11-25 answers with the task; SEP-2663 with an ack
            handle._seen(answer)

    def cancel_later(self, handle: ToolTask) -> None:
        """``tasks/cancel`` off the caller's thread (a call's timeout is not spent on it)."""
        if handle._cancel_sent or handle.task_id is None:
            return
        handle._cancel_sent = True

        def cancel() -> None:
            try:
                self.cancel(handle, CANCEL_TIMEOUT)
            except MCPError as exc:
                log.info("%s: tasks/cancel of %s failed: %s", self.server, handle.task_id, exc)

        if self.session.stopping.is_set():
            log.info("%s: the client is closing: task %s is not cancelled", self.server, handle.task_id)
            return
        self.session.worker.submit(cancel)

    def _cancel_by(self, handle: ToolTask, end: float) -> None:
        """``tasks/cancel`` on the caller's thread, by ``end`` (at least a moment); one that
        fails is tried again in the background. Once per handle."""
        if handle._cancel_sent or handle.task_id is None:
            return
        try:
            self.cancel(handle, max(end - time.monotonic(), 0.05))
        except MCPError as exc:
            log.info("%s: tasks/cancel of %s failed: %s; trying again", self.server, handle.task_id, exc)
            handle._cancel_sent = False
            self.cancel_later(handle)

    def _answer_inputs(self, handle: ToolTask, task: Task, timeout: float | None) -> None:
        """Answer the task's input requests not answered before, then ``tasks/update``.
        Answers the server did not acknowledge are sent again, never asked again."""
        if not handle._answering.acquire(blocking=False):
            return  # another thread is answering them
        try:
            requests = task.input_requests or {}
            fresh = {k: v for k, v in requests.items() if k not in handle._answered and k not in handle._pending}
            if fresh:
                what = f"task {task.task_id} ({handle.tool or 'tools/call'})"
                handle._pending.update(answer_all(self.server, what, fresh, self._answer))
            responses = {k: v for k, v in handle._pending.items() if k in requests}
            if not responses:
                return
            self.session.request("tasks/update", {"taskId": task.task_id, "inputResponses": responses}, timeout=timeout)
            handle._answered.update(responses)
            for key in responses:
                handle._pending.pop(key, None)
        finally:
            handle._answering.release()

    # ------------------------------------------------------------------ waiting

    def wait(
        self, handle: ToolTask, timeout: float | None, on_status: Callable[[Task], None] | None,
        cancel_on_timeout: bool,
    ) -> CallToolResult:
        """:meth:`ToolTask.wait` (see there)."""
        if handle._result is not None:
            return handle._result
        limit = self._default if timeout is None else timeout
        end = time.monotonic() + limit
        cancel = end if cancel_on_timeout else None  # when the wait gives up: tasks/cancel, by ``end``
        deadline = end - (min(CANCEL_SHARE * limit, CANCEL_RESERVE) if cancel_on_timeout else 0.0)
        task = handle.task
        assert task is not None
        if task.created_at is None and task.status == "working" and task.poll_after is None:
            task = self._poll(handle, deadline, limit, cancel)  # a resumed id: its state first
        shown: tuple[str, str | None] | None = None
        while True:
            if on_status is not None and (task.status, task.status_message) != shown:
                shown = (task.status, task.status_message)
                on_status(task)
            if task.done or (not handle.modern and task.status == "input_required"):
                return self._outcome(handle, task, deadline, limit, cancel)
            if handle.modern and task.status == "input_required":
                self._answer_inputs(handle, task, self._left(handle, deadline, limit, cancel))
            left = self._left(handle, deadline, limit, cancel)
            pause = task.poll_after
            pause = min(max(DEFAULT_POLL if pause is None else pause, MIN_POLL), left)
            if self.session.stopping.wait(pause):
                raise ConnectionClosed(f"client for {self.server} closed while task {task.task_id} ran")
            task = self._poll(handle, deadline, limit, cancel)

    def _poll(self, handle: ToolTask, deadline: float, limit: float, cancel: float | None) -> Task:
        """One ``tasks/get`` in what is left of the wait; one that the wait's end cut short
        is the task's timeout (:meth:`_left`), not the poll's."""
        try:
            return self.get(handle, self._left(handle, deadline, limit, cancel))
        except RequestTimeout as exc:
            if deadline - time.monotonic() > 0.005:
                raise
            try:
                self._left(handle, deadline, limit, cancel)
            except RequestTimeout as timeout:
                raise timeout from exc
            raise

    def _left(self, handle: ToolTask, deadline: float, limit: float, cancel: float | None) -> float:
        """Seconds left of the wait; past it, :class:`RequestTimeout`, the task cancelled
        first when ``cancel`` (the instant that cancel must be sent by)."""
        left = deadline - time.monotonic()
        if left > 0:
            return left
        if cancel is not None:
            self._cancel_by(handle, cancel)
        raise RequestTimeout(
            f"task {handle.task_id} ({handle.tool or 'tools/call'}) on {self.server} did not finish within {limit:.3g} s"
            + ("; the server was asked to cancel it" if cancel else ""),
            method="tools/call", timeout=limit, task_id=handle.task_id,
        )

    def _outcome(self, handle: ToolTask, task: Task, deadline: float, limit: float,
                 cancel: float | None) -> CallToolResult:
        """The result of a task that ended (or, 2025-11-25, of one that needs input)."""
        if task.status == "cancelled":
            raise Cancelled(f"task {task.task_id} ({handle.tool or 'tools/call'}) on {self.server} was cancelled",
                            task=task)
        if not handle.modern:  # the result (or the error) comes from tasks/result
            left = self._left(handle, deadline, limit, cancel)
            result: CallToolResult = self.session.request("tasks/result", {"taskId": task.task_id}, timeout=left)
            return result
        if task.result is None and task.error is None:  # the seed said it ended: its answer has the outcome
            task = self._poll(handle, deadline, limit, cancel)
        if task.status == "failed" or task.error is not None:
            error = task.error if isinstance(task.error, Mapping) else {}
            code = error.get("code")
            exc = error_from_code(
                code if isinstance(code, int) else -32603,
                str(error.get("message") or task.status_message or "the task failed"),
                error.get("data"), method="tools/call",
            )
            raise attach_fields(exc, task_id=task.task_id)
        if task.result is None:
            raise ProtocolError(f"{self.server}: task {task.task_id} completed without a result", code=-32600)
        done = decode_result("tools/call", encode(task.result))
        if not isinstance(done, CallToolResult):
            raise ProtocolError(f"{self.server}: task {task.task_id} completed with a result that is not a "
                                "CallToolResult", code=-32600)
        return done

    # ------------------------------------------------------------------ 2025-11-25 only

    def list_tasks(self, timeout: float | None = None) -> list[Task]:
        """``tasks/list`` (2025-11-25; SEP-2663 has no listing)."""
        self.settings.need_lasting_session("list_tasks()")

        def fetch(cursor: str | None) -> ListTasksResult:
            return self.session.request("tasks/list", {"cursor": cursor} if cursor else None, timeout=timeout)  # type: ignore[no-any-return]

        return [task for page in paginate(fetch, server=self.server, method="tasks/list") for task in page.tasks]
