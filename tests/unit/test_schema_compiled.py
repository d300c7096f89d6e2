"""outputSchema checks through compiled validators: the cache, the jsonschema fallback,
messages and outcomes identical to jsonschema's, and many threads on one new schema."""

from __future__ import annotations

import copy
import threading

import fastjsonschema
import jsonschema
import pytest

from mcpsync import _schema
from mcpsync._schema import OutputSchemaError, validate_output, validator_kind

OBJ = {
    "type": "object",
    "properties": {
        "n": {"type": "integer", "minimum": 0},
        "name": {"type": "string", "pattern": "^[a-z]+$", "format": "email"},
        "flag": {"enum": [1, "one", None]},
        "tags": {"type": "array", "items": {"type": "string"}, "uniqueItems": True, "maxItems": 3},
        "kind": {"const": {"a": 1}},
        "ratio": {"type": "number", "exclusiveMaximum": 1},
    },
    "required": ["n"],
    "additionalProperties": False,
    "if": {"properties": {"n": {"const": 0}}},
    "then": {"required": ["name"]},
}

VALUES = [
    {"n": 1},
    {"n": 1.0},  # an integer to JSON Schema
    {"n": True},  # not an integer
    {"n": -1},
    {"n": 0},  # then: name required
    {"n": 0, "name": "abc"},
    {"n": 1, "name": "abc\n"},  # Python's $ matches before a final newline
    {"n": 1, "name": "ABC"},
    {"n": 1, "flag": True},  # True is not 1
    {"n": 1, "flag": 1.0},
    {"n": 1, "tags": ["a", "a"]},
    {"n": 1, "tags": ["a", 2]},
    {"n": 1, "tags": ["a", "b", "c", "d"]},
    {"n": 1, "kind": {"a": True}},
    {"n": 1, "kind": {"a": 1.0}},
    {"n": 1, "ratio": 1},
    {"n": 1, "ratio": 0.5},
    {"n": 1, "extra": 1},
    [],
    "text",
    None,
]


def _reference(schema, value, tool="t"):
    """What the check said before compiled validators: jsonschema alone, same wording."""
    cls = jsonschema.validators.validator_for(schema, default=jsonschema.Draft202012Validator)
    error = next(iter(cls(schema).iter_errors(value)), None)
    if error is None:
        return None
    path = "/" + "/".join(str(p) for p in error.absolute_path) if error.absolute_path else ""
    return (
        f"tool {tool!r} returned structuredContent that does not match its outputSchema"
        f"{' at ' + path if path else ''}: {error.message}",
        path,
    )


def _ours(schema, value, tool="t"):
    try:
        validate_output(schema, value, tool=tool)
    except OutputSchemaError as exc:
        return str(exc), exc.path
    return None


@pytest.mark.parametrize("value", [v for v in VALUES if v is not None])
def test_outcome_and_message_match_jsonschema(value):
    schema = copy.deepcopy(OBJ)
    assert validator_kind(schema) == "fastjsonschema"
    assert _ours(schema, value) == _reference(schema, value)


def test_data_and_schema_left_alone():
    schema = {"$defs": {"n": {"type": "integer", "default": 5}}, "type": "object",
              "properties": {"n": {"$ref": "#/$defs/n"}, "m": {"type": "string", "default": "x"}}}
    before = copy.deepcopy(schema)
    value: dict = {}
    assert validator_kind(schema) == "fastjsonschema"
    validate_output(schema, value)
    assert value == {} and schema == before  # no defaults filled in, no $ref rewritten


def test_compiled_once_and_reused(monkeypatch):
    calls = []
    real = fastjsonschema.compile
    monkeypatch.setattr(fastjsonschema, "compile", lambda *a, **k: calls.append(1) or real(*a, **k))
    schema = {"type": "object", "properties": {"n": {"type": "integer"}}}
    for _ in range(5):
        validate_output(schema, {"n": 1})
    assert validator_kind(schema) == "fastjsonschema" and len(calls) == 1
    twin = dict(schema)  # an equal but distinct object gets its own entry
    validate_output(twin, {"n": 2})
    assert len(calls) == 2


def test_cache_is_bounded():
    schemas = [{"type": "object", "minProperties": i % 3} for i in range(_schema._MAX_CACHED + 40)]
    for s in schemas:
        validate_output(s, {"a": 1, "b": 2})
    assert len(_schema._cache) <= _schema._MAX_CACHED
    assert _schema._cache[id(schemas[-1])].schema is schemas[-1]  # the newest stays


@pytest.mark.parametrize(
    "schema, good, bad",
    [
        ({"type": "array", "prefixItems": [{"type": "integer"}], "items": False}, [1], [1, 2]),
        ({"$defs": {"n": {"type": "integer"}}, "properties": {"n": {"$ref": "#/$defs/n", "minimum": 3}}},
         {"n": 3}, {"n": 1}),  # $ref with a sibling: both apply in 2020-12
        ({"$id": "https://example.com/s", "properties": {"n": {"type": "integer"}}}, {"n": 1}, {"n": "x"}),
        ({"$dynamicAnchor": "node", "type": "object", "properties": {"c": {"$dynamicRef": "#node"}}},
         {"c": {}}, {"c": 1}),
        ({"type": "object", "unevaluatedProperties": False, "properties": {"a": {}}}, {"a": 1}, {"b": 1}),
        ({"dependentRequired": {"a": ["b"]}}, {"a": 1, "b": 2}, {"a": 1}),
        ({"type": "number", "multipleOf": 0.01}, 19.02, 19.015),
        ({"$schema": "http://json-schema.org/draft-04/schema#", "type": "number", "maximum": 3,
          "exclusiveMaximum": True}, 2, 3),
        ({"type": "array", "contains": {"type": "integer"}, "minContains": 2}, [1, 2], [1, "a"]),
    ],
)
def test_fallback_to_jsonschema(schema, good, bad):
    assert validator_kind(schema) == "jsonschema"
    validate_output(schema, good)
    assert _ours(schema, bad) == _reference(schema, bad)


