"""The client the official MCP conformance suite drives (``conformance client --command``).

The harness starts this script once per scenario with the server URL as the last argument and
the scenario in ``MCP_CONFORMANCE_SCENARIO``; scenario data (credentials, keys, tool calls) come
as JSON in ``MCP_CONFORMANCE_CONTEXT``, and the wire version it asks for in
``MCP_CONFORMANCE_PROTOCOL_VERSION``. Only mcpsync's public API is used, as a user would.

Exit status 0 when the scenario's client side ran to its end, 1 otherwise (the harness judges
the traffic; a scenario that expects the client to refuse something passes on either status).
"""

from __future__ import annotations

import json
import logging
import os
import sys
from typing import Any, Callable, Mapping

import requests

from mcpsync import Client, MCPError
from mcpsync.auth import AuthorizationCode, ClientCredentials, IdJag, JWTBearer, MemoryTokenStore, OAuth

#: the Client ID Metadata Document URL the suite's CIMD scenarios expect a client to present.
CIMD_URL = "https://conformance-test.local/client-metadata.json"
#: every blocking step of one scenario ends within this many seconds (the harness allows 30).
TIMEOUT = 20.0


def follow_redirect(url: str) -> None:
    """The authorization callback: what a browser does with the authorization URL.

    The suite's authorization servers approve at once and redirect to the client's
    ``redirect_uri``; following the redirects ends with a GET on mcpsync's loopback listener,
    which receives the code (and checks ``state`` and ``iss``) exactly as from a browser.
    """
    with requests.Session() as browser:
        browser.trust_env = False  # no proxy between a browser and 127.0.0.1
        browser.max_redirects = 10
        browser.get(url, timeout=TIMEOUT).close()


def context() -> dict[str, Any]:
    raw = os.environ.get("MCP_CONFORMANCE_CONTEXT")
    return json.loads(raw) if raw else {}


def mode_for(version: str | None) -> str:
    """The lifecycle the harness asks for: the stateless one from 2026-07-28, else initialize."""
    if not version:
        return "auto"
    return "modern" if version >= "2026" else "legacy"


def apply_defaults(params: Mapping[str, Any]) -> dict[str, Any]:
    """An elicitation answer accepting every field's declared default (SEP-1034)."""
    schema = params.get("requestedSchema") or {}
    content = {
        name: prop["default"]
        for name, prop in (schema.get("properties") or {}).items()
        if isinstance(prop, Mapping) and "default" in prop
    }
    return {"action": "accept", "content": content}


def accept_all(params: Mapping[str, Any]) -> dict[str, Any]:
    """An elicitation answer for the MRTR scenario: accept, confirming."""
    return {"action": "accept", "content": {"confirmed": True}}


def oauth_for(scenario: str, url: str, ctx: Mapping[str, Any]) -> OAuth:
    """The :class:`OAuth` object a user would configure for this scenario's server."""
    common: dict[str, Any] = {"storage": MemoryTokenStore(), "timeout": TIMEOUT, "interactive_timeout": TIMEOUT}
    if scenario == "auth/client-credentials-jwt":
        grant = ClientCredentials(
            client_id=ctx["client_id"], private_key=ctx["private_key_pem"], auth_method="private_key_jwt"
        )
        return OAuth(url, grant, **common)
    if scenario == "auth/client-credentials-basic":
        return OAuth(url, ClientCredentials(client_id=ctx["client_id"], client_secret=ctx["client_secret"]), **common)
    if scenario in ("auth/enterprise-managed-authorization", "auth/cross-app-access-complete-flow"):
        token = ctx["idp_id_token"]
        jag = IdJag(
            idp_token_endpoint=ctx["idp_token_endpoint"],
            subject_token=lambda: token,
            idp_client_id=ctx.get("idp_client_id"),
            client_id=ctx["client_id"],
            client_secret=ctx["client_secret"],
        )
        return OAuth(url, jag, **common)
    if scenario == "auth/wif-jwt-bearer":
        jwt = ctx["valid_jwt"]
        return OAuth(url, JWTBearer(client_id=ctx["client_id"], assertion=lambda: jwt), **common)
    if scenario == "auth/pre-registration":
        grant = AuthorizationCode(
            client_id=ctx["client_id"], client_secret=ctx["client_secret"], open_browser=follow_redirect
        )
        return OAuth(url, grant, **common)
    return OAuth(url, AuthorizationCode(client_metadata_url=CIMD_URL, open_browser=follow_redirect), **common)


