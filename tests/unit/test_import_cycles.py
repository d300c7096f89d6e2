"""mcpsync's modules import each other without cycles (issue 17), counting imports made
inside functions, which hide a cycle from the interpreter but not from a reader.

Cycles still to break would be listed in ``KNOWN`` (none are); the test fails on any
other, and on a known one once it is gone (so that the list only shrinks).
"""

from __future__ import annotations

import ast
from pathlib import Path

PACKAGE = Path(__file__).resolve().parents[2] / "mcpsync"

#: cycles still to break (none: transports/_factory.py broke the last one)
KNOWN: list[frozenset[str]] = []


def _modules() -> dict[str, Path]:
    found = {}
    for path in PACKAGE.rglob("*.py"):
        parts = path.relative_to(PACKAGE.parent).with_suffix("").parts
        name = ".".join(parts[:-1] if parts[-1] == "__init__" else parts)
        found[name] = path
    return found


def _imports(name: str, path: Path, modules: dict[str, Path]) -> set[str]:
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    out: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            out.update(a.name for a in node.names if a.name in modules)
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")[: len(package.split(".")) - (node.level - 1)]
                target = ".".join(base + ([node.module] if node.module else []))
            else:
                target = node.module or ""
            for alias in node.names:
                sub = f"{target}.{alias.name}"
                out.add(sub if sub in modules else target)
    return {m for m in out if m in modules and m != name and m != "mcpsync"}


def _cycles(graph: dict[str, set[str]]) -> list[frozenset[str]]:
    """Strongly connected components of more than one module (Tarjan, iteratively)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[frozenset[str]] = []
    counter = 0
    for root in graph:
        if root in index:
            continue
        work = [(root, iter(sorted(graph[root])))]
        index[root] = low[root] = counter
        counter += 1
        stack.append(root)
        on_stack.add(root)
        while work:
            node, edges = work[-1]
            advanced = False
            for nxt in edges:
                if nxt not in index:
                    index[nxt] = low[nxt] = counter
                    counter += 1
                    stack.append(nxt)
                    on_stack.add(nxt)
                    work.append((nxt, iter(sorted(graph[nxt]))))
                    advanced = True
                    break
                if nxt in on_stack:
                    low[node] = min(low[node], index[nxt])
            if advanced:
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[node])
            if low[node] == index[node]:
                comp = set()
                while True:
                    member = stack.pop()
                    on_stack.discard(member)
                    comp.add(member)
                    if member == node:
                        break
                if len(comp) > 1:
                    found.append(frozenset(comp))
    return found


def test_no_import_cycle_but_the_known_one() -> None:
    modules = _modules()
    graph = {name: _imports(name, path, modules) for name, path in modules.items()}
    cycles = _cycles(graph)
    new = [sorted(c) for c in cycles if c not in KNOWN]
    assert not new, f"import cycles among mcpsync's modules: {new}"
    gone = [sorted(c) for c in KNOWN if c not in cycles]
    assert not gone, f"a known cycle is gone: take it off KNOWN: {gone}"


def test_the_walk_sees_imports_inside_functions() -> None:
    graph = {"a": {"b"}, "b": {"a"}, "c": set()}
    assert _cycles(graph) == [frozenset({"a", "b"})]
    modules = _modules()
    assert "mcpsync._bench" in _imports("mcpsync.cli", modules["mcpsync.cli"], modules)  # a lazy import
