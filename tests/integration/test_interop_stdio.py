"""Interop over stdio with real servers: the official SDK's and server-everything."""

from __future__ import annotations

import base64
import json
import threading

import pytest

from mcpsync import Client, ImageContent, TextContent, EmbeddedResource, ResourceLink
from tests.conftest import everything_command, server_command

pytestmark = pytest.mark.timeout(120)


# ------------------------------------------------------------------ official SDK


@pytest.fixture(scope="module", params=["modern", "legacy", "auto"])
def sdk(request):
    cmd = server_command("sdk_server.py")
    with Client.stdio(cmd[0], cmd[1:], mode=request.param) as c:
        yield c, request.param


def test_sdk_session(sdk):
    c, mode = sdk
    assert c.era == ("legacy" if mode == "legacy" else "modern")
    assert c.server_info.name == "sdk-test-server"
    assert c.capabilities.tools is not None
    if c.era == "modern":
        assert c.protocol_version == "2026-07-28"
    else:
        assert c.protocol_version in ("2025-11-25", "2025-06-18")


def test_sdk_every_tool(sdk):
    c, _ = sdk
    tools = {t.name: t for t in c.list_tools()}
    assert set(tools) == {"add", "echo", "word_count", "fail", "sleep_ms"}
    assert tools["add"].input_schema["properties"]["a"]["type"] == "integer"
    assert tools["add"].description == "Add two integers."
    r = c.call_tool("add", {"a": 20, "b": 22})
    assert r.structured_content == {"result": 42} and r.text == "42" and not r.is_error
    assert c.call_tool("echo", {"message": "héllo ✓"}).text == "héllo ✓"
    wc = c.call_tool("word_count", {"text": "one two three"})
    assert json.loads(wc.text) == {"words": 3, "chars": 13}
    failed = c.call_tool("fail", {"reason": "nope"})
    assert failed.is_error and "fail" in failed.text
    assert c.call_tool("sleep_ms", {"ms": 10}).text == "slept 10 ms"


def test_sdk_ping(sdk):
    c, _ = sdk
    c.ping()


# ------------------------------------------------------------------ server-everything


@pytest.fixture(scope="module")
def everything():
    cmd = everything_command("stdio")
    with Client.stdio(cmd[0], cmd[1:]) as c:
        yield c


def test_everything_session(everything):
    c = everything
    assert c.era == "legacy"  # it negotiates 2025-11-25
    assert c.protocol_version == "2025-11-25"
    assert c.server_info.name == "mcp-servers/everything"


def test_everything_list_tools(everything):
    names = {t.name for t in everything.list_tools()}
    expected = {
        "echo", "get-annotated-message", "get-env", "get-resource-links", "get-resource-reference",
        "get-structured-content", "get-sum", "get-tiny-image", "gzip-file-as-resource",
        "toggle-simulated-logging", "toggle-subscriber-updates", "trigger-long-running-operation",
        "simulate-research-query",
    }
    assert expected <= names
    # no client features declared: the tools that need them are not offered
    assert "trigger-sampling-request" not in names


def test_everything_echo_and_sum(everything):
    assert everything.call_tool("echo", {"message": "hi"}).text == "Echo: hi"
    assert "5" in everything.call_tool("get-sum", {"a": 2, "b": 3}).text


def test_everything_annotated_message(everything):
    r = everything.call_tool("get-annotated-message", {"messageType": "error", "includeImage": True})
    kinds = {type(b) for b in r.content}
    assert TextContent in kinds and ImageContent in kinds
    text = next(b for b in r.content if isinstance(b, TextContent))
    assert text.annotations is not None and text.annotations.priority is not None


def test_everything_env(everything):
    r = everything.call_tool("get-env", {})
    assert "PATH" in r.text


def test_everything_resource_links(everything):
    r = everything.call_tool("get-resource-links", {"count": 3})
    links = [b for b in r.content if isinstance(b, ResourceLink)]
    assert len(links) == 3 and all(l.uri.startswith("demo://") for l in links)


def test_everything_resource_reference(everything):
    r = everything.call_tool("get-resource-reference", {"resourceType": "Text", "resourceId": 1})
    res = [b for b in r.content if isinstance(b, EmbeddedResource)]
    assert res and res[0].resource.uri.startswith("demo://resource/dynamic/text/1")


def test_everything_structured_content(everything):
    r = everything.call_tool("get-structured-content", {"location": "New York"})
    assert isinstance(r.structured_content, dict) and "temperature" in r.structured_content


def test_everything_tiny_image(everything):
    r = everything.call_tool("get-tiny-image", {})
    img = next(b for b in r.content if isinstance(b, ImageContent))
    assert img.mime_type == "image/png"
    assert base64.b64decode(img.data)[:4] == b"\x89PNG"


def test_everything_gzip(everything):
    r = everything.call_tool(
        "gzip-file-as-resource",
        {"name": "hello.txt.gz", "data": "data:text/plain;base64," + base64.b64encode(b"hello").decode(), "outputType": "resource"},
    )
    assert not r.is_error, r.text
    assert r.content


def test_everything_toggles(everything):
    assert not everything.call_tool("toggle-simulated-logging", {}).is_error
    assert not everything.call_tool("toggle-simulated-logging", {}).is_error
    assert not everything.call_tool("toggle-subscriber-updates", {}).is_error
    assert not everything.call_tool("toggle-subscriber-updates", {}).is_error


def test_everything_long_running_with_progress(everything):
    seen = []
    done = threading.Event()

    def on_progress(p, total, message):
        seen.append((p, total))
        if total and p >= total:
            done.set()

    r = everything.call_tool("trigger-long-running-operation", {"duration": 1, "steps": 4}, progress=on_progress, timeout=30)
    assert "completed" in r.text.lower()
    done.wait(5)
    assert [p for p, _ in seen] == [1, 2, 3, 4]


def test_everything_research_query(everything):
    r = everything.call_tool("simulate-research-query", {"topic": "mcp", "ambiguous": False}, timeout=60)
    assert r.content
