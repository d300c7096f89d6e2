"""Wire types of the protocol surface beyond tools: resources, prompts, completion,
multi-round-trip input (MRTR), subscriptions and tasks.

Frozen msgspec Structs in the manner of :mod:`mcpsync._messages`: camelCase on the wire,
``_meta`` as ``meta``, unknown fields ignored. :mod:`mcpsync._decoders` puts their
decoders in the one table of result decoders, so :meth:`Client.request` returns them typed.
"""

from __future__ import annotations

from typing import Any, Mapping, Union

import msgspec
from msgspec import Raw, Struct, field

from ._messages import (
    Annotations,
    ContentBlock,
    Icon,
    Resource,
    ResourceContents,
    content_list,
)

__all__ = [
    "Resource",
    "ResourceTemplate",
    "ListResourcesResult",
    "ListResourceTemplatesResult",
    "ReadResourceResult",
    "PromptArgument",
    "Prompt",
    "ListPromptsResult",
    "PromptMessage",
    "GetPromptResult",
    "Completion",
    "CompleteResult",
    "InputRequiredResult",
    "Task",
    "CreateTaskResult",
    "ListTasksResult",
    "TERMINAL_TASK_STATUSES",
]

_OPTS: dict[str, Any] = {"frozen": True, "rename": "camel", "omit_defaults": True, "kw_only": True}

#: Task statuses after which nothing changes any more.
TERMINAL_TASK_STATUSES = frozenset({"completed", "failed", "cancelled"})


class _Cacheable(Struct, **_OPTS):
    """Fields every modern result may carry."""

    ttl_ms: Union[int, None] = None
    cache_scope: Union[str, None] = None
    result_type: Union[str, None] = None
    meta: Union[dict[str, Any], None] = field(default=None, name="_meta")


# --------------------------------------------------------------------------- resources


class ResourceTemplate(Struct, **_OPTS):
    """A parameterised resource (RFC 6570 ``uriTemplate``)."""

    uri_template: str
    name: str = ""
    title: Union[str, None] = None
    description: Union[str, None] = None
    mime_type: Union[str, None] = None
    icons: Union[list[Icon], None] = None
    annotations: Union[Annotations, None] = None
    meta: Union[dict[str, Any], None] = field(default=None, name="_meta")


class ListResourcesResult(_Cacheable, **_OPTS):
    resources: list[Resource] = []
    next_cursor: Union[str, None] = None


class ListResourceTemplatesResult(_Cacheable, **_OPTS):
    resource_templates: list[ResourceTemplate] = []
    next_cursor: Union[str, None] = None


class ReadResourceResult(_Cacheable, **_OPTS):
    """The contents of one resource: ``text`` or ``blob`` (base64) per item."""

    contents: list[ResourceContents] = []

    @property
    def text(self) -> str:
        """The text of every text item, joined by newlines."""
        return "\n".join(c.text for c in self.contents if c.text is not None)

    @property
    def blob(self) -> bytes:
        """The decoded bytes of every blob item, concatenated."""
        import base64

        return b"".join(base64.b64decode(c.blob) for c in self.contents if c.blob is not None)


# --------------------------------------------------------------------------- prompts


class PromptArgument(Struct, **_OPTS):
    """One argument a prompt takes (``required`` when the server says so)."""

    name: str
    title: Union[str, None] = None
    description: Union[str, None] = None
    required: Union[bool, None] = None


class Prompt(Struct, **_OPTS):
    """A prompt (template) the server offers."""

    name: str
    title: Union[str, None] = None
    description: Union[str, None] = None
    arguments: Union[list[PromptArgument], None] = None
    icons: Union[list[Icon], None] = None
    meta: Union[dict[str, Any], None] = field(default=None, name="_meta")


class ListPromptsResult(_Cacheable, **_OPTS):
    prompts: list[Prompt] = []
    next_cursor: Union[str, None] = None


class PromptMessage(Struct, **_OPTS):
    """One message of a rendered prompt: a ``role`` (``user`` / ``assistant``) and a content block."""

    role: str = "user"
    content: Any = None  # a ContentBlock (or UnknownContent)


class GetPromptResult(Struct, **_OPTS):
    """A rendered prompt: messages ready for a model."""

    description: Union[str, None] = None
    messages: list[PromptMessage] = []
    result_type: Union[str, None] = None
    meta: Union[dict[str, Any], None] = field(default=None, name="_meta")

    @property
    def text(self) -> str:
        """The text of every text message, joined by newlines."""
        return "\n".join(getattr(m.content, "text", "") for m in self.messages if hasattr(m.content, "text"))


class _PromptMessageWire(Struct, **_OPTS):
    role: str = "user"
    content: Raw = Raw(b"null")


class _GetPromptWire(Struct, **_OPTS):
    description: Union[str, None] = None
    messages: list[_PromptMessageWire] = []
    result_type: Union[str, None] = None
    meta: Union[dict[str, Any], None] = field(default=None, name="_meta")


_prompt_wire = msgspec.json.Decoder(_GetPromptWire)


def decode_get_prompt(raw: bytes) -> GetPromptResult:
    w = _prompt_wire.decode(raw)
    messages = [PromptMessage(role=m.role, content=content_list([m.content])[0]) for m in w.messages]
    return GetPromptResult(description=w.description, messages=messages, result_type=w.result_type, meta=w.meta)


# --------------------------------------------------------------------------- completion


