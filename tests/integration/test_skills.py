"""Skills (SEP-2640) against a real stdio server that serves them as the SEP specifies
(tests/servers/skills_server.py): the server's declaration checked first, listing reads no
file, invalid entries never loaded, a skill loaded from its URI alone (``skills/get``),
dynamic skills, the 512-file / 16 MiB limits, ``resources/directory/read`` when declared,
and every file checked against its entry (size, digest, frontmatter) before it is used."""

from __future__ import annotations

import logging

import pytest

from mcpsync import Client, MethodNotFound, ProtocolError, ResourceNotFound, SkillIntegrityError
from mcpsync import _skills
from mcpsync._errors import InvalidParams
from tests.conftest import server_command

pytestmark = pytest.mark.timeout(60)
PDF = "skill://pdf-processing/SKILL.md"
FORMS = "skill://pdf-processing/references/FORMS.md"
DAILY = "skill://reports/daily/SKILL.md"
REFUNDS = "skill://acme/billing/refunds/SKILL.md"
VALID = ["pdf-processing", "release-notes", "daily", "bulky", "heavy"]


def skills_client(*args: str, mode: str = "auto") -> Client:
    cmd = server_command("skills_server.py", *args)
    return Client.stdio(cmd[0], cmd[1:], mode=mode)


def reads(client: Client) -> list[str]:
    return client.request("test/reads")["reads"]


def methods(client: Client) -> list[str]:
    return client.request("test/methods")["methods"]


@pytest.mark.parametrize("mode", ["modern", "legacy"])
def test_listing_reads_no_file_and_leaves_invalid_entries_out(mode: str, caplog: pytest.LogCaptureFixture) -> None:
    with caplog.at_level(logging.WARNING, logger="mcpsync.client"), skills_client(mode=mode) as c:
        skills = {s.name: s for s in c.list_skills()}
        assert list(skills) == VALID
        pdf = skills["pdf-processing"]
        assert pdf.uri == PDF and pdf.description == "Extract, fill, and assemble PDF documents" and not pdf.dynamic
        assert [f.path for f in pdf.files] == ["SKILL.md", "references/FORMS.md", "assets/logo.bin"]
        assert all(f.digest.startswith("sha256:") and f.size > 0 for f in pdf.files)
        assert skills["daily"].dynamic and skills["daily"].files == () and skills["daily"].refusal is None
        assert reads(c) == []
    left_out = " ".join(r.getMessage() for r in caplog.records)
    assert "no-resources" in left_out and "neither a manifest" in left_out  # no resources: never loaded
    assert "wrong-name" in left_out and "outside" in left_out


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


def test_a_skill_loads_from_its_uri_alone_listed_or_not() -> None:
    with skills_client() as c:
        info = c.get_skill(REFUNDS)  # not in the listing: skills/get answers for it
        assert info.name == "refunds" and info.root == "skill://acme/billing/refunds"
        skill = c.read_skill(REFUNDS)
        assert skill.read_text("examples/email.md") == "Dear customer, ...\n"
        assert "skills/list" not in methods(c)  # a URI needs no listing
        with pytest.raises(ResourceNotFound):
            c.get_skill("skill://acme/billing/chargebacks/SKILL.md")


@pytest.mark.parametrize("parser", ["subset", "pyyaml"])
def test_nested_frontmatter_compares_field_by_field(parser: str, monkeypatch: pytest.MonkeyPatch) -> None:
    if parser == "pyyaml":
        pytest.importorskip("yaml")

        def unsupported(_block: str) -> object:
            raise SkillIntegrityError("forced", check="frontmatter", unsupported=True)

        monkeypatch.setattr(_skills, "parse_yaml", unsupported)  # PyYAML reads it instead
    with skills_client() as c:
        skill = c.read_skill("skill://release-notes/SKILL.md")
        assert skill.frontmatter["allowed-tools"] == ["git-log", "read-file"]
        assert skill.frontmatter["metadata"]["reviewers"] == ["ana", "bo"]
        assert skill.frontmatter["compatibility"] == "Needs git and a changelog.\n"


