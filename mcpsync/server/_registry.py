"""The Local tool registry: tools, resources and prompts as plain Python functions.

One :class:`Registry` is served three ways: in-process by the Local transport
(:class:`mcpsync.transports.local.LocalChannel`, no serialisation), over stdio by
:func:`mcpsync.server.serve_stdio` (both protocol eras), and so over WebSocket / gRPC
through the bridge.

Example:
    >>> from mcpsync.server import Registry
    >>> reg = Registry("calc", "1.0")
    >>> @reg.tool()
    ... def add(a: int, b: int) -> int:
    ...     "Add two integers."
    ...     return a + b
    >>> reg.call_tool("add", {"a": 1, "b": 2}).structured_content
    {'result': 3}
    >>> reg.call_tool("add", {"a": 1, "b": "x"})
    Traceback (most recent call last):
    ...
    mcpsync._errors.InvalidParams: tool add: argument 'b' must be integer
"""

from __future__ import annotations

import base64
import inspect
import re
import threading
import typing
from dataclasses import dataclass, field
from typing import Any, Callable, Mapping

import msgspec

from .._errors import InvalidParams, ResourceNotFound, ToolNotFound
from ._context import Context
from .._messages import (
    CallToolResult,
    EmbeddedResource,
    ImageContent,
    AudioContent,
    ResourceLink,
    TextContent,
    Tool,
    ToolAnnotations,
)

__all__ = ["Registry", "Context", "ToolEntry"]

_TOOL_NAME = re.compile(r"[A-Za-z0-9_.\-]{1,128}")
_CONTENT = (TextContent, ImageContent, AudioContent, ResourceLink, EmbeddedResource)
_json_text = msgspec.json.encode

_SIMPLE: dict[Any, tuple[str, tuple[type, ...]]] = {
    int: ("integer", (int,)),
    float: ("number", (int, float)),
    str: ("string", (str,)),
    bool: ("boolean", (bool,)),
    list: ("array", (list, tuple)),
    dict: ("object", (dict,)),
}


_NO_CONTEXT = Context()


def _is_context(annotation: Any) -> bool:
    if annotation is Context:
        return True
    return Context in typing.get_args(annotation)


def _json_type(annotation: Any) -> tuple[dict[str, Any], tuple[type, ...] | None]:
    """A JSON schema fragment and an isinstance check for a parameter annotation."""
    if annotation is inspect.Parameter.empty or annotation is Any:
        return {}, None
    origin = typing.get_origin(annotation)
    if origin is typing.Union or (origin is not None and str(origin) == "<class 'types.UnionType'>"):
        args = [a for a in typing.get_args(annotation) if a is not type(None)]
        if len(args) == 1:
            inner, check = _json_type(args[0])
            return inner, (check + (type(None),)) if check else None
        return {}, None
    if origin is typing.Literal:
        values = list(typing.get_args(annotation))
        return {"enum": values}, None
    base = origin or annotation
    if base in _SIMPLE:
        name, check = _SIMPLE[base]
        schema: dict[str, Any] = {"type": name}
        if base is list and typing.get_args(annotation):
            item, _ = _json_type(typing.get_args(annotation)[0])
            if item:
                schema["items"] = item
        return schema, check
    return {}, None


@dataclass(slots=True)
class ToolEntry:
    """A registered tool: its wire description and how to call it."""

    fn: Callable[..., Any]
    tool: Tool
    names: frozenset[str]
    required: frozenset[str]
    checks: dict[str, tuple[type, ...]]
    var_kw: bool
    ctx_param: str | None
    structured: bool


@dataclass(slots=True)
class ResourceEntry:
    fn: Callable[..., Any]
    uri: str
    name: str
    title: str | None
    description: str | None
    mime_type: str | None
    pattern: re.Pattern[str] | None = None

    def describe(self) -> dict[str, Any]:
        key = "uriTemplate" if self.pattern is not None else "uri"
        out: dict[str, Any] = {key: self.uri, "name": self.name}
        if self.title:
            out["title"] = self.title
        if self.description:
            out["description"] = self.description
        if self.mime_type:
            out["mimeType"] = self.mime_type
        return out


@dataclass(slots=True)
class PromptEntry:
    fn: Callable[..., Any]
    name: str
    title: str | None
    description: str | None
    arguments: list[dict[str, Any]] = field(default_factory=list)

    def describe(self) -> dict[str, Any]:
        out: dict[str, Any] = {"name": self.name, "arguments": self.arguments}
        if self.title:
            out["title"] = self.title
        if self.description:
            out["description"] = self.description
        return out


