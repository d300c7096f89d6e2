"""The official MCP conformance suite against mcpsync: one test per client scenario × version.

The scenarios are listed by each installed suite itself (``conformance list --client``) when the
tests are collected, so a scenario a later suite adds shows up here as a new (failing) test.
Each test runs the harness for one scenario (one at a time: the harness's suite mode ignores
the client's exit status) with ``tests/conformance/client.py`` as the client; it passes when
the harness exits 0 having recorded at least one SUCCESS check. ``baseline.json`` names the
expected failures, each with its reason (they run as strict xfails: a fix is noticed).

The harness runs are started together on a small thread pool as soon as the first test of this
module needs one (each harness run is mostly waiting on its client process), so the module
costs a fraction of the sum of its scenarios; every wait is bounded.

The suites and Node 22 come from tests/setup/40-conformance.sh (``MCPSYNC_NODE22`` and
``MCPSYNC_CONFORMANCE_DIRS``, or its default prefix under ``.cache/conformance``).
"""

from __future__ import annotations

import json
import os
import re
import shlex
import subprocess
import sys
import tempfile
import threading
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

import pytest

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent.parent
CLIENT = HERE / "client.py"
LOOPBACK = HERE / "loopback.cjs"
BASELINE = HERE / "baseline.json"
DEFAULT_PREFIX = ROOT / ".cache" / "conformance"
VERSIONS = ("0.2.0-alpha.12", "0.2.0-alpha.11", "0.1.16")
#: the harness's own per-client limit (ms) and our bound on one harness run (s).
CLIENT_TIMEOUT_MS = 30_000
RUN_TIMEOUT = 90.0
#: harness runs at once (each is two processes that mostly wait on each other).
WORKERS = int(os.environ.get("MCPSYNC_CONFORMANCE_WORKERS", "4"))

pytestmark = [pytest.mark.slow, pytest.mark.conformance, pytest.mark.timeout(RUN_TIMEOUT * 8)]


@dataclass(frozen=True)
class Suite:
    version: str
    node: str
    dist: str

    def command(self, *args: str) -> list[str]:
        return [self.node, "--require", str(LOOPBACK), self.dist, *args]


@dataclass(frozen=True)
class Case:
    suite: Suite
    scenario: str
    spec_version: str | None  # None: the harness infers it (extension and dated-only scenarios)

    @property
    def id(self) -> str:
        return f"{self.suite.version}::{self.scenario}" + (f"@{self.spec_version}" if self.spec_version else "")


def _suites() -> tuple[list[Suite], str]:
    """The installed suites, and why some are missing (empty when all are there)."""
    node = os.environ.get("MCPSYNC_NODE22") or str(DEFAULT_PREFIX / "node22/node_modules/node/bin/node")
    if not os.access(node, os.X_OK):
        return [], f"Node 22 not installed ({node}); run tests/setup/40-conformance.sh"
    dists: dict[str, str] = {}
    for pair in (os.environ.get("MCPSYNC_CONFORMANCE_DIRS") or "").split():
        version, _, dist = pair.partition("=")
        dists[version] = dist
    suites, missing = [], []
    for version in VERSIONS:
        dist = dists.get(version) or str(
            DEFAULT_PREFIX / f"suite-{version}/node_modules/@modelcontextprotocol/conformance/dist/index.js"
        )
        (suites if os.path.isfile(dist) else missing).append(
            Suite(version, node, dist) if os.path.isfile(dist) else version
        )
    why = f"conformance suite(s) {', '.join(missing)} not installed; run tests/setup/40-conformance.sh" if missing else ""
    return suites, why


_LINE = re.compile(r"^\s*- (\S+) \[([^\]]*)\]")
#: applicability tags that are not a wire version the harness can be asked for.
_NOT_A_VERSION = {"extension", "draft"}


def _cases(suite: Suite) -> list[Case]:
    """Every client scenario of ``suite``, once per spec version it applies to (alphas), as the
    harness lists them. Suites before 0.2 take no per-scenario version: one case each."""
    out = subprocess.run(
        suite.command("list", "--client"), capture_output=True, text=True, timeout=60, check=True
    ).stdout
    per_version = not suite.version.startswith("0.1.")
    cases = []
    for line in out.splitlines():
        m = _LINE.match(line)
        if not m:
            continue
        tags = [t.strip() for t in m.group(2).split(",") if t.strip()]
        if not per_version:
            cases.append(Case(suite, m.group(1), None))
            continue
        for tag in tags or [""]:
            cases.append(Case(suite, m.group(1), None if tag in _NOT_A_VERSION or not tag else tag))
    if not cases:
        raise RuntimeError(f"conformance {suite.version} listed no client scenarios:\n{out}")
    return cases


