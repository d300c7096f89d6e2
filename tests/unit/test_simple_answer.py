"""The JSON lane's reading of an answer (``simple_answer``), side by side with httptools.

The lane takes an answer only when it is one whole answer of the common shape; whatever it
takes, the general parser (httptools, llhttp) must read alike: status 200, the same body,
complete, the connection kept, a JSON content type, no coding, no cookie. Both twins (the
compiled one's C scan, the pure one's regular expression and searches) must agree with each
other on every input. Explicit rows first, then hypothesis: answers built from parts and
then mutated (flipped, inserted, deleted bytes, cut short), and random bytes after a
plausible status line.
"""

from __future__ import annotations

from typing import Any

import pytest

httptools = pytest.importorskip("httptools")

from hypothesis import HealthCheck, given, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402

from mcpsync._speedups import _pyhttp  # noqa: E402

try:
    from mcpsync._speedups import _chttp
except ImportError:  # the pure build: test_both_twins_are_here says so where it matters
    _chttp = None

TWINS = [_pyhttp] + ([_chttp] if _chttp is not None else [])
BODY = b'{"jsonrpc":"2.0","id":7,"result":{"content":[]}}'


def answer(*fields: bytes, body: bytes = BODY, status: bytes = b"HTTP/1.1 200 OK", length: bool = True) -> bytes:
    head = [status, *fields]
    if length:
        head.append(b"content-length: %d" % len(body))
    return b"\r\n".join(head) + b"\r\n\r\n" + body


def general(data: bytes) -> dict[str, Any] | None:
    """What httptools reads of ``data``: None when it fails to parse it."""

    class Reader:
        def __init__(self) -> None:
            self.fields: list[tuple[bytes, bytes]] = []
            self.body: list[bytes] = []
            self.complete = 0
            self.keep = False

        def on_header(self, name: bytes, value: bytes) -> None:
            self.fields.append((name.lower(), value))

        def on_body(self, body: bytes) -> None:
            self.body.append(body)

        def on_message_complete(self) -> None:
            self.complete += 1
            self.keep = parser.should_keep_alive()  # (asked now: the parser resets after)

    reader = Reader()
    parser = httptools.HttpResponseParser(reader)
    try:
        parser.feed_data(data)
    except (httptools.HttpParserError, httptools.HttpParserUpgrade):
        return None
    return {
        "status": parser.get_status_code(),
        "keep": reader.keep,
        "complete": reader.complete,
        "body": b"".join(reader.body),
        "fields": reader.fields,
    }


def check(data: bytes) -> bytes | None:
    """Both twins' reading of ``data`` (the same), held against httptools' when they take it."""
    taken = [twin.simple_answer(data) for twin in TWINS]
    assert all(t == taken[0] for t in taken), (data, taken)
    body = taken[0]
    if body is not None:
        seen = general(data)
        assert seen is not None, data
        assert seen["status"] == 200 and seen["complete"] == 1 and seen["keep"], (data, seen)
        assert seen["body"] == body, data
        names = [name for name, _ in seen["fields"]]
        assert names.count(b"content-length") == 1 and names.count(b"content-type") == 1, data
        assert dict(seen["fields"])[b"content-type"].strip().lower() == b"application/json", data
        for name in (b"transfer-encoding", b"content-encoding", b"set-cookie", b"upgrade"):
            assert name not in names, data
    return body


def test_both_twins_are_here() -> None:
    assert _chttp is not None, "the compiled _chttp module did not load (run /work/tools/wbuild or setup.py build_ext)"


@pytest.mark.parametrize(
    "data",
    [
        answer(b"content-type: application/json"),
        answer(b"Content-Type: application/json", b"Date: Sun, 06 Dec 2026 08:00:00 GMT", b"Server: uvicorn"),
        answer(b"X-Powered-By: Express", b"Content-Type: Application/JSON", b"Connection: keep-alive",
               b"Keep-Alive: timeout=5"),
        answer(b"content-type:application/json", b"x-empty:", b"x-tab:\tvalue\twith tabs"),
        answer(b"content-type: application/json", b"mcp-session-id: abc"),
        answer(b"content-type: application/json", body=b""),
        answer(b"content-type: application/json", status=b"HTTP/1.1 200 "),
        answer(b"content-type: application/json", *[b"x-f%d: v" % i for i in range(98)]),
    ],
)
def test_the_common_answers_are_taken(data: bytes) -> None:
    assert check(data) is not None


