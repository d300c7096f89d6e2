"""Configuration files in the mcpServers format: examples load, bad files name the field,
variables expand, secrets never show."""

from __future__ import annotations

import json
import pickle
import re
from pathlib import Path

import pytest

from mcpsync._config import (
    Config,
    ConfigError,
    client_plan,
    expand,
    load_config,
    parse_config,
)

ROOT = Path(__file__).resolve().parents[2]
DATA = ROOT / "tests" / "data"
EXAMPLES = ROOT / "docs" / "config-examples.md"
SECRET = "s3cr3t-value-never-shown"


def _json_blocks(markdown: str) -> list[str]:
    return re.findall(r"```json\n(.*?)```", markdown, flags=re.S)


def _variables(text: str) -> set[str]:
    return {m.split(":-")[0].split("-")[0] for m in re.findall(r"\$\{([^}]*)\}", text)}


# ------------------------------------------------------------------ the documented examples


def test_the_examples_file_has_json_blocks():
    assert len(_json_blocks(EXAMPLES.read_text())) >= 4


@pytest.mark.parametrize("index", range(len(_json_blocks(EXAMPLES.read_text()))))
def test_every_readme_example_loads(index, tmp_path):
    block = _json_blocks(EXAMPLES.read_text())[index]
    path = tmp_path / "mcp.json"
    path.write_text(block)
    environ = {name: SECRET for name in _variables(block)}
    cfg = load_config(path, environ=environ)
    assert len(cfg) >= 1
    assert not cfg.errors, cfg.errors
    for name in cfg:
        server = cfg[name]
        assert server.transport in ("stdio", "http", "sse", "websocket", "grpc")
        assert SECRET not in repr(server) and SECRET not in server.describe()


def _readme_config_blocks() -> list[str]:
    readme = ROOT / "README.md"
    if not readme.exists():
        return []
    return [b for b in _json_blocks(readme.read_text()) if '"mcpServers"' in b or '"servers"' in b]


def test_readme_config_examples_load(tmp_path):
    """Once docs/config-examples.md is pasted into the README, its examples are checked there too."""
    blocks = _readme_config_blocks()
    if not blocks:
        pytest.skip("README.md has no mcpServers examples yet")
    for i, block in enumerate(blocks):
        path = tmp_path / f"readme-{i}.json"
        path.write_text(block)
        cfg = load_config(path, environ={name: SECRET for name in _variables(block)})
        assert len(cfg) >= 1 and not cfg.errors, (i, cfg.errors)


@pytest.mark.parametrize("name", ["claude_desktop.json", "vscode.json"])
def test_data_examples_load(name):
    cfg = load_config(DATA / name, environ={"GITHUB_TOKEN": SECRET, "SEARCH_TOKEN": SECRET})
    assert not cfg.errors
    assert list(cfg) == list(json.loads((DATA / name).read_text()).get("mcpServers") or json.loads((DATA / name).read_text())["servers"])


def test_fields_of_each_kind():
    cfg = load_config(DATA / "claude_desktop.json", environ={"GITHUB_TOKEN": "gh", "SEARCH_TOKEN": "tok"})
    ev = cfg["everything"]
    assert (ev.transport, ev.command, ev.args, dict(ev.env), ev.cwd) == (
        "stdio",
        "npx",
        ("-y", "@modelcontextprotocol/server-everything"),
        {},
        None,
    )
    gh = cfg["github"]
    assert gh.env["GITHUB_PERSONAL_ACCESS_TOKEN"] == "gh"
    assert gh.extra == {"autoApprove": ["search_repositories"]}
    search = cfg["search"]
    assert search.transport == "http"  # "streamable-http" is an alias
    assert search.url == "https://search.example.com/mcp"  # ${SEARCH_HOST:-...} default
    assert dict(search.headers) == {"Authorization": "Bearer tok", "X-Team": "agents"}
    assert search.timeout == 20.0
    vs = load_config(DATA / "vscode.json")
    assert [vs[n].transport for n in vs] == ["stdio", "websocket", "grpc"]


