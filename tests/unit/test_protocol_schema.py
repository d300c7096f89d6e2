"""outputSchema validation (JSON Schema 2020-12, no network $ref) and the protocol wire types."""

from __future__ import annotations

import http.server
import threading

import pytest

from mcpsync import ProtocolError
from mcpsync._decoders import decode_result
from mcpsync._handlers import fill_defaults as _fill_defaults
from mcpsync._protocol_types import (
    CreateTaskResult,
    GetPromptResult,
    InputRequiredResult,
    ReadResourceResult,
    decode_input_required,
)
from mcpsync._schema import OutputSchemaError, validate_output

SCHEMA = {
    "type": "object",
    "properties": {"n": {"type": "integer", "minimum": 0}, "tags": {"type": "array", "items": {"type": "string"}}},
    "required": ["n"],
    "additionalProperties": False,
}


def test_valid_passes():
    validate_output(SCHEMA, {"n": 3, "tags": ["a"]}, tool="t")
    validate_output(None, None, tool="t")  # nothing declared: nothing checked


@pytest.mark.parametrize(
    "value, path",
    [({"n": -1}, "/n"), ({"n": 1, "tags": [1]}, "/tags/0"), ({}, ""), ({"n": 1, "x": 2}, "")],
)
def test_mismatch_is_typed(value, path):
    with pytest.raises(OutputSchemaError) as info:
        validate_output(SCHEMA, value, tool="count")
    err = info.value
    assert isinstance(err, ProtocolError) and err.code == -32602
    assert err.tool == "count" and err.path == path
    assert "count" in str(err)


def test_missing_structured_content():
    with pytest.raises(OutputSchemaError, match="no structuredContent"):
        validate_output(SCHEMA, None, tool="t")


def test_2020_12_keywords():
    schema = {"type": "array", "prefixItems": [{"type": "integer"}, {"type": "string"}], "items": False}
    validate_output(schema, [1, "a"])
    with pytest.raises(OutputSchemaError):
        validate_output(schema, [1, "a", 3])


def test_local_ref_resolved():
    schema = {"$defs": {"pos": {"type": "integer", "minimum": 1}}, "type": "object", "properties": {"n": {"$ref": "#/$defs/pos"}}}
    validate_output(schema, {"n": 2})
    with pytest.raises(OutputSchemaError):
        validate_output(schema, {"n": 0})


def test_network_ref_never_fetched():
    hits: list[str] = []

    class Handler(http.server.BaseHTTPRequestHandler):
        def do_GET(self):  # noqa: N802
            hits.append(self.path)
            body = b'{"type": "integer"}'
            self.send_response(200)
            self.send_header("Content-Type", "application/schema+json")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *a):
            pass

    srv = http.server.HTTPServer(("127.0.0.1", 0), Handler)
    t = threading.Thread(target=srv.serve_forever, daemon=True)
    t.start()
    try:
        url = f"http://127.0.0.1:{srv.server_port}/int.json"
        schema = {"type": "object", "properties": {"n": {"$ref": url}}}
        with pytest.raises(OutputSchemaError, match="cannot be applied"):
            validate_output(schema, {"n": 1}, tool="t")
    finally:
        srv.shutdown()
        srv.server_close()
    assert hits == []


def test_invalid_schema_reported():
    with pytest.raises(OutputSchemaError, match="not a valid JSON Schema"):
        validate_output({"type": 12}, {}, tool="t")


# ------------------------------------------------------------------ wire types


def test_read_resource_decodes_text_and_blob():
    raw = b'{"contents":[{"uri":"a://1","mimeType":"text/plain","text":"hi"},{"uri":"a://2","blob":"AAE="}],"ttlMs":5,"cacheScope":"public","future":1}'
    r = decode_result("resources/read", raw)
    assert isinstance(r, ReadResourceResult)
    assert r.text == "hi" and r.blob == b"\x00\x01" and r.ttl_ms == 5 and r.cache_scope == "public"


def test_get_prompt_tolerates_unknown_content():
    raw = b'{"messages":[{"role":"user","content":{"type":"text","text":"a"}},{"role":"assistant","content":{"type":"hologram","x":1}}]}'
    r = decode_result("prompts/get", raw)
    assert isinstance(r, GetPromptResult)
    assert r.text == "a" and r.messages[1].content.type == "hologram"


def test_missing_result_type_reads_as_complete():
    # the Python SDK client defect: a modern result without resultType must not raise
    r = decode_result("resources/read", b'{"contents":[]}')
    assert r.result_type is None


def test_input_required_and_task_results():
    ir = decode_input_required(
        b'{"resultType":"input_required","inputRequests":{"k":{"method":"roots/list"}},"requestState":"opaque"}'
    )
    assert isinstance(ir, InputRequiredResult) and ir.request_state == "opaque" and "k" in ir.input_requests
    task = decode_result("tools/call", b'{"task":{"taskId":"t1","status":"working","pollInterval":10}}')
    assert isinstance(task, CreateTaskResult) and task.task.task_id == "t1" and not task.task.done
    plain = decode_result("tools/call", b'{"content":[{"type":"text","text":"task"}]}')
    assert plain.text == "task"


def test_elicitation_defaults():
    params = {"requestedSchema": {"properties": {"a": {"type": "string", "default": "x"}, "b": {"type": "integer"}}}}
    assert _fill_defaults(params, {"action": "accept", "content": {"b": 1}}) == {"action": "accept", "content": {"a": "x", "b": 1}}
    assert _fill_defaults(params, {"action": "accept", "content": {"a": "mine"}})["content"] == {"a": "mine"}
    assert _fill_defaults(params, {"action": "decline"}) == {"action": "decline"}
    url = {"mode": "url", "url": "https://example.com"}
    assert _fill_defaults(url, {"action": "accept"}) == {"action": "accept"}
