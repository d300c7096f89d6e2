"""The one table of result decoders: method → a function of the raw result → its type.

Every typed result of the protocol is decoded here: the tools and session results of
:mod:`mcpsync._messages` and the resources, prompts, completion and task results of
:mod:`mcpsync._protocol_types`. Each decoder is built once, at import of this module, and no
other module adds to the tables. :func:`decode_result` is what the session layers call;
:data:`ANSWER_DECODERS` is what the dispatcher tries first on an answer of a method it lists
(the whole JSON-RPC response in one decode).
"""

from __future__ import annotations

from typing import Any, Literal, Union

import msgspec
from msgspec import Raw, Struct

from ._errors import ProtocolError
from ._speedups import CallAnswer
from ._messages import (
    STRUCT_META,
    CallToolResult,
    DiscoverResult,
    EmptyResult,
    InitializeResult,
    ListToolsResult,
    decode_call_tool,
)
from ._protocol_types import (
    CompleteResult,
    ListPromptsResult,
    ListResourcesResult,
    ListResourceTemplatesResult,
    ListTasksResult,
    ReadResourceResult,
    Task,
    decode_create_task,
    decode_get_prompt,
    decode_task,
)

__all__ = ["ANSWER_DECODERS", "RESULT_DECODERS", "decode_result"]

_encoder = msgspec.json.Encoder()
_any_decoder = msgspec.json.Decoder()


def _typed(tp: Any) -> Any:
    return msgspec.json.Decoder(tp).decode


def _decode_task_or_ack(raw: Any) -> Any:
    """``tasks/cancel``: the task (2025-11-25) or an empty acknowledgement (SEP-2663)."""
    try:
        return decode_task(raw)
    except msgspec.ValidationError:
        ack = msgspec.json.decode(raw)
        if not isinstance(ack, dict):
            raise
        return ack


_decode_call_typed = msgspec.json.Decoder(CallToolResult).decode  # the usual result, in this one frame


def _decode_call_or_task(raw: Any) -> Any:
    """``tools/call``: a ``CallToolResult``, a :class:`Task` (SEP-2663: ``resultType: "task"``)
    or a ``CreateTaskResult`` (2025-11-25: the task under ``task``).

    Only a result with no content, no structured content and a ``"task"`` member is
    looked at twice, so ordinary results pay nothing.
    """
    try:
        res = _decode_call_typed(raw)
    except msgspec.ValidationError:
        res = decode_call_tool(raw)  # content of a kind the typed decoder does not know: block by block
    if res.result_type == "task":  # SEP-2663: the task itself, flattened into the result
        return decode_task(raw)
    if not res.content and res.structured_content is None and b'"task"' in bytes(raw):
        try:
            return decode_create_task(raw)
        except msgspec.ValidationError:
            pass
    return res


class _CallToolAnswer(Struct):
    """A response whose result is a ``CallToolResult`` (``method``/``error``: must be absent)."""

    jsonrpc: Literal["2.0"]
    id: Union[int, str]
    result: CallToolResult
    method: None = None
    error: None = None


#: ``tools/call``'s answer in one pass, or None: for an answer not written as servers write
#: one (``{"jsonrpc":"2.0","id":``), one msgspec rejects, and what :func:`_decode_call_or_task`
#: looks at twice (no content: maybe a task) or a result that is not complete
_decode_call_answer = CallAnswer(
    msgspec.json.Decoder(_CallToolAnswer).decode, b'{"jsonrpc":"2.0","id":', (msgspec.ValidationError, msgspec.DecodeError)
).take


#: method → function(raw bytes) → typed result.
RESULT_DECODERS: dict[str, Any] = {
    "tools/list": _typed(ListToolsResult),
    "tools/call": _decode_call_or_task,
    "initialize": _typed(InitializeResult),
    "server/discover": _typed(DiscoverResult),
    "ping": _typed(EmptyResult),
    "resources/list": _typed(ListResourcesResult),
    "resources/templates/list": _typed(ListResourceTemplatesResult),
    "resources/read": _typed(ReadResourceResult),
    "prompts/list": _typed(ListPromptsResult),
    "prompts/get": decode_get_prompt,
    "completion/complete": _typed(CompleteResult),
    "tasks/get": _typed(Task),
    "tasks/list": _typed(ListTasksResult),
    "tasks/cancel": _decode_task_or_ack,
    "tasks/result": decode_call_tool,
}

#: method → function(the whole answer line) → its response decoded in one pass (``.id``,
#: and ``.result`` typed as :func:`decode_result` gives it), or None when the result needs
#: the general path, as one that is not complete (``resultType``) does, and for anything
#: else (never raises for what it cannot read): a typed result a channel hands over is a
#: complete one. The reader of the answer (the dispatcher) tries it first, on every message
#: it reads for a caller of the method: one decode instead of the envelope's and then the result's.
ANSWER_DECODERS: dict[str, Any] = {"tools/call": _decode_call_answer}


def decode_result(method: str, raw: Any) -> Any:
    """Decode a result for ``method``; methods without a typed decoder give plain JSON.

    Raises:
        ProtocolError: the result does not have the shape the method's type requires.
    """
    if type(raw) is not Raw:  # Raw: what a Dispatcher returns, the usual case
        if type(raw).__class__ is STRUCT_META or isinstance(raw, Struct):  # (isinstance: ~1,000 instructions)
            return raw  # typed already: an in-process (Local) result, or the one-pass decode's
        if not isinstance(raw, (bytes, bytearray, memoryview)):
            raw = _encoder.encode(raw)  # an in-process result as plain JSON-compatible objects
    dec = RESULT_DECODERS.get(method)
    try:
        if dec is None:
            return _any_decoder.decode(raw)
        return dec(raw)
    except (msgspec.ValidationError, msgspec.DecodeError) as exc:
        raise ProtocolError(f"invalid {method} result: {exc}", code=-32602) from None
