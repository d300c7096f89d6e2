"""Issue 29, "safe at the wire": one table of wire edges, run against both HTTP paths.

Every row is served by a raw-socket server (``tests/servers/wire_edges.py``) that writes
its answer byte by byte, and run on the fast path (httptools) and on urllib3's (the
``http_path`` fixture), through a real ``Client.http``. Each row names the ONE safe
outcome both paths must reach:

* **own**: the call returns its own result (the server's answer names the caller's
  ``Authorization`` value and the call's own message);
* **error**: a typed error (an :class:`~mcpsync.MCPError`, or a ``ValueError`` for a header
  the caller gave that cannot be sent), ``refused`` when it must come at once, not as the
  deadline's timeout;
* **either**: one or the other.

Whatever the row, every call of every row also holds to these (``Run.verify``): it ends
within its timeout plus :data:`SLACK`; a result is never another call's or another
client's; a ``tools/call`` (side effects: no annotations) never reaches the server twice;
and, unless the row says otherwise, a plain call made afterwards on the same client
returns its own result. A row's ``check`` asserts what did (or never did) reach the wire.

A row that fails because of a known defect carries ``xfail(strict=True)`` naming it (per
path: the (row, path) pairs of :data:`TODAY`; empty since issue 29's fixes). The ``*-via-proxy`` rows reach the server through an HTTP CONNECT proxy, which puts
both of their ids on the urllib3 path (the fast path takes no proxy).

Run the table alone: ``pytest tests/integration/test_wire_edges.py`` (``-k fast`` or
``-k urllib3`` for one path, ``-k 1xx`` for one group of rows).
"""

from __future__ import annotations

import base64
import functools
import gzip
import itertools
import logging
import os
import signal
import socket
import sys
import threading
import time
import tracemalloc
import zlib
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Iterator, Mapping

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "servers"))

from wire_edges import HOLD, ConnectProxy, MCPServer, Request, Wire, answer, chunked, private_ca, rpc_result  # noqa: E402

from mcpsync import Client  # noqa: E402
from mcpsync._errors import (  # noqa: E402
    ConnectError,
    MCPError,
    MessageTooLarge,
    NetworkError,
    ProtocolError,
    RequestTimeout,
)
from mcpsync._policies import BreakerPolicy  # noqa: E402
from mcpsync.auth import MemoryTokenStore, OAuth, canonical_resource  # noqa: E402
from mcpsync.auth.storage import TokenSet  # noqa: E402

pytestmark = pytest.mark.timeout(120)

#: seconds a call may outlast its own timeout (a busy two-core machine included)
SLACK = 1.5
OWN, ERROR, EITHER = "own", "error", "either"
PATHS = ("fast", "urllib3")


# --------------------------------------------------------------------------- a row and its run


@dataclass
class Call:
    """One call a row made, and how it ended."""

    tool: str
    who: str  # the Authorization value its client sends ("-": none)
    message: str
    timeout: float
    elapsed: float = 0.0
    text: str | None = None
    error: BaseException | None = None

    @property
    def own(self) -> str:
        return f"{self.who}|{self.message}"


@dataclass(frozen=True)
class Edge:
    """One row of the table.

    Attributes:
        serve: how the server answers the row's calls (``tools/call`` of ``edge`` unless
            ``server`` says otherwise); None: normally.
        want: OWN, ERROR or EITHER, for every ``edge`` call the row makes.
        errors: the error types allowed (ERROR / EITHER).
        refused: an error must come at once (never the deadline's RequestTimeout).
        act: what the client side does (default :func:`call_edge`).
        check: what must (not) have reached the wire, once the act is over.
        timeout: each ``edge`` call's timeout.
        then: a plain call made afterwards on the same client returns its own result.
        memory: the most the ``edge`` calls may allocate at their peak (tracemalloc), in bytes.
        server: keyword arguments of the :class:`MCPServer` (``tls=True``: a private CA's).
        client: keyword arguments of ``Client.http``.
        resends: a ``tools/call`` may reach the server this many times (a redirect's 307 says
            "not processed here": the call goes again, to the target).
    """

    serve: Callable[[Wire, Request], bool] | None = None
    want: str = OWN
    errors: tuple[type[BaseException], ...] = (MCPError,)
    refused: bool = False
    act: Callable[["Run"], None] | None = None
    check: Callable[["Run"], None] | None = None
    timeout: float = 5.0
    then: bool = True
    memory: int | None = None
    server: Mapping[str, Any] = field(default_factory=dict)
    client: Mapping[str, Any] = field(default_factory=dict)
    resends: int = 1


