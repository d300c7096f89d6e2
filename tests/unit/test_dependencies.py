"""The package's runtime dependencies are the ones it imports (issue 17).

Every distribution in ``[project] dependencies`` is imported somewhere in ``mcpsync/``
(counting imports inside functions), and every third-party module that ``mcpsync/``
imports at module level is a runtime dependency or an extra's. What only the tests or
the benchmarks use belongs to the ``test`` or ``bench`` extra.
"""

from __future__ import annotations

import ast
import re
import sys
from pathlib import Path

import pytest

try:
    import tomllib
except ImportError:  # Python 3.10
    tomllib = pytest.importorskip("tomli")

ROOT = Path(__file__).resolve().parents[2]
PACKAGE = ROOT / "mcpsync"

#: distributions whose import name is not their own name
IMPORT_NAMES = {
    "websocket-client": "websocket",
    "sseclient-py": "sseclient",
    "grpcio": "grpc",
    "protobuf": "google",
    "opentelemetry-api": "opentelemetry",
    "opentelemetry-sdk": "opentelemetry",
    "pydantic-ai-slim": "pydantic_ai",
    "openai-agents": "agents",
    "llama-index-core": "llama_index",
}


def _dist(requirement: str) -> str:
    return re.split(r"[<>=!~\[ ;]", requirement, maxsplit=1)[0].strip().lower()


def _module_of(dist: str) -> str:
    return IMPORT_NAMES.get(dist, dist.replace("-", "_"))


def _imports() -> tuple[set[str], set[str]]:
    """(every top-level module imported anywhere, those imported by a module-level statement)."""
    everywhere: set[str] = set()
    unguarded: set[str] = set()
    for path in PACKAGE.rglob("*.py"):
        tree = ast.parse(path.read_text(), str(path))
        # a module-level import runs on ``import mcpsync...``: one inside a function, a
        # ``try`` or an ``if`` (TYPE_CHECKING) belongs to an optional feature
        plain = {id(n) for n in tree.body}
        for node in ast.walk(tree):
            if isinstance(node, ast.Import):
                names = [a.name for a in node.names]
            elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
                names = [node.module]
            else:
                continue
            tops = {n.split(".")[0] for n in names}
            everywhere |= tops
            if id(node) in plain:
                unguarded |= tops
    return everywhere, unguarded


def _project() -> dict:
    return tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]


def test_every_runtime_dependency_is_imported_by_the_package() -> None:
    everywhere, _ = _imports()
    unused = [d for d in map(_dist, _project()["dependencies"]) if _module_of(d) not in everywhere]
    assert not unused, f"runtime dependencies mcpsync never imports (move them to the test or bench extra): {unused}"


def test_every_unguarded_third_party_import_is_declared() -> None:
    project = _project()
    declared = {_module_of(_dist(r)) for r in project["dependencies"]}
    for extra in project["optional-dependencies"].values():
        declared |= {_module_of(_dist(r)) for r in extra if not _dist(r).startswith("mcpsync")}
    _, unguarded = _imports()
    stdlib = set(sys.stdlib_module_names) | {"mcpsync", "__future__"}
    missing = sorted(m for m in unguarded - stdlib if m not in declared)
    assert not missing, f"mcpsync imports these without declaring them: {missing}"
