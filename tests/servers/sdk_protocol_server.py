"""An official-SDK (`mcp` 2.3.0, MCPServer) server with the whole protocol surface:
resources (text, blob, template), prompts, completion, logging, subscriptions in both
eras, and tools that need client input (elicitation, sampling, roots) through
`Resolve(...)` markers — a server→client request in the legacy era, an
`InputRequiredResult` (MRTR) in the modern era.

Usage: sdk_protocol_server.py [http PORT]   (stdio by default; both eras)
"""

from __future__ import annotations

import warnings
from typing import Annotated, Any

from mcp.server.mcpserver import Context, Elicit, Icon, ListRoots, MCPServer, RequestStateSecurity, Resolve, Sample
from mcp.shared.exceptions import MCPError
from mcp_types import (
    CallToolResult,
    CreateMessageRequest,
    CreateMessageRequestParams,
    ElicitRequest,
    ElicitRequestFormParams,
    InputRequiredResult,
    Completion,
    CreateMessageResult,
    ListRootsResult,
    SamplingMessage,
    SubscribeRequestParams,
    TextContent,
    ToolAnnotations,
    UnsubscribeRequestParams,
    SetLevelRequestParams,
)
from pydantic import BaseModel

warnings.simplefilter("ignore")

# One shared key, as a multi-instance deployment must have: a client's connection pool
# runs several of these processes, and an MRTR retry may reach another one.
server = MCPServer(
    "sdk-protocol-server",
    instructions="The protocol surface, for mcpsync tests.",
    request_state_security=RequestStateSecurity(keys=[b"mcpsync-tests-shared-request-state-key"]),
)

LEGACY_SUBSCRIBED: set[str] = set()
LEVEL: dict[str, str] = {}


def _legacy(ctx: Context) -> bool:
    v = ctx.protocol_version
    return v is not None and v < "2026"


# ------------------------------------------------------------------ resources


@server.resource("test://greeting", title="Greeting", mime_type="text/plain")
def greeting() -> str:
    """A static text resource."""
    return "hello from the SDK server"


@server.resource("test://blob", mime_type="application/octet-stream")
def blob() -> bytes:
    """A static binary resource."""
    return bytes(range(8))


@server.resource("test://items/{item_id}", mime_type="text/plain")
def item(item_id: str) -> str:
    """A templated resource."""
    return f"item {item_id}"


# ------------------------------------------------------------------ prompts + completion


@server.prompt(title="Code review")
def review(code: str, language: str = "python") -> str:
    """Ask for a code review."""
    return f"Please review this {language}:\n{code}"


@server.completion()
async def complete(ref: Any, argument: Any, context: Any) -> Completion | None:
    langs = ["python", "perl", "php", "rust", "ruby"]
    if argument.name == "language":
        return Completion(values=[x for x in langs if x.startswith(argument.value)], has_more=False)
    if argument.name == "item_id":
        prefix = (context.arguments or {}).get("prefix", "") if context else ""
        return Completion(values=[f"{prefix}{i}" for i in ("1", "2", "3") if i.startswith(argument.value)])
    return None


# ------------------------------------------------------------------ tools needing client input


class Name(BaseModel):
    name: str
    excited: bool = True


def ask_name() -> Elicit[Name]:
    return Elicit("What is your name?", Name)


@server.tool()
def greet(who: Annotated[Name, Resolve(ask_name)]) -> str:
    """Greets whoever the client says it is (elicitation)."""
    return f"Hello, {who.name}{'!' if who.excited else '.'}"


def ask_model() -> Sample:
    return Sample([SamplingMessage(role="user", content=TextContent(type="text", text="Say something"))], max_tokens=20)


@server.tool()
def sample(reply: Annotated[CreateMessageResult, Resolve(ask_model)]) -> str:
    """Asks the client's model (sampling) and returns what it said."""
    content = reply.content
    return f"model {reply.model} said: {getattr(content, 'text', content)}"


def ask_roots() -> ListRoots:
    return ListRoots()


