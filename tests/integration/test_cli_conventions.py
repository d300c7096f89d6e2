"""The command line people expect (issue 19, item 4), run in a subprocess against real
servers: --version, resources and prompts, the server named by a URL / a file / a config,
--header, embedded resources printed, a closed pipe, and an unknown tool as bad usage."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Iterator

import pytest

import mcpsync
from tests.conftest import ROOT, everything_command, server_command
from tests.servers import http_support as hs

pytestmark = pytest.mark.timeout(90)

DEMO = ["--", sys.executable, "-m", "mcpsync.server.demo"]
SDK_FILE = str(ROOT / "tests" / "servers" / "sdk_server.py")


def run(*args: str, timeout: float = 60) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    return subprocess.run([sys.executable, "-m", "mcpsync.cli", *args], capture_output=True, text=True, timeout=timeout, env=env, cwd=ROOT)


def test_version() -> None:
    p = run("--version")
    assert (p.returncode, p.stdout.strip()) == (0, f"mcpsync {mcpsync.__version__}")


def test_resources_list_and_read() -> None:
    p = run("resources", *DEMO)
    assert p.returncode == 0, p.stderr
    lines = p.stdout.splitlines()
    assert lines[0].split()[0] == "demo://about" and any(line.startswith("demo://greeting/{name}") and "template" in line for line in lines)
    assert run("resources", "list", *DEMO).stdout == p.stdout
    p = run("resources", "read", "demo://greeting/Ann", *DEMO)
    assert (p.returncode, p.stdout.strip()) == (0, "Hello, Ann!")
    p = run("resources", "read", "demo://about", "--json", *DEMO)
    assert json.loads(p.stdout)["contents"][0]["uri"] == "demo://about"


def test_prompts_list_and_get() -> None:
    p = run("prompts", *DEMO)
    assert p.returncode == 0, p.stderr
    assert p.stdout.split()[0] == "summarize" and "[text style?]" in p.stdout
    p = run("prompts", "get", "summarize", "text=MCP is a protocol", "style=one line", *DEMO)
    assert p.returncode == 0, p.stderr
    assert p.stdout.splitlines()[0] == "[user]" and "in one line" in p.stdout and "MCP is a protocol" in p.stdout
    p = run("prompts", "get", "nope", *DEMO)
    assert p.returncode == 2 and "prompt 'nope' does not exist" in p.stderr and "summarize" in p.stderr


def test_unknown_tool_is_bad_usage() -> None:
    p = run("call", "nope", *DEMO)
    assert p.returncode == 2
    assert "tool 'nope' does not exist" in p.stderr and "echo" in p.stderr


def test_a_python_file_runs_over_stdio_first_or_last() -> None:
    p = run("tools", SDK_FILE)
    assert p.returncode == 0, p.stderr
    assert "echo" in p.stdout.split()
    p = run("call", SDK_FILE, "add", "a=1", "b=2")
    assert (p.returncode, p.stdout.strip()) == (0, "3"), p.stderr
    p = run("call", "add", "a=1", "b=2", SDK_FILE)
    assert (p.returncode, p.stdout.strip()) == (0, "3"), p.stderr


def test_a_target_that_is_not_a_server_is_bad_usage() -> None:
    p = run("tools", "no-such-thing")
    assert p.returncode == 2 and "cannot tell how to run 'no-such-thing'" in p.stderr
    p = run("tools", SDK_FILE, *DEMO)
    assert p.returncode == 2 and "give one server" in p.stderr


@pytest.fixture(scope="module")
def http_url() -> Iterator[str]:
    port = hs.free_port()
    with hs.run_server(hs.sdk_server_argv(port, "--json"), port):
        yield f"http://127.0.0.1:{port}/mcp"


def test_an_http_url_is_streamable_http_with_headers(http_url: str) -> None:
    p = run("tools", http_url)
    assert p.returncode == 0, p.stderr
    assert "headers" in p.stdout.split()
    p = run("call", "headers", "--header", "X-Mcpsync-Test: yes", http_url)
    assert p.returncode == 0, p.stderr
    assert "x-mcpsync-test" in p.stdout.lower() and "yes" in p.stdout
    p = run("call", "echo", "message=hi", "--header", "X-Test: 1", *DEMO)
    assert p.returncode == 2 and "--header is for a remote server" in p.stderr


def test_config_and_server(tmp_path: Path, http_url: str) -> None:
    cfg = tmp_path / "mcp.json"
    cfg.write_text(json.dumps({"mcpServers": {"demo": {"command": sys.executable, "args": ["-m", "mcpsync.server.demo"]}, "remote": {"url": http_url}}}))
    p = run("call", "add", "a=2", "b=40", "--config", str(cfg), "--server", "demo")
    assert (p.returncode, p.stdout.strip()) == (0, "42"), p.stderr
    p = run("call", "headers", "--config", str(cfg), "--server", "remote", "--header", "X-From-Cli: 7")
    assert p.returncode == 0 and "x-from-cli" in p.stdout.lower(), p.stderr
    p = run("prompts", "--config", str(cfg), "--server", "demo")
    assert p.returncode == 0 and "summarize" in p.stdout
    p = run("tools", "--config", str(cfg))
    assert p.returncode == 2 and "choose one with --server" in p.stderr and "demo" in p.stderr
    p = run("tools", "--config", str(cfg), "--server", "nope")
    assert p.returncode == 2 and "no server named 'nope'" in p.stderr
    one = tmp_path / "one.json"
    one.write_text(json.dumps({"mcpServers": {"demo": {"command": sys.executable, "args": ["-m", "mcpsync.server.demo"]}}}))
    p = run("tools", "--config", str(one))
    assert p.returncode == 0 and "word_count" in p.stdout


def test_no_traceback_when_the_reader_goes_away() -> None:
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    proc = subprocess.Popen(
        [sys.executable, "-m", "mcpsync.cli", "tools", "--json", *DEMO], stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env, cwd=ROOT
    )
    assert proc.stdout is not None and proc.stderr is not None
    proc.stdout.close()  # as `| head` does once it has its lines: before anything is written here
    try:
        err = proc.stderr.read().decode()
        code = proc.wait(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait(10)
    assert "Traceback" not in err and "BrokenPipeError" not in err, err
    assert code == 0, err


@pytest.mark.npm
def test_embedded_resources_print_their_uri_and_text() -> None:
    p = run("call", "get-resource-reference", "resourceType=Text", "resourceId=1", "--", *everything_command("stdio"))
    assert p.returncode == 0, p.stderr
    lines = p.stdout.splitlines()
    at = next(i for i, line in enumerate(lines) if line.startswith("[resource demo://resource/"))
    assert lines[at + 1:], "the resource's text follows its URI"


def test_call_still_takes_its_server_after_dashes() -> None:
    p = run("call", "add", "a=1", "b=2", "--", *server_command("raw_server.py"))
    assert (p.returncode, p.stdout.strip()) == (0, "3")
