"""A pytest plugin for MCP server authors: test your server through a real client.

Installed with mcpsync (entry point ``pytest11``), it does nothing until a test asks for
its fixture. Say where the server is with a marker (or ``--mcp-server``), and ask for
``mcp_client``: a connected :class:`~mcpsync.Client`, one per transport and protocol era
the server can be reached by, so every test runs over each::

    # test_my_server.py
    import sys
    import pytest

    pytestmark = pytest.mark.mcp_server(
        command=[sys.executable, "my_server.py"],                      # stdio
        http_command=[sys.executable, "my_server.py", "http", "{port}"],  # Streamable HTTP
        eras=["modern", "legacy"],
    )

    def test_add(mcp_client):
        assert mcp_client.call_tool("add", {"a": 1, "b": 2}).structured_content == {"result": 3}

    def test_add_latency(mcp_benchmark):                 # pytest-benchmark, grouped per tool
        assert mcp_benchmark("add", {"a": 1, "b": 2}).text == "3"

Where the server is (``pytest.mark.mcp_server`` keywords, or ``--mcp-server``):

- ``command``: argv (or one string) of a server that speaks stdio: transport ``stdio``.
- ``http_command``: argv of the same server serving Streamable HTTP on ``{port}`` (a free
  127.0.0.1 port the plugin picks), at ``path`` (default ``/mcp``): transport ``http``.
- ``url``: a running server's Streamable HTTP URL: transport ``http``.
- ``server``: a server object in this process, or its import path ``"pkg.module:name"``:
  an official ``mcp`` SDK ``MCPServer`` (or FastMCP) server, or an mcpsync
  :class:`~mcpsync.server.Registry`: transport ``inprocess``, and for SDK servers also
  ``http`` (served by uvicorn on a thread, on 127.0.0.1).
- ``env``: extra environment variables for ``command`` / ``http_command``.
- ``transports`` / ``eras``: which of them to run (default: every transport the server
  offers; era ``"auto"``). Eras are ``"modern"`` (2026-07-28), ``"legacy"`` (initialize
  handshake) and ``"auto"``.

Command-line options narrow the runs: ``--mcp-transport stdio,http``, ``--mcp-era
modern,legacy``; ``--mcp-server`` names the server for tests without a marker (a URL, an
import path ``pkg.module:name``, or a command line). The client's scope is the test
function by default; ``--mcp-scope module`` (or the ini option ``mcp_client_scope``) shares
one client (and one server) per module or per session. Test ids name the run:
``test_add[stdio-modern]``.
"""

from __future__ import annotations

import importlib
import os
import shlex
import socket
import subprocess
import threading
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import pytest

if TYPE_CHECKING:
    from ._client import Client
    from ._messages import CallToolResult

__all__ = ["ServerSpec", "Variant"]

TRANSPORTS = ("stdio", "http", "inprocess")
ERAS = ("auto", "modern", "legacy")
START_TIMEOUT = 60.0  # seconds an HTTP server command gets to listen


@dataclass(frozen=True)
class ServerSpec:
    """Where a server under test is (see the module's documentation)."""

    command: tuple[str, ...] | None = None
    http_command: tuple[str, ...] | None = None
    url: str | None = None
    server: Any = None
    env: Mapping[str, str] | None = None
    path: str = "/mcp"
    transports: tuple[str, ...] | None = None
    eras: tuple[str, ...] = ("auto",)

    @classmethod
    def build(cls, command: str | Sequence[str] | None = None, *, http_command: str | Sequence[str] | None = None,
              url: str | None = None, server: Any = None, env: Mapping[str, str] | None = None, path: str = "/mcp",
              transports: Sequence[str] | None = None, eras: Sequence[str] = ("auto",)) -> "ServerSpec":
        def argv(value: str | Sequence[str] | None) -> tuple[str, ...] | None:
            if value is None:
                return None
            return tuple(shlex.split(value)) if isinstance(value, str) else tuple(str(a) for a in value)

        for name, values, known in (("transports", transports or (), TRANSPORTS), ("eras", eras, ERAS)):
            bad = [v for v in values if v not in known]
            if bad:
                raise pytest.UsageError(f"mcp_server: unknown {name} {bad} (known: {', '.join(known)})")
        spec = cls(argv(command), argv(http_command), url, server, env, path, tuple(transports) if transports else None, tuple(eras))
        if not spec.offered():
            raise pytest.UsageError("mcp_server: give a command, an http_command, a url or a server object")
        return spec

    @classmethod
    def from_option(cls, value: str) -> "ServerSpec":
        """``--mcp-server``: a URL, an import path ``pkg.module:name``, or a command line."""
        if value.startswith(("http://", "https://")):
            return cls.build(url=value)
        head, sep, tail = value.partition(":")
        if sep and " " not in value and all(p.isidentifier() for p in head.split(".") + tail.split(".")):
            return cls.build(server=value)
        return cls.build(value)

    def offered(self) -> list[str]:
        """The transports this server can be reached by."""
        out = []
        if self.command:
            out.append("stdio")
        if self.url or self.http_command or (self.server is not None and _is_sdk_server(self._object())):
            out.append("http")
        if self.server is not None:
            out.append("inprocess")
        return out

    def _object(self) -> Any:
        if not isinstance(self.server, str):
            return self.server
        module, _, name = self.server.partition(":")
        obj: Any = importlib.import_module(module)
        for part in name.split("."):
            obj = getattr(obj, part)
        return obj


