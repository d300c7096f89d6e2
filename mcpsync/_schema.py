"""Validation of a tool's ``structuredContent`` against its ``outputSchema``.

JSON Schema 2020-12 by default (a schema's own ``$schema`` picks another draft) through
the ``jsonschema`` package, imported on first use. ``$ref`` is resolved only inside the
schema itself: a registry that refuses every retrieval means a network (or file) URI
is never fetched; such a reference fails validation as an unresolvable schema.

Example:
    >>> validate_output({"type": "object", "required": ["n"]}, {"n": 1}, tool="count")
    >>> validate_output({"type": "object", "required": ["n"]}, {}, tool="count")
    Traceback (most recent call last):
    ...
    mcpsync._errors.OutputSchemaError: tool 'count' returned structuredContent that does not match its outputSchema: 'n' is a required property
"""

from __future__ import annotations

import logging
import threading
from typing import Any, Mapping

from ._errors import OutputSchemaError

__all__ = ["OutputSchemaError", "validate_output"]


_cache: dict[int, Any] = {}
log = logging.getLogger("mcpsync.schema")
_lock = threading.Lock()
_MAX_CACHED = 256


def _refuse(uri: str) -> Any:
    from referencing.exceptions import NoSuchResource

    raise NoSuchResource(ref=uri)  # type: ignore[call-arg]  # attrs class


_warned_missing = False


def _validator(schema: Mapping[str, Any]) -> Any:
    # keyed by identity: a tool's schema object lives as long as its cached definition,
    # and the entry holds it, so the id cannot be reused while the entry exists
    key = id(schema)
    with _lock:
        hit = _cache.get(key)
    if hit is not None and hit[0] is schema:
        return hit[1]
    try:
        import jsonschema  # type: ignore[import-untyped]
        from referencing import Registry
    except ImportError:
        global _warned_missing
        if not _warned_missing:
            _warned_missing = True
            log.warning("outputSchema checks are off: install mcpsync[schema] (the jsonschema package)")
        return None

    cls = jsonschema.validators.validator_for(schema, default=jsonschema.Draft202012Validator)
    try:
        cls.check_schema(schema)
    except jsonschema.SchemaError as exc:
        raise OutputSchemaError(f"the outputSchema is not a valid JSON Schema: {exc.message}", code=-32602) from None
    validator = cls(schema, registry=Registry(retrieve=_refuse))  # type: ignore[call-arg]
    with _lock:
        if len(_cache) >= _MAX_CACHED:
            _cache.clear()
        _cache[key] = (schema, validator)
    return validator


def validate_output(schema: Mapping[str, Any] | None, structured: Any, *, tool: str = "") -> None:
    """Raise :class:`OutputSchemaError` if ``structured`` does not satisfy ``schema``.

    A tool with an ``outputSchema`` must return ``structuredContent``; a missing one is
    an error too. Nothing is checked when ``schema`` is None.
    """
    if schema is None:
        return
    if structured is None:
        raise OutputSchemaError(
            f"tool {tool!r} declares an outputSchema but returned no structuredContent",
            code=-32602,
            tool=tool,
            path="",
        )
    validator = _validator(schema)
    if validator is None:
        return  # jsonschema is not installed (warned once)
    try:
        error = next(iter(validator.iter_errors(structured)), None)
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
