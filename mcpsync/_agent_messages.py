"""What the agent sees when a tool call fails: SPEC.md's table, in English and Chinese.

:func:`agent_message` turns an exception into one short sentence naming the tool, with
the malformed field (from :class:`InvalidParams`) and the seconds until the breaker
retries (from :class:`CircuitOpen`) filled in. The English texts are SPEC.md's, the
Chinese ones their counterparts (错误传播到 Agent). Templates are ``str.format`` strings keyed
by kind and language; override them per call or edit :data:`TEMPLATES`.

Example:
    >>> from mcpsync._errors import CircuitOpen, InvalidParams
    >>> agent_message(CircuitOpen("open", retry_after=12.2), tool="search")
    'tool search is temporarily disabled: its server failed repeatedly; retried automatically in 13 s'
    >>> agent_message(InvalidParams("bad", data={"field": "query"}), tool="search", lang="zh")
    '工具 search 参数错误：query格式不正确'
"""

from __future__ import annotations

import json
import math
import re
from typing import Any, Mapping

from ._errors import (
    AuthError,
    Cancelled,
    CircuitOpen,
    ConnectError,
    ConnectionClosed,
    InvalidParams,
    MCPError,
    NetworkError,
    PermissionDenied,
    PoolTimeout,
    ProtocolError,
    RemoteError,
    RequestTimeout,
    ResourceNotFound,
    ServerUnavailable,
    ToolNotFound,
)

__all__ = [
    "TEMPLATES",
    "LANGUAGES",
    "agent_message",
    "agent_notice",
    "message_kind",
    "invalid_field",
]

#: kind → template, per language. Placeholders: ``{tool}``, ``{field}``, ``{seconds}``,
#: ``{detail}`` (the error's own message), ``{timeout}`` (seconds, when known).
TEMPLATES: dict[str, dict[str, str]] = {
    "en": {
        "connect_timeout": "tool {tool} is unavailable: the server did not respond",
        "breaker_open": (
            "tool {tool} is temporarily disabled: its server failed repeatedly; retried automatically in {seconds} s"
        ),
        "tool_not_found": "tool {tool} does not exist: check the tool name and the server configuration",
        "auth": "tool {tool} failed to authenticate: reconnect the MCP server",
        "invalid_params": "tool {tool} got bad arguments: field {field} is malformed",
        "invalid_params_unknown_field": "tool {tool} got bad arguments: {detail}",
        "stale_cache": "tool {tool} returned a stale cached result: fetching fresh data",
        # beyond SPEC.md's table
        "server_starting": "tool {tool} is not available yet: its server is still starting; try again shortly",
        "server_failed": "tool {tool} is unavailable: its server could not be started or reached ({detail})",
        "unavailable": "tool {tool} is unavailable: its server failed repeatedly and is marked unavailable",
        "request_timeout": "tool {tool} timed out: the server did not answer in time",
        "connection_lost": "tool {tool} failed: the connection to its server was lost",
        "busy": "tool {tool} is busy: every connection to its server is in use; try again shortly",
        "permission": "tool {tool} is not permitted: the credentials lack the permission",
        "cancelled": "tool {tool} was cancelled",
        "resource_not_found": "tool {tool} failed: the resource does not exist",
        "protocol": "tool {tool} failed: the server sent an invalid response",
        "server_error": "tool {tool} failed: the server reported an error: {detail}",
        "error": "tool {tool} failed: {detail}",
    },
    "zh": {
        "connect_timeout": "工具 {tool} 当前不可用：Server 未响应",
        "breaker_open": "工具 {tool} 暂时被禁用：Server 近期多次失败，将在 {seconds}s 后自动重试",
        "tool_not_found": "工具 {tool} 不存在：请检查工具名称和 Server 配置",
        "auth": "工具 {tool} 认证失败：请重新连接 MCP Server",
        "invalid_params": "工具 {tool} 参数错误：{field}格式不正确",
        "invalid_params_unknown_field": "工具 {tool} 参数错误：{detail}",
        "stale_cache": "工具 {tool} 返回了过期缓存结果：正在重新获取最新数据",
        "server_starting": "工具 {tool} 暂不可用：其 Server 仍在启动中，请稍后重试",
        "server_failed": "工具 {tool} 当前不可用：其 Server 无法启动或连接（{detail}）",
        "unavailable": "工具 {tool} 当前不可用：Server 多次重连失败，已标记为不可用",
        "request_timeout": "工具 {tool} 调用超时：Server 未在规定时间内响应",
        "connection_lost": "工具 {tool} 调用失败：与 Server 的连接已断开",
        "busy": "工具 {tool} 繁忙：到 Server 的连接均在使用中，请稍后重试",
        "permission": "工具 {tool} 无权限执行：当前凭据缺少所需权限",
        "cancelled": "工具 {tool} 的调用已取消",
        "resource_not_found": "工具 {tool} 调用失败：资源不存在",
        "protocol": "工具 {tool} 调用失败：Server 返回了无效响应",
        "server_error": "工具 {tool} 调用失败：Server 报告错误：{detail}",
        "error": "工具 {tool} 调用失败：{detail}",
    },
}