def test_config_is_a_mapping_in_file_order():
    cfg = load_config(DATA / "claude_desktop.json", environ={"GITHUB_TOKEN": "x", "SEARCH_TOKEN": "y"})
    assert isinstance(cfg, Config)
    assert list(cfg) == ["everything", "github", "search"] == cfg.names
    assert "github" in cfg and "nope" not in cfg
    with pytest.raises(ConfigError, match=r"no server named 'nope' \(defined: everything, github, search\)"):
        cfg["nope"]
    broken = load_config(DATA / "claude_desktop.json", environ={"SEARCH_TOKEN": "y"})
    # the mapping holds what loaded; names lists every entry; values() never raises
    assert list(broken) == ["everything", "search"] and len(broken) == 2
    assert broken.names == ["everything", "github", "search"]
    assert "github" not in broken and broken.defines("github") and not broken.defines("nope")
    assert [s.name for s in broken.values()] == ["everything", "search"]


def test_server_config_is_frozen():
    s = parse_config({"mcpServers": {"a": {"command": "x", "env": {"K": "v"}}}})["a"]
    with pytest.raises(Exception):
        s.command = "y"  # type: ignore[misc]
    with pytest.raises(TypeError):
        s.env["K"] = "w"  # type: ignore[index]
    assert s == parse_config({"mcpServers": {"a": {"command": "x", "env": {"K": "v"}}}})["a"]
    hash(s)


# ------------------------------------------------------------------ bad files name the field


@pytest.mark.parametrize(
    "file, message",
    [
        ("bad_args_type.json", "mcpServers.everything.args[2]: expected a string, got 3"),
        ("bad_missing_command.json", 'mcpServers.broken: missing "command" (for a stdio server) or "url" (for a remote server)'),
        ("bad_type.json", "mcpServers.remote.type: unknown transport type 'carrier-pigeon'"),
        ("bad_not_json.json", "not valid JSON: Expecting ':' delimiter at line 1 column 42"),
        ("bad_env_value.json", "mcpServers.db.env.DB_PASSWORD: expected a string, got an object"),
    ],
)
def test_bad_files_name_the_field(file, message):
    with pytest.raises(ConfigError) as info:
        load_config(DATA / file, strict=True)
    text = str(info.value)
    assert text.startswith(str(DATA / file) + ": ")
    assert message in text
    assert "hunter2" not in text


@pytest.mark.parametrize(
    "entry, field, fragment",
    [
        ({"command": 7}, "mcpServers.s.command", "expected a string, got 7"),
        ({"command": ""}, "mcpServers.s.command", "must not be empty"),
        ({"command": "x", "args": "a b"}, "mcpServers.s.args", "expected a list of strings, got a string"),
        ({"command": "x", "args": [True]}, "mcpServers.s.args[0]", "expected a string, got true"),
        ({"command": "x", "env": []}, "mcpServers.s.env", "expected an object, got a list"),
        ({"command": "x", "env": {"A": None}}, "mcpServers.s.env.A", "expected a string, got null"),
        ({"command": "x", "cwd": 1.5}, "mcpServers.s.cwd", "expected a string, got 1.5"),
        ({"command": "x", "url": "http://h"}, "mcpServers.s", 'give either "command" (stdio) or "url" (remote), not both'),
        ({"command": "x", "headers": {}}, "mcpServers.s.headers", "belongs to remote servers"),
        ({"url": "http://h", "args": []}, "mcpServers.s.args", "belongs to stdio servers"),
        ({"type": "sse"}, "mcpServers.s", 'missing "url" (required for a sse server)'),
        ({"type": "stdio", "url": "http://h"}, "mcpServers.s", 'missing "command"'),
        ({"url": 5}, "mcpServers.s.url", "expected a string, got 5"),
        ({"url": "http://h", "headers": {"A": 1}}, "mcpServers.s.headers.A", "expected a string, got 1"),
        ({"url": "http://h", "headers": {"Bad Name": "v"}}, "mcpServers.s.headers", "header names"),
        ({"type": "http", "url": "ftp://h"}, "mcpServers.s.url", "expected an http:// or https:// URL"),
        ({"type": "websocket", "url": "http://h"}, "mcpServers.s.url", "expected a ws:// or wss:// URL"),
        ({"type": "grpc", "url": "http://h:1"}, "mcpServers.s.url", "expected host:port"),
        ({"type": 3, "url": "http://h"}, "mcpServers.s.type", "expected a string, got 3"),
        ({"command": "x", "timeout": "10"}, "mcpServers.s.timeout", "expected a number of seconds, got a string"),
        ({"command": "x", "timeout": 0}, "mcpServers.s.timeout", "must be positive"),
        ({"command": "x", "disabled": "yes"}, "mcpServers.s.disabled", "expected true or false"),
        ("npx", "mcpServers.s", "expected an object, got a string"),
    ],
)
def test_field_errors(entry, field, fragment):
    with pytest.raises(ConfigError) as info:
        parse_config({"mcpServers": {"s": entry}}, source="mcp.json", strict=True)
    assert info.value.field == field
    assert fragment in str(info.value)
    assert str(info.value).startswith(f"mcp.json: {field}: ")


