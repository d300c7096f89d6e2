"""The msgspec codec: permissive envelope, typed results, unknown fields ignored."""

from __future__ import annotations

import pickle

import msgspec
import pytest

from mcpsync import (
    AudioContent,
    CallToolResult,
    EmbeddedResource,
    ImageContent,
    InvalidParams,
    MethodNotFound,
    ProtocolError,
    RemoteError,
    ResourceLink,
    ResourceNotFound,
    TextContent,
    ToolNotFound,
    UnknownContent,
)
from mcpsync._errors import ERROR_CODE_TABLE, ConnectError, error_from_code
from mcpsync._decoders import decode_result
from mcpsync._messages import decode_envelope, encode, response_id


def test_envelope_kinds():
    req = decode_envelope(b'{"jsonrpc":"2.0","id":"a-1","method":"ping"}')
    assert req.id == "a-1" and req.method == "ping" and len(req.params) == 0
    note = decode_envelope(b'{"jsonrpc":"2.0","method":"notifications/progress","params":{"progress":1}}')
    assert note.id is None and bytes(note.params) == b'{"progress":1}'
    res = decode_envelope(b'{"result":{"x":1},"jsonrpc":"2.0","id":7}')
    assert res.id == 7 and bytes(res.result) == b'{"x":1}' and res.method is None
    err = decode_envelope(b'{"jsonrpc":"2.0","id":7,"error":{"code":-32601,"message":"no","data":{"m":"x"}}}')
    assert err.error.code == -32601 and err.error.data == {"m": "x"}
    null = decode_envelope(b'{"jsonrpc":"2.0","id":1,"result":null}')
    assert bytes(null.result) == b"null"


def test_envelope_unknown_members_ignored():
    env = decode_envelope(b'{"jsonrpc":"2.0","id":1,"result":{},"extra":{"deep":[1,2]},"x":null}')
    assert env.id == 1


@pytest.mark.parametrize(
    "data, code",
    [
        (b"not json", -32700),
        (b'{"jsonrpc":"2.0","id":1,"result":', -32700),
        (b"\xff\xfe", -32700),
        (b"[1,2,3]", -32600),
        (b'{"id":{"nested":1}}', -32600),
        (b'{"method":5}', -32600),
    ],
)
def test_malformed_messages_are_typed_protocol_errors(data, code):
    with pytest.raises(ProtocolError) as info:
        decode_envelope(data)
    assert info.value.code == code


@pytest.mark.parametrize(
    "data",
    [
        b'{"jsonrpc":"1.0","id":1,"result":{}}',
        b'{"id":1,"result":{}}',
        b'{"jsonrpc":2.0,"id":1,"result":{}}',
        b'{"jsonrpc":"2.0 ","id":1,"result":{}}',
        b'{"jsonrpc":null,"method":"notifications/progress"}',
    ],
    ids=["1.0", "missing", "number", "padded", "null"],
)
def test_only_jsonrpc_2_0_is_an_envelope(data):
    with pytest.raises(ProtocolError) as info:
        decode_envelope(data)
    assert info.value.code == -32600 and "jsonrpc" in str(info.value)


@pytest.mark.parametrize(
    "data, rid",
    [
        (b'{"jsonrpc":"1.0","id":7,"result":{}}', 7),
        (b'{"id":"abc","error":{"code":1}}', "abc"),
        (b'{"jsonrpc":"1.0","id":7,"method":"ping"}', None),  # a request, not an answer
        (b'{"jsonrpc":"1.0","method":"x"}', None),
        (b"[1,2,3]", None),
        (b'{"id":1.5}', None),
        (b"not json", None),
    ],
)
def test_the_id_of_an_invalid_answer_is_found_when_it_has_one(data, rid):
    assert response_id(data) == rid


def test_call_tool_result_with_every_content_block():
    raw = encode(
        {
            "content": [
                {"type": "text", "text": "hi", "annotations": {"audience": ["user"], "priority": 0.5}},
                {"type": "image", "data": "AAAA", "mimeType": "image/png"},
                {"type": "audio", "data": "BBBB", "mimeType": "audio/wav"},
                {"type": "resource_link", "uri": "file:///x", "name": "x", "mimeType": "text/plain"},
                {"type": "resource", "resource": {"uri": "mem://a", "text": "body", "mimeType": "text/plain"}},
                {"type": "resource", "resource": {"uri": "mem://b", "blob": "Q0FGRQ=="}},
            ],
            "structuredContent": {"ok": True},
            "isError": False,
            "_meta": {"k": "v"},
            "futureField": 1,
        }
    )
    r = decode_result("tools/call", raw)
    assert isinstance(r, CallToolResult)
    text, image, audio, link, embedded, blob = r.content
    assert isinstance(text, TextContent) and text.text == "hi" and text.annotations.priority == 0.5
    assert isinstance(image, ImageContent) and image.mime_type == "image/png"
    assert isinstance(audio, AudioContent) and audio.data == "BBBB"
    assert isinstance(link, ResourceLink) and link.uri == "file:///x"
    assert isinstance(embedded, EmbeddedResource) and embedded.resource.text == "body"
    assert blob.resource.blob == "Q0FGRQ==" and blob.resource.text is None
    assert r.structured_content == {"ok": True} and r.meta == {"k": "v"} and r.text == "hi"