def test_yaml_beyond_the_subset_without_pyyaml_is_a_clear_refusal(monkeypatch: pytest.MonkeyPatch) -> None:
    import builtins

    real_import = builtins.__import__

    def no_yaml(name: str, *args: object, **kwargs: object) -> object:
        if name == "yaml":
            raise ImportError("no PyYAML here")
        return real_import(name, *args, **kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr(builtins, "__import__", no_yaml)
    with pytest.raises(SkillIntegrityError, match="only with PyYAML") as info:
        _skills.parse_frontmatter("---\nname: x\nbase: &b {a: 1}\nmore: *b\n---\nbody\n")
    assert info.value.check == "frontmatter"
    parsed, body = _skills.parse_frontmatter("---\nname: x\nmetadata:\n  k: [1, 2]\n---\nbody\n")
    assert parsed == {"name": "x", "metadata": {"k": [1, 2]}} and body == "body\n"


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
        for path in ("scripts/run.sh", "NEW.md", "../release-notes/SKILL.md"):
            with pytest.raises(SkillIntegrityError, match="not in the manifest") as info:
                skill.read(path)
            assert info.value.check == "manifest"
        assert reads(c) == [PDF]


def test_invalid_entries_are_never_loaded() -> None:
    with skills_client() as c:
        for uri, why in [("skill://no-resources/SKILL.md", "resources is missing"),
                         ("skill://wrong-name/SKILL.md", "last segment"),
                         ("skill://outside/SKILL.md", "not a file of the skill")]:
            with pytest.raises(ProtocolError, match=why):
                c.read_skill(uri)
        assert reads(c) == []


@pytest.mark.parametrize("name, why", [("bulky", "513 files"), ("heavy", "16 MiB")])
def test_skills_over_the_limits_are_declined_before_any_read(name: str, why: str) -> None:
    with skills_client() as c:
        info = next(s for s in c.list_skills() if s.name == name)
        assert info.refusal is not None and why in info.refusal
        with pytest.raises(SkillIntegrityError, match=why) as err:
            c.read_skill(info)
        assert err.value.check == "limit"
        assert reads(c) == []


def test_a_dynamic_skill_loads_and_reads_unverified_files() -> None:
    with skills_client() as c:
        skill = c.read_skill(DAILY)
        assert skill.info.dynamic and skill.frontmatter["name"] == "daily"  # frontmatter still compared
        assert skill.read_text("data/today.csv") == "read,1\n"
        assert skill.read_text("data/today.csv") == "read,2\n"  # generated: read afresh each time
        with pytest.raises(SkillIntegrityError, match="outside the skill"):
            skill.read("../../pdf-processing/SKILL.md")
        assert skill.listdir() == ["SKILL.md", "data/"]  # resources/directory/read, every page
        assert skill.walk() == ["SKILL.md", "data/big.bin", "data/big2.bin", "data/today.csv"]
        assert skill.files == ["SKILL.md", "data/big.bin", "data/big2.bin", "data/today.csv"]


def test_a_dynamic_skill_stops_at_the_size_limit(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(_skills, "MAX_SKILL_BYTES", 4096)  # (16 MiB over a pipe, in a unit of time: smaller)
    with skills_client("--dynamic-size", "3000") as c:
        skill = c.read_skill(DAILY)
        assert len(skill.read("data/big.bin")) == 3000
        assert len(skill.read("./data/../data/big.bin")) == 3000  # the same file again: counted once
        with pytest.raises(SkillIntegrityError, match="past the") as info:
            skill.read("data/big2.bin")  # what was read would pass the limit: not used
        assert info.value.check == "limit" and info.value.uri == "skill://reports/daily/data/big2.bin"
        assert skill.read_text("data/today.csv") == "read,1\n"  # under the limit still


def test_directory_reads_need_the_servers_directory_read() -> None:
    with skills_client() as c:
        children = c.read_directory("skill://pdf-processing")
        assert [r.uri.rsplit("/", 1)[-1] for r in children] == ["SKILL.md", "references", "assets", "NEW.md"]
        assert [r.mime_type for r in children][1:3] == ["inode/directory"] * 2
        skill = c.read_skill(PDF)
        assert skill.listdir() == ["SKILL.md", "assets/", "references/"]  # from the held manifest: no NEW.md
        assert skill.listdir("references") == ["FORMS.md"]
        with pytest.raises(ResourceNotFound):
            c.read_directory("skill://pdf-processing/SKILL.md")
    with skills_client("--declare", "plain") as c:
        assert len(c.list_skills()) == len(VALID)
        with pytest.raises(MethodNotFound, match="directoryRead"):
            c.read_directory("skill://pdf-processing")
        with pytest.raises(MethodNotFound):
            c.read_skill(DAILY).listdir()
        assert "resources/directory/read" not in methods(c)


def test_a_server_that_does_not_declare_the_extension_is_not_asked() -> None:
    with skills_client("--declare", "none") as c:
        for call in (c.list_skills, lambda: c.get_skill(PDF), lambda: c.read_skill(PDF),
                     lambda: c.read_directory("skill://pdf-processing")):
            with pytest.raises(MethodNotFound, match="does not declare the skills extension"):
                call()
        assert not [m for m in methods(c) if m.startswith(("skills/", "resources/"))]


def test_listing_pages_are_followed() -> None:
    with skills_client("--page-size", "2") as c:
        assert [s.name for s in c.list_skills()] == VALID


def test_names_resolve_within_the_listing() -> None:
    with skills_client() as c:
        with pytest.raises(ResourceNotFound, match="by the URI"):
            c.read_skill("refunds")  # not listed: only its URI reaches it
        with pytest.raises(ResourceNotFound):
            c.read_skill("no-such-skill")


def test_server_without_skills() -> None:
    cmd = server_command("raw_server.py")
    with Client.stdio(cmd[0], cmd[1:]) as c:
        with pytest.raises(MethodNotFound):
            c.list_skills()


def test_a_name_listed_twice_must_be_named_by_its_uri() -> None:
    skills = _skills.Skills(server="s", request=lambda *a, **k: {"skills": [
        {"uri": "skill://a/refunds/SKILL.md", "frontmatter": {"name": "refunds", "description": "a"}, "resources": "dynamic"},
        {"uri": "skill://b/refunds/SKILL.md", "frontmatter": {"name": "refunds", "description": "b"}, "resources": "dynamic"},
    ]}, read_resource=lambda *a, **k: None, declaration=lambda: {})
    with pytest.raises(InvalidParams, match="skill://a/refunds/SKILL.md, skill://b/refunds/SKILL.md"):
        skills.load("refunds")
