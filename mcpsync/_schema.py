"""Validation of a tool's ``structuredContent`` against its ``outputSchema``.

JSON Schema 2020-12 by default (a schema's own ``$schema`` picks another draft) through
the ``jsonschema`` package, imported on first use. ``$ref`` is resolved only inside the
schema itself: a registry that refuses every retrieval means a network (or file) URI
is never fetched; such a reference fails validation as an unresolvable schema.

Each schema is compiled once (per schema object, in a bounded cache). Where every keyword
it uses means the same to both libraries, the check runs through a ``fastjsonschema``
compiled function; a value it rejects is judged again by ``jsonschema``, which has the
last word and writes the message, so errors read as they always have. Any other schema
(``$id``, ``$dynamicRef``, ``prefixItems``, ``unevaluated*``, a ``$ref`` with siblings or
not local, an older draft, ...) is checked by ``jsonschema`` alone.
:func:`validator_kind` says which of the two a schema gets.

Example:
    >>> validate_output({"type": "object", "required": ["n"]}, {"n": 1}, tool="count")
    >>> validate_output({"type": "object", "required": ["n"]}, {}, tool="count")
    Traceback (most recent call last):
    ...
    mcpsync._errors.OutputSchemaError: tool 'count' returned structuredContent that does not match its outputSchema: 'n' is a required property
"""

from __future__ import annotations

import copy
import logging
import threading
from typing import Any, Callable, Mapping

from ._errors import OutputSchemaError

__all__ = ["OutputSchemaError", "validate_output", "validator_kind"]


log = logging.getLogger("mcpsync.schema")
_MAX_CACHED = 256

# keyword sets for the fast path: what fastjsonschema's draft-06+ generator and
# jsonschema's drafts 6 to 2020-12 read alike (anything else sends a schema to jsonschema)
_ONE = frozenset(("additionalProperties", "propertyNames", "items", "contains", "not", "if", "then", "else"))
_MANY = frozenset(("allOf", "anyOf", "oneOf"))
_NAMED = frozenset(("properties", "patternProperties", "$defs", "definitions"))
_VALUES = frozenset((
    "type", "enum", "const", "minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum", "minLength",
    "maxLength", "pattern", "minItems", "maxItems", "uniqueItems", "minProperties", "maxProperties", "required",
))
# read by neither as an assertion here (formats and defaults are switched off in fastjsonschema)
_NOTES = frozenset((
    "title", "description", "default", "examples", "$comment", "readOnly", "writeOnly", "deprecated", "format",
))
# known to one library or the other with a meaning the fast path does not share
_OTHERS = frozenset((
    "$id", "id", "$anchor", "$dynamicRef", "$dynamicAnchor", "$recursiveRef", "$recursiveAnchor", "$vocabulary",
    "prefixItems", "unevaluatedProperties", "unevaluatedItems", "dependentRequired", "dependentSchemas",
    "dependencies", "additionalItems", "minContains", "maxContains", "contentSchema", "contentEncoding",
    "contentMediaType", "multipleOf", "extends", "disallow", "divisibleBy",
))
_FAST_DRAFTS = ("Draft202012Validator", "Draft201909Validator", "Draft7Validator", "Draft6Validator")


class _Compiled:
    """One schema's validators: ``fast`` (or None) and the ``jsonschema`` one."""

    __slots__ = ("schema", "fast", "slow")

    def __init__(self, schema: Mapping[str, Any], fast: Callable[[Any], Any] | None, slow: Any) -> None:
        self.schema = schema
        self.fast = fast
        self.slow = slow


# keyed by identity: a tool's schema object lives as long as its cached definition,
# and the entry holds it, so the id cannot be reused while the entry exists
_cache: dict[int, _Compiled] = {}
_lock = threading.Lock()  # guards filling and trimming _cache; a lookup is one dict read
_warned_missing = False


def _refuse(uri: str) -> Any:
    from referencing.exceptions import NoSuchResource

    raise NoSuchResource(ref=uri)  # type: ignore[call-arg]  # attrs class


def _refuse_fast(uri: str) -> Any:
    raise ValueError(f"remote $ref {uri!r} is not fetched")


def _escape(key: str) -> str:
    return key.replace("~", "~0").replace("/", "~1")


def _fast_safe(schema: Any) -> bool:
    """Whether every keyword of ``schema`` means the same to fastjsonschema as to jsonschema
    and every ``$ref`` is a plain pointer to a place inside it that is checked here too."""
    seen: set[str] = set()
    refs: list[str] = []
    stack: list[tuple[Any, str]] = [(schema, "")]
    while stack:
        node, at = stack.pop()
        seen.add(at)
        if isinstance(node, bool):
            continue
        if not isinstance(node, dict):
            return False
        ref = node.get("$ref")
        if ref is not None:
            if not isinstance(ref, str) or not (ref == "#" or ref.startswith("#/")) or "%" in ref:
                return False
            if any(k not in _NOTES for k in node if k != "$ref"):
                return False  # a sibling of $ref: fastjsonschema would skip it
            refs.append(ref[1:])
            continue
        for key, value in node.items():
            if key in _VALUES or key in _NOTES:
                if key == "enum" and not isinstance(value, list):
                    return False
            elif key in _ONE:
                if key == "items" and not isinstance(value, (dict, bool)):
                    return False
                stack.append((value, f"{at}/{key}"))
            elif key in _MANY:
                if not isinstance(value, list):
                    return False
                stack.extend((sub, f"{at}/{key}/{i}") for i, sub in enumerate(value))
            elif key in _NAMED:
                if not isinstance(value, dict):
                    return False
                stack.extend((sub, f"{at}/{key}/{_escape(name)}") for name, sub in value.items())
            elif key == "$schema":
                if at:
                    return False
            elif key in _OTHERS or key.startswith("$"):
                return False
            # any other keyword is unknown to both libraries, and ignored by both
    return all(ref in seen for ref in refs)


