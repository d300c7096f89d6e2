"""The ``mcpsync`` command.

Examples::

    mcpsync demo                                   # the bundled demo server: list, then call
    mcpsync tools -- npx -y @modelcontextprotocol/server-everything
    mcpsync call echo message=hi -- npx -y @modelcontextprotocol/server-everything
    mcpsync call add a=1 b=2 --json -- python -m mcpsync.server.demo
    mcpsync bench --threads 4 -- python -m mcpsync.server.demo
    mcpsync servers mcp.json
    mcpsync bridge --websocket 127.0.0.1:8765 -- python -m mcpsync.server.demo

Arguments ``key=value`` are converted by the tool's input schema (a string property
keeps the text as is; numbers, booleans, arrays and objects are parsed as JSON);
``key:=json`` always parses JSON. Exit status: 0 success, 1 the tool reported an error
(``isError``), 2 bad usage, 3 the server failed (connect, timeout, protocol error).
"""

from __future__ import annotations

import argparse
import json
import logging
import sys
from typing import Any, Sequence

__all__ = ["main"]

EXIT_OK, EXIT_TOOL_ERROR, EXIT_USAGE, EXIT_FAILURE = 0, 1, 2, 3


class UsageError(Exception):
    pass


def _split_command(argv: Sequence[str]) -> tuple[list[str], list[str]]:
    argv = list(argv)
    if "--" in argv:
        i = argv.index("--")
        return argv[:i], argv[i + 1 :]
    return argv, []


def _common(p: argparse.ArgumentParser) -> None:
    p.add_argument("--url", help="a remote server (Streamable HTTP, falling back to HTTP+SSE) instead of a command")
    p.add_argument("--mode", choices=["auto", "modern", "legacy"], default="auto", help="protocol era (default: auto)")
    p.add_argument("--timeout", type=float, default=30.0, help="request timeout in seconds (default 30)")
    p.add_argument("--env", action="append", default=[], metavar="KEY=VALUE", help="environment for a stdio server")
    p.add_argument("--json", action="store_true", help="print JSON")
    p.add_argument("-v", "--verbose", action="store_true", help="log what happens (and the server's stderr)")


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="mcpsync",
        description="A synchronous MCP client. Put the server command after `--`.",
        epilog="Example: mcpsync call echo message=hi -- npx -y @modelcontextprotocol/server-everything",
    )
    sub = p.add_subparsers(dest="cmd", metavar="COMMAND")
    t = sub.add_parser("tools", help="list the tools of a server")
    _common(t)
    c = sub.add_parser("call", help="call a tool: mcpsync call TOOL key=value ... -- CMD ARGS")
    c.add_argument("tool")
    c.add_argument("arguments", nargs="*", metavar="key=value")
    _common(c)
    d = sub.add_parser("demo", help="run the bundled demo server: list its tools and call a few")
    _common(d)
    sub.add_parser("info", help="which hot-path implementation is active, and versions")
    # handled before parsing (they have options of their own); listed here for --help
    sub.add_parser("bench", help="per-tool latency of a server: mcpsync bench [--threads N] -- CMD ARGS (see bench --help)")
    sub.add_parser("servers", help="list and check the servers of a config file: mcpsync servers mcp.json")
    sub.add_parser("bridge", help="serve an MCP server over WebSocket or gRPC: mcpsync bridge --websocket HOST:PORT -- CMD")
    return p


def _client(opts: argparse.Namespace, command: list[str]) -> Any:
    from . import Client, Timeouts

    timeouts = Timeouts(request=opts.timeout)
    if opts.url:
        if command:
            raise UsageError("give either --url or a command after --, not both")
        http = getattr(Client, "http", None)
        if http is None:
            raise UsageError("this build has no HTTP transport")
        return http(opts.url, mode=opts.mode, timeouts=timeouts)
    if not command:
        raise UsageError("no server given: put its command after `--`, e.g. `-- npx -y @modelcontextprotocol/server-everything`")
    env = {}
    for item in opts.env:
        if "=" not in item:
            raise UsageError(f"--env expects KEY=VALUE, got {item!r}")
        k, v = item.split("=", 1)
        env[k] = v
    return Client.stdio(command[0], command[1:], env=env or None, mode=opts.mode, timeouts=timeouts)


def _coerce(raw: str, schema: Any) -> Any:
    kinds = schema.get("type") if isinstance(schema, dict) else None
    if isinstance(kinds, str):
        kinds = [kinds]
    if kinds and "string" in kinds:
        return raw
    try:
        return json.loads(raw)
    except ValueError:
        if kinds and not {"string"} & set(kinds):
            raise UsageError(f"value {raw!r} is not valid JSON for a {'/'.join(kinds)} argument") from None
        return raw


