"""The top floor stays readable: no module of the package over 700 lines, and the Client
(constructors, one method per MCP request, lifecycle) under 600. A module that outgrows its
limit is split along a concern, not squeezed."""

from __future__ import annotations

from pathlib import Path

import mcpsync

PACKAGE = Path(mcpsync.__file__).parent
MODULE_LIMIT = 700
CLIENT_LIMIT = 600


def _lines(path: Path) -> int:
    return len(path.read_text(encoding="utf-8").splitlines())


def test_no_module_over_the_limit() -> None:
    over = {
        str(path.relative_to(PACKAGE)): n
        for path in sorted(PACKAGE.rglob("*.py"))
        if (n := _lines(path)) > MODULE_LIMIT
    }
    assert not over, f"modules over {MODULE_LIMIT} lines: {over}"


def test_the_client_reads_top_to_bottom() -> None:
    assert _lines(PACKAGE / "_client.py") < CLIENT_LIMIT
