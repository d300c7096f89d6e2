"""The hand-written JsonRpcFrame codec agrees byte for byte with protoc's generated code.

The gRPC transport does not ship generated stubs: its one message has one ``bytes``
field, so mcpsync encodes it by hand. These tests compile the packaged .proto with
grpcio-tools (protoc) and check the codec against the generated message class, so the
codec and the contract cannot drift apart.
"""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

import pytest

from mcpsync import ProtocolError
from mcpsync.transports import grpc as grpc_transport
from mcpsync.transports.grpc import CALL_METHOD, SERVICE, SESSION_METHOD, decode_frame, encode_frame

PROTO = Path(grpc_transport.__file__).with_name("mcpsync_transport.proto")

PAYLOADS = [
    b"",
    b"{}",
    b'{"jsonrpc":"2.0","id":1,"method":"ping"}',
    "{\"text\":\"h\u00e9llo \u2603 \U0001f600\"}".encode(),
    b"x" * 127,
    b"x" * 128,
    b"x" * 300,
    b"y" * 16383,
    b"y" * 16384,
    b"z" * (2 * 1024 * 1024 + 7),
]


@pytest.fixture(scope="module")
def pb2(tmp_path_factory: pytest.TempPathFactory):
    grpc_tools = pytest.importorskip("grpc_tools")
    from grpc_tools import protoc

    out = tmp_path_factory.mktemp("protoc")
    include = Path(grpc_tools.__file__).parent / "_proto"
    rc = protoc.main(
        ["protoc", f"-I{PROTO.parent}", f"-I{include}", f"--python_out={out}", str(PROTO)]
    )
    assert rc == 0, "protoc failed on the packaged .proto"
    path = out / "mcpsync_transport_pb2.py"
    spec = importlib.util.spec_from_file_location("_mcpsync_transport_pb2_under_test", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


@pytest.mark.parametrize("payload", PAYLOADS, ids=lambda p: f"{len(p)}B")
def test_encode_matches_protoc(pb2, payload: bytes) -> None:
    assert encode_frame(payload) == pb2.JsonRpcFrame(payload=payload).SerializeToString()


@pytest.mark.parametrize("payload", PAYLOADS, ids=lambda p: f"{len(p)}B")
def test_decode_reads_protoc_output(pb2, payload: bytes) -> None:
    assert decode_frame(pb2.JsonRpcFrame(payload=payload).SerializeToString()) == payload


def test_unknown_and_repeated_fields_follow_protobuf_rules(pb2) -> None:
    # field 2 varint, field 3 fixed64, field 1 twice (last wins), field 4 fixed32, field 5 bytes
    data = (
        b"\x10\x96\x01"
        + b"\x19" + b"\x00" * 8
        + encode_frame(b"first")
        + encode_frame(b"second")
        + b"\x25" + b"\x01\x02\x03\x04"
        + b"\x2a\x03abc"
    )
    assert decode_frame(data) == pb2.JsonRpcFrame.FromString(data).payload == b"second"


@pytest.mark.parametrize(
    "data",
    [b"\x0a", b"\x0a\x05abc", b"\x0a\xff", b"\x0b\x00", b"\x00\x01"],
    ids=["no-length", "short-payload", "truncated-varint", "bad-wire-type", "field-zero"],
)
def test_malformed_frames_raise_protocol_error(pb2, data: bytes) -> None:
    with pytest.raises(ProtocolError):
        decode_frame(data)
    with pytest.raises(Exception):  # protobuf rejects them too
        pb2.JsonRpcFrame.FromString(data)


def test_service_names_match_the_proto(pb2) -> None:
    service = pb2.DESCRIPTOR.services_by_name["McpTransport"]
    assert service.full_name == SERVICE
    methods = {m.name: m for m in service.methods}
    assert f"/{SERVICE}/{methods['Session'].name}" == SESSION_METHOD
    assert f"/{SERVICE}/{methods['Call'].name}" == CALL_METHOD
    assert methods["Session"].client_streaming and methods["Session"].server_streaming
    assert not methods["Call"].client_streaming and methods["Call"].server_streaming
    for m in methods.values():
        assert m.input_type.full_name == m.output_type.full_name == "mcpsync.transport.v1.JsonRpcFrame"
    field = pb2.JsonRpcFrame.DESCRIPTOR.fields_by_name["payload"]
    assert field.number == 1 and field.type == field.TYPE_BYTES
    assert [f.name for f in pb2.JsonRpcFrame.DESCRIPTOR.fields] == ["payload"]


def test_proto_ships_inside_the_package() -> None:
    assert PROTO.is_file()
    assert "package mcpsync.transport.v1;" in PROTO.read_text()


def test_grpcio_and_websockets_are_imported_lazily() -> None:
    import subprocess

    code = ("import sys, mcpsync.transports.grpc, mcpsync.server.bridge; "
            "print('grpc' in sys.modules, 'websockets' in sys.modules)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert out.stdout.split() == ["False", "False"], out.stderr
