"""The tasks extension (``io.modelcontextprotocol/tasks``): start a tool call as a task,
poll it, cancel it, list the server's tasks, wait for the result.

A tool whose ``execution.taskSupport`` is ``"required"`` is run as a task by
``Client.call_tool`` transparently: ``tasks/get`` is polled (at the server's
``pollInterval``) until the task ends, then ``tasks/result`` gives the result; server
requests made while the task runs (e.g. elicitation) reach the handlers as usual.
"""

from __future__ import annotations

import logging
import time
from typing import Any, Mapping

from ._errors import Cancelled, MCPError, ProtocolError, RequestTimeout
from ._messages import CallToolResult
from ._paging import paginate
from ._protocol_types import TERMINAL_TASK_STATUSES, CreateTaskResult, ListTasksResult, Task

__all__ = ["Tasks"]

log = logging.getLogger("mcpsync.client")


def _task_id(task: Task | str) -> str:
    return task.task_id if isinstance(task, Task) else task


class Tasks:
    """The task methods of one Client (each a request through ``Client.request``)."""

    def __init__(self, client: Any) -> None:
        self._client = client

    def start(
        self,
        name: str,
        arguments: Mapping[str, Any] | None,
        *,
        ttl: int | None = None,
        timeout: float | None = None,
        meta: Mapping[str, Any] | None = None,
    ) -> Task:
        """``tools/call`` with a ``task`` member: the task's handle.

        Raises:
            ProtocolError: the server answered with a plain result instead of a task.
        """
        c = self._client
        params: dict[str, Any] = {"name": name, "arguments": dict(arguments) if arguments else {}}
        params["task"] = {"ttl": ttl} if ttl is not None else {}
        if meta:
            params["_meta"] = dict(meta)
        res = c.request("tools/call", params, timeout=timeout)
        if isinstance(res, CreateTaskResult):
            return res.task
        raise ProtocolError(f"{c.name} ran {name} without creating a task", code=-32600, result=res)

    def get(self, task: Task | str, timeout: float | None = None) -> Task:
        return self._client.request("tasks/get", {"taskId": _task_id(task)}, timeout=timeout)  # type: ignore[no-any-return]

    def cancel(self, task: Task | str, timeout: float | None = None) -> Task:
        return self._client.request("tasks/cancel", {"taskId": _task_id(task)}, timeout=timeout)  # type: ignore[no-any-return]

    def list_tasks(self, timeout: float | None = None) -> list[Task]:
        c = self._client

        def fetch(cursor: str | None) -> ListTasksResult:
            return c.request("tasks/list", {"cursor": cursor} if cursor else None, timeout=timeout)  # type: ignore[no-any-return]

        return [task for page in paginate(fetch, server=c.name, method="tasks/list") for task in page.tasks]

    def wait(self, task: Task | str, timeout: float | None = None) -> CallToolResult:
        """Poll ``tasks/get`` until the task ends (or needs input), then fetch ``tasks/result``.

        On expiry of ``timeout`` (default: the request timeout) the task is cancelled and
        :class:`RequestTimeout` is raised; a cancelled task raises :class:`Cancelled`.
        """
        c = self._client
        limit = c.timeouts.request if timeout is None else timeout
        deadline = time.monotonic() + limit
        current = task if isinstance(task, Task) else self.get(task, timeout=limit)
        while current.status not in TERMINAL_TASK_STATUSES and current.status != "input_required":
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                try:
                    self.cancel(current, timeout=2.0)
                except MCPError as exc:
                    log.debug("%s: tasks/cancel failed: %s", c.name, exc)
                raise RequestTimeout(
                    f"task {current.task_id} on {c.name} did not finish within {limit:g} s",
                    method="tasks/get",
                    timeout=limit,
                )
            interval = (current.poll_interval or 1000) / 1000.0
            c._session.stopping.wait(min(max(interval, 0.05), 5.0, remaining))  # close() ends the wait
            current = self.get(current, timeout=max(deadline - time.monotonic(), 0.5))
        if current.status == "cancelled":
            raise Cancelled(f"task {current.task_id} on {c.name} was cancelled", task=current)
        remaining = max(deadline - time.monotonic(), 0.5)
        return c.request("tasks/result", {"taskId": current.task_id}, timeout=remaining)  # type: ignore[no-any-return]
