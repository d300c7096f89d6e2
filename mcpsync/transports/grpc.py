"""gRPC transport: JSON-RPC messages as opaque frames on an HTTP/2 stream.

gRPC is not an official MCP transport; the contract is ``mcpsync_transport.proto``
beside this module (service ``mcpsync.transport.v1.McpTransport``), and
:mod:`mcpsync.server.bridge` serves any MCP server over it.

* ``Session`` (default, ``scope="session"``): one bidirectional stream per connection,
  for the session-scoped protocol eras; closing the transport half-closes the stream,
  which ends the session.
* ``Call`` (``scope="request"``, :attr:`request_scoped`): one server-streaming RPC per
  request, for the stateless 2026-07-28 era; notifications about the request and then
  its response come back on it, and ``notifications/cancelled`` for the request
  cancels the RPC instead of being sent.

The message has one ``bytes`` field, so frames are encoded by :func:`encode_frame` /
:func:`decode_frame` (a test checks them against protoc's output) and grpcio is the
only dependency: no generated stubs, no protobuf runtime. grpcio is an optional extra
(``pip install mcpsync[grpc]``), imported when a transport connects.

gRPC status codes mean transport failures and map into the error tree through
:data:`mcpsync._status_errors.GRPC_STATUS_TABLE` (:func:`~mcpsync._status_errors.error_from_grpc_status`):
UNAUTHENTICATED → :class:`AuthError`, PERMISSION_DENIED → :class:`PermissionDenied`,
UNAVAILABLE → :class:`ConnectError` (connecting) / :class:`ConnectionClosed`,
DEADLINE_EXCEEDED → :class:`RequestTimeout`, RESOURCE_EXHAUSTED → :class:`MessageTooLarge`
when a message exceeded the size limit, else a (transient) :class:`NetworkError`.

Example:
    >>> t = GrpcTransport("127.0.0.1:50051", token="s3cret")
    >>> t.describe()
    'grpc 127.0.0.1:50051'
    >>> decode_frame(encode_frame(b'{"jsonrpc":"2.0"}'))
    b'{"jsonrpc":"2.0"}'
"""

from __future__ import annotations

import queue
import threading
from concurrent.futures import ThreadPoolExecutor
from typing import Any, Iterator, Mapping, Sequence

import msgspec

from .._channel import MessageFacts, message_facts
from .._errors import (
    ConnectError,
    ConnectionClosed,
    MCPError,
    MessageTooLarge,
    ProtocolError,
    RequestTimeout,
)
from .._status_errors import error_from_grpc_status
from .._speedups import DEFAULT_MAX_MESSAGE_SIZE as _DEFAULT_MAX
from ._base import Transport
from ._inbox import ENDED, Inbox

__all__ = [
    "GrpcTransport",
    "encode_frame",
    "decode_frame",
    "SERVICE",
    "SESSION_METHOD",
    "CALL_METHOD",
    "DEFAULT_MAX_MESSAGE_SIZE",
    "channel_options",
    "status_error",
]

SERVICE = "mcpsync.transport.v1.McpTransport"
SESSION_METHOD = f"/{SERVICE}/Session"
CALL_METHOD = f"/{SERVICE}/Call"
#: Default message-size limit both ways: the project-wide 16 MiB (gRPC's own default is 4 MiB).
DEFAULT_MAX_MESSAGE_SIZE = _DEFAULT_MAX

# --------------------------------------------------------------------------- codec
# JsonRpcFrame { bytes payload = 1; }: field 1, wire type 2 (length-delimited) → tag 0x0A.

_TAG = b"\x0a"


def _varint(n: int) -> bytes:
    out = bytearray()
    while n > 0x7F:
        out.append((n & 0x7F) | 0x80)
        n >>= 7
    out.append(n)
    return bytes(out)


def encode_frame(payload: bytes) -> bytes:
    """Serialise ``JsonRpcFrame(payload=payload)`` exactly as protobuf does."""
    n = len(payload)
    if n == 0:
        return b""  # proto3 leaves a default (empty) field out
    if n < 0x80:
        return _TAG + bytes((n,)) + payload
    return _TAG + _varint(n) + payload


def _read_varint(data: bytes, pos: int) -> tuple[int, int]:
    result = 0
    shift = 0
    end = len(data)
    while True:
        if pos >= end or shift > 63:
            raise ProtocolError("malformed JsonRpcFrame: truncated varint")
        b = data[pos]
        pos += 1
        result |= (b & 0x7F) << shift
        if b < 0x80:
            return result, pos
        shift += 7


