"""Issue 29: the fast path's answer reading, tried with random and mutated answers (hypothesis).

A raw-socket server (``tests/servers/wire_edges.py``) serves answers drawn by
:func:`plans`: interim 1xx heads first or not, an HTTP version and status, extra header
fields, a framing (``Content-Length`` right, short or long; chunked with extensions and
trailers; both; neither), the body (the request's own answer, nothing, or noise), at times
a huge head (a 4 MB line, 20,000 fields, a head that never ends), a few byte mutations
(flipped, inserted, deleted, repeated, cut), sent in pieces with pauses, and an end (the
connection kept, closed, reset, or held open). Two properties:

* :func:`test_fast_pool_manager_reads_any_answer_safely` — ``FastPoolManager`` and
  ``read_body``, as the transports use them: every exchange ends in a result or a typed
  error (urllib3's ``HTTPError`` / ``OSError`` from the exchange, an ``MCPError`` from
  ``read_body``) within its deadline plus :data:`SLACK`; a well-formed answer gives its own
  body; a huge head costs at most :data:`MEMORY` bytes at the peak; the next request, on
  the same one-socket pool, gets its own answer (or, when the server closed or held the
  socket, a typed error).
* :func:`test_two_clients_never_get_each_others_answers` — the same answers through
  ``Client.http``: Alice and Bob, with different tokens on one origin, take turns with the
  mutated answers and plain calls; every call ends in its own result or an ``MCPError``
  within its timeout plus :data:`SLACK`, and a well-formed answer gives the call's own result.

Bounded for CI: derandomized, no example database, a fixed number of examples, no
shrinking (``MCPSYNC_FUZZ_SHRINK=1`` turns it on to minimise a failure found).
"""

from __future__ import annotations

import json
import os
import re
import sys
import threading
import time
import tracemalloc
from dataclasses import dataclass
from pathlib import Path

import pytest

hypothesis = pytest.importorskip("hypothesis")
pytest.importorskip("httptools")

from hypothesis import HealthCheck, Phase, given, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402
from urllib3.exceptions import HTTPError  # noqa: E402

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "servers"))

from wire_edges import MCPServer, RawServer, Request, Wire, answer  # noqa: E402

from mcpsync import Client  # noqa: E402
from mcpsync._errors import MCPError  # noqa: E402
from mcpsync._policies import BreakerPolicy  # noqa: E402
from mcpsync.transports._fasthttp import FastPoolManager  # noqa: E402
from mcpsync.transports._http_errors import read_body  # noqa: E402

SLACK = 1.5  # seconds an exchange may outlast its deadline (a busy machine included)
MEMORY = 2 << 20  # bytes the reading of one huge head may hold at its peak
LIMIT = 1 << 20  # the largest body read_body takes here
_PHASES = [Phase.explicit, Phase.reuse, Phase.generate] + ([Phase.shrink] if os.environ.get("MCPSYNC_FUZZ_SHRINK") else [])


# --------------------------------------------------------------------------- the answers