class Registry:
    """Tools, resources and prompts registered as in-process Python functions.

    Args:
        name: the server name reported to clients.
        version: the server version reported to clients.
        title: a display name.
        instructions: instructions for the model, reported at the handshake.

    Example:
        >>> reg = Registry("demo")
        >>> @reg.resource("demo://hello", mime_type="text/plain")
        ... def hello() -> str:
        ...     return "hello"
        >>> reg.read_resource("demo://hello")["contents"][0]["text"]
        'hello'
    """

    def __init__(self, name: str = "mcpsync-local", version: str = "0.1.0", *, title: str | None = None,
                 instructions: str | None = None) -> None:
        self.name = name
        self.version = version
        self.title = title
        self.instructions = instructions
        self._lock = threading.Lock()
        self._tools: dict[str, ToolEntry] = {}
        self._resources: dict[str, ResourceEntry] = {}
        self._templates: list[ResourceEntry] = []
        self._prompts: dict[str, PromptEntry] = {}
        self._tool_list: list[Tool] | None = None

    # ------------------------------------------------------------------ registration

    def tool(
        self,
        name: str | None = None,
        *,
        title: str | None = None,
        description: str | None = None,
        input_schema: Mapping[str, Any] | None = None,
        output_schema: Mapping[str, Any] | None = None,
        annotations: Mapping[str, Any] | ToolAnnotations | None = None,
        structured: bool | None = None,
    ) -> Callable[[Callable[..., Any]], Callable[..., Any]]:
        """Decorator registering a function as a tool (the function is returned unchanged).

        The input schema comes from the signature (``int``, ``float``, ``str``, ``bool``,
        ``list``, ``dict``, ``Optional``/``Literal`` of those) unless given. A return
        annotation of ``int``/``float``/``bool``/``list`` makes the result structured,
        ``{"result": value}``; a returned ``dict`` is the structured content itself.
        """
        if callable(name):  # used bare: @reg.tool
            fn, name = name, None
            self.add_tool(fn)
            return fn

        def deco(fn: Callable[..., Any]) -> Callable[..., Any]:
            self.add_tool(fn, name=name, title=title, description=description, input_schema=input_schema,
                          output_schema=output_schema, annotations=annotations, structured=structured)
            return fn

        return deco

    def add_tool(
        self,
        fn: Callable[..., Any],
        *,
        name: str | None = None,
        title: str | None = None,
        description: str | None = None,
        input_schema: Mapping[str, Any] | None = None,
        output_schema: Mapping[str, Any] | None = None,
        annotations: Mapping[str, Any] | ToolAnnotations | None = None,
        structured: bool | None = None,
    ) -> ToolEntry:
        """Register ``fn`` as a tool (see :meth:`tool`)."""
        tool_name = name or fn.__name__
        if not _TOOL_NAME.fullmatch(tool_name):
            raise ValueError(f"invalid tool name {tool_name!r}: use 1-128 of A-Z a-z 0-9 _ - .")
        if inspect.iscoroutinefunction(fn):
            raise TypeError(f"tool {tool_name}: async functions are not supported; register a plain function")
        sig = inspect.signature(fn)
        try:
            hints = typing.get_type_hints(fn)
        except Exception:  # noqa: BLE001 - unresolvable annotations: use the raw ones
            hints = {}
        props: dict[str, Any] = {}
        required: list[str] = []
        checks: dict[str, tuple[type, ...]] = {}
        var_kw = False
        ctx_param: str | None = None
        for p in sig.parameters.values():
            ann = hints.get(p.name, p.annotation)
            if _is_context(ann) or (p.name == "ctx" and ann is inspect.Parameter.empty):
                ctx_param = p.name
                continue
            if p.kind is inspect.Parameter.VAR_KEYWORD:
                var_kw = True
                continue
            if p.kind in (inspect.Parameter.VAR_POSITIONAL, inspect.Parameter.POSITIONAL_ONLY):
                raise TypeError(f"tool {tool_name}: parameters must be passable by keyword ({p.name})")
            schema, check = _json_type(ann)
            if p.default is not inspect.Parameter.empty:
                if p.default is None or isinstance(p.default, (str, int, float, bool)):
                    schema = {**schema, "default": p.default}
            else:
                required.append(p.name)
            props[p.name] = schema
            if check is not None:
                checks[p.name] = check
        in_schema = dict(input_schema) if input_schema is not None else {
            "type": "object", "properties": props, **({"required": required} if required else {}),
        }
        ret = hints.get("return", sig.return_annotation)
        ret_schema, _ = _json_type(ret)
        wrap = structured if structured is not None else (
            output_schema is None and ret_schema.get("type") in ("integer", "number", "boolean", "array")
        )
        out_schema = dict(output_schema) if output_schema is not None else (
            {"type": "object", "properties": {"result": ret_schema}, "required": ["result"]} if wrap else None
        )
        if isinstance(annotations, Mapping):
            annotations = msgspec.convert(dict(annotations), ToolAnnotations)
        doc = inspect.getdoc(fn)
        tool = Tool.build(
            tool_name,
            title=title,
            description=description if description is not None else (doc or None),
            input_schema=in_schema,
            output_schema=out_schema,
            annotations=annotations,
        )
        entry = ToolEntry(
            fn=fn, tool=tool, names=frozenset(props), required=frozenset(required), checks=checks,
            var_kw=var_kw, ctx_param=ctx_param, structured=bool(wrap),
        )
        with self._lock:
            self._tools[tool_name] = entry
            self._tool_list = None
        return entry

    def resource(
        self,
        uri: str,
        *,
        name: str | None = None,
        title: str | None = None,
        description: str | None = None,
        mime_type: str | None = "text/plain",
    ) -> Callable[[Callable[..., Any]], Callable[..., Any]]:
        """Decorator registering a resource. ``{param}`` parts in ``uri`` make it a template
        whose values are passed to the function as keyword arguments. The function returns
        ``str`` (text) or ``bytes`` (a blob)."""

        def deco(fn: Callable[..., Any]) -> Callable[..., Any]:
            entry = ResourceEntry(fn=fn, uri=uri, name=name or fn.__name__, title=title,
                                  description=description if description is not None else inspect.getdoc(fn),
                                  mime_type=mime_type)
            if "{" in uri:
                parts = re.split(r"\{(\w+)\}", uri)
                rx = "".join(re.escape(p) if i % 2 == 0 else f"(?P<{p}>[^/]+)" for i, p in enumerate(parts))
                entry.pattern = re.compile(rx + r"\Z")
                with self._lock:
                    self._templates.append(entry)
            else:
                with self._lock:
                    self._resources[uri] = entry
            return fn

        return deco

    def prompt(
        self,
        name: str | None = None,
        *,
        title: str | None = None,
        description: str | None = None,
    ) -> Callable[[Callable[..., Any]], Callable[..., Any]]:
        """Decorator registering a prompt. The function takes string arguments and returns
        a ``str`` (one user message) or a list of ``{"role", "content"}`` messages."""

        def deco(fn: Callable[..., Any]) -> Callable[..., Any]:
            sig = inspect.signature(fn)
            args = [
                {"name": p.name, "required": p.default is inspect.Parameter.empty}
                for p in sig.parameters.values()
                if p.kind not in (inspect.Parameter.VAR_KEYWORD, inspect.Parameter.VAR_POSITIONAL)
            ]
            entry = PromptEntry(fn=fn, name=name or fn.__name__, title=title,
                                description=description if description is not None else inspect.getdoc(fn),
                                arguments=args)
            with self._lock:
                self._prompts[entry.name] = entry
            return fn

        return deco

    # ------------------------------------------------------------------ tools

    def local_handle(self) -> Any:
        """A :class:`~mcpsync.server._serve.LocalHandle`: this registry as the Local transport serves it."""
        from ._serve import LocalHandle

        return LocalHandle(self)

    def list_tools(self) -> list[Tool]:
        """The registered tools, in registration order."""
        tools = self._tool_list
        if tools is None:
            with self._lock:
                tools = self._tool_list = [e.tool for e in self._tools.values()]
        return tools

    def call_tool(self, name: str, arguments: Mapping[str, Any] | None = None, ctx: Context | None = None) -> CallToolResult:
        """Call a tool in the calling thread.

        Raises:
            ToolNotFound: no such tool.
            InvalidParams: an argument is missing, unknown or of the wrong JSON type.

        An exception raised by the tool becomes a result with ``is_error=True``.
        """
        entry = self._tools.get(name)
        if entry is None:
            raise ToolNotFound(f"Unknown tool: {name}", code=-32602, data={"tool": name})
        args = arguments if arguments is not None else {}
        if entry.required and not entry.required.issubset(args.keys()):
            missing = sorted(entry.required - args.keys())
            raise InvalidParams(f"tool {name}: missing argument {missing[0]!r}", code=-32602,
                                data={"tool": name, "field": missing[0]})
        if not entry.var_kw:
            extra = args.keys() - entry.names
            if extra:
                field_name = sorted(extra)[0]
                raise InvalidParams(f"tool {name}: unknown argument {field_name!r}", code=-32602,
                                    data={"tool": name, "field": field_name})
        for key, check in entry.checks.items():
            if key in args:
                value = args[key]
                if not isinstance(value, check) or (isinstance(value, bool) and bool not in check):
                    raise InvalidParams(
                        f"tool {name}: argument {key!r} must be {entry.tool.input_schema['properties'][key].get('type')}",
                        code=-32602, data={"tool": name, "field": key},
                    )
        try:
            if entry.ctx_param is not None:
                value = entry.fn(**args, **{entry.ctx_param: ctx or _NO_CONTEXT})
            else:
                value = entry.fn(**args)
            return _to_result(value, entry.structured)
        except Exception as exc:  # a failing tool is a result, not a crash
            return CallToolResult(content=[TextContent(text=f"{type(exc).__name__}: {exc}")], is_error=True)

    # ------------------------------------------------------------------ resources

    def list_resources(self) -> list[dict[str, Any]]:
        return [e.describe() for e in self._resources.values()]

    def list_resource_templates(self) -> list[dict[str, Any]]:
        return [e.describe() for e in self._templates]

    def read_resource(self, uri: str) -> dict[str, Any]:
        """``resources/read`` result for ``uri``. Raises :class:`ResourceNotFound`."""
        entry = self._resources.get(uri)
        kwargs: dict[str, str] = {}
        if entry is None:
            for t in self._templates:
                m = t.pattern.match(uri) if t.pattern is not None else None
                if m:
                    entry, kwargs = t, m.groupdict()
                    break
        if entry is None:
            raise ResourceNotFound(f"Resource not found: {uri}", code=-32002, data={"uri": uri})
        value = entry.fn(**kwargs)
        item: dict[str, Any] = {"uri": uri}
        if entry.mime_type:
            item["mimeType"] = entry.mime_type
        if isinstance(value, (bytes, bytearray)):
            item["blob"] = base64.b64encode(value).decode("ascii")
        else:
            item["text"] = value if isinstance(value, str) else _json_text(value).decode()
        return {"contents": [item]}

    # ------------------------------------------------------------------ prompts

    def list_prompts(self) -> list[dict[str, Any]]:
        return [e.describe() for e in self._prompts.values()]

    def get_prompt(self, name: str, arguments: Mapping[str, Any] | None = None) -> dict[str, Any]:
        """``prompts/get`` result. Raises :class:`InvalidParams` for an unknown prompt or argument."""
        entry = self._prompts.get(name)
        if entry is None:
            raise InvalidParams(f"Unknown prompt: {name}", code=-32602, data={"prompt": name})
        args = dict(arguments or {})
        for a in entry.arguments:
            if a["required"] and a["name"] not in args:
                raise InvalidParams(f"prompt {name}: missing argument {a['name']!r}", code=-32602,
                                    data={"prompt": name, "field": a["name"]})
        value = entry.fn(**args)
        if isinstance(value, str):
            messages = [{"role": "user", "content": {"type": "text", "text": value}}]
        else:
            messages = [msgspec.to_builtins(m) for m in value]
        out: dict[str, Any] = {"messages": messages}
        if entry.description:
            out["description"] = entry.description
        return out


def _to_result(value: Any, structured: bool) -> CallToolResult:
    if isinstance(value, CallToolResult):
        return value
    if isinstance(value, str):
        return CallToolResult(content=[TextContent(text=value)])
    if value is None:
        return CallToolResult(content=[])
    if isinstance(value, _CONTENT):
        return CallToolResult(content=[value])
    if isinstance(value, dict):
        return CallToolResult(content=[TextContent(text=_json_text(value).decode())], structured_content=value)
    if isinstance(value, (list, tuple)) and value and all(isinstance(v, _CONTENT) for v in value):
        return CallToolResult(content=list(value))
    if structured:
        text = _json_text(value).decode() if not isinstance(value, (int, float)) or isinstance(value, bool) else str(value)
        return CallToolResult(content=[TextContent(text=text)], structured_content={"result": value})
    return CallToolResult(content=[TextContent(text=_json_text(value).decode())])
