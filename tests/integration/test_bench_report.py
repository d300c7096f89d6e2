"""``mcpsync bench`` reports while it works, counts the warm-up apart, prints readable
units, asks before calling tools with side effects, and draws (real servers over stdio)."""

from __future__ import annotations

import os
import pty
import select
import subprocess
import sys
import time

import pytest

from mcpsync import Client
from mcpsync._bench import BenchResult, format_table, human_duration, main, run_bench
from tests.conftest import ROOT, server_command

DEMO = [sys.executable, "-m", "mcpsync.server.demo"]
SDK = server_command("sdk_server.py")
SMALL = ["--calls", "30", "--warmup", "2", "--duration", "20"]


def test_progress_is_shown_on_a_terminal() -> None:
    master, slave = pty.openpty()
    code = ("import sys; from mcpsync._bench import main; "
            f"sys.exit(main(['--tool', 'sleep_ms', '--allow-side-effects', '--args', 'sleep_ms={{\"ms\": 50}}', "
            f"'--calls', '12', '--warmup', '1', '--', {SDK[0]!r}, {SDK[1]!r}]))")
    proc = subprocess.Popen([sys.executable, "-c", code], stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                            stderr=slave, cwd=ROOT, env={**os.environ, "PYTHONPATH": str(ROOT)})
    os.close(slave)
    seen = b""
    deadline = time.monotonic() + 120
    try:
        while time.monotonic() < deadline:
            ready, _, _ = select.select([master], [], [], 1.0)
            if ready:
                try:
                    chunk = os.read(master, 4096)
                except OSError:  # the child closed its end
                    break
                if not chunk:
                    break
                seen += chunk
            elif proc.poll() is not None:
                break
        out = proc.communicate(timeout=60)[0].decode()
    finally:
        os.close(master)
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == 0, (out, seen)
    text = seen.decode(errors="replace")
    assert "\r[1/1] sleep_ms: warming up" in text
    assert "\r[1/1] sleep_ms: " in text and "/12 calls" in text
    assert "sleep_ms" in out and "\r" not in out  # the table itself is clean


def test_no_progress_line_when_not_a_terminal(capsys) -> None:
    assert main(["--tool", "echo", *SMALL, "--", *DEMO]) == 0
    assert "\r" not in capsys.readouterr().err


def test_warmup_is_bounded_and_counted_apart() -> None:
    with Client.stdio(SDK[0], SDK[1:]) as client:
        seen = []
        r = run_bench(client, "sleep_ms", {"ms": 100}, threads=2, calls=4, duration=30, warmup=50,
                      warmup_duration=0.3, timeout=30, progress=seen.append, progress_every=0.05)
    # 50 warm-up calls per thread would take 5 s; the warm-up's own bound stopped it
    assert 2 <= r.warmup_calls <= 12 and r.warmup_seconds < 3
    assert r.calls == 4 and len(r.durations) == 4
    phases = [p.phase for p in seen]
    assert phases[0] == "warmup" and phases[-1] == "measure"
    assert seen[-1].done == 4 and seen[-1].total == 4


def test_duration_bounds_the_measured_run_only() -> None:
    with Client.stdio(SDK[0], SDK[1:]) as client:
        r = run_bench(client, "sleep_ms", {"ms": 100}, threads=1, calls=10_000, duration=0.5, warmup=3,
                      warmup_duration=30, timeout=30)
    assert r.warmup_calls == 3  # the whole warm-up ran, whatever --duration says
    assert 1 <= len(r.durations) <= 8 and r.wall < 5


def test_latencies_read_in_their_own_unit() -> None:
    assert human_duration(35.2e-6) == "35.2 µs"
    assert human_duration(0.0123) == "12.3 ms"
    assert human_duration(10.010972) == "10.0 s"
    fast = BenchResult("fast", {}, 1, durations=[35e-6, 36e-6, 40e-6], wall=0.001)
    slow = BenchResult("slow", {}, 1, durations=[10.01, 10.02], wall=20.0)
    table = format_table([fast, slow])
    assert "10010972" not in table and "10.0 s" in table and "36.0 µs" in table


def test_tools_with_side_effects_need_the_flag(capsys) -> None:
    assert main(["--tool", "fail", *SMALL, "--", *DEMO]) == 2
    err = capsys.readouterr().err
    assert "fail is not annotated read-only" in err and "--allow-side-effects" in err
    # a server whose tools carry no annotations: the message says how to go on
    assert main([*SMALL, "--", *SDK]) == 2
    assert "--tool NAME" in capsys.readouterr().err


@pytest.mark.parametrize("ext", [".png", ".svg"])
def test_plot(tmp_path, ext: str, capsys) -> None:
    pytest.importorskip("matplotlib", reason="matplotlib belongs to the plot (and test) extra")
    out = tmp_path / f"latency{ext}"
    assert main(["--tool", "echo", "--tool", "add", "--threads", "2", *SMALL, "--plot", str(out), "--", *DEMO]) == 0
    data = out.read_bytes()
    if ext == ".png":
        assert data[:8] == b"\x89PNG\r\n\x1a\n" and len(data) > 10_000
    else:
        text = data.decode()
        assert "<svg" in text and "echo" in text and "add" in text
    assert f"wrote {out}" in capsys.readouterr().out


def test_plot_target_checked_before_the_run(capsys) -> None:
    assert main(["--tool", "echo", "--plot", "latency.pdf", *SMALL, "--", *DEMO]) == 2
    assert "--plot draws .png or .svg" in capsys.readouterr().err
