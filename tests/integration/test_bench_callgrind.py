"""benchmarks/callgrind.py counts client instructions per call under valgrind (installed by
tests/setup/60-valgrind.sh): a short run of the cheapest contestants, and the budgets: every
budgeted row run with ``--check`` (slow: the quick loop skips it), so a row that gets more
than 5 % worse fails the suite."""

from __future__ import annotations

import os
import platform
import re
import subprocess
import sys

import pytest

from tests.conftest import ROOT

sys.path.insert(0, str(ROOT))

from benchmarks.callgrind import BUDGETS, RUNNING_ON_VALGRIND, TOLERANCE, client_request, over_budget  # noqa: E402
from benchmarks.contestants import CONTESTANTS  # noqa: E402

pytestmark = pytest.mark.skipif(platform.machine() != "x86_64", reason="the client requests are x86-64 code")


def test_client_requests_are_no_ops_outside_valgrind() -> None:
    assert client_request(RUNNING_ON_VALGRIND) == 0


def test_counts_the_calls_only_and_checks_budgets() -> None:
    done = subprocess.run(
        [sys.executable, "benchmarks/callgrind.py", "raw-stdio", "stdio-legacy", "--calls", "60", "--warmup", "5",
         "--markdown", "--check"],
        cwd=ROOT, env={**os.environ, "PYTHONPATH": str(ROOT)}, capture_output=True, text=True, timeout=300)
    rows = {m.group(1): int(m.group(2).replace(",", ""))
            for m in re.finditer(r"^\| (\S+) \| \w+ \| \w+ \| ([\d,]+) \|", done.stdout, re.M)}
    assert set(rows) == {"raw-stdio", "stdio-legacy"}, done.stdout + done.stderr
    # per call, without start-up: a raw loop is thousands of instructions, not millions
    assert 5_000 < rows["raw-stdio"] < 60_000
    assert rows["raw-stdio"] < rows["stdio-legacy"] < 1_000_000
    # --check: exit 1 exactly when stdio-legacy is over its budget (and its tolerance)
    assert done.returncode == (1 if rows["stdio-legacy"] > BUDGETS["stdio-legacy"] * (1 + TOLERANCE) else 0), done.stderr


def test_help_is_printed() -> None:
    done = subprocess.run([sys.executable, "benchmarks/callgrind.py", "--help"], cwd=ROOT, capture_output=True, text=True,
                          timeout=60)
    assert done.returncode == 0 and "more than 5 % over its budget" in " ".join(done.stdout.split()), done.stderr


def test_a_row_fails_only_beyond_the_tolerance() -> None:
    budget = BUDGETS["stdio-legacy"]
    assert TOLERANCE == 0.05
    assert over_budget({"stdio-legacy": budget * 1.049, "raw-stdio": 10**9}) == []
    assert over_budget({"stdio-legacy": budget * 1.051}) == ["stdio-legacy"]


def test_every_row_a_user_meets_has_a_budget() -> None:
    rows = {"stdio-legacy", "stdio-modern", "stdio-idle", "stdio-schema", "http-legacy", "http-modern",
            "http-auth", "list-100", "list-1000", "threads-16"}
    assert rows <= set(BUDGETS) <= set(CONTESTANTS)
    assert all(CONTESTANTS[row].who == "mcpsync" for row in BUDGETS)


@pytest.mark.slow
@pytest.mark.timeout(900)
def test_budgets() -> None:
    """Every budgeted row, the full count, two at a time: none more than 5 % over its budget."""
    done = subprocess.run(
        [sys.executable, "benchmarks/callgrind.py", "--check", "--jobs", "2", "--markdown"],
        cwd=ROOT, env={**os.environ, "PYTHONPATH": str(ROOT)}, capture_output=True, text=True, timeout=850)
    rows = {m.group(1) for m in re.finditer(r"^\| (\S+) \| \w+ \| \w+ \| [\d,]+ \|", done.stdout, re.M)}
    assert rows == set(BUDGETS), done.stdout + done.stderr
    assert done.returncode == 0, done.stdout + done.stderr
