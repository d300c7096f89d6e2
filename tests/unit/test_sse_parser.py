"""The SSE parser and the small HTTP helpers shared by the HTTP transports."""

from __future__ import annotations

import socket

import pytest

from mcpsync._errors import (
    AuthError,
    ConnectError,
    MessageTooLarge,
    NetworkError,
    PermissionDenied,
    ProtocolError,
    RequestTimeout,
)
from mcpsync.transports._sse import SSEEvent, SSEParser, Oversized
from mcpsync.transports._http_headers import encode_header_value, header_annotation_error, header_annotations, mcp_param_headers
from mcpsync.transports._http_options import media_type
from mcpsync.transports._http_errors import status_error, translate


def events(parser: SSEParser, *chunks: bytes) -> list[SSEEvent | Oversized]:
    out: list[SSEEvent | Oversized] = []
    for chunk in chunks:
        out.extend(parser.feed(chunk))
    return out


def data_of(items: list[SSEEvent | Oversized]) -> list[bytes]:
    return [e.data for e in items if isinstance(e, SSEEvent)]


def test_one_event_with_type_and_id() -> None:
    p = SSEParser()
    [ev] = events(p, b'event: message\r\nid: 7\r\ndata: {"a":1}\r\n\r\n')
    assert (ev.event, ev.data, ev.id) == ("message", b'{"a":1}', "7")
    assert p.last_event_id == "7"


def test_default_event_type_is_message() -> None:
    [ev] = events(SSEParser(), b"data: x\n\n")
    assert ev.event == "message"


@pytest.mark.parametrize("eol", [b"\n", b"\r", b"\r\n"])
def test_every_line_ending(eol: bytes) -> None:
    stream = b"data: a" + eol + b"data: b" + eol + eol + b"data: c" + eol + eol
    assert data_of(events(SSEParser(), stream)) == [b"a\nb", b"c"]


def test_byte_by_byte_gives_the_same_events() -> None:
    stream = b'id: 1\r\nevent: message\r\ndata: {"x": "y"}\r\n\r\n: ping\r\n\r\ndata: two\r\n\r\n'
    p = SSEParser()
    assert data_of(events(p, *[stream[i : i + 1] for i in range(len(stream))])) == [b'{"x": "y"}', b"two"]
    assert p.last_event_id == "1"


def test_crlf_split_between_reads_is_one_line_ending() -> None:
    p = SSEParser()
    out = events(p, b"data: a\r", b"\n\r", b"\ndata: b\r\n\r\n")
    assert data_of(out) == [b"a", b"b"]


def test_comments_and_keepalives_are_ignored() -> None:
    assert data_of(events(SSEParser(), b": ping\n\n:\n\ndata: z\n: mid-event comment\n\n")) == [b"z"]


def test_priming_event_keeps_id_and_retry() -> None:
    p = SSEParser()
    out = events(p, b"id: e1\r\ndata: \r\nretry: 200\r\n\r\n")
    assert [e.data for e in out if isinstance(e, SSEEvent)] == [b""]  # the transport skips it
    assert p.last_event_id == "e1"
    assert p.retry == 200


def test_lone_id_and_retry_without_data_still_count() -> None:
    p = SSEParser()
    assert events(p, b"id: 42\nretry: 1500\n\n") == []
    assert (p.last_event_id, p.retry) == ("42", 1500)


def test_invalid_retry_is_ignored() -> None:
    p = SSEParser()
    events(p, b"retry: soon\n\n")
    assert p.retry is None


def test_field_without_space_and_without_colon() -> None:
    assert data_of(events(SSEParser(), b"data:tight\ndata\n\n")) == [b"tight\n"]


def test_id_persists_across_events() -> None:
    out = events(SSEParser(), b"id: 3\ndata: a\n\ndata: b\n\n")
    assert [e.id for e in out if isinstance(e, SSEEvent)] == ["3", "3"]


def test_large_event_split_across_many_reads() -> None:
    payload = b"x" * (4 * 1024 * 1024)
    stream = b"data: " + payload + b"\n\n"
    p = SSEParser(max_size=8 * 1024 * 1024)
    out = events(p, *[stream[i : i + 4096] for i in range(0, len(stream), 4096)])
    assert data_of(out) == [payload]


def test_oversized_event_is_reported_once_and_parsing_goes_on() -> None:
    p = SSEParser(max_size=100)
    out = events(p, b'data: {"id": 5, "pad": "' + b"y" * 300 + b'"}\n\n', b"data: ok\n\n")
    assert isinstance(out[0], Oversized)
    err = out[0].error
    assert isinstance(err, MessageTooLarge)
    assert err.head.startswith(b'{"id": 5')
    assert data_of(out) == [b"ok"]


def test_oversized_single_line_across_reads_keeps_memory_bounded() -> None:
    p = SSEParser(max_size=1000)
    out: list[SSEEvent | Oversized] = []
    out += p.feed(b"data: ")
    for _ in range(100):
        out += p.feed(b"z" * 1000)
        assert len(p._partial) < 3000
    out += p.feed(b"\n\n")
    out += p.feed(b"data: after\n\n")
    assert isinstance(out[0], Oversized)
    assert data_of(out) == [b"after"]


def test_oversized_multiline_event_does_not_end_early() -> None:
    p = SSEParser(max_size=10)
    out = events(p, b"data: 0123456789ABC", b"\ndata: more", b"\n\ndata: ok\n\n")
    assert isinstance(out[0], Oversized)
    assert data_of(out) == [b"ok"]


