"""The protocol surface against servers written with the official `mcp` SDK 2.3.0
(MCPServer, stdio), in both eras: the same client API whether the server speaks
2026-07-28 (MRTR, subscriptions/listen, per-request _meta) or 2025-11-25 (server→client
requests, resources/subscribe, logging/setLevel).

Tests whose server-side trigger and client-side stream must meet in one server process
(subscriptions, list_changed) use a SINGLE pool: each pooled stdio connection is its own
server process.
"""

from __future__ import annotations

import threading

import pytest

from mcpsync import (
    Client,
    InputRequestError,
    OutputSchemaError,
    PoolLimits,
    RemoteError,
    ResourceNotFound,
    TextContent,
)
from tests.conftest import server_command
from tests.helpers import wait_until

pytestmark = pytest.mark.timeout(60)

MODES = ["modern", "legacy"]


class Handlers:
    def __init__(self) -> None:
        self.calls: list[tuple[str, dict]] = []
        self.logs: list[dict] = []
        self.block = threading.Event()

    def elicit(self, params):
        self.calls.append(("elicit", params))
        return {"action": "accept", "content": {"name": "Grace"}}  # "excited" left to its default

    def sample(self, params):
        self.calls.append(("sample", params))
        return {"role": "assistant", "content": {"type": "text", "text": "beep"}, "model": "tiny", "stopReason": "endTurn"}


def _client(mode, handlers=None, **kw):
    cmd = server_command("sdk_protocol_server.py")
    if handlers is not None:
        kw.setdefault("elicitation_handler", handlers.elicit)
        kw.setdefault("sampling_handler", handlers.sample)
        kw.setdefault("roots", [{"uri": "file:///srv/data", "name": "data"}])
        kw.setdefault("logging_handler", handlers.logs.append)
    return Client.stdio(cmd[0], cmd[1:], mode=mode, **kw)


@pytest.fixture(scope="module", params=MODES)
def sdk(request):
    h = Handlers()
    with _client(request.param, h, pool=PoolLimits.SINGLE) as c:
        assert c.era == request.param
        yield c, h


# ------------------------------------------------------------------ resources, prompts, completion


def test_resources(sdk):
    c, _ = sdk
    listed = {r.uri: r for r in c.list_resources()}
    assert set(listed) == {"test://greeting", "test://blob"}
    assert listed["test://greeting"].title == "Greeting" and listed["test://greeting"].mime_type == "text/plain"
    templates = [t.uri_template for t in c.list_resource_templates()]
    assert templates == ["test://items/{item_id}", "test://secret/{name}"]
    assert c.read_resource("test://greeting").text == "hello from the SDK server"
    assert c.read_resource("test://blob").blob == bytes(range(8))
    assert c.read_resource("test://items/42").text == "item 42"


def test_resource_not_found(sdk):
    c, _ = sdk
    with pytest.raises(ResourceNotFound) as info:
        c.read_resource("test://missing")
    assert info.value.code in (-32602, -32002)
    assert c.read_resource("test://greeting").text


def test_prompts(sdk):
    c, _ = sdk
    prompts = {p.name: p for p in c.list_prompts()}
    assert set(prompts) == {"review", "guarded"}
    p = prompts["review"]
    assert p.title == "Code review"
    assert [(a.name, a.required) for a in p.arguments] == [("code", True), ("language", False)]
    r = c.get_prompt("review", {"code": "print(1)", "language": "rust"})
    assert r.messages[0].role == "user" and isinstance(r.messages[0].content, TextContent)
    assert r.text == "Please review this rust:\nprint(1)"


def test_completion(sdk):
    c, _ = sdk
    p = next(p for p in c.list_prompts() if p.name == "review")
    assert c.complete(p, ("language", "p")).values == ["python", "perl", "php"]
    t = next(t for t in c.list_resource_templates() if "items" in t.uri_template)
    assert c.complete(t, ("item_id", ""), context={"prefix": "x"}).values == ["x1", "x2", "x3"]


# ------------------------------------------------------------------ client features (MRTR / server requests)


def test_elicitation(sdk):
    c, h = sdk
    r = c.call_tool("greet", {})
    assert not r.is_error, r.text
    assert r.text == "Hello, Grace!"  # excited: the schema default (True) was filled in
    kind, params = h.calls[-1]
    assert kind == "elicit" and params["message"] == "What is your name?"


