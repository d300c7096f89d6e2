"""Pure logic of the skills extension (mcpsync/_skills.py) and of DPoP nonce challenges."""

from __future__ import annotations

import builtins
import hashlib

import pytest

from mcpsync import ProtocolError, SkillIntegrityError
from mcpsync._skills import SkillFile, SkillInfo, parse_frontmatter, verify_file
from mcpsync.transports._http_headers import dpop_nonce_challenge


def _item(data: bytes, **over) -> SkillFile:
    fields = {"uri": "skill://s/SKILL.md", "path": "SKILL.md", "digest": "sha256:" + hashlib.sha256(data).hexdigest(),
              "size": len(data)}
    fields.update(over)
    return SkillFile(**fields)


def test_verify_file_checks_size_then_digest() -> None:
    data = b"hello"
    verify_file(_item(data), data)
    with pytest.raises(SkillIntegrityError) as e:
        verify_file(_item(data), b"hello!")
    assert e.value.check == "size" and e.value.expected == 5 and e.value.actual == 6
    with pytest.raises(SkillIntegrityError) as e:
        verify_file(_item(data), b"jello")
    assert e.value.check == "digest"
    with pytest.raises(SkillIntegrityError, match="unsupported digest"):
        verify_file(_item(data, digest="md5:abc"), data)
    verify_file(_item(data, digest="SHA256:" + hashlib.sha256(data).hexdigest().upper()), data)


def test_frontmatter_split() -> None:
    front, body = parse_frontmatter("---\nname: a\ndescription: 'x: y'\n---\nBody\n")
    assert front == {"name": "a", "description": "x: y"} and body == "Body\n"
    with pytest.raises(SkillIntegrityError, match="no YAML frontmatter"):
        parse_frontmatter("# no frontmatter\n")
    with pytest.raises(SkillIntegrityError, match="not a mapping"):
        parse_frontmatter("---\n- a\n- b\n---\n")


def test_frontmatter_without_pyyaml(monkeypatch: pytest.MonkeyPatch) -> None:
    real_import = builtins.__import__

    def no_yaml(name, *args, **kwargs):
        if name == "yaml":
            raise ImportError(name)
        return real_import(name, *args, **kwargs)

    monkeypatch.setattr(builtins, "__import__", no_yaml)
    front, _ = parse_frontmatter('---\nname: a\ndescription: "quoted: yes"\nbeta: true\n---\n')
    assert front == {"name": "a", "description": "quoted: yes", "beta": True}
    front, _ = parse_frontmatter("---\nname: a\nmetadata:\n  owner: x\n  tags: [p, q]\n---\n")  # nested: read
    assert front == {"name": "a", "metadata": {"owner": "x", "tags": ["p", "q"]}}
    with pytest.raises(SkillIntegrityError, match="only with PyYAML installed"):
        parse_frontmatter("---\nname: a\ntag: !custom x\n---\n")
    with pytest.raises(SkillIntegrityError, match="not valid YAML"):
        parse_frontmatter("---\nname: a\nname: b\n---\n")


D0, D1 = "sha256:" + "0" * 64, "sha256:" + "1" * 64


def _entry(**over: object) -> dict:
    entry = {
        "uri": "skill://tools/pdf/SKILL.md",
        "frontmatter": {"name": "pdf", "description": "d"},
        "resources": [{"uri": "skill://tools/pdf/SKILL.md", "digest": D0, "size": 3},
                      {"uri": "skill://tools/pdf/a/b.md", "digest": D1, "size": 4}],
    }
    entry.update(over)
    return entry


def test_skill_info_from_wire() -> None:
    info = SkillInfo.from_wire(_entry())
    assert info.name == "pdf" and info.root == "skill://tools/pdf" and not info.dynamic
    assert [f.path for f in info.files] == ["SKILL.md", "a/b.md"] and info.total_size == 7 and info.refusal is None
    with pytest.raises(SkillIntegrityError, match="not in the manifest"):
        info.file("c.md")
    dynamic = SkillInfo.from_wire(_entry(resources="dynamic"))
    assert dynamic.dynamic and dynamic.files == ()


@pytest.mark.parametrize("over, why", [
    ({"resources": None}, "resources is missing"),
    ({"resources": {"a": 1}}, "neither a manifest"),
    ({"resources": "generated"}, "neither a manifest"),
    ({"frontmatter": {"name": "other", "description": "d"}}, "last segment"),
    ({"frontmatter": {"name": "pdf"}}, "no description"),
    ({"uri": "skill://tools/pdf/README.md"}, "must name its SKILL.md"),
    ({"resources": [{"uri": "skill://tools/pdf/a.md", "digest": D0, "size": 1}]}, "does not list its SKILL.md"),
    ({"resources": [{"uri": "skill://tools/pdf/SKILL.md", "digest": D0, "size": 1},
                    {"uri": "skill://tools/other/x.md", "digest": D0, "size": 1}]}, "not a file of the skill"),
    ({"resources": [{"uri": "skill://tools/pdf/SKILL.md", "digest": D0, "size": 1},
                    {"uri": "skill://tools/pdf/../x.md", "digest": D0, "size": 1}]}, "not a file of the skill"),
    ({"resources": [{"uri": "skill://tools/pdf/SKILL.md", "digest": D0, "size": 1}] * 2}, "listed twice"),
    ({"resources": [{"uri": "skill://tools/pdf/SKILL.md", "digest": "sha256:00", "size": 1}]}, "digest"),
    ({"resources": [{"uri": "skill://tools/pdf/SKILL.md", "digest": D0, "size": -1}]}, "size"),
])
def test_entries_the_sep_calls_invalid(over: dict, why: str) -> None:
    with pytest.raises(ProtocolError, match=why):
        SkillInfo.from_wire(_entry(**over))


def test_the_limits_are_read_from_the_entry() -> None:
    many = [{"uri": "skill://tools/pdf/SKILL.md", "digest": D0, "size": 1}]
    many += [{"uri": f"skill://tools/pdf/f{i}", "digest": D0, "size": 1} for i in range(511)]
    assert SkillInfo.from_wire(_entry(resources=many)).refusal is None  # 512: accepted
    many.append({"uri": "skill://tools/pdf/one-more", "digest": D0, "size": 1})
    assert "513 files" in SkillInfo.from_wire(_entry(resources=many)).refusal
    sized = [{"uri": "skill://tools/pdf/SKILL.md", "digest": D0, "size": 16 * 1024 * 1024}]
    assert SkillInfo.from_wire(_entry(resources=sized)).refusal is None  # 16 MiB exactly: accepted
    sized[0]["size"] += 1
    assert "16 MiB" in SkillInfo.from_wire(_entry(resources=sized)).refusal


def test_dpop_nonce_challenge_recognised() -> None:
    yes = {"WWW-Authenticate": 'DPoP error="use_dpop_nonce", error_description="x"', "DPoP-Nonce": "n1"}
    assert dpop_nonce_challenge(401, yes)
    assert not dpop_nonce_challenge(403, yes)
    assert not dpop_nonce_challenge(401, {"WWW-Authenticate": yes["WWW-Authenticate"]})  # no nonce to use
    assert not dpop_nonce_challenge(401, {"WWW-Authenticate": 'DPoP error="invalid_token"', "DPoP-Nonce": "n1"})
