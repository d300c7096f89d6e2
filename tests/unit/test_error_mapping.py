"""The error table: JSON-RPC codes, HTTP statuses, gRPC statuses, and the HTTP
transports' translation of urllib3 / socket exceptions (the live one, ``translate``).

The HTTP and gRPC tables here are the ones the transports use: ``status_error`` of
``transports/_http_errors.py`` and of ``transports/grpc.py`` only word the message and
call :func:`error_from_http_status` / :func:`error_from_grpc_status` (checked below).
"""

from __future__ import annotations

import pickle

import pytest

from mcpsync import _errors as E
from mcpsync import _status_errors as S
from mcpsync._status_errors import error_from_grpc_status, error_from_http_status
from mcpsync._errors import (
    AuthError,
    Cancelled,
    CircuitOpen,
    ConnectError,
    ConnectionClosed,
    InvalidParams,
    MCPError,
    MessageTooLarge,
    MethodNotFound,
    NetworkError,
    PermissionDenied,
    PoolClosed,
    PoolTimeout,
    ProtocolError,
    RemoteError,
    RequestTimeout,
    ResourceNotFound,
    ServerUnavailable,
    ToolNotFound,
    attach_fields,
    counts_as_breaker_failure,
    error_from_code,
    is_server_error,
    is_transient,
    may_have_reached_server,
)


# --- JSON-RPC codes -----------------------------------------------------------------


@pytest.mark.parametrize(
    ("code", "method", "message", "cls"),
    [
        (-32601, None, "no such method", MethodNotFound),
        (-32602, None, "bad", InvalidParams),
        (-32602, "tools/call", "Unknown tool: nope", ToolNotFound),
        (-32602, "resources/read", "Resource not found", ResourceNotFound),
        (-32002, None, "Resource not found", ResourceNotFound),
        (-32603, None, "boom", RemoteError),
    ],
)
def test_jsonrpc_codes(code: int, method: str | None, message: str, cls: type) -> None:
    err = error_from_code(code, message, method=method)
    assert type(err) is cls
    assert err.code == code


def test_server_error_classification() -> None:
    # an error answer proves the server alive: only codes marked transient are faults
    assert not is_server_error(error_from_code(-32603, "internal"))
    assert not is_server_error(error_from_code(-32000, "server error"))
    E.TRANSIENT_CODES.add(-32000)
    try:
        assert is_server_error(error_from_code(-32000, "busy, try again"))
        assert is_transient(error_from_code(-32000, "busy, try again"))
        assert counts_as_breaker_failure(error_from_code(-32000, "busy, try again"))
    finally:
        E.TRANSIENT_CODES.discard(-32000)
    assert not is_transient(error_from_code(-32603, "internal"))
    assert not is_server_error(error_from_code(-32002, "resource not found"))  # MCP answer, not a fault
    assert not is_server_error(error_from_code(-32022, "unsupported version"))
    assert not is_server_error(error_from_code(-32602, "bad"))
    assert not is_server_error(error_from_code(-32601, "nope"))
    assert not is_server_error(error_from_code(-31000, "app-defined"))
    assert not is_server_error(ConnectionClosed("x"))


# --- HTTP ---------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("status", "cls"),
    [
        (400, ProtocolError),
        (401, AuthError),
        (403, PermissionDenied),
        (404, E.SessionExpired),
        (408, RequestTimeout),
        (413, MessageTooLarge),
        (429, NetworkError),
        (500, NetworkError),
        (502, NetworkError),
        (503, NetworkError),
        (504, RequestTimeout),
        (507, NetworkError),  # unlisted 5xx
        (418, ProtocolError),  # unlisted 4xx
    ],
)
def test_http_status_table(status: int, cls: type) -> None:
    err = error_from_http_status(status, "x")
    assert type(err) is cls
    assert err.status == status


def test_http_status_while_connecting_and_overrides() -> None:
    err = error_from_http_status(504, connecting=True)
    assert type(err) is ConnectError and err.timeout is True
    err = error_from_http_status(503, connecting=True)
    assert type(err) is ConnectError and err.timeout is False
    assert type(error_from_http_status(401, connecting=True)) is AuthError  # auth stays auth
    assert str(error_from_http_status(502)) == "HTTP 502"
    custom = {**S.HTTP_STATUS_TABLE, 409: ConnectionClosed}
    assert type(error_from_http_status(409, table=custom)) is ConnectionClosed
    assert error_from_http_status(429, retry_after=3.0).retry_after == 3.0


def test_404_is_a_lost_session_only_when_there_was_one() -> None:
    err = error_from_http_status(404, "gone")
    assert type(err) is E.SessionExpired and not counts_as_breaker_failure(err)
    err = error_from_http_status(404, "no such URL", session=False)
    assert type(err) is ProtocolError and err.status == 404 and not counts_as_breaker_failure(err)


