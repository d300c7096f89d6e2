"""The scripts in examples/ (one per README area) run against the bundled demo server,
and pass ``mypy --strict`` and ``pyright`` (strict) as a user's code would (issue 19, item 1)."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys

import pytest

from tests.conftest import ROOT

EXAMPLES = sorted((ROOT / "examples").glob("*.py"))
# the public modules pyright checks strictly along with the examples (mypy --strict checks
# the whole package)
STRICT_MODULES = ["mcpsync/__init__.py", "mcpsync/_errors.py", "mcpsync/adapters.py", "mcpsync/cli.py"]


def _env() -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.endswith("_API_KEY")}  # never call a real LLM
    env["PYTHONPATH"] = str(ROOT)
    return env


def test_there_is_an_example_per_area() -> None:
    names = {p.stem for p in EXAMPLES}
    assert {"quickstart", "transports", "resources_prompts", "config_files", "profiles", "llm_adapters"} <= names


@pytest.mark.timeout(90)
@pytest.mark.parametrize("script", EXAMPLES, ids=lambda p: p.stem)
def test_example_runs(script: os.PathLike[str]) -> None:
    p = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, timeout=75, cwd=ROOT, env=_env())
    assert p.returncode == 0, p.stdout + p.stderr
    assert p.stdout.strip()


@pytest.mark.timeout(300)
def test_examples_and_package_pass_mypy_strict() -> None:
    pytest.importorskip("mypy")
    for sdk in ("anthropic", "openai", "google.genai"):
        pytest.importorskip(sdk)  # the adapters' shapes are the SDKs' own types
    # the whole package, and the examples as a user's code would be (issue 17)
    cmd = [sys.executable, "-m", "mypy", "--strict", "--no-incremental", "examples/", "mcpsync"]
    p = subprocess.run(cmd, capture_output=True, text=True, timeout=280, cwd=ROOT, env=_env())
    assert p.returncode == 0, p.stdout + p.stderr


@pytest.mark.timeout(300)
def test_examples_pass_pyright_strict() -> None:
    pyright = shutil.which("pyright")
    if pyright is None or shutil.which("node") is None:
        pytest.skip("pyright (PyPI package) and node are needed")
    for sdk in ("anthropic", "openai", "google.genai"):
        pytest.importorskip(sdk)
    p = subprocess.run([pyright, "-p", "examples/pyrightconfig.json"], capture_output=True, text=True, timeout=280, cwd=ROOT, env=_env())
    assert p.returncode == 0, p.stdout + p.stderr
    p = subprocess.run([pyright, *STRICT_MODULES], capture_output=True, text=True, timeout=280, cwd=ROOT, env=_env())
    assert p.returncode == 0, p.stdout + p.stderr