def test_top_level_errors():
    with pytest.raises(ConfigError, match='expected a top-level "mcpServers" object'):
        parse_config({"servers_": {}})
    with pytest.raises(ConfigError, match="expected a JSON object"):
        parse_config([1, 2])
    with pytest.raises(ConfigError, match="mcpServers: expected an object, got a list"):
        parse_config({"mcpServers": []})
    with pytest.raises(ConfigError, match="no such file"):
        load_config("/nonexistent/mcp.json")


def test_config_error_pickles():
    err = ConfigError("expected a string, got 3", field="mcpServers.a.args[0]", source="f.json", server="a")
    again = pickle.loads(pickle.dumps(err))
    assert (str(again), again.field, again.server) == (str(err), "mcpServers.a.args[0]", "a")


# ------------------------------------------------------------------ environment expansion


def test_expand_forms():
    env = {"A": "1", "EMPTY": ""}
    assert expand("${A}", env) == "1"
    assert expand("x${A}y${A}", env) == "x1y1"
    assert expand("${B:-dflt}", env) == "dflt"
    assert expand("${EMPTY:-dflt}", env) == "dflt"  # :- also covers empty
    assert expand("${EMPTY-dflt}", env) == ""  # - only covers unset
    assert expand("${B-dflt}", env) == "dflt"
    assert expand("${env:A}", env) == "1"  # VS Code spelling
    assert expand("$${A} and $A", env) == "${A} and $A"  # escape; bare $A is left alone
    assert expand("${B:-}", env) == ""


def test_unset_variable_makes_only_that_server_unusable(tmp_path):
    path = DATA / "claude_desktop.json"
    cfg = load_config(path, environ={"SEARCH_TOKEN": "t"})
    assert set(cfg.errors) == {"github"}
    assert cfg["everything"].command == "npx"  # the others load
    with pytest.raises(ConfigError) as info:
        cfg["github"]
    assert info.value.field == "mcpServers.github.env.GITHUB_PERSONAL_ACCESS_TOKEN"
    assert "environment variable GITHUB_TOKEN is not set" in str(info.value)
    assert "github" not in cfg.usable and "everything" in cfg.usable


def test_malformed_reference():
    cfg = parse_config({"mcpServers": {"s": {"command": "${not a name}"}}})
    with pytest.raises(ConfigError, match=r"mcpServers.s.command: malformed variable reference"):
        cfg["s"]


def test_expansion_everywhere():
    env = {"BIN": "python3", "DIR": "/srv", "TOKEN": SECRET, "HOST": "h.example"}
    cfg = parse_config(
        {
            "mcpServers": {
                "local": {"command": "${BIN}", "args": ["--root", "${DIR}/data"], "env": {"T": "${TOKEN}"}, "cwd": "${DIR}"},
                "remote": {"url": "https://${HOST}/mcp?key=${TOKEN}", "headers": {"Authorization": "Bearer ${TOKEN}"}},
            }
        },
        environ=env,
    )
    local, remote = cfg["local"], cfg["remote"]
    assert (local.command, local.args, local.env["T"], local.cwd) == ("python3", ("--root", "/srv/data"), SECRET, "/srv")
    assert remote.url == f"https://h.example/mcp?key={SECRET}"
    assert remote.headers["Authorization"] == f"Bearer {SECRET}"


