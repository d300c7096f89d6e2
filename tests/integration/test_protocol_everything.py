"""The protocol surface against @modelcontextprotocol/server-everything over stdio (legacy era).

The client declares sampling, elicitation and roots, so the server registers its
client-feature tools too; the handlers below answer them. One connection (SINGLE pool):
server-everything keeps subscriptions and simulated updates per process.
"""

from __future__ import annotations

import base64
import threading

import pytest

from mcpsync import Cancelled, Client, PoolLimits, Prompt, ResourceNotFound, ResourceTemplate, TextContent, ToolTask
from tests.conftest import everything_command
from tests.helpers import wait_until

pytestmark = [pytest.mark.timeout(60), pytest.mark.npm]

STATIC = [
    f"demo://resource/static/document/{n}.md"
    for n in ("architecture", "extension", "features", "how-it-works", "instructions", "startup", "structure")
]


class Handlers:
    def __init__(self) -> None:
        self.elicitations: list[dict] = []
        self.samplings: list[dict] = []
        self.logs: list[dict] = []

    def elicit(self, params):
        self.elicitations.append(params)
        if params.get("mode") == "url":
            return {"action": "accept"}
        props = params["requestedSchema"]["properties"]
        if "interpretation" in props:  # simulate-research-query's clarification
            return {"action": "accept", "content": {"interpretation": props["interpretation"]["oneOf"][0]["const"]}}
        return {"action": "accept", "content": {"name": "Ada Lovelace", "check": True}}

    def sample(self, params):
        self.samplings.append(params)
        return {"role": "assistant", "content": {"type": "text", "text": "sampled words"}, "model": "test-model", "stopReason": "endTurn"}


@pytest.fixture(scope="module")
def handlers():
    return Handlers()


@pytest.fixture(scope="module")
def everything(handlers):
    cmd = everything_command("stdio")
    with Client.stdio(
        cmd[0],
        cmd[1:],
        pool=PoolLimits.SINGLE,
        sampling_handler=handlers.sample,
        elicitation_handler=handlers.elicit,
        roots=[{"uri": "file:///tmp/project", "name": "project"}],
        logging_handler=handlers.logs.append,
    ) as c:
        yield c


# ------------------------------------------------------------------ resources


def test_every_static_resource(everything):
    listed = everything.list_resources()
    assert sorted(r.uri for r in listed) == sorted(STATIC)
    for uri in STATIC:
        res = everything.read_resource(uri)
        assert res.contents[0].uri == uri
        assert res.contents[0].mime_type == "text/markdown"
        assert res.text.startswith("#")


def test_both_templates(everything):
    templates = {t.uri_template: t for t in everything.list_resource_templates()}
    assert set(templates) == {"demo://resource/dynamic/text/{resourceId}", "demo://resource/dynamic/blob/{resourceId}"}
    text = everything.read_resource("demo://resource/dynamic/text/4")
    assert text.text.startswith("Resource 4:")
    blob = everything.read_resource("demo://resource/dynamic/blob/4")
    assert blob.contents[0].text is None
    assert blob.blob.startswith(b"Resource 4:")
    assert base64.b64decode(blob.contents[0].blob) == blob.blob


def test_resource_not_found(everything):
    with pytest.raises(ResourceNotFound) as info:
        everything.read_resource("demo://resource/static/document/nope.md")
    assert info.value.code in (-32602, -32002)
    assert everything.read_resource(STATIC[0]).text  # still fine


# ------------------------------------------------------------------ prompts + completion


def test_every_prompt(everything):
    prompts = {p.name: p for p in everything.list_prompts()}
    assert set(prompts) == {"simple-prompt", "args-prompt", "completable-prompt", "resource-prompt"}
    assert prompts["args-prompt"].arguments[0].name == "city" and prompts["args-prompt"].arguments[0].required

    simple = everything.get_prompt("simple-prompt")
    assert simple.messages[0].role == "user" and "simple prompt" in simple.text

    args = everything.get_prompt("args-prompt", {"city": "Oslo", "state": "Viken"})
    assert "Oslo" in args.text and "Viken" in args.text

    comp = everything.get_prompt("completable-prompt", {"department": "Engineering", "name": "Bob"})
    assert "Bob" in comp.text and "Engineering" in comp.text

    res = everything.get_prompt("resource-prompt", {"resourceType": "Text", "resourceId": "2"})
    embedded = [m.content for m in res.messages if not isinstance(m.content, TextContent)]
    assert embedded and embedded[0].resource.uri == "demo://resource/dynamic/text/2"


def test_completion(everything):
    prompt = next(p for p in everything.list_prompts() if p.name == "completable-prompt")
    assert everything.complete(prompt, ("department", "E")).values == ["Engineering"]
    names = everything.complete("completable-prompt", {"name": "name", "value": ""}, context={"department": "Engineering"})
    assert names.values == ["Alice", "Bob", "Charlie"]
    template = next(t for t in everything.list_resource_templates() if "text" in t.uri_template)
    assert isinstance(template, ResourceTemplate)
    assert "1" in everything.complete(template, ("resourceId", "1")).values
    assert isinstance(prompt, Prompt)


