"""The `mcpsync` command against real servers: output, JSON, exit statuses, clear errors."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from mcpsync.cli import UsageError, parse_arguments
from tests.conftest import server_command

pytestmark = pytest.mark.timeout(60)

RAW = server_command("raw_server.py")


def run(*args: str, timeout: float = 45) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "mcpsync.cli", *args], capture_output=True, text=True, timeout=timeout)


def test_tools_lists_names_and_descriptions():
    p = run("tools", "--", *RAW)
    assert p.returncode == 0, p.stderr
    assert p.stdout.splitlines()[0].split() == ["echo", "Echo", "the", "message"]


def test_tools_json():
    p = run("tools", "--json", "--", *RAW)
    assert p.returncode == 0
    tools = json.loads(p.stdout)
    assert tools[1]["name"] == "add" and "inputSchema" in tools[1]


def test_call_text_and_json_output():
    p = run("call", "add", "a=1", "b=2", "--", *RAW)
    assert (p.returncode, p.stdout.strip()) == (0, "3")
    p = run("call", "add", "a=1", "b=2.5", "--json", "--", *RAW)
    assert json.loads(p.stdout)["structuredContent"] == {"result": 3.5}


def test_call_keeps_strings_for_string_properties():
    p = run("call", "echo", "message=42", "--", *RAW)
    assert p.stdout.strip() == "42"


def test_call_unknown_tool_fails_clearly():
    p = run("call", "nope", "--", *RAW)
    assert p.returncode == 2  # bad usage (issue 19, item 4)
    assert "tool 'nope' does not exist" in p.stderr and "echo" in p.stderr


def test_tool_error_result_exits_1():
    cmd = server_command("sdk_server.py")
    p = run("call", "fail", "--", *cmd)
    assert p.returncode == 1
    assert "fail" in p.stdout


def test_missing_server_command_is_a_usage_error():
    p = run("tools")
    assert p.returncode == 2 and "no server given" in p.stderr


def test_unstartable_server_exits_3():
    p = run("tools", "--", "/nonexistent/server-binary")
    assert p.returncode == 3 and "could not start" in p.stderr


def test_demo_runs_the_bundled_server():
    p = subprocess.run([sys.executable, "-m", "mcpsync.cli", "demo"], capture_output=True, text=True, timeout=45)
    assert p.returncode == 0, p.stderr
    assert "connected to" in p.stdout and "hello from mcpsync" in p.stdout and "42" in p.stdout


def test_info_reports_the_hot_path():
    p = run("info")
    assert p.returncode == 0 and ("c-extension" in p.stdout or "pure-python" in p.stdout)


def test_parse_arguments_by_schema():
    schema = {"properties": {"s": {"type": "string"}, "n": {"type": "integer"}, "o": {"type": "object"}}}
    assert parse_arguments(["s=007", "n=7", 'o={"a":1}', "free=true", "raw:=[1,2]"], schema) == {
        "s": "007",
        "n": 7,
        "o": {"a": 1},
        "free": True,
        "raw": [1, 2],
    }
    with pytest.raises(UsageError):
        parse_arguments(["n=seven"], schema)
    with pytest.raises(UsageError):
        parse_arguments(["novalue"], schema)