@dataclass(frozen=True)
class Variant:
    """One way to reach the server: a transport and an era."""

    spec: ServerSpec
    transport: str
    era: str

    @property
    def id(self) -> str:
        return f"{self.transport}-{self.era}"


def _is_sdk_server(obj: Any) -> bool:
    return callable(getattr(obj, "streamable_http_app", None))


# ------------------------------------------------------------------ pytest hooks


def pytest_addoption(parser: pytest.Parser) -> None:
    group = parser.getgroup("mcpsync", "MCP server testing (mcpsync)")
    group.addoption("--mcp-server", default=None, help="the server for tests without a mcp_server marker: URL, pkg.module:name, or a command line")
    group.addoption("--mcp-transport", default=None, help="comma-separated transports to run: stdio,http,inprocess (default: all the server offers)")
    group.addoption("--mcp-era", default=None, help="comma-separated protocol eras to run: auto,modern,legacy (default: the marker's, else auto)")
    group.addoption("--mcp-scope", default=None, choices=("function", "module", "session"), help="scope of the mcp_client fixture")
    parser.addini("mcp_client_scope", "scope of the mcp_client fixture: function (default), module or session", default="function")


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line(
        "markers",
        "mcp_server(command=None, *, http_command=None, url=None, server=None, env=None, path='/mcp', transports=None, eras=('auto',)): "
        "the MCP server the mcp_client fixture connects to (mcpsync)",
    )


def _scope(fixture_name: str, config: pytest.Config) -> Any:
    return config.getoption("--mcp-scope") or config.getini("mcp_client_scope") or "function"


def _listed(config: pytest.Config, option: str) -> list[str] | None:
    value = config.getoption(option)
    return [v.strip() for v in value.split(",") if v.strip()] if value else None


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    if "mcp_client" not in metafunc.fixturenames:
        return
    marker = metafunc.definition.get_closest_marker("mcp_server")
    option = metafunc.config.getoption("--mcp-server")
    if marker is not None:
        spec = ServerSpec.build(*marker.args, **marker.kwargs)
    elif option:
        spec = ServerSpec.from_option(option)
    else:
        return  # the fixture explains what is missing
    transports = [t for t in (spec.transports or spec.offered()) if t in spec.offered()]
    wanted = _listed(metafunc.config, "--mcp-transport")
    if wanted is not None:
        transports = [t for t in transports if t in wanted]
    eras = _listed(metafunc.config, "--mcp-era") or list(spec.eras)
    variants = [Variant(spec, t, e) for t in transports for e in eras]
    if not variants:
        marks = pytest.mark.skip(reason=f"no transport of {spec.offered()} is selected")
        metafunc.parametrize("mcp_client", [pytest.param(None, marks=marks, id="no-transport")], indirect=True)
        return
    metafunc.parametrize("mcp_client", variants, indirect=True, ids=[v.id for v in variants], scope=_scope("mcp_client", metafunc.config))


# ------------------------------------------------------------------ fixtures