class Run:
    """One row on one path: its servers, its clients and every call made."""

    def __init__(self, edge: Edge, path: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                 caplog: pytest.LogCaptureFixture) -> None:
        self.edge, self.path, self.tmp_path = edge, path, tmp_path
        self.monkeypatch, self.caplog = monkeypatch, caplog
        self.calls: list[Call] = []
        self.servers: list[MCPServer] = []
        self.extra: list[Any] = []  # other servers of the row (a proxy), closed with it
        self.clients: list[Client] = []
        self.peak: int | None = None
        self._who: dict[int, str] = {}
        self._ids = itertools.count(1)
        self._lock = threading.Lock()
        self._tls: Any = None
        options = dict(edge.server)
        if options.pop("tls", False):
            options["tls"] = self.tls.server_context()
        self.srv = self.server(edge.serve, **options)
        self.main: Client | None = None

    @property
    def tls(self) -> Any:
        if self._tls is None:
            self._tls = private_ca(self.tmp_path)
        return self._tls

    def server(self, script: Any = None, **options: Any) -> MCPServer:
        try:
            server = MCPServer(script, **options)
        except OSError as exc:
            pytest.skip(f"cannot listen on {options.get('host', '127.0.0.1')}: {exc}")
        self.servers.append(server)
        return server

    def client(self, token: str | None = "alice", *, url: str | None = None, who: str | None = None,
               **options: Any) -> Client:
        """A ``Client.http`` for the row's server, sending ``Authorization: Bearer <token>``."""
        headers = dict(options.pop("headers", {}))
        if token is not None:
            headers.setdefault("Authorization", f"Bearer {token}")
        options = {**self.edge.client, **options}
        if self.srv.tls is not None:
            options.setdefault("verify", str(self.tls.ca))
        options.setdefault("breaker", BreakerPolicy.DISABLED)
        client = Client.http(url or self.srv.url, headers=headers, **options)
        self.clients.append(client)
        self._who[id(client)] = who or headers.get("Authorization", "-")
        if self.main is None:
            self.main = client
        return client

    def call(self, client: Client, tool: str = "edge", *, timeout: float | None = None) -> Call:
        """``client.call_tool(tool, {"message": <unique>}, timeout)``, timed and recorded."""
        with self._lock:
            message = f"{tool}-{next(self._ids)}"
        call = Call(tool, self._who[id(client)], message, self.edge.timeout if timeout is None else timeout)
        measure = tool == "edge" and self.edge.memory is not None
        if measure:
            tracemalloc.start()
        start = time.monotonic()
        try:
            call.text = client.call_tool(tool, {"message": message}, timeout=call.timeout).text
        except Exception as exc:  # noqa: BLE001 - recorded; verify() judges it
            call.error = exc
        finally:
            call.elapsed = time.monotonic() - start
            if measure:
                peak = tracemalloc.get_traced_memory()[1]
                tracemalloc.stop()
                self.peak = max(self.peak or 0, peak)
        with self._lock:
            self.calls.append(call)
        return call

    def attempt(self, make: Callable[[], Client], tool: str = "edge", *, who: str = "-",
                timeout: float | None = None) -> Call:
        """Make a client and call ``tool``; an error making it counts as the call's."""
        try:
            client = make()
        except Exception as exc:  # noqa: BLE001
            call = Call(tool, who, "-", self.edge.timeout if timeout is None else timeout, error=exc)
            self.calls.append(call)
            return call
        return self.call(client, tool, timeout=timeout)

    def warm(self, client: Client) -> None:
        """A plain call first: the handshake is done before the row's own calls."""
        self.call(client, "echo", timeout=10)

    # ----------------------------------------------------------------- judging

    def verify(self) -> None:
        edge = self.edge
        edges = [c for c in self.calls if c.tool == "edge"]
        assert edges, "the row made no edge call"
        for call in self.calls:  # one deadline per call, whatever the row
            assert call.elapsed <= call.timeout + SLACK, (
                f"{call.tool} call took {call.elapsed:.2f} s, over its timeout {call.timeout} s + {SLACK} s: {call.error!r}"
            )
        for call in edges:  # the row's outcome: a result where an error was due says more than its text
            if edge.want == OWN:
                assert call.error is None, f"wanted its own result, got {call.error!r}"
            elif edge.want == ERROR:
                assert call.error is not None, f"wanted a typed error, got the result {call.text!r}"
            if call.error is not None:
                assert isinstance(call.error, edge.errors), f"not the typed error wanted: {call.error!r}"
                if edge.refused:
                    assert not isinstance(call.error, RequestTimeout), f"not refused, timed out: {call.error!r}"
        for call in self.calls:
            if call.text is not None:
                assert call.text == call.own, f"a {call.tool} call got an answer not its own: {call.text!r} (own: {call.own!r})"
            if call.tool != "edge":
                assert call.error is None, f"a plain {call.tool} call failed: {call.error!r}"
        for server in self.servers:
            seen: dict[str, int] = {}
            for request in server.calls():
                key = request.arguments.get("message", "")
                seen[key] = seen.get(key, 0) + 1
            again = {k: n for k, n in seen.items() if n > edge.resends}
            assert not again, f"tools/call re-sent after it may have reached the server: {again}"
        if edge.memory is not None:
            assert self.peak is not None and self.peak <= edge.memory, (
                f"the edge calls allocated {self.peak} bytes at their peak (bound {edge.memory})"
            )
        if edge.check is not None:
            edge.check(self)
        if edge.then and self.main is not None:
            follow = self.call(self.main, "echo", timeout=5)
            assert follow.error is None and follow.text == follow.own, (
                f"the next plain call failed after the edge: {follow.error!r} {follow.text!r}"
            )

    def close(self) -> None:
        for client in self.clients:
            try:
                client.close()
            except Exception:  # noqa: BLE001
                pass
        for server in [*self.servers, *self.extra]:
            server.close()


# --------------------------------------------------------------------------- acts


def call_edge(run: Run) -> None:
    """The default act: one client, a plain call, then the row's edge call."""
    client = run.client()
    run.warm(client)
    run.call(client, "edge")


