"""The extensions a Client declares reach the server in both eras: in ``initialize``'s
capabilities (2025 era) and in every request's ``_meta`` client capabilities (2026-07-28),
against a real stdio server that serves both (tests/servers/skills_server.py)."""

from __future__ import annotations

import pytest

from mcpsync import Client, Extension
from tests.conftest import server_command

pytestmark = pytest.mark.timeout(60)
CAPS = "io.modelcontextprotocol/clientCapabilities"
DEFAULTS = {"io.modelcontextprotocol/tasks": {}, "io.modelcontextprotocol/skills": {}}


def client(mode: str, **options: object) -> Client:
    cmd = server_command("skills_server.py")
    return Client.stdio(cmd[0], cmd[1:], mode=mode, **options)  # type: ignore[arg-type]


def declared(c: Client) -> object:
    params = c.request("test/handshake")["params"]
    if c.era == "modern":
        return params["_meta"][CAPS].get("extensions")
    return params["capabilities"].get("extensions")


@pytest.mark.parametrize("mode", ["modern", "legacy"])
def test_the_defaults_are_declared_in_the_handshake(mode: str) -> None:
    with client(mode) as c:
        assert declared(c) == DEFAULTS
        assert c.client_capabilities()["extensions"] == DEFAULTS


@pytest.mark.parametrize("mode", ["modern", "legacy"])
def test_the_extensions_given_are_declared_with_their_settings(mode: str) -> None:
    mine = Extension("com.example/audit", {"level": "full"})
    with client(mode, extensions=[Extension.SKILLS, mine]) as c:
        assert declared(c) == {"io.modelcontextprotocol/skills": {}, "com.example/audit": {"level": "full"}}


@pytest.mark.parametrize("mode", ["modern", "legacy"])
def test_none_declared(mode: str) -> None:
    with client(mode, extensions=[]) as c:
        assert declared(c) is None
