"""Servers live in process groups of their own and end with the client, however it ends.

Real wrapper trees: ``npm exec`` → ``sh -c`` → ``node`` (what ``npx`` runs), and ``sh -c`` →
``node`` where node keeps running after its stdin ends (a server busy with its own work:
``tests/servers/linger.cjs``). The client runs in a driver process of its own session,
as a terminal's foreground job would: the test sends SIGINT to the driver's whole group
(what Ctrl-C does) or SIGKILLs the driver. Every process of the server's tree is found in
``/proc`` (its session) and must be gone afterwards (polled, bounded).
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from mcpsync import Client, Timeouts
from tests.conftest import NPM_PREFIX, ROOT, SERVERS, everything_command
from tests.servers.chaos_support import wait_gone

pytestmark = [
    pytest.mark.timeout(120),
    pytest.mark.skipif(not sys.platform.startswith("linux"), reason="process trees are read from Linux's /proc"),
]

LINGER = SERVERS / "linger.cjs"
#: what a driver prints before the test acts on it, and the bound of each wait
BOUND = 30.0


def session_members(sid: int) -> list[int]:
    """Every live process whose session is ``sid`` (a server's whole tree)."""
    out = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            fields = (entry / "stat").read_bytes().rsplit(b")", 1)[1].split()
        except OSError:
            continue
        if int(fields[3]) == sid and fields[0] != b"Z":
            out.append(int(entry.name))
    return out


def lingering_tree() -> tuple[str, list[str]]:
    """``sh -c`` → ``node`` (server-everything) that outlives its stdin: only a signal ends
    node, and SIGTERM to ``sh`` alone would leave it running."""
    node = " ".join(everything_command("stdio")).replace("node ", f"node --require {LINGER} ", 1)
    return "sh", ["-c", f"{node}; echo server-ended >&2"]


def npm_exec(package: str) -> tuple[str, list[str]]:
    bin_ = NPM_PREFIX / "node_modules" / ".bin" / package
    if not bin_.exists():
        pytest.skip(f"{package} is not installed (tests/setup/10-npm.sh)")
    return "npm", ["exec", "--offline", "--prefix", str(NPM_PREFIX), "--", package]


def start_driver(body: str, *args: str) -> subprocess.Popen[str]:
    """Run ``body`` in a Python process of its own session (a terminal's foreground job), Ctrl-C
    raising KeyboardInterrupt in it as in a terminal's job, whatever this process inherited (a
    suite started as a background job of a script starts with SIGINT ignored, which Python keeps)."""
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")])}
    code = "import signal\nsignal.signal(signal.SIGINT, signal.default_int_handler)\n" + textwrap.dedent(body)
    return subprocess.Popen(
        [sys.executable, "-c", code, *args], cwd=ROOT, env=env, text=True,
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, start_new_session=True,
    )


def read_line(proc: subprocess.Popen[str], tag: str) -> dict:
    assert proc.stdout is not None
    for line in proc.stdout:  # the driver prints within BOUND (pytest's timeout guards a hang)
        if line.startswith(tag + " "):
            return json.loads(line[len(tag) + 1:])
    proc.wait(10)
    pytest.fail(f"the driver ended before {tag}: {proc.stderr.read()[-3000:] if proc.stderr else ''}")


def end(proc: subprocess.Popen[str]) -> str:
    try:
        _out, err = proc.communicate(timeout=BOUND)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        _out, err = proc.communicate(timeout=10)
    return err


def test_close_ends_the_whole_tree_of_a_wrapper():
    """``close()`` ends node under ``sh -c`` though node ignores EOF and SIGTERM reaches
    only ``sh`` when sent to the child alone."""
    command, args = lingering_tree()
    client = Client.stdio(command, args, name="tree", timeouts=Timeouts(close=1.0))
    try:
        assert client.call_tool("echo", {"message": "hi"}, timeout=BOUND).text == "Echo: hi"
        leader = client.diagnostics().pids[0]
        tree = session_members(leader)
        assert len(tree) >= 2, tree  # sh and node, in the server's own session
        assert os.getsid(leader) == leader != os.getsid(0)
    finally:
        client.close()
    assert wait_gone(tree, 10.0) == [], "a process of the server's tree outlived close()"


def test_close_ends_an_npm_exec_tree():
    command, args = npm_exec("mcp-server-everything")
    client = Client.stdio(command, args, name="npx-style", timeouts=Timeouts(close=1.0, start=90))
    try:
        assert client.call_tool("echo", {"message": "hi"}, timeout=90).text == "Echo: hi"
        tree = session_members(client.diagnostics().pids[0])
        assert len(tree) >= 3, tree  # npm exec, sh -c, node
    finally:
        client.close()
    assert wait_gone(tree, 10.0) == []


END_DRIVER = """
    import json, sys, threading
    from mcpsync import Client, Timeouts
    how = sys.argv[1]
    client = Client.stdio(sys.argv[2], sys.argv[3:], name="tree", timeouts=Timeouts(close=1.0, start=90))
    assert client.call_tool("echo", {"message": "hi"}, timeout=90).text == "Echo: hi"
    print("READY " + json.dumps({"leader": client.diagnostics().pids[0]}), flush=True)
    if how != "exit":
        threading.Event().wait(120)  # until killed, or interrupted (uncaught: the interpreter exits)
"""


@pytest.mark.parametrize("how", ["sigkill", "ctrl-c-uncaught", "exit"])
@pytest.mark.parametrize("tree", ["sh-node-lingering", "npm-exec"])
def test_the_clients_end_ends_every_tree_it_started(tree: str, how: str):
    """However the client ends: SIGKILLed (no code runs in it: its watchdog ends the groups,
    SIGTERM then SIGKILL after ``timeouts.close``), a Ctrl-C it does not catch, or an
    interpreter exit without close()."""
    command, args = lingering_tree() if tree == "sh-node-lingering" else npm_exec("mcp-server-everything")
    driver = start_driver(END_DRIVER, how, command, *args)
    try:
        leader = read_line(driver, "READY")["leader"]
        members = session_members(leader)
        assert len(members) >= 2, members
        if how == "sigkill":
            os.kill(driver.pid, signal.SIGKILL)
        elif how == "ctrl-c-uncaught":
            os.killpg(driver.pid, signal.SIGINT)
        driver.wait(BOUND)
        left = wait_gone(members, 15.0)
        assert left == [], f"processes of the server's tree outlived the client ({how}): {left}"
    finally:
        if driver.poll() is None:
            os.killpg(driver.pid, signal.SIGKILL)
        end(driver)
        for pid in session_members(leader) if "leader" in locals() else []:
            os.kill(pid, signal.SIGKILL)


CTRL_C_DRIVER = """
    import json, logging, sys, threading, time
    logging.basicConfig(level=logging.WARNING, stream=sys.stderr)
    from mcpsync import Client, Timeouts
    client = Client.stdio(sys.argv[1], sys.argv[2:], name="thinking", timeouts=Timeouts(start=90))

    def think(n):
        args = {"thought": f"thought {n}", "thoughtNumber": n, "totalThoughts": 5, "nextThoughtNeeded": True}
        return json.loads(client.call_tool("sequentialthinking", args, timeout=90).text)["thoughtHistoryLength"]

    history = [think(1), think(2)]
    ready = {"leader": client.diagnostics().pids[0], "history": history}
    try:
        print("READY " + json.dumps(ready), flush=True)
        threading.Event().wait(60)  # Ctrl-C comes here
        interrupted = False
    except KeyboardInterrupt:
        interrupted = True
    print("AFTER " + json.dumps({"interrupted": interrupted, "history": think(3),
                                 "pids": list(client.diagnostics().pids)}), flush=True)
    client.close()
"""


def test_ctrl_c_reaches_the_client_only_and_the_server_keeps_its_state():
    """A terminal's Ctrl-C (SIGINT to the foreground process group): the client gets its
    KeyboardInterrupt and stays usable; the server, in its own session, never sees the
    signal: same process, its state (sequential-thinking's history) kept."""
    command, args = npm_exec("mcp-server-sequential-thinking")
    driver = start_driver(CTRL_C_DRIVER, command, *args)
    try:
        ready = read_line(driver, "READY")
        assert ready["history"] == [1, 2]
        os.killpg(driver.pid, signal.SIGINT)  # the terminal's Ctrl-C
        after = read_line(driver, "AFTER")
        assert after["interrupted"] is True
        assert after["history"] == 3, after  # 1 would mean a new server: its history lost
        assert after["pids"] == [ready["leader"]]
    finally:
        err = end(driver)
    assert "restarted" not in err and "new process" not in err, err


INFLIGHT_DRIVER = """
    import json, sys, threading
    from mcpsync import Client
    client = Client.stdio(sys.argv[1], sys.argv[2:], name="chaos", mode="legacy")
    pid = client.call_tool("pid", timeout=30).text
    try:
        print("READY " + json.dumps({"pid": int(pid)}), flush=True)
        client.call_tool("sleep", {"seconds": 60}, timeout=90)  # Ctrl-C comes during this call
        interrupted = False
    except KeyboardInterrupt:
        interrupted = True
    print("AFTER " + json.dumps({"interrupted": interrupted, "pid": int(client.call_tool("pid", timeout=30).text),
                                 "echo": client.call_tool("echo", {"key": "k"}, timeout=30).text}), flush=True)
    client.close()
"""


def test_ctrl_c_during_a_call_leaves_the_client_usable():
    driver = start_driver(INFLIGHT_DRIVER, sys.executable, str(SERVERS / "chaos_server.py"))
    try:
        ready = read_line(driver, "READY")
        # the call is in flight once the server sleeps: give it the moment to be sent
        import time

        time.sleep(0.5)
        os.killpg(driver.pid, signal.SIGINT)
        after = read_line(driver, "AFTER")
        assert after == {"interrupted": True, "pid": ready["pid"], "echo": "k"}
    finally:
        end(driver)
    assert wait_gone([ready["pid"]], 10.0) == []