def _baseline() -> dict[str, str]:
    data = json.loads(BASELINE.read_text())
    return {entry["id"]: entry["reason"] for entry in data["expected_failures"]}


def _params() -> list:
    suites, why = _suites()
    if not suites:
        return [pytest.param(None, marks=pytest.mark.skip(reason=why), id="conformance-suite-missing")]
    expected = _baseline()
    params = []
    for suite in suites:
        for case in _cases(suite):
            marks = []
            if case.id in expected:
                marks.append(pytest.mark.xfail(reason=expected[case.id], strict=True))
            params.append(pytest.param(case, marks=marks, id=case.id))
    if why:  # some suites installed, some not: say so rather than shrink silently
        params.append(pytest.param(None, marks=pytest.mark.skip(reason=why), id="conformance-suite-missing"))
    return params


@dataclass
class Outcome:
    returncode: int
    checks: list[dict]
    output: str

    @property
    def passed(self) -> bool:
        return self.returncode == 0 and any(c.get("status") == "SUCCESS" for c in self.checks)

    def explain(self) -> str:
        bad = [
            f"  {c.get('id')}: {c.get('status')} {c.get('errorMessage') or ''}".rstrip()
            for c in self.checks
            if c.get("status") not in ("SUCCESS", "INFO", "SKIPPED")
        ]
        return (
            f"harness exit {self.returncode}, {sum(c.get('status') == 'SUCCESS' for c in self.checks)} SUCCESS checks\n"
            + "\n".join(bad)
            + "\n--- harness output (tail) ---\n"
            + self.output[-6000:]
        )


def run_case(case: Case) -> Outcome:
    """One harness run of one scenario, with this repository's client; bounded by RUN_TIMEOUT."""
    client = f"{shlex.quote(sys.executable)} {shlex.quote(str(CLIENT))}"
    with tempfile.TemporaryDirectory(prefix="mcpsync-conformance-") as out_dir:
        args = ["client", "--command", client, "--scenario", case.scenario, "--timeout", str(CLIENT_TIMEOUT_MS)]
        args += ["-o", out_dir]
        if case.spec_version:
            args += ["--spec-version", case.spec_version]
        env = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")]))}
        try:
            proc = subprocess.run(
                case.suite.command(*args), capture_output=True, text=True, timeout=RUN_TIMEOUT, env=env, cwd=out_dir
            )
            code, output = proc.returncode, proc.stdout + proc.stderr
        except subprocess.TimeoutExpired as exc:
            partial = exc.stdout or b""
            text = partial.decode(errors="replace") if isinstance(partial, bytes) else partial
            return Outcome(-1, [], f"harness still running after {RUN_TIMEOUT:g} s\n{text}")
        checks: list[dict] = []
        for path in Path(out_dir).rglob("checks.json"):
            checks.extend(json.loads(path.read_text()))
        for path in Path(out_dir).rglob("stderr.txt"):
            output += "\n--- client stderr ---\n" + path.read_text()[-4000:]
        return Outcome(code, checks, output)


class _Runner:
    """Starts the selected cases' harness runs on a small pool, the first time one is needed."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._pool: ThreadPoolExecutor | None = None
        self._futures: dict[str, Future[Outcome]] = {}

    def outcome(self, case: Case, selected: list[Case]) -> Outcome:
        with self._lock:
            if self._pool is None:
                self._pool = ThreadPoolExecutor(max_workers=WORKERS, thread_name_prefix="conformance")
                for c in selected:  # in collection order, so the first tests' runs start first
                    self._futures.setdefault(c.id, self._pool.submit(run_case, c))
            future = self._futures.get(case.id) or self._futures.setdefault(case.id, self._pool.submit(run_case, case))
        # Every run ends within RUN_TIMEOUT; this waits at most for the runs queued before it.
        return future.result(timeout=RUN_TIMEOUT * (len(self._futures) // WORKERS + 2))

    def close(self) -> None:
        if self._pool is not None:
            self._pool.shutdown(wait=True, cancel_futures=True)


@pytest.fixture(scope="module")
def runner():
    r = _Runner()
    yield r
    r.close()


@pytest.fixture(scope="module")
def selected(request) -> list[Case]:
    cases = []
    for item in request.session.items:
        spec = getattr(item, "callspec", None)
        case = spec.params.get("case") if spec is not None else None
        if isinstance(case, Case):
            cases.append(case)
    return cases


@pytest.mark.parametrize("case", _params())
def test_scenario(case: Case | None, runner: _Runner, selected: list[Case]) -> None:
    assert case is not None
    outcome = runner.outcome(case, selected)
    assert outcome.passed, f"{case.id} failed:\n{outcome.explain()}"
