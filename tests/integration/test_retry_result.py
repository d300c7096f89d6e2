"""A rate limit inside a result, and transient error codes, retried through the retry
policy (``RetryPolicy(retry_result=..., transient_codes=...)``), against an official-SDK
server that turns calls away on demand (tests/servers/sdk_busy_server.py), both eras."""

from __future__ import annotations

import re
import time
from typing import Any

import pytest

from mcpsync import BreakerPolicy, BreakerState, CallToolResult, Client, RemoteError, RetryPolicy
from tests.conftest import server_command

pytestmark = pytest.mark.timeout(90)


def retry_after(result: Any) -> float | None:
    """The hook a user writes: a tool's "rate limited, retry after N s" is transient."""
    if isinstance(result, CallToolResult) and result.is_error:
        m = re.search(r"retry after ([0-9.]+) s", result.text)
        if m:
            return float(m.group(1))
    return None


def busy_client(mode: str, **options: Any) -> Client:
    cmd = server_command("sdk_busy_server.py")
    return Client.stdio(cmd[0], cmd[1:], mode=mode, **options)


def calls(c: Client, key: str) -> int:
    return int(c.call_tool("calls", {"key": key}).text)


@pytest.mark.parametrize("mode", ["modern", "legacy"])
def test_a_rate_limited_result_is_retried_no_sooner_than_it_asks(mode: str) -> None:
    with busy_client(mode, retry=RetryPolicy(retry_result=retry_after, backoff=0.01)) as c:
        c.list_tools()  # the annotations say limited is safe to repeat
        began = time.monotonic()
        result = c.call_tool("limited", {"key": "a", "times": 2}, timeout=30)
        assert not result.is_error and result.text == "ok after 3 calls"
        assert time.monotonic() - began >= 0.2  # two waits of at least the 0.1 s it asked for
        assert calls(c, "a") == 3


@pytest.mark.parametrize("mode", ["modern", "legacy"])
def test_when_the_retries_run_out_the_last_result_stands(mode: str) -> None:
    with busy_client(mode, retry=RetryPolicy(retry_result=retry_after, retries=2, backoff=0.01)) as c:
        result = c.call_tool("limited", {"key": "b", "times": 99}, timeout=30)
        assert result.is_error and "rate limited" in result.text
        assert calls(c, "b") == 3  # the first attempt and two retries


def test_only_calls_safe_to_repeat_are_retried() -> None:
    with busy_client("modern", retry=RetryPolicy(retry_result=retry_after, backoff=0.01)) as c:
        c.list_tools()
        assert c.call_tool("unsafe_limited", {"key": "c", "times": 1}).is_error
        assert calls(c, "c") == 1
        assert not c.call_tool("unsafe_limited", {"key": "d", "times": 1}, retry_safe=True).is_error
        assert calls(c, "d") == 2


def test_without_the_hook_results_are_never_retried() -> None:
    with busy_client("modern") as c:
        assert c.call_tool("limited", {"key": "e", "times": 1}).is_error
        assert calls(c, "e") == 1


@pytest.mark.parametrize("mode", ["modern", "legacy"])
def test_transient_codes_of_the_policy_are_retried_and_counted(mode: str) -> None:
    policy = RetryPolicy(transient_codes={-32000}, backoff=0.01, retries=1)
    breaker = BreakerPolicy(threshold=3, window=60, cooldown=60)
    with busy_client(mode, retry=policy, breaker=breaker) as c:
        c.list_tools()
        assert c.call_tool("busy", {"key": "f", "times": 1}).text == "ok after 2 calls"
        with pytest.raises(RemoteError) as info:
            c.call_tool("busy", {"key": "g", "times": 99})
        assert info.value.code == -32000 and len(info.value.retry_history) == 2
        assert c.breaker_state is BreakerState.OPEN  # three busy answers: the server is unwell
    with busy_client(mode) as c:  # without the codes: an answer, raised at once, never counted
        with pytest.raises(RemoteError):
            c.call_tool("busy", {"key": "h", "times": 1})
        assert calls(c, "h") == 1 and c.breaker_state is BreakerState.CLOSED