def test_secrets_never_shown():
    env = {"TOKEN": SECRET}
    cfg = parse_config(
        {
            "mcpServers": {
                "local": {"command": "srv", "args": ["--token=${TOKEN}"], "env": {"T": "${TOKEN}", "LITERAL": "plain-secret"}},
                "remote": {"url": "https://user:pw-literal@h/mcp?k=${TOKEN}", "headers": {"X-Key": "literal-key", "A": "${TOKEN}"}},
            }
        },
        environ=env,
    )
    for server in cfg.values():
        for text in (repr(server), str(server), server.describe()):
            assert SECRET not in text
            assert "plain-secret" not in text and "literal-key" not in text and "pw-literal" not in text
    assert "--token=${TOKEN}" in repr(cfg["local"])  # the template is what is shown
    assert "${TOKEN}" in cfg["remote"].describe()


def test_errors_after_expansion_show_the_template():
    cfg = parse_config({"mcpServers": {"r": {"type": "http", "url": "${URL}"}}}, environ={"URL": "ftp://" + SECRET})
    with pytest.raises(ConfigError) as info:
        cfg["r"]
    assert SECRET not in str(info.value)
    assert "'${URL}'" in str(info.value)


# ------------------------------------------------------------------ building clients


def test_client_plan_stdio_and_remote():
    cfg = load_config(DATA / "claude_desktop.json", environ={"GITHUB_TOKEN": "gh", "SEARCH_TOKEN": "tok"})
    c = client_plan(cfg["github"], mode="legacy")
    assert (c.kind, c.target) == ("stdio", ("npx", ["-y", "@modelcontextprotocol/server-github"]))
    assert c.options == {"mode": "legacy", "name": "github", "env": {"GITHUB_PERSONAL_ACCESS_TOKEN": "gh"}, "cwd": None}
    h = client_plan(cfg["search"])
    assert (h.kind, h.target) == ("http", "https://search.example.com/mcp")
    assert h.options["headers"] == {"Authorization": "Bearer tok", "X-Team": "agents"}
    assert h.options["timeouts"].request == 20.0  # the entry's timeout
    g = client_plan(load_config(DATA / "vscode.json")["inventory"])
    assert (g.kind, g.target) == ("grpc", "127.0.0.1:50051") and "metadata" not in g.options
    g2 = client_plan(parse_config({"mcpServers": {"g": {"url": "grpcs://h:1", "headers": {"X-Key": "v"}}}})["g"])
    assert g2.target == "h:1" and g2.options["metadata"] == [("x-key", "v")]  # gRPC metadata: pairs, lowercase keys
    assert g2.options["secure"] is True  # grpcs:// asks for TLS
    ws = client_plan(load_config(DATA / "vscode.json")["live"])
    assert ws.kind == "websocket" and ws.make is None


def test_a_disabled_entry_is_refused_unless_allowed():
    server = parse_config({"mcpServers": {"off": {"command": "x", "disabled": True}}})["off"]
    with pytest.raises(ConfigError, match="disabled") as info:
        client_plan(server)
    assert info.value.field == "mcpServers.off.disabled"
    assert client_plan(server, allow_disabled=True).kind == "stdio"


def test_from_config_builds_a_real_stdio_client(tmp_path):
    import sys

    from mcpsync import Client

    path = tmp_path / "mcp.json"
    path.write_text(json.dumps({"mcpServers": {"demo": {"command": sys.executable, "args": ["-m", "mcpsync.server.demo"], "env": {"X": "${X:-1}"}}}}))
    with Client.from_config(path, "demo") as client:
        assert client.name == "demo"
        assert client.call_tool("add", {"a": 2, "b": 3}).structured_content == {"result": 5}
    with Client.from_config(load_config(path)["demo"]) as client:  # one loaded entry
        assert client.call_tool("echo", {"message": "hi"}).content[0].text == "hi"
    with pytest.raises(ConfigError, match="no server named 'other'"):
        Client.from_config(path, "other")


