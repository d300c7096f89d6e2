"""Wire types: the JSON-RPC envelope and the MCP result types, as frozen msgspec Structs.

The envelope has no tag field, so it is decoded permissively, with ``params`` and
``result`` kept as :class:`msgspec.Raw`; the result is then decoded with a decoder built
once per method (the one table of them is :mod:`mcpsync._decoders`). Unknown fields are ignored everywhere, so a
newer server never breaks an older client. Content blocks are a tagged union on
``type``; a block of a type this client does not know becomes :class:`UnknownContent`.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any, Literal, Union

import msgspec
from msgspec import Raw, Struct, field

from ._errors import ProtocolError

__all__ = [
    "Envelope",
    "Request",
    "ErrorObject",
    "Implementation",
    "Icon",
    "ToolAnnotations",
    "Tool",
    "ListToolsResult",
    "TextContent",
    "ImageContent",
    "AudioContent",
    "ResourceLink",
    "EmbeddedResource",
    "TextResourceContents",
    "BlobResourceContents",
    "UnknownContent",
    "ContentBlock",
    "CallToolResult",
    "InitializeResult",
    "DiscoverResult",
    "decode_envelope",
    "response_id",
    "encode",
]

_OPTS: dict[str, Any] = {"frozen": True, "rename": "camel", "omit_defaults": True, "kw_only": True}


class ErrorObject(Struct, frozen=True):
    code: int = -32603
    message: str = ""
    data: Any = None


class Envelope(Struct, frozen=True):
    """Any JSON-RPC message: request, notification, response or error.

    ``params`` and ``result`` are undecoded JSON; an absent member is an empty ``Raw``
    (``len(env.result) == 0``), a JSON ``null`` is ``Raw(b"null")``. ``jsonrpc`` must be
    exactly ``"2.0"``: a message without it, or with another version, fails to decode
    (checked inside the decoder, at no cost to a valid message).
    """

    jsonrpc: Literal["2.0"]
    id: Union[int, str, None] = None
    method: Union[str, None] = None
    params: Raw = Raw()
    result: Raw = Raw()
    error: Union[ErrorObject, None] = None


class Request(Struct, omit_defaults=True):
    """An outgoing JSON-RPC request (``params`` left out when None): encodes faster
    than the same message as a dict."""

    jsonrpc: str
    id: Union[int, str]
    method: str
    params: Any = None


class Implementation(Struct, **_OPTS):
    """The name and version of an MCP client or server (``serverInfo`` / ``clientInfo``)."""

    name: str = ""
    version: str = ""
    title: Union[str, None] = None
    description: Union[str, None] = None
    website_url: Union[str, None] = None


class Icon(Struct, **_OPTS):
    src: str
    mime_type: Union[str, None] = None
    sizes: Union[list[str], None] = None
    theme: Union[str, None] = None


class ToolAnnotations(Struct, **_OPTS):
    title: Union[str, None] = None
    read_only_hint: Union[bool, None] = None
    destructive_hint: Union[bool, None] = None
    idempotent_hint: Union[bool, None] = None
    open_world_hint: Union[bool, None] = None


class _decoded_once:
    """``functools.cached_property`` without its lock (Python 3.11 takes an RLock on every
    first access): two threads that race both decode the same JSON, and one result stays."""

    def __init__(self, fn: Any) -> None:
        self.fn = fn
        self.name = fn.__name__
        self.__doc__ = fn.__doc__

    def __get__(self, obj: Any, owner: Any = None) -> Any:
        if obj is None:
            return self
        value = obj.__dict__[self.name] = self.fn(obj)
        return value


_EMPTY_OBJECT = Raw(b"{}")
_ABSENT = Raw()  # omit_defaults leaves a field out when it holds this very object


class Tool(Struct, dict=True, **_OPTS):
    """A tool the server offers.

    The two schemas stay undecoded JSON on the wire struct (``input_schema_json``,
    ``output_schema_json``; an empty ``Raw`` when absent) and are decoded on first
    access of :attr:`input_schema` / :attr:`output_schema`, then kept: listing tools
    costs a scan of the schemas, not a dict per schema node that nobody may read.
    Build one by hand with :meth:`build`.
    """

    name: str
    title: Union[str, None] = None
    description: Union[str, None] = None
    input_schema_json: Raw = field(default=_EMPTY_OBJECT, name="inputSchema")
    output_schema_json: Raw = field(default=_ABSENT, name="outputSchema")
    annotations: Union[ToolAnnotations, None] = None
    icons: Union[list[Icon], None] = None
    execution: Union[dict[str, Any], None] = None
    meta: Union[dict[str, Any], None] = field(default=None, name="_meta")

    @_decoded_once
    def input_schema(self) -> dict[str, Any]:
        """The JSON Schema of the arguments (a JSON object).

        Raises:
            ProtocolError: the server sent an ``inputSchema`` that is not a JSON object.
        """
        return _schema_object(self.name, "inputSchema", self.input_schema_json)

    @_decoded_once
    def output_schema(self) -> Union[dict[str, Any], None]:
        """The JSON Schema of ``structuredContent``, or ``None`` when the tool declares none.

        Raises:
            ProtocolError: the server sent an ``outputSchema`` that is neither an object nor null.
        """
        raw = self.output_schema_json
        if len(raw) == 0 or (len(raw) == 4 and bytes(raw) == b"null"):  # absent, or sent as null
            return None
        return _schema_object(self.name, "outputSchema", raw)

    def __repr__(self) -> str:
        parts = []
        for name in self.__struct_fields__:
            if name.endswith("_schema_json"):
                name = name[: -len("_json")]
            parts.append(f"{name}={getattr(self, name)!r}")
        return f"Tool({', '.join(parts)})"

    @classmethod
    def build(
        cls,
        name: str,
        *,
        input_schema: Union[Mapping[str, Any], None] = None,
        output_schema: Union[Mapping[str, Any], None] = None,
        **fields: Any,
    ) -> "Tool":
        """A Tool from Python values: the schemas as mappings, the other fields as keywords.

        Without ``input_schema`` the tool takes no declared arguments (``{"type": "object"}``).
        """
        if input_schema is None:
            input_schema = {"type": "object"}  # the member is required on the wire
        tool = cls(
            name=name,
            input_schema_json=Raw(_encoder.encode(input_schema)),
            output_schema_json=_ABSENT if output_schema is None else Raw(_encoder.encode(output_schema)),
            **fields,
        )
        cache = tool.__dict__
        cache["input_schema"] = dict(input_schema)
        cache["output_schema"] = None if output_schema is None else dict(output_schema)
        return tool


def _schema_object(tool: str, member: str, raw: Raw) -> dict[str, Any]:
    try:
        value = _any_decoder.decode(raw)
    except msgspec.DecodeError as exc:  # Raw only spans valid JSON; kept for safety
        raise ProtocolError(f"tool {tool!r}: invalid {member}: {exc}", code=-32602) from None
    if not isinstance(value, dict):
        raise ProtocolError(
            f"tool {tool!r}: {member} must be a JSON object, got {type(value).__name__}", code=-32602
        )
    return value


class ListToolsResult(Struct, **_OPTS):
    tools: list[Tool] = []
    next_cursor: Union[str, None] = None
    ttl_ms: Union[int, None] = None
    cache_scope: Union[str, None] = None
    result_type: Union[str, None] = None
    meta: Union[dict[str, Any], None] = field(default=None, name="_meta")


class Annotations(Struct, **_OPTS):
    audience: Union[list[str], None] = None
    priority: Union[float, None] = None
    last_modified: Union[str, None] = None


class TextContent(Struct, tag="text", tag_field="type", **_OPTS):
    """A text content block (``{"type": "text", "text": ...}``)."""

    text: str = ""
    annotations: Union[Annotations, None] = None
    meta: Union[dict[str, Any], None] = field(default=None, name="_meta")


class ImageContent(Struct, tag="image", tag_field="type", **_OPTS):
    """An image content block: base64 ``data`` and its ``mime_type``."""

    data: str = ""
    mime_type: str = ""
    annotations: Union[Annotations, None] = None
    meta: Union[dict[str, Any], None] = field(default=None, name="_meta")


class AudioContent(Struct, tag="audio", tag_field="type", **_OPTS):
    """An audio content block: base64 ``data`` and its ``mime_type``."""

    data: str = ""
    mime_type: str = ""
    annotations: Union[Annotations, None] = None
    meta: Union[dict[str, Any], None] = field(default=None, name="_meta")


class Resource(Struct, **_OPTS):
    """A resource the server offers (``resources/list``)."""

    uri: str
    name: str = ""
    title: Union[str, None] = None
    description: Union[str, None] = None
    mime_type: Union[str, None] = None
    size: Union[int, None] = None
    icons: Union[list[Icon], None] = None
    annotations: Union[Annotations, None] = None
    meta: Union[dict[str, Any], None] = field(default=None, name="_meta")


class ResourceLink(Resource, tag="resource_link", tag_field="type"):
    """A content block pointing at a resource: a :class:`Resource` with ``type``."""


class TextResourceContents(Struct, **_OPTS):
    uri: str = ""
    mime_type: Union[str, None] = None
    text: Union[str, None] = None
    blob: Union[str, None] = None
    meta: Union[dict[str, Any], None] = field(default=None, name="_meta")


# One struct serves both text and blob contents (the wire has no tag for them).
BlobResourceContents = TextResourceContents
ResourceContents = TextResourceContents


class EmbeddedResource(Struct, tag="resource", tag_field="type", **_OPTS):
    """A resource embedded in a result: its contents (text or blob) with their ``uri``."""

    resource: ResourceContents = TextResourceContents()
    annotations: Union[Annotations, None] = None
    meta: Union[dict[str, Any], None] = field(default=None, name="_meta")


class UnknownContent(Struct, **_OPTS):
    """A content block of a type this client does not know; ``raw`` holds it as decoded JSON."""

    type: str = ""
    raw: dict[str, Any] = {}


ContentBlock = Union[TextContent, ImageContent, AudioContent, ResourceLink, EmbeddedResource]
_KnownContent = ContentBlock


class CallToolResult(Struct, **_OPTS):
    """The result of ``tools/call``.

    ``is_error`` is True when the tool itself failed (the failure is described in
    ``content``); protocol-level failures are raised as exceptions instead.
    """

    content: list[ContentBlock] = []
    structured_content: Any = None
    is_error: bool = False
    result_type: Union[str, None] = None
    meta: Union[dict[str, Any], None] = field(default=None, name="_meta")

    @property
    def text(self) -> str:
        """The text of every text block, joined by newlines."""
        return "\n".join(c.text for c in self.content if isinstance(c, TextContent))


class ServerCapabilities(Struct, **_OPTS):
    tools: Union[dict[str, Any], None] = None
    resources: Union[dict[str, Any], None] = None
    prompts: Union[dict[str, Any], None] = None
    logging: Union[dict[str, Any], None] = None
    completions: Union[dict[str, Any], None] = None
    tasks: Union[dict[str, Any], None] = None
    experimental: Union[dict[str, Any], None] = None
    extensions: Union[dict[str, Any], None] = None


class InitializeResult(Struct, **_OPTS):
    protocol_version: str = ""
    capabilities: ServerCapabilities = ServerCapabilities()
    server_info: Implementation = Implementation()
    instructions: Union[str, None] = None
    meta: Union[dict[str, Any], None] = field(default=None, name="_meta")


class DiscoverResult(Struct, **_OPTS):
    supported_versions: list[str] = []
    capabilities: ServerCapabilities = ServerCapabilities()
    instructions: Union[str, None] = None
    ttl_ms: Union[int, None] = None
    cache_scope: Union[str, None] = None
    result_type: Union[str, None] = None
    meta: Union[dict[str, Any], None] = field(default=None, name="_meta")

    @property
    def server_info(self) -> Implementation:
        info = (self.meta or {}).get("io.modelcontextprotocol/serverInfo") or {}
        try:
            return msgspec.convert(info, Implementation)
        except msgspec.ValidationError:
            return Implementation()


class EmptyResult(Struct, **_OPTS):
    result_type: Union[str, None] = None
    meta: Union[dict[str, Any], None] = field(default=None, name="_meta")


# --------------------------------------------------------------------------- codec

_envelope_decoder = msgspec.json.Decoder(Envelope)
_encoder = msgspec.json.Encoder()
_content_decoder = msgspec.json.Decoder(list[_KnownContent])
_any_decoder = msgspec.json.Decoder()

encode = _encoder.encode


#: the envelope decoder itself, for a caller that maps its errors with
#: :func:`envelope_error` (the reader's fast path); it raises msgspec.ValidationError
#: or msgspec.DecodeError
decode_envelope_unchecked = _envelope_decoder.decode


def error_reply(rid: Any, code: int, message: str, data: Any = None) -> dict[str, Any]:
    """A JSON-RPC error answer to request ``rid`` (``None`` when it could not be read)."""
    error: dict[str, Any] = {"code": code, "message": message}
    if data is not None:
        error["data"] = data
    return {"jsonrpc": "2.0", "id": rid, "error": error}


def envelope_error(exc: msgspec.ValidationError | msgspec.DecodeError) -> ProtocolError:
    """The :class:`ProtocolError` (code -32600/-32700) for an envelope that did not decode."""
    if isinstance(exc, msgspec.ValidationError):
        return ProtocolError(f"invalid JSON-RPC envelope: {exc}", code=-32600)
    return ProtocolError(f"malformed JSON: {exc}", code=-32700)


class _IdPeek(Struct):
    id: Union[int, str, None] = None
    method: Union[str, None] = None


_id_peek = msgspec.json.Decoder(_IdPeek)


# the start of a response that is not JSON as a whole (e.g. cut short or broken inside
# its result): its id can still be read from its first members
_RESPONSE_START = re.compile(rb'\s*\{\s*"jsonrpc"\s*:\s*"2\.0"\s*,\s*"id"\s*:\s*(-?[0-9]+|"[^"\\]*")\s*,\s*"(?:result|error)"')


def response_id(data: bytes) -> Union[int, str, None]:
    """The id of a message that failed to decode as an envelope, if it is shaped like a
    response (an ``id``, no ``method``), or, when it is not JSON, if it starts like one:
    the request it answers can then fail at once instead of waiting for its timeout.
    None otherwise."""
    try:
        peek = _id_peek.decode(data)
    except msgspec.ValidationError:
        return None
    except msgspec.DecodeError:
        start = _RESPONSE_START.match(data)
        if start is None:
            return None
        rid = start.group(1)
        return rid[1:-1].decode("utf-8", "replace") if rid[:1] == b'"' else int(rid)
    return peek.id if peek.method is None else None


_ID_IN_PART = re.compile(rb'"id"\s*:\s*(-?\d+|"(?:[^"\\]|\\.)*")')


def oversized_id(head: bytes, tail: bytes) -> Union[int, str, None]:
    """The id an oversized message shows in its first or last bytes (the only parts a
    transport keeps of it), so that the request it answers fails at once."""
    for part in (head, tail):
        m = _ID_IN_PART.search(part)
        if m:
            tok = m.group(1)
            return int(tok) if tok[:1] != b'"' else tok[1:-1].decode("utf-8", "replace")
    return None


def decode_params(env: Envelope) -> Any:
    """The decoded ``params`` of a notification or request (None when absent or not JSON)."""
    if len(env.params) == 0:
        return None
    try:
        return _any_decoder.decode(env.params)
    except msgspec.DecodeError:
        return None


def decode_envelope(data: bytes) -> Envelope:
    """Decode one JSON-RPC message. Raises :class:`ProtocolError` (code -32700/-32600)."""
    try:
        env = _envelope_decoder.decode(data)
    except (msgspec.ValidationError, msgspec.DecodeError) as exc:
        raise envelope_error(exc) from None
    return env


class _CallToolWire(Struct, **_OPTS):
    content: list[Raw] = []
    structured_content: Any = None
    is_error: bool = False
    result_type: Union[str, None] = None
    meta: Union[dict[str, Any], None] = field(default=None, name="_meta")


_one_content = msgspec.json.Decoder(_KnownContent)


def content_list(raws: list[Raw]) -> list[Any]:
    out: list[Any] = []
    for raw in raws:
        try:
            out.append(_one_content.decode(raw))
        except msgspec.ValidationError:
            obj = _any_decoder.decode(raw)
            if not isinstance(obj, dict):
                raise
            out.append(UnknownContent(type=str(obj.get("type", "")), raw=obj))
    return out


_call_typed = msgspec.json.Decoder(CallToolResult)
_call_wire = msgspec.json.Decoder(_CallToolWire)


def decode_call_tool(raw: bytes) -> CallToolResult:
    try:
        return _call_typed.decode(raw)
    except msgspec.ValidationError:
        w = _call_wire.decode(raw)
        return CallToolResult(
            content=content_list(w.content),
            structured_content=w.structured_content,
            is_error=w.is_error,
            result_type=w.result_type,
            meta=w.meta,
        )


def _typed(tp: Any) -> Any:
    dec = msgspec.json.Decoder(tp)
    return dec.decode


STRUCT_META = type(Struct)  #: the metaclass of typed messages: ``type(x).__class__ is STRUCT_META`` is a cheap test


def _raw_to_builtins(obj: Any) -> Any:
    if isinstance(obj, Raw):
        return _any_decoder.decode(obj)
    raise TypeError(f"cannot convert {type(obj).__name__} to JSON")


def to_builtins(obj: Any) -> Any:
    """Typed Struct → plain JSON-compatible objects (wire names); undecoded JSON is decoded."""
    return msgspec.to_builtins(obj, enc_hook=_raw_to_builtins)
