"""``mcpsync bench`` (per-tool latency of any server) and ``mcpsync servers`` (a config file's servers).

``mcpsync bench`` calls each chosen tool from N threads, through one shared Client, and
reports per tool the calls made, errors, P50 / P99 latency and calls per second, as a
table and, with ``--json FILE``, in the JSON layout pytest-benchmark writes with
``--benchmark-json`` (so ``pytest-benchmark compare FILE`` and any tooling reading those
files accept it)::

    mcpsync bench -- python -m mcpsync.server.demo
    mcpsync bench --tool echo --args 'echo={"message": "hi"}' --threads 8 --calls 2000 \\
        --json bench.json -- npx -y @modelcontextprotocol/server-everything
    mcpsync bench --url http://127.0.0.1:8000/mcp --tool search --duration 5

By default only tools annotated ``readOnlyHint`` are benchmarked (calling a tool with side
effects thousands of times is rarely what one wants); choose tools with ``--tool NAME``: one
that is not annotated read-only runs only with ``--allow-side-effects`` (``--all`` runs every
tool and implies it). Arguments come from ``--args TOOL=JSON``, else from the tool's input
schema (required properties get a simple value of their type). Each tool first gets
``--warmup`` unmeasured calls (bounded by ``--warmup-duration`` seconds, reported apart),
then its measured run is bounded by ``--calls`` and ``--duration``, whichever ends first:
the warm-up never eats into ``--duration``. Failed calls are counted, not retried (the client
runs with ``RetryPolicy.NONE``).

On a terminal a live line on stderr shows each tool's progress (``--progress`` /
``--no-progress`` force it either way). Latencies are printed each in the unit that reads
best (``µs``, ``ms``, ``s``). ``--plot FILE.png`` (or ``.svg``) draws each tool's latency
distribution and percentile curve (matplotlib: ``pip install mcpsync[plot]``).

``mcpsync servers CONFIG`` lists what an ``mcpServers`` file defines and checks each server
(connect + ``tools/list``, concurrently, each bounded by ``--timeout``).

Exit status: 0 success, 2 bad usage or configuration, 3 a server (or every call of a
benchmarked tool) failed.
"""


from __future__ import annotations

import argparse
import json
import os
import sys
from typing import Any, Sequence

from ._bench_report import _LiveLine, _check_plot, format_table, human_duration, human_rate, plot_results, report_json
from ._bench_run import BenchProgress, BenchResult, percentile, run_bench, sample_arguments, stats_of
from ._errors import ConfigError, UsageError

# the measuring half lives in _bench_run, the reporting half in _bench_report; their
# names stay importable from here, the command's home
__all__ = [
    "main",
    "servers_main",
    "BenchResult",
    "run_bench",
    "stats_of",
    "percentile",
    "report_json",
    "format_table",
    "sample_arguments",
    "BenchProgress",
    "human_duration",
    "human_rate",
    "plot_results",
]

EXIT_OK, EXIT_USAGE, EXIT_FAILURE = 0, 2, 3


# ----------------------------------------------------------------------------- CLI


