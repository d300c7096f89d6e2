"""The documentation site builds with ``mkdocs build --strict`` (a broken reference, a
page missing from the nav, a docstring griffe cannot read: the build fails), and every
public class has a docstring."""

from __future__ import annotations

import inspect
import os
import subprocess
import sys

import pytest

import mcpsync
from tests.conftest import ROOT


def test_every_public_class_has_a_docstring() -> None:
    missing = []
    for name in mcpsync.__all__:
        obj = getattr(mcpsync, name)
        if inspect.isclass(obj) and not (obj.__dict__.get("__doc__") or "").strip():
            missing.append(name)
    assert not missing, f"public classes without a docstring: {missing}"


@pytest.mark.slow
def test_the_docs_build_strict(tmp_path) -> None:
    pytest.importorskip("mkdocs", reason="the doc tools belong to the docs (and test) extra")
    pytest.importorskip("mkdocstrings_handlers.python")
    pytest.importorskip("material")
    env = {**os.environ, "NO_MKDOCS_2_WARNING": "1", "PYTHONPATH": str(ROOT)}
    out = subprocess.run(
        [sys.executable, "-m", "mkdocs", "build", "--strict", "--site-dir", str(tmp_path / "site")],
        cwd=ROOT, env=env, capture_output=True, text=True, timeout=600,
    )
    assert out.returncode == 0, out.stdout[-4000:] + out.stderr[-4000:]
    site = tmp_path / "site"
    for page in ("transports", "resilience", "auth", "config", "profiles", "adapters", "observability", "cli",
                 "bench", "benchmarks", "reference/client"):
        assert (site / page / "index.html").is_file(), page
    client_page = (site / "reference" / "client" / "index.html").read_text()
    assert "call_tool" in client_page and "list_tools" in client_page  # generated from the docstrings
