"""The pytest plugin for MCP server authors (issue 34), tested with pytester: a new server
author's test file that uses only the documented fixtures runs against mcpsync's demo
server and against official-SDK servers (a script over stdio and HTTP, an object in
process), over each transport and era; options narrow the runs; pytest-benchmark reports
per tool; and the plugin changes nothing for a test suite that does not use it."""

from __future__ import annotations

import importlib.metadata
import json
import os
import sys
from pathlib import Path

import pytest

from tests.conftest import ROOT, SERVERS

pytest_plugins = ["pytester"]
pytestmark = [pytest.mark.timeout(240)]


def _plugin_args() -> list[str]:
    """``-p mcpsync.pytest_plugin`` unless the installed mcpsync registers it already."""
    registered = any(ep.value == "mcpsync.pytest_plugin" for ep in importlib.metadata.entry_points(group="pytest11"))
    return [] if registered else ["-p", "mcpsync.pytest_plugin"]


@pytest.fixture
def author(pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch) -> pytest.Pytester:
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")]))
    return pytester


def _run(author: pytest.Pytester, *args: str) -> pytest.RunResult:
    return author.runpytest_subprocess(*_plugin_args(), "-p", "no:cacheprovider", "-v", *args, timeout=200)


DEMO_TESTS = '''
import sys
import pytest

pytestmark = pytest.mark.mcp_server(
    command=[sys.executable, "-m", "mcpsync.server.demo"],
    server="mcpsync.server.demo:registry",
    eras=["modern", "legacy"],
)


def test_tools_are_listed(mcp_client):
    assert {"echo", "add", "word_count"} <= {t.name for t in mcp_client.list_tools()}


def test_add(mcp_client):
    assert mcp_client.call_tool("add", {"a": 2, "b": 3}).text == "5"


def test_a_tool_error_is_a_result(mcp_client):
    assert mcp_client.call_tool("fail", {}).is_error
'''


def test_a_server_authors_file_against_the_demo_server(author: pytest.Pytester) -> None:
    author.makepyfile(test_demo=DEMO_TESTS)
    result = _run(author)
    result.assert_outcomes(passed=12)  # 3 tests x (stdio, inprocess) x (modern, legacy)
    for variant in ("stdio-modern", "stdio-legacy", "inprocess-modern", "inprocess-legacy"):
        result.stdout.fnmatch_lines([f"*test_add?{variant}? PASSED*"])


SDK_TESTS = '''
import sys
import pytest

SERVER = {server!r}
pytestmark = pytest.mark.mcp_server(
    command=[sys.executable, SERVER],
    http_command=[sys.executable, SERVER, "http", "{{port}}"],
    eras=["modern", "legacy"],
)


def test_add(mcp_client):
    assert mcp_client.call_tool("add", {{"a": 2, "b": 40}}).structured_content == {{"result": 42}}


def test_era(mcp_client, request):
    era = request.node.callspec.id.rsplit("-", 1)[1]
    assert mcp_client.era == era
'''


def test_a_server_authors_file_against_an_sdk_script_over_stdio_and_http(author: pytest.Pytester) -> None:
    author.makepyfile(test_sdk=SDK_TESTS.format(server=str(SERVERS / "sdk_server.py")))
    result = _run(author)
    result.assert_outcomes(passed=8)  # 2 tests x (stdio, http) x (modern, legacy)
    for variant in ("stdio-modern", "stdio-legacy", "http-modern", "http-legacy"):
        result.stdout.fnmatch_lines([f"*test_add?{variant}? PASSED*"])


SDK_OBJECT_TESTS = '''
import pytest
from mcp.server.mcpserver import MCPServer

server = MCPServer("calc")


@server.tool()
def add(a: int, b: int) -> int:
    """Add two integers."""
    return a + b


pytestmark = pytest.mark.mcp_server(server=server)


def test_add(mcp_client):
    assert mcp_client.call_tool("add", {"a": 1, "b": 2}).structured_content == {"result": 3}


def test_latency(mcp_benchmark):
    assert mcp_benchmark("add", {"a": 1, "b": 2}).structured_content == {"result": 3}
'''


def test_an_sdk_server_object_in_process_and_over_http_with_a_latency_report(author: pytest.Pytester, tmp_path: Path) -> None:
    author.makepyfile(test_calc=SDK_OBJECT_TESTS)
    report = tmp_path / "bench.json"
    result = _run(author, "--benchmark-min-rounds=3", "--benchmark-max-time=0.05", f"--benchmark-json={report}")
    result.assert_outcomes(passed=4)  # 2 tests x (http, inprocess), era auto
    result.stdout.fnmatch_lines(["*benchmark 'mcp tool add'*"])
    benches = json.loads(report.read_text())["benchmarks"]
    assert {b["group"] for b in benches} == {"mcp tool add"}
    assert {b["extra_info"]["transport"] for b in benches} == {"http", "inprocess"}
    assert all(b["extra_info"]["tool"] == "add" and b["stats"]["rounds"] >= 3 for b in benches)


def test_options_choose_the_server_transports_eras_and_scope(author: pytest.Pytester) -> None:
    author.makepyfile(test_plain='''
import os

SEEN = []

def test_one(mcp_client):
    SEEN.append(id(mcp_client))
    assert mcp_client.call_tool("echo", {"message": "x"}).text == "x"

def test_two(mcp_client):
    SEEN.append(id(mcp_client))
    assert mcp_client.era == "legacy"

def test_shared():
    assert len(set(SEEN)) == 1, SEEN  # one client (one server process) for the module
''')
    cmd = f"{sys.executable} -m mcpsync.server.demo"
    result = _run(author, f"--mcp-server={cmd}", "--mcp-era=legacy", "--mcp-transport=stdio", "--mcp-scope=module")
    result.assert_outcomes(passed=3)
    result.stdout.fnmatch_lines(["*test_one?stdio-legacy? PASSED*"])
    # a transport the server does not offer: skipped, with the reason
    result = _run(author, f"--mcp-server={cmd}", "--mcp-transport=http", "-k", "one")
    result.assert_outcomes(skipped=1)


def test_without_a_server_the_fixture_says_what_is_missing(author: pytest.Pytester) -> None:
    author.makepyfile(test_none="def test_x(mcp_client):\n    pass\n")
    result = _run(author)
    result.assert_outcomes(errors=1)
    result.stdout.fnmatch_lines(["*mark the test with pytest.mark.mcp_server(...) or pass --mcp-server*"])


def test_the_plugin_changes_nothing_for_a_suite_that_does_not_use_it(author: pytest.Pytester) -> None:
    author.makepyfile(test_other='''
import pytest

@pytest.mark.parametrize("n", [1, 2])
def test_param(n):
    assert n

def test_plain(request):
    assert "mcp_client" not in request.fixturenames
''')
    without = author.runpytest_subprocess("-p", "no:mcpsync", "-p", "no:cacheprovider", "--collect-only", "-q", timeout=120)
    with_plugin = author.runpytest_subprocess(*_plugin_args(), "-p", "no:cacheprovider", "--collect-only", "-q", timeout=120)
    ids = [line for line in without.outlines if "::" in line]
    assert ids == [line for line in with_plugin.outlines if "::" in line] and len(ids) == 3
    _run(author).assert_outcomes(passed=3)


def test_the_plugin_is_registered_by_entry_point() -> None:
    import tomllib

    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    assert project["entry-points"]["pytest11"] == {"mcpsync": "mcpsync.pytest_plugin"}
    assert "pytest" in project["optional-dependencies"]
