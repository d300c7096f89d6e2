"""The scripts in examples/ (one per README area) run against the bundled demo server,
and pass ``mypy --strict`` and ``pyright`` (strict) as a user's code would (issue 19, item 1)."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys

import pytest

from pathlib import Path

from tests.conftest import ROOT

EXAMPLES = sorted((ROOT / "examples").glob("*.py"))
# the public modules pyright checks strictly along with the examples (mypy --strict checks
# the whole package)
STRICT_MODULES = ["mcpsync/__init__.py", "mcpsync/_errors.py", "mcpsync/adapters.py", "mcpsync/cli.py",
                  "mcpsync/pytest_plugin.py", "mcpsync/integrations/_toolbox.py", "mcpsync/integrations/langchain.py",
                  "mcpsync/integrations/pydantic_ai.py", "mcpsync/integrations/openai_agents.py",
                  "mcpsync/integrations/llama_index.py"]


def _env() -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.endswith("_API_KEY")}  # never call a real LLM
    env["PYTHONPATH"] = str(ROOT)
    return env


def test_there_is_an_example_per_area() -> None:
    names = {p.stem for p in EXAMPLES}
    assert {"quickstart", "transports", "resources_prompts", "config_files", "profiles", "llm_adapters"} <= names
    # one per agent framework (README: "Use it in your framework")
    assert {f"framework_{f}" for f in ("langchain", "pydantic_ai", "openai_agents", "smolagents", "dspy", "llama_index")} <= names


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


def _readme_blocks(tmp_path: Path) -> list[Path]:
    """The README's ``python`` code blocks, each written to its own file, as written."""
    blocks = re.findall(r"```python\n(.*?)```", (ROOT / "README.md").read_text(), flags=re.S)
    assert len(blocks) >= 10
    paths = []
    for i, block in enumerate(blocks):
        path = tmp_path / f"readme_block_{i:02d}.py"
        path.write_text(block)
        paths.append(path)
    return paths


@pytest.mark.timeout(300)
def test_readme_code_blocks_pass_pyright_strict(tmp_path: Path) -> None:
    """Each README code block, as a user would paste it, passes ``pyright --strict`` (issue 34)."""
    pyright = shutil.which("pyright")
    if pyright is None or shutil.which("node") is None:
        pytest.skip("pyright (PyPI package) and node are needed")
    pytest.importorskip("ray")
    pytest.importorskip("mcp.server.mcpserver")
    paths = _readme_blocks(tmp_path)
    (tmp_path / "pyrightconfig.json").write_text(json.dumps({"typeCheckingMode": "strict", "extraPaths": [str(ROOT)]}))
    p = subprocess.run([pyright, "-p", str(tmp_path / "pyrightconfig.json")], capture_output=True, text=True, timeout=280, cwd=tmp_path, env=_env())
    assert p.returncode == 0 and len(paths) > 0, p.stdout + p.stderr


@pytest.mark.timeout(300)
def test_readme_code_blocks_pass_mypy_strict(tmp_path: Path) -> None:
    pytest.importorskip("mypy")
    pytest.importorskip("ray")
    paths = _readme_blocks(tmp_path)
    env = {**_env(), "MYPYPATH": str(ROOT)}
    cmd = [sys.executable, "-m", "mypy", "--strict", "--no-incremental", *map(str, paths)]
    p = subprocess.run(cmd, capture_output=True, text=True, timeout=280, cwd=tmp_path, env=env)
    assert p.returncode == 0, p.stdout + p.stderr
