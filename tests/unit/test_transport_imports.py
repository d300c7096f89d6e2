"""Transports move bytes: nothing under ``mcpsync/transports/`` imports the layers above.

A transport may import the standard library, third-party packages, other transport
modules and the ground floor (``_errors``, ``_status_errors``, ``_constants``, ``_policies``, ``_speedups``, ``_channel``);
anything else in ``mcpsync`` (the Client, the dispatcher, ``server/``, messages, ...)
is off limits, including imports inside functions and under ``TYPE_CHECKING``.
"""

from __future__ import annotations

import ast
from pathlib import Path

import mcpsync

PACKAGE = Path(mcpsync.__file__).parent
GROUND_FLOOR = ("mcpsync._errors", "mcpsync._status_errors", "mcpsync._constants", "mcpsync._policies", "mcpsync._speedups", "mcpsync._channel")


def _imported(path: Path) -> list[tuple[int, str]]:
    """Every mcpsync module ``path`` imports, as absolute dotted names."""
    module = "mcpsync." + ".".join(path.relative_to(PACKAGE).with_suffix("").parts)
    package = module.rsplit(".", 1)[0] if path.name != "__init__.py" else module.removesuffix(".__init__")
    found: list[tuple[int, str]] = []
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            found += [(node.lineno, alias.name) for alias in node.names if alias.name.split(".")[0] == "mcpsync"]
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")
                base = base[: len(base) - node.level + 1]
                target = ".".join(base + ([node.module] if node.module else []))
            else:
                target = node.module or ""
            if target.split(".")[0] != "mcpsync":
                continue
            if node.module is None or target in ("mcpsync", "mcpsync.transports"):
                # ``from .. import x`` / ``from . import x``: each name may be a module
                found += [(node.lineno, f"{target}.{alias.name}") for alias in node.names]
            else:
                found.append((node.lineno, target))
    return found


def _allowed(name: str) -> bool:
    if name == "mcpsync.transports" or name.startswith("mcpsync.transports."):
        return True
    return any(name == floor or name.startswith(floor + ".") for floor in GROUND_FLOOR)


def test_resolver_sees_relative_and_absolute_imports() -> None:
    sample = PACKAGE / "transports" / "local.py"
    names = {name for _, name in _imported(sample)}
    assert "mcpsync._channel" in names and "mcpsync._errors" in names


def test_transports_import_only_themselves_and_the_ground_floor() -> None:
    offending = []
    for path in sorted((PACKAGE / "transports").rglob("*.py")):
        for lineno, name in _imported(path):
            if not _allowed(name):
                offending.append(f"{path.relative_to(PACKAGE)}:{lineno} imports {name}")
    assert not offending, "transports reach above the ground floor:\n" + "\n".join(offending)