def exercise(scenario: str, client: Client, ctx: Mapping[str, Any]) -> None:
    """What the scenario's script expects the client to do once connected."""
    if scenario == "sse-retry":
        client.call_tool("test_reconnection", {})
        return
    if scenario == "elicitation-sep1034-client-defaults":
        client.call_tool("test_client_elicitation_defaults", {})
        return
    if scenario.startswith("sep-2640-"):
        exercise_skills(scenario, client)
        return
    if scenario.startswith("mcpsync/"):
        exercise_own(scenario, client, ctx)
        return
    tools = client.list_tools()
    if scenario in ("json-schema-ref-no-deref", "request-metadata") or scenario.startswith(
        ("auth/client-credentials", "auth/pre-registration", "auth/wif-", "auth/dpop")
    ):
        return
    if scenario == "json-schema-2020-12-preservation":
        focal = next(t for t in tools if t.name == "json_schema_2020_12_tool")
        client.call_tool("json_schema_echo", {"schema": focal.input_schema})
        return
    if scenario == "sep-2322-client-request-state":
        for name in ("test_mrtr_echo_state", "test_mrtr_unrelated", "test_mrtr_no_state", "test_mrtr_no_result_type"):
            if any(t.name == name for t in tools):
                client.call_tool(name, {})
        return
    calls = ctx.get("toolCalls")
    if calls:
        for call in calls:
            try:
                client.call_tool(call["name"], call.get("arguments") or {})
            except MCPError as exc:  # an invalid header case may be refused; the harness judges
                logging.info("%s: %s", call["name"], exc)
        return
    if scenario == "http-standard-headers":
        if tools:
            client.call_tool(tools[0].name, {})
        resources = client.list_resources()
        if resources:
            client.read_resource(resources[0].uri)
        prompts = client.list_prompts()
        if prompts:
            client.get_prompt(prompts[0].name, {})
        return
    if scenario == "http-invalid-tool-headers":
        for t in tools:  # the tools mcpsync kept: the malformed ones were dropped when listed
            client.call_tool(t.name, sample_arguments(t.input_schema))
        return
    if tools:
        name = "test-tool" if any(t.name == "test-tool" for t in tools) else tools[0].name
        client.call_tool(name, {"a": 2, "b": 3} if name != "test-tool" else {})


def sample_arguments(schema: Mapping[str, Any]) -> dict[str, Any]:
    """A value of the declared type for each required property of a tool's input schema."""
    samples = {"string": "us-west1", "integer": 1, "number": 1.5, "boolean": True, "array": [], "object": {}}
    props = schema.get("properties") or {}
    return {
        name: samples.get(str((props.get(name) or {}).get("type")), "x")
        for name in schema.get("required") or ()
    }


def exercise_skills(scenario: str, client: Client) -> None:
    """Skills (SEP-2640): list, read each skill's entry file through the verifying API."""
    skills = client.list_skills()
    if scenario == "sep-2640-client-no-prefetch":
        return
    for info in skills:
        skill = client.read_skill(info)  # reads SKILL.md; SkillIntegrityError if it is not as declared
        for path in skill.files:  # then what a host reads as the instructions lead it there
            skill.read(path)


def exercise_own(scenario: str, client: Client, ctx: Mapping[str, Any]) -> None:
    """mcpsync's own scenarios (tests/conformance/own_scenarios.py): what a user of the
    public API does. Skills: list them, load each (and each skill named by URI), read its
    files; tools: make the calls, each within its timeout. A refusal is logged, not fatal:
    the scenario judges the traffic."""
    if "sep-2640" in scenario:
        try:
            targets: list[Any] = list(client.list_skills())
        except MCPError as exc:
            logging.info("list_skills: %s", exc)
            targets = []
        for target in [*targets, *ctx.get("skillUris", [])]:
            try:
                skill = client.read_skill(target)
                if ctx.get("readFiles", True):
                    for path in skill.walk():
                        skill.read(path)
            except MCPError as exc:
                logging.info("skill %s: %s", getattr(target, "uri", target), exc)
        return
    client.list_tools()
    for call in ctx.get("toolCalls", []):
        try:
            client.call_tool(call["name"], call.get("arguments") or {}, timeout=call.get("timeout", TIMEOUT))
        except MCPError as exc:
            logging.info("%s: %s", call["name"], exc)


def main(argv: list[str]) -> int:
    logging.basicConfig(level=logging.INFO, stream=sys.stderr, format="%(levelname)s %(name)s: %(message)s")
    url = argv[-1]
    scenario = os.environ.get("MCP_CONFORMANCE_SCENARIO", "")
    version = os.environ.get("MCP_CONFORMANCE_PROTOCOL_VERSION")
    ctx = context()
    options: dict[str, Any] = {"mode": mode_for(version), "sse_fallback": False, "client_info": {"name": "mcpsync-conformance", "version": "1.0.0"}}
    if scenario == "elicitation-sep1034-client-defaults":
        options["elicitation_handler"] = apply_defaults
    elif scenario == "sep-2322-client-request-state":
        options["elicitation_handler"] = accept_all
    elif scenario.startswith("mcpsync/"):
        answer = ctx.get("elicitation") or {}
        options["elicitation_handler"] = lambda params: {"action": "accept", "content": dict(answer)}
    auth: OAuth | None = None
    if scenario.startswith("auth/"):
        auth = oauth_for(scenario, url, ctx)
        options["auth"] = auth
    try:
        with Client.http(url, **options) as client:
            exercise(scenario, client, ctx)
    except Exception as exc:  # the exit status is the report; the reason goes to stderr
        logging.error("%s failed: %s: %s", scenario, type(exc).__name__, exc)
        return 1
    finally:
        if auth is not None:
            auth.close()
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
