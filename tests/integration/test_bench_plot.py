"""benchmarks/plot.py and the benchmarks' ``--bench-plot`` option draw latency
distributions (real clients against the benchmarks' own servers, short runs)."""

from __future__ import annotations

import os
import subprocess
import sys
import threading
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest

from tests.conftest import ROOT

pytest.importorskip("matplotlib")
sys.path.insert(0, str(ROOT))

from benchmarks.plot import Rounds  # noqa: E402

ENV = {**os.environ, "PYTHONPATH": str(ROOT)}


def _is_svg(path: Path) -> bool:
    return path.is_file() and ET.parse(path).getroot().tag.endswith("svg")


def test_rounds_take_turns_in_batches() -> None:
    order: list[tuple[str, int]] = []
    lock = threading.Lock()

    def start(name: str, measure) -> None:
        seen = iter(range(10**6))

        def call() -> None:
            with lock:
                order.append((name, next(seen)))

        measure.run(call)

    rounds = Rounds(["a", "b", "c"], calls=7, warmup=0, batch=3)
    rounds.run(start)
    assert not rounds.errors
    assert [len(s) for s in rounds.samples.values()] == [7, 7, 7]
    # a, b, c in turn, three calls a turn, the last turn one call each
    assert [n for n, _ in order] == ["a"] * 3 + ["b"] * 3 + ["c"] * 3 + ["a"] * 3 + ["b"] * 3 + ["c"] * 3 + ["a", "b", "c"]


def test_a_failing_contestant_leaves_the_others_running() -> None:
    def start(name: str, measure) -> None:
        if name == "broken":
            raise RuntimeError("no server")
        measure.run(lambda: None)

    rounds = Rounds(["ok", "broken", "also-ok"], calls=5, warmup=1, batch=2)
    rounds.run(start)
    assert list(rounds.errors) == ["broken"]
    assert len(rounds.samples["ok"]) == len(rounds.samples["also-ok"]) == 5


def test_plot_draws_stdio_and_http(tmp_path: Path) -> None:
    only = "raw-stdio,stdio-legacy,sdk-stdio,raw-http-socket,raw-http-urllib3,http-modern"
    done = subprocess.run(
        [sys.executable, "benchmarks/plot.py", "--out", str(tmp_path), "--calls", "40", "--warmup", "2",
         "--batch", "10", "--only", only],
        cwd=ROOT, env=ENV, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert _is_svg(tmp_path / "latency-stdio.svg")
    assert _is_svg(tmp_path / "latency-http.svg")


def test_bench_plot_option_draws_each_group(tmp_path: Path) -> None:
    done = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "benchmarks/bench_stdio.py", "-k", "roundtrip_raw_pipe or roundtrip_mcpsync",
         "--benchmark-enable", "--benchmark-max-time=0.02", "--benchmark-min-rounds=20", "--bench-plot", str(tmp_path),
         "-p", "no:randomly", "-p", "no:cacheprovider"],
        cwd=ROOT, env=ENV, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    assert _is_svg(tmp_path / "latency-stdio-roundtrip.svg")
    assert _is_svg(tmp_path / "latency-stdio-roundtrip-modern.svg")
