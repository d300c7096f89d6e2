"""The ``mcpsync`` command.

Examples::

    mcpsync demo                                   # the bundled demo server: list, then call
    mcpsync tools -- npx -y @modelcontextprotocol/server-everything
    mcpsync tools https://example.com/mcp          # a URL: Streamable HTTP (then HTTP+SSE)
    mcpsync tools ./server.py                      # a .py file: run with this Python, over stdio
    mcpsync call echo message=hi -- npx -y @modelcontextprotocol/server-everything
    mcpsync call add a=1 b=2 --json -- python -m mcpsync.server.demo
    mcpsync resources list -- python -m mcpsync.server.demo
    mcpsync resources read demo://about -- python -m mcpsync.server.demo
    mcpsync prompts get summarize text=hello -- python -m mcpsync.server.demo
    mcpsync tools --config mcp.json --server everything
    mcpsync bench --threads 4 -- python -m mcpsync.server.demo
    mcpsync servers mcp.json
    mcpsync bridge --websocket 127.0.0.1:8765 -- python -m mcpsync.server.demo

Arguments ``key=value`` are converted by the tool's input schema (a string property
keeps the text as is; numbers, booleans, arrays and objects are parsed as JSON);
``key:=json`` always parses JSON. The server is the command after ``--``, ``--url``,
``--config FILE --server NAME``, or a target given first or last among the arguments: an
``http(s)://`` URL (Streamable HTTP), a ``ws(s)://`` URL (WebSocket), or a file
(``.py`` runs with this Python, ``.js``/``.mjs``/``.cjs`` with node, an executable as is).
Exit status: 0 success, 1 the tool reported an error (``isError``), 2 bad usage (an
unknown tool, prompt or option included), 3 the server failed (connect, timeout,
protocol error).
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import sys
from typing import Any, Sequence

from ._cmdline import split_command
from ._errors import UsageError

__all__ = ["main"]

EXIT_OK, EXIT_TOOL_ERROR, EXIT_USAGE, EXIT_FAILURE = 0, 1, 2, 3


def _common(p: argparse.ArgumentParser) -> None:
    p.add_argument("--url", help="a remote server (Streamable HTTP, falling back to HTTP+SSE) instead of a command")
    p.add_argument("--config", metavar="FILE", help="an mcpServers configuration file (with --server NAME)")
    p.add_argument("--server", metavar="NAME", help="the server of --config to use (optional when the file has one)")
    p.add_argument("--header", action="append", default=[], metavar="NAME: VALUE", help="an HTTP header for a remote server (repeatable)")
    p.add_argument("--mode", choices=["auto", "modern", "legacy"], default="auto", help="protocol era (default: auto)")
    p.add_argument("--timeout", type=float, default=30.0, help="request timeout in seconds (default 30)")
    p.add_argument("--env", action="append", default=[], metavar="KEY=VALUE", help="environment for a stdio server")
    p.add_argument("--json", action="store_true", help="print JSON")
    p.add_argument("-v", "--verbose", action="store_true", help="log what happens (and the server's stderr)")


def _parser() -> argparse.ArgumentParser:
    from . import __version__

    p = argparse.ArgumentParser(
        prog="mcpsync",
        description="A synchronous MCP client. Name the server by a URL, a file, or its command after `--`.",
        epilog="Example: mcpsync call echo message=hi -- npx -y @modelcontextprotocol/server-everything",
    )
    p.add_argument("--version", action="version", version=f"mcpsync {__version__}")
    sub = p.add_subparsers(dest="cmd", metavar="COMMAND")
    t = sub.add_parser("tools", help="list the tools of a server: mcpsync tools [TARGET | -- CMD ARGS]")
    t.add_argument("words", nargs="*", metavar="TARGET", help="a URL or a server file (or put the command after --)")
    _common(t)
    c = sub.add_parser("call", help="call a tool: mcpsync call TOOL key=value ... [TARGET | -- CMD ARGS]")
    c.add_argument("words", nargs="+", metavar="TOOL [key=value ...]")
    _common(c)
    r = sub.add_parser("resources", help="list resources, or read one: mcpsync resources [list | read URI] [TARGET | -- CMD]")
    r.add_argument("words", nargs="*", metavar="[list | read URI] [TARGET]")
    _common(r)
    pr = sub.add_parser("prompts", help="list prompts, or render one: mcpsync prompts [list | get NAME key=value ...] [TARGET | -- CMD]")
    pr.add_argument("words", nargs="*", metavar="[list | get NAME key=value ...] [TARGET]")
    _common(pr)
    d = sub.add_parser("demo", help="run the bundled demo server: list its tools and call a few")
    _common(d)
    sub.add_parser("info", help="which hot-path implementation is active, and versions")
    # handled before parsing (they have options of their own); listed here for --help
    sub.add_parser("bench", help="per-tool latency of a server: mcpsync bench [--threads N] -- CMD ARGS (see bench --help)")
    sub.add_parser("servers", help="list and check the servers of a config file: mcpsync servers mcp.json")
    sub.add_parser("bridge", help="serve an MCP server over WebSocket or gRPC: mcpsync bridge --websocket HOST:PORT -- CMD")
    return p


_FILE_RUNNERS = {".py": None, ".js": "node", ".mjs": "node", ".cjs": "node"}


def _looks_like_target(word: str) -> bool:
    """A URL this client can reach, or a server file (by suffix, or an existing executable)."""
    lower = word.lower()
    if lower.startswith(("http://", "https://", "ws://", "wss://")):
        return True
    if "=" in word:
        return False
    if os.path.splitext(lower)[1] in _FILE_RUNNERS:
        return True
    return os.sep in word and os.path.isfile(word) and os.access(word, os.X_OK)


def _take_target(words: list[str], needed: int) -> tuple[str | None, list[str]]:
    """Split a target (the first or the last word) from the others, when more words were
    given than the command needs and one of those ends looks like a target."""
    if len(words) > needed:
        if _looks_like_target(words[0]):
            return words[0], words[1:]
        if _looks_like_target(words[-1]):
            return words[-1], words[:-1]
    return None, words


def _target_command(target: str) -> list[str]:
    """The stdio command that runs a server file."""
    ext = os.path.splitext(target.lower())[1]
    if ext == ".py":
        return [sys.executable, target]
    runner = _FILE_RUNNERS.get(ext)
    if runner is not None:
        return [runner, target]
    return [target]


def _headers(items: Sequence[str]) -> dict[str, str]:
    out: dict[str, str] = {}
    for item in items:
        name, sep, value = item.partition(":")
        if not sep or not name.strip():
            raise UsageError(f"--header expects 'Name: value', got {item!r}")
        out[name.strip()] = value.strip()
    return out


def _client(opts: argparse.Namespace, command: list[str], target: str | None = None) -> Any:
    from . import Client, Timeouts

    timeouts = Timeouts(request=opts.timeout)
    given = [what for what, present in (("--url", opts.url), ("--config", opts.config), ("a command after --", command), (f"the target {target!r}", target)) if present]
    if len(given) > 1:
        raise UsageError(f"give one server, not {' and '.join(given)}")
    if opts.server and not opts.config:
        raise UsageError("--server names a server of a --config file")
    headers = _headers(opts.header)
    url = opts.url
    if target is not None:
        if target.lower().startswith(("ws://", "wss://")):
            return Client.websocket(target, headers=headers or None, mode=opts.mode, timeouts=timeouts)
        if target.lower().startswith(("http://", "https://")):
            url = target
        else:
            command = _target_command(target)
    if opts.config:
        return _config_client(opts, headers, timeouts)
    if url:
        return Client.http(url, headers=headers or None, mode=opts.mode, timeouts=timeouts)
    if not command:
        raise UsageError("no server given: a URL, a server file, --config FILE, or its command after `--` (e.g. `-- npx -y @modelcontextprotocol/server-everything`)")
    if headers:
        raise UsageError("--header is for a remote server (a URL)")
    env = {}
    for item in opts.env:
        if "=" not in item:
            raise UsageError(f"--env expects KEY=VALUE, got {item!r}")
        k, v = item.split("=", 1)
        env[k] = v
    return Client.stdio(command[0], command[1:], env=env or None, mode=opts.mode, timeouts=timeouts)


def _config_client(opts: argparse.Namespace, headers: dict[str, str], timeouts: Any) -> Any:
    from dataclasses import replace

    from ._config import ConfigError, load_config

    try:
        config = load_config(opts.config)
        name = opts.server
        if name is None:
            usable = list(config.usable)
            if len(usable) != 1:
                raise UsageError(f"{opts.config} defines {len(config.names)} servers: choose one with --server NAME ({', '.join(config.names) or 'none'})")
            name = usable[0]
        server = config[name]
    except ConfigError as exc:
        raise UsageError(str(exc)) from None
    if headers:
        if not server.remote:
            raise UsageError(f"--header is for a remote server; {name!r} is a {server.transport} server")
        server = replace(server, headers={**server.headers, **headers})
    if opts.env:
        raise UsageError("--env does not apply to --config (set env in the file)")
    from ._client import Client

    # a server named with --server is used even if its entry says "disabled" (as MultiClient does)
    return Client.from_config(server, mode=opts.mode, timeouts=timeouts, allow_disabled=opts.server is not None)


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
        _print_block(block)
    if result.structured_content is not None and not any(isinstance(b, TextContent) for b in result.content):
        print(json.dumps(result.structured_content, indent=2, ensure_ascii=False))


def _print_block(block: Any) -> None:
    from ._messages import EmbeddedResource, TextContent

    if isinstance(block, TextContent):
        print(block.text)
    elif isinstance(block, EmbeddedResource):
        res = block.resource
        mime = f" {res.mime_type}" if getattr(res, "mime_type", None) else ""
        print(f"[resource {res.uri}{mime}]")
        text, blob = res.text, res.blob
        if text is not None:
            print(text)
        elif blob:
            print(f"({len(blob) * 3 // 4} bytes, base64)")
    else:
        kind = type(block).__name__
        detail = getattr(block, "uri", None) or getattr(block, "mime_type", "")
        print(f"[{kind} {detail}]")


def _print_listing(items: Sequence[tuple[str, str]]) -> None:
    width = max((len(a) for a, _ in items), default=0)
    for a, b in items:
        print(f"{a:<{width}}  {b}".rstrip())


def _first_line(*texts: Any) -> str:
    for text in texts:
        if text:
            lines = str(text).strip().splitlines()
            if lines:
                return lines[0]
    return ""


def _resources(opts: argparse.Namespace, client: Any, words: list[str]) -> int:
    from ._messages import to_builtins

    action = words[0] if words else "list"
    if action == "list" and len(words) <= 1:
        resources, templates = client.list_resources(), client.list_resource_templates()
        if opts.json:
            print(json.dumps({"resources": [to_builtins(r) for r in resources], "resourceTemplates": [to_builtins(t) for t in templates]}, indent=2, ensure_ascii=False))
            return EXIT_OK
        _print_listing([(r.uri, _first_line(r.name, r.title, r.description)) for r in resources])
        _print_listing([(t.uri_template, _first_line(t.name, t.title, t.description) + " (template)") for t in templates])
        return EXIT_OK
    if action == "read" and len(words) == 2:
        result = client.read_resource(words[1])
        if opts.json:
            print(json.dumps(to_builtins(result), indent=2, ensure_ascii=False))
            return EXIT_OK
        for c in result.contents:
            if c.text is not None:
                print(c.text)
            else:
                print(f"[resource {c.uri} {c.mime_type or ''}: {len(c.blob or '') * 3 // 4} bytes, base64]")
        return EXIT_OK
    raise UsageError("resources takes `list` or `read URI`")


def _prompts(opts: argparse.Namespace, client: Any, words: list[str]) -> int:
    from ._messages import to_builtins

    action = words[0] if words else "list"
    if action == "list" and len(words) <= 1:
        prompts = client.list_prompts()
        if opts.json:
            print(json.dumps([to_builtins(p) for p in prompts], indent=2, ensure_ascii=False))
            return EXIT_OK
        rows = []
        for p in prompts:
            args = " ".join(a.name + ("" if a.required else "?") for a in (p.arguments or ()))
            rows.append((p.name, _first_line(p.description, p.title) + (f"  [{args}]" if args else "")))
        _print_listing(rows)
        return EXIT_OK
    if action == "get" and len(words) >= 2:
        name = words[1]
        known = {p.name for p in client.list_prompts()}
        if name not in known:
            print(f"mcpsync: prompt {name!r} does not exist on this server (prompts: {', '.join(sorted(known)) or 'none'})", file=sys.stderr)
            return EXIT_USAGE
        arguments = {k: v if isinstance(v, str) else json.dumps(v) for k, v in parse_arguments(words[2:], {"properties": {}}).items()}
        result = client.get_prompt(name, arguments)
        if opts.json:
            print(json.dumps(to_builtins(result), indent=2, ensure_ascii=False))
            return EXIT_OK
        for message in result.messages:
            print(f"[{message.role}]")
            _print_block(message.content)
        return EXIT_OK
    raise UsageError("prompts takes `list` or `get NAME key=value ...`")


_NEEDED = {"tools": 0, "call": 1, "demo": 0}


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
    words: list[str] = list(getattr(opts, "words", []) or [])
    target = None
    # a target among the words (a URL or a server file); two ways of naming the server
    # at once are refused by _client
    if opts.cmd in ("resources", "prompts"):
        action = words[:1] if words[:1] in (["list"], ["read"], ["get"]) else []
        needed = {"read": 1, "get": 1}.get(action[0], 0) if action else 0
        target, rest = _take_target(words[len(action) :], needed)
        words = [*action, *rest]
    else:
        target, words = _take_target(words, _NEEDED.get(opts.cmd, 0))
    if opts.cmd == "tools" and words:
        raise UsageError(f"tools takes no arguments besides the server; cannot tell how to run {words[0]!r} (a URL, a .py/.js file, or a command after --)")
    with _client(opts, command, target) as client:
        if opts.cmd == "tools":
            _print_tools(client.list_tools(), opts.json)
            return EXIT_OK
        if opts.cmd == "resources":
            return _resources(opts, client, words)
        if opts.cmd == "prompts":
            return _prompts(opts, client, words)
        if opts.cmd == "call":
            name, pairs = words[0], words[1:]
            tools = {t.name: t for t in client.list_tools()}
            tool = tools.get(name)
            if tool is None:
                known = ", ".join(sorted(tools)) or "none"
                print(f"mcpsync: tool {name!r} does not exist on this server (tools: {known})", file=sys.stderr)
                return EXIT_USAGE
            result: CallToolResult = client.call_tool(name, parse_arguments(pairs, tool.input_schema))
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
    from ._errors import ConfigError, MCPError, ProfileError

    own, command = split_command(sys.argv[1:] if argv is None else argv)
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
    # positionals may come after options (`call TOOL --header 'A: b' https://host/mcp`)
    opts, extra = parser.parse_known_args(own)
    if extra and (not hasattr(opts, "words") or any(e.startswith("-") for e in extra)):
        parser.error(f"unrecognized arguments: {' '.join(extra)}")
    if extra:
        opts.words = [*opts.words, *extra]
    if not opts.cmd:
        parser.print_help()
        return EXIT_USAGE
    logging.basicConfig(level=logging.INFO if getattr(opts, "verbose", False) else logging.WARNING, format="%(name)s: %(message)s")
    try:
        status = _run(opts, command)
        sys.stdout.flush()  # a closed pipe shows here, inside the handler below
        return status
    except BrokenPipeError:
        # the reader went away (`mcpsync tools ... | head`): not an error. Point stdout at
        # devnull so the interpreter's own flush at exit does not raise again.
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        return EXIT_OK
    except (UsageError, ConfigError, ProfileError) as exc:  # said in one line, never a traceback
        print(f"mcpsync: {exc}", file=sys.stderr)
        return EXIT_USAGE
    except MCPError as exc:
        print(f"mcpsync: {type(exc).__name__}: {exc}", file=sys.stderr)
        return EXIT_FAILURE
    except KeyboardInterrupt:
        return 130


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