@server.tool()
def roots(listed: Annotated[ListRootsResult, Resolve(ask_roots)]) -> str:
    """Lists the client's roots."""
    return ",".join(str(r.uri) for r in listed.roots)


# ------------------------------------------------------------------ hand-rolled MRTR (modern era)

ROUNDS: dict[str, list] = {"states": [], "ids": []}


@server.tool()
async def rounds(ctx: Context) -> InputRequiredResult | str:
    """Asks for nothing but comes back twice: requestState s0, s1, then done."""
    state = ctx.request_state
    ROUNDS["states"].append(state)
    ROUNDS["ids"].append(ctx.request_id)
    n = 0 if state is None else int(state[1:]) + 1
    if n < 2:
        return InputRequiredResult(request_state=f"s{n}")
    seen, ids = ROUNDS["states"][-3:], ROUNDS["ids"][-3:]
    return f"states={seen} distinct_ids={len(set(ids))}"


@server.tool()
async def forever(ctx: Context) -> InputRequiredResult | str:
    """Never finishes: always input_required."""
    return InputRequiredResult(request_state="again")


@server.tool()
async def raw_sample(ctx: Context) -> InputRequiredResult | str:
    """Asks for sampling whether or not the client declared it.

    Legacy: a plain server→client request (the client's error code comes back as text).
    Modern: an InputRequiredResult carrying the sampling request.
    """
    if _legacy(ctx):
        try:
            res = await ctx.session.send_request(
                CreateMessageRequest(
                    method="sampling/createMessage",
                    params=CreateMessageRequestParams(
                        messages=[SamplingMessage(role="user", content=TextContent(type="text", text="hi"))],
                        max_tokens=5,
                    ),
                ),
                CreateMessageResult,
            )
        except MCPError as exc:
            return f"error {exc.error.code}: {exc.error.message}"
        return f"sampled: {res.content.text}"
    answers = ctx.input_responses or {}
    if "s" in answers:
        return f"sampled: {answers['s'].content.text}"
    return InputRequiredResult(
        input_requests={
            "s": CreateMessageRequest(
                method="sampling/createMessage",
                params=CreateMessageRequestParams(
                    messages=[SamplingMessage(role="user", content=TextContent(type="text", text="hi"))], max_tokens=5
                ),
            )
        },
        request_state="raw",
    )


# ------------------------------------------------------------------ MRTR on resources/read and prompts/get


def _ask_password(key: str) -> InputRequiredResult:
    return InputRequiredResult(
        input_requests={
            key: ElicitRequest(
                method="elicitation/create",
                params=ElicitRequestFormParams(
                    mode="form",
                    message="Password?",
                    requested_schema={
                        "type": "object",
                        "properties": {"password": {"type": "string"}, "remember": {"type": "boolean", "default": False}},
                        "required": ["password"],
                    },
                ),
            )
        },
        request_state=f"asked-{key}",
    )


@server.resource("test://secret/{name}", mime_type="text/plain")
async def secret(name: str, ctx: Context) -> InputRequiredResult | str:
    """A templated resource that asks for a password first (modern era)."""
    answer = (ctx.input_responses or {}).get("pw")
    if answer is None:
        return _ask_password("pw")
    return f"secret of {name}, unlocked with {answer.content['password']} (remember={answer.content['remember']})"


@server.prompt()
async def guarded(topic: str, ctx: Context) -> InputRequiredResult | str:
    """A prompt that asks for a password first (modern era)."""
    answer = (ctx.input_responses or {}).get("pw2")
    if answer is None:
        return _ask_password("pw2")
    return f"talk about {topic}, password {answer.content['password']}"


# ------------------------------------------------------------------ events


@server.tool()
async def touch(uri: str, ctx: Context) -> str:
    """Announce that a resource changed (to subscribers, in either era)."""
    if _legacy(ctx):
        if uri in LEGACY_SUBSCRIBED:
            await ctx.session.send_resource_updated(uri)
    else:
        await ctx.notify_resource_updated(uri)
    return "touched"


