"""The modern per-request ``_meta`` is encoded once per value on a connection that sends
JSON, and left a mapping on an in-process channel (whose server reads it as one)."""

from __future__ import annotations

import msgspec
import orjson

from mcpsync._handshake import _Connection

META = {"io.modelcontextprotocol/protocolVersion": "2026-07-28", "io.modelcontextprotocol/clientInfo": {"name": "t"}}


def test_a_json_connection_sends_the_meta_encoded_once_per_value() -> None:
    conn = _Connection(channel=None, transport=object(), key="k")  # type: ignore[arg-type]
    wire = conn.wire_meta(META)
    assert isinstance(wire, msgspec.Raw) and orjson.loads(bytes(wire)) == META
    assert conn.wire_meta(META) is wire  # the same value: not encoded again
    changed = {**META, "io.modelcontextprotocol/logLevel": "debug"}
    rewired = conn.wire_meta(changed)  # a new value (log level, renegotiation): encoded anew
    assert orjson.loads(bytes(rewired)) == changed
    body = msgspec.json.encode({"params": {"name": "x", "_meta": rewired}})
    assert orjson.loads(body)["params"]["_meta"] == changed  # spliced in as JSON, not as a string


def test_an_in_process_channel_gets_the_mapping_itself() -> None:
    conn = _Connection(channel=None, transport=None, key="k")
    assert conn.wire_meta(META) is META
