"""Discovery is harness overhead: the Client's tool cache against a server that counts its
``tools/list`` calls (``tests/servers/counting_server.py --count-file``, so the count
survives the server's restarts).

It proves the three levels: one discovery per session however many turns, rediscovery
after list_changed and after a reconnect, none otherwise; the metrics count discoveries
apart from agent calls.
"""

from __future__ import annotations

import threading
from pathlib import Path

import pytest

from mcpsync import Client, PoolLimits
from mcpsync._cache import LIST_CHANGED, RECONNECT, ToolCache
from mcpsync._errors import MCPError
from mcpsync._metrics import MetricsRecorder
from tests.conftest import server_command

pytestmark = pytest.mark.timeout(60)


def listings(path: Path) -> int:
    return path.read_text().splitlines().count("tools/list") if path.exists() else 0


@pytest.mark.parametrize("mode", ["legacy", "modern"])
def test_cache_levels_against_a_counting_server(tmp_path, mode):
    counts = tmp_path / "counts.txt"
    cmd = server_command("counting_server.py", "--count-file", str(counts))
    with Client.stdio(cmd[0], cmd[1:], mode=mode, name="counting", pool=PoolLimits.SINGLE) as client:
        cache = client._tool_cache
        # levels 1 + 2: twenty turns, each looking the tools up, one discovery
        for turn in range(20):
            names = tuple(t.name for t in client.list_tools())
            assert "echo" in names
            assert cache.lookup("counting", "echo") is not None
            client.call_tool("echo", {"message": f"turn {turn}"})
        assert listings(counts) == 1

        # level 3a: list_changed (legacy push) invalidates; the next lookup rediscovers
        if mode == "legacy":
            gone = threading.Event()
            client.on_notification("notifications/tools/list_changed", lambda _p: gone.set())
            client.call_tool("change")
            assert gone.wait(10)
            for _ in range(5):
                assert "extra_0" in tuple(t.name for t in client.list_tools())
            assert listings(counts) == 2
        else:
            cache.invalidate("counting", LIST_CHANGED)  # what a listen stream would bring
            client.list_tools()
            assert listings(counts) == 2

        # level 3b: the server dies; the reconnection invalidates; one rediscovery
        with pytest.raises(MCPError):
            client.call_tool("exit", timeout=5)
        assert client.call_tool("echo", {"message": "back"}, retry_safe=True).text == "back"
        for _ in range(5):
            client.list_tools()
        assert listings(counts) == 3
        assert tuple(t.name for t in client.list_tools())[:2] == ("echo", "sleep_ms")  # stable order across rediscovery

        rec_snapshot = client.metrics()
    st = cache.stats("counting")
    assert st.discoveries == 3
    assert st.invalidations == {LIST_CHANGED: 1, RECONNECT: 1}
    m = rec_snapshot["counting"]
    # discovery counted apart: 3 tools/list, and the handshakes (the first connect, and the
    # session's replacement when that ran on the worker before the next call reconnected)
    assert m.discovery.calls in (3 + 1, 3 + 2)
    assert "tools/list" not in m.tools  # ... never as agent work
    assert m.tools["echo"].successes == 21
    assert m.total.cache_hit_rate > 0.9