@pytest.mark.parametrize("status", [400, 405, 406, 409, 415, 418, 422])
def test_other_4xx_are_the_clients_mistake(status: int) -> None:
    err = error_from_http_status(status, "x")
    assert type(err) is ProtocolError and err.status == status
    assert not is_transient(err) and not counts_as_breaker_failure(err)


def test_429_was_not_sent_and_says_when_to_come_back() -> None:
    err = error_from_http_status(429, "slow down", headers={"Retry-After": "7"})
    assert isinstance(err, NetworkError) and (err.status, err.retry_after, err.sent) == (429, 7.0, False)
    assert not may_have_reached_server(err) and is_transient(err) and counts_as_breaker_failure(err)
    assert error_from_http_status(429, headers={}).retry_after is None
    # 503: retry_after too, but the request may have run: only safe calls are retried
    err = error_from_http_status(503, headers={"retry-after": "2"})
    assert isinstance(err, NetworkError) and err.retry_after == 2.0 and may_have_reached_server(err)
    assert error_from_http_status(503).retry_after is None


def test_retry_after_forms() -> None:
    from email.utils import formatdate

    assert S.retry_after_seconds("120") == 120.0
    assert S.retry_after_seconds(" 0 ") == 0.0
    assert S.retry_after_seconds(None) is None
    assert S.retry_after_seconds("soon") is None
    assert S.retry_after_seconds("-3") is None
    now = 1_800_000_000.0
    assert S.retry_after_seconds(formatdate(now + 30, usegmt=True), now=now) == pytest.approx(30.0)
    assert S.retry_after_seconds(formatdate(now - 30, usegmt=True), now=now) == 0.0


def test_the_transports_map_through_these_tables() -> None:
    from mcpsync.transports import _http_errors

    err = _http_errors.status_error(429, "http://h/mcp", b"busy", {"Retry-After": "5"})
    assert type(err) is NetworkError and (err.retry_after, err.sent) == (5.0, False)
    assert str(err) == "HTTP 429 from http://h/mcp: busy"
    for status in (400, 401, 403, 404, 408, 413, 500, 503, 504):
        assert type(_http_errors.status_error(status, "u")) is type(error_from_http_status(status))
    assert type(_http_errors.status_error(404, "u", session=False)) is ProtocolError
    assert not hasattr(_http_errors, "_STATUS_TABLE")
    grpc = pytest.importorskip("grpc")
    from mcpsync.transports.grpc import status_error as grpc_status_error

    for code in grpc.StatusCode:
        if code is grpc.StatusCode.OK:
            continue
        assert type(grpc_status_error(code, "d", "w")) is type(error_from_grpc_status(code, "d"))


def test_http_errors_are_not_retryable_auth_but_5xx_are_transient() -> None:
    assert not is_transient(error_from_http_status(401))
    assert not is_transient(error_from_http_status(403))
    assert is_transient(error_from_http_status(503))
    assert is_transient(error_from_http_status(429))


# --- gRPC ---------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("name", "cls"),
    [
        ("UNAUTHENTICATED", AuthError),
        ("PERMISSION_DENIED", PermissionDenied),
        ("UNAVAILABLE", ConnectionClosed),
        ("DEADLINE_EXCEEDED", RequestTimeout),
        ("CANCELLED", ConnectionClosed),  # the peer ended the stream (our own cancels are not mapped)
        ("RESOURCE_EXHAUSTED", NetworkError),
        ("INTERNAL", ConnectionClosed),
        ("UNKNOWN", ConnectionClosed),
        ("UNIMPLEMENTED", ProtocolError),
        ("NOT_FOUND", ConnectError),
        ("SOMETHING_NEW", NetworkError),
    ],
)
def test_grpc_status_names(name: str, cls: type) -> None:
    err = error_from_grpc_status(name, "details")
    assert type(err) is cls
    assert err.status == name


def test_grpc_message_over_the_size_limit_is_message_too_large() -> None:
    err = error_from_grpc_status("RESOURCE_EXHAUSTED", "Received message larger than max (2097222 vs. 1048576)")
    assert type(err) is MessageTooLarge and not counts_as_breaker_failure(err)
    err = error_from_grpc_status("RESOURCE_EXHAUSTED", "quota exceeded, try later")
    assert type(err) is NetworkError and is_transient(err)


def test_grpc_status_code_forms() -> None:
    grpc = pytest.importorskip("grpc")
    assert type(error_from_grpc_status(grpc.StatusCode.UNAVAILABLE)) is ConnectionClosed
    assert type(error_from_grpc_status(14)) is ConnectionClosed  # numeric UNAVAILABLE
    assert type(error_from_grpc_status(4)) is RequestTimeout  # DEADLINE_EXCEEDED
    err = error_from_grpc_status(grpc.StatusCode.UNAVAILABLE, connecting=True)
    assert type(err) is ConnectError and err.timeout is False
    err = error_from_grpc_status("DEADLINE_EXCEEDED", connecting=True)
    assert type(err) is ConnectError and err.timeout is True


