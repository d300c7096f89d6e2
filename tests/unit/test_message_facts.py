"""The facts the dispatcher hands a transport with each message (issue 17), and the one
table of methods that are safe to send again."""

from __future__ import annotations

import msgspec

from mcpsync._channel import META_VERSION, SAFE_METHODS, MessageFacts, message_facts

MODERN = {META_VERSION: "2026-07-28"}


def test_tools_call_facts_name_the_tool_and_carry_the_headers_given() -> None:
    raw = msgspec.Raw(b'{"a": 1}')
    headers = {"Mcp-Param-A": "1"}  # computed by the tools layer, not from the arguments
    facts = message_facts(7, "tools/call", {"name": "add", "arguments": raw, "_meta": MODERN}, headers=headers)
    assert facts == MessageFacts(7, "tools/call", modern_version="2026-07-28", name="add", headers=headers)
    assert facts.is_request and not facts.safe_to_resend
    assert message_facts(7, "tools/call", {"name": "add", "arguments": raw}).headers is None


def test_undecoded_meta_is_decoded_once_for_the_version() -> None:
    meta = msgspec.json.encode(MODERN)
    facts = message_facts(1, "resources/read", {"uri": "file:///x", "_meta": msgspec.Raw(meta)}, msgspec.json.decode)
    assert facts is not None
    assert (facts.modern_version, facts.name, facts.safe_to_resend) == ("2026-07-28", "file:///x", True)


def test_the_same_undecoded_meta_is_read_once_and_a_new_one_again() -> None:
    decoded: list[bytes] = []

    def decode(raw: msgspec.Raw) -> object:
        decoded.append(bytes(raw))
        return msgspec.json.decode(raw)

    modern = msgspec.Raw(msgspec.json.encode(MODERN))  # a session's _meta: one object, call after call
    for _ in range(3):
        facts = message_facts(1, "tools/call", {"name": "t", "_meta": modern}, decode)
        assert facts is not None and facts.modern_version == "2026-07-28"
    assert len(decoded) == 1
    other = msgspec.Raw(msgspec.json.encode({META_VERSION: "2027-01-01"}))  # another value: read
    facts = message_facts(2, "tools/call", {"name": "t", "_meta": other}, decode)
    assert facts is not None and facts.modern_version == "2027-01-01"
    plain = msgspec.Raw(b'{"progressToken": 1}')  # no version: a legacy request
    facts = message_facts(3, "tools/call", {"name": "t", "_meta": plain}, decode)
    assert facts is not None and facts.modern_version is None
    assert len(decoded) == 3


def test_legacy_notification_and_cancel() -> None:
    facts = message_facts(None, "notifications/cancelled", {"requestId": 4, "reason": "x"})
    assert facts is not None
    assert (facts.modern_version, facts.cancels, facts.is_request) == (None, 4, False)
    assert message_facts(3, "ping", None) == MessageFacts(3, "ping", safe_to_resend=True)
    assert message_facts(3, "ping", ["not", "a", "mapping"]) is None


def test_one_table_of_methods_safe_to_resend() -> None:
    from mcpsync import _session
    from mcpsync.transports import streamable_http

    assert _session.SAFE_METHODS is SAFE_METHODS
    assert not hasattr(streamable_http, "_MAY_HAVE_EFFECTS")
    assert "tools/call" not in SAFE_METHODS and "tasks/cancel" not in SAFE_METHODS
    assert {"tools/list", "resources/read", "completion/complete"} <= SAFE_METHODS


def test_a_reissued_request_is_spliced_not_decoded() -> None:
    from mcpsync._messages import Request, encode
    from mcpsync.transports._http_messages import reissued

    body = encode(Request("2.0", 7, "tools/list", {"cursor": "c"}))
    again = reissued(body, 7, "mcpsync-reissue-1")
    assert msgspec.json.decode(again) == {"jsonrpc": "2.0", "id": "mcpsync-reissue-1", "method": "tools/list", "params": {"cursor": "c"}}
    other = b'{"method":"ping","id":7,"jsonrpc":"2.0"}'  # not the dispatcher's shape: rewritten
    assert msgspec.json.decode(reissued(other, 7, 8)) == {"method": "ping", "id": 8, "jsonrpc": "2.0"}


def test_tasks_requests_name_their_task() -> None:
    """SEP-2663: ``tasks/get|update|cancel`` carry ``Mcp-Name: <taskId>`` (a balancer routes on it)."""
    for method in ("tasks/get", "tasks/update", "tasks/cancel"):
        facts = message_facts(5, method, {"taskId": "t-42", "_meta": MODERN})
        assert facts is not None and (facts.modern_version, facts.name) == ("2026-07-28", "t-42")
    assert message_facts(5, "tasks/get", {"taskId": 42, "_meta": MODERN}).name is None  # not a string: no header