# ------------------------------------------------------------------ client features through handlers


def test_feature_tools_are_offered(everything):
    names = {t.name for t in everything.list_tools()}
    assert {"get-roots-list", "trigger-elicitation-request", "trigger-url-elicitation", "trigger-sampling-request"} <= names


def test_elicitation_form_defaults_filled(everything, handlers):
    r = everything.call_tool("trigger-elicitation-request", {})
    assert not r.is_error
    asked = handlers.elicitations[-1]
    assert asked["requestedSchema"]["properties"]["integer"]["default"] == 42
    # the handler answered only name/check; the schema's defaults were filled in
    assert "Ada Lovelace" in r.text and "42" in r.text and "It was a dark and stormy night." in r.text


def test_url_elicitation_not_fetched(everything, handlers):
    import http.server

    hits: list[str] = []

    class Handler(http.server.BaseHTTPRequestHandler):
        def do_GET(self):  # noqa: N802
            hits.append(self.path)
            self.send_response(204)
            self.end_headers()

        def log_message(self, *a):
            pass

    srv = http.server.HTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=srv.serve_forever, daemon=True).start()
    try:
        url = f"http://127.0.0.1:{srv.server_port}/consent"
        r = everything.call_tool("trigger-url-elicitation", {"url": url})
        assert not r.is_error, r.text
        asked = handlers.elicitations[-1]
        assert asked["mode"] == "url" and asked["url"] == url
        assert "completed the URL elicitation" in r.text
    finally:
        srv.shutdown()
        srv.server_close()
    assert hits == []  # the client showed the link; it never opened it


def test_sampling(everything, handlers):
    r = everything.call_tool("trigger-sampling-request", {"prompt": "tell me", "maxTokens": 10})
    assert not r.is_error
    assert "tell me" in handlers.samplings[-1]["messages"][0]["content"]["text"]
    assert "sampled words" in r.text and "test-model" in r.text


def test_roots(everything):
    r = everything.call_tool("get-roots-list", {})
    assert "project" in r.text and "file:///tmp/project" in r.text


def test_roots_list_changed(everything):
    everything.set_roots([{"uri": "file:///tmp/other", "name": "other"}])
    # the server re-asks roots/list after the notification; the tool reports its copy
    for _ in range(50):
        r = everything.call_tool("get-roots-list", {})
        if "other" in r.text:
            break
        threading.Event().wait(0.05)
    assert "file:///tmp/other" in r.text
    everything.set_roots([{"uri": "file:///tmp/project", "name": "project"}])


# ------------------------------------------------------------------ every other tool


def test_every_tool(everything):
    args = {
        "echo": {"message": "hi"},
        "get-annotated-message": {"messageType": "success", "includeImage": False},
        "get-env": {},
        "get-resource-links": {"count": 2},
        "get-resource-reference": {"resourceType": "Blob", "resourceId": 3},
        "get-structured-content": {"location": "Chicago"},
        "get-sum": {"a": 40, "b": 2},
        "get-tiny-image": {},
        "gzip-file-as-resource": {
            "name": "a.txt.gz",
            "data": "data:text/plain;base64," + base64.b64encode(b"abc").decode(),
            "outputType": "resourceLink",
        },
        "trigger-long-running-operation": {"duration": 0.2, "steps": 2},
    }
    tools = {t.name: t for t in everything.list_tools()}
    for name, a in args.items():
        assert name in tools
        r = everything.call_tool(name, a, timeout=20)  # validates outputSchema where declared
        assert not r.is_error, (name, r.text)
        assert r.content, name
    assert tools["get-structured-content"].output_schema is not None
    assert tools["echo"].annotations is None or tools["echo"].annotations.read_only_hint in (None, True, False)


def test_task_tool_polled_transparently(everything):
    r = everything.call_tool("simulate-research-query", {"topic": "caching"}, timeout=30)
    assert not r.is_error and "Research Report: caching" in r.text


def test_task_with_elicitation_and_handle(everything, handlers):
    """The 2025-11-25 experimental flow behind the one task API: a handle asked for with
    ``call_tool_task``, polled, then waited on (the elicitation arrives as a server request)."""
    task = everything.call_tool_task("simulate-research-query", {"topic": "python", "ambiguous": True})
    assert isinstance(task, ToolTask) and task.task_id and task.status == "working" and not task.modern
    assert task.poll().task_id == task.task_id
    seen: list[str] = []
    result = task.wait(timeout=30, on_status=lambda t: seen.append(t.status))
    assert "Clarification" in result.text
    assert seen and seen[0] in ("working", "input_required")
    assert any("interpretation" in e.get("requestedSchema", {}).get("properties", {}) for e in handlers.elicitations)
    assert any(t.task_id == task.task_id and t.status == "completed" for t in everything.list_tasks())


def test_task_cancel(everything):
    task = everything.call_tool_task("simulate-research-query", {"topic": "cancel me"})
    task.cancel()
    assert task.status == "cancelled"  # the 2025-11-25 answer is the task
    assert task.poll().status == "cancelled"
    with pytest.raises(Cancelled):
        task.wait(timeout=5)
    assert everything.task(task.task_id).poll().status == "cancelled"  # a handle from the id alone