# --- lower-layer exceptions: the live translation of the HTTP transports -------------


def test_http_transport_translation_of_lower_layer_exceptions() -> None:
    import urllib3.exceptions as u

    from mcpsync.transports._http_errors import translate

    refused = u.NewConnectionError(None, "[Errno 111] Connection refused")  # type: ignore[arg-type]
    err = translate(refused, "http://h/mcp")
    assert type(err) is ConnectError and getattr(err, "timeout", False) is False  # refused is never a timeout
    assert type(translate(u.MaxRetryError(None, "/", reason=refused), "http://h/mcp")) is ConnectError  # type: ignore[arg-type]
    assert type(translate(u.ConnectTimeoutError(None, "timed out"), "u")) is ConnectError
    assert type(translate(u.SSLError("bad cert"), "u")) is ConnectError
    assert type(translate(u.ReadTimeoutError(None, "/", "read timed out"), "u")) is RequestTimeout  # type: ignore[arg-type]
    assert type(translate(TimeoutError(), "u")) is RequestTimeout
    assert type(translate(u.ProtocolError("reset"), "u")) is ConnectionClosed
    assert type(translate(u.ProtocolError("reset"), "u", fatal=False)) is NetworkError
    err = translate(ConnectionResetError(), "u", connecting=True)
    assert type(err) is NetworkError and err.sent is True  # written, maybe acted on
    assert type(translate(RuntimeError("??"), "u")) is NetworkError
    original = ToolNotFound("x")
    assert translate(original, "u") is original


@pytest.mark.parametrize(
    ("exc", "reached"),
    [
        (ConnectError("refused"), False),
        (CircuitOpen("open"), False),
        (PoolTimeout("busy"), False),
        (PoolClosed("closed"), False),
        (ServerUnavailable("down"), False),
        (RequestTimeout("t"), True),
        (ConnectionClosed("eof"), True),
        (ConnectionClosed("write failed before any byte", sent=False), False),
        (error_from_code(-32603, "boom"), True),
    ],
)
def test_may_have_reached_server(exc: MCPError, reached: bool) -> None:
    assert may_have_reached_server(exc) is reached


@pytest.mark.parametrize(
    ("exc", "counted"),
    [
        (ConnectError("refused"), True),
        (ConnectionClosed("eof"), True),
        (RequestTimeout("t"), True),
        (NetworkError("503"), True),
        (ProtocolError("garbage"), True),
        (error_from_code(-32603, "boom"), False),  # an answer: the server is alive
        (E.StartFailed("no such command"), False),
        (E.SessionExpired("404 again"), False),
        (error_from_http_status(400), False),  # the client's own mistake
        (CircuitOpen("open"), False),
        (ServerUnavailable("down"), False),
        (PoolTimeout("busy"), False),
        (MessageTooLarge("big"), False),
        (InvalidParams("bad"), False),
        (ToolNotFound("nope"), False),
        (MethodNotFound("nope", code=-32601), False),
        (AuthError("401"), False),
        (PermissionDenied("403"), False),
        (Cancelled("by caller"), False),
        (ValueError("a bug"), False),
    ],
)
def test_counts_as_breaker_failure(exc: BaseException, counted: bool) -> None:
    assert counts_as_breaker_failure(exc) is counted


def test_mapped_errors_and_attached_fields_pickle() -> None:
    err = error_from_http_status(429, "slow down", retry_after=2.5)
    attach_fields(err, retry_history=(("NetworkError", 0.0), ("NetworkError", 1.0)))
    back = pickle.loads(pickle.dumps(err))
    assert type(back) is NetworkError
    assert (back.status, back.retry_after, back.message) == (429, 2.5, "slow down")
    assert back.retry_history == (("NetworkError", 0.0), ("NetworkError", 1.0))
    grpc_err = pickle.loads(pickle.dumps(error_from_grpc_status("UNAVAILABLE", connecting=True)))
    assert type(grpc_err) is ConnectError and grpc_err.timeout is False and grpc_err.status == "UNAVAILABLE"
    open_err = pickle.loads(pickle.dumps(CircuitOpen("open", retry_after=12.0, server="s")))
    assert (open_err.retry_after, open_err.server) == (12.0, "s")
    remote = pickle.loads(pickle.dumps(attach_fields(error_from_code(-32602, "bad", {"field": "q"}), retry_history=())))
    assert type(remote) is InvalidParams and remote.data == {"field": "q"} and remote.retry_history == ()