def decode_frame(data: bytes) -> bytes:
    """Parse a serialised ``JsonRpcFrame`` and return its payload.

    Unknown fields are skipped, a repeated field 1 keeps the last value (protobuf's
    rules). Raises :class:`ProtocolError` on malformed input.
    """
    data = bytes(data)
    end = len(data)
    # fast path: exactly one field 1
    if end > 1 and data[0] == 0x0A:
        n, pos = _read_varint(data, 1)
        if pos + n == end:
            return data[pos:]
    payload = b""
    pos = 0
    while pos < end:
        key, pos = _read_varint(data, pos)
        field_no, wire = key >> 3, key & 7
        if field_no == 0:
            raise ProtocolError("malformed JsonRpcFrame: field number 0")
        if wire == 0:
            _, pos = _read_varint(data, pos)
        elif wire == 1:
            pos += 8
        elif wire == 2:
            n, pos = _read_varint(data, pos)
            if pos + n > end:
                raise ProtocolError("malformed JsonRpcFrame: truncated field")
            if field_no == 1:
                payload = data[pos : pos + n]
            pos += n
        elif wire == 5:
            pos += 4
        else:
            raise ProtocolError(f"malformed JsonRpcFrame: wire type {wire}")
        if pos > end:
            raise ProtocolError("malformed JsonRpcFrame: truncated field")
    return payload


# --------------------------------------------------------------------------- helpers


def _grpc() -> Any:
    try:
        import grpc  # type: ignore[import-untyped]
    except ImportError as exc:
        raise ConnectError("the gRPC transport needs grpcio: pip install 'mcpsync[grpc]'") from exc
    return grpc


def channel_options(max_message_size: int = DEFAULT_MAX_MESSAGE_SIZE, extra: Sequence[tuple[str, Any]] = ()) -> list[tuple[str, Any]]:
    """Channel/server options raising gRPC's message-size limits to ``max_message_size``."""
    return [
        ("grpc.max_send_message_length", max_message_size),
        ("grpc.max_receive_message_length", max_message_size),
        *extra,
    ]


def status_error(code: Any, details: str, where: str, *, connecting: bool = False) -> MCPError:
    """The error for a gRPC status: worded here, mapped by
    :func:`mcpsync._status_errors.error_from_grpc_status` (the one table)."""
    name = getattr(code, "name", str(code))
    return error_from_grpc_status(code, f"{where}: gRPC {name}: {details or 'no details'}", connecting=connecting)


_END = object()  # ends the session stream's outbox (the half-close)


class _Id(msgspec.Struct):
    id: Any = None
    method: Any = None
    params: Any = None


_peek = msgspec.json.Decoder(_Id)


def _facts_of(message: bytes) -> MessageFacts:
    """Facts for a message sent without them (read from its id, method and params)."""
    try:
        env = _peek.decode(message)
    except msgspec.DecodeError as exc:
        raise ProtocolError(f"not a JSON-RPC message: {exc}") from exc
    method = env.method if isinstance(env.method, str) else None
    facts = message_facts(env.id, method, env.params)
    return facts if facts is not None else MessageFacts(env.id, method)


