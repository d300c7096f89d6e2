"""The transports are wired by composition: each holds its parts and calls their public
methods. These checks fail when the structure slips back (a transport subclassing
another's machinery, a class reading another module's private attributes)."""

from __future__ import annotations

import ast
from pathlib import Path

import mcpsync.transports as transports
from mcpsync.transports._base import Transport
from mcpsync.transports._http_exchange import HTTPExchange
from mcpsync.transports._http_streams import ResponseStreams
from mcpsync.transports.sse import SSETransport
from mcpsync.transports.streamable_http import StreamableHTTPTransport

PACKAGE = Path(transports.__file__).parent

#: (module, expression or imported name) a module may still read although the private
#: name belongs to another module's class or to another module. Each says why.
ALLOWED = {
    # _fasthttp and _fastconn are one fast HTTP/1.1 client cut in two for size: the pool
    # manager inlines _OriginPool.get (once per request) through the pool's public idle list
    ("_fasthttp.py", "import _fastconn._CHUNK"),
    ("_fasthttp.py", "import _fastconn._TOKENS"),
    ("_fasthttp.py", "import _fastconn._Conn"),
    ("_fasthttp.py", "import _fastconn._OriginPool"),
    ("_fasthttp.py", "import _fastconn._parse_failed"),
    ("_fasthttp.py", "import _fastconn._rest_of_head"),
    # public by the standard library's own naming
    ("_http_pools.py", "parts._replace"),
    ("_spawn.py", "os._exit"),
}


def _own_names(tree: ast.Module) -> set[str]:
    """The attribute names the module's own classes define (methods, slots, self.x = ...)."""
    names: set[str] = set()
    for cls in (node for node in ast.walk(tree) if isinstance(node, ast.ClassDef)):
        for stmt in cls.body:
            if isinstance(stmt, (ast.FunctionDef, ast.AsyncFunctionDef)):
                names.add(stmt.name)
            elif isinstance(stmt, ast.AnnAssign) and isinstance(stmt.target, ast.Name):
                names.add(stmt.target.id)
            elif isinstance(stmt, ast.Assign):
                for target in stmt.targets:
                    if isinstance(target, ast.Name):
                        names.add(target.id)
                        if target.id == "__slots__":
                            names.update(
                                c.value for c in ast.walk(stmt.value)
                                if isinstance(c, ast.Constant) and isinstance(c.value, str)
                            )
        for node in ast.walk(cls):
            if (
                isinstance(node, ast.Attribute)
                and isinstance(node.ctx, ast.Store)
                and isinstance(node.value, ast.Name)
                and node.value.id == "self"
            ):
                names.add(node.attr)
    return names


def _private(name: str) -> bool:
    return name.startswith("_") and not name.startswith("__")


def _crossings(path: Path) -> set[tuple[str, str]]:
    tree = ast.parse(path.read_text(encoding="utf-8"))
    own = _own_names(tree)
    found: set[tuple[str, str]] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Attribute) and _private(node.attr) and node.attr not in own:
            value = node.value
            if isinstance(value, ast.Name) and value.id in ("self", "cls"):
                continue
            if isinstance(value, ast.Call) and isinstance(value.func, ast.Name) and value.func.id == "super":
                continue
            found.add((path.name, ast.unparse(node)))
        elif isinstance(node, ast.ImportFrom) and node.level >= 1:
            for alias in node.names:
                if _private(alias.name):
                    found.add((path.name, f"import {node.module}.{alias.name}"))
    return found


def test_no_transport_module_reads_another_modules_private_names() -> None:
    found: set[tuple[str, str]] = set()
    for path in sorted(PACKAGE.glob("*.py")):
        found |= _crossings(path)
    assert not found - ALLOWED, f"private names read across modules: {sorted(found - ALLOWED)}"
    assert not ALLOWED - found, f"allow-list entries no longer needed: {sorted(ALLOWED - found)}"


def test_the_http_transports_hold_their_parts_instead_of_inheriting_them() -> None:
    assert StreamableHTTPTransport.__bases__ == (Transport,)
    assert SSETransport.__bases__ == (Transport,)
    assert HTTPExchange.__bases__ == (object,) and ResponseStreams.__bases__ == (object,)
    t = StreamableHTTPTransport("http://127.0.0.1:9/mcp")
    try:
        assert isinstance(t.exchange, HTTPExchange) and t.exchange.url == t.url
        # the hot path calls the exchange's loop bound once, not looked up per POST
        assert t._request == t.exchange.request
    finally:
        t.close()
    s = SSETransport("http://127.0.0.1:9/sse")
    try:
        assert isinstance(s.exchange, HTTPExchange) and s.exchange.url == s.url
    finally:
        s.close()
