"""A default install does what the default options ask, quietly (issue 19, item 6).

``mcpsync demo`` runs in a child process where every package that only an optional
extra brings is made unimportable, so the child sees what ``pip install mcpsync`` gives.
"""

from __future__ import annotations

import importlib.metadata
import logging
import os
import re
import subprocess
import sys
import textwrap

import pytest

from tests.conftest import ROOT

try:
    import tomllib
except ImportError:  # Python 3.10
    tomllib = pytest.importorskip("tomli")

pytestmark = pytest.mark.timeout(60)


def _dist_name(requirement: str) -> str:
    return re.split(r"[\s<>=!~;\[]", requirement, maxsplit=1)[0].lower().replace("_", "-")


def _extra_only_modules() -> set[str]:
    """Top-level import names of the packages only the optional extras bring."""
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    plain = {_dist_name(r) for r in project["dependencies"]}
    extras = {_dist_name(r) for reqs in project["optional-dependencies"].values() for r in reqs}
    extra_only = extras - plain - {"mcpsync"}
    modules = set()
    for module, dists in importlib.metadata.packages_distributions().items():
        if any(d.lower().replace("_", "-") in extra_only for d in dists):
            modules.add(module)
    return modules


def test_jsonschema_is_a_plain_dependency_and_schema_extra_still_exists():
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    assert "jsonschema" in {_dist_name(r) for r in project["dependencies"]}
    assert project["optional-dependencies"]["schema"], "old `mcpsync[schema]` installs must keep working"


def test_demo_prints_no_warning_on_a_default_install():
    blocked = sorted(_extra_only_modules())
    runner = textwrap.dedent(
        f"""
        import sys
        BLOCKED = set({blocked!r})

        class Block:
            def find_spec(self, name, path=None, target=None):
                if name.split(".")[0] in BLOCKED:
                    raise ImportError(f"{{name}} is not installed (an optional extra)")
                return None

        sys.meta_path.insert(0, Block())
        from mcpsync.cli import main
        sys.exit(main(["demo"]))
        """
    )
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    p = subprocess.run([sys.executable, "-c", runner], capture_output=True, text=True, timeout=45, env=env, cwd=ROOT)
    assert p.returncode == 0, p.stderr
    assert "hello from mcpsync" in p.stdout
    assert p.stderr == "", p.stderr


def test_package_logger_has_a_null_handler():
    code = "import logging, mcpsync; print([type(h).__name__ for h in logging.getLogger('mcpsync').handlers])"
    p = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=30, cwd=ROOT, env={**os.environ, "PYTHONPATH": str(ROOT)})
    assert p.returncode == 0, p.stderr
    assert "NullHandler" in p.stdout


def test_library_records_stay_silent_without_logging_config():
    # With a NullHandler on "mcpsync", Python's last-resort handler no longer prints
    # the library's warnings to stderr of an application that configured no logging.
    code = "import logging, mcpsync; logging.getLogger('mcpsync.x').warning('should not show')"
    p = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=30, cwd=ROOT, env={**os.environ, "PYTHONPATH": str(ROOT)})
    assert p.returncode == 0 and p.stderr == "", p.stderr
    assert logging.lastResort is not None
