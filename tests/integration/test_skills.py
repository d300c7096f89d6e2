"""Skills (SEP-2640) against a real stdio server that serves them (tests/servers/skills_server.py):
listing reads no file, loading a skill reads only its SKILL.md, other files are read on demand,
and every file is checked against the listing (size, digest, frontmatter) before it is used."""

from __future__ import annotations

import pytest

from mcpsync import Client, MethodNotFound, ResourceNotFound, SkillIntegrityError
from tests.conftest import server_command

pytestmark = pytest.mark.timeout(60)
PDF = "skill://pdf-processing/SKILL.md"
FORMS = "skill://pdf-processing/references/FORMS.md"


def skills_client(*args: str, mode: str = "auto") -> Client:
    cmd = server_command("skills_server.py", *args)
    return Client.stdio(cmd[0], cmd[1:], mode=mode)


def reads(client: Client) -> list[str]:
    return client.request("test/reads")["reads"]


@pytest.mark.parametrize("mode", ["modern", "legacy"])
def test_listing_reads_no_file(mode: str) -> None:
    with skills_client(mode=mode) as c:
        skills = {s.name: s for s in c.list_skills()}
        assert sorted(skills) == ["pdf-processing", "release-notes"]
        pdf = skills["pdf-processing"]
        assert pdf.uri == PDF and pdf.description == "Extract, fill, and assemble PDF documents"
        assert [f.path for f in pdf.files] == ["SKILL.md", "references/FORMS.md", "assets/logo.bin"]
        assert all(f.digest.startswith("sha256:") and f.size > 0 for f in pdf.files)
        assert reads(c) == []


def test_skill_files_are_read_on_demand_and_verified() -> None:
    with skills_client() as c:
        skill = c.read_skill("pdf-processing")
        assert reads(c) == [PDF]  # loading read SKILL.md alone
        assert skill.frontmatter == {"name": "pdf-processing", "description": "Extract, fill, and assemble PDF documents"}
        assert skill.body.lstrip().startswith("# PDF processing")
        assert skill.files == ["SKILL.md", "references/FORMS.md", "assets/logo.bin"]
        assert skill.read_text("references/FORMS.md") == "Forms have fields; fill them in order.\n"
        assert skill.read("assets/logo.bin") == bytes(range(256)) * 4  # a blob, digest over its bytes
        assert skill.read(FORMS) == skill.read("references/FORMS.md")  # kept once verified
        assert reads(c) == [PDF, FORMS, "skill://pdf-processing/assets/logo.bin"]


def test_nested_frontmatter_compares_field_by_field() -> None:
    pytest.importorskip("yaml")
    with skills_client() as c:
        skill = c.read_skill("skill://release-notes/SKILL.md")
        assert skill.frontmatter["allowed-tools"] == ["git-log", "read-file"]
        assert skill.frontmatter["metadata"] == {"owner": "docs-team", "version": 2}


@pytest.mark.parametrize("tamper", ["digest", "size", "frontmatter"])
def test_tampered_skill_md_is_refused_before_anything_else_is_read(tamper: str) -> None:
    with skills_client("--tamper", tamper) as c:
        with pytest.raises(SkillIntegrityError) as info:
            c.read_skill("pdf-processing")
        assert info.value.check == tamper
        assert reads(c) == [PDF]  # nothing of the refused skill beyond its SKILL.md


def test_tampered_supporting_file_is_refused_every_time() -> None:
    with skills_client("--tamper", "supporting") as c:
        skill = c.read_skill("pdf-processing")
        for _ in range(2):  # never kept: each use reads and checks again
            with pytest.raises(SkillIntegrityError, match="differs from the declared") as info:
                skill.read("references/FORMS.md")
            assert info.value.check == "digest" and info.value.uri == FORMS
        assert reads(c) == [PDF, FORMS, FORMS]


def test_a_file_outside_the_manifest_is_not_read() -> None:
    with skills_client() as c:
        skill = c.read_skill("pdf-processing")
        with pytest.raises(SkillIntegrityError, match="not in the manifest") as info:
            skill.read("scripts/run.sh")
        assert info.value.check == "manifest"
        assert reads(c) == [PDF]


def test_listing_pages_are_followed() -> None:
    with skills_client("--page-size", "1") as c:
        assert [s.name for s in c.list_skills()] == ["pdf-processing", "release-notes"]


def test_unknown_skill() -> None:
    with skills_client() as c:
        with pytest.raises(ResourceNotFound):
            c.read_skill("no-such-skill")


def test_server_without_skills() -> None:
    cmd = server_command("raw_server.py")
    with Client.stdio(cmd[0], cmd[1:]) as c:
        with pytest.raises(MethodNotFound):
            c.list_skills()
