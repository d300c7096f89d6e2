"""ClientSpec: a picklable recipe; a live Client refuses pickling and says what to do."""

from __future__ import annotations

import copy
import json
import pickle
import sys

import pytest

from mcpsync import Client, ClientSpec, ConfigError, RetryPolicy, Timeouts


def _roundtrip(spec: ClientSpec) -> ClientSpec:
    return pickle.loads(pickle.dumps(spec, protocol=pickle.HIGHEST_PROTOCOL))


def test_stdio_spec_roundtrips_and_compares_by_value() -> None:
    spec = ClientSpec.stdio(sys.executable, ["-m", "mcpsync.server.demo"], name="demo", timeouts=Timeouts(request=5.0),
                            env={"A": "1"})
    back = _roundtrip(spec)
    assert back == spec and hash(back) == hash(spec)
    assert dict(back.options)["timeouts"] == Timeouts(request=5.0)
    # option order and list-vs-tuple do not make a different spec
    same = ClientSpec.stdio(sys.executable, ("-m", "mcpsync.server.demo"), env={"A": "1"},
                            timeouts=Timeouts(request=5.0), name="demo")
    assert same == spec and len({spec, same, back}) == 1
    assert ClientSpec.stdio(sys.executable, ["-m", "mcpsync.server.demo"], name="other") != spec


@pytest.mark.parametrize(
    "spec",
    [
        ClientSpec.http("http://127.0.0.1:9/mcp", retry=RetryPolicy.DEFAULT, headers={"X-Team": "a"}),
        ClientSpec.http("http://127.0.0.1:9/mcp", headers={"Authorization": "Bearer ${MCP_TOKEN}"}),
        ClientSpec.http("http://127.0.0.1:9/mcp", oauth={"scopes": ["read"], "interactive": False}),
        ClientSpec.sse("http://127.0.0.1:9/sse"),
        ClientSpec.websocket("ws://127.0.0.1:9/mcp"),
        ClientSpec.grpc("127.0.0.1:9"),
    ],
    ids=["http", "http-env-token", "http-oauth", "sse", "websocket", "grpc"],
)
def test_remote_specs_roundtrip(spec: ClientSpec) -> None:
    assert _roundtrip(spec) == spec
    assert "Bearer" not in repr(spec)  # header values are never shown


def test_spec_builds_a_client_that_does_not_connect_until_used() -> None:
    spec = ClientSpec.http("http://127.0.0.1:9/mcp", name="nowhere")
    client = spec.build()
    try:
        assert isinstance(client, Client) and client.name == "nowhere" and not client.closed
    finally:
        client.close()


def test_header_templates_expand_in_the_building_process(monkeypatch: pytest.MonkeyPatch) -> None:
    spec = ClientSpec.http("http://127.0.0.1:9/mcp", headers={"Authorization": "Bearer ${MCP_TOKEN_T}"})
    assert "s3cret" not in pickle.dumps(spec).decode("latin-1")
    monkeypatch.delenv("MCP_TOKEN_T", raising=False)
    with pytest.raises(ConfigError, match="MCP_TOKEN_T"):
        spec.build()
    monkeypatch.setenv("MCP_TOKEN_T", "s3cret")
    client = spec.build()
    client.close()


def test_literal_credentials_and_live_objects_are_refused() -> None:
    with pytest.raises(ValueError, match="literal credential"):
        ClientSpec.http("http://127.0.0.1:9/mcp", headers={"Authorization": "Bearer s3cret"})
    with pytest.raises(TypeError, match="oauth="):
        ClientSpec.http("http://127.0.0.1:9/mcp", auth=object())
    with pytest.raises(TypeError, match="'sampling_handler' cannot be pickled"):
        ClientSpec.stdio("x", sampling_handler=lambda params: {})
    with pytest.raises(ValueError, match="kind"):
        ClientSpec("carrier-pigeon", ("x",))