@dataclass(frozen=True)
class Plan:
    """How one answer is written: drawn by :func:`plans`, applied to the request's own body."""

    interims: tuple[bytes, ...]
    version: bytes
    status: bytes
    headers: tuple[tuple[bytes, bytes], ...]
    framing: str  # length | short | long | chunked | both | close
    chunk: int
    extensions: bool
    trailers: bool
    body: str  # own | empty | noise
    noise: bytes
    huge: str  # "" | line | fields | endless
    mutations: tuple[tuple[float, str, bytes], ...]
    cuts: tuple[float, ...]
    delay: float
    end: str  # keep | close | rst | stall

    @property
    def valid(self) -> bool:
        """A well-formed answer whose one right reading is the request's own body."""
        ends = ("close",) if self.framing == "close" else ("keep", "close")
        return (
            not self.mutations and not self.huge and self.version == b"HTTP/1.1" and self.status == b"200 OK"
            and self.body == "own" and self.framing in ("length", "chunked", "close") and self.end in ends
            and all(name == b"X-Any" and _PLAIN.fullmatch(value) for name, value in self.headers)
        )

    def render(self, own: bytes) -> bytes:
        body = own if self.body == "own" else self.noise if self.body == "noise" else b""
        head = [self.version + b" " + self.status, b"Content-Type: application/json"]
        head += [name + b": " + value for name, value in self.headers]
        payload = body
        if self.framing == "length":
            head.append(b"Content-Length: %d" % len(body))
        elif self.framing == "short":
            head.append(b"Content-Length: %d" % max(0, len(body) - 3))
        elif self.framing == "long":
            head.append(b"Content-Length: %d" % (len(body) + 5))
        elif self.framing in ("chunked", "both"):
            head.append(b"Transfer-Encoding: chunked")
            if self.framing == "both":
                head.append(b"Content-Length: %d" % len(body))
            payload = self._chunks(body)
        if self.huge == "line":
            head.insert(1, b"X-Huge: " + b"h" * 4_000_000)
        elif self.huge == "fields":
            head[1:1] = [b"X-F%d: v" % i for i in range(20_000)]
        data = bytearray(b"".join(b"HTTP/1.1 " + i + b"\r\n\r\n" for i in self.interims))
        if self.huge == "endless":  # the head goes on after these lines (see write): no blank line
            data += b"\r\n".join(head) + b"\r\n"
        else:
            data += b"\r\n".join(head) + b"\r\n\r\n" + payload
        for where, op, blob in self.mutations:
            i = int(where * len(data))
            if op == "flip" and i < len(data):
                data[i] ^= blob[0] or 1
            elif op == "insert":
                data[i:i] = blob
            elif op == "delete":
                del data[i:i + len(blob)]
            elif op == "repeat":
                data[i:i] = data[i:i + 16]
            elif op == "cut":
                del data[i:]
        return bytes(data)

    def _chunks(self, body: bytes) -> bytes:
        ext = b";x=1;y=\"q\"" if self.extensions else b""
        out = b"".join(b"%x%s\r\n%s\r\n" % (len(body[i:i + self.chunk]), ext, body[i:i + self.chunk])
                       for i in range(0, len(body), self.chunk))
        return out + b"0" + ext + b"\r\n" + (b"X-Trailer: t\r\n" if self.trailers else b"") + b"\r\n"

    def write(self, wire: Wire, data: bytes) -> None:
        """``data`` in pieces (cut where ``cuts`` say, ``delay`` apart); an endless head goes
        on after it (2 s, 64 MiB at most); then the end (``keep`` leaves it to the caller)."""
        view = memoryview(data)  # slices without copies: the client's memory is what is measured
        edges = sorted({int(c * len(data)) for c in self.cuts} | {0, len(data)})
        for a, b in zip(edges, edges[1:]):
            if not wire.send(view[a:b]):  # type: ignore[arg-type]
                return
            if self.delay and b < len(data):
                wire.pause(self.delay)
        if self.huge == "endless":
            block = b"".join(b"X-E%d: %s\r\n" % (i, b"e" * 60) for i in range(1000))
            ends, sent = time.monotonic() + 2, 0
            while time.monotonic() < ends and sent < 64 << 20 and wire.send(block):
                sent += len(block)
        if self.end == "close":
            wire.close()
        elif self.end == "rst":
            wire.reset()
        elif self.end == "stall":
            wire.hold(1.2)  # past the first exchange's deadline (1 s)


_PLAIN = re.compile(rb"[\x21-\x7e]*")  # a field value with no framing meaning and nothing to refuse
_NAMES = st.sampled_from([b"X-Any", b"Connection", b"Keep-Alive", b"Content-Length", b"Transfer-Encoding",
                          b"Content-Encoding", b"Trailer", b"Mcp-Session-Id", b"X\x00Bad", b"Bad Name", b""])
_VALUES = st.one_of(
    st.sampled_from([b"close", b"keep-alive", b"chunked", b"gzip", b"identity", b"0", b"-1", b"99999999999999999999",
                     b"chunked, gzip", b"a\rb", b"a\nb", b"\x00", b"caf\xe9", b" padded "]),
    st.binary(max_size=24),
)


