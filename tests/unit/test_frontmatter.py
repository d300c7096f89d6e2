"""The YAML subset parser of SKILL.md frontmatter (mcpsync._frontmatter): what Agent Skills
frontmatter uses, read without PyYAML; the rest refused clearly. Where PyYAML is installed,
random documents it writes (block and flow styles, every scalar style) read the same."""

from __future__ import annotations

import random
import string
from typing import Any

import pytest

from mcpsync import SkillIntegrityError
from mcpsync._frontmatter import parse_yaml

CASES = [
    ("name: pdf\ndescription: Extract, fill, and assemble PDF documents\n",
     {"name": "pdf", "description": "Extract, fill, and assemble PDF documents"}),
    ('description: "Write release notes: short"\nallowed-tools:\n  - git-log\n  - read-file\n'
     "metadata:\n  owner: docs-team\n  version: 2\n  nested:\n    deep: true\n",
     {"description": "Write release notes: short", "allowed-tools": ["git-log", "read-file"],
      "metadata": {"owner": "docs-team", "version": 2, "nested": {"deep": True}}}),
    ("tags: [a, b, 'c d', \"e\\tf\"]\nmap: {k: v, n: 1, l: [1, 2]}\n",
     {"tags": ["a", "b", "c d", "e\tf"], "map": {"k": "v", "n": 1, "l": [1, 2]}}),
    ("description: >\n  A long\n  folded text.\n\n  New para.\nname: y\n",
     {"description": "A long folded text.\nNew para.\n", "name": "y"}),
    ("literal: |\n  line 1\n   line 2\n\n  line 4\nstrip: >-\n  b\n  c\n",
     {"literal": "line 1\n line 2\n\nline 4\n", "strip": "b c"}),
    ("list:\n- a\n- b: 1\n  c: 2\nafter: z # comment\n", {"list": ["a", {"b": 1, "c": 2}], "after": "z"}),
    ("multi: this is a plain\n  scalar over\n  three lines\nq: 'it''s'\nd: \"a\\u00e9b\\x41\"\n",
     {"multi": "this is a plain scalar over three lines", "q": "it's", "d": "aébA"}),
    ("# comment\nurl: http://x.y/z#frag\ncolon: a:b\nempty:\nnull: ~\nver: 1.0\ndate: 2024-01-01\nyes: yes\n",
     {"url": "http://x.y/z#frag", "colon": "a:b", "empty": None, "null": None, "ver": 1.0,
      "date": "2024-01-01", "yes": "yes"}),  # YAML 1.2: dates and yes stay text
]


@pytest.mark.parametrize("text, expected", CASES)
def test_the_frontmatter_agent_skills_use(text: str, expected: dict[str, Any]) -> None:
    assert parse_yaml(text) == expected


@pytest.mark.parametrize("text", ["a: &x 1\nb: *x\n", "a: !!str 1\n", "? complex\n: v\n", "---\na: 1\n",
                                  "a:\n\tb: 1\n", "%YAML 1.2\na: 1\n"])
def test_yaml_beyond_the_subset_is_unsupported(text: str) -> None:
    with pytest.raises(SkillIntegrityError) as info:
        parse_yaml(text)
    assert info.value.unsupported and info.value.check == "frontmatter"


@pytest.mark.parametrize("text", ["a: b: c\n", "a: [1, 2\n", "a: 'x\n", "a: 1\na: 2\n", 'a: "\\q"\n',
                                  "a: 1\n  b: 2\n", "k: - x\n", "a: {b: 1, b: 2}\n"])
def test_malformed_yaml_is_an_error(text: str) -> None:
    with pytest.raises(SkillIntegrityError) as info:
        parse_yaml(text)
    assert not info.value.unsupported


def test_nesting_is_bounded() -> None:
    with pytest.raises(SkillIntegrityError, match="deeper"):
        parse_yaml("a: " + "[" * 100 + "]" * 100 + "\n")


def _random_documents(seed: int, count: int) -> list[str]:
    yaml = pytest.importorskip("yaml")
    rnd = random.Random(seed)
    alphabet = string.ascii_letters + string.digits + "   :-#'\"\\,[]{}!&*?|>%@`\n\né"

    def scalar() -> Any:
        kind = rnd.randrange(6)
        if kind == 0:
            return rnd.randrange(-1000, 1000)
        if kind == 1:
            return rnd.choice([True, False, None, round(rnd.uniform(-9, 9), 3)])
        return "".join(rnd.choice(alphabet) for _ in range(rnd.randrange(0, 40)))

    def node(depth: int = 0) -> Any:
        kind = rnd.randrange(3 if depth < 3 else 1)
        if kind == 0:
            return scalar()
        if kind == 1:
            return [node(depth + 1) for _ in range(rnd.randrange(0, 4))]
        return {f"k{rnd.randrange(1000)}": node(depth + 1) for _ in range(rnd.randrange(1, 4))}

    class Dumper(yaml.SafeDumper):
        pass

    def styled(dumper: Any, data: str) -> Any:
        style = rnd.choice(["|", ">", None, '"', "'"]) if "\n" in data or rnd.random() < 0.3 else None
        return dumper.represent_scalar("tag:yaml.org,2002:str", data, style=style)

    Dumper.add_representer(str, styled)
    docs = []
    for _ in range(count):
        doc = {f"key{j}": node() for j in range(rnd.randrange(1, 4))}
        docs.append(yaml.dump(doc, Dumper=Dumper, default_flow_style=rnd.choice([False, None]),
                              allow_unicode=True, width=rnd.choice([20, 80])))
    return docs


@pytest.mark.parametrize("seed", [1, 2])
def test_reads_what_pyyaml_writes_as_pyyaml_reads_it(seed: int) -> None:
    import yaml

    checked = 0
    for text in _random_documents(seed, 400):
        try:
            mine = parse_yaml(text)
        except SkillIntegrityError as exc:  # e.g. a document end marker after a kept block scalar
            assert exc.unsupported, text
            continue
        assert mine == yaml.safe_load(text), text
        checked += 1
    assert checked > 380


def test_long_constructs_cost_linear_time_and_the_frontmatter_is_bounded() -> None:
    """A hostile SKILL.md: multi-line scalars are joined and searched once (not once per
    line), and a frontmatter over 256 KiB is refused before it is parsed."""
    import time

    from mcpsync._skills import parse_frontmatter

    began = time.process_time()
    text = "a: 'x\n" + "  ''y'' z\n" * 5000 + "  end'\nb: [\n" + "  'q', w,\n" * 5000 + "  e]\n"
    value = parse_yaml(text)
    assert value["a"].startswith("x 'y' z") and value["b"][-1] == "e" and len(value["b"]) == 10001
    assert time.process_time() - began < 10  # (seconds of CPU, a generous bound: it takes well under one)
    with pytest.raises(SkillIntegrityError, match="more than the 262,144"):
        parse_frontmatter("---\n" + "a: b\n" * 60000 + "---\n")