def test_vendor_keywords_and_local_refs_stay_fast():
    schema = {"x-note": {"$id": "ignored"}, "$defs": {"pos": {"type": "integer", "minimum": 1}},
              "type": "object", "properties": {"a": {"$ref": "#/$defs/pos"}, "b": {"$ref": "#"}}}
    assert validator_kind(schema) == "fastjsonschema"
    validate_output(schema, {"a": 1, "b": {"a": 2}})
    assert _ours(schema, {"a": 1, "b": {"a": 0}}) == _reference(schema, {"a": 1, "b": {"a": 0}})


def test_ref_outside_checked_places_falls_back():
    schema = {"x-hidden": {"type": "integer"}, "properties": {"n": {"$ref": "#/x-hidden"}}}
    assert validator_kind(schema) == "jsonschema"
    assert _ours(schema, {"n": "s"}) == _reference(schema, {"n": "s"})


def test_many_threads_one_new_schema(monkeypatch):
    calls = []
    real = fastjsonschema.compile
    monkeypatch.setattr(fastjsonschema, "compile", lambda *a, **k: calls.append(1) or real(*a, **k))
    schema = {"type": "object", "properties": {"n": {"type": "integer", "minimum": 0}}, "required": ["n"]}
    threads_n = 8
    start = threading.Barrier(threads_n, timeout=10)
    outcomes: list[object] = [None] * threads_n

    def work(i: int) -> None:
        start.wait()
        for j in range(200):
            value = {"n": j} if (i + j) % 2 else {"n": -j - 1}
            got = _ours(schema, value)
            if (got is None) != ((i + j) % 2 == 1):
                outcomes[i] = ("wrong", value, got)
                return
        outcomes[i] = "ok"

    threads = [threading.Thread(target=work, args=(i,)) for i in range(threads_n)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=30)
    assert not any(t.is_alive() for t in threads)
    assert outcomes == ["ok"] * threads_n
    assert len(calls) == 1  # compiled once however many threads asked at once


def test_rejection_carries_no_trace_of_the_fast_path():
    schema = {"type": "object", "required": ["n"]}
    validate_output(schema, {"n": 1})  # compiled and cached: the next call takes the inline path
    with pytest.raises(OutputSchemaError) as info:
        validate_output(schema, {}, tool="t")
    assert info.value.__context__ is None and info.value.__cause__ is None


FUZZ_SCHEMAS = [
    OBJ,
    {"type": "object", "properties": {"a": {"type": "integer"}}, "patternProperties": {"^x": {"type": "string"}},
     "additionalProperties": {"type": "boolean"}, "propertyNames": {"maxLength": 2}, "minProperties": 1},
    {"type": "array", "contains": {"const": 1}, "items": {"enum": [1, 1.5, "1", [1], {"a": True}, None]},
     "uniqueItems": True},
    {"anyOf": [{"type": "string", "minLength": 2}, {"type": "number", "exclusiveMinimum": 0, "maximum": 2}],
     "not": {"const": "no"}},
    {"oneOf": [{"type": "integer"}, {"type": "number", "minimum": 1}]},
]


def _pool():
    scalars = [0, 1, -1, 2, 1.0, 1.5, 2.5, True, False, None, "", "a", "ab", "no", "x1", "abc\n", 10**20]
    values = list(scalars) + [[s] for s in scalars] + [{"a": s} for s in scalars] + [{"x": s} for s in scalars]
    values += [[1, 1.0], [1, True], [[1], [True]], [{"a": True}, {"a": 1}], [1, "1", None], {"abc": True},
               {"a": 1, "xy": "s", "b": False}, {"n": 0, "name": "abc"}, {"n": 1, "kind": {"a": 1}}, {}, []]
    return values


@pytest.mark.parametrize("schema", FUZZ_SCHEMAS, ids=range(len(FUZZ_SCHEMAS)))
def test_same_verdicts_as_jsonschema_over_many_values(schema):
    schema = copy.deepcopy(schema)
    assert validator_kind(schema) == "fastjsonschema"
    for value in _pool():
        if value is None:
            continue  # no structuredContent at all: its own error, tested elsewhere
        assert _ours(schema, value) == _reference(schema, value), value


def test_pydantic_shaped_schema_is_fast():
    # what pydantic (and so the Python SDK's servers) emits: $defs, $ref beside a description, anyOf with null
    inner = {"properties": {"x": {"title": "X", "type": "integer"}, "tag": {"default": "a", "enum": ["a", "b"]}},
             "required": ["x"], "title": "Inner", "type": "object"}
    schema = {"$defs": {"Inner": inner}, "title": "Out", "type": "object", "required": ["t"],
              "properties": {"t": {"title": "T", "type": "number"},
                             "inner": {"anyOf": [{"$ref": "#/$defs/Inner"}, {"type": "null"}], "default": None},
                             "items": {"type": "array", "items": {"$ref": "#/$defs/Inner", "description": "one"}}}}
    assert validator_kind(schema) == "fastjsonschema"
    for value in ({"t": 1.5}, {"t": 1, "inner": None, "items": [{"x": 1}]}, {"t": 1, "inner": {"x": "1"}},
                  {"t": 1, "items": [{"x": 1, "tag": "c"}]}, {"inner": None}):
        assert _ours(schema, value) == _reference(schema, value), value