def _bench_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="mcpsync bench",
        description="Per-tool latency of an MCP server (P50/P99, calls/s, N threads). Put the server command after `--`.",
        epilog="Example: mcpsync bench --threads 4 --calls 500 --json bench.json -- python -m mcpsync.server.demo",
    )
    p.add_argument("--url", help="a remote server (Streamable HTTP, falling back to HTTP+SSE) instead of a command")
    p.add_argument("--header", action="append", default=[], metavar="NAME:VALUE", help="a header for --url (repeatable)")
    p.add_argument("--config", help="an mcpServers configuration file (with --server)")
    p.add_argument("--server", help="the server's name in --config")
    p.add_argument("--tool", action="append", default=[], metavar="NAME", help="a tool to benchmark (repeatable; default: the read-only tools)")
    p.add_argument("--all", action="store_true", help="benchmark every tool, side effects or not (implies --allow-side-effects)")
    p.add_argument("--allow-side-effects", action="store_true",
                   help="let --tool name tools that are not annotated read-only (they will be called many times)")
    p.add_argument("--args", action="append", default=[], metavar="TOOL=JSON", help="arguments for a tool (default: from its input schema)")
    p.add_argument("--threads", type=int, default=1, help="concurrent callers (default 1)")
    p.add_argument("--calls", type=int, default=200, help="calls per tool, at most (default 200)")
    p.add_argument("--duration", type=float, default=10.0, help="seconds per tool, at most (default 10)")
    p.add_argument("--warmup", type=int, default=5, help="unmeasured calls per thread first (default 5)")
    p.add_argument("--warmup-duration", type=float, default=None,
                   help="seconds the warm-up may take, apart from --duration (default: as --duration)")
    p.add_argument("--timeout", type=float, default=30.0, help="seconds per call (default 30)")
    p.add_argument("--mode", choices=["auto", "modern", "legacy"], default="auto", help="protocol era (default auto)")
    p.add_argument("--env", action="append", default=[], metavar="KEY=VALUE", help="environment for a stdio server")
    p.add_argument("--json", "--benchmark-json", dest="json", metavar="FILE", help="write a pytest-benchmark JSON report")
    p.add_argument("--group", help="the report's benchmark group (default: the server)")
    p.add_argument("--no-data", action="store_true", help="leave the per-call durations out of the JSON report")
    p.add_argument("-q", "--quiet", action="store_true", help="no table, no progress")
    p.add_argument("--progress", dest="progress", action="store_true", default=None,
                   help="show a live progress line on stderr (default: when stderr is a terminal)")
    p.add_argument("--no-progress", dest="progress", action="store_false", help="no progress line")
    p.add_argument("--plot", metavar="FILE", help="draw the latency distributions into FILE (.png or .svg; needs matplotlib)")
    return p


def _client_for(opts: argparse.Namespace, command: list[str]) -> tuple[Any, str, str]:
    """(client, server name, transport)."""
    from . import Client, RetryPolicy, Timeouts

    timeouts = Timeouts(request=opts.timeout)
    # a benchmark counts failures; retrying them would hide them in the latencies
    common = {"mode": opts.mode, "timeouts": timeouts, "retry": RetryPolicy.NONE}
    given = [bool(opts.url), bool(command), bool(opts.config)]
    if sum(given) != 1:
        raise UsageError("give exactly one server: a command after `--`, --url URL, or --config FILE --server NAME")
    if opts.config:
        from ._config import load_config
        from ._errors import ConfigError

        if not opts.server:
            raise UsageError("--config needs --server NAME")
        try:
            cfg = load_config(opts.config)[opts.server]
            return Client.from_config(cfg, **common), cfg.name, cfg.transport
        except ConfigError as exc:
            raise UsageError(str(exc)) from None
    if opts.header and not opts.url:
        raise UsageError("--header goes with --url")
    if opts.url:
        http = getattr(Client, "http", None)
        if http is None:
            raise UsageError("this build of mcpsync has no HTTP transport (Client.http)")
        headers = {}
        for item in opts.header:
            name, sep, value = item.partition(":")
            if not sep or not name.strip():
                raise UsageError(f"--header expects NAME:VALUE, got {name.strip() or item[:20]!r}...")
            headers[name.strip()] = value.strip()
        return http(opts.url, headers=headers or None, **common), opts.url, "http"
    env = {}
    for item in opts.env:
        if "=" not in item:
            raise UsageError(f"--env expects KEY=VALUE, got {item!r}")
        k, v = item.split("=", 1)
        env[k] = v
    client = Client.stdio(command[0], command[1:], env=env or None, **common)
    return client, os.path.basename(command[0]) if len(command) == 1 else " ".join(command[:3]), "stdio"


def _read_only(tool: Any) -> bool:
    ann = getattr(tool, "annotations", None)
    return bool(getattr(ann, "read_only_hint", None))


