"""``mcpsync bench`` against the bundled demo server, read back by pytest-benchmark's own
loader and ``compare`` command; ``mcpsync servers`` over a configuration file."""

from __future__ import annotations

import json
import random
import subprocess
import sys
from pathlib import Path

import pytest

from mcpsync._bench import main, percentile, run_bench, sample_arguments, servers_main, stats_of
from tests.conftest import server_command

DEMO = [sys.executable, "-m", "mcpsync.server.demo"]
RAW = server_command("raw_server.py")
SMALL = ["--calls", "40", "--warmup", "2", "--duration", "20"]


@pytest.fixture(scope="module")
def demo_report(tmp_path_factory):
    out = tmp_path_factory.mktemp("bench") / "bench.json"
    rc = main(["--threads", "2", *SMALL, "--json", str(out), "--", *DEMO])
    assert rc == 0
    return out


def test_report_has_pytest_benchmark_layout(demo_report):
    data = json.loads(demo_report.read_text())
    assert set(data) >= {"machine_info", "commit_info", "benchmarks", "datetime", "version"}
    assert data["machine_info"]["python_version"] and "id" in data["commit_info"]
    names = [b["name"] for b in data["benchmarks"]]
    # the demo's read-only tools (annotated readOnlyHint); slow_count and fail are not called
    assert names == ["bench[echo]", "bench[add]", "bench[word_count]", "bench[current_time]"]
    for b in data["benchmarks"]:
        assert set(b) >= {"group", "name", "fullname", "params", "param", "extra_info", "options", "stats"}
        st = b["stats"]
        assert set(st) >= {"min", "max", "mean", "stddev", "median", "iqr", "q1", "q3", "iqr_outliers", "stddev_outliers", "outliers", "ld15iqr", "hd15iqr", "ops", "rounds", "total", "data", "iterations"}
        assert st["rounds"] == 40 == len(st["data"]) and b["extra_info"]["errors"] == 0
        assert st["min"] <= b["extra_info"]["p50"] <= b["extra_info"]["p99"] <= st["max"]
        assert b["params"] == {"tool": b["param"], "threads": 2}


def test_pytest_benchmark_loader_accepts_it(demo_report, tmp_path):
    from pytest_benchmark.logger import Logger
    from pytest_benchmark.storage.file import FileStorage

    storage = FileStorage(tmp_path / "storage", logger=Logger(Logger.QUIET))
    loaded = list(storage.load_benchmarks(str(demo_report)))
    assert [b["name"] for b in loaded] == ["bench[echo]", "bench[add]", "bench[word_count]", "bench[current_time]"]
    assert all(b["ops"] > 0 and b["rounds"] == 40 for b in loaded)
    # and it groups them the way `compare` does
    from pytest_benchmark.plugin import pytest_benchmark_group_stats

    groups = pytest_benchmark_group_stats(config=None, benchmarks=loaded, group_by="group")
    assert len(groups) == 1 and len(groups[0][1]) == 4


def test_pytest_benchmark_compare_cli_reads_it(demo_report, tmp_path):
    proc = subprocess.run(
        [sys.executable, "-m", "pytest_benchmark", "compare", str(demo_report)],
        capture_output=True,
        text=True,
        timeout=60,
        cwd=tmp_path,
    )
    assert proc.returncode == 0, proc.stderr
    assert "bench[echo]" in proc.stdout and "bench[current_time]" in proc.stdout
    assert "Failed to load" not in proc.stdout + proc.stderr


def test_stats_match_pytest_benchmark():
    from pytest_benchmark.stats import Stats

    rng = random.Random(3)
    for n in (1, 2, 3, 4, 5, 6, 7, 10, 11, 101):
        data = [rng.lognormvariate(-9, 0.5) for _ in range(n)]
        ref = Stats()
        for d in data:
            ref.update(d)
        mine = stats_of(data)
        for field in Stats.fields:
            assert mine[field] == pytest.approx(getattr(ref, field)), (n, field)


def test_percentile():
    data = sorted(range(1, 101))
    assert (percentile(data, 50), percentile(data, 99), percentile(data, 100)) == (50, 99, 100)
    assert percentile([7], 99) == 7


