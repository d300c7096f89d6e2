"""A Ctrl-C between a message's take and its keeping loses nothing (the transports whose
messages arrive through a queue: Streamable HTTP, HTTP+SSE, WebSocket, gRPC, in-process).

CPython runs a signal handler right after a call returns, before the returned value is
stored: a reader that took a message from a queue and returned it through a call lost it
when Ctrl-C came at that instant (seen as another thread's call timing out in the HTTP
storm, ``test_http_interrupts.py``, about one run in ten). The reader now moves the next
message into the transport's ``next_message`` box with no such point between
(``_inbox.take_into``; the JSON lane's, compiled) and takes it out itself.

Each case runs in a process of its own (both builds): a thread puts numbered messages in
while SIGINT comes every ~0.2 ms and raises KeyboardInterrupt in the reading main thread,
until 300,000 were read and 30 Ctrl-Cs landed; every message must be read once, in order. (Reading through a returning call instead, as
before, lost 1 to 7 of them in each such run.)
"""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from tests.conftest import ROOT

BUILDS = {"compiled": {}, "pure": {"MCPSYNC_NO_EXTENSIONS": "1"}}

DRIVER = r'''
import json, os, signal, sys, threading, time

kind, count = sys.argv[1], int(sys.argv[2])
if kind == "inbox":
    from mcpsync.transports._inbox import Inbox
    inbox = Inbox()
    put, box, wait = inbox.put, inbox.first, inbox.fill
else:  # the Streamable HTTP transport's own queue, read as the dispatcher's leader reads it
    from mcpsync.transports.streamable_http import StreamableHTTPTransport
    t = StreamableHTTPTransport("http://127.0.0.1:9/mcp")
    put, box, wait = t._put, t.next_message, t.wait_first

armed = [False]
def on_sigint(signum, frame):
    if armed[0]:
        raise KeyboardInterrupt
signal.signal(signal.SIGINT, on_sigint)
done = threading.Event()
main = threading.main_thread().ident

seen = []

def producer():  # (never far ahead of the reader)
    i = 0
    while not done.is_set():
        if i - len(seen) < 10000:
            put(b"%d" % i)
            i += 1
        else:
            time.sleep(0.0005)

def storm():
    while not done.is_set():
        signal.pthread_kill(main, signal.SIGINT)
        time.sleep(0.0002)

threading.Thread(target=producer, daemon=True).start()
threading.Thread(target=storm, daemon=True).start()
interrupts = 0
keep = seen.append  # (it keeps before the check for a signal that follows its call)
ends = time.monotonic() + 60
armed[0] = True
while (len(seen) < count or interrupts < 30) and time.monotonic() < ends:
    try:
        while len(seen) < count or interrupts < 30:
            if wait(1.0):
                data = box[0]
                box[0] = None
                keep(data)
    except KeyboardInterrupt:
        interrupts += 1
armed[0] = False
done.set()
wrong = [[i, data.decode()] for i, data in enumerate(seen) if data != b"%d" % i][:5]
print(json.dumps({"got": len(seen), "interrupts": interrupts, "wrong": wrong}))
'''


@pytest.mark.parametrize("build", list(BUILDS))
@pytest.mark.parametrize("kind", ["inbox", "http"])
def test_no_message_is_lost_to_a_ctrl_c_between_its_take_and_its_keeping(kind: str, build: str) -> None:
    count = 300_000
    env = {**os.environ, **BUILDS[build], "PYTHONPATH": os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")])}
    proc = subprocess.run([sys.executable, "-c", DRIVER, kind, str(count)], cwd=ROOT, env=env,
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr[-3000:]
    report = json.loads(proc.stdout.strip().splitlines()[-1])
    assert report["interrupts"] >= 30 and report["got"] >= count, report  # (Ctrl-Cs landed while reading)
    assert report["wrong"] == [], report  # each once, in order