def test_unknown_content_type_is_kept_not_fatal():
    raw = b'{"content":[{"type":"hologram","frames":3},{"type":"text","text":"t"}]}'
    r = decode_result("tools/call", raw)
    assert isinstance(r.content[0], UnknownContent) and r.content[0].raw == {"type": "hologram", "frames": 3}
    assert r.content[1].text == "t"


def test_tools_list_typed_and_tolerant():
    raw = encode(
        {
            "tools": [
                {
                    "name": "a",
                    "title": "A",
                    "inputSchema": {"type": "object"},
                    "outputSchema": {"type": "object"},
                    "annotations": {"readOnlyHint": True, "somethingNew": 1},
                    "icons": [{"src": "https://x/icon.png", "mimeType": "image/png"}],
                    "_meta": {"m": 1},
                    "newField": [1],
                }
            ],
            "nextCursor": "c2",
        }
    )
    r = decode_result("tools/list", raw)
    t = r.tools[0]
    assert t.name == "a" and t.title == "A" and t.annotations.read_only_hint is True
    assert t.icons[0].src.endswith("icon.png") and t.meta == {"m": 1} and r.next_cursor == "c2"


def test_result_of_the_wrong_shape_is_a_protocol_error():
    with pytest.raises(ProtocolError) as info:
        decode_result("tools/list", b'{"tools": "not a list"}')
    assert info.value.code == -32602


def test_untyped_methods_decode_to_plain_json():
    assert decode_result("x/custom", b'{"a":[1,2]}') == {"a": [1, 2]}


def test_error_code_table_maps_and_is_configurable():
    assert isinstance(error_from_code(-32601, "no such method"), MethodNotFound)
    assert isinstance(error_from_code(-32602, "bad", method="tools/call"), InvalidParams)
    assert isinstance(error_from_code(-32602, "Tool nope not found", method="tools/call"), ToolNotFound)
    assert isinstance(error_from_code(-32602, "Resource not found", method="resources/read"), ResourceNotFound)
    assert isinstance(error_from_code(-32002, "Resource not found"), ResourceNotFound)
    assert type(error_from_code(-31999, "custom")) is RemoteError

    class Mine(RemoteError):
        pass

    table = {**ERROR_CODE_TABLE, -31999: Mine}
    assert isinstance(error_from_code(-31999, "custom", table=table), Mine)


def test_errors_pickle_with_their_fields():
    e = error_from_code(-32602, "bad field", {"field": "x"})
    back = pickle.loads(pickle.dumps(e))
    assert type(back) is InvalidParams and back.code == -32602 and back.data == {"field": "x"} and str(back) == "bad field"
    c = pickle.loads(pickle.dumps(ConnectError("down", attempts=2)))
    assert c.attempts == 2


def test_structs_are_frozen():
    r = decode_result("tools/call", b'{"content":[]}')
    with pytest.raises(AttributeError):
        r.is_error = True  # type: ignore[misc]
    assert msgspec.to_builtins(r) == {}  # defaults are omitted on the wire


def test_tool_schemas_are_decoded_on_first_access_and_kept():
    raw = encode({"tools": [
        {"name": "a", "inputSchema": {"type": "object", "properties": {"x": {"type": "integer"}}},
         "outputSchema": {"type": "object"}},
        {"name": "b", "inputSchema": {"type": "object"}, "outputSchema": None},
        {"name": "c"},
    ]})
    a, b, c = decode_result("tools/list", raw).tools
    assert "input_schema" not in a.__dict__  # nothing decoded yet
    assert a.input_schema == {"type": "object", "properties": {"x": {"type": "integer"}}}
    assert a.input_schema is a.input_schema  # decoded once, then kept
    assert a.output_schema == {"type": "object"}
    assert b.output_schema is None and c.output_schema is None and c.input_schema == {}
    assert "input_schema={'type': 'object'" in repr(a) and "Raw" not in repr(a)


def test_a_tool_whose_schema_is_not_an_object_fails_on_access_alone():
    raw = encode({"tools": [{"name": "bad", "inputSchema": [1, 2], "outputSchema": "no"},
                            {"name": "good", "inputSchema": {"type": "object"}}]})
    bad, good = decode_result("tools/list", raw).tools
    assert good.input_schema == {"type": "object"}
    with pytest.raises(ProtocolError, match="tool 'bad': inputSchema must be a JSON object, got list") as info:
        bad.input_schema
    assert info.value.code == -32602
    with pytest.raises(ProtocolError, match="outputSchema must be a JSON object, got str"):
        bad.output_schema


def test_a_built_tool_encodes_and_converts_like_a_decoded_one():
    from mcpsync._messages import Tool, to_builtins

    t = Tool.build("t", input_schema={"type": "object"}, output_schema={"type": "object"}, title="T")
    assert t.input_schema == {"type": "object"} and t.output_schema == {"type": "object"}
    wire = msgspec.json.decode(encode(t))
    assert wire == {"name": "t", "title": "T", "inputSchema": {"type": "object"}, "outputSchema": {"type": "object"}}
    assert to_builtins(t) == wire
    bare = Tool.build("u")
    assert msgspec.json.decode(encode(bare)) == {"name": "u", "inputSchema": {"type": "object"}}
    assert bare.output_schema is None
    back = decode_result("tools/list", encode({"tools": [t]})).tools[0]
    assert back == t and back.input_schema == t.input_schema
    assert pickle.loads(pickle.dumps(back)).input_schema == {"type": "object"}
