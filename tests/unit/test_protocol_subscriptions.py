"""Intake of listen-stream notifications (demultiplexing by subscriptionId) and callback
isolation, driven through the Client's notification hook without a peer (the client
never connects)."""

from __future__ import annotations

import logging

import pytest

from mcpsync import Client
from mcpsync._subscriptions import SUBSCRIPTION_ID, _Attempt


@pytest.fixture
def c():
    client = Client(lambda: None, name="stub")  # never connected: the factory is never called
    yield client
    client.close()


def _meta(sid):
    return {"_meta": {SUBSCRIPTION_ID: sid}}


def test_only_acknowledged_streams_and_kinds_are_admitted(c):
    st = c._subscriptions
    got: list[str] = []
    st.subs["a://1"] = [got.append]
    st.list_cbs["tools"].append(got.append)
    st.list_cbs["prompts"].append(got.append)
    attempt = _Attempt({"toolsListChanged": True, "resourceSubscriptions": ["a://1"]})
    st.awaiting.append(attempt)
    # the server honoured tools and a://1, not prompts
    c._handlers.notification(
        "notifications/subscriptions/acknowledged",
        {"notifications": {"toolsListChanged": True, "resourceSubscriptions": ["a://1"]}, **_meta(7)},
    )
    assert attempt.id == 7 and attempt.acked.is_set() and st.acks == 1
    c._handlers.notification("notifications/resources/updated", {"uri": "a://1", **_meta(7)})
    c._handlers.notification("notifications/resources/updated", {"uri": "a://1", **_meta(99)})  # unknown stream
    c._handlers.notification("notifications/prompts/list_changed", _meta(7))  # not acknowledged
    c._handlers.notification("notifications/tools/list_changed", _meta(7))
    assert got == ["a://1", "tools"]


def test_a_raising_callback_harms_no_other(c, caplog):
    st = c._subscriptions
    got: list[str] = []

    def bad(_):
        raise ValueError("nope")

    st.subs["a://1"] = [bad, got.append]
    with caplog.at_level(logging.ERROR, logger="mcpsync.client"):
        c._handlers.notification("notifications/resources/updated", {"uri": "a://1"})  # legacy: no subscriptionId
    assert got == ["a://1"]
    assert any("raised" in r.getMessage() for r in caplog.records)


def test_updates_invalidate_cached_reads(c):
    rc = c._results
    gen = rc.generation
    for uri in ("a://1", "a://2"):
        rc.put("anonymous", "resources/read", {"uri": uri}, uri, ttl_ms=1e9, scope=None, generation=gen)
    rc.put("anonymous", "prompts/list", None, "old", ttl_ms=1e9, scope="public", generation=gen)
    # as the notification is read (Handlers.notice, before the worker's lane: issue 31)
    c._handlers.notice("notifications/resources/updated", {"uri": "a://1"})
    assert rc.get("anonymous", "resources/read", {"uri": "a://1"}) is None
    assert rc.get("anonymous", "resources/read", {"uri": "a://2"}) == "a://2"
    c._handlers.notice("notifications/prompts/list_changed", None)
    assert rc.get("anonymous", "prompts/list", None) is None


def test_log_messages_go_to_the_per_server_logger(c, caplog):
    with caplog.at_level(logging.DEBUG, logger="mcpsync.server.stub"):
        c._handlers.notification("notifications/message", {"level": "warning", "logger": "db", "data": "slow"})
    [rec] = [r for r in caplog.records if r.name.startswith("mcpsync.server.stub")]
    assert rec.name == "mcpsync.server.stub.db" and rec.levelno == logging.WARNING and rec.getMessage() == "slow"
