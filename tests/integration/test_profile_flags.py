"""The profile flags the Client enforces: metrics on or off, push updates on or off."""

from __future__ import annotations

import sys

import pytest

from mcpsync import Client, RemoteError

pytestmark = pytest.mark.timeout(60)

DEMO = [sys.executable, "-m", "mcpsync.server.demo"]


def test_professional_records_no_metrics_and_refuses_push_updates():
    with Client.stdio(DEMO[0], DEMO[1:], profile="professional") as c:
        assert c.call_tool("echo", {"message": "x"}).text == "x"
        assert len(c.metrics()) == 0
        with pytest.raises(RemoteError) as info:
            c.subscribe("demo://about", lambda uri: None)
        assert info.value.code == -32601 and "push updates are off" in str(info.value)


def test_enterprise_records_metrics_and_allows_subscriptions():
    with Client.stdio(DEMO[0], DEMO[1:], profile="enterprise") as c:
        assert c.call_tool("echo", {"message": "x"}).text == "x"
        snap = c.metrics()
        assert snap[c.name].tools["echo"].successes == 1
        assert c.push_updates is True


def test_a_single_setting_still_overrides_the_profile():
    with Client.stdio(DEMO[0], DEMO[1:], profile="professional", metrics=True) as c:
        c.call_tool("echo", {"message": "x"})
        assert c.metrics()[c.name].tools["echo"].calls == 1