def main(argv: Sequence[str] | None = None) -> int:
    """``mcpsync bench [options] -- CMD ARGS`` (or ``--url URL``). Returns the exit status."""
    from ._errors import MCPError

    from ._cmdline import split_command

    own, command = split_command(sys.argv[1:] if argv is None else argv)
    parser = _bench_parser()
    opts = parser.parse_args(own)
    try:
        if opts.threads < 1 or opts.calls < 1 or opts.duration <= 0 or opts.warmup < 0 or opts.timeout <= 0:
            raise UsageError("--threads and --calls must be >= 1; --duration and --timeout > 0; --warmup >= 0")
        if opts.warmup_duration is not None and opts.warmup_duration < 0:
            raise UsageError("--warmup-duration must be >= 0")
        if opts.plot:
            _check_plot(opts.plot)
        explicit: dict[str, dict[str, Any]] = {}
        for item in opts.args:
            name, sep, raw = item.partition("=")
            if not sep or not name:
                raise UsageError(f"--args expects TOOL=JSON, got {item!r}")
            try:
                value = json.loads(raw)
            except ValueError:
                raise UsageError(f"--args {name}=: not valid JSON") from None
            if not isinstance(value, dict):
                raise UsageError(f"--args {name}=: expected a JSON object")
            explicit[name] = value
        client, server, transport = _client_for(opts, command)
        with client:
            tools = {t.name: t for t in client.list_tools()}
            allow = opts.allow_side_effects or opts.all
            if opts.tool:
                unknown = [t for t in opts.tool if t not in tools]
                if unknown:
                    raise UsageError(f"no such tool: {', '.join(unknown)} (tools: {', '.join(sorted(tools)) or 'none'})")
                chosen = list(dict.fromkeys(opts.tool))
                risky = [n for n in chosen if not _read_only(tools[n])]
                if risky and not allow:
                    raise UsageError(
                        f"{', '.join(risky)} {'is' if len(risky) == 1 else 'are'} not annotated read-only: "
                        f"benchmarking calls {'it' if len(risky) == 1 else 'them'} up to {opts.calls} times, "
                        "side effects included; add --allow-side-effects to do so"
                    )
            elif opts.all:
                chosen = list(tools)
            else:
                chosen = [n for n, t in tools.items() if _read_only(t)]
                if not chosen:
                    names = ", ".join(sorted(tools)[:8]) or "none"
                    raise UsageError(
                        f"no tool of this server is annotated read-only (its tools: {names}); choose the tools "
                        "to call with --tool NAME (and --args NAME='{...}') and allow their side effects with "
                        "--allow-side-effects, or pass --all to call every tool"
                    )
            show = (sys.stderr.isatty() if opts.progress is None else opts.progress) and not opts.quiet
            results = []
            for i, name in enumerate(chosen, 1):
                args = explicit.get(name)
                if args is None:
                    args = sample_arguments(tools[name].input_schema)
                live = _LiveLine(sys.stderr, i, len(chosen)) if show else None
                try:
                    results.append(
                        run_bench(client, name, args, threads=opts.threads, calls=opts.calls, duration=opts.duration,
                                  warmup=opts.warmup, timeout=opts.timeout, warmup_duration=opts.warmup_duration,
                                  progress=live)
                    )
                finally:
                    if live is not None:
                        live.clear()
    except UsageError as exc:
        print(f"mcpsync bench: {exc}", file=sys.stderr)
        return EXIT_USAGE
    except MCPError as exc:
        print(f"mcpsync bench: {type(exc).__name__}: {exc}", file=sys.stderr)
        return EXIT_FAILURE
    if not opts.quiet:
        print(f"server: {server} ({transport}), {opts.threads} thread(s)")
        print(format_table(results))
        warm = [r for r in results if r.warmup_calls]
        if warm:
            spent = sum(r.warmup_seconds for r in warm)
            print(f"warm-up (not measured, not part of --duration): {sum(r.warmup_calls for r in warm)} calls "
                  f"in {human_duration(spent)}")
        for r in results:
            if r.first_error:
                print(f"  {r.tool}: {r.errors} error(s); first: {r.first_error}", file=sys.stderr)
    if opts.json:
        report = report_json(results, server=server, transport=transport, group=opts.group, duration=opts.duration, warmup=opts.warmup, include_data=not opts.no_data)
        with open(opts.json, "w", encoding="utf-8") as fh:
            json.dump(report, fh, indent=4)
            fh.write("\n")
        if not opts.quiet:
            print(f"wrote {opts.json} (pytest-benchmark JSON; see `pytest-benchmark compare {opts.json}`)")
    if opts.plot:
        try:
            plot_results(results, opts.plot, title=f"mcpsync bench: {server} ({transport}), {opts.threads} thread(s)")
        except ValueError as exc:
            print(f"mcpsync bench: no plot: {exc}", file=sys.stderr)
        else:
            if not opts.quiet:
                print(f"wrote {opts.plot}")
    return EXIT_FAILURE if any(not r.durations for r in results) else EXIT_OK


