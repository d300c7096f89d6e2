"""mcpsync's own conformance scenarios (tests/conformance/own_scenarios.py) against mcpsync:
one test per scenario × spec version, beside the official suites and marked as they are.

Each runs ``tests/conformance/client.py`` (the client the official harness drives) against
the scenario's server on 127.0.0.1; it passes when no check failed and one succeeded. The
runs start together on a small thread pool the first time one is needed (each is mostly a
client process waiting on its server); every wait is bounded.
"""

from __future__ import annotations

import os
import sys
import threading
from concurrent.futures import Future, ThreadPoolExecutor
from pathlib import Path

import pytest

from tests.conformance.own_scenarios import SCENARIOS, Outcome, run

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent.parent
CLIENT = [sys.executable, str(HERE / "client.py")]
RUN_TIMEOUT = 60.0
WORKERS = int(os.environ.get("MCPSYNC_CONFORMANCE_WORKERS", "4"))

pytestmark = [pytest.mark.slow, pytest.mark.conformance, pytest.mark.timeout(RUN_TIMEOUT * 6)]

CASES = [(name, version) for name, cls in SCENARIOS.items() for version in cls.versions]
_lock = threading.Lock()
_pool: ThreadPoolExecutor | None = None
_runs: dict[tuple[str, str], Future[Outcome]] = {}


def _outcome(case: tuple[str, str]) -> Outcome:
    global _pool
    env = {"PYTHONPATH": os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")]))}
    with _lock:
        if _pool is None:
            _pool = ThreadPoolExecutor(max_workers=WORKERS, thread_name_prefix="own-conformance")
            for c in CASES:  # all of them at once, in order
                _runs[c] = _pool.submit(run, c[0], CLIENT, c[1], RUN_TIMEOUT, env)
        future = _runs[case]
    return future.result(timeout=RUN_TIMEOUT * (len(CASES) // WORKERS + 2))


@pytest.fixture(scope="module", autouse=True)
def _shutdown():
    yield
    if _pool is not None:
        _pool.shutdown(wait=True, cancel_futures=True)


@pytest.mark.parametrize("case", CASES, ids=[f"{n}@{v}" for n, v in CASES])
def test_scenario(case: tuple[str, str]) -> None:
    outcome = _outcome(case)
    assert outcome.passed, f"{case[0]}@{case[1]} failed:\n{outcome.explain()}"