def test_sampling(sdk):
    c, h = sdk
    r = c.call_tool("sample", {})
    assert r.text == "model tiny said: beep"
    assert h.calls[-1][0] == "sample" and h.calls[-1][1]["maxTokens"] == 20


def test_roots(sdk):
    c, _ = sdk
    assert c.call_tool("roots", {}).text == "file:///srv/data"


def test_mrtr_on_resources_read_and_prompts_get():
    asked: list[dict] = []

    def elicit(params):
        asked.append(params)
        return {"action": "accept", "content": {"password": "hunter2"}}

    with _client("modern", elicitation_handler=elicit) as c:
        assert c.read_resource("test://secret/alice").text == "secret of alice, unlocked with hunter2 (remember=False)"
        assert c.get_prompt("guarded", {"topic": "tea"}).text == "talk about tea, password hunter2"
    assert [a["message"] for a in asked] == ["Password?", "Password?"]


def test_mrtr_request_state_unchanged_new_ids():
    with _client("modern", pool=PoolLimits.SINGLE) as c:  # the tool keeps its record per process
        r = c.call_tool("rounds", {})
    assert r.text == "states=[None, 's0', 's1'] distinct_ids=3"


def test_mrtr_rounds_bounded():
    with _client("modern") as c:
        c.max_input_rounds = 3
        with pytest.raises(InputRequestError, match="after 3 rounds"):
            c.call_tool("forever", {})
        assert c.read_resource("test://greeting").text  # keeps working


# ------------------------------------------------------------------ handlers that fail


@pytest.mark.parametrize("mode", MODES)
def test_undeclared_capability(mode):
    with _client(mode) as c:  # no sampling handler: no sampling capability
        assert "sampling" not in c.client_capabilities()
        if mode == "legacy":
            r = c.call_tool("raw_sample", {})
            assert r.text.startswith("error -32601:"), r.text
        else:
            with pytest.raises(InputRequestError) as info:
                c.call_tool("raw_sample", {})
            assert info.value.code == -32601
        with pytest.raises(RemoteError) as refused:  # the SDK itself checks before asking
            c.call_tool("roots", {})
        assert refused.value.code == -32021  # missing required client capability
        assert c.read_resource("test://greeting").text


@pytest.mark.parametrize("mode", MODES)
def test_handler_raises(mode):
    def boom(params):
        raise RuntimeError("handler exploded")

    with _client(mode, sampling_handler=boom) as c:
        if mode == "legacy":
            r = c.call_tool("raw_sample", {})
            assert r.text.startswith("error -32603:") and "handler exploded" in r.text
        else:
            with pytest.raises(InputRequestError, match="handler exploded") as info:
                c.call_tool("raw_sample", {})
            assert info.value.code == -32603
        assert c.read_resource("test://greeting").text


@pytest.mark.parametrize("mode", MODES)
def test_handler_blocks_past_timeout(mode):
    release = threading.Event()

    def stuck(params):
        release.wait(10)
        return {"role": "assistant", "content": {"type": "text", "text": "late"}, "model": "m"}

    with _client(mode, sampling_handler=stuck) as c:
        c.handler_timeout = 0.3
        try:
            if mode == "legacy":
                r = c.call_tool("raw_sample", {})
                assert r.text.startswith("error -32001:"), r.text
            else:
                with pytest.raises(InputRequestError) as info:
                    c.call_tool("raw_sample", {})
                assert info.value.code == -32001
            assert c.read_resource("test://greeting").text
        finally:
            release.set()


# ------------------------------------------------------------------ tool details


def test_tool_details(sdk):
    c, _ = sdk
    tools = {t.name: t for t in c.list_tools()}
    w = tools["weather"]
    assert w.title == "Weather"
    assert w.annotations.read_only_hint is True and w.annotations.open_world_hint is False
    assert w.meta == {"example.com/tier": "gold"}
    [icon] = w.icons
    assert icon.mime_type == "image/png" and icon.sizes == ["16x16"] and icon.src.startswith("data:image/png")
    assert w.output_schema["required"] == ["temperature", "conditions"]
    r = c.call_tool("weather", {"city": "Oslo"})
    assert r.structured_content == {"temperature": 21.5, "conditions": "sunny in Oslo"}


def test_output_schema_mismatch(sdk):
    c, _ = sdk
    with pytest.raises(OutputSchemaError) as info:
        c.call_tool("lying", {})
    assert info.value.path == "/temperature" and info.value.tool == "lying"
    raw = c.call_tool("lying", {}, validate=False)  # unless asked not to
    assert raw.structured_content == {"temperature": "hot"}