# ----------------------------------------------------------------------------- servers


def servers_main(argv: Sequence[str] | None = None) -> int:
    """``mcpsync servers CONFIG [--no-check] [--json] [--timeout S]``: list and check."""
    from ._config import load_config

    p = argparse.ArgumentParser(prog="mcpsync servers", description="List the servers an mcpServers file defines, and check each.")
    p.add_argument("config", help="the configuration file (claude_desktop_config.json, .cursor/mcp.json, ...)")
    p.add_argument("--no-check", action="store_true", help="only list; do not start or contact the servers")
    p.add_argument("--timeout", type=float, default=15.0, help="seconds each server gets to answer (default 15)")
    p.add_argument("--json", action="store_true", help="print JSON")
    opts = p.parse_args(list(sys.argv[1:] if argv is None else argv))
    if opts.timeout <= 0:
        print("mcpsync servers: --timeout must be positive", file=sys.stderr)
        return EXIT_USAGE
    try:
        config = load_config(opts.config)
    except ConfigError as exc:
        print(f"mcpsync servers: {exc}", file=sys.stderr)
        return EXIT_USAGE
    rows: list[dict[str, Any]] = []
    for name in config.names:
        if name in config.errors:
            e = config.errors[name]  # the field at fault, and what is wrong with it
            rows.append({"name": name, "transport": None, "target": None, "state": "config-error",
                         "error": f"{e.field}: {e.detail}" if e.field else e.detail})
            continue
        s = config[name]
        rows.append({"name": name, "transport": s.transport, "target": s.describe(), "state": "disabled" if s.disabled else "unchecked"})
    status_ok = True
    if not opts.no_check:
        from dataclasses import replace

        from ._multi import MultiClient
        from ._policies import RetryPolicy, Timeouts

        timeouts = replace(Timeouts.DEFAULT, connect=min(Timeouts.DEFAULT.connect, opts.timeout), request=opts.timeout)
        with MultiClient.from_config(opts.config, list_timeout=opts.timeout, timeouts=timeouts, retry=RetryPolicy.NONE) as multi:
            statuses = multi.status(check=True, timeout=opts.timeout)
            by_server = multi.tools_by_server() if any(st.ok for st in statuses.values()) else {}
        for row in rows:
            st = statuses.get(row["name"])
            if st is None or row["state"] in ("config-error", "disabled"):
                continue
            row["state"] = st.state
            if st.ok:
                row["tools"] = [t.name for t in by_server.get(row["name"], [])]
            else:
                row["error"] = f"{st.error_type}: {st.error}" if st.error_type else st.error
        status_ok = all(r["state"] in ("ok", "disabled") for r in rows)
    else:
        status_ok = all(r["state"] != "config-error" for r in rows)
    if opts.json:
        print(json.dumps({"config": opts.config, "servers": rows}, indent=2, ensure_ascii=False))
    else:
        if not rows:
            print(f"{opts.config}: no servers defined")
        width = max((len(r["name"]) for r in rows), default=4)
        for r in rows:
            state = r["state"]
            detail = r.get("target") or ""
            if "tools" in r:
                state = f"ok, {len(r['tools'])} tools"
            print(f"{r['name']:<{width}}  {r['transport'] or '-':<9}  {state:<14}  {detail}")
            if r.get("error"):
                print(f"{'':<{width}}  error: {r['error']}")
    return EXIT_OK if status_ok else EXIT_FAILURE


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