def parse_arguments(pairs: Sequence[str], input_schema: Any = None) -> dict[str, Any]:
    """``["a=1", "msg=hi", "obj:={...}"]`` → arguments, typed by the input schema."""
    props = (input_schema or {}).get("properties", {}) if isinstance(input_schema, dict) else {}
    out: dict[str, Any] = {}
    for pair in pairs:
        if ":=" in pair and ("=" not in pair or pair.index(":=") < pair.index("=")):
            key, raw = pair.split(":=", 1)
            try:
                out[key] = json.loads(raw)
            except ValueError:
                raise UsageError(f"{key}:= expects JSON, got {raw!r}") from None
        elif "=" in pair:
            key, raw = pair.split("=", 1)
            out[key] = _coerce(raw, props.get(key))
        else:
            raise UsageError(f"arguments are key=value (or key:=json), got {pair!r}")
        if not key:
            raise UsageError(f"empty argument name in {pair!r}")
    return out


def _print_tools(tools: Sequence[Any], as_json: bool) -> None:
    from ._messages import to_builtins

    if as_json:
        print(json.dumps([to_builtins(t) for t in tools], indent=2, ensure_ascii=False))
        return
    width = max((len(t.name) for t in tools), default=0)
    for t in tools:
        desc = (t.description or t.title or "").strip().splitlines()
        print(f"{t.name:<{width}}  {desc[0] if desc else ''}")


def _print_result(result: Any, as_json: bool) -> None:
    from ._messages import TextContent, to_builtins

    if as_json:
        print(json.dumps(to_builtins(result), indent=2, ensure_ascii=False))
        return

    for block in result.content:
        if isinstance(block, TextContent):
            print(block.text)
        else:
            kind = type(block).__name__
            detail = getattr(block, "uri", None) or getattr(block, "mime_type", "")
            print(f"[{kind} {detail}]")
    if result.structured_content is not None and not any(isinstance(b, TextContent) for b in result.content):
        print(json.dumps(result.structured_content, indent=2, ensure_ascii=False))


def _run(opts: argparse.Namespace, command: list[str]) -> int:
    from . import CallToolResult

    if opts.cmd == "info":
        import mcpsync

        print(f"mcpsync {mcpsync.__version__}, hot path: {mcpsync.SPEEDUPS}")
        return EXIT_OK
    if opts.cmd == "demo":
        if command:
            raise UsageError("demo runs the bundled server; it takes no command")
        command = [sys.executable, "-m", "mcpsync.server.demo"]
    with _client(opts, command) as client:
        if opts.cmd == "tools":
            _print_tools(client.list_tools(), opts.json)
            return EXIT_OK
        if opts.cmd == "call":
            tools = {t.name: t for t in client.list_tools()}
            tool = tools.get(opts.tool)
            if tool is None:
                known = ", ".join(sorted(tools)) or "none"
                print(f"mcpsync: tool {opts.tool!r} does not exist on this server (tools: {known})", file=sys.stderr)
                return EXIT_FAILURE
            result: CallToolResult = client.call_tool(opts.tool, parse_arguments(opts.arguments, tool.input_schema))
            _print_result(result, opts.json)
            return EXIT_TOOL_ERROR if result.is_error else EXIT_OK
        # demo
        s = client.session
        tools = client.list_tools()
        print(f"connected to {s.server_info.name} ({s.era} era, protocol {s.protocol_version}) over stdio")
        print(f"{len(tools)} tools:")
        _print_tools(tools, False)
        for name, args in (("echo", {"message": "hello from mcpsync"}), ("add", {"a": 2, "b": 40})):
            if any(t.name == name for t in tools):
                r = client.call_tool(name, args)
                print(f"\n$ call {name} {json.dumps(args)}")
                _print_result(r, opts.json)
        return EXIT_OK


def main(argv: Sequence[str] | None = None) -> int:
    """Run the command line; returns the exit status."""
    from ._errors import MCPError

    own, command = _split_command(sys.argv[1:] if argv is None else argv)
    parser = _parser()
    if own[:1] == ["bench"]:
        from ._bench import main as bench_main

        return int(bench_main([*own[1:], "--", *command] if command else own[1:]) or 0)
    if own[:1] == ["servers"]:
        from ._bench import servers_main

        return int(servers_main(own[1:]) or 0)
    if own[:1] == ["bridge"]:
        try:
            from .server.bridge import main as bridge_main
        except ImportError:
            print("mcpsync: this build has no bridge", file=sys.stderr)
            return EXIT_USAGE
        return int(bridge_main([*own[1:], "--", *command] if command else own[1:]) or 0)
    opts = parser.parse_args(own)
    if not opts.cmd:
        parser.print_help()
        return EXIT_USAGE
    logging.basicConfig(level=logging.INFO if getattr(opts, "verbose", False) else logging.WARNING, format="%(name)s: %(message)s")
    try:
        return _run(opts, command)
    except UsageError as exc:
        print(f"mcpsync: {exc}", file=sys.stderr)
        return EXIT_USAGE
    except MCPError as exc:
        print(f"mcpsync: {type(exc).__name__}: {exc}", file=sys.stderr)
        return EXIT_FAILURE
    except KeyboardInterrupt:
        return 130


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
