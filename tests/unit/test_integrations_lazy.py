"""The framework integrations are imported lazily (issue 34): ``import mcpsync`` and
``import mcpsync.integrations`` load no agent framework; each framework module loads only
its own."""

from __future__ import annotations

import subprocess
import sys

import pytest

FRAMEWORKS = ["langchain_core", "langgraph", "pydantic_ai", "smolagents", "agents", "dspy", "llama_index", "litellm"]


def _loaded(code: str) -> list[str]:
    probe = f"import sys; {code}; print(' '.join(m for m in {FRAMEWORKS!r} if m in sys.modules))"
    out = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    return out.stdout.split()


def test_import_mcpsync_loads_no_framework() -> None:
    assert _loaded("import mcpsync, mcpsync.adapters, mcpsync.integrations; mcpsync.MultiClient") == []


@pytest.mark.parametrize(("module", "framework"), [
    ("langchain", "langchain_core"),
    ("pydantic_ai", "pydantic_ai"),
    ("smolagents", "smolagents"),
    ("openai_agents", "agents"),
    ("dspy", "dspy"),
    ("llama_index", "llama_index"),
])
def test_each_module_loads_only_its_framework(module: str, framework: str) -> None:
    pytest.importorskip(framework)
    loaded = _loaded(f"import mcpsync.integrations.{module}")
    assert framework in loaded
    # a framework may bring its own dependencies (DSPy brings litellm), never another's agent stack
    others = {"langchain_core", "pydantic_ai", "smolagents", "agents", "dspy", "llama_index"} - {framework}
    assert not (others & set(loaded)), loaded