@pytest.fixture(scope=_scope)
def mcp_client(request: pytest.FixtureRequest) -> Iterator["Client"]:
    """A connected :class:`~mcpsync.Client` of the server under test (one per variant)."""
    variant = getattr(request, "param", None)
    if not isinstance(variant, Variant):
        raise pytest.UsageError("mcp_client: mark the test with pytest.mark.mcp_server(...) or pass --mcp-server")
    with _connect(variant) as client:
        yield client


@pytest.fixture
def mcp_benchmark(request: pytest.FixtureRequest, mcp_client: "Client") -> Callable[..., "CallToolResult"]:
    """``mcp_benchmark(tool, arguments)``: time ``call_tool`` with pytest-benchmark; its
    report has a table per tool, a row per test and variant (``test_x[stdio-modern]``),
    and each run's ``extra_info`` names the tool, transport and era. Returns the last result."""
    benchmark = request.getfixturevalue("benchmark")  # pytest-benchmark's fixture
    variant = request.node.callspec.params.get("mcp_client") if hasattr(request.node, "callspec") else None

    def run(tool: str, arguments: Mapping[str, Any] | None = None, **call: Any) -> "CallToolResult":
        benchmark.group = f"mcp tool {tool}"
        benchmark.extra_info.update(tool=tool, transport=getattr(variant, "transport", ""), era=getattr(variant, "era", ""))
        result: CallToolResult = benchmark(mcp_client.call_tool, tool, arguments, **call)
        return result

    return run


# ------------------------------------------------------------------ starting servers


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


class _connect:
    """The client of one variant, and whatever it had to start (closed on every exit)."""

    def __init__(self, variant: Variant) -> None:
        self.variant = variant
        self.cleanups: list[Callable[[], None]] = []

    def __enter__(self) -> "Client":
        try:
            client = self._client()
            self.cleanups.append(client.close)
            client.connect()
            return client
        except BaseException:
            self._close()
            raise

    def __exit__(self, *exc: object) -> None:
        self._close()

    def _close(self) -> None:
        while self.cleanups:
            self.cleanups.pop()()

    def _client(self) -> "Client":
        from ._client import Client

        v, spec = self.variant, self.variant.spec
        if v.transport == "stdio":
            assert spec.command
            return Client.stdio(spec.command[0], spec.command[1:], env=spec.env, mode=v.era)
        if v.transport == "inprocess":
            return Client.local(spec._object(), mode=v.era)
        if spec.url:
            return Client.http(spec.url, mode=v.era)
        if spec.http_command:
            port = _free_port()
            self._start_command([a.replace("{port}", str(port)) for a in spec.http_command], port)
        else:
            port = self._serve_in_thread(spec._object())
        return Client.http(f"http://127.0.0.1:{port}{spec.path}", mode=v.era)

    def _start_command(self, argv: list[str], port: int) -> None:
        env = {**os.environ, **(self.variant.spec.env or {})}
        proc = subprocess.Popen(argv, env=env, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, start_new_session=True)

        def stop() -> None:
            proc.terminate()
            try:
                proc.wait(10)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait(10)

        self.cleanups.append(stop)
        deadline = time.monotonic() + START_TIMEOUT
        while True:  # bounded: the process exits, or listens, or the start budget ends
            if proc.poll() is not None:
                raise pytest.fail(f"mcp_server: {shlex.join(argv)} exited with {proc.returncode} before listening", pytrace=False)
            try:
                socket.create_connection(("127.0.0.1", port), timeout=1).close()
                return
            except OSError:
                if time.monotonic() > deadline:
                    raise pytest.fail(f"mcp_server: {shlex.join(argv)} did not listen on port {port} within {START_TIMEOUT:g} s", pytrace=False) from None
                time.sleep(0.05)

    def _serve_in_thread(self, server: Any) -> int:
        import uvicorn

        sock = socket.socket()
        sock.bind(("127.0.0.1", 0))
        sock.listen(128)  # listening before uvicorn starts: the client's connect queues, no wait
        port = int(sock.getsockname()[1])
        app = server.streamable_http_app(streamable_http_path=self.variant.spec.path)
        runner = uvicorn.Server(uvicorn.Config(app, log_level="warning", lifespan="on"))
        thread = threading.Thread(target=runner.run, kwargs={"sockets": [sock]}, name="mcpsync-pytest-http", daemon=True)
        thread.start()

        def stop() -> None:
            runner.should_exit = True
            thread.join(10)
            sock.close()

        self.cleanups.append(stop)
        return port
