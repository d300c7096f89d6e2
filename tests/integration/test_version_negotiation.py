"""Protocol-version negotiation against a real stdio server (tests/servers/raw_server.py).

A ``-32022`` (UnsupportedProtocolVersion) listing the very version the client sent is retried
once with the listed version, on ``server/discover`` and on any later request (the conformance
suite's request-metadata scenario does this); a second refusal fails with the server's own
message. A ``server/discover`` answered with an empty result is not a modern server: ``auto``
falls back to ``initialize``.
"""

from __future__ import annotations

import pytest

from mcpsync import Client, UnsupportedProtocolVersion
from tests.conftest import server_command

pytestmark = pytest.mark.timeout(60)


def raw_client(*args: str, **options) -> Client:
    cmd = server_command("raw_server.py", *args)
    return Client.stdio(cmd[0], cmd[1:], **options)


def test_discover_refusing_the_sent_version_once_is_retried() -> None:
    with raw_client("--reject-version", "1", "--reject-method", "server/discover", mode="modern") as c:
        assert c.era == "modern" and c.protocol_version == "2026-07-28"
        assert [t.name for t in c.list_tools()]


def test_request_refusing_the_sent_version_once_is_retried() -> None:
    with raw_client("--reject-version", "1", "--reject-method", "tools/list", mode="modern") as c:
        assert [t.name for t in c.list_tools()]


def test_second_refusal_fails_with_the_servers_message() -> None:
    c = raw_client("--reject-version", "2", "--reject-method", "server/discover", mode="modern")
    try:
        with pytest.raises(UnsupportedProtocolVersion, match="refused \\(test\\)"):
            c.connect()
    finally:
        c.close()


def test_request_refused_twice_fails_with_the_servers_message() -> None:
    with raw_client("--reject-version", "2", "--reject-method", "tools/list", mode="modern") as c:
        with pytest.raises(UnsupportedProtocolVersion, match="refused \\(test\\)"):
            c.list_tools()


def test_empty_discover_result_falls_back_to_initialize() -> None:
    with raw_client("--discover-empty", mode="auto") as c:
        assert c.era == "legacy" and c.protocol_version == "2025-11-25"
        assert [t.name for t in c.list_tools()]
