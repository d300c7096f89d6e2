"""What the Streamable HTTP transport reads of a message, without decoding it whole.

* :class:`Message` — an outgoing message's bytes and the
  :class:`~mcpsync._channel.MessageFacts` the layer above computed (its id, method,
  era): decoded from the bytes only for a caller that gave none.
* :func:`peek_in` / :func:`peek_error` — an incoming message's id and method, an
  error's code and message; the result and error stay undecoded.
* :func:`reissued` / :func:`with_id` — a message under another id (a re-issued request;
  an answer handed up under the id it was asked with).
"""

from __future__ import annotations

from typing import Any, Union

import msgspec
from msgspec import UNSET, Raw, Struct, UnsetType

from .._channel import MessageFacts, message_facts

__all__ = ["ErrorPeek", "Incoming", "Message", "decode_any", "encode", "peek_error", "peek_in", "reissued", "with_id"]

class Incoming(Struct):
    """What is peeked at of an incoming message (result and error left undecoded)."""

    id: Union[int, str, None, UnsetType] = UNSET
    method: Union[str, None] = None
    result: Raw = Raw()
    error: Raw = Raw()


class ErrorPeek(Struct):
    """What is peeked at of a JSON-RPC error."""

    code: int = 0
    message: str = ""


_in_decoder = msgspec.json.Decoder(Incoming)
_error_decoder = msgspec.json.Decoder(ErrorPeek)
_any_decoder = msgspec.json.Decoder()
_encoder = msgspec.json.Encoder()
#: any JSON, decoded / encoded (the module's own, shared)
decode_any = _any_decoder.decode
encode = _encoder.encode


class Message:
    """What the transport needs to know about one outgoing message: its bytes and the
    :class:`~mcpsync._channel.MessageFacts` the layer above computed when it encoded
    them (decoded from the bytes only when a caller gave none)."""

    __slots__ = ("body", "facts", "id", "method", "modern_version", "kind")

    def __init__(self, body: bytes, facts: MessageFacts | None = None) -> None:
        self.body = body
        if facts is None:
            facts = _facts_of(body)
        self.facts = facts
        self.id = facts.id
        self.method = facts.method
        self.modern_version = facts.modern_version
        if facts.method is not None:
            self.kind = "request" if facts.id is not None else "notification"
        else:
            self.kind = "response"

    @property
    def is_request(self) -> bool:
        return self.kind == "request"


def _facts_of(body: bytes) -> MessageFacts:
    """Facts for bytes that came without them (a direct caller, an internal replay)."""
    try:
        obj = _any_decoder.decode(body)
    except (msgspec.ValidationError, msgspec.DecodeError):
        obj = None
    if not isinstance(obj, dict):
        return MessageFacts()
    method = obj.get("method")
    facts = message_facts(obj.get("id"), method if isinstance(method, str) else None, obj.get("params"))
    return facts if facts is not None else MessageFacts(obj.get("id"), method if isinstance(method, str) else None)


def reissued(body: bytes, old_id: Any, new_id: Any) -> bytes:
    """An outgoing request's bytes under ``new_id``: spliced when the body starts as the
    dispatcher encodes it (no decode on the way out), else rewritten."""
    prefix = b'{"jsonrpc":"2.0","id":' + _encoder.encode(old_id) + b","
    if body.startswith(prefix):
        return b'{"jsonrpc":"2.0","id":' + _encoder.encode(new_id) + b"," + body[len(prefix):]
    return with_id(body, new_id)


def with_id(body: bytes, new_id: Any) -> bytes:
    obj = _any_decoder.decode(body)
    obj["id"] = new_id
    return _encoder.encode(obj)


def peek_error(raw: Raw) -> ErrorPeek | None:
    try:
        return _error_decoder.decode(raw)
    except (msgspec.ValidationError, msgspec.DecodeError):
        return None


def peek_in(data: bytes) -> Incoming | None:
    try:
        return _in_decoder.decode(data)
    except (msgspec.ValidationError, msgspec.DecodeError):
        return None
