"""FastMCP 4.2.3's skills server (SEP-2640: ``skills/list``, ``skills/get``, the files as
resources) over stdio, serving two skills: ``code-review`` (instructions and a supporting
file, nested metadata in its frontmatter) and ``ops/deploy`` (a prefixed path).

Usage: fastmcp_skills_server.py
"""

from __future__ import annotations

from fastmcp import FastMCP
from fastmcp.skills import Skill
from fastmcp.skills.provider import SkillCatalogProvider

review = Skill(
    name="code-review",
    description="Review a pull request for correctness and style.",
    instructions="# Code review\n\nRead checklist.md first.\n",
    files={"checklist.md": "- tests\n- names\n", "scripts/lint.sh": b"#!/bin/sh\necho lint\n"},
    frontmatter={"license": "MIT", "metadata": {"owner": "platform", "tags": ["review", "quality"]}},
)
deploy = Skill(name="deploy", description="Deploy the service.", instructions="Run the pipeline.\n")

mcp = FastMCP("fastmcp-skills")
mcp.add_provider(SkillCatalogProvider({"code-review": review, "ops/deploy": deploy}))

if __name__ == "__main__":
    mcp.run("stdio", show_banner=False)
