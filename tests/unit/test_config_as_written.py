"""Configurations as people write them: dicts, VS Code's JSON with comments, typos, ``disabled``."""

from __future__ import annotations

import json

import pytest

from mcpsync import Client
from mcpsync._config import ConfigError, load_config, parse_config, strip_jsonc

DEMO = {"command": "python", "args": ["-m", "mcpsync.server.demo"]}


def test_a_dict_is_a_configuration() -> None:
    cfg = load_config({"mcpServers": {"demo": DEMO}})
    assert cfg["demo"].transport == "stdio" and cfg.source is None


VSCODE = """{
  // VS Code's .vscode/mcp.json: comments and trailing commas
  "inputs": [],
  "servers": {
    /* the time server */
    "time": {"type": "stdio", "command": "uvx", "args": ["mcp-server-time",],},
    "web": {"url": "https://example.com/mcp?a=1//not-a-comment", "headers": {"X": "/* kept */"}},
  },
}
"""


def test_json_with_comments_and_trailing_commas(tmp_path) -> None:
    path = tmp_path / "mcp.json"
    path.write_text(VSCODE)
    cfg = load_config(path)
    assert cfg["time"].args == ("mcp-server-time",)
    assert cfg["web"].url == "https://example.com/mcp?a=1//not-a-comment"  # strings are never touched
    assert cfg["web"].headers["X"] == "/* kept */"


@pytest.mark.parametrize("text", [
    '{"a": "\\" // still a string", "b": 1}',
    '{"a": [1, 2, /* c */ ], "b": {"c": 3 , // x\n}}',
    '["a,]", "b,}" ,]',
    '{"s": "escaped \\\\"} ',
    '{}  // end',
    '{"u": "http://x/*y*/"}',
])
def test_strip_jsonc_keeps_strings_and_positions(text: str) -> None:
    out = strip_jsonc(text)
    assert len(out) == len(text) and out.count("\n") == text.count("\n")
    expected = {
        0: {"a": '" // still a string', "b": 1},
        1: {"a": [1, 2], "b": {"c": 3}},
        2: ["a,]", "b,}"],
        3: {"s": "escaped \\"},
        4: {},
        5: {"u": "http://x/*y*/"},
    }
    assert json.loads(out) in expected.values()


def test_a_real_error_still_points_at_its_line(tmp_path) -> None:
    path = tmp_path / "mcp.json"
    path.write_text('{\n  // a comment\n  "mcpServers": {\n    "a": {"command" "x"}\n  }\n}\n')
    with pytest.raises(ConfigError, match="line 4 column"):
        load_config(path)


@pytest.mark.parametrize("key, meant", [
    ("enviroment", "env"), ("environment", "env"), ("arguments", "args"), ("comand", "command"),
    ("URL", "url"), ("Headers", "headers"), ("timout", "timeout"), ("disable", "disabled"),
])
def test_misspelt_keys_are_errors_with_a_hint(key: str, meant: str) -> None:
    entry = {"command": "python"} if meant not in ("url", "headers") else {"url": "https://x.test/mcp"}
    entry = {**entry, key: {} if meant in ("env", "headers") else "x"}
    with pytest.raises(ConfigError) as info:
        parse_config({"mcpServers": {"s": entry}}, strict=True)
    assert f"did you mean {meant!r}" in str(info.value)
    assert info.value.field == f"mcpServers.s.{key}"


def test_keys_editors_add_are_kept_quietly() -> None:
    cfg = parse_config({"mcpServers": {"s": {**DEMO, "autoApprove": [], "alwaysAllow": [], "envFile": ".env",
                                             "description": "demo", "someEditorFlag": True}}})
    assert set(cfg["s"].extra) == {"autoApprove", "alwaysAllow", "envFile", "description", "someEditorFlag"}


def test_a_misspelt_top_level_key_gets_a_hint() -> None:
    with pytest.raises(ConfigError, match="found 'mcpServer', did you mean \"mcpServers\""):
        parse_config({"mcpServer": {"s": DEMO}})


def test_a_disabled_server_is_refused_by_name_with_a_clear_error() -> None:
    config = {"mcpServers": {"off": {**DEMO, "disabled": True}}}
    with pytest.raises(ConfigError) as info:
        Client.from_config(config, "off")
    assert "disabled" in str(info.value) and "allow_disabled=True" in str(info.value)
    assert info.value.field == "mcpServers.off.disabled"
    client = Client.from_config(config, "off", allow_disabled=True)  # built, not started
    client.close()


def test_other_editors_spellings_are_read() -> None:
    cfg = parse_config({"mcpServers": {
        "windsurf": {"serverUrl": "https://w.example.test/mcp"},
        "gemini": {"httpUrl": "https://g.example.test/mcp"},
        "cline": {"transportType": "sse", "url": "https://c.example.test/sse"},
    }})
    assert (cfg["windsurf"].transport, cfg["windsurf"].url) == ("http", "https://w.example.test/mcp")
    assert (cfg["gemini"].transport, cfg["gemini"].url) == ("http", "https://g.example.test/mcp")
    assert cfg["cline"].transport == "sse"
    assert not cfg["windsurf"].extra
    with pytest.raises(ConfigError, match="give either 'url' or 'serverUrl'"):
        parse_config({"mcpServers": {"x": {"serverUrl": "https://a.test/mcp", "url": "https://b.test/mcp"}}})["x"]
