"""The objects every call goes through keep their attributes where CPython reads them
fast: at most 29 in an instance's own values (from the 30th on, CPython 3.11 moves them
all into a dict, and every access on the hot path costs more: ~700 instructions a call
for the pool, measured with benchmarks/callgrind.py), or in slots."""

from __future__ import annotations

import pytest

from mcpsync import Client
from tests.conftest import server_command

pytestmark = pytest.mark.timeout(60)

INLINE = 29  # CPython's inline values hold 30 keys; the 30th spills (see the docstring)


def _attributes(obj: object) -> int:
    return len(getattr(obj, "__dict__", {}))


def test_a_stdio_call_goes_through_objects_with_inline_or_slotted_attributes() -> None:
    argv = server_command("counting_server.py")
    with Client.stdio(argv[0], argv[1:]) as client:
        client.call_tool("echo", {"message": "x"})
        session = client._session
        hot = session.pool._hot
        assert hot is not None
        objects = {
            "client": client, "session": session, "pool": session.pool, "connection": hot.conn,
            "dispatcher": hot.conn.channel, "transport": hot.conn.channel.transport, "guard": session.guard,
            "breaker": session.guard.breaker, "tool cache": client._tool_cache, "metrics": client._metrics,
        }
        over = {name: _attributes(obj) for name, obj in objects.items() if _attributes(obj) > INLINE}
        assert not over, f"more attributes than CPython keeps inline (use fewer, or __slots__): {over}"
        assert _attributes(hot.conn.channel.transport) == 0, "StdioTransport's attributes belong in its __slots__"


@pytest.mark.parametrize("mode", ["modern", "legacy"])
def test_the_streamable_http_transport_keeps_every_attribute_in_its_slots(mode: str) -> None:
    # after calls, a subscription and its stream, against the official SDK's HTTP server
    # (what an attribute set on the way would spill into the dict)
    import threading

    from tests.servers import http_support as hs

    port = hs.free_port()
    with hs.run_server(server_command("sdk_protocol_server.py", "http", str(port)), port):
        with Client.http(f"http://127.0.0.1:{port}/mcp", mode=mode) as client:
            assert client.read_resource("test://greeting").text == "hello from the SDK server"
            got = threading.Event()
            with client.subscribe("test://greeting", lambda _update: got.set()):
                client.call_tool("touch", {"uri": "test://greeting"})
                assert got.wait(20)
            hot = client._session.pool._hot
            assert hot is not None
            t = hot.conn.channel.transport
            assert type(t).__name__ == "StreamableHTTPTransport"
            assert _attributes(t) == 0, f"attributes outside __slots__: {sorted(vars(t))}"
            assert _attributes(hot.conn.channel) <= INLINE