@server.tool()
async def change_lists(ctx: Context) -> str:
    """Announce that the tool, prompt and resource lists changed."""
    if _legacy(ctx):
        await ctx.session.send_tool_list_changed()
        await ctx.session.send_prompt_list_changed()
        await ctx.session.send_resource_list_changed()
    else:
        await ctx.notify_tools_changed()
        await ctx.notify_prompts_changed()
        await ctx.notify_resources_changed()
    return "changed"


@server.tool()
async def log_things(ctx: Context) -> str:
    """Send a debug, an info and an error log message.

    Modern era: the SDK filters by the request's `_meta` logLevel. Legacy era: this
    server filters by the level `logging/setLevel` asked for.
    """
    order = ["debug", "info", "notice", "warning", "error", "critical", "alert", "emergency"]
    floor = order.index(LEVEL.get("level", "debug")) if _legacy(ctx) else 0
    for level, data in (("debug", "a debug line"), ("info", "an info line"), ("error", {"what": "an error"})):
        if order.index(level) >= floor:
            await ctx.log(level, data, logger_name="tests")
    return "logged"


# ------------------------------------------------------------------ progress + cancellation

CANCELLED: list[str] = []


@server.tool()
async def slow(steps: int, ctx: Context) -> str:
    """Reports progress every 0.1 s for `steps` steps; records a cancellation."""
    import anyio

    try:
        for i in range(steps):
            await ctx.report_progress(i + 1, steps, f"step {i + 1}")
            await anyio.sleep(0.1)
    except anyio.get_cancelled_exc_class():
        CANCELLED.append(ctx.request_id)
        raise
    return f"done {steps}"


@server.tool()
def cancelled_calls() -> int:
    """How many `slow` calls were cancelled."""
    return len(CANCELLED)


# ------------------------------------------------------------------ tool details


class Weather(BaseModel):
    temperature: float
    conditions: str


@server.tool(
    title="Weather",
    icons=[Icon(src="data:image/png;base64,iVBORw0KGgo=", mime_type="image/png", sizes=["16x16"])],
    annotations=ToolAnnotations(read_only_hint=True, open_world_hint=False),
    meta={"example.com/tier": "gold"},
)
def weather(city: str) -> Weather:
    """Structured output that matches its schema."""
    return Weather(temperature=21.5, conditions=f"sunny in {city}")


@server.tool()
def lying() -> CallToolResult:
    """Structured output that does NOT match the schema it advertises."""
    return CallToolResult(content=[TextContent(type="text", text="oops")], structured_content={"temperature": "hot"})


_lying = server._tool_manager.get_tool("lying")
_lying.fn_metadata.output_schema = {  # advertised, not validated by the SDK
    "type": "object",
    "properties": {"temperature": {"type": "number"}, "conditions": {"type": "string"}},
    "required": ["temperature", "conditions"],
}


@server.tool()
def broken() -> str:
    """Fails: an isError result, not a protocol error."""
    raise ValueError("broken on purpose")


# ------------------------------------------------------------------ legacy subscribe / setLevel


async def _subscribe(ctx: Any, params: SubscribeRequestParams) -> dict:
    LEGACY_SUBSCRIBED.add(str(params.uri))
    return {}


async def _unsubscribe(ctx: Any, params: UnsubscribeRequestParams) -> dict:
    LEGACY_SUBSCRIBED.discard(str(params.uri))
    return {}


async def _set_level(ctx: Any, params: SetLevelRequestParams) -> dict:
    LEVEL["level"] = params.level
    return {}


server._lowlevel_server.add_request_handler("resources/subscribe", SubscribeRequestParams, _subscribe)
server._lowlevel_server.add_request_handler("resources/unsubscribe", UnsubscribeRequestParams, _unsubscribe)
server._lowlevel_server.add_request_handler("logging/setLevel", SetLevelRequestParams, _set_level)


if __name__ == "__main__":
    import sys

    if len(sys.argv) > 2 and sys.argv[1] == "http":
        server.run("streamable-http", host="127.0.0.1", port=int(sys.argv[2]))
    else:
        server.run("stdio")
