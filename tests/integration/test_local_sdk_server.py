"""``Client.local`` on a server object of the official SDK (and FastMCP's, when installed):
the way people test their own server, in a plain pytest function."""

from __future__ import annotations

import threading

import pytest

from mcpsync import Client
from mcpsync._errors import RemoteError

pytest.importorskip("mcp.server.mcpserver")

from mcp.server.mcpserver import MCPServer  # noqa: E402


def _server() -> MCPServer:
    server = MCPServer("calc")

    @server.tool()
    def add(a: int, b: int) -> int:
        """Add two integers."""
        return a + b

    @server.tool()
    def boom() -> str:
        """Always fails."""
        raise ValueError("boom")

    @server.resource("calc://about")
    def about() -> str:
        """What this server is."""
        return "a calculator"

    @server.prompt()
    def explain(expr: str) -> str:
        """Explain an expression."""
        return f"Explain {expr}"

    return server


@pytest.mark.parametrize("mode", ["auto", "legacy", "modern"])
def test_a_plain_function_tests_an_sdk_server(mode: str) -> None:
    server = _server()
    client = Client.local(server, mode=mode)
    with client:
        assert client.call_tool("add", {"a": 2, "b": 3}, timeout=30).structured_content == {"result": 5}
        assert {t.name for t in client.list_tools()} == {"add", "boom"}
        assert client.read_resource("calc://about", timeout=30).text == "a calculator"
        assert "Explain 1+1" in str(client.get_prompt("explain", {"expr": "1+1"}, timeout=30))
        assert client.call_tool("boom", {}, timeout=30).is_error
        with pytest.raises(RemoteError):
            client.read_resource("calc://nothing", timeout=30)
        transport = client._session.primary.transport
        assert transport.describe() == "in-process calc"
        loop = transport.loop_thread
        assert loop is not None and loop.is_alive()
    # close() stopped the server and its event loop thread
    assert not loop.is_alive()
    assert not [t for t in threading.enumerate() if t is loop]


def test_concurrent_callers_share_the_in_process_server() -> None:
    with Client.local(_server()) as client:
        results: list[int] = []
        errors: list[BaseException] = []

        def work(i: int) -> None:
            try:
                for j in range(10):
                    results.append(client.call_tool("add", {"a": i, "b": j}, timeout=30).structured_content["result"])
            except BaseException as exc:  # pragma: no cover - reported below
                errors.append(exc)

        threads = [threading.Thread(target=work, args=(i,)) for i in range(4)]
        for t in threads:
            t.start()
        for t in threads:
            t.join(60)
        assert not errors and len(results) == 40


def test_a_fastmcp_server_when_installed() -> None:
    fastmcp = pytest.importorskip("fastmcp")
    server = fastmcp.FastMCP("fm")

    @server.tool()
    def twice(x: int) -> int:
        return 2 * x

    with Client.local(server) as client:
        assert client.call_tool("twice", {"x": 21}, timeout=30).structured_content == {"result": 42}