def test_sample_arguments():
    schema = {
        "type": "object",
        "properties": {
            "s": {"type": "string"},
            "i": {"type": "integer", "minimum": 5},
            "e": {"enum": ["x", "y"]},
            "d": {"type": "number", "default": 2.5},
            "o": {"type": "object", "properties": {"k": {"type": "boolean"}}, "required": ["k"]},
            "opt": {"type": "string"},
        },
        "required": ["s", "i", "e", "d", "o"],
    }
    assert sample_arguments(schema) == {"s": "bench", "i": 6, "e": "x", "d": 2.5, "o": {"k": True}}


def test_table_output(capsys):
    rc = main(["--tool", "echo", "--allow-side-effects", "--args", 'echo={"message": "hello"}', *SMALL, "--", *RAW])
    out = capsys.readouterr().out
    assert rc == 0
    head = out.splitlines()[1]
    for column in ("tool", "threads", "calls", "errors", "p50", "p99", "calls/s"):
        assert column in head
    row = next(line for line in out.splitlines() if line.startswith("echo"))
    assert row.split()[1:4] == ["1", "40", "0"]


def test_run_bench_bounds_and_counts():
    from mcpsync import Client

    with Client.stdio(RAW[0], RAW[1:]) as client:
        r = run_bench(client, "echo", {"message": "x"}, threads=3, calls=30, warmup=1)
        assert r.calls == 30 and r.errors == 0 and len(r.durations) == 30 and r.calls_per_second > 0
        failing = run_bench(client, "no_such_tool", {}, threads=2, calls=6, warmup=0)
        assert failing.errors == 6 and not failing.durations and "Unknown tool" in (failing.first_error or "")


def test_tools_without_annotations_need_naming(capsys):
    rc = main([*SMALL, "--", *RAW])
    assert rc == 2
    assert "no tool of this server is annotated read-only" in capsys.readouterr().err


@pytest.mark.parametrize(
    "argv, message",
    [
        ([], "give exactly one server"),
        (["--url", "http://127.0.0.1:9/mcp", "--", "x"], "give exactly one server"),
        (["--tool", "nope", "--", *DEMO], "no such tool: nope"),
        (["--args", "echo", "--", *DEMO], "--args expects TOOL=JSON"),
        (["--threads", "0", "--", *DEMO], "--threads and --calls must be >= 1"),
        (["--header", "X: y", "--", *DEMO], "--header goes with --url"),
    ],
)
def test_usage_errors(argv, message, capsys):
    assert main(argv) == 2
    assert message in capsys.readouterr().err


def test_every_call_failing_exits_3_and_is_listed(tmp_path, capsys):
    out = tmp_path / "r.json"
    rc = main(["--tool", "fail", "--tool", "echo", "--allow-side-effects", *SMALL, "--json", str(out), "--", *DEMO])
    assert rc == 3
    data = json.loads(out.read_text())
    assert [b["name"] for b in data["benchmarks"]] == ["bench[echo]"]
    assert data["extra_info"]["failed"][0]["tool"] == "fail" and data["extra_info"]["failed"][0]["errors"] == 40


def test_dead_server_exits_3(capsys):
    assert main([*SMALL, "--", "/nonexistent/mcp-server"]) == 3
    assert "mcpsync bench: StartFailed: " in capsys.readouterr().err


# ------------------------------------------------------------------ mcpsync servers


@pytest.fixture()
def config(tmp_path) -> Path:
    path = tmp_path / "mcp.json"
    path.write_text(
        json.dumps(
            {
                "mcpServers": {
                    "demo": {"command": DEMO[0], "args": DEMO[1:]},
                    "dead": {"command": "/nonexistent/mcp-server"},
                    "secret": {"url": "https://example.invalid/mcp", "headers": {"Authorization": "Bearer ${MCPSYNC_TEST_UNSET_TOKEN}"}},
                    "off": {"command": "x", "disabled": True},
                }
            }
        )
    )
    return path