class Completion(Struct, **_OPTS):
    """Completion values for an argument: ``values``, with ``total`` and ``has_more`` when known."""

    values: list[str] = []
    total: Union[int, None] = None
    has_more: Union[bool, None] = None


class CompleteResult(Struct, **_OPTS):
    completion: Completion = Completion()
    result_type: Union[str, None] = None
    meta: Union[dict[str, Any], None] = field(default=None, name="_meta")


# --------------------------------------------------------------------------- MRTR


class InputRequiredResult(Struct, **_OPTS):
    """A modern-era interim result: the server needs input before it can finish.

    ``input_requests`` maps server-chosen keys to ``{"method": ..., "params": ...}``;
    ``request_state`` is opaque and goes back unchanged with the retry.
    """

    input_requests: Union[dict[str, Any], None] = None
    request_state: Union[str, None] = None
    result_type: Union[str, None] = None
    meta: Union[dict[str, Any], None] = field(default=None, name="_meta")


# --------------------------------------------------------------------------- tasks


class Task(Struct, **_OPTS):
    """A server-side task: the state of a tool call the server runs in the background.

    Both tasks flows decode into it: the tasks extension of the 2026-07-28 era (SEP-2663:
    ``ttlMs``, ``pollIntervalMs``, and in a ``tasks/get`` answer the ``inputRequests`` of an
    ``input_required`` task, the ``result`` of a ``completed`` one, the JSON-RPC ``error``
    of a ``failed`` one) and the experimental tasks of 2025-11-25 (``ttl``,
    ``pollInterval``; the result is fetched with ``tasks/result``).
    """

    task_id: str
    status: str = "working"
    status_message: Union[str, None] = None
    created_at: Union[str, None] = None
    last_updated_at: Union[str, None] = None
    ttl: Union[int, None] = None
    poll_interval: Union[int, None] = None
    ttl_ms: Union[int, None] = None
    poll_interval_ms: Union[int, None] = None
    input_requests: Union[dict[str, Any], None] = None
    result: Union[dict[str, Any], None] = None
    error: Union[dict[str, Any], None] = None
    result_type: Union[str, None] = None
    meta: Union[dict[str, Any], None] = field(default=None, name="_meta")

    @property
    def done(self) -> bool:
        return self.status in TERMINAL_TASK_STATUSES

    @property
    def poll_after(self) -> float | None:
        """Seconds the server asks between two polls (``pollIntervalMs`` or ``pollInterval``)."""
        ms = self.poll_interval_ms if self.poll_interval_ms is not None else self.poll_interval
        return None if ms is None or ms < 0 else ms / 1000.0


class CreateTaskResult(Struct, **_OPTS):
    task: Task
    result_type: Union[str, None] = None
    meta: Union[dict[str, Any], None] = field(default=None, name="_meta")


class ListTasksResult(Struct, **_OPTS):
    tasks: list[Task] = []
    next_cursor: Union[str, None] = None
    result_type: Union[str, None] = None
    meta: Union[dict[str, Any], None] = field(default=None, name="_meta")


# --------------------------------------------------------------------------- decoders


def _typed(tp: Any) -> Any:
    return msgspec.json.Decoder(tp).decode


#: Decoder for an ``input_required`` result of any method.
decode_input_required = _typed(InputRequiredResult)
decode_create_task = _typed(CreateTaskResult)
decode_task = _typed(Task)


def prompt_params(name: str, arguments: Mapping[str, Any] | None) -> dict[str, Any]:
    """The params of ``prompts/get``: argument values are sent as strings (JSON for others).

    Example:
        >>> prompt_params("greet", {"name": "Al", "times": 2})
        {'name': 'greet', 'arguments': {'name': 'Al', 'times': '2'}}
    """
    params: dict[str, Any] = {"name": name}
    if arguments:
        import json

        params["arguments"] = {k: v if isinstance(v, str) else json.dumps(v) for k, v in arguments.items()}
    return params


def completion_params(
    ref: Prompt | ResourceTemplate | Mapping[str, Any] | str,
    argument: Mapping[str, Any] | tuple[str, str],
    context: Mapping[str, Any] | None = None,
) -> dict[str, Any]:
    """The params of ``completion/complete`` (see ``Client.complete``).

    Example:
        >>> completion_params("greet", ("name", "Al"))["ref"]
        {'type': 'ref/prompt', 'name': 'greet'}
    """
    if isinstance(ref, Prompt):
        wire_ref: dict[str, Any] = {"type": "ref/prompt", "name": ref.name}
    elif isinstance(ref, ResourceTemplate):
        wire_ref = {"type": "ref/resource", "uri": ref.uri_template}
    elif isinstance(ref, str):
        if "://" in ref or "{" in ref:
            wire_ref = {"type": "ref/resource", "uri": ref}
        else:
            wire_ref = {"type": "ref/prompt", "name": ref}
    else:
        wire_ref = dict(ref)
    if isinstance(argument, tuple):
        arg = {"name": argument[0], "value": argument[1]}
    else:
        arg = {"name": argument["name"], "value": argument.get("value", "")}
    params: dict[str, Any] = {"ref": wire_ref, "argument": arg}
    if context:
        nested = context.get("arguments")
        inner: Mapping[str, Any] = nested if isinstance(nested, Mapping) else context
        params["context"] = {"arguments": {k: str(v) for k, v in inner.items()}}
    return params


_ = ContentBlock  # re-exported type for annotations