def test_from_config_keeps_templates_unexpanded(tmp_path, monkeypatch: pytest.MonkeyPatch) -> None:  # type: ignore[no-untyped-def]
    doc = {
        "mcpServers": {
            "api": {"url": "http://127.0.0.1:9/mcp", "headers": {"Authorization": "Bearer ${API_TOKEN_T}"}},
            "demo": {"command": sys.executable, "args": ["-m", "mcpsync.server.demo"]},
        }
    }
    path = tmp_path / "mcp.json"
    path.write_text(json.dumps(doc))
    monkeypatch.setenv("API_TOKEN_T", "s3cret")
    spec = ClientSpec.from_config(path, "api")
    assert spec == ClientSpec.from_config(doc, "api") == _roundtrip(spec)
    assert "s3cret" not in pickle.dumps(spec).decode("latin-1")  # expanded in the worker, not here
    assert "demo" not in (spec.config or "")  # only the entry travels
    client = spec.build()
    try:
        assert client.name == "api"
    finally:
        client.close()
    monkeypatch.delenv("API_TOKEN_T")
    ClientSpec.from_config(path, "api")  # a variable only the workers have is fine here
    with pytest.raises(ConfigError):
        ClientSpec.from_config(path, "missing")
    with pytest.raises(ConfigError):
        ClientSpec.from_config({"mcpServers": {"bad": {"url": 3}}}, "bad")


def test_pickling_a_live_client_says_what_to_do() -> None:
    client = Client.http("http://127.0.0.1:9/mcp", name="live")
    try:
        for dump in (pickle.dumps, copy.copy, copy.deepcopy):
            with pytest.raises(TypeError, match=r"ClientSpec.*spec\.client\(\)"):
                dump(client)
    finally:
        client.close()


def test_process_client_is_one_per_spec_and_replaced_once_closed() -> None:
    spec = ClientSpec.http("http://127.0.0.1:9/mcp", name="per-process")
    first = spec.client()
    try:
        assert spec.client() is first and _roundtrip(spec).client() is first
    finally:
        first.close()
    second = spec.client()
    try:
        assert second is not first and not second.closed
    finally:
        second.close()


def test_unhashable_option_values_still_make_a_usable_key() -> None:
    a = ClientSpec.stdio("x", roots=[{"uri": "file:///a", "name": "a"}], env={"A": "1"})
    b = ClientSpec.stdio("x", roots=[{"name": "a", "uri": "file:///a"}], env={"A": "1"})
    assert a == b and hash(a) == hash(b)
    assert hash(ClientSpec.stdio("x", client_info=bytearray(b"n"))) is not None


def test_a_literal_secret_in_an_oauth_grant_never_travels() -> None:
    """Issue 30: a grant's literal client secret went into the pickle; it is refused there,
    naming Env(...), as a literal Authorization header is refused."""
    import pickle

    from mcpsync.auth import ClientCredentials, Env, IdJag

    url = "https://mcp.example.com/mcp"
    spec = ClientSpec.http(url, oauth={"grant": ClientCredentials(client_id="c", client_secret="S3CRET")})
    with pytest.raises(TypeError, match=r"oauth\.grant \(ClientCredentials\)\.client_secret .*Env\('NAME'\)"):
        pickle.dumps(spec)
    with pytest.raises(TypeError, match="private_key"):
        pickle.dumps(ClientSpec.http(url, oauth={"grant": ClientCredentials(client_id="c", private_key=b"-----BEGIN")}))
    with pytest.raises(TypeError, match="dpop"):
        pickle.dumps(ClientSpec.sse(url, oauth={"dpop": object()}))
    ok = ClientSpec.http(url, oauth={"grant": ClientCredentials(client_id=Env("ID"), client_secret=Env("SECRET")),
                                     "dpop": True, "scopes": ["read"]})
    data = pickle.dumps(ok)
    assert pickle.loads(data) == ok and b"S3CRET" not in data
    idjag = IdJag(client_id="c", idp_token_endpoint="https://idp.example/token", subject_token=_idp_token,
                  idp_client_secret=Env("IDP_SECRET"))
    pickle.dumps(ClientSpec.http(url, oauth={"grant": idjag}))  # a function, an endpoint, a type name: no secret


def _idp_token() -> str:
    return "from the workload's identity"
