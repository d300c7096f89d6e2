"""mcpsync's public surface (issue 17): what the README and docs use is importable from
``mcpsync`` itself, the Client's public methods say what they return, its policies are
read-only, and every constructor returns a Client."""

from __future__ import annotations

import inspect
import re
import typing
from pathlib import Path

import pytest

import mcpsync
from mcpsync import BreakerPolicy, Client, RetryPolicy, Timeouts

ROOT = Path(__file__).resolve().parents[2]

#: Names the README and docs show, which once needed a private import.
PUBLIC = ["Endpoint", "EndpointState", "NoEndpointAvailable", "PoolStats", "agent_message", "profile_options",
          "ProfileError", "ResourceManager", "Telemetry", "telemetry", "MultiClient", "ToolEntry", "ServerStatus", "ServerConfig", "ConfigError", "load_config"]

#: Public methods whose ``Any`` is the point: ``request`` returns whatever the server sent
#: for a method mcpsync has no type for.
ANY_ALLOWED = {"request"}


@pytest.mark.parametrize("name", PUBLIC)
def test_exported_from_mcpsync(name):
    assert name in mcpsync.__all__
    assert getattr(mcpsync, name) is not None


def test_every_name_in_all_resolves():
    for name in mcpsync.__all__:
        assert hasattr(mcpsync, name), name


def test_lazy_exports_are_visible_to_type_checkers():
    """Each lazy name is also imported under ``if TYPE_CHECKING:`` in ``__init__.py``."""
    text = (ROOT / "mcpsync" / "__init__.py").read_text()
    checking = text.split("if TYPE_CHECKING:", 1)[1].split("\n\n", 1)[0]
    for name in mcpsync._LAZY:
        assert re.search(rf"\b{name}\b", checking), f"{name} is lazy but not imported under TYPE_CHECKING"


def test_examples_use_only_public_imports():
    for path in sorted((ROOT / "examples").glob("*.py")):
        text = path.read_text()
        private = re.findall(r"^\s*(?:from|import) (mcpsync(?:\.\w+)*\._\w+)", text, flags=re.M)
        assert not private, f"{path.name} imports private modules: {private}"


def _public_methods():
    for name in sorted(dir(Client)):
        if name.startswith("_"):
            continue
        attr = inspect.getattr_static(Client, name)
        fn = attr.fget if isinstance(attr, property) else getattr(attr, "__func__", attr)
        if callable(fn):
            yield name, fn


def test_no_public_client_method_returns_any():
    namespace = {**vars(mcpsync), **{n: getattr(mcpsync, n) for n in mcpsync.__all__}}
    loose = []
    for name, fn in _public_methods():
        hints = typing.get_type_hints(fn, globalns={**fn.__globals__, **namespace})
        if "return" not in hints:
            loose.append(f"{name} (no annotation)")
        elif hints["return"] is typing.Any and name not in ANY_ALLOWED:
            loose.append(name)
    assert not loose, f"public Client methods that return Any: {loose}"


@pytest.mark.parametrize("policy, value", [
    ("retry", RetryPolicy.NONE),
    ("breaker", BreakerPolicy.DISABLED),
    ("timeouts", Timeouts.DEFAULT),
    ("pool", None),
    ("mode", "legacy"),
])
def test_policies_are_read_only(policy, value):
    client = Client(lambda: None)  # connects lazily: nothing runs
    try:
        before = getattr(client, policy)
        with pytest.raises(AttributeError, match=rf"Client\.{policy} is read-only.*{policy}=\.\.\."):
            setattr(client, policy, value)
        assert getattr(client, policy) is before
        client.name = "renamed"  # other attributes are not policies
    finally:
        client.close()


def test_the_profile_list_of_client_options_is_the_clients():
    from mcpsync._profiles import CLIENT_OPTIONS

    params = inspect.signature(Client.__init__).parameters
    assert CLIENT_OPTIONS == {n for n, p in params.items() if p.kind is p.KEYWORD_ONLY}


@pytest.mark.parametrize("make", [
    lambda: Client.stdio("python", ["-m", "mcpsync.server.demo"], profile="professional"),
    lambda: Client.stdio("python", ["-m", "mcpsync.server.demo"], profile="minimal", process_per_call=False),
    lambda: Client.stdio("python", ["-m", "mcpsync.server.demo"], profile="minimal"),  # a process per call
    lambda: Client.http("https://mcp.example.test/mcp", profile="enterprise"),
    lambda: Client.sse("https://mcp.example.test/sse", profile="professional"),
    lambda: Client.websocket("wss://mcp.example.test/ws", profile="enterprise"),
    lambda: Client.grpc("mcp.example.test:50051", profile="enterprise"),
    lambda: Client.from_config({"mcpServers": {"s": {"url": "https://mcp.example.test/mcp"}}}, "s", profile="professional"),
])
def test_constructors_with_a_profile_return_a_client(make):
    client = make()  # nothing connects before the first call
    try:
        assert isinstance(client, Client)
    finally:
        client.close()


@pytest.mark.parametrize("method, expected", [
    ("list_tools", "list[Tool]"),
    ("tools_by_server", "dict[str, list[Tool]]"),
    ("call_tool", "CallToolResult"),
])
def test_multiclient_methods_return_precise_types(method, expected):
    """``MultiClient`` answers with the same types as ``Client`` (issue 34): a user's
    ``for t in multi.list_tools(): t.name`` type-checks."""
    from mcpsync import MultiClient

    fn = getattr(MultiClient, method)
    namespace = {**vars(mcpsync), **{n: getattr(mcpsync, n) for n in mcpsync.__all__}}
    hint = typing.get_type_hints(fn, globalns={**fn.__globals__, **namespace})["return"]
    assert typing.Any not in typing.get_args(hint) and hint is not typing.Any
    assert str(hint).replace("mcpsync._messages.", "") == expected or getattr(hint, "__name__", "") == expected
