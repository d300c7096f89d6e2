"""The shared test helpers keep their promises: bounded, and loud when something is wrong."""

from __future__ import annotations

import os
import threading
import time
from pathlib import Path

import pytest

from mcpsync import Client, RemoteError, RequestTimeout
from tests.helpers import hammer, run_in_child, scripted_server, wait_until


def test_wait_until_returns_what_happened_within_its_bound() -> None:
    assert wait_until(lambda: True, 0)
    began = time.monotonic()
    assert not wait_until(lambda: False, 0.2)
    assert time.monotonic() - began < 5  # bounded (generous margin for a loaded machine)


def test_wait_until_wakes_on_the_event() -> None:
    flag: list[int] = []
    changed = threading.Event()
    threading.Timer(0.05, lambda: (flag.append(1), changed.set())).start()
    assert wait_until(lambda: flag, 10, interval=60.0, event=changed)  # the event ends the long pause


@pytest.mark.skipif(not hasattr(os, "fork"), reason="needs fork")
def test_run_in_child_answers_hangs_and_raises() -> None:
    assert run_in_child(lambda: str(os.getpid()).encode()) != str(os.getpid()).encode()
    assert run_in_child(lambda: (time.sleep(30), b"late")[1], timeout=0.3) == b"hung"

    def boom() -> bytes:
        raise RuntimeError("in the child")

    assert run_in_child(boom) == b""


def test_hammer_notices_an_answer_that_went_astray() -> None:
    hammer(ask=lambda msg: f"Echo: {msg}", threads=4, calls=3)
    with pytest.raises(AssertionError, match="got"):
        hammer(ask=lambda msg: "Echo: someone else's", threads=2, calls=1)


def test_scripted_server_answers_stays_silent_and_refuses(tmp_path: Path) -> None:
    body = '''
def answer(method, params):
    if method == "tools/call":
        return {"content": [{"type": "text", "text": params["arguments"]["message"]}]}
    if method == "tools/list":
        raise Silent
    return None
'''
    command, args = scripted_server(tmp_path, body, name="tiny")
    with Client.stdio(command, args, mode="legacy") as client:
        assert client.server_info.name == "tiny"
        assert client.call_tool("echo", {"message": "hi"}, validate=False, task=False).text == "hi"
        with pytest.raises(RemoteError) as info:
            client.get_prompt("p", {}, timeout=5)
        assert info.value.code == -32601
        with pytest.raises(RequestTimeout):
            client.list_tools(timeout=0.5)
