"""The input_required round driver (pure logic: answers and sends are plain functions)."""

from __future__ import annotations

import orjson
import pytest

from mcpsync import InputRequestError, ProtocolError, RemoteError
from mcpsync._mrtr import Pending, drive


def _ir(requests=None, state=None) -> bytes:
    body: dict = {"resultType": "input_required"}
    if requests is not None:
        body["inputRequests"] = requests
    if state is not None:
        body["requestState"] = state
    return orjson.dumps(body)


def test_rounds_carry_answers_and_state_until_complete():
    sent: list[dict] = []
    replies = [Pending(_ir({"b": {"method": "roots/list"}}, "s2")), "done"]

    def send(params):
        sent.append(params)
        return replies.pop(0)

    answer = lambda method, params: {"for": method}  # noqa: E731
    first = _ir({"a": {"method": "elicitation/create", "params": {"message": "?"}}}, "s1")
    params = {"name": "t", "inputResponses": {"old": 1}}
    assert drive("srv", "tools/call", params, first, answer=answer, send=send, max_rounds=4) == "done"
    assert sent == [
        {"name": "t", "inputResponses": {"a": {"for": "elicitation/create"}}, "requestState": "s1"},
        {"name": "t", "inputResponses": {"b": {"for": "roots/list"}}, "requestState": "s2"},
    ]


def test_too_many_rounds_and_empty_requests_are_errors():
    again = lambda params: Pending(_ir(state="x"))  # noqa: E731
    with pytest.raises(InputRequestError, match="after 2 rounds"):
        drive("srv", "tools/call", {}, _ir(state="x"), answer=lambda m, p: {}, send=again, max_rounds=2)
    with pytest.raises(ProtocolError, match="neither inputRequests nor requestState"):
        drive("srv", "tools/call", {}, _ir(), answer=lambda m, p: {}, send=again, max_rounds=2)


def test_an_unanswerable_request_keeps_its_code():
    def refuse(method, params):
        raise RemoteError("no sampling here", code=-32601)

    with pytest.raises(InputRequestError) as info:
        drive("srv", "prompts/get", {}, _ir({"k": {"method": "sampling/createMessage"}}), answer=refuse,
              send=lambda p: "unused", max_rounds=2)
    assert info.value.code == -32601 and "sampling/createMessage" in info.value.message
