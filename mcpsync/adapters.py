"""LLM tool adapters: MCP tools as Anthropic, OpenAI (Chat Completions and Responses) and
Gemini tool definitions, and the model's tool calls run through mcpsync.

Definitions come out in a stable, deterministic order, so that a provider's prompt cache
keeps hitting: the caller's fixed tools first (as given), then the MCP tools sorted by
server, then name. The rendered list is unchanged across calls — byte for byte — as long
as the tools' definitions are unchanged; a ``notifications/tools/list_changed`` that
leaves the set as it was changes nothing.

Names are made to fit the providers' common pattern ``^[a-zA-Z0-9_-]{1,64}$``: a valid name is
kept; others have each disallowed character replaced by ``_`` and, when that collides or
is too long, a short hash of the original appended. The mapping is reversible
(:meth:`ToolAdapter.resolve`), so a model's tool call reaches the right tool.

Example:
    >>> from mcpsync import Client
    >>> from mcpsync.adapters import ToolAdapter
    >>> client = Client.stdio("python", ["-m", "mcpsync.server.demo"])            # doctest: +SKIP
    >>> tools = ToolAdapter(client, fixed=[MY_TOOL]).anthropic()                    # doctest: +SKIP
    >>> msg = anthropic.messages.create(model=..., tools=tools, messages=history)   # doctest: +SKIP
    >>> results = [ToolAdapter(client).run_anthropic(b) for b in msg.content
    ...            if b.type == "tool_use"]                                          # doctest: +SKIP
"""

from __future__ import annotations

import copy
import hashlib
import json
import re
import threading
from typing import TYPE_CHECKING, Any, Dict, List, Literal, Mapping, Sequence, cast

import msgspec

from ._agent_messages import agent_message

# ------------------------------------------------------------------ the shapes
#
# What the adapters return, as the SDKs' own request-parameter types. A type checker sees
# the SDK's TypedDict itself (imported for type checking only: nothing is imported at run
# time, and an SDK that is not installed makes its shape ``Any`` rather than an error).
# A copy of those TypedDicts could not stand in for them: a TypedDict is accepted where
# another is expected only if it has every one of its keys, with the same (invariant)
# types, so a copy breaks as soon as an SDK adds a key or a literal, and a tool result's
# ``content`` would have to repeat every content block type the SDK knows. At run time the
# names below are mcpsync's own TypedDicts describing exactly what the adapters produce.
if TYPE_CHECKING:
    from anthropic.types import ToolParam as AnthropicTool  # type: ignore[import-not-found,unused-ignore]
    from anthropic.types import ToolResultBlockParam as AnthropicToolResult  # type: ignore[import-not-found,unused-ignore]
    from google.genai.types import FunctionDeclarationDict as GeminiFunctionDeclaration  # type: ignore[import-not-found,unused-ignore]
    from google.genai.types import FunctionResponseDict as GeminiFunctionResponse  # type: ignore[import-not-found,unused-ignore]
    from openai.types.chat import ChatCompletionFunctionToolParam as OpenAITool  # type: ignore[import-not-found,unused-ignore]
    from openai.types.chat import ChatCompletionToolMessageParam as OpenAIToolMessage  # type: ignore[import-not-found,unused-ignore]
    from openai.types.responses import FunctionToolParam as ResponsesTool  # type: ignore[import-not-found,unused-ignore]
    from openai.types.responses.response_input_item_param import (  # type: ignore[import-not-found,unused-ignore]
        FunctionCallOutput as ResponsesToolOutput,
    )
