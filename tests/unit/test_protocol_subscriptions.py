"""Intake of listen-stream notifications (demultiplexing by subscriptionId) and callback
isolation, driven through the mixin's notification hook without a peer."""

from __future__ import annotations

import logging

from mcpsync._protocol import SUBSCRIPTION_ID, ProtocolMixin, _Attempt


class Stub(ProtocolMixin):
    name = "stub"
    sampling_handler = None
    elicitation_handler = None
    roots = None
    logging_handler = None
    log_level = None
    _server_logger = logging.getLogger("mcpsync.server.stub")


def _meta(sid):
    return {"_meta": {SUBSCRIPTION_ID: sid}}


def test_only_acknowledged_streams_and_kinds_are_admitted():
    c = Stub()
    st = c._pstate()
    got: list[str] = []
    st.subs["a://1"] = [got.append]
    st.list_cbs["tools"].append(got.append)
    st.list_cbs["prompts"].append(got.append)
    attempt = _Attempt({"toolsListChanged": True, "resourceSubscriptions": ["a://1"]})
    st.awaiting.append(attempt)
    # the server honoured tools and a://1, not prompts
    c._protocol_notification(
        "notifications/subscriptions/acknowledged",
        {"notifications": {"toolsListChanged": True, "resourceSubscriptions": ["a://1"]}, **_meta(7)},
    )
    assert attempt.id == 7 and attempt.acked.is_set() and st.acks == 1
    c._protocol_notification("notifications/resources/updated", {"uri": "a://1", **_meta(7)})
    c._protocol_notification("notifications/resources/updated", {"uri": "a://1", **_meta(99)})  # unknown stream
    c._protocol_notification("notifications/prompts/list_changed", _meta(7))  # not acknowledged
    c._protocol_notification("notifications/tools/list_changed", _meta(7))
    assert got == ["a://1", "tools"]


def test_a_raising_callback_harms_no_other(caplog):
    c = Stub()
    st = c._pstate()
    got: list[str] = []

    def bad(_):
        raise ValueError("nope")

    st.subs["a://1"] = [bad, got.append]
    with caplog.at_level(logging.ERROR, logger="mcpsync.client"):
        c._protocol_notification("notifications/resources/updated", {"uri": "a://1"})  # legacy: no subscriptionId
    assert got == ["a://1"]
    assert any("raised" in r.getMessage() for r in caplog.records)


def test_updates_invalidate_cached_reads():
    c = Stub()
    st = c._pstate()
    st.cache[("anonymous", "resources/read", '{"uri": "a://1"}')] = (1e18, "old")
    st.cache[("anonymous", "resources/read", '{"uri": "a://2"}')] = (1e18, "keep")
    st.cache[(None, "prompts/list", "{}")] = (1e18, "old")
    c._protocol_notification("notifications/resources/updated", {"uri": "a://1"})
    assert [k[2] for k in st.cache if k[1] == "resources/read"] == ['{"uri": "a://2"}']
    c._protocol_notification("notifications/prompts/list_changed", None)
    assert not any(k[1] == "prompts/list" for k in st.cache)


def test_log_messages_go_to_the_per_server_logger(caplog):
    c = Stub()
    with caplog.at_level(logging.DEBUG, logger="mcpsync.server.stub"):
        c._protocol_notification("notifications/message", {"level": "warning", "logger": "db", "data": "slow"})
    [rec] = [r for r in caplog.records if r.name.startswith("mcpsync.server.stub")]
    assert rec.name == "mcpsync.server.stub.db" and rec.levelno == logging.WARNING and rec.getMessage() == "slow"