def test_servers_lists_and_checks(config, capsys):
    rc = servers_main([str(config), "--timeout", "10"])
    out = capsys.readouterr().out
    assert rc == 3  # one server failed
    lines = out.splitlines()
    assert lines[0].startswith("demo") and "ok, 6 tools" in lines[0] and "mcpsync.server.demo" in lines[0]
    assert any(line.startswith("dead") and "error" in line for line in lines)
    assert any("StartFailed" in line for line in lines)  # the command does not exist: at once
    assert any(line.startswith("secret") and "config-error" in line for line in lines)
    assert any("MCPSYNC_TEST_UNSET_TOKEN is not set" in line for line in lines)
    assert any(line.startswith("off") and "disabled" in line for line in lines)


def test_servers_json_and_no_check(config, capsys):
    assert servers_main([str(config), "--no-check", "--json"]) == 3  # the unset variable
    data = json.loads(capsys.readouterr().out)
    assert [s["name"] for s in data["servers"]] == ["demo", "dead", "secret", "off"]
    assert data["servers"][0]["state"] == "unchecked" and data["servers"][3]["state"] == "disabled"


def test_servers_bad_file(tmp_path, capsys):
    bad = tmp_path / "bad.json"
    bad.write_text('{"mcpServers": {"a": {"command": "x", "args": [1]}}}')
    # a malformed entry is that server's failure (the others are still checked): exit 3
    assert servers_main([str(bad), "--no-check"]) == 3
    assert "config-error" in capsys.readouterr().out
    assert servers_main([str(bad)]) == 3
    assert "mcpServers.a.args[0]: expected a string, got 1" in capsys.readouterr().out
    bad.write_text('{"mcpServers": {"a": {"command": "x"}')  # not JSON: the file itself, a usage error
    assert servers_main([str(bad)]) == 2 and "not valid JSON" in capsys.readouterr().err


def test_cli_hook_when_integrated(demo_report, tmp_path):
    from mcpsync import cli

    import inspect

    if '"bench"' not in inspect.getsource(cli) and "'bench'" not in inspect.getsource(cli):
        pytest.skip("cli.py does not route `mcpsync bench` yet (lead integrates it)")
    out = tmp_path / "cli.json"
    assert cli.main(["bench", "--tool", "echo", *SMALL, "--json", str(out), "--", *DEMO]) == 0
    assert json.loads(out.read_text())["benchmarks"][0]["name"] == "bench[echo]"


@pytest.mark.skipif(not callable(getattr(__import__("mcpsync").Client, "http", None)), reason="Client.http not there yet")
def test_bench_over_url(tmp_path, capsys):
    import time

    from tests.conftest import free_port

    port = free_port()
    sdk = server_command("sdk_server.py", "http", str(port))
    proc = subprocess.Popen(sdk, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        import socket

        deadline = time.monotonic() + 20
        while time.monotonic() < deadline:
            try:
                socket.create_connection(("127.0.0.1", port), 0.2).close()
                break
            except OSError:
                time.sleep(0.1)
        out = tmp_path / "url.json"
        rc = main(["--url", f"http://127.0.0.1:{port}/mcp", "--header", "X-Api-Key: k", "--tool", "add", "--allow-side-effects", "--args", 'add={"a": 1, "b": 2}', *SMALL, "--json", str(out)])
        assert rc == 0, capsys.readouterr().err
        data = json.loads(out.read_text())
        assert data["benchmarks"][0]["name"] == "bench[add]" and data["benchmarks"][0]["extra_info"]["transport"] == "http"
    finally:
        proc.kill()
        proc.wait(10)


def test_bench_a_configured_server(config, tmp_path, capsys):
    out = tmp_path / "cfg.json"
    assert main(["--config", str(config), "--server", "demo", "--tool", "add", *SMALL, "--json", str(out)]) == 0
    data = json.loads(out.read_text())
    assert data["benchmarks"][0]["group"] == "demo" and data["benchmarks"][0]["extra_info"]["arguments"] == {"a": 1, "b": 1}
    assert main(["--config", str(config), "--server", "secret", "--tool", "x"]) == 2
    assert "MCPSYNC_TEST_UNSET_TOKEN is not set" in capsys.readouterr().err
