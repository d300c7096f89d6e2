"""Client extensions (SEP-2133): the typed declaration and what goes on the wire."""

from __future__ import annotations

import pytest

from mcpsync import Extension
from mcpsync._extensions import wire_extensions


def test_the_defaults_are_the_extensions_mcpsync_implements() -> None:
    assert [e.id for e in Extension.DEFAULTS] == ["io.modelcontextprotocol/tasks", "io.modelcontextprotocol/skills"]
    assert wire_extensions(None) == {"io.modelcontextprotocol/tasks": {}, "io.modelcontextprotocol/skills": {}}
    assert wire_extensions([]) == {}


def test_settings_are_a_frozen_json_object() -> None:
    settings = {"level": "full", "nested": {"n": 1}}
    ext = Extension("com.example/audit", settings)
    settings["level"] = "changed"  # the caller's dict is copied
    assert wire_extensions([ext, "org.example.deep/other"]) == {
        "com.example/audit": {"level": "full", "nested": {"n": 1}},
        "org.example.deep/other": {},
    }
    with pytest.raises(TypeError):
        ext.settings["level"] = "x"  # type: ignore[index]
    assert ext == Extension("com.example/audit", {"level": "full", "nested": {"n": 1}})


@pytest.mark.parametrize("bad", ["tasks", "io.x/", "/x", "io..x/y", "io x/y", "-io.x/y", 7])
def test_an_identifier_must_be_prefix_slash_name(bad: object) -> None:
    with pytest.raises(ValueError, match="identifier"):
        Extension(bad)  # type: ignore[arg-type]


def test_settings_must_be_json() -> None:
    with pytest.raises(ValueError, match="settings"):
        Extension("com.example/x", ["not", "a", "mapping"])  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="not JSON"):
        Extension("com.example/x", {"when": object()})


def test_one_extension_declared_twice_is_refused() -> None:
    with pytest.raises(ValueError, match="twice"):
        wire_extensions([Extension.TASKS, "io.modelcontextprotocol/tasks"])
    with pytest.raises(ValueError, match="neither"):
        wire_extensions([3])  # type: ignore[list-item]


def test_an_extension_hashes_by_id_and_pickles() -> None:
    import pickle

    ext = Extension("com.example/audit", {"level": "full"})
    assert {ext, Extension("com.example/audit", {"level": "full"})} == {ext}
    back = pickle.loads(pickle.dumps(ext))
    assert back == ext and dict(back.settings) == {"level": "full"}
