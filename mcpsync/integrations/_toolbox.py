"""The one conversion every framework module uses: MCP tools as specs, calls as outputs.

A :class:`Toolbox` wraps a :class:`~mcpsync.Client` or a :class:`~mcpsync.MultiClient`
through :class:`~mcpsync.adapters.ToolAdapter` (so names, their stable order and the
mapping back are the LLM adapters' own) and gives each framework module three things:

- :meth:`Toolbox.specs`: the tools as :class:`ToolSpec` (name, description, the input
  JSON Schema as the server wrote it). Asked again each time a framework builds its tool
  list, it follows ``notifications/tools/list_changed`` (the client's tool cache is
  invalidated by it) and is the same objects while nothing changed.
- :meth:`Toolbox.call`: one call, always answered with a :class:`ToolOutput` (never
  raised): the text the model reads, structured content, images and binary resources as
  bytes, and ``is_error`` for a tool error (``isError``) or a failed call, whose text is
  then :func:`~mcpsync.agent_message`'s sentence.
- :func:`inline_refs`: a schema's local ``$ref`` s inlined, for frameworks that take one
  schema per argument.

Thread-safe: one Toolbox may serve every thread of a framework.

Example:
    >>> box = Toolbox(client)                                       # doctest: +SKIP
    >>> [s.name for s in box.specs()]                               # doctest: +SKIP
    ['add', 'echo']
    >>> box.call("add", {"a": 1, "b": 2}).text                      # doctest: +SKIP
    '3'
"""

from __future__ import annotations

import base64
import binascii
import copy
import hashlib
import keyword
import threading
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Literal, Mapping, Union

from .._agent_messages import agent_message
from .._messages import AudioContent, CallToolResult, EmbeddedResource, ImageContent
from ..adapters import ToolAdapter, result_text

if TYPE_CHECKING:
    from .._client import Client
    from .._multi import MultiClient

__all__ = ["Toolbox", "ToolSpec", "ToolOutput", "Media", "inline_refs", "Source", "NameStyle"]

#: What a framework module accepts: one server's client, or many servers'.
Source = Union["Client", "MultiClient"]

#: ``"provider"``: names as LLM APIs accept them (``^[a-zA-Z0-9_-]{1,64}$``, the adapters'
#: names); ``"identifier"``: Python identifiers too (smolagents calls tools as functions).
NameStyle = Literal["provider", "identifier"]

_MAX_REF_DEPTH = 16


def inline_refs(schema: Mapping[str, Any], defs: Mapping[str, Any] | None = None) -> dict[str, Any]:
    """``schema`` with its local ``$ref`` s (``#/$defs/X``, ``#/definitions/X``) replaced by
    what they name; a reference's sibling keywords (``description``, ``default``) are kept.

    Args:
        schema: a schema, or one property of a tool's input schema.
        defs: the definitions it refers to (default: its own ``$defs`` / ``definitions``).

    A recursive reference deeper than 16 levels, or one that names nothing here, is left
    as it is.

    Example:
        >>> inline_refs({"$ref": "#/$defs/P", "description": "a point"}, {"P": {"type": "object"}})
        {'type': 'object', 'description': 'a point'}
    """
    own = defs is None
    if defs is None:
        defs = {**(schema.get("definitions") or {}), **(schema.get("$defs") or {})}
    out = _inline(dict(schema), defs, 0)
    if not isinstance(out, dict):
        return {}
    if own:  # every reference is inlined: the definitions are no longer needed
        out.pop("$defs", None)
        out.pop("definitions", None)
    return out