def test_is_error_is_a_result(sdk):
    c, _ = sdk
    r = c.call_tool("broken", {})
    assert r.is_error and "broken" in r.text


# ------------------------------------------------------------------ logging


def test_logging(sdk):
    c, h = sdk
    c.set_log_level("info")
    h.logs.clear()
    assert c.call_tool("log_things", {}).text == "logged"
    for _ in range(100):
        if len(h.logs) >= 2:
            break
        threading.Event().wait(0.02)
    datas = [m["data"] for m in h.logs]
    assert "an info line" in datas and {"what": "an error"} in datas
    assert "a debug line" not in datas  # below the level asked for
    assert all(m.get("logger") == "tests" for m in h.logs)


def test_default_logging_per_server(caplog):
    with _client("legacy", name="sdk-log") as c:
        c.set_log_level("error")
        with caplog.at_level("DEBUG", logger="mcpsync.server.sdk-log"):
            c.call_tool("log_things", {})
            for _ in range(100):
                if any(r.name.startswith("mcpsync.server.sdk-log") for r in caplog.records):
                    break
                threading.Event().wait(0.02)
    recs = [r for r in caplog.records if r.name.startswith("mcpsync.server.sdk-log")]
    assert recs and recs[0].levelname == "ERROR" and recs[0].name == "mcpsync.server.sdk-log.tests"


# ------------------------------------------------------------------ subscriptions


def test_subscribe_and_list_changed(sdk):
    c, _ = sdk
    updated = threading.Event()
    changed = threading.Event()
    uris: list[str] = []
    kinds: list[str] = []

    def bad(_):
        raise RuntimeError("broken subscriber")

    def on_update(u):
        uris.append(u)
        updated.set()

    def on_change(k):
        kinds.append(k)
        if {"tools", "prompts", "resources"} <= set(kinds):
            changed.set()

    sub_bad = c.subscribe("test://greeting", bad)
    sub = c.subscribe("test://greeting", on_update)
    for kind in ("tools", "prompts", "resources"):
        c.on_list_changed(kind, on_change)
    try:
        c.call_tool("touch", {"uri": "test://blob"})  # not subscribed: nothing arrives
        c.call_tool("touch", {"uri": "test://greeting"})
        assert updated.wait(10)
        c.call_tool("change_lists", {})
        assert changed.wait(10)
    finally:
        sub_bad.close()
        sub.close()
        for kind in ("tools", "prompts", "resources"):
            c.remove_list_changed(kind, on_change)
    assert uris == ["test://greeting"]

    # after unsubscribing, updates stop reaching the callback
    c.call_tool("touch", {"uri": "test://greeting"})
    c.read_resource("test://greeting")  # a round trip after the touch
    assert uris == ["test://greeting"]


def test_relisten_after_stream_ends():
    """Modern era: a listen stream that ends (here: its timeout) is opened again."""
    with _client("modern", pool=PoolLimits.SINGLE) as c:
        c.listen_timeout = 0.5
        got = threading.Event()
        c.subscribe("test://greeting", lambda u: got.set())

        def acks_reach(n):
            return wait_until(lambda: c.diagnostics().listen_acks >= n, 10)

        assert acks_reach(2)  # the first stream ended and a second one was acknowledged
        c.listen_timeout = 60.0
        assert acks_reach(3)  # this one stays open for the touch below
        c.call_tool("touch", {"uri": "test://greeting"})
        assert got.wait(10)


# ------------------------------------------------------------------ progress + cancellation


@pytest.mark.parametrize("mode", MODES)
def test_progress_and_cancellation_reach_the_server(mode):
    from mcpsync import RequestTimeout, RetryPolicy

    with _client(mode, pool=PoolLimits.SINGLE, retry=RetryPolicy(retries=0)) as c:
        seen: list[tuple] = []
        r = c.call_tool("slow", {"steps": 3}, progress=lambda p, t, m: seen.append((p, t, m)), timeout=10)
        assert r.text == "done 3"
        for _ in range(100):
            if len(seen) == 3:
                break
            threading.Event().wait(0.02)
        assert seen == [(1, 3, "step 1"), (2, 3, "step 2"), (3, 3, "step 3")]

        with pytest.raises(RequestTimeout):
            c.call_tool("slow", {"steps": 200}, timeout=0.3)  # no progress callback: the timer is not reset
        for _ in range(100):
            n = c.call_tool("cancelled_calls", {}).structured_content["result"]
            if n:
                break
            threading.Event().wait(0.05)
        assert n == 1