# ------------------------------------------------------------------ endpoints (routed servers)


def _routed_entry(**extra):
    return {"mcpServers": {"api": {
        "endpoints": [
            {"name": "eu", "url": "https://eu.example.test/mcp", "region": "eu"},
            {"url": "https://user:${PW}@us.example.test/mcp"},
        ],
        "region": "eu",
        "headers": {"Authorization": "Bearer ${TOKEN}"},
        **extra,
    }}}


def test_endpoints_parse_expand_and_hide_secrets():
    cfg = parse_config(_routed_entry(), environ={"PW": SECRET, "TOKEN": SECRET})
    api = cfg["api"]
    assert api.transport == "http" and api.region == "eu"
    assert [(e.name, e.region) for e in api.endpoints] == [("eu", "eu"), ("endpoint-2", None)]
    assert api.endpoints[1].address == f"https://user:{SECRET}@us.example.test/mcp"
    assert api.url == "https://eu.example.test/mcp"
    assert SECRET not in repr(api) and SECRET not in api.describe()
    assert "eu" in api.describe() and "endpoint-2" in api.describe()


@pytest.mark.parametrize(
    "entry, field, words",
    [
        ({"url": "https://a.test/mcp", "endpoints": [{"url": "https://b.test/mcp"}]}, "mcpServers.x.endpoints", "not both"),
        ({"endpoints": []}, "mcpServers.x.endpoints", "non-empty list"),
        ({"endpoints": [{"name": "a"}]}, "mcpServers.x.endpoints[0]", "missing \"url\""),
        ({"endpoints": [{"url": "ftp://a.test"}]}, "mcpServers.x.endpoints[0].url", "http:// or https://"),
        ({"endpoints": [{"url": "https://a.test", "name": "n"}, {"url": "https://b.test", "name": "n"}]},
         "mcpServers.x.endpoints[1].name", "used twice"),
        ({"endpoints": [{"url": "https://a.test", "weight": 3}]}, "mcpServers.x.endpoints[0]", "unknown key 'weight'"),
        ({"url": "https://a.test/mcp", "region": "eu"}, "mcpServers.x.region", "has none"),
        ({"command": "python", "endpoints": [{"url": "https://a.test"}]}, "mcpServers.x.endpoints", "remote servers"),
    ],
)
def test_bad_endpoints_name_the_field(entry, field, words):
    with pytest.raises(ConfigError) as info:
        parse_config({"mcpServers": {"x": entry}}, strict=True)
    assert info.value.field == field and words in str(info.value)


def test_an_unset_variable_in_one_endpoint_disables_only_that_server():
    cfg = parse_config({"mcpServers": {
        "api": {"endpoints": [{"url": "https://${HOST}/mcp"}]},
        "ok": {"url": "https://ok.test/mcp"},
    }}, environ={})
    assert "ok" in cfg.usable and "api" not in cfg.usable
    with pytest.raises(ConfigError, match="HOST"):
        cfg["api"]


@pytest.mark.parametrize("file, bad", [("bad_args_type.json", "everything"), ("bad_missing_command.json", "broken"),
                                       ("bad_type.json", "remote"), ("bad_env_value.json", "db")])
def test_a_bad_entry_fails_its_server_not_the_file(file: str, bad: str) -> None:
    """Issue 30: one bad entry blocked every server of the file. It is that server's error
    (raised when it is asked for by name), unless strict loading is asked for."""
    cfg = load_config(DATA / file, environ={})
    assert bad in cfg.names and bad in cfg.errors and bad not in cfg
    with pytest.raises(ConfigError) as info:
        cfg[bad]
    assert info.value is cfg.errors[bad] and info.value.server == bad
    assert str(info.value).startswith(str(DATA / file) + ": ")
    with pytest.raises(ConfigError):
        load_config(DATA / file, environ={}, strict=True)
    good = parse_config({"mcpServers": {"ok": {"command": "x"}, "bad": {"command": 7}, "ok2": {"url": "https://h/mcp"}}})
    assert list(good) == ["ok", "ok2"] and good.names == ["ok", "bad", "ok2"] and list(good.errors) == ["bad"]
