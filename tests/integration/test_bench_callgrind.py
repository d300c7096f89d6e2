"""benchmarks/callgrind.py counts client instructions per call under valgrind (installed by
tests/setup/60-valgrind.sh): a short run of the cheapest contestants."""

from __future__ import annotations

import os
import platform
import re
import subprocess
import sys

import pytest

from tests.conftest import ROOT

sys.path.insert(0, str(ROOT))

from benchmarks.callgrind import RUNNING_ON_VALGRIND, client_request  # noqa: E402

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
    # --check: exit 1 exactly when stdio-legacy is over its budget
    from benchmarks.callgrind import BUDGETS

    assert done.returncode == (1 if rows["stdio-legacy"] > BUDGETS["stdio-legacy"] else 0), done.stderr
