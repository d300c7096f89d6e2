"""Skills (SEP-2640) against FastMCP 4.2.3's skills server (a real peer: ``skills/list``,
``skills/get``, files as resources), tests/servers/fastmcp_skills_server.py over stdio.
FastMCP declares the extension in the 2026-07-28 era only; in the 2025 era mcpsync asks
nothing, as the SEP says (a client asks only a server that declared it)."""

from __future__ import annotations

import pytest

from mcpsync import Client, MethodNotFound, ResourceNotFound

pytest.importorskip("fastmcp")

from tests.conftest import server_command  # noqa: E402

pytestmark = pytest.mark.timeout(90)


def fastmcp_client(mode: str) -> Client:
    cmd = server_command("fastmcp_skills_server.py")
    return Client.stdio(cmd[0], cmd[1:], mode=mode)


def test_list_get_and_load_against_fastmcp() -> None:
    with fastmcp_client("modern") as c:
        skills = {s.uri: s for s in c.list_skills()}
        assert sorted(skills) == ["skill://code-review/SKILL.md", "skill://ops/deploy/SKILL.md"]
        review = skills["skill://code-review/SKILL.md"]
        assert review.frontmatter["metadata"] == {"owner": "platform", "tags": ["review", "quality"]}
        assert sorted(f.path for f in review.files) == ["SKILL.md", "checklist.md", "scripts/lint.sh"]
        skill = c.read_skill("skill://code-review/SKILL.md")  # skills/get, SKILL.md verified, frontmatter compared
        assert skill.frontmatter == dict(review.frontmatter)
        assert skill.body.startswith("# Code review")
        assert skill.read_text("checklist.md") == "- tests\n- names\n"
        assert skill.read("scripts/lint.sh") == b"#!/bin/sh\necho lint\n"
        deploy = c.get_skill("skill://ops/deploy/SKILL.md")
        assert deploy.name == "deploy" and deploy.root == "skill://ops/deploy"
        with pytest.raises(ResourceNotFound):
            c.get_skill("skill://nope/SKILL.md")


def test_no_skills_requests_to_a_server_that_did_not_declare_them() -> None:
    with fastmcp_client("legacy") as c:
        assert not (c.capabilities.extensions or {})
        with pytest.raises(MethodNotFound, match="does not declare"):
            c.list_skills()
