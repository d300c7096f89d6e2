"""A configuration file with a bad entry: that server fails with its ConfigError, the others
work (unless strict loading is asked for); the CLI says config errors in one line, never
with a traceback, and uses a disabled entry it is pointed at by name."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from mcpsync import Client, ConfigError, MultiClient

pytestmark = pytest.mark.timeout(90)


@pytest.fixture
def config(tmp_path: Path) -> Path:
    path = tmp_path / "mcp.json"
    demo = {"command": sys.executable, "args": ["-m", "mcpsync.server.demo"]}
    path.write_text(json.dumps({"mcpServers": {
        "demo": demo,
        "broken": {"command": 7},
        "off": {**demo, "disabled": True},
    }}))
    return path


def cli(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "mcpsync.cli", *args], capture_output=True, text=True, timeout=60)


def test_the_good_servers_of_a_file_with_a_bad_entry_work(config: Path):
    with Client.from_config(config, "demo", mode="legacy") as client:
        assert client.call_tool("echo", {"message": "hi"}, timeout=30).text == "hi"
    with pytest.raises(ConfigError, match=r"mcpServers\.broken\.command: expected a string, got 7"):
        Client.from_config(config, "broken")
    with MultiClient.from_config(config, mode="legacy") as multi:
        assert [t.name for t in multi.list_tools()][:1] == ["demo__echo"]
        status = multi.status()
        assert status["broken"].state == "config-error" and "expected a string, got 7" in (status["broken"].error or "")
        assert status["off"].state == "disabled"
    with pytest.raises(ConfigError):
        MultiClient.from_config(config, strict=True)


def test_the_cli_says_config_errors_in_one_line(config: Path):
    p = cli("tools", "--config", str(config), "--server", "broken")
    assert p.returncode == 2 and "Traceback" not in p.stderr, p.stderr
    assert p.stderr.strip() == f"mcpsync: {config}: mcpServers.broken.command: expected a string, got 7"
    p = cli("tools", "--config", str(config), "--server", "demo")
    assert p.returncode == 0 and "echo" in p.stdout, p.stderr
    p = cli("tools", "--config", str(config), "--server", "nope")
    assert p.returncode == 2 and "Traceback" not in p.stderr and "no server named 'nope'" in p.stderr


def test_the_cli_uses_a_disabled_entry_it_is_pointed_at(config: Path):
    p = cli("tools", "--config", str(config), "--server", "off")
    assert p.returncode == 0 and "Traceback" not in p.stderr, p.stderr
    assert "echo" in p.stdout