LANGUAGES = tuple(TEMPLATES)

# (exception class, kind), most specific first.
_KINDS: tuple[tuple[type[BaseException], str], ...] = (
    (CircuitOpen, "breaker_open"),
    (ServerUnavailable, "unavailable"),
    (PoolTimeout, "busy"),
    (ConnectError, "connect_timeout"),
    (RequestTimeout, "request_timeout"),
    (ConnectionClosed, "connection_lost"),
    (NetworkError, "connection_lost"),
    (ToolNotFound, "tool_not_found"),
    (InvalidParams, "invalid_params"),
    (ResourceNotFound, "resource_not_found"),
    (PermissionDenied, "permission"),
    (AuthError, "auth"),
    (Cancelled, "cancelled"),
    (ProtocolError, "protocol"),
    (RemoteError, "server_error"),
)


def message_kind(error: BaseException) -> str:
    """The template kind for ``error`` (``"error"`` when nothing more specific fits). A
    :class:`ToolNotFound` from a MultiClient whose server is still starting or failed
    (``server_state``) says so, not that the tool does not exist."""
    state = getattr(error, "server_state", None) if isinstance(error, ToolNotFound) else None
    if state in ("starting", "failed"):
        return f"server_{state}"
    for cls, kind in _KINDS:
        if isinstance(error, cls):
            return kind
    return "error"


_FIELD_KEYS = ("field", "param", "parameter", "argument", "property", "name")
_NAME = r"[A-Za-z_$][\w$.\-\[\]]*"
_MESSAGE_PATTERNS = (
    re.compile(rf"['\"`]({_NAME})['\"`] is a required property"),
    re.compile(rf"(?:field|property|parameter|param|argument)s?\s*[:=]?\s*['\"`]({_NAME})['\"`]", re.I),
    re.compile(rf"(?:field|property|parameter|param|argument)s?\s*[:=]\s*({_NAME})", re.I),
    re.compile(rf"(?:field|property|parameter)\s+({_NAME})\s", re.I),
    re.compile(rf"\bat\s+['\"`]?(/[\w/\-]+)['\"`]?"),
)


def _path_text(path: Any) -> str | None:
    if isinstance(path, str):
        text = path.strip().strip("/").replace("/", ".") if path.startswith("/") else path.strip()
        return text or None
    if isinstance(path, (list, tuple)) and path:
        parts = [str(p) for p in path if p not in ("body", "arguments", "params")]
        return ".".join(parts) or None
    return None


