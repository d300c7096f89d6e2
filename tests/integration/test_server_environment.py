"""A stdio server sees a minimal environment, as the official SDK gives it (HOME, LOGNAME,
PATH, SHELL, TERM, USER), plus what the caller passes: never the client's API keys unless
asked (``inherit_env=True``). A real server prints its environment back."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

from mcpsync import Client, ClientSpec
from tests.helpers import scripted_server

pytestmark = pytest.mark.timeout(60)

BODY = """
import os
def answer(method, params):
    if method == "tools/call":
        return {"content": [{"type": "text", "text": json.dumps(dict(os.environ))}]}
    if method == "tools/list":
        return {"tools": [{"name": "env", "inputSchema": {"type": "object"}}]}
    return None
"""
SECRET = "sk-live-do-not-leak"
MINIMAL = {"HOME", "LOGNAME", "PATH", "SHELL", "TERM", "USER"}


@pytest.fixture
def printenv(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> tuple[str, list[str]]:
    monkeypatch.setenv("OPENAI_API_KEY", SECRET)
    monkeypatch.setenv("HOME", "/root-of-tests")
    return scripted_server(tmp_path, BODY, name="printenv")


def _env(client: Client) -> dict[str, str]:
    with client:
        return dict(json.loads(client.call_tool("env", timeout=30).text))


def test_a_server_sees_only_the_minimal_environment_by_default(printenv: tuple[str, list[str]]):
    env = _env(Client.stdio(*printenv, mode="legacy"))
    assert "OPENAI_API_KEY" not in env and SECRET not in json.dumps(env)
    assert env["HOME"] == "/root-of-tests"
    assert set(env) - MINIMAL <= {"LC_CTYPE"}, sorted(set(env) - MINIMAL)  # (Python may set LC_CTYPE itself)


def test_env_adds_to_the_minimal_environment(printenv: tuple[str, list[str]]):
    env = _env(Client.stdio(*printenv, mode="legacy", env={"MY_SETTING": "1", "HOME": "/elsewhere"}))
    assert env["MY_SETTING"] == "1" and env["HOME"] == "/elsewhere" and "OPENAI_API_KEY" not in env


def test_inherit_env_hands_over_everything(printenv: tuple[str, list[str]]):
    env = _env(Client.stdio(*printenv, mode="legacy", inherit_env=True, env={"MY_SETTING": "1"}))
    assert env["OPENAI_API_KEY"] == SECRET and env["MY_SETTING"] == "1"
    spec = ClientSpec.stdio(*printenv, mode="legacy", inherit_env=True)
    assert _env(spec.build())["OPENAI_API_KEY"] == SECRET


def test_a_config_files_env_and_its_variables_keep_working(printenv: tuple[str, list[str]], tmp_path: Path,
                                                          monkeypatch: pytest.MonkeyPatch):
    monkeypatch.setenv("GITHUB_TOKEN", "ghp-from-the-shell")
    command, args = printenv
    path = tmp_path / "mcp.json"
    path.write_text(json.dumps({"mcpServers": {"printenv": {
        "command": command, "args": args, "env": {"GITHUB_PERSONAL_ACCESS_TOKEN": "${GITHUB_TOKEN}", "DEBUG": "1"},
    }}}))
    env = _env(Client.from_config(path, "printenv", mode="legacy"))
    assert env["GITHUB_PERSONAL_ACCESS_TOKEN"] == "ghp-from-the-shell" and env["DEBUG"] == "1"
    assert "GITHUB_TOKEN" not in env and "OPENAI_API_KEY" not in env


def test_the_bridge_hands_its_upstream_the_minimal_environment(printenv: tuple[str, list[str]]):
    from mcpsync.server._upstream import upstream_factory

    command, args = printenv
    for inherit in (False, True):
        transport = upstream_factory([command, *args], env={"X": "1"}, inherit_env=inherit)()
        assert transport.kind == "stdio"
        env = _env(Client(transport, mode="legacy"))
        assert env["X"] == "1" and ("OPENAI_API_KEY" in env) is inherit


def test_python_servers_still_start_without_the_clients_variables():
    """The interpreter finds itself and its packages with the minimal environment."""
    with Client.stdio(sys.executable, ["-m", "mcpsync.server.demo"], mode="legacy") as client:
        assert client.call_tool("echo", {"message": "hi"}, timeout=30).text == "hi"