else:
    from typing import TypedDict

    # (required keys in a base class, optional ones in a total=False subclass: no
    # NotRequired, which Python 3.10 lacks)
    class _CacheControl(TypedDict):
        type: Literal["ephemeral"]

    class _AnthropicToolKeys(TypedDict):
        name: str
        input_schema: Dict[str, Any]

    class AnthropicTool(_AnthropicToolKeys, total=False):
        """An Anthropic Messages API tool (``anthropic.types.ToolParam``)."""

        description: str
        cache_control: _CacheControl

    class AnthropicToolResult(TypedDict):
        """An Anthropic ``tool_result`` block (``anthropic.types.ToolResultBlockParam``):
        ``content`` holds text blocks and base64 image blocks."""

        type: Literal["tool_result"]
        tool_use_id: str
        content: List[Dict[str, Any]]
        is_error: bool

    class _OpenAIFunctionKeys(TypedDict):
        name: str
        parameters: Dict[str, Any]

    class _OpenAIFunction(_OpenAIFunctionKeys, total=False):
        description: str

    class OpenAITool(TypedDict):
        """An OpenAI Chat Completions tool (``openai.types.chat.ChatCompletionFunctionToolParam``)."""

        type: Literal["function"]
        function: _OpenAIFunction

    class OpenAIToolMessage(TypedDict):
        """An OpenAI Chat Completions tool message (``ChatCompletionToolMessageParam``)."""

        role: Literal["tool"]
        tool_call_id: str
        content: str

    class _ResponsesToolKeys(TypedDict):
        type: Literal["function"]
        name: str
        parameters: Dict[str, Any]
        strict: bool

    class ResponsesTool(_ResponsesToolKeys, total=False):
        """An OpenAI Responses API function tool (``openai.types.responses.FunctionToolParam``)."""

        description: str

    class ResponsesToolOutput(TypedDict):
        """An OpenAI Responses ``function_call_output`` input item."""

        type: Literal["function_call_output"]
        call_id: str
        output: str

    class _GeminiDeclarationKeys(TypedDict):
        name: str
        parameters_json_schema: Dict[str, Any]

    class GeminiFunctionDeclaration(_GeminiDeclarationKeys, total=False):
        """A Gemini function declaration (``google.genai.types.FunctionDeclarationDict``)."""

        description: str

    class _GeminiResponseKeys(TypedDict):
        name: str
        response: Dict[str, Any]

    class GeminiFunctionResponse(_GeminiResponseKeys, total=False):
        """A Gemini function response (``google.genai.types.FunctionResponseDict``):
        ``response`` is ``{"output": ...}`` or ``{"error": ...}``."""

        id: str

__all__ = [
    "AnthropicTool",
    "AnthropicToolResult",
    "OpenAITool",
    "OpenAIToolMessage",
    "ResponsesTool",
    "ResponsesToolOutput",
    "GeminiFunctionDeclaration",
    "GeminiFunctionResponse",
    "NAME_PATTERN",
    "ToolAdapter",
    "sanitize_name",
    "anthropic_tools",
    "openai_tools",
    "openai_responses_tools",
    "gemini_tools",
    "run_anthropic_tool_use",
    "run_openai_tool_call",
    "run_responses_function_call",
    "run_gemini_function_call",
    "result_text",
]

#: The tool-name pattern both providers accept.
NAME_PATTERN = re.compile(r"^[a-zA-Z0-9_-]{1,64}$")
_BAD = re.compile(r"[^a-zA-Z0-9_-]")
_EMPTY_SCHEMA: dict[str, Any] = {"type": "object", "properties": {}}