@pytest.mark.parametrize(
    "data",
    [
        answer(b"content-type: application/json", status=b"HTTP/1.0 200 OK"),
        answer(b"content-type: application/json", status=b"HTTP/1.1 201 Created"),
        answer(b"content-type: application/json", status=b"HTTP/1.1 200"),
        answer(b"content-type: application/json", status=b"HTTP/1.1 200 \xc3\xa9"),
        answer(b"content-type: application/json; charset=utf-8"),
        answer(b"content-type: text/event-stream"),
        answer(b"content-type: application/json", b"content-type: application/json"),
        answer(),
        answer(b"content-type: application/json", length=False),
        answer(b"content-type: application/json", b"content-length: 3"),
        answer(b"content-type: application/json", b"transfer-encoding: chunked"),
        answer(b"content-type: application/json", b"content-encoding: gzip"),
        answer(b"content-type: application/json", b"set-cookie: a=b"),
        answer(b"content-type: application/json", b"connection: close"),
        answer(b"content-type: application/json", b"connection: keep-alive", b"connection: keep-alive"),
        answer(b"content-type: application/json", b"upgrade: h2c"),
        answer(b"content-type: application/json", b"proxy-connection: keep-alive"),
        answer(b"content-type: application/json", b"x-a: b", b" folded"),
        answer(b"content-type: application/json", b"x-a : b"),
        answer(b"content-type: application/json", b"x-a: \xff"),
        answer(b"content-type: application/json", b"x-a: \x7f"),
        answer(b"content-type: application/json", *[b"x-f%d: v" % i for i in range(99)]),
        b"HTTP/1.1 200 OK\ncontent-type: application/json\ncontent-length: 2\n\n{}",
        b"HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: +2\r\n\r\n{}",
        b"HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: 2 \r\n\r\n{}",
        b"HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: 0x2\r\n\r\n{}",
        b"HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: 2\r\n\r\n{}{}",
        b"HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: 4\r\n\r\n{}",
        b"HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: 2\r\n\r",
        b"HTTP/1.1 100 Continue\r\n\r\n" + answer(b"content-type: application/json"),
        b"",
        b"HTTP/1.1 200 OK\r\n",
    ],
)
def test_every_other_answer_is_the_general_paths(data: bytes) -> None:
    assert check(data) is None


_BENIGN = st.sampled_from([b"X-Any", b"Date", b"Server", b"Mcp-Session-Id", b"Keep-Alive", b"x"])
_OTHER = st.sampled_from([b"Content-Type", b"content-type", b"Content-Length", b"Connection", b"Transfer-Encoding",
                          b"Content-Encoding", b"Set-Cookie", b"Upgrade", b"Proxy-Connection", b"X-A B", b"X-\xff", b""])
_PLAIN = st.sampled_from([b"v", b"Sun, 06 Dec 2026 08:00:00 GMT", b"a b\tc", b""])
_ODD = st.one_of(
    st.sampled_from([b"application/json", b"Application/Json", b"application/json; charset=utf-8", b"keep-alive",
                     b"Keep-Alive", b"close", b"chunked", b"gzip", b"1", b"0", b"12", b"+3", b" 5", b"5 ", b"\t5"]),
    st.binary(max_size=12),
)


def _mostly(draw: Any, usual: Any, odd: Any) -> Any:
    """``usual`` three times in four, else ``odd``."""
    return draw(odd if draw(st.integers(0, 3)) == 0 else usual)


@st.composite
def answers(draw: Any) -> bytes:
    """An answer near the common shape: mostly right, now and then a part or a byte wrong."""
    body = draw(st.sampled_from([BODY, b"", b"{}", b"x" * 300]))
    status = _mostly(draw, st.just(b"HTTP/1.1 200 OK"), st.sampled_from([
        b"HTTP/1.1 200 OK", b"HTTP/1.1 200 ", b"HTTP/1.0 200 OK", b"HTTP/1.1 204 No Content", b"HTTP/1.1 200 O\tK",
        b"HTTP/1.1 200", b"HTTP/1.1 200 \x80"]))
    lines = [status]
    for _ in range(draw(st.integers(0, 4))):
        name = _mostly(draw, _BENIGN, _OTHER)
        sep = _mostly(draw, st.just(b": "), st.sampled_from([b":", b" : ", b":\t", b": \t"]))
        lines.append(name + sep + _mostly(draw, _PLAIN, _ODD))
    if _mostly(draw, st.just(True), st.just(False)):
        lines.insert(draw(st.integers(1, len(lines))), draw(st.sampled_from(
            [b"Content-Type: application/json", b"content-type:application/json", b"Content-Type: APPLICATION/JSON"])))
    if _mostly(draw, st.just(True), st.just(False)):
        off = _mostly(draw, st.just(0), st.integers(-2, 2))
        lines.insert(draw(st.integers(1, len(lines))), b"Content-Length: %d" % max(0, len(body) + off))
    end = _mostly(draw, st.just(b"\r\n"), st.just(b"\n"))
    data = bytearray(end.join(lines) + end + end + body)
    for _ in range(_mostly(draw, st.just(0), st.integers(1, 3))):
        if not data:
            break
        at = draw(st.integers(0, len(data) - 1))
        kind = draw(st.sampled_from(["flip", "insert", "delete", "cut"]))
        if kind == "flip":
            data[at] = draw(st.integers(0, 255))
        elif kind == "insert":
            data[at:at] = draw(st.sampled_from([b"\r", b"\n", b" ", b"\t", b":", b"\x00", b"\r\n", b"\x80"]))
        elif kind == "delete":
            del data[at]
        else:
            del data[at:]
    return bytes(data)


@settings(max_examples=3000, derandomize=True, database=None, deadline=None,
          suppress_health_check=[HealthCheck.too_slow])
@given(answers())
def test_what_the_lane_takes_httptools_reads_alike(data: bytes) -> None:
    check(data)


@settings(max_examples=1500, derandomize=True, database=None, deadline=None)
@given(st.binary(max_size=200))
def test_random_bytes_after_a_status_line(tail: bytes) -> None:
    check(b"HTTP/1.1 200 OK\r\n" + tail)
    check(b"HTTP/1.1 200 OK\r\ncontent-type: application/json\r\n" + tail)
