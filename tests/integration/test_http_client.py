"""The HTTP transports under the real Client (dispatcher + era negotiation), real servers."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any, Iterator

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "servers"))

import http_support as hs  # noqa: E402

from tests.conftest import everything_command  # noqa: E402
from tests.helpers import hammer, wait_until  # noqa: E402
from mcpsync._errors import RequestTimeout  # noqa: E402
from mcpsync.transports.streamable_http import StreamableHTTPTransport, forget_url  # noqa: E402

pytestmark = pytest.mark.usefixtures("http_path")  # both HTTP paths: fast and urllib3

client_mod = pytest.importorskip("mcpsync._client")
Client = client_mod.Client


def _serve(argv: list[str], port: int, env: dict[str, str] | None = None) -> Iterator[str]:
    with hs.run_server(argv, port, env):
        yield f"http://127.0.0.1:{port}"


@pytest.fixture(scope="module")
def sdk() -> Iterator[str]:
    port = hs.free_port()
    yield from _serve(hs.sdk_server_argv(port, "--event-store", "--retry-ms", "100"), port)


@pytest.fixture(scope="module")
def sdk_sse() -> Iterator[str]:
    port = hs.free_port()
    yield from _serve(hs.sdk_server_argv(port, "--transport", "sse"), port)


@pytest.fixture(scope="module")
def everything() -> Iterator[str]:
    port = hs.free_port()
    yield from _serve(everything_command("streamableHttp"), port, {"PORT": str(port)})


@pytest.fixture(scope="module")
def everything_sse() -> Iterator[str]:
    port = hs.free_port()
    yield from _serve(everything_command("sse"), port, {"PORT": str(port)})


def _client(url: str, **kw: Any) -> Any:
    return Client(lambda: StreamableHTTPTransport(url), **kw)


def test_auto_mode_finds_the_modern_era(sdk: str) -> None:
    with _client(f"{sdk}/mcp") as c:
        assert c.era == "modern"
        names = {t.name for t in c.list_tools()}
        assert {"echo", "routed"} <= names
        assert c.call_tool("echo", {"message": "hi"}).text == "Echo: hi"
        assert c.call_tool("routed", {"region": "ap-south", "n": 4}).text == "ap-south:4"
        seen: list[float] = []
        assert c.call_tool("progress", {"steps": 2}, progress=lambda p, t, m: seen.append(p)).text == "done"
        wait_until(lambda: len(seen) >= 2, 5)  # progress callbacks run on the worker
        assert seen == [1, 2]


def test_legacy_mode_with_elicitation_and_expiry(sdk: str) -> None:
    import urllib3

    answers = {"action": "accept", "content": {"answer": "7"}}
    with _client(f"{sdk}/mcp", mode="legacy", elicitation_handler=lambda params: answers) as c:
        assert c.era == "legacy"
        assert c.call_tool("ask", {"question": "n?"}).text == "answer: 7"
        urllib3.PoolManager().request("POST", f"{sdk}/admin/expire")
        assert c.call_tool("echo", {"message": "still here"}).text == "Echo: still here"


@pytest.mark.parametrize("mode", ["auto", "legacy"])
def test_timeout_is_typed_and_the_client_stays_usable(sdk: str, mode: str) -> None:
    with _client(f"{sdk}/mcp", mode=mode) as c:
        with pytest.raises(RequestTimeout):
            c.call_tool("sleep", {"seconds": 3}, timeout=0.5)
        assert c.call_tool("echo", {"message": "after"}).text == "Echo: after"


@pytest.mark.npm
def test_auto_mode_falls_back_to_legacy_on_everything(everything: str) -> None:
    updates: list[Any] = []
    with _client(f"{everything}/mcp") as c:
        assert c.era == "legacy"
        assert c.server_info.name == "mcp-servers/everything"
        assert c.call_tool("echo", {"message": "ts"}).text == "Echo: ts"
        c.on_notification("notifications/resources/updated", updates.append)
        uri = "demo://resource/static/document/architecture.md"
        c.request("resources/subscribe", {"uri": uri})
        c.call_tool("toggle-subscriber-updates", {})
        wait_until(lambda: updates, 8)
        assert updates and updates[0]["uri"] == uri


@pytest.mark.npm
def test_bare_sse_url_through_the_client(everything_sse: str) -> None:
    url = f"{everything_sse}/sse"
    forget_url(url)
    with _client(url) as c:
        assert c.era == "legacy"
        assert c.call_tool("echo", {"message": "via sse"}).text == "Echo: via sse"


def test_bare_sdk_sse_url_through_the_client(sdk_sse: str) -> None:
    url = f"{sdk_sse}/sse"
    forget_url(url)
    with _client(url) as c:
        # the SDK answers server/discover even over HTTP+SSE
        assert c.era in ("modern", "legacy")
        assert c.call_tool("echo", {"message": "old wire"}).text == "Echo: old wire"
    with _client(url, mode="legacy") as c:
        assert c.era == "legacy"
        assert c.call_tool("add", {"a": 2, "b": 3}).structured_content == {"result": 5}


@pytest.mark.parametrize("server", ["sdk", pytest.param("everything", marks=pytest.mark.npm)])
def test_sixteen_threads_share_one_client(server: str, request: pytest.FixtureRequest) -> None:
    base = request.getfixturevalue(server)
    with _client(f"{base}/mcp") as c:
        hammer(c, threads=16, calls=5, timeout=30)