def _hash(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8")).hexdigest()[:8]


def sanitize_name(name: str) -> str:
    """A provider-valid form of ``name`` (without collision handling).

    Example:
        >>> sanitize_name("get-sum"), sanitize_name("files.read"), len(sanitize_name("x" * 80))
        ('get-sum', 'files_read', 64)
    """
    if NAME_PATTERN.match(name):
        return name
    cleaned = _BAD.sub("_", name)
    if cleaned and len(cleaned) <= 64:
        return cleaned
    return (cleaned[:55] or "tool") + "_" + _hash(name)


def _get(obj: Any, key: str, default: Any = None) -> Any:
    if isinstance(obj, Mapping):
        return obj.get(key, default)
    return getattr(obj, key, default)


def _entries(source: Any) -> list[tuple[str, str, Any]]:
    """(server, exposed name, Tool) for a Client, a MultiClient or a list of tools."""
    if source is None:
        return []
    if callable(getattr(source, "tool_entries", None)):
        return [(e.server, e.name, e.tool) for e in source.tool_entries()]
    if hasattr(source, "list_tools"):
        server = str(getattr(source, "name", "") or "")
        return [(server, t.name, t) for t in source.list_tools()]
    out = []
    for item in source:
        if isinstance(item, tuple):
            server, tool = item
            out.append((str(server), _get(tool, "name"), tool))
        else:
            out.append(("", _get(item, "name"), item))
    return out


def _definition(tool: Any) -> dict[str, Any]:
    """The provider-neutral parts of a tool: description and input schema, as builtins."""
    if isinstance(tool, msgspec.Struct):
        description = tool.description or tool.title or ""  # type: ignore[attr-defined]
        schema = tool.input_schema  # type: ignore[attr-defined]
    else:
        description = _get(tool, "description") or _get(tool, "title") or ""
        schema = _get(tool, "input_schema", None) or _get(tool, "inputSchema", None)
    schema = copy.deepcopy(dict(schema)) if isinstance(schema, Mapping) and schema else copy.deepcopy(_EMPTY_SCHEMA)
    if schema.get("type") != "object":
        # both providers want an object schema at the top; MCP requires one too
        schema = {"type": "object", "properties": {}, **{k: v for k, v in schema.items() if k != "type"}}
    schema.pop("$schema", None)  # harmless, but some providers reject unknown meta keys
    return {"description": str(description).strip(), "schema": schema}


def _fingerprint(items: list[tuple[str, str, dict[str, Any]]], fixed: Sequence[Any]) -> bytes:
    return json.dumps([items, list(fixed)], sort_keys=True, separators=(",", ":"), default=str).encode()


class ToolAdapter:
    """Renders a server's tools for an LLM request and runs the model's tool calls.

    Args:
        source: a :class:`~mcpsync.Client`, a :class:`~mcpsync.MultiClient`, or a list
            of :class:`~mcpsync.Tool` (rendering only).
        fixed: the caller's own tool definitions, in the provider's format, placed first
            and unchanged (their names are reserved: no MCP tool is renamed onto them).
        lang: language of error messages shown to the model (``"en"`` / ``"zh"``).
        timeout: seconds per tool call (default: the client's request timeout).

    One adapter may be shared by threads; keep it across turns so that the rendered
    list is reused object for object while nothing changed.
    """

    def __init__(self, source: Any, *, fixed: Sequence[Mapping[str, Any]] = (), lang: str = "en", timeout: float | None = None) -> None:
        self.source = source
        self.fixed = [dict(t) for t in fixed]
        self.lang = lang
        self.timeout = timeout
        self._lock = threading.Lock()
        self._fingerprint: bytes | None = None
        self._items: list[tuple[str, str, str, dict[str, Any]]] = []  # (server, exposed, llm name, definition)
        self._by_llm: dict[str, tuple[str, str]] = {}
        self._rendered: dict[str, list[dict[str, Any]]] = {}

    # ---------------------------------------------------------------- catalogue

    def _fixed_names(self) -> set[str]:
        names = set()
        for t in self.fixed:
            name = t.get("name") or (t.get("function") or {}).get("name")
            if isinstance(name, str):
                names.add(name)
        return names

    def _refresh(self, force: bool = False) -> None:
        # The source is asked every time (a Client's tool cache, or a MultiClient's, makes
        # that cheap and knows when to rediscover); an unchanged answer reuses the
        # rendering, so the request prefix stays byte for byte the same.
        entries = sorted(_entries(self.source), key=lambda e: (e[0], e[1]))
        defs = [(server, exposed, _definition(tool)) for server, exposed, tool in entries]
        fp = _fingerprint(defs, self.fixed)
        with self._lock:
            if fp == self._fingerprint:
                return
        taken = self._fixed_names()
        llm: dict[int, str] = {}
        # names that are valid as they are keep them; the others are cleaned, in order
        for i, (_s, exposed, _d) in enumerate(defs):
            if NAME_PATTERN.match(exposed) and exposed not in taken:
                llm[i] = exposed
                taken.add(exposed)
        for i, (_s, exposed, _d) in enumerate(defs):
            if i in llm:
                continue
            name = sanitize_name(exposed)
            if name in taken:
                name = (_BAD.sub("_", exposed)[:55] or "tool") + "_" + _hash(exposed)
                n = 1
                while name in taken:  # astronomically unlikely, but stay correct
                    n += 1
                    name = (_BAD.sub("_", exposed)[:52] or "tool") + "_" + _hash(f"{exposed}#{n}")
            llm[i] = name
            taken.add(name)
        items = [(s, exposed, llm[i], d) for i, (s, exposed, d) in enumerate(defs)]
        with self._lock:
            self._fingerprint = fp
            self._items = items
            self._by_llm = {name: (s, exposed) for s, exposed, name, _d in items}
            self._rendered = {}

    def _render(self, kind: str, refresh: bool) -> list[dict[str, Any]]:
        if refresh:
            relist = getattr(self.source, "refresh", None)
            if callable(relist):
                relist()
        self._refresh(force=refresh)
        with self._lock:
            cached = self._rendered.get(kind)
            if cached is not None:
                return cached
            out: list[dict[str, Any]] = [copy.deepcopy(t) for t in self.fixed]
            base, _, extra = kind.partition("+")
            for _server, _exposed, name, d in self._items:
                out.append(_RENDER[base](name, d))
            if extra == "cache" and out:
                out[-1] = {**out[-1], "cache_control": {"type": "ephemeral"}}
            self._rendered[kind] = out
            return out

    def anthropic(self, *, refresh: bool = False, cache_control: bool = False) -> list[AnthropicTool]:
        """Tool definitions for the Anthropic Messages API (``tools=``):
        ``{"name", "description", "input_schema"}``.

        Args:
            refresh: ask the servers for their tools again first.
            cache_control: mark the last definition with
                ``"cache_control": {"type": "ephemeral"}``, the prompt-cache breakpoint
                that caches the whole tool list.

        The same list object is returned while nothing changed; do not mutate it.
        """
        if not cache_control:
            return cast("list[AnthropicTool]", self._render("anthropic", refresh))
        return cast("list[AnthropicTool]", self._render("anthropic+cache", refresh))

    def openai(self, *, refresh: bool = False) -> list[OpenAITool]:
        """Tool definitions for OpenAI Chat Completions (``tools=``):
        ``{"type": "function", "function": {"name", "description", "parameters"}}``."""
        return cast("list[OpenAITool]", self._render("openai", refresh))

    def openai_responses(self, *, refresh: bool = False) -> list[ResponsesTool]:
        """Tool definitions for the OpenAI Responses API (flat):
        ``{"type": "function", "name", "description", "parameters", "strict": False}``.

        ``strict`` is required by the API's ``FunctionToolParam`` and defaults to true
        server-side, where it demands schemas MCP servers do not write (every property
        required, ``additionalProperties: false``); the adapter sends ``False`` so the
        tools' own schemas are used as they are.
        """
        return cast("list[ResponsesTool]", self._render("responses", refresh))

    def gemini(self, *, refresh: bool = False) -> list[GeminiFunctionDeclaration]:
        """Function declarations for Google's Gemini API (``google-genai``):
        ``{"name", "description", "parameters_json_schema"}``.

        Wrap them in one tool: ``types.Tool(function_declarations=adapter.gemini())``.
        The input schema goes in ``parameters_json_schema`` (plain JSON Schema), not in
        ``parameters`` (Gemini's OpenAPI subset), so no schema is rewritten.
        """
        return cast("list[GeminiFunctionDeclaration]", self._render("gemini", refresh))

    def resolve(self, llm_name: str) -> tuple[str, str]:
        """The (server, name to call) of a tool name the model used.

        Raises:
            ToolNotFound: the model named no tool of this adapter.
        """
        with self._lock:
            hit = self._by_llm.get(llm_name)
        if hit is None:
            self._refresh(force=True)
            with self._lock:
                hit = self._by_llm.get(llm_name)
        if hit is None:
            from ._errors import ToolNotFound

            missing = getattr(self.source, "missing", None)  # a MultiClient says which servers are not ready
            if callable(missing):
                error = missing(llm_name)
                if isinstance(error, ToolNotFound):
                    raise error
            raise ToolNotFound(f"unknown tool {llm_name}", code=-32602, data={"tool": llm_name})
        return hit

    def llm_name(self, name: str, server: str | None = None) -> str:
        """The provider-side name of an MCP tool (its exposed name; ``server`` to disambiguate)."""
        self._refresh()
        with self._lock:
            for s, exposed, llm, _d in self._items:
                if exposed == name and (server is None or s == server):
                    return llm
        raise KeyError(name)

    # ---------------------------------------------------------------- execution

    def attempt(self, llm_name: str, arguments: Any) -> tuple[str, Any, BaseException | None]:
        """Run one call as an LLM asked for it (``llm_name``, ``arguments`` as a mapping or a
        JSON text), catching what fails: (the tool's name shown in messages, its result or
        None, the error or None). Every ``run_*`` method runs its call through this."""
        from ._errors import InvalidParams

        try:
            _server, exposed = self.resolve(llm_name)
        except Exception as exc:
            return llm_name, None, exc
        if isinstance(arguments, (str, bytes)):
            try:
                arguments = json.loads(arguments or "{}")
            except ValueError as exc:
                reason = getattr(exc, "msg", None) or type(exc).__name__
                return exposed, None, InvalidParams(f"arguments are not valid JSON: {reason}", code=-32602, data={"field": "arguments"})
        if arguments is None:
            arguments = {}
        if not isinstance(arguments, Mapping):
            return exposed, None, InvalidParams("arguments must be a JSON object", code=-32602, data={"field": "arguments"})
        kwargs = {"timeout": self.timeout} if self.timeout is not None else {}
        try:
            return exposed, self.source.call_tool(exposed, dict(arguments), **kwargs), None
        except Exception as exc:
            return exposed, None, exc

    def run_anthropic(self, block: Any) -> AnthropicToolResult:
        """Run an Anthropic ``tool_use`` block; return its ``tool_result`` block.

        Args:
            block: ``{"type": "tool_use", "id", "name", "input"}`` (a dict or the SDK's object).

        Returns:
            ``{"type": "tool_result", "tool_use_id", "content": [...], "is_error"}``; a failed
            call has ``is_error`` true and the :func:`agent_message` sentence as content.
        """
        name, result, error = self.attempt(str(_get(block, "name", "")), _get(block, "input", None))
        out: dict[str, Any] = {"type": "tool_result", "tool_use_id": str(_get(block, "id", ""))}
        if error is not None:
            out["content"] = [{"type": "text", "text": agent_message(error, tool=name, lang=self.lang)}]
            out["is_error"] = True
            return cast("AnthropicToolResult", out)
        out["content"] = _anthropic_content(result)
        out["is_error"] = bool(getattr(result, "is_error", False))
        return cast("AnthropicToolResult", out)

    def run_openai(self, tool_call: Any) -> OpenAIToolMessage:
        """Run an OpenAI Chat Completions ``tool_calls`` item; return the ``tool`` message.

        Args:
            tool_call: ``{"id", "type": "function", "function": {"name", "arguments"}}``.

        Returns:
            ``{"role": "tool", "tool_call_id", "content"}`` (text; an error's content is
            the :func:`agent_message` sentence).
        """
        fn = _get(tool_call, "function", {}) or {}
        name, result, error = self.attempt(str(_get(fn, "name", "")), _get(fn, "arguments", None))
        text = agent_message(error, tool=name, lang=self.lang) if error is not None else result_text(result)
        return cast("OpenAIToolMessage", {"role": "tool", "tool_call_id": str(_get(tool_call, "id", "")), "content": text})

    def run_responses(self, item: Any) -> ResponsesToolOutput:
        """Run an OpenAI Responses ``function_call`` item; return its ``function_call_output``."""
        name, result, error = self.attempt(str(_get(item, "name", "")), _get(item, "arguments", None))
        text = agent_message(error, tool=name, lang=self.lang) if error is not None else result_text(result)
        return cast("ResponsesToolOutput", {"type": "function_call_output", "call_id": str(_get(item, "call_id", "")), "output": text})

    def run_gemini(self, function_call: Any) -> GeminiFunctionResponse:
        """Run a Gemini ``function_call`` part; return its ``function_response``.

        Args:
            function_call: ``{"id", "name", "args"}`` (a dict or ``types.FunctionCall``).

        Returns:
            ``{"id", "name", "response": {"output": text}}``, or ``{"error": text}`` in
            ``response`` when the call failed or the tool reported an error (the keys
            Gemini's documentation gives for a function's output and error). Put it in
            ``types.Part(function_response=...)``.
        """
        llm = str(_get(function_call, "name", "") or "")
        name, result, error = self.attempt(llm, _get(function_call, "args", None))
        out: dict[str, Any] = {}
        call_id = _get(function_call, "id", None)
        if call_id:
            out["id"] = str(call_id)
        out["name"] = llm
        if error is not None:
            out["response"] = {"error": agent_message(error, tool=name, lang=self.lang)}
        elif getattr(result, "is_error", False):
            out["response"] = {"error": result_text(result)}
        else:
            out["response"] = {"output": result_text(result)}
        return cast("GeminiFunctionResponse", out)


def _anthropic(name: str, d: dict[str, Any]) -> dict[str, Any]:
    out: dict[str, Any] = {"name": name}
    if d["description"]:
        out["description"] = d["description"]
    out["input_schema"] = copy.deepcopy(d["schema"])
    return out


def _openai(name: str, d: dict[str, Any]) -> dict[str, Any]:
    fn: dict[str, Any] = {"name": name}
    if d["description"]:
        fn["description"] = d["description"]
    fn["parameters"] = copy.deepcopy(d["schema"])
    return {"type": "function", "function": fn}


def _responses(name: str, d: dict[str, Any]) -> dict[str, Any]:
    out: dict[str, Any] = {"type": "function", "name": name}
    if d["description"]:
        out["description"] = d["description"]
    out["parameters"] = copy.deepcopy(d["schema"])
    out["strict"] = False
    return out


def _gemini(name: str, d: dict[str, Any]) -> dict[str, Any]:
    out: dict[str, Any] = {"name": name}
    if d["description"]:
        out["description"] = d["description"]
    out["parameters_json_schema"] = copy.deepcopy(d["schema"])
    return out


_RENDER = {"anthropic": _anthropic, "openai": _openai, "responses": _responses, "gemini": _gemini}


def _block_text(block: Any) -> str:
    kind = _get(block, "type")
    if kind is None:
        kind = {"TextContent": "text", "ImageContent": "image", "AudioContent": "audio", "ResourceLink": "resource_link", "EmbeddedResource": "resource"}.get(type(block).__name__, "")
    if kind == "text":
        return str(_get(block, "text", ""))
    if kind in ("image", "audio"):
        mime = _get(block, "mime_type", None) or _get(block, "mimeType", "") or ""
        data = _get(block, "data", "") or ""
        return f"[{kind} {mime}, {len(data) * 3 // 4} bytes]"
    if kind == "resource_link":
        return f"[resource {_get(block, 'uri', '')}" + (f" ({_get(block, 'name')})" if _get(block, "name") else "") + "]"
    if kind == "resource":
        res = _get(block, "resource", None)
        text = _get(res, "text", None)
        if text is not None:
            return str(text)
        return f"[resource {_get(res, 'uri', '')}]"
    return f"[{kind or 'content'}]"


def result_text(result: Any) -> str:
    """A tool result as one text: its text blocks (others described), or its structured
    content as JSON when it has no content."""
    content = list(getattr(result, "content", None) or ())
    if not content:
        structured = getattr(result, "structured_content", None)
        return json.dumps(structured, ensure_ascii=False) if structured is not None else ""
    return "\n".join(_block_text(b) for b in content)


def _anthropic_content(result: Any) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = []
    for block in getattr(result, "content", None) or ():
        kind = _get(block, "type") or type(block).__name__
        if kind in ("image", "ImageContent"):
            mime = _get(block, "mime_type", None) or _get(block, "mimeType", "")
            if mime in ("image/jpeg", "image/png", "image/gif", "image/webp"):
                out.append({"type": "image", "source": {"type": "base64", "media_type": mime, "data": _get(block, "data", "")}})
                continue
        out.append({"type": "text", "text": _block_text(block)})
    if not out:
        out.append({"type": "text", "text": result_text(result)})
    return out


# ------------------------------------------------------------------ one-shot helpers


def anthropic_tools(source: Any, fixed: Sequence[Mapping[str, Any]] = ()) -> list[AnthropicTool]:
    """``ToolAdapter(source, fixed=fixed).anthropic()``."""
    return ToolAdapter(source, fixed=fixed).anthropic()


def openai_tools(source: Any, fixed: Sequence[Mapping[str, Any]] = ()) -> list[OpenAITool]:
    """``ToolAdapter(source, fixed=fixed).openai()``."""
    return ToolAdapter(source, fixed=fixed).openai()


def openai_responses_tools(source: Any, fixed: Sequence[Mapping[str, Any]] = ()) -> list[ResponsesTool]:
    """``ToolAdapter(source, fixed=fixed).openai_responses()``."""
    return ToolAdapter(source, fixed=fixed).openai_responses()


def gemini_tools(source: Any, fixed: Sequence[Mapping[str, Any]] = ()) -> list[GeminiFunctionDeclaration]:
    """``ToolAdapter(source, fixed=fixed).gemini()``."""
    return ToolAdapter(source, fixed=fixed).gemini()


def run_anthropic_tool_use(source: Any, block: Any, *, lang: str = "en", timeout: float | None = None) -> AnthropicToolResult:
    """Run one Anthropic ``tool_use`` block through ``source``; return the ``tool_result``."""
    return ToolAdapter(source, lang=lang, timeout=timeout).run_anthropic(block)


def run_openai_tool_call(source: Any, tool_call: Any, *, lang: str = "en", timeout: float | None = None) -> OpenAIToolMessage:
    """Run one OpenAI ``tool_calls`` item through ``source``; return the ``tool`` message."""
    return ToolAdapter(source, lang=lang, timeout=timeout).run_openai(tool_call)


def run_responses_function_call(source: Any, item: Any, *, lang: str = "en", timeout: float | None = None) -> ResponsesToolOutput:
    """Run one OpenAI Responses ``function_call`` item; return the ``function_call_output``."""
    return ToolAdapter(source, lang=lang, timeout=timeout).run_responses(item)


def run_gemini_function_call(source: Any, function_call: Any, *, lang: str = "en", timeout: float | None = None) -> GeminiFunctionResponse:
    """Run one Gemini ``function_call``; return the ``function_response``."""
    return ToolAdapter(source, lang=lang, timeout=timeout).run_gemini(function_call)