def repeat(times: int) -> Callable[[Run], None]:
    """``times`` edge calls in a row on one client (the pool's sockets must come back)."""

    def act(run: Run) -> None:
        client = run.client()
        run.warm(client)
        for _ in range(times):
            run.call(client, "edge")

    return act


def two_clients(run: Run) -> None:
    """Alice and Bob, on one origin with different tokens: three rounds in turn, then
    four calls at once. Each call must get its own answer or a typed error."""
    alice, bob = run.client("alice"), run.client("bob")
    run.warm(alice)
    run.warm(bob)
    for _ in range(3):
        run.call(alice, "edge")
        run.call(bob, "edge")
    threads = [threading.Thread(target=run.call, args=(c,)) for c in (alice, bob, alice, bob)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(run.edge.timeout + 10)


def interrupted(times: int) -> Callable[[Run], None]:
    """Ctrl-C while a call reads its answer, ``times`` over: the server sends SIGINT to this
    process once half the body is out, and the test's handler raises KeyboardInterrupt in
    the calling (main) thread, as Python's own does. Every socket must come back."""

    def act(run: Run) -> None:
        assert threading.current_thread() is threading.main_thread()
        client = run.client()
        run.warm(client)
        armed = threading.Event()  # only a call in progress is interrupted

        def on_sigint(signum: int, frame: Any) -> None:
            if armed.is_set():
                armed.clear()
                raise KeyboardInterrupt

        previous = signal.signal(signal.SIGINT, on_sigint)
        try:
            for n in range(times):
                call = Call("edge", run._who[id(client)], f"interrupted-{n}", run.edge.timeout)
                start = time.monotonic()
                armed.set()
                try:
                    call.text = client.call_tool("edge", {"message": call.message}, timeout=call.timeout).text
                except KeyboardInterrupt as exc:
                    call.error = exc
                except Exception as exc:  # noqa: BLE001 - judged by verify()
                    call.error = exc
                finally:
                    armed.clear()
                    call.elapsed = time.monotonic() - start
                run.calls.append(call)
        finally:
            signal.signal(signal.SIGINT, previous)

    return act


def close_in_flight(run: Run) -> None:
    """``close()`` while a POST waits for its answer: the call ends, and none of the
    client's sockets stays open at the server, within :data:`SLACK` of ``close()``
    returning (the client object still alive)."""
    client = run.client()
    run.warm(client)
    caller = threading.Thread(target=run.call, args=(client,))
    caller.start()
    assert run.srv.wait(lambda: run.srv.calls("edge")), "the edge call never arrived"
    client.close()
    closed = time.monotonic()
    all_closed = run.srv.wait(lambda: not run.srv.connections(), timeout=SLACK)
    still = sorted(run.srv.connections())
    caller.join(SLACK)
    ended = not caller.is_alive()
    caller.join(run.edge.timeout + 10)
    assert ended, f"the call in flight went on {time.monotonic() - closed:.1f} s after close() returned"
    assert all_closed, f"connections {still} still open {SLACK} s after close() returned"
    run.main = None  # closed: no plain call afterwards


def stale(kind: str) -> Callable[[Run], None]:
    """The edge call's socket is closed by the server (``kind``: "fin" or "rst") once the
    answer is out, while idle in the pool: the next call must still work, sent once."""

    def act(run: Run) -> None:
        client = run.client()
        run.warm(client)
        call = run.call(client, "edge")
        edge = run.srv.calls("edge")
        assert call.error is None and edge
        assert run.srv.wait(lambda: edge[-1].conn not in run.srv.connections()), "the server never closed it"

    return act


def attempt_with(**options: Any) -> Callable[[Run], None]:
    """Make the client with ``options`` (``headers``/``auth`` carrying a bad value) and call."""

    def act(run: Run) -> None:
        run.attempt(lambda: run.client(None, **options))

    return act


def with_session_id(run: Run) -> None:
    """A legacy server whose ``Mcp-Session-Id`` carries control bytes: the client must never
    echo them back as header lines of their own."""
    run.attempt(lambda: run.client("alice"), who="Bearer alice")


def idna_host(run: Run) -> None:
    """``http://straße.test:<port>/mcp``: the resolver (a hook in front of the system's, as an
    ``/etc/hosts`` line would be) sends every ``*.test`` name to 127.0.0.1 and notes it."""
    real = socket.getaddrinfo
    asked: list[str] = []

    def resolve(host: Any, port: Any, *args: Any, **kwargs: Any) -> Any:
        # a str host is encoded by CPython's resolver call with the "idna" codec: note that name
        name = host.decode() if isinstance(host, bytes) else host.encode("idna").decode("ascii")
        if name.endswith(".test"):
            asked.append(name)
            return real("127.0.0.1", port, *args, **kwargs)
        return real(host, port, *args, **kwargs)

    run.monkeypatch.setattr(socket, "getaddrinfo", resolve)
    run.asked = asked  # type: ignore[attr-defined]
    client = run.client(url=f"http://straße.test:{run.srv.port}/mcp")
    run.warm(client)
    run.call(client, "edge")


def userinfo(run: Run) -> None:
    """``http://user:pw@host/mcp``: sent as Basic credentials, as requests does."""
    run.caplog.set_level(logging.DEBUG)
    basic = "Basic " + base64.b64encode(b"user:pw-s3cret").decode()
    client = run.client(None, url=f"http://user:pw-s3cret@127.0.0.1:{run.srv.port}/mcp", who=basic)
    run.warm(client)
    run.call(client, "edge")


def userinfo_unreachable(run: Run) -> None:
    """The same URL with nothing listening: the password is in no error and no log line."""
    run.caplog.set_level(logging.DEBUG)
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    run.attempt(lambda: run.client(None, url=f"http://user:pw-s3cret@127.0.0.1:{port}/mcp"))


def cross_origin(run: Run) -> None:
    """The edge call is redirected (307) to another server, another origin."""
    other = run.server()
    run.srv.script = redirect(307, lambda w: other.url)
    call_edge(run)


def via_proxy(run: Run) -> None:
    """The client reaches the TLS server through an HTTP CONNECT proxy (``HTTPS_PROXY``):
    the urllib3 path, whatever path the row names."""
    proxy = ConnectProxy()
    run.extra.append(proxy)
    run.monkeypatch.setenv("HTTPS_PROXY", f"http://127.0.0.1:{proxy.port}")
    for name in ("NO_PROXY", "no_proxy", "https_proxy", "ALL_PROXY", "all_proxy"):
        run.monkeypatch.delenv(name, raising=False)
    call_edge(run)
    assert proxy.tunnels >= 1, "the client did not go through the proxy"


def on_url(path: str) -> Callable[[Run], None]:
    def act(run: Run) -> None:
        client = run.client(url=run.srv.origin + path)
        run.warm(client)
        run.call(client, "edge")

    return act


# --------------------------------------------------------------------------- scripts (the server's side)


def _result(wire: Wire, request: Request) -> bytes:
    server: MCPServer = wire.server  # type: ignore[assignment]
    return server.result(request)


def _reply(wire: Wire, request: Request) -> bool:
    return wire.server.reply(wire, request)  # type: ignore[attr-defined, no-any-return]


_JSON = (("Content-Type", "application/json"),)


def interim(*statuses: bytes, pause: float = 0.0) -> Callable[[Wire, Request], bool]:
    """Interim answers (``b"100 Continue"`` ...), ``pause`` seconds, then the real one."""

    def serve(wire: Wire, request: Request) -> bool:
        wire.send(b"".join(b"HTTP/1.1 " + status + b"\r\n\r\n" for status in statuses))
        if pause:
            wire.pause(pause)
        return _reply(wire, request)

    return serve


def switching(wire: Wire, request: Request) -> bool:
    wire.send(b"HTTP/1.1 101 Switching Protocols\r\nConnection: Upgrade\r\nUpgrade: mcp\r\n\r\n\x81\x05hello")
    wire.hold(2)
    return False


def chunked_extensions(wire: Wire, request: Request) -> bool:
    body = _result(wire, request)
    pieces = [body[i:i + 7] for i in range(0, len(body), 7)]
    out = b"".join(b"%x;ext=\"v\";n=%d\r\n%s\r\n" % (len(p), i, p) for i, p in enumerate(pieces))
    head = b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nTransfer-Encoding: chunked\r\nTrailer: X-Sum\r\n\r\n"
    return wire.send(head + out + b"0;last\r\nX-Sum: 1\r\nX-Other: 2\r\n\r\n")


def length_and_chunked(wire: Wire, request: Request) -> bool:
    body = _result(wire, request)
    head = b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: 5\r\nTransfer-Encoding: chunked\r\n\r\n"
    return wire.send(head + chunked(body, size=16))


def close_delimited(wire: Wire, request: Request) -> bool:
    wire.send(answer(200, _result(wire, request), _JSON, framing="close"))
    wire.close()
    return False


def connection_close(wire: Wire, request: Request) -> bool:
    wire.send(answer(200, _result(wire, request), _JSON + (("Connection", "close"),)))
    wire.close()
    return False


def byte_by_byte(wire: Wire, request: Request) -> bool:
    return wire.trickle(answer(200, _result(wire, request), _JSON), every=0.001)


def stray_bytes(wire: Wire, request: Request) -> bool:
    """The answer, then forged answers to the next ids, naming someone else."""
    forged = b"".join(
        answer(200, rpc_result(request.rid + k, {"content": [{"type": "text", "text": "Bearer mallory|forged"}]}), _JSON)
        for k in range(1, 4)
    )
    return wire.send(answer(200, _result(wire, request), _JSON) + forged)


def then_close(kind: str) -> Callable[[Wire, Request], bool]:
    def serve(wire: Wire, request: Request) -> bool:
        wire.send(answer(200, _result(wire, request), _JSON))
        wire.pause(0.05)
        wire.reset() if kind == "rst" else wire.close()
        return False

    return serve


def cut_mid_body(kind: str) -> Callable[[Wire, Request], bool]:
    """The head and half the body, then a reset ("rst"), a close ("fin") or a stall until
    the client gives up ("stall")."""

    def serve(wire: Wire, request: Request) -> bool:
        data = answer(200, _result(wire, request), _JSON)
        wire.send(data[: len(data) - 40])
        if kind == "stall":
            wire.hold(HOLD)
        elif kind == "rst":
            wire.pause(0.05)
            wire.reset()
        else:
            wire.close()
        return False

    return serve


def interrupt_mid_body(wire: Wire, request: Request) -> bool:
    """Half the answer, then SIGINT to the test process (the client's Ctrl-C), then held."""
    data = answer(200, _result(wire, request), _JSON)
    wire.send(data[: len(data) // 2])
    wire.pause(0.05)
    os.kill(os.getpid(), signal.SIGINT)
    wire.hold(HOLD)
    return False


def cut_after_request(kind: str) -> Callable[[Wire, Request], bool]:
    def serve(wire: Wire, request: Request) -> bool:
        wire.reset() if kind == "rst" else wire.close()
        return False

    return serve


def slow_head(wire: Wire, request: Request) -> bool:
    data = answer(200, _result(wire, request), _JSON)
    head, _, body = data.partition(b"\r\n\r\n")
    if wire.trickle(head + b"\r\n\r\n", every=0.25, limit=6):
        wire.send(body)
    return False


def slow_body(wire: Wire, request: Request) -> bool:
    data = answer(200, _result(wire, request), _JSON)
    head, _, body = data.partition(b"\r\n\r\n")
    wire.send(head + b"\r\n\r\n")
    wire.trickle(body, every=0.25, limit=6)
    return False


def head_then_body(wire: Wire, request: Request) -> bool:
    """The head alone, then the body in two pieces (as uvicorn writes an answer), kept alive."""
    data = answer(200, _result(wire, request), _JSON)
    head, _, body = data.partition(b"\r\n\r\n")
    return wire.send(head + b"\r\n\r\n") and wire.pause(0.05) and wire.send(body[:7]) and wire.pause(0.05) and \
        wire.send(body[7:])


def one_socket(run: Run) -> None:
    """Every edge call came on the same connection: each answer read whole gave it back."""
    assert len({r.conn for r in run.srv.calls("edge")}) == 1, [r.conn for r in run.srv.calls("edge")]


_SSE_HEAD = b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nCache-Control: no-cache\r\n"


def sse_pings(wire: Wire, request: Request) -> bool:
    """An SSE answer that only ever pings (a chunk every 0.25 s, never the answer)."""
    wire.send(_SSE_HEAD + b"Transfer-Encoding: chunked\r\n\r\n")
    ends = time.monotonic() + 8
    while time.monotonic() < ends and wire.send(b"8\r\n: ping\n\n\r\n") and not wire.hold(0.25):
        pass
    return False


def sse_trickle(wire: Wire, request: Request) -> bool:
    """An SSE answer whose one event comes a byte every 0.25 s."""
    wire.send(_SSE_HEAD + b"Connection: close\r\n\r\n")
    wire.trickle(b"event: message\ndata: " + _result(wire, request) + b"\n\n", every=0.25, limit=8)
    return False


_BIG_LINE = b"X-Big: " + b"a" * 1_000_000 + b"\r\n"
_MANY_FIELDS = b"".join(b"X-Field-%d: v\r\n" % i for i in range(10_000))
_ENDLESS = b"".join(b"X-Endless-%d: %s\r\n" % (i, b"e" * 80) for i in range(700))  # 64 KiB of lines, sent again and again
_ENDLESS_LINE = b"e" * 65536


def big_head(extra: bytes) -> Callable[[Wire, Request], bool]:
    def serve(wire: Wire, request: Request) -> bool:
        data = answer(200, _result(wire, request), _JSON)
        status, _, rest = data.partition(b"\r\n")
        wire.send(status + b"\r\n")
        wire.send(extra)  # as it is: no copy of it made while the client's memory is measured
        wire.send(rest)
        wire.hold(3)
        return False

    return serve


def endless(block: bytes, start: bytes = b"") -> Callable[[Wire, Request], bool]:
    """A head that never ends: ``start``, then ``block`` again and again (7 s, 256 MiB at most)."""

    def serve(wire: Wire, request: Request) -> bool:
        wire.send(b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\n" + start)
        ends, sent = time.monotonic() + 7, 0
        while time.monotonic() < ends and sent < 256 << 20 and wire.send(block):
            sent += len(block)
        return False

    return serve


def gzipped(wire: Wire, request: Request) -> bool:
    return wire.send(answer(200, gzip.compress(_result(wire, request)), _JSON + (("Content-Encoding", "gzip"),)))


@functools.cache
@functools.cache
def _bomb() -> bytes:
    """32 MiB of JSON text, gzipped to some 32 KiB (made a MiB at a time: the server's own
    allocations are not what the row measures)."""
    packer = zlib.compressobj(9, zlib.DEFLATED, 16 + zlib.MAX_WBITS)
    parts = [packer.compress(b'{"jsonrpc":"2.0","id":0,"result":{"content":[{"type":"text","text":"')]
    mib = b"a" * (1 << 20)
    parts += [packer.compress(mib) for _ in range(32)]
    parts += [packer.compress(b'"}]}}'), packer.flush()]
    return b"".join(parts)


def gzip_bomb(wire: Wire, request: Request) -> bool:
    wire.send(answer(200, _bomb(), _JSON + (("Content-Encoding", "gzip"),)))
    wire.hold(3)
    return False


def answered_late(wire: Wire, request: Request) -> bool:
    """The answer, 0.5 s after the request: it comes while (or after) the client closes."""
    wire.pause(0.5)
    return _reply(wire, request)


def held(wire: Wire, request: Request) -> bool:
    """No answer: the connection is held until the client closes it."""
    wire.hold(HOLD)
    return False


def redirect(status: int, target: Callable[[Wire], str]) -> Callable[[Wire, Request], bool]:
    """A ``status`` redirect of the edge call on ``/mcp`` to ``target``; answered elsewhere."""

    def serve(wire: Wire, request: Request) -> bool:
        if request.path != "/mcp":
            return _reply(wire, request)
        return wire.send(answer(status, b"", (("Location", target(wire)),)))

    return serve


# --------------------------------------------------------------------------- checks (the wire)


def _lines_of(request: Request) -> list[bytes]:
    """The head's lines as the most lenient peer would split them (at CR, LF or both)."""
    return request.head.replace(b"\r\n", b"\n").replace(b"\r", b"\n").split(b"\n")


def never_injected(run: Run) -> None:
    """No header of its own ever reached the wire from one value (no "X-Injected" line, no
    folded line, no NUL), and no error quotes the value's secret part."""
    for server in run.servers:
        for request in server.log:
            for line in _lines_of(request)[1:]:
                assert not line.lower().lstrip().startswith(b"x-injected"), f"injected header on the wire: {request.head!r}"
                assert not line[:1].isspace(), f"a folded header line on the wire: {request.head!r}"
                assert b"\x00" not in line, f"a NUL on the wire: {request.head!r}"
    no_secret_quoted(run)


def _texts(exc: BaseException | None) -> Iterator[str]:
    seen: set[int] = set()
    while exc is not None and id(exc) not in seen:
        seen.add(id(exc))
        yield str(exc)
        yield repr(exc)
        exc = exc.__cause__ or exc.__context__


def no_secret_quoted(run: Run) -> None:
    for call in run.calls:
        for text in _texts(call.error):
            assert "s3cret" not in text, f"an error quotes a secret: {text!r}"


def no_secret_anywhere(run: Run) -> None:
    no_secret_quoted(run)
    for record in run.caplog.records:
        text = record.getMessage() + (logging.Formatter().formatException(record.exc_info) if record.exc_info else "")
        assert "s3cret" not in text, f"a log line quotes the password: {text!r}"


def one_host_one_length(run: Run) -> None:
    for request in run.srv.log:
        assert len(request.values("Host")) == 1, f"Host sent {len(request.values('Host'))} times: {request.head!r}"
        if request.verb == "POST":
            assert len(request.values("Content-Length")) == 1, f"two Content-Length: {request.head!r}"
            assert not request.malformed and request.message is not None, f"the body was misframed: {request.raw!r}"


def accept_encoding(run: Run) -> None:
    sent = run.srv.calls("edge")[-1].header("Accept-Encoding") or ""
    assert "gzip" in sent.lower(), f"Accept-Encoding sent: {sent!r}"


def host_header(expected: Callable[[Run], str]) -> Callable[[Run], None]:
    def check(run: Run) -> None:
        want = expected(run)
        assert {r.header("Host") for r in run.srv.log} == {want}

    return check


def idna_resolved(run: Run) -> None:
    asked = run.asked  # type: ignore[attr-defined]
    assert "strasse.test" not in asked and "xn--strae-oqa.test" in asked, f"resolved: {asked}"
    host_header(lambda r: f"xn--strae-oqa.test:{r.srv.port}")(run)


def basic_sent(run: Run) -> None:
    basic = "Basic " + base64.b64encode(b"user:pw-s3cret").decode()
    assert {r.header("Authorization") for r in run.srv.log} == {basic}
    assert all("@" not in (r.header("Host") or "") for r in run.srv.log)


def basic_sent_never_quoted(run: Run) -> None:
    basic_sent(run)
    no_secret_anywhere(run)


def percent_encoded(run: Run) -> None:
    assert {r.target for r in run.srv.log if r.verb == "POST"} == {"/mcp/%C3%BC"}


def followed(run: Run) -> None:
    moved = [r for r in run.srv.calls("edge") if r.path == "/mcp/moved"]
    assert len(moved) == 1 and moved[0].verb == "POST", [r.line for r in run.srv.log]


def nothing_elsewhere(run: Run) -> None:
    other = run.servers[1]
    assert other.accepted == 0, "a request followed a redirect to another origin"


class _Hook:
    """An auth hook (``auth=``) whose headers carry ``value``."""

    def __init__(self, headers: Mapping[str, str]) -> None:
        self._headers = dict(headers)

    def headers(self, url: str, method: str) -> dict[str, str]:
        return dict(self._headers)

    def on_response(self, url: str, method: str, status: int, headers: Mapping[str, str]) -> bool:
        return False


def _oauth(token: str) -> Callable[[Run], None]:
    """A real :class:`mcpsync.auth.OAuth` holding a token (as a token endpoint could send it)."""

    def act(run: Run) -> None:
        store = MemoryTokenStore()
        url = run.srv.url
        store.save_tokens(canonical_resource(url), TokenSet(access_token=token, expires_at=time.time() + 3600))
        auth = OAuth(url, storage=store, interactive=False)
        try:
            run.attempt(lambda: run.client(None, auth=auth))
        finally:
            auth.close()

    return act


# --------------------------------------------------------------------------- the table

_TYPED_OR_REFUSED = (ValueError, MCPError)
_SECRET = "Bearer s3cret-alice"


#: (row, path) → why it fails: a strict xfail each (empty: every row holds on both paths)
TODAY: dict[tuple[str, str], str] = {}


def row(name: str, edge: Edge, *, slow: bool = False) -> list[Any]:
    """The row on both paths (``<name>-fast``, ``<name>-urllib3``)."""
    out = []
    for path in PATHS:
        marks = [pytest.mark.slow] if slow else []
        if (name, path) in TODAY:
            marks.append(pytest.mark.xfail(strict=True, reason=TODAY[(name, path)]))
        out.append(pytest.param(edge, path, id=f"{name}-{path}", marks=marks))
    return out


ROWS = [
    # interim answers: the real answer is the call's own; 101 is refused
    *row("1xx-100", Edge(interim(b"100 Continue"))),
    *row("1xx-102", Edge(interim(b"102 Processing"))),
    *row("1xx-103", Edge(interim(b"103 Early Hints\r\nLink: </s.css>; rel=preload"))),
    *row("1xx-several", Edge(interim(b"100 Continue", b"102 Processing", b"103 Early Hints", pause=0.2))),
    *row("1xx-100-legacy-era", Edge(interim(b"100 Continue"), server={"era": "legacy"})),
    *row("1xx-101-refused", Edge(switching, ERROR, refused=True)),
    # framing
    *row("chunked-extensions-trailers", Edge(chunked_extensions)),
    *row("content-length-and-chunked", Edge(length_and_chunked, EITHER)),
    *row("close-delimited", Edge(close_delimited)),
    *row("connection-close", Edge(connection_close)),
    *row("one-byte-writes", Edge(byte_by_byte)),
    *row("stray-bytes-after-answer", Edge(stray_bytes)),
    # sockets that die
    *row("stale-idle-fin", Edge(then_close("fin"), act=stale("fin"))),
    *row("stale-idle-rst", Edge(then_close("rst"), act=stale("rst"))),
    *row("rst-mid-answer", Edge(cut_mid_body("rst"), ERROR, refused=True)),
    *row("fin-mid-answer", Edge(cut_mid_body("fin"), ERROR, refused=True)),
    *row("tls-cut-after-request-fin", Edge(cut_after_request("fin"), ERROR, refused=True, server={"tls": True})),
    *row("tls-cut-after-request-rst", Edge(cut_after_request("rst"), ERROR, refused=True, server={"tls": True})),
    *row("tls-plain-call", Edge(None, server={"tls": True})),
    *row("tls-via-connect-proxy", Edge(None, server={"tls": True}, act=via_proxy)),
    *row("tls-cut-after-request-via-proxy", Edge(cut_after_request("fin"), ERROR, refused=True, server={"tls": True},
                                                 act=via_proxy)),
    # slow peers: one deadline per call
    *row("slow-head", Edge(slow_head, ERROR, errors=(RequestTimeout,), timeout=2)),
    *row("slow-body", Edge(slow_body, ERROR, errors=(RequestTimeout,), timeout=2)),
    *row("head-then-body-x12", Edge(head_then_body, act=repeat(12), check=one_socket)),
    *row("slow-sse-pings", Edge(sse_pings, ERROR, errors=(RequestTimeout,), timeout=2)),
    *row("slow-sse-event", Edge(sse_trickle, ERROR, errors=(RequestTimeout,), timeout=2)),
    # huge heads: refused at once, memory bounded
    *row("head-line-1mb", Edge(big_head(_BIG_LINE), ERROR, refused=True, memory=768 << 10)),
    *row("head-10000-fields", Edge(big_head(_MANY_FIELDS), ERROR, refused=True, memory=768 << 10)),
    *row("head-endless-fields", Edge(endless(_ENDLESS), ERROR, refused=True, memory=768 << 10)),
    *row("head-endless-line", Edge(endless(_ENDLESS_LINE, b"X-Endless: "), ERROR, refused=True, memory=768 << 10)),
    # content coding
    *row("gzip", Edge(gzipped, check=accept_encoding)),
    *row("gzip-bomb", Edge(gzip_bomb, ERROR, errors=(MessageTooLarge,), refused=True, memory=4 << 20,
                           client={"max_message_size": 256 << 10})),
    # redirects
    *row("redirect-307-same-origin", Edge(redirect(307, lambda w: "/mcp/moved"), check=followed, resends=2)),
    *row("redirect-308-same-origin", Edge(redirect(308, lambda w: "/mcp/moved"), check=followed, resends=2)),
    *row("redirect-cross-origin", Edge(None, ERROR, errors=(ProtocolError,), refused=True, check=nothing_elsewhere,
                                       act=cross_origin)),
    # CR / LF / NUL in every header source: never a header of its own on the wire
    *row("inject-user-value-crlf", Edge(None, ERROR, errors=_TYPED_OR_REFUSED, then=False, check=never_injected,
                                        act=attempt_with(headers={"X-Api-Key": "s3cret\r\nX-Injected: 1"}))),
    *row("inject-user-value-lf", Edge(None, ERROR, errors=_TYPED_OR_REFUSED, then=False, check=never_injected,
                                      act=attempt_with(headers={"X-Api-Key": "s3cret\nX-Injected: 1"}))),
    *row("inject-user-value-cr", Edge(None, ERROR, errors=_TYPED_OR_REFUSED, then=False, check=never_injected,
                                      act=attempt_with(headers={"X-Api-Key": "s3cret\rX-Injected: 1"}))),
    *row("inject-user-value-nul", Edge(None, ERROR, errors=_TYPED_OR_REFUSED, then=False, check=never_injected,
                                       act=attempt_with(headers={"X-Api-Key": "s3cret\x00X-Injected: 1"}))),
    *row("inject-user-name-crlf", Edge(None, ERROR, errors=_TYPED_OR_REFUSED, then=False, check=never_injected,
                                       act=attempt_with(headers={"X-Api\r\nX-Injected": "s3cret"}))),
    *row("inject-auth-hook", Edge(None, ERROR, errors=_TYPED_OR_REFUSED, then=False, check=never_injected,
                                  act=attempt_with(auth=_Hook({"Authorization": "Bearer s3cret\r\nX-Injected: 1"})))),
    *row("inject-oauth-token", Edge(None, ERROR, errors=_TYPED_OR_REFUSED, then=False, check=never_injected,
                                    act=_oauth("s3cret\r\nX-Injected: 1"))),
    *row("inject-session-id-cr", Edge(None, EITHER, then=False, check=never_injected, act=with_session_id,
                                      server={"era": "legacy", "session_id": b"s1\rX-Injected: 1"})),
    *row("inject-session-id-nul", Edge(None, EITHER, then=False, check=never_injected, act=with_session_id,
                                       server={"era": "legacy", "session_id": b"s1\x00X-Injected: 1"})),
    *row("inject-session-id-folded", Edge(None, EITHER, then=False, check=never_injected, act=with_session_id,
                                          server={"era": "legacy", "session_id": b"s1\r\n X-Injected: 1"})),
    # header values and names the client cannot send as they are
    *row("non-latin1-user-value", Edge(None, ERROR, errors=_TYPED_OR_REFUSED, then=False, check=no_secret_quoted,
                                       act=attempt_with(headers={"Authorization": _SECRET, "X-User": "café €"}))),
    *row("non-latin1-hook-value", Edge(None, ERROR, errors=_TYPED_OR_REFUSED, then=False, check=no_secret_quoted,
                                       act=attempt_with(auth=_Hook({"Authorization": _SECRET, "X-User": "café €"})))),
    *row("user-host-and-content-length", Edge(None, EITHER, errors=_TYPED_OR_REFUSED, then=False, check=one_host_one_length,
                                              act=attempt_with(headers={"Host": "example.test", "Content-Length": "40"}))),
    # URLs
    *row("ipv6-literal", Edge(None, server={"host": "::1"}, check=host_header(lambda r: f"[::1]:{r.srv.port}"))),
    *row("idna-host", Edge(None, act=idna_host, check=idna_resolved)),
    *row("userinfo-sent-as-basic", Edge(None, act=userinfo, check=basic_sent_never_quoted)),
    *row("userinfo-never-quoted", Edge(None, ERROR, errors=(ConnectError,), refused=True, then=False, timeout=3,
                                       act=userinfo_unreachable, check=no_secret_anywhere)),
    *row("non-ascii-path", Edge(None, act=on_url("/mcp/ü"), check=percent_encoded)),
    # the pools: every socket comes back, no answer crosses, close() closes
    *row("ten-stalled-bodies", Edge(cut_mid_body("stall"), ERROR, errors=(RequestTimeout,), timeout=0.5, act=repeat(12)),
         slow=True),
    *row("ten-reset-bodies", Edge(cut_mid_body("rst"), ERROR, errors=(NetworkError,), timeout=2, act=repeat(12))),
    *row("interrupted-mid-body-x12", Edge(interrupt_mid_body, ERROR, errors=(KeyboardInterrupt,), act=interrupted(12))),
    *row("crossing-100", Edge(interim(b"100 Continue", pause=0.3), EITHER, timeout=3, act=two_clients)),
    *row("crossing-100-legacy-era", Edge(interim(b"100 Continue", pause=0.3), EITHER, timeout=3, act=two_clients,
                                         server={"era": "legacy"})),
    *row("crossing-103", Edge(interim(b"103 Early Hints", pause=0.3), EITHER, timeout=3, act=two_clients)),
    *row("close-in-flight-held", Edge(held, ERROR, timeout=6, then=False, act=close_in_flight)),
    *row("close-in-flight-answered", Edge(answered_late, EITHER, timeout=6, then=False, act=close_in_flight)),
]


@pytest.fixture
def run(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
        caplog: pytest.LogCaptureFixture) -> Iterator[Callable[[Edge, str], Run]]:
    made: list[Run] = []

    def start(edge: Edge, path: str) -> Run:
        made.append(Run(edge, path, tmp_path, monkeypatch, caplog))
        return made[-1]

    yield start
    for r in made:
        r.close()


@pytest.mark.parametrize(("edge", "http_path"), ROWS, indirect=["http_path"])
def test_wire_edge(edge: Edge, http_path: str, run: Callable[[Edge, str], Run]) -> None:
    r = run(edge, http_path)
    (edge.act or call_edge)(r)
    r.verify()


def test_every_mark_of_today_names_a_row() -> None:
    ids = {p.id for p in ROWS}
    assert not [f"{name}-{path}" for name, path in TODAY if f"{name}-{path}" not in ids]