def _compile_fast(schema: Mapping[str, Any]) -> Callable[[Any], Any] | None:
    try:
        import fastjsonschema
    except ImportError:
        return None
    if not _fast_safe(schema):
        return None
    try:
        # a copy: the compiler rewrites $ref values in place
        return fastjsonschema.compile(
            copy.deepcopy(dict(schema)),
            handlers={scheme: _refuse_fast for scheme in ("", "http", "https", "file", "urn")},
            use_default=False,  # never fill defaults into the caller's data
            use_formats=False,  # jsonschema does not assert formats either
        )
    except Exception as exc:  # anything it cannot compile is jsonschema's
        log.debug("outputSchema left to jsonschema: %s", exc)
        return None


def _compiled(schema: Mapping[str, Any]) -> _Compiled | None:
    hit = _cache.get(id(schema))
    if hit is not None and hit.schema is schema:
        return hit
    try:
        import jsonschema  # type: ignore[import-untyped]
        from referencing import Registry
    except ImportError:
        global _warned_missing
        if not _warned_missing:
            _warned_missing = True
            log.warning("outputSchema checks are off: install mcpsync[schema] (the jsonschema package)")
        return None
    with _lock:  # one compilation per schema, however many threads ask at once
        hit = _cache.get(id(schema))
        if hit is not None and hit.schema is schema:
            return hit
        cls = jsonschema.validators.validator_for(schema, default=jsonschema.Draft202012Validator)
        try:
            cls.check_schema(schema)
        except jsonschema.SchemaError as exc:
            raise OutputSchemaError(
                f"the outputSchema is not a valid JSON Schema: {exc.message}", code=-32602
            ) from None
        slow = cls(schema, registry=Registry(retrieve=_refuse))  # type: ignore[call-arg]
        fast = _compile_fast(schema) if cls.__name__ in _FAST_DRAFTS else None
        entry = _Compiled(schema, fast, slow)
        if len(_cache) >= _MAX_CACHED:
            del _cache[next(iter(_cache))]  # the oldest
        _cache[id(schema)] = entry
    return entry


def validator_kind(schema: Mapping[str, Any]) -> str | None:
    """Which check ``schema`` gets: ``"fastjsonschema"`` (compiled, with jsonschema judging
    what it rejects), ``"jsonschema"``, or None when jsonschema is not installed. Compiles
    and caches the schema as :func:`validate_output` would."""
    entry = _compiled(schema)
    if entry is None:
        return None
    return "jsonschema" if entry.fast is None else "fastjsonschema"


def validate_output(schema: Mapping[str, Any] | None, structured: Any, *, tool: str = "") -> None:
    """Raise :class:`OutputSchemaError` if ``structured`` does not satisfy ``schema``.

    A tool with an ``outputSchema`` must return ``structuredContent``; a missing one is
    an error too. Nothing is checked when ``schema`` is None.
    """
    if schema is None:
        return
    # the common case inline: a compiled schema and a value it accepts
    entry = _cache.get(id(schema))
    if entry is not None and entry.schema is schema and entry.fast is not None and structured is not None:
        try:
            entry.fast(structured)
            return
        except Exception:
            pass  # rejected (or could not tell): jsonschema decides, outside this handler
        _judge(entry, structured, tool)
        return
    _check(schema, structured, tool)


def _check(schema: Mapping[str, Any], structured: Any, tool: str) -> None:
    if structured is None:
        raise OutputSchemaError(
            f"tool {tool!r} declares an outputSchema but returned no structuredContent",
            code=-32602,
            tool=tool,
            path="",
        )
    entry = _compiled(schema)
    if entry is None:
        return  # jsonschema is not installed (warned once)
    if entry.fast is not None:
        try:
            entry.fast(structured)
            return
        except Exception:
            pass
    _judge(entry, structured, tool)


def _judge(entry: _Compiled, structured: Any, tool: str) -> None:
    """jsonschema's verdict on ``structured``: it has the last word and writes the message."""
    try:
        error = next(iter(entry.slow.iter_errors(structured)), None)
    except Exception as exc:  # an unresolvable $ref (retrieval refused) and the like
        raise OutputSchemaError(
            f"tool {tool!r}: its outputSchema cannot be applied: {exc}", code=-32602, tool=tool, path=""
        ) from None
    if error is not None:
        path = "/" + "/".join(str(p) for p in error.absolute_path) if error.absolute_path else ""
        raise OutputSchemaError(
            f"tool {tool!r} returned structuredContent that does not match its outputSchema"
            f"{' at ' + path if path else ''}: {error.message}",
            code=-32602,
            tool=tool,
            path=path,
        )