def _listen_threads(name):
    return [t for t in threading.enumerate() if t.name == f"mcpsync-listen-{name}" and t.is_alive()]


def test_modern_streams_replaced_and_ended():
    """Each change of the subscription set replaces the listen stream; replaced streams
    end (their threads exit), and unsubscribing everything ends the last one."""
    with _client("modern", pool=PoolLimits.SINGLE, name="listen-ends") as c:
        subs = [c.subscribe(f"test://items/{i}", lambda u: None) for i in range(3)]
        for _ in range(200):
            if len(_listen_threads("listen-ends")) == 1:
                break
            threading.Event().wait(0.025)
        assert len(_listen_threads("listen-ends")) == 1
        for s in subs:
            s.close()
        for _ in range(200):
            if not _listen_threads("listen-ends"):
                break
            threading.Event().wait(0.025)
        assert not _listen_threads("listen-ends")
        assert c.read_resource("test://greeting").text


def test_subscribe_from_a_callback():
    """A callback (on the worker's event lane) may subscribe; it must not wait on itself."""
    with _client("modern", pool=PoolLimits.SINGLE) as c:
        updated = threading.Event()
        done = threading.Event()

        def on_tools_changed(kind):
            c.subscribe("test://blob", lambda u: updated.set())
            done.set()

        c.connect()
        c.on_list_changed("tools", on_tools_changed)  # connected: returns once acknowledged
        c.call_tool("change_lists", {})
        assert done.wait(10)
        wait_until(lambda: (d := c.diagnostics()).listen_acks >= 2 and d.listen_acknowledged, 10)
        c.call_tool("touch", {"uri": "test://blob"})
        assert updated.wait(10)


def test_modern_relisten_after_the_server_dies():
    import os
    import signal

    with _client("modern", pool=PoolLimits.SINGLE) as c:
        got = threading.Event()
        c.subscribe("test://greeting", lambda u: got.set())
        d = c.diagnostics()
        assert d.listen_acks == 1
        os.kill(d.primary.pid, signal.SIGKILL)
        # the listen thread reconnects and listens again
        assert wait_until(lambda: c.diagnostics().listen_acks >= 2, 10)
        c.call_tool("touch", {"uri": "test://greeting"})
        assert got.wait(10)


@pytest.mark.parametrize("mode", MODES)
def test_roots_provider_and_set_roots(mode):
    current = ["file:///one"]
    with _client(mode, roots=lambda: [{"uri": u} for u in current]) as c:
        caps = c.client_capabilities()
        assert caps == {"roots": {"listChanged": True}, "extensions": caps["extensions"]}  # only what was given
        assert c.call_tool("roots", {}).text == "file:///one"
        current.append("file:///two")  # a provider is asked every time
        assert c.call_tool("roots", {}).text == "file:///one,file:///two"
        c.set_roots([{"uri": "file:///static", "name": "s"}])  # legacy: roots/list_changed is sent
        assert c.call_tool("roots", {}).text == "file:///static"


def test_concurrent_subscribers_modern():
    """Threads subscribing and unsubscribing at once: every subscribe returns
    acknowledged, the last unsubscribe ends the stream, nothing is left behind."""
    errors: list[BaseException] = []
    with _client("modern", pool=PoolLimits.SINGLE, name="concurrent-subs") as c:
        c.connect()

        def worker(i):
            try:
                for j in range(3):
                    with c.subscribe(f"test://items/{i}-{j}", lambda u: None):
                        assert f"test://items/{i}-{j}" in c.diagnostics().subscriptions
            except BaseException as exc:  # reported below
                errors.append(exc)

        threads = [threading.Thread(target=worker, args=(i,)) for i in range(4)]
        for t in threads:
            t.start()
        for t in threads:
            t.join(30)
        assert not errors and not any(t.is_alive() for t in threads)
        d = c.diagnostics()
        assert not d.subscriptions and not d.listening
        for _ in range(200):
            if not _listen_threads("concurrent-subs"):
                break
            threading.Event().wait(0.025)
        assert not _listen_threads("concurrent-subs")
        assert c.read_resource("test://greeting").text
