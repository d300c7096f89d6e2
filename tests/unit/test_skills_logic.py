"""Pure logic of the skills extension (mcpsync/_skills.py) and of DPoP nonce challenges."""

from __future__ import annotations

import builtins
import hashlib

import pytest

from mcpsync import SkillIntegrityError
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
    with pytest.raises(SkillIntegrityError, match="PyYAML is not installed"):
        parse_frontmatter("---\nname: a\nmetadata:\n  owner: x\n---\n")


def test_skill_info_from_wire() -> None:
    info = SkillInfo.from_wire({
        "uri": "skill://tools/pdf/SKILL.md",
        "frontmatter": {"description": "d"},
        "resources": [{"uri": "skill://tools/pdf/SKILL.md", "digest": "sha256:00", "size": 3},
                      {"uri": "skill://tools/pdf/a/b.md", "digest": "sha256:11", "size": 4}],
    })
    assert info.name == "pdf" and info.root == "skill://tools/pdf/"
    assert [f.path for f in info.files] == ["SKILL.md", "a/b.md"]
    with pytest.raises(SkillIntegrityError, match="not in the manifest"):
        info.file("c.md")


def test_dpop_nonce_challenge_recognised() -> None:
    yes = {"WWW-Authenticate": 'DPoP error="use_dpop_nonce", error_description="x"', "DPoP-Nonce": "n1"}
    assert dpop_nonce_challenge(401, yes)
    assert not dpop_nonce_challenge(403, yes)
    assert not dpop_nonce_challenge(401, {"WWW-Authenticate": yes["WWW-Authenticate"]})  # no nonce to use
    assert not dpop_nonce_challenge(401, {"WWW-Authenticate": 'DPoP error="invalid_token"', "DPoP-Nonce": "n1"})