@st.composite
def plans(draw: st.DrawFn, *, huge: bool = True) -> Plan:
    interims = draw(st.lists(st.sampled_from([b"100 Continue", b"102 Processing", b"103 Early Hints\r\nLink: </a>; rel=preload"]),
                             max_size=2))
    version = draw(st.sampled_from([b"HTTP/1.1"] * 6 + [b"HTTP/1.0", b"HTTP/2", b"HTTX/1.1", b"http/1.1"]))
    status = draw(st.sampled_from([b"200 OK"] * 8 + [b"201 Created", b"204 No Content", b"404 Not Found",
                                                     b"500 Oops", b"999 What", b"20 OK", b"200"]))
    headers = tuple(draw(st.lists(st.tuples(_NAMES, _VALUES), max_size=3)) if draw(st.booleans()) else [])
    framing = draw(st.sampled_from(["length", "length", "chunked", "chunked", "close", "short", "long", "both"]))
    body = draw(st.sampled_from(["own", "own", "own", "empty", "noise"]))
    sizes = draw(st.sampled_from([""] * 12 + (["line", "fields", "endless"] if huge else [])))
    mutations = tuple(draw(st.lists(
        st.tuples(st.floats(0, 1), st.sampled_from(["flip", "insert", "delete", "repeat", "cut"]), st.binary(min_size=1, max_size=6)),
        max_size=2,
    )) if draw(st.booleans()) else [])
    return Plan(
        interims=tuple(interims), version=version, status=status, headers=headers, framing=framing,
        chunk=draw(st.integers(1, 48)), extensions=draw(st.booleans()), trailers=draw(st.booleans()), body=body,
        noise=draw(st.binary(max_size=64)), huge=sizes, mutations=mutations,
        cuts=tuple(draw(st.lists(st.floats(0, 1), max_size=3))), delay=draw(st.sampled_from([0.0, 0.0, 0.01, 0.05])),
        end=draw(st.sampled_from(["keep", "keep", "keep", "close", "rst", "stall"])),
    )


_SETTINGS = dict(deadline=None, derandomize=True, database=None, phases=_PHASES, report_multiple_bugs=False,
                 suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large, HealthCheck.function_scoped_fixture])


# --------------------------------------------------------------------------- FastPoolManager


class _Served:
    """A raw server whose first request gets the plan's answer and every later one ``{"n": N}``."""

    def __init__(self, plan: Plan) -> None:
        self.plan = plan
        self.data = plan.render(b'{"n": 1, "own": true}')
        self.done = threading.Event()
        self.server = RawServer(self._handle)

    def _handle(self, wire: Wire, request: Request) -> bool:
        if request.n > 1:
            body = b'{"n": %d}' % request.n
            return wire.send(answer(200, body, (("Content-Type", "application/json"),)))
        try:
            self.plan.write(wire, self.data)
        finally:
            self.done.set()
        return self.plan.end == "keep"


def _exchange(manager: FastPoolManager, url: str, timeout: float) -> tuple[bytes | None, BaseException | None, float]:
    """One POST as the transports make it: the exchange, ``read_body``, the socket given back."""
    start = time.monotonic()
    deadline = start + timeout
    try:
        resp = manager.exchange("POST", url, b'{"q": 1}', {"Content-Type": "application/json"}, deadline, timeout,
                                timeout, timeout)
        body = read_body(resp, LIMIT, url, deadline)
        resp.release_conn()
        return body, None, time.monotonic() - start
    except Exception as exc:  # noqa: BLE001 - judged by the caller
        return None, exc, time.monotonic() - start