def _field_from_data(data: Any, depth: int = 0) -> str | None:
    if depth > 3 or data is None:
        return None
    if isinstance(data, Mapping):
        for key in _FIELD_KEYS:
            value = data.get(key)
            if isinstance(value, str) and value:
                return value
        for key in ("path", "loc", "instancePath", "instance_path", "pointer"):
            text = _path_text(data.get(key))
            if text:
                return text
        for key in ("errors", "issues", "details", "detail"):
            found = _field_from_data(data.get(key), depth + 1)
            if found:
                return found
        return None
    if isinstance(data, (list, tuple)):
        for item in data:
            found = _field_from_data(item, depth + 1)
            if found:
                return found
    if isinstance(data, str):
        return _field_from_message(data, depth + 1)
    return None


def _field_from_message(message: str, depth: int = 0) -> str | None:
    # The official TypeScript SDK puts zod issues, as JSON, into the message.
    start = message.find("[")
    if start >= 0 and depth <= 3:
        end = message.rfind("]")
        if end > start:
            try:
                found = _field_from_data(json.loads(message[start : end + 1]), depth + 1)
            except ValueError:
                found = None
            if found:
                return found
    for pattern in _MESSAGE_PATTERNS:
        match = pattern.search(message)
        if match:
            return _path_text(match.group(1)) or match.group(1)
    return None


def invalid_field(error: BaseException) -> str | None:
    """The malformed field named by an invalid-params error: from its ``data`` (``field``,
    ``path``, JSON-Schema ``instancePath``, pydantic ``loc``, zod ``issues``...), else from
    its message; ``None`` when neither names one."""
    return _field_from_data(getattr(error, "data", None)) or _field_from_message(
        getattr(error, "message", None) or str(error)
    )


def _seconds(error: BaseException, default: float) -> int:
    value = getattr(error, "retry_after", None)
    if not isinstance(value, (int, float)) or value != value:  # missing or NaN
        value = default
    return max(1, math.ceil(value))


def agent_notice(
    kind: str,
    *,
    tool: str,
    lang: str = "en",
    templates: Mapping[str, str] | None = None,
    **values: Any,
) -> str:
    """Render one template by kind (e.g. ``"stale_cache"``, which is no exception).

    Args:
        kind: a key of :data:`TEMPLATES`.
        tool: the tool name.
        lang: ``"en"`` or ``"zh"`` (unknown languages fall back to English).
        templates: overrides for this call, kind → template.
        **values: the other placeholders.

    Example:
        >>> agent_notice("stale_cache", tool="weather", lang="zh")
        '工具 weather 返回了过期缓存结果：正在重新获取最新数据'
    """
    table = TEMPLATES.get(lang, TEMPLATES["en"])
    template = (templates or {}).get(kind) or table.get(kind) or TEMPLATES["en"].get(kind) or table["error"]
    values = {"field": "?", "seconds": "?", "detail": "", "timeout": "?", **values, "tool": tool}
    try:
        return template.format(**values)
    except (KeyError, IndexError, ValueError):  # a bad override: never fail the error path
        return table["error"].format(**values)


def agent_message(
    error: BaseException,
    *,
    tool: str,
    lang: str = "en",
    templates: Mapping[str, str] | None = None,
    default_retry_after: float = 30.0,
) -> str:
    """The sentence the agent sees for a failed call of ``tool``.

    Args:
        error: what the call raised.
        tool: the tool name.
        lang: ``"en"`` (SPEC.md's texts) or ``"zh"`` (the Chinese texts).
        templates: overrides for this call, kind → template (see :data:`TEMPLATES`).
        default_retry_after: seconds shown when a :class:`CircuitOpen` carries none.

    Returns:
        One line of text.
    """
    kind = message_kind(error)
    detail = (error.message if isinstance(error, MCPError) else str(error)) or type(error).__name__
    values: dict[str, Any] = {"detail": detail}
    if kind == "breaker_open":
        values["seconds"] = _seconds(error, default_retry_after)
    elif kind == "invalid_params":
        field = invalid_field(error)
        if field is None:
            kind = "invalid_params_unknown_field"
        else:
            values["field"] = field
    timeout = getattr(error, "timeout", None)
    if isinstance(timeout, (int, float)) and not isinstance(timeout, bool):
        values["timeout"] = timeout
    return agent_notice(kind, tool=tool, lang=lang, templates=templates, **values)
