"""The shared conversion of mcpsync.integrations (issue 34): pure parts, on a Local
registry (no process): specs keep the schema, names in both styles, outputs never raise."""

from __future__ import annotations

import pytest

from mcpsync import Client, agent_message
from mcpsync._errors import ToolNotFound
from mcpsync.integrations import Toolbox, inline_refs
from mcpsync.server import Registry

DEFS = {"P": {"type": "object", "properties": {"x": {"type": "number"}, "next": {"$ref": "#/$defs/P"}}}}


def test_inline_refs_keeps_siblings_and_bounds_recursion() -> None:
    out = inline_refs({"$ref": "#/$defs/P", "description": "a point"}, DEFS)
    assert out["description"] == "a point" and out["properties"]["x"] == {"type": "number"}
    depth, node = 0, out
    while "properties" in node and "next" in node["properties"]:
        node, depth = node["properties"]["next"], depth + 1
    assert 10 <= depth <= 20 and node.get("$ref") == "#/$defs/P"  # a recursive schema stops, unresolved
    own = inline_refs({"type": "object", "properties": {"p": {"$ref": "#/$defs/P"}}, "$defs": DEFS})
    assert "$defs" not in own and own["properties"]["p"]["type"] == "object"
    assert inline_refs({"$ref": "#/$defs/Missing"}, {}) == {"$ref": "#/$defs/Missing"}


@pytest.fixture
def client() -> Client:
    reg = Registry("box")

    @reg.tool(name="get-sum")
    def get_sum(a: int, b: int = 2) -> int:
        """Add."""
        return a + b

    @reg.tool(name="class")
    def klass() -> str:
        """A keyword as a name."""
        return "ok"

    return Client.local(reg)


def test_specs_keep_the_schema_and_names_fit_each_style(client: Client) -> None:
    with client:
        provider = {s.name: s for s in Toolbox(client).specs()}
        ident = {s.name: s for s in Toolbox(client, names="identifier").specs()}
        assert set(provider) == {"get-sum", "class"}
        assert set(ident) == {"get_sum", "t_class"}
        spec = provider["get-sum"]
        assert spec.required == ("a",) and spec.parameters["properties"]["b"]["default"] == 2
        assert spec.tool == "get-sum" and ident["get_sum"].tool == "get-sum"
        box = Toolbox(client, names="identifier")
        assert box.specs() is box.specs()  # unchanged tools: the same list
        assert box.call("get_sum", {"a": 1}).structured == {"result": 3}
        assert box.call("t_class", "{}").text == "ok"


def test_call_never_raises(client: Client) -> None:
    with client:
        box = Toolbox(client)
        missing = box.call("nope", {})
        assert missing.is_error and isinstance(missing.error, ToolNotFound)
        assert missing.text == agent_message(ToolNotFound("x"), tool="nope")
        bad = box.call("get-sum", "{not json")
        assert bad.is_error and "arguments" in bad.text
