"""The wiring tells the truth (issue 32): ``Client.__init__`` is the one place where the
Client's parts are made and joined, and no part holds the Client or reaches into another
module's objects.

Read from the source (ast), not run:

* no part of the Client takes a ``client`` parameter or keeps/reads ``._client``;
* no module reads a private attribute (``x._name``, not ``self``/``cls``) that it does not
  define itself: such a name belongs to an object of another module. The few that remain
  are listed in ``ALLOWED`` with why; the list only shrinks (a listed read that is gone
  fails the test too).
"""

from __future__ import annotations

import ast
from pathlib import Path

PACKAGE = Path(__file__).resolve().parents[2] / "mcpsync"

#: the parts ``Client.__init__`` makes: none of them is given the Client
PARTS = (
    "_session.py", "_handshake.py", "_handlers.py", "_tools.py", "_tasks.py", "_skills.py", "_subscriptions.py",
    "_reads.py", "_diagnostics.py", "_routing.py", "_losses.py", "_settings.py", "_ports.py", "_otel.py",
)

#: (module, private name read on another module's object): why it is still read there
ALLOWED: dict[tuple[str, str], str] = {
    # public by the standard library's own naming
    ("transports/_http_pools.py", "_replace"): "namedtuple API (urllib.parse result)",
    ("transports/_spawn.py", "_exit"): "os._exit in a forked child",
}


def _modules() -> dict[str, ast.Module]:
    return {str(p.relative_to(PACKAGE)): ast.parse(p.read_text(), str(p)) for p in sorted(PACKAGE.rglob("*.py"))}


def _defined(tree: ast.Module) -> set[str]:
    """Every name the module defines or sets: functions, classes, attributes stored,
    variables, imports, and strings (``__slots__``, ``object.__setattr__(self, "_key", ...)``)."""
    names: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            names.add(node.name)
        elif isinstance(node, ast.Attribute) and isinstance(node.ctx, ast.Store):
            names.add(node.attr)
        elif isinstance(node, ast.Name) and isinstance(node.ctx, ast.Store):
            names.add(node.id)
        elif isinstance(node, ast.alias):
            names.add(node.asname or node.name.split(".")[-1])
        elif isinstance(node, ast.Constant) and isinstance(node.value, str) and node.value.isidentifier():
            names.add(node.value)
    return names


def _foreign_private_reads(tree: ast.Module) -> set[str]:
    defined = _defined(tree)
    found: set[str] = set()
    for node in ast.walk(tree):
        if not isinstance(node, ast.Attribute) or not node.attr.startswith("_") or node.attr.startswith("__"):
            continue
        if isinstance(node.value, ast.Name) and node.value.id in ("self", "cls"):
            continue
        if node.attr not in defined:
            found.add(node.attr)
    return found


def test_no_part_holds_the_client() -> None:
    modules = _modules()
    held = []
    for name in PARTS:
        for node in ast.walk(modules[name]):
            if isinstance(node, ast.arg) and node.arg == "client":
                held.append(f"{name}:{node.lineno}: a parameter named client")
            elif isinstance(node, ast.Attribute) and node.attr == "_client":
                held.append(f"{name}:{node.lineno}: ._client")
    assert not held, "parts are given settings, collaborators and callbacks, never the Client:\n" + "\n".join(held)


def test_no_module_reads_another_modules_private_attributes() -> None:
    found = {(name, attr) for name, tree in _modules().items() for attr in _foreign_private_reads(tree)}
    new = sorted(found - ALLOWED.keys())
    gone = sorted(ALLOWED.keys() - found)
    assert not new, f"private attributes of another module's objects read (add a public name instead): {new}"
    assert not gone, f"no longer read: strike them from ALLOWED: {gone}"


_MUTATORS = {"update", "setdefault", "append", "extend", "add", "insert", "pop", "clear", "__setitem__"}


def test_no_module_changes_another_modules_tables_at_import() -> None:
    # a table is built in the module that owns it (the result decoders: mcpsync/_decoders.py);
    # a module adding to an imported one at import would make its content depend on import order
    found: list[str] = []
    for path in sorted(PACKAGE.rglob("*.py")):
        tree = ast.parse(path.read_text(), str(path))
        imported = {a.asname or a.name for node in tree.body if isinstance(node, ast.ImportFrom) for a in node.names}
        for node in tree.body:  # module level only: what runs at import
            targets: list[ast.expr] = []
            if isinstance(node, (ast.Assign, ast.AugAssign, ast.AnnAssign)):
                targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            for t in targets:
                if isinstance(t, (ast.Subscript, ast.Attribute)) and isinstance(t.value, ast.Name) and t.value.id in imported:
                    found.append(f"{path.relative_to(PACKAGE)}:{node.lineno} {ast.unparse(t)}")
            if isinstance(node, ast.Expr) and isinstance(node.value, ast.Call):
                f = node.value.func
                if isinstance(f, ast.Attribute) and f.attr in _MUTATORS and isinstance(f.value, ast.Name) and f.value.id in imported:
                    found.append(f"{path.relative_to(PACKAGE)}:{node.lineno} {ast.unparse(f)}(...)")
    assert not found, f"modules changing another module's tables at import: {found}"