def _inline(node: Any, defs: Mapping[str, Any], depth: int) -> Any:
    if isinstance(node, list):
        return [_inline(item, defs, depth) for item in node]
    if not isinstance(node, dict):
        return node
    ref = node.get("$ref")
    if isinstance(ref, str) and depth < _MAX_REF_DEPTH:
        for prefix in ("#/$defs/", "#/definitions/"):
            if ref.startswith(prefix) and ref[len(prefix) :] in defs:
                target = _inline(copy.deepcopy(defs[ref[len(prefix) :]]), defs, depth + 1)
                siblings = {k: _inline(v, defs, depth) for k, v in node.items() if k != "$ref"}
                return {**target, **siblings} if isinstance(target, dict) else target
    return {k: (v if k in ("$defs", "definitions") else _inline(v, defs, depth)) for k, v in node.items()}


@dataclass(frozen=True, slots=True)
class ToolSpec:
    """One tool as a framework declares it.

    Attributes:
        name: the name the model sees (unique in its Toolbox; see :data:`NameStyle`).
        description: the tool's description (its title when it has none).
        parameters: its input JSON Schema, as the server wrote it (an object schema;
            ``$schema`` left out): ``required``, defaults, enums, nested objects and
            ``$ref`` / ``$defs`` unchanged.
        server: the server's name ("" for a lone Client without one).
        tool: the name mcpsync calls it by (``server__tool`` on a namespaced MultiClient).
    """

    name: str
    description: str
    parameters: dict[str, Any]
    server: str
    tool: str

    @property
    def required(self) -> tuple[str, ...]:
        """The names of the required arguments."""
        return tuple(str(r) for r in self.parameters.get("required") or ())

    def properties(self) -> dict[str, dict[str, Any]]:
        """Each argument's own schema with the input schema's ``$ref`` s inlined (for a
        framework that takes one schema per argument)."""
        defs = {**(self.parameters.get("definitions") or {}), **(self.parameters.get("$defs") or {})}
        props = self.parameters.get("properties") or {}
        return {str(k): inline_refs(v if isinstance(v, dict) else {}, defs) for k, v in props.items()}


@dataclass(frozen=True, slots=True)
class Media:
    """Binary content of a result: an image, audio, or a binary embedded resource.

    Attributes:
        kind: ``"image"``, ``"audio"`` or ``"blob"``.
        mime_type: its MIME type (``"application/octet-stream"`` when the server gave none).
        data: the decoded bytes.
        uri: the resource's URI (``"blob"``), else "".
    """

    kind: Literal["image", "audio", "blob"]
    mime_type: str
    data: bytes
    uri: str = ""


@dataclass(frozen=True, slots=True)
class ToolOutput:
    """What one tool call gave, as a framework hands it to the model.

    Attributes:
        tool: the tool's name as the model used it.
        text: what the model reads: the result's text blocks (other blocks described,
            the structured content as JSON when there is no content); for a failed call,
            :func:`~mcpsync.agent_message`'s sentence.
        is_error: the tool reported an error (``isError``) or the call failed.
        structured: the result's ``structuredContent`` (None when absent or failed).
        media: images, audio and binary resources of the result, decoded.
        result: the :class:`~mcpsync.CallToolResult` (None when the call failed).
        error: the exception the call raised (None when it gave a result).
    """

    tool: str
    text: str
    is_error: bool
    structured: Any = None
    media: tuple[Media, ...] = ()
    result: CallToolResult | None = None
    error: BaseException | None = None


def _decode(data: str) -> bytes | None:
    try:
        return base64.b64decode(data, validate=True)
    except (binascii.Error, ValueError):
        return None


def _media(result: CallToolResult) -> tuple[Media, ...]:
    out: list[Media] = []
    for block in result.content:
        if isinstance(block, (ImageContent, AudioContent)):
            raw = _decode(block.data)
            if raw is not None:
                kind: Literal["image", "audio"] = "image" if isinstance(block, ImageContent) else "audio"
                out.append(Media(kind, block.mime_type or "application/octet-stream", raw))
        elif isinstance(block, EmbeddedResource) and block.resource.blob is not None:
            raw = _decode(block.resource.blob)
            if raw is not None:
                out.append(Media("blob", block.resource.mime_type or "application/octet-stream", raw, block.resource.uri))
    return tuple(out)


