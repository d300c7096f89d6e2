"""What the agent sees: SPEC.md's table in English, the seed's in Chinese."""

from __future__ import annotations

import pytest

from mcpsync import _agent_messages as A
from mcpsync._agent_messages import agent_message, agent_notice, invalid_field, message_kind
from mcpsync._errors import (
    AuthError,
    Cancelled,
    CircuitOpen,
    ConnectError,
    ConnectionClosed,
    InvalidParams,
    PermissionDenied,
    PoolTimeout,
    RequestTimeout,
    ServerUnavailable,
    ToolNotFound,
    error_from_code,
)

SPEC_ROWS = [
    (ConnectError("timed out", timeout=True), "tool search is unavailable: the server did not respond",
     "工具 search 当前不可用：Server 未响应"),
    (CircuitOpen("open", retry_after=30.0),
     "tool search is temporarily disabled: its server failed repeatedly; retried automatically in 30 s",
     "工具 search 暂时被禁用：Server 近期多次失败，将在 30s 后自动重试"),
    (ToolNotFound("Unknown tool: search", code=-32602),
     "tool search does not exist: check the tool name and the server configuration",
     "工具 search 不存在：请检查工具名称和 Server 配置"),
    (AuthError("401"), "tool search failed to authenticate: reconnect the MCP server",
     "工具 search 认证失败：请重新连接 MCP Server"),
    (InvalidParams("bad", data={"field": "query"}), "tool search got bad arguments: field query is malformed",
     "工具 search 参数错误：query格式不正确"),
]


@pytest.mark.parametrize(("error", "en", "zh"), SPEC_ROWS, ids=["connect", "breaker", "notfound", "auth", "params"])
def test_spec_table_in_both_languages(error: Exception, en: str, zh: str) -> None:
    assert agent_message(error, tool="search") == en
    assert agent_message(error, tool="search", lang="en") == en
    assert agent_message(error, tool="search", lang="zh") == zh


def test_stale_cache_notice() -> None:
    assert agent_notice("stale_cache", tool="weather") == "tool weather returned a stale cached result: fetching fresh data"
    assert agent_notice("stale_cache", tool="weather", lang="zh") == "工具 weather 返回了过期缓存结果：正在重新获取最新数据"


def test_breaker_seconds_are_filled_in_rounded_up() -> None:
    assert agent_message(CircuitOpen("open", retry_after=12.2), tool="t").endswith("retried automatically in 13 s")
    assert "将在 1s 后" in agent_message(CircuitOpen("half-open busy", retry_after=0.0), tool="t", lang="zh")
    assert agent_message(CircuitOpen("open"), tool="t").endswith("in 30 s")  # no retry_after: the cooldown
    assert agent_message(CircuitOpen("open"), tool="t", default_retry_after=5).endswith("in 5 s")


def test_connection_refused_is_the_connect_message() -> None:
    err = ConnectError("cannot connect to http://127.0.0.1:9/mcp: [Errno 111] Connection refused")
    assert agent_message(err, tool="x") == "tool x is unavailable: the server did not respond"


@pytest.mark.parametrize(
    ("error", "field"),
    [
        (InvalidParams("bad", data={"field": "limit"}), "limit"),
        (InvalidParams("bad", data={"path": ["filters", 0, "name"]}), "filters.0.name"),
        (InvalidParams("bad", data={"errors": [{"instancePath": "/options/depth"}]}), "options.depth"),
        (InvalidParams("bad", data={"detail": [{"loc": ["body", "arguments", "q"], "msg": "x"}]}), "q"),
        (InvalidParams("'query' is a required property"), "query"),
        (InvalidParams('Invalid value for field "count": expected integer'), "count"),
        (InvalidParams("parameter offset must be >= 0"), "offset"),
        (
            error_from_code(
                -32602,
                'MCP error -32602: Invalid arguments for tool echo: [\n  {\n    "code": "invalid_type",\n'
                '    "expected": "string",\n    "received": "undefined",\n    "path": [\n      "message"\n'
                '    ],\n    "message": "Required"\n  }\n]',
            ),
            "message",
        ),
    ],
)
def test_field_name_extraction(error: InvalidParams, field: str) -> None:
    assert invalid_field(error) == field
    assert agent_message(error, tool="t") == f"tool t got bad arguments: field {field} is malformed"
    assert agent_message(error, tool="t", lang="zh") == f"工具 t 参数错误：{field}格式不正确"


def test_invalid_params_without_a_field_name() -> None:
    err = InvalidParams("arguments must be an object")
    assert invalid_field(err) is None
    assert agent_message(err, tool="t") == "tool t got bad arguments: arguments must be an object"
    assert agent_message(err, tool="t", lang="zh") == "工具 t 参数错误：arguments must be an object"


@pytest.mark.parametrize(
    ("error", "kind"),
    [
        (ServerUnavailable("down"), "unavailable"),
        (RequestTimeout("t"), "request_timeout"),
        (ConnectionClosed("eof"), "connection_lost"),
        (PoolTimeout("busy"), "busy"),
        (PermissionDenied("403"), "permission"),
        (Cancelled("c"), "cancelled"),
        (error_from_code(-32603, "database down"), "server_error"),
        (ValueError("weird"), "error"),
    ],
)
def test_other_kinds_have_texts_in_both_languages(error: Exception, kind: str) -> None:
    assert message_kind(error) == kind
    for lang in ("en", "zh"):
        text = agent_message(error, tool="lookup", lang=lang)
        assert "lookup" in text and "{" not in text
    assert agent_message(error_from_code(-32603, "database down"), tool="t").endswith("database down")


def test_every_kind_exists_in_every_language() -> None:
    assert set(A.TEMPLATES["en"]) == set(A.TEMPLATES["zh"])
    assert A.LANGUAGES == ("en", "zh")


def test_templates_are_overridable() -> None:
    err = CircuitOpen("open", retry_after=4)
    assert agent_message(err, tool="t", templates={"breaker_open": "{tool} off for {seconds}s"}) == "t off for 4s"
    # a broken override never breaks the error path
    text = agent_message(err, tool="t", templates={"breaker_open": "{nonsense}"})
    assert text.startswith("tool t failed")


def test_global_table_edit_and_unknown_language(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(A.TEMPLATES["en"], "auth", "{tool}: log in again")
    assert agent_message(AuthError("401"), tool="t") == "t: log in again"
    assert agent_message(AuthError("401"), tool="t", lang="fr") == "t: log in again"  # falls back to English