class GrpcTransport(Transport):
    """A gRPC client of the ``McpTransport`` service.

    Args:
        target: ``host:port`` of the server.
        token: sent as ``authorization: Bearer <token>`` metadata.
        metadata: further metadata pairs (keys are lowercased).
        secure: use TLS (system roots unless ``root_certificates`` is given).
        root_certificates: PEM bytes of the roots to trust (TLS).
        private_key: PEM bytes of the client's key (mTLS).
        certificate_chain: PEM bytes of the client's certificate chain (mTLS).
        credentials: a ready ``grpc.ChannelCredentials`` (implies TLS).
        max_message_size: limit for sent and received messages (default 16 MiB).
        scope: ``"session"`` (one ``Session`` bidi stream) or ``"request"`` (a ``Call``
            RPC per request; for the stateless 2026-07-28 era).
        options: extra grpc channel options.
        authority: override of the ``:authority`` (TLS server name).
    """

    kind = "grpc"

    def __init__(
        self,
        target: str,
        *,
        token: str | None = None,
        metadata: Mapping[str, str] | Sequence[tuple[str, str]] | None = None,
        secure: bool = False,
        root_certificates: bytes | None = None,
        private_key: bytes | None = None,
        certificate_chain: bytes | None = None,
        credentials: Any = None,
        max_message_size: int = DEFAULT_MAX_MESSAGE_SIZE,
        scope: str = "session",
        options: Sequence[tuple[str, Any]] = (),
        authority: str | None = None,
    ) -> None:
        if scope not in ("session", "request"):
            raise ValueError("scope must be 'session' or 'request'")
        self.target = target
        self.scope = scope
        self.request_scoped = scope == "request"
        items = metadata.items() if isinstance(metadata, Mapping) else (metadata or ())
        self._metadata: list[tuple[str, str]] = [(k.lower(), v) for k, v in items]
        if token is not None:
            self._metadata.append(("authorization", f"Bearer {token}"))
        self._secure = secure or credentials is not None or root_certificates is not None
        self._tls = (root_certificates, private_key, certificate_chain)
        self._credentials = credentials
        self.max_message_size = max_message_size
        extra = list(options)
        if authority:
            extra.append(("grpc.ssl_target_name_override", authority))
            extra.append(("grpc.default_authority", authority))
        self._options = channel_options(max_message_size, extra)
        self._protocol_version: str | None = None
        self._channel: Any = None
        self._inbox = Inbox()
        self.next_message = self._inbox.first  # (see Transport.next_message)
        self._outbox: queue.SimpleQueue[Any] = queue.SimpleQueue()
        self._end: MCPError | None = None
        self._end_reported = False
        self._closed = False
        self._lock = threading.Lock()
        self._session_call: Any = None
        self._session_md: dict[str, str] = {}
        self._reader: threading.Thread | None = None
        self._calls: dict[Any, Any] = {}
        self._cancelled: set[int] = set()
        self._pool: ThreadPoolExecutor | None = None

    # ------------------------------------------------------------------ lifecycle

    def describe(self) -> str:
        return f"grpc {self.target}"

    def set_protocol_version(self, version: str) -> None:
        self._protocol_version = version

    def session_info(self) -> dict[str, Any]:
        info: dict[str, Any] = {"scope": self.scope}
        if "mcp-session-id" in self._session_md:
            info["session_id"] = self._session_md["mcp-session-id"]
        return info

    def alive(self) -> bool:
        return self._channel is not None and not self._closed and self._end is None

    def connect(self, timeout: float) -> None:
        grpc = _grpc()
        if self._channel is not None:
            raise ConnectError("GrpcTransport.connect() called twice")
        if self._secure:
            creds = self._credentials or grpc.ssl_channel_credentials(*self._tls)
            channel = grpc.secure_channel(self.target, creds, options=self._options)
        else:
            channel = grpc.insecure_channel(self.target, options=self._options)
        try:
            grpc.channel_ready_future(channel).result(timeout=timeout)
        except grpc.FutureTimeoutError as exc:
            channel.close()
            raise ConnectError(f"{self.describe()}: not reachable within {timeout:g} s") from exc
        self._channel = channel
        if self.request_scoped:
            self._call_rpc = channel.unary_stream(CALL_METHOD, request_serializer=encode_frame, response_deserializer=decode_frame)
            self._pool = ThreadPoolExecutor(max_workers=32, thread_name_prefix="mcpsync-grpc-call")
            self._probe(grpc, timeout)
            return
        rpc = channel.stream_stream(SESSION_METHOD, request_serializer=encode_frame, response_deserializer=decode_frame)
        call = rpc(self._requests(), metadata=self._call_metadata())
        self._session_call = call
        opened = threading.Event()
        self._reader = threading.Thread(target=self._read_session, args=(call, opened), name="mcpsync-grpc-reader", daemon=True)
        self._reader.start()
        # The bridge sends its initial metadata as soon as the session is open (or fails
        # the call: a wrong token). Other servers may only answer after the first
        # message, so do not wait for them long.
        opened.wait(min(timeout, 0.5))
        if call.done() and call.code() != grpc.StatusCode.OK:
            err = status_error(call.code(), call.details(), self.describe(), connecting=True)
            self._closed = True
            channel.close()
            raise err

    def _probe(self, grpc: Any, timeout: float) -> None:
        """Request scope: an empty frame is a handshake probe (the server checks the metadata
        and ends the call), so a wrong token fails ``connect`` rather than a request."""
        try:
            for _ in self._call_rpc(b"", metadata=self._call_metadata(), timeout=timeout):
                pass
        except grpc.RpcError as exc:
            code = exc.code()
            if code in (grpc.StatusCode.UNAUTHENTICATED, grpc.StatusCode.PERMISSION_DENIED,
                        grpc.StatusCode.UNAVAILABLE, grpc.StatusCode.UNIMPLEMENTED,
                        grpc.StatusCode.DEADLINE_EXCEEDED):
                self.close()
                raise status_error(code, exc.details(), self.describe(), connecting=True) from exc
            # any other answer: a server that does not know the probe; carry on

    def close(self) -> None:
        with self._lock:
            if self._closed and self._channel is None:
                return
            self._closed = True
            channel, self._channel = self._channel, None
            calls = list(self._calls.values())
            self._calls.clear()
        self._outbox.put(_END)  # half-close: the server ends the session
        reader = self._reader
        if reader is not None and reader is not threading.current_thread():
            reader.join(1.0)
        if self._session_call is not None:
            self._session_call.cancel()
        for c in calls:
            c.cancel()
        if self._pool is not None:
            self._pool.shutdown(wait=False, cancel_futures=True)
        if channel is not None:
            channel.close()
        self._inbox.end()

    # ------------------------------------------------------------------ I/O

    needs_facts = True  # (see Transport.needs_facts)

    def send(self, message: bytes, timeout: float | None = None, facts: MessageFacts | None = None) -> None:
        if self._closed or self._channel is None:
            raise ConnectionClosed(f"{self.describe()}: connection is closed")
        if self._end is not None:
            raise ConnectionClosed(str(self._end))
        message = bytes(message)
        if len(message) > self.max_message_size:
            raise MessageTooLarge(
                f"{self.describe()}: a {len(message)}-byte message exceeds the {self.max_message_size}-byte limit",
                size=len(message), head=message[:256], tail=message[-256:],
            )
        if not self.request_scoped:
            self._outbox.put(message)
        else:
            self._send_call(message, facts)

    def wait_first(self, timeout: float | None) -> bool:
        if not self._inbox.fill(timeout):
            return False
        if self._inbox.first[0] is not ENDED:
            return True
        # the end (the mark stays first, for every later reader)
        with self._lock:
            err = self._end
            first = not self._end_reported
            self._end_reported = True
        if err is None:
            raise ConnectionClosed(f"{self.describe()}: connection closed")
        if isinstance(err, MessageTooLarge) and not first:
            raise ConnectionClosed(f"{self.describe()}: closed after an oversized message: {err}")
        raise err

    # ------------------------------------------------------------------ session scope

    def _call_metadata(self) -> list[tuple[str, str]]:
        md = list(self._metadata)
        if self._protocol_version:
            md.append(("mcp-protocol-version", self._protocol_version))
        return md

    def _requests(self) -> Iterator[bytes]:
        get = self._outbox.get
        while True:
            item = get()
            if item is _END:
                return
            yield item

    def _read_session(self, call: Any, opened: threading.Event) -> None:
        grpc = _grpc()
        try:
            try:
                md = call.initial_metadata()
                self._session_md = {k: v for k, v in (md or ()) if isinstance(v, str)}
            finally:
                opened.set()
            put = self._inbox.put
            for payload in call:
                put(payload)
            if not self._closed:
                self._set_end(ConnectionClosed(f"{self.describe()}: the server ended the session"))
        except grpc.RpcError as exc:
            if not self._closed:
                self._set_end(status_error(exc.code(), exc.details(), self.describe()))
        except Exception as exc:  # noqa: BLE001 - e.g. a malformed frame
            if not self._closed:
                self._set_end(ConnectionClosed(f"{self.describe()}: reading failed: {exc}"))
        finally:
            self._inbox.end()

    def _set_end(self, err: MCPError) -> None:
        with self._lock:
            if self._end is None:
                self._end = err

    # ------------------------------------------------------------------ request scope

    def _send_call(self, message: bytes, facts: MessageFacts | None = None) -> None:
        if facts is None:
            facts = _facts_of(message)
        if facts.method == "notifications/cancelled":
            rid = facts.cancels
            with self._lock:
                call = self._calls.pop(rid, None)
                if call is not None:
                    self._cancelled.add(id(call))
            if call is not None:
                call.cancel()
            return
        call = self._call_rpc(message, metadata=self._call_metadata())
        is_request = facts.is_request
        with self._lock:
            if self._closed:
                call.cancel()
                raise ConnectionClosed(f"{self.describe()}: connection is closed")
            if is_request:
                self._calls[facts.id] = call
            pool = self._pool
        assert pool is not None
        pool.submit(self._pump_call, facts.id if is_request else None, call)

    def _pump_call(self, rid: Any, call: Any) -> None:
        grpc = _grpc()
        try:
            put = self._inbox.put
            for payload in call:
                put(payload)
        except grpc.RpcError as exc:
            with self._lock:
                mine = id(call) in self._cancelled
                self._cancelled.discard(id(call))
            if mine or self._closed:
                return
            err = status_error(exc.code(), exc.details(), self.describe())
            if isinstance(err, RequestTimeout):
                return  # the dispatcher times the request out itself
            self._set_end(err)
            self._inbox.end()
        except Exception as exc:  # noqa: BLE001
            self._set_end(ConnectionClosed(f"{self.describe()}: reading failed: {exc}"))
            self._inbox.end()
        finally:
            if rid is not None:
                with self._lock:
                    if self._calls.get(rid) is call:
                        del self._calls[rid]