def _identifier(name: str, taken: set[str]) -> str:
    ident = name.replace("-", "_")
    if not ident.isidentifier() or keyword.iskeyword(ident):
        ident = "t_" + ident
    if ident in taken:
        ident = f"{ident}_{hashlib.sha256(name.encode()).hexdigest()[:8]}"
    return ident


class Toolbox:
    """A Client's or MultiClient's tools for one framework module; thread-safe.

    Args:
        source: a :class:`~mcpsync.Client` or a :class:`~mcpsync.MultiClient`.
        names: ``"provider"`` (default) or ``"identifier"`` (see :data:`NameStyle`).
        lang: language of the error sentences the model reads (``"en"`` / ``"zh"``).
        timeout: seconds per call (default: the client's request timeout).
    """

    def __init__(self, source: Source, *, names: NameStyle = "provider", lang: str = "en", timeout: float | None = None) -> None:
        if names not in ("provider", "identifier"):
            raise ValueError(f"names must be 'provider' or 'identifier', not {names!r}")
        self.source = source
        self.names: NameStyle = names
        self.lang = lang
        self._adapter = ToolAdapter(source, lang=lang, timeout=timeout)
        self._lock = threading.Lock()
        self._rendered: object = None
        self._specs: list[ToolSpec] = []
        self._by_name: dict[str, ToolSpec] = {}
        self._provider: dict[str, str] = {}  # name -> the adapter's (provider) name

    def specs(self, *, refresh: bool = False) -> list[ToolSpec]:
        """The tools, in the adapters' stable order (by server, then name).

        Args:
            refresh: ask the servers for their tools first (otherwise the clients' tool
                caches answer, which ``tools/list_changed`` invalidates).

        Returns:
            The same list object while the tools are unchanged; do not mutate it.
        """
        rendered = self._adapter.openai(refresh=refresh)
        with self._lock:
            if rendered is self._rendered:
                return self._specs
        specs: list[ToolSpec] = []
        provider: dict[str, str] = {}
        taken: set[str] = set()
        for item in rendered:
            fn: Mapping[str, Any] = item["function"]
            provider_name = str(fn["name"])
            server, tool = self._adapter.resolve(provider_name)
            name = _identifier(provider_name, taken) if self.names == "identifier" else provider_name
            taken.add(name)
            provider[name] = provider_name
            params = fn.get("parameters")
            specs.append(ToolSpec(name, str(fn.get("description") or ""), dict(params) if params else {}, server, tool))
        with self._lock:
            self._rendered = rendered
            self._specs = specs
            self._by_name = {s.name: s for s in specs}
            self._provider = provider
            return specs

    def spec(self, name: str) -> ToolSpec | None:
        """The spec of a tool by the name the model uses (None when there is none)."""
        with self._lock:
            hit = self._by_name.get(name)
        if hit is None:
            hit = {s.name: s for s in self.specs()}.get(name)
        return hit

    def call(self, name: str, arguments: Mapping[str, Any] | str | None = None) -> ToolOutput:
        """Call a tool by the name the model used; never raises for the call's failure.

        Args:
            name: a :attr:`ToolSpec.name`.
            arguments: the arguments, as a mapping or a JSON text.

        Returns:
            The :class:`ToolOutput`; a failed call (unknown tool, bad JSON, an
            :class:`~mcpsync.MCPError`) has ``is_error`` and ``error`` set and the
            :func:`~mcpsync.agent_message` sentence as ``text``.
        """
        with self._lock:
            provider_name = self._provider.get(name)
        if provider_name is None:
            self.specs()
            with self._lock:
                provider_name = self._provider.get(name, name)
        shown, result, error = self._adapter.attempt(provider_name, arguments)
        if error is not None:
            return ToolOutput(name, agent_message(error, tool=shown, lang=self.lang), True, error=error)
        assert isinstance(result, CallToolResult)
        return ToolOutput(name, result_text(result), result.is_error, result.structured_content, _media(result), result)

