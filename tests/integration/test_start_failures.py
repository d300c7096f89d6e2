"""A server that cannot start says why, at once: the stderr lines that explain it are kept
(the last 20 and any older line with ``error``/``ERR!``/``not found``), and a command line
given the wrong way round is refused before anything runs."""

from __future__ import annotations

import sys
import time

import pytest

from mcpsync import Client, ClientSpec, ConfigError, StartFailed, Timeouts

pytestmark = pytest.mark.timeout(60)

#: what ``npx -y`` prints for a package that does not exist (npm 11), then more lines
NPM_404 = [
    "npm error code E404",
    "npm error 404 Not Found - GET https://registry.npmjs.org/@modelcontextprotocol%2fserver-nope",
    "npm error 404",
    "npm error 404  The requested resource '@modelcontextprotocol/server-nope@*' could not be found",
]


def _script(lines: list[str], code: int) -> tuple[str, list[str]]:
    body = "".join(f"printf '%s\\n' {line!r} >&2; " for line in lines)
    return "sh", ["-c", body + f"exit {code}"]


def test_a_start_failure_keeps_the_line_that_says_why():
    noise = [f"npm http fetch GET 200 https://registry.example/pkg-{i} 12ms (cache hit)" for i in range(30)]
    command, args = _script(NPM_404 + noise + ["npm error A complete log of this run can be found in: x.log"], 1)
    client = Client.stdio(command, args, name="npx", timeouts=Timeouts(start=30))
    try:
        with pytest.raises(StartFailed) as info:
            client.call_tool("echo", {"message": "hi"}, timeout=30)
    finally:
        client.close()
    err = info.value
    assert err.exit_code == 1
    assert "404 Not Found - GET" in str(err), str(err)  # 34 lines later, still in the message
    tail = err.stderr_tail.splitlines()
    assert "npm error 404 Not Found - GET https://registry.npmjs.org/@modelcontextprotocol%2fserver-nope" in tail
    assert tail[-1].endswith("x.log") and len([t for t in tail if "http fetch" in t]) >= 19  # the last 20 lines


def test_a_python_traceback_is_kept_whole_enough():
    code = "import sys; [print(f'log line {i}', file=sys.stderr) for i in range(25)]; import no_such_module_xyz"
    client = Client.stdio(sys.executable, ["-c", code], name="py")
    try:
        with pytest.raises(StartFailed) as info:
            client.list_tools(timeout=30)
    finally:
        client.close()
    assert "ModuleNotFoundError: No module named 'no_such_module_xyz'" in str(info.value)
    assert "log line 24" in info.value.stderr_tail


def test_arguments_given_as_one_string_are_refused_at_once():
    started = time.monotonic()
    with pytest.raises(TypeError, match=r"\['-m', 'mcpsync.server.demo'\]"):
        Client.stdio(sys.executable, "-m mcpsync.server.demo")  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="not one string"):
        ClientSpec.stdio(sys.executable, "-m mcpsync.server.demo")  # type: ignore[arg-type]
    with pytest.raises(ConfigError, match="expected a list of strings, got a string"):  # (a file: its ConfigError)
        Client.from_config({"mcpServers": {"s": {"command": sys.executable, "args": "-m x"}}}, "s")
    assert time.monotonic() - started < 5.0


def test_a_whole_command_line_as_the_command_gets_a_hint():
    client = Client.stdio(f"{sys.executable} -m mcpsync.server.demo", name="demo")
    started = time.monotonic()
    try:
        with pytest.raises(StartFailed, match=r"give its arguments as a list"):
            client.list_tools(timeout=30)
    finally:
        client.close()
    assert time.monotonic() - started < 5.0
