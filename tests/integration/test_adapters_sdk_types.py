"""The LLM adapters' output validated against the providers' own SDK types, offline
(issue 19, item 2).

Tools come from real servers (the npm reference server ``server-everything`` and the
bundled demo server, over stdio); the model's tool calls are built as the SDKs' own
objects; every definition and every tool result is validated with pydantic against
the request-parameter types of ``anthropic``, ``openai`` (Chat Completions and
Responses) and ``google-genai``. No request leaves the machine.
"""

from __future__ import annotations

import sys
from typing import Any

import pytest

from mcpsync import Client
from mcpsync.adapters import ToolAdapter
from tests.conftest import everything_command

pydantic = pytest.importorskip("pydantic")
anthropic_types = pytest.importorskip("anthropic.types")
openai_chat = pytest.importorskip("openai.types.chat")
openai_responses = pytest.importorskip("openai.types.responses")
genai_types = pytest.importorskip("google.genai.types")
from openai.types.responses import response_input_item_param  # noqa: E402

pytestmark = [pytest.mark.timeout(90), pytest.mark.npm]

def _validate(typ: Any, value: Any) -> None:
    """Validate ``value`` against an SDK TypedDict, refusing keys the type does not have."""
    pydantic.TypeAdapter(typ).validate_python(value)
    # pydantic ignores unknown keys of a TypedDict; nested ones are checked by the callers
    hints = typ.__annotations__
    assert set(value) <= set(hints), f"keys {set(value) - set(hints)} are not in {typ.__name__}"


# A call per tool that the servers answer at once (others are only rendered).
EVERYTHING_CALLS = {
    "echo": {"message": "hi"},
    "get-sum": {"a": 1, "b": 2},
    "get-tiny-image": {},
    "get-annotated-message": {"messageType": "success", "includeImage": True},
    "get-resource-links": {"count": 2},
    "get-resource-reference": {"resourceType": "Text", "resourceId": 1},
    "get-structured-content": {"location": "Chicago"},
    "get-env": {},
}
DEMO_CALLS = {"echo": {"message": "hi"}, "add": {"a": 2, "b": 40}, "word_count": {"text": "a b a"}, "fail": {}}


@pytest.fixture(scope="module", params=["everything", "demo"])
def served(request: pytest.FixtureRequest) -> Any:
    if request.param == "everything":
        cmd, calls = everything_command("stdio"), EVERYTHING_CALLS
    else:
        cmd, calls = [sys.executable, "-m", "mcpsync.server.demo"], DEMO_CALLS
    with Client.stdio(cmd[0], cmd[1:]) as client:
        yield client, calls


def test_every_tool_renders_as_each_sdk_expects(served: Any) -> None:
    client, _calls = served
    adapter = ToolAdapter(client)
    names = [t.name for t in client.list_tools()]
    assert len(names) >= 6

    anthropic = adapter.anthropic()
    assert len(anthropic) == len(names)
    for t in anthropic:
        _validate(anthropic_types.ToolParam, t)
    for t in adapter.anthropic(cache_control=True):
        _validate(anthropic_types.ToolParam, t)

    chat = adapter.openai()
    for t in chat:
        _validate(openai_chat.ChatCompletionToolParam, t)
        from openai.types.shared_params import FunctionDefinition

        _validate(FunctionDefinition, t["function"])

    responses = adapter.openai_responses()
    for t in responses:
        _validate(openai_responses.FunctionToolParam, t)
        assert t["strict"] is False  # MCP schemas are not written for OpenAI's strict mode

    gemini = adapter.gemini()
    assert [d["name"] for d in gemini] == [t["name"] for t in anthropic]
    for d in gemini:
        _validate(genai_types.FunctionDeclarationDict, d)
        genai_types.FunctionDeclaration.model_validate(d)  # extra="forbid" in the SDK itself
    tool = genai_types.Tool(function_declarations=gemini)
    assert len(tool.function_declarations or []) == len(names)
    genai_types.GenerateContentConfig(tools=[tool])


def test_tool_results_are_what_each_sdk_accepts(served: Any) -> None:
    client, calls = served
    adapter = ToolAdapter(client)
    adapter.anthropic()
    for i, (name, args) in enumerate([*calls.items(), ("no-such-tool", {})]):
        llm = name if name == "no-such-tool" else adapter.llm_name(name)

        use = anthropic_types.ToolUseBlock(type="tool_use", id=f"toolu_{i}", name=llm, input=args)
        block = adapter.run_anthropic(use)
        _validate(anthropic_types.ToolResultBlockParam, block)
        for part in block["content"]:
            _validate(anthropic_types.ImageBlockParam if part["type"] == "image" else anthropic_types.TextBlockParam, part)
        if name in ("no-such-tool", "fail"):
            assert block["is_error"] is True

        import json

        call = openai_chat.ChatCompletionMessageFunctionToolCall(id=f"call_{i}", type="function", function={"name": llm, "arguments": json.dumps(args)})
        _validate(openai_chat.ChatCompletionToolMessageParam, adapter.run_openai(call))

        item = openai_responses.ResponseFunctionToolCall(type="function_call", call_id=f"call_{i}", name=llm, arguments=json.dumps(args))
        _validate(response_input_item_param.FunctionCallOutput, adapter.run_responses(item))

        fc = genai_types.FunctionCall(id=f"fc_{i}", name=llm, args=args)
        answer = adapter.run_gemini(fc)
        _validate(genai_types.FunctionResponseDict, answer)
        genai_types.FunctionResponse.model_validate(answer)
        genai_types.Part(function_response=answer)
        genai_types.Content(role="user", parts=[genai_types.Part(function_response=answer)])
        assert answer["name"] == llm and answer["id"] == f"fc_{i}"
        if name in ("no-such-tool", "fail"):
            assert set(answer["response"]) == {"error"}
        else:
            assert set(answer["response"]) == {"output"}


def test_an_image_result_is_an_anthropic_image_block(served: Any) -> None:
    client, calls = served
    if "get-tiny-image" not in calls:
        pytest.skip("the demo server has no image tool")
    adapter = ToolAdapter(client)
    use = anthropic_types.ToolUseBlock(type="tool_use", id="toolu_img", name=adapter.llm_name("get-tiny-image"), input={})
    block = adapter.run_anthropic(use)
    kinds = [p["type"] for p in block["content"]]
    assert "image" in kinds
    image = next(p for p in block["content"] if p["type"] == "image")
    _validate(anthropic_types.ImageBlockParam, image)
    _validate(anthropic_types.Base64ImageSourceParam, image["source"])