# ------------------------------------------------------------------ logging + subscriptions


def test_logging(everything, handlers):
    # The server picks a random level each time; one of its eight texts is
    # "Alert level-message", so match on "message", not on a fixed suffix.
    def simulated():
        return [m for m in handlers.logs if "message" in str(m.get("data", "")) and m.get("level")]

    everything.set_log_level("debug")
    assert not everything.call_tool("toggle-simulated-logging", {}).is_error
    try:
        for _ in range(300):  # first message at once, then one every 5 s
            if simulated():
                break
            threading.Event().wait(0.05)
    finally:
        everything.call_tool("toggle-simulated-logging", {})
    assert simulated()


def test_subscription_receives_updates(everything):
    uri = STATIC[2]
    got = threading.Event()
    seen: list[str] = []
    other: list[str] = []

    def bad(_uri):
        raise RuntimeError("a broken subscriber")

    def good(u):
        seen.append(u)
        got.set()

    s1 = everything.subscribe(uri, bad)
    s2 = everything.subscribe(uri, good)
    s3 = everything.subscribe(STATIC[3], other.append)
    assert not everything.call_tool("toggle-subscriber-updates", {}).is_error
    try:
        assert got.wait(10), "no notifications/resources/updated"
    finally:
        everything.call_tool("toggle-subscriber-updates", {})
        s1.close()
        s2.close()
        s3.close()
    assert seen[0] == uri  # the raising callback harmed nobody


def test_list_changed_callback():
    """server-everything registers its client-feature tools after notifications/initialized
    and announces notifications/tools/list_changed: a callback registered before connecting
    sees it, and one that raises harms no other."""
    cmd = everything_command("stdio")
    seen = threading.Event()
    kinds: list[str] = []

    def bad(kind):
        raise RuntimeError("broken list-changed callback")

    def good(kind):
        kinds.append(kind)
        seen.set()

    c = Client.stdio(cmd[0], cmd[1:], pool=PoolLimits.SINGLE, roots=[{"uri": "file:///tmp", "name": "t"}])
    try:
        c.on_list_changed("tools", bad)
        c.on_list_changed("tools", good)
        assert c.era == "legacy"
        assert seen.wait(10)
        assert kinds[0] == "tools"
        assert "get-roots-list" in {t.name for t in c.list_tools()}
    finally:
        c.close()


def test_url_elicitation_error_path(everything, handlers):
    """-32042: the prerequisite URL goes to the handler (never fetched), then one retry."""
    before = len(handlers.elicitations)
    url = "http://127.0.0.1:9/after-prerequisite"
    r = everything.call_tool("trigger-url-elicitation", {"url": url, "errorPath": True})
    assert not r.is_error and "completed the URL elicitation" in r.text
    shown = [e["url"] for e in handlers.elicitations[before:]]
    assert shown == ["https://modelcontextprotocol.io", url]


def test_cancellation_and_progress():
    """Progress resets the call's timer, the hard cap still ends it, and the timed-out
    call is cancelled (notifications/cancelled); the client keeps working."""
    import dataclasses

    from mcpsync import RequestTimeout, RetryPolicy, Timeouts

    cmd = everything_command("stdio")
    seen: list[float] = []
    timeouts = dataclasses.replace(Timeouts.DEFAULT, progress_cap=2.4)
    with Client.stdio(cmd[0], cmd[1:], pool=PoolLimits.SINGLE, retry=RetryPolicy(retries=0), timeouts=timeouts) as c:
        with pytest.raises(RequestTimeout):
            c.call_tool(
                "trigger-long-running-operation",
                {"duration": 20, "steps": 40},  # progress every 0.5 s
                timeout=1.2,
                progress=lambda p, t, m: seen.append(p),
            )
        # notifications after 1.2 s arrived: the timer had been reset by the earlier ones
        assert len(seen) >= 3
        assert c.call_tool("echo", {"message": "after"}).text == "Echo: after"


def test_subscriptions_restored_after_the_server_restarts():
    """Legacy: the session connection dies (server killed); on the new one the client
    subscribes again by itself, and updates arrive."""
    import os
    import signal

    cmd = everything_command("stdio")
    uri = STATIC[0]
    got = threading.Event()
    with Client.stdio(cmd[0], cmd[1:], pool=PoolLimits.SINGLE) as c:
        c.subscribe(uri, lambda u: got.set())
        pid = c.diagnostics().primary.pid
        os.kill(pid, signal.SIGKILL)
        wait_until(lambda: (p := c.diagnostics().primary) is None or not p.alive or p.pid != pid, 5)
        assert c.call_tool("echo", {"message": "back"}).text == "Echo: back"  # reconnected
        assert wait_until(lambda: c.diagnostics().subscription_restores >= 1, 10)
        assert c.diagnostics().subscription_restores == 1
        c.call_tool("toggle-subscriber-updates", {})
        assert got.wait(10)