@pytest.fixture
def fast_path(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("MCPSYNC_HTTP", raising=False)


@settings(max_examples=60, **_SETTINGS)  # type: ignore[arg-type]
@given(plan=plans())
def test_fast_pool_manager_reads_any_answer_safely(plan: Plan) -> None:
    served = _Served(plan)
    url = served.server.url
    manager = FastPoolManager(maxsize=1, block=True)  # one socket: one that is never given back shows at once
    try:
        measure = bool(plan.huge)
        if measure:
            tracemalloc.start()
        try:
            body, error, took = _exchange(manager, url, 1.0)
        finally:
            if measure:
                peak = tracemalloc.get_traced_memory()[1]
                tracemalloc.stop()
        assert took <= 1.0 + SLACK, f"the exchange took {took:.2f} s (deadline 1 s): {error!r}"
        if error is not None:
            assert isinstance(error, (HTTPError, OSError, MCPError)), f"not a typed error: {error!r}"
        if plan.valid:
            assert body == b'{"n": 1, "own": true}', f"a well-formed answer was read as {body!r} / {error!r}"
        if measure:
            assert peak <= MEMORY, f"a huge head took {peak} bytes at the peak"
        served.done.wait(5)  # every byte of the first answer is out before the next request
        body, error, took = _exchange(manager, url, 2.0)
        assert took <= 2.0 + SLACK, f"the next exchange took {took:.2f} s: {error!r}"
        if error is None:
            assert body is not None and body.startswith(b'{"n": ') and b"own" not in body, f"the next request got {body!r}"
        else:
            assert plan.end != "keep", f"the next request failed though the server kept serving: {error!r}"
            assert isinstance(error, (HTTPError, OSError, MCPError)), f"not a typed error: {error!r}"
    finally:
        manager.clear()
        served.server.close()


# --------------------------------------------------------------------------- two clients


class _Fuzzed:
    """An MCP server whose ``edge`` calls are answered by the plan, applied to their own result."""

    def __init__(self, plan: Plan) -> None:
        self.plan = plan
        self.done = threading.Semaphore(0)
        self.server = MCPServer(self._edge)

    def _edge(self, wire: Wire, request: Request) -> bool:
        try:
            self.plan.write(wire, self.plan.render(self.server.result(request)))
        finally:
            self.done.release()
        return self.plan.end == "keep"


@dataclass
class _Outcome:
    who: str
    message: str
    text: str | None
    error: BaseException | None
    took: float


def _call(client: Client, who: str, tool: str, message: str, timeout: float) -> _Outcome:
    start = time.monotonic()
    try:
        text = client.call_tool(tool, {"message": message}, timeout=timeout).text
        return _Outcome(who, message, text, None, time.monotonic() - start)
    except Exception as exc:  # noqa: BLE001 - judged by the caller
        return _Outcome(who, message, None, exc, time.monotonic() - start)


@settings(max_examples=25, **_SETTINGS)  # type: ignore[arg-type]
@given(plan=plans(huge=False))
def test_two_clients_never_get_each_others_answers(plan: Plan, fast_path: None) -> None:
    fuzzed = _Fuzzed(plan)
    url = fuzzed.server.url
    clients = {who: Client.http(url, headers={"Authorization": f"Bearer {who}"}, breaker=BreakerPolicy.DISABLED)
               for who in ("alice", "bob")}
    timeout = 1.5
    try:
        outcomes = [_call(c, who, "echo", f"{who}-warm", 10) for who, c in clients.items()]
        assert all(o.error is None for o in outcomes), outcomes
        turns = [("alice", "edge"), ("bob", "echo"), ("bob", "edge"), ("alice", "echo"), ("alice", "edge"), ("bob", "echo")]
        for n, (who, tool) in enumerate(turns):
            o = _call(clients[who], who, tool, f"{who}-{tool}-{n}", timeout)
            if tool == "edge":
                fuzzed.done.acquire(timeout=5)  # every byte of that answer is out before the next call
                if plan.valid:
                    assert o.error is None, f"a well-formed answer failed: {o.error!r}"
            elif plan.end == "keep":
                assert o.error is None, f"a plain call failed though the server kept serving: {o.error!r}"
            outcomes.append(o)
        for o in outcomes:
            assert o.took <= timeout + SLACK or o.message.endswith("-warm"), f"{o.message} took {o.took:.2f} s: {o.error!r}"
            if o.error is not None:
                assert isinstance(o.error, MCPError), f"not a typed error: {o.error!r}"
            elif o.text != f"Bearer {o.who}|{o.message}":
                # a mutation that leaves a well-formed answer to this very request (a flipped
                # byte in a key or a string) reads as that answer, changed: no client can tell.
                # What never happens: another call's answer, or the other client's
                others = {f"Bearer {x.who}|{x.message}" for x in outcomes if x is not o}
                other = "bob" if o.who == "alice" else "alice"
                assert plan.mutations and o.text not in others and other not in (o.text or ""), (
                    f"{o.message} got {o.text!r}")
    finally:
        for c in clients.values():
            c.close()
        fuzzed.server.close()


def test_the_plans_render_what_they_say() -> None:
    """The oracle itself: a well-formed plan renders the answer it names."""
    plan = Plan(interims=(b"100 Continue",), version=b"HTTP/1.1", status=b"200 OK", headers=(), framing="chunked",
                chunk=4, extensions=True, trailers=True, body="own", noise=b"", huge="", mutations=(), cuts=(),
                delay=0.0, end="keep")
    data = plan.render(b'{"a": 1}')
    assert plan.valid
    assert data.startswith(b"HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 200 OK\r\n")
    assert data.endswith(b'4;x=1;y="q"\r\n{"a"\r\n4;x=1;y="q"\r\n: 1}\r\n0;x=1;y="q"\r\nX-Trailer: t\r\n\r\n')
    cut = Plan(**{**plan.__dict__, "framing": "length", "interims": (), "mutations": ((0.5, "cut", b"x"),)})
    assert not cut.valid and len(cut.render(b'{"a": 1}')) < len(plan.render(b'{"a": 1}'))
    assert json.loads(Plan(**{**plan.__dict__, "framing": "length"}).render(b'{"a": 1}').rsplit(b"\r\n\r\n", 1)[1]) == {"a": 1}
