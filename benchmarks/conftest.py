"""Benchmark fixtures: the peers every suite compares against (benchmarks/peers.py), and a
ratio report.

Run: ``taskset -c 0 python -m pytest benchmarks --benchmark-enable -p no:randomly``
(pinning client and server to one CPU keeps cross-CPU wake-ups out of the numbers).
At the end a table gives, per group, each benchmark's median and its ratio to the
group's baseline (the benchmark whose name contains ``raw``, else the fastest).
``--bench-plot DIR`` also draws each group's latency distributions (every round's time
per call) into ``DIR/latency-<group>.svg`` (benchmarks/plot.py; needs matplotlib).
"""

from __future__ import annotations

from pathlib import Path

import pytest

from benchmarks.peers import FAST_SERVER, RawPipe, SdkClient


@pytest.fixture(scope="session")
def raw_pipe():
    p = RawPipe(FAST_SERVER)
    yield p
    p.close()


@pytest.fixture(scope="session")
def raw_pipe_modern():
    p = RawPipe(FAST_SERVER, era="modern")
    yield p
    p.close()


@pytest.fixture(scope="session")
def sdk_client():
    c = SdkClient(FAST_SERVER)
    yield c
    c.close()


def _client(mode: str):
    from mcpsync import Client

    return Client.stdio(FAST_SERVER[0], FAST_SERVER[1:], mode=mode)


@pytest.fixture(scope="session")
def ours():
    """mcpsync in the legacy era: what the raw pipe and the SDK client speak."""
    with _client("legacy") as c:
        c.call_tool("echo", {"message": "warm"})
        yield c


@pytest.fixture(scope="session")
def ours_modern():
    """mcpsync as it connects by default to this server (``mode="auto"``: the modern era)."""
    with _client("auto") as c:
        c.call_tool("echo", {"message": "warm"})
        assert c.session.era == "modern"
        yield c


def pytest_addoption(parser):
    parser.addoption("--bench-plot", metavar="DIR", default=None,
                     help="draw each benchmark group's latency distributions into DIR/latency-<group>.svg")


def _median(meta) -> float | None:
    stats = getattr(meta, "stats", None)
    return getattr(stats, "median", None) if stats is not None else None


def pytest_terminal_summary(terminalreporter, exitstatus, config):
    session = getattr(config, "_benchmarksession", None)
    if session is None or getattr(session, "disabled", True) or not session.benchmarks:
        return
    groups: dict[str, list] = {}
    for b in session.benchmarks:
        if _median(b) is not None:
            groups.setdefault(b.group or "-", []).append(b)
    tr = terminalreporter
    tr.section("ratios (median; baseline = the 'raw' benchmark, else the fastest)")
    for group, items in sorted(groups.items()):
        base = next((b for b in items if "raw" in b.name), min(items, key=_median))
        tr.write_line(f"[{group}]")
        for b in sorted(items, key=_median):
            m = _median(b)
            tr.write_line(f"  {b.name:<52} {m * 1e6:12.1f} us   x{m / _median(base):6.2f}")
    for b in session.benchmarks:
        info = getattr(b, "extra_info", None) or {}
        if "p50_ratio" in info:  # a benchmark that times its own raw limit in the same rounds
            tr.write_line(
                f"[{b.group}, {info.get('era', '-')}] p50 per call: raw {info['raw_p50_us']} us, mcpsync {info['mcpsync_p50_us']} us, "
                f"x{info['p50_ratio']:.2f}; median of the rounds' own ratios x{info.get('paired_ratio', float('nan')):.2f}"
            )
    plot_dir = config.getoption("--bench-plot", default=None)
    if plot_dir:
        from benchmarks.plot import draw

        for group, items in sorted(groups.items()):
            path = Path(plot_dir) / f"latency-{group}.svg"
            try:
                draw({b.name: b.stats.data for b in items}, path,
                     f"{group}: seconds per call, one sample per round (pytest-benchmark)")
            except (ImportError, ValueError) as exc:
                tr.write_line(f"[{group}] no plot: {exc}")
            else:
                tr.write_line(f"[{group}] plot: {path}")