def test_media_type_drops_parameters() -> None:
    assert media_type("application/json; charset=utf-8") == "application/json"
    assert media_type("Text/Event-Stream") == "text/event-stream"
    assert media_type(None) == ""


def test_header_value_encoding() -> None:
    assert encode_header_value("eu-west-1") == "eu-west-1"
    assert encode_header_value("café").startswith("=?base64?")
    assert encode_header_value(" padded") != " padded"
    assert encode_header_value("=?base64?abc?=") != "=?base64?abc?="


def test_header_annotations() -> None:
    good = {"type": "object", "properties": {"region": {"type": "string", "x-mcp-header": "Region"}}}
    assert header_annotation_error(good) is None
    assert header_annotations(good) == {("region",): "Region"}
    assert mcp_param_headers(header_annotations(good), {"region": "eu"}) == {"Mcp-Param-Region": "eu"}
    assert mcp_param_headers(header_annotations(good), {}) == {}
    bad_type = {"type": "object", "properties": {"n": {"type": "number", "x-mcp-header": "N"}}}
    assert header_annotation_error(bad_type)
    dup = {
        "type": "object",
        "properties": {
            "a": {"type": "string", "x-mcp-header": "X"},
            "b": {"type": "string", "x-mcp-header": "x"},
        },
    }
    assert header_annotation_error(dup)
    off_chain = {"type": "object", "anyOf": [{"properties": {"a": {"type": "string", "x-mcp-header": "A"}}}]}
    assert header_annotation_error(off_chain)
    bad_token = {"type": "object", "properties": {"a": {"type": "string", "x-mcp-header": "has space"}}}
    assert header_annotation_error(bad_token)


def test_status_errors_are_typed() -> None:
    assert isinstance(status_error(401, "u"), AuthError)
    assert isinstance(status_error(403, "u"), PermissionDenied)
    assert isinstance(status_error(500, "u"), NetworkError)
    assert isinstance(status_error(504, "u"), RequestTimeout)
    assert isinstance(status_error(415, "u"), ProtocolError)
    assert status_error(502, "u").status == 502


def test_connection_refused_is_a_connect_error_not_a_timeout() -> None:
    import urllib3

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    http = urllib3.PoolManager()
    with pytest.raises(Exception) as info:
        http.request("GET", f"http://127.0.0.1:{port}/", retries=False, timeout=2)
    err = translate(info.value, "u", connecting=True)
    assert isinstance(err, ConnectError)
    assert not isinstance(err, RequestTimeout)


def test_stream_threads_are_reused_and_end_at_close() -> None:
    import threading

    from mcpsync.transports._http_pools import StreamThreads

    threads = StreamThreads()
    seen: list[threading.Thread] = []
    done = threading.Event()

    def job() -> None:
        seen.append(threading.current_thread())
        done.set()

    for _ in range(3):
        done.clear()
        threads.spawn(job)
        assert done.wait(5)
        threading.Event().wait(0.05)  # let the thread park itself again
    assert len(set(seen)) == 1
    assert threads.close(5)
    assert not seen[0].is_alive()


def test_redirects_only_within_the_origin() -> None:
    from mcpsync.transports._http_errors import redirect_target

    class Resp:
        def __init__(self, status: int, location: str) -> None:
            self.status = status
            self.headers = {"location": location}

        def drain_conn(self) -> None:
            pass

        def release_conn(self) -> None:
            pass

    assert redirect_target("http://h:1/mcp/", Resp(307, "/mcp")) == "http://h:1/mcp"
    assert redirect_target("http://h:1/mcp", Resp(200, "/x")) is None
    assert redirect_target("http://h:1/mcp", Resp(302, "/x")) is None  # would turn a POST into GET
    with pytest.raises(ProtocolError, match="another origin"):
        redirect_target("http://h:1/mcp", Resp(308, "https://elsewhere.example/mcp"))


@pytest.mark.parametrize(
    "page",
    [
        "Authorization: Bearer abc.SECRET.def",
        "authorization=Basic dXNlcjpTRUNSRVQ=",
        "proxy said: bearer SECRETSECRET",
        '{"access_token": "SECRET-1", "refresh_token":"SECRET-2"}',
        "callback?code=1&token=SECRET-3&state=x",
        "api_key=SECRET-4 apiKey: SECRET-5 X-Api-Key: SECRET-6",
        '{"client_secret":"SECRET-7","password":"SECRET-8"}',
        "Cookie: session=SECRET-9",
        "jwt eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiJTRUNSRVQifQ.c2ln and more",
        "eyJhbGciOiJIUzI1NiIsInR5cCI6IkpXVCJ9SECRET",  # a JWT cut short
        "echo of the request: Mcp-Session-Id: sess-SECRET-10",
    ],
)
def test_error_bodies_are_redacted(page: str) -> None:
    from mcpsync.transports._http_errors import redact

    out = redact(page.encode(), secrets=("sess-SECRET-10",))
    assert "SECRET" not in out and "[redacted]" in out


def test_redaction_keeps_the_rest_and_cuts_long_pages() -> None:
    from mcpsync.transports._http_errors import SNIPPET, redact

    assert redact(b"upstream timed out (invalid_token is not a token)") == "upstream timed out (invalid_token is not a token)"
    out = redact(b"x" * 5000 + b" Bearer SECRET-AT-THE-END")
    assert len(out) <= SNIPPET + 1 and "SECRET" not in out
    # redaction comes before the cut: a credential across the cut never leaves half of itself
    out = redact(b"y" * (SNIPPET - 10) + b" token=SECRETSECRETSECRET")
    assert "SECR" not in out
