"""Packaging that lasts (issue 19, item 9): an SPDX license, build requirements pinned to
tested ranges, a wheel that installs in a fresh venv, and a build without a C compiler
that tells the user about MCPSYNC_NO_EXTENSIONS=1."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
import venv
import zipfile
from pathlib import Path

import pytest

from tests.conftest import ROOT

try:
    import tomllib
except ImportError:  # Python 3.10
    tomllib = pytest.importorskip("tomli")

SOURCES = ["setup.py", "pyproject.toml", "README.md", "LICENSE", "mcpsync"]


def _pyproject() -> dict:
    return tomllib.loads((ROOT / "pyproject.toml").read_text())


def _copy_sources(dest: Path) -> Path:
    """The files a build reads (an sdist's worth), without compiled or cached files."""
    src = dest / "src"
    src.mkdir()
    for name in SOURCES:
        path = ROOT / name
        if path.is_dir():
            shutil.copytree(path, src / name, ignore=shutil.ignore_patterns("__pycache__", "*.so", "*.c", "*.pyc"))
        else:
            shutil.copy2(path, src / name)
    return src


def _clean_env(**extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "MCPSYNC_NO_EXTENSIONS")}
    env.update(extra)
    return env


def test_license_is_an_spdx_string_and_build_requirements_are_bounded() -> None:
    data = _pyproject()
    assert data["project"]["license"] == "MIT"
    assert not any(c.startswith("License ::") for c in data["project"].get("classifiers", []))  # PEP 639: not with an expression
    requires = {re.split(r"[<>=!~ ]", r, maxsplit=1)[0].lower(): r for r in data["build-system"]["requires"]}
    assert set(requires) >= {"setuptools", "cython"}
    for name in ("setuptools", "cython"):
        assert ">=" in requires[name] and "<" in requires[name].replace("<=", ""), f"{requires[name]}: pin a tested range"
    low = re.search(r">=\s*(\d+)", requires["setuptools"])
    assert low is not None and int(low.group(1)) >= 77, "the SPDX license string needs setuptools >= 77"


@pytest.mark.slow
@pytest.mark.timeout(600)
def test_a_build_without_a_c_compiler_names_the_pure_python_switch(tmp_path: Path) -> None:
    src = _copy_sources(tmp_path)
    p = subprocess.run(
        [sys.executable, "-m", "pip", "wheel", ".", "-w", str(tmp_path / "dist"), "--no-deps", "--no-build-isolation"],
        cwd=src,
        capture_output=True,
        text=True,
        timeout=500,
        env=_clean_env(CC=str(tmp_path / "no-such-cc")),
    )
    out = p.stdout + p.stderr
    assert p.returncode != 0, out
    # the command that installs what was being built: this directory (not `pip install mcpsync`, PyPI's)
    assert "could not compile its C extension" in out and f"MCPSYNC_NO_EXTENSIONS=1 pip install {src}" in out, out
    assert "Traceback" not in out, out


@pytest.mark.slow
@pytest.mark.timeout(900)
def test_the_wheel_installs_in_a_fresh_venv(tmp_path: Path) -> None:
    src = _copy_sources(tmp_path)
    dist = tmp_path / "dist"
    p = subprocess.run(
        [sys.executable, "-m", "pip", "wheel", ".", "-w", str(dist), "--no-deps"],
        cwd=src,
        capture_output=True,
        text=True,
        timeout=600,
        env=_clean_env(),
    )
    assert p.returncode == 0, p.stdout + p.stderr
    (wheel,) = dist.glob("mcpsync-*.whl")
    with zipfile.ZipFile(wheel) as zf:
        metadata = zf.read(next(n for n in zf.namelist() if n.endswith(".dist-info/METADATA"))).decode()
        names = zf.namelist()
    assert "License-Expression: MIT" in metadata
    assert "License-File: LICENSE" in metadata and any(n.endswith("licenses/LICENSE") for n in names)
    assert re.search(r"^Requires-Dist: jsonschema", metadata, re.M)
    for compiled in ("_cspeedups", "_cpipes", "_chttp"):
        assert any(re.match(rf"mcpsync/_speedups/{compiled}\..*(\.so|\.pyd)$", n) for n in names), f"{compiled} is in the wheel"
    assert "mcpsync/py.typed" in names

    env_dir = tmp_path / "venv"
    # system site-packages give the dependencies without a download; the wheel installed
    # in the venv comes first on its path
    venv.create(env_dir, system_site_packages=True, with_pip=False)
    bindir = env_dir / ("Scripts" if os.name == "nt" else "bin")
    py = bindir / "python"
    p = subprocess.run([str(py), "-m", "pip", "install", "--no-deps", "--no-index", str(wheel)], capture_output=True, text=True, timeout=300, env=_clean_env(), cwd=tmp_path)
    assert p.returncode == 0, p.stdout + p.stderr
    code = ("import mcpsync, os; from mcpsync._speedups import JSONLane; print(os.path.realpath(mcpsync.__file__)); "
            "print(mcpsync.SPEEDUPS); print(JSONLane.__module__)")
    p = subprocess.run([str(py), "-c", code], capture_output=True, text=True, timeout=60, env=_clean_env(), cwd=tmp_path)
    assert p.returncode == 0, p.stderr
    where, speedups, lane = p.stdout.split()
    assert where.startswith(str(env_dir.resolve())), where
    assert speedups != "python", "the wheel's compiled module is used"
    assert lane == "mcpsync._speedups._chttp", "the wheel's compiled HTTP lane is used"
    p = subprocess.run([str(bindir / "mcpsync"), "--version"], capture_output=True, text=True, timeout=60, env=_clean_env(), cwd=tmp_path)
    assert p.returncode == 0, p.stderr
    assert p.stdout.strip().startswith("mcpsync ")
