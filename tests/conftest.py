"""Shared fixtures: where the real peers live and how to start them."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
SERVERS = Path(__file__).resolve().parent / "servers"
NPM_PREFIX = Path(os.environ.get("MCPSYNC_NPM_PREFIX", ROOT / ".cache" / "npm"))
EVERYTHING_JS = NPM_PREFIX / "node_modules" / "@modelcontextprotocol" / "server-everything" / "dist" / "index.js"
LOOPBACK_PRELOAD = SERVERS / "loopback.cjs"
PYTHON = sys.executable


def _ensure_everything() -> Path:
    if not EVERYTHING_JS.exists():
        subprocess.run(
            ["bash", "-c", "source tests/setup/10-npm.sh"],
            cwd=ROOT,
            check=True,
            env={**os.environ, "MCPSYNC_NPM_PREFIX": str(NPM_PREFIX)},
            timeout=300,
        )
    return EVERYTHING_JS


def everything_command(mode: str = "stdio") -> list[str]:
    """argv that runs @modelcontextprotocol/server-everything in ``mode``, pinned to loopback."""
    js = _ensure_everything()
    return ["node", "--require", str(LOOPBACK_PRELOAD), str(js), mode]


def server_command(name: str, *args: str) -> list[str]:
    """argv that runs one of the Python servers in tests/servers."""
    return [PYTHON, str(SERVERS / name), *args]


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture(scope="session")
def everything_stdio() -> list[str]:
    return everything_command("stdio")


@pytest.fixture(params=["fast", "urllib3"])
def http_path(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> str:
    """Run an HTTP test on both paths (issue 21): httptools' keep-alive path, and urllib3's
    (``MCPSYNC_HTTP=urllib3``, the path a proxy takes). Clients made in the test take it."""
    if request.param == "urllib3":
        monkeypatch.setenv("MCPSYNC_HTTP", "urllib3")
    else:
        monkeypatch.delenv("MCPSYNC_HTTP", raising=False)
    return str(request.param)
