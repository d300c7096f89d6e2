"""Fair waiting against a real server (issue 16, symptom 10).

64 threads share one stdio session (``PoolLimits(min=1, max=1, max_in_flight=8)``): 56
of them wait for an in-flight slot at any moment. Before the fix a returning thread took
its slot back ahead of the queue: with 64 x 1,000 calls the median call took 0.5 ms and
the slowest about 4 s, nearly the whole run.
"""

from __future__ import annotations

import statistics
import threading
import time

import pytest

from mcpsync import Client, PoolLimits
from tests.conftest import server_command

RAW = server_command("raw_server.py")
THREADS = 64
CALLS = 1000


@pytest.mark.slow
def test_sixty_four_threads_on_one_session_are_served_fairly() -> None:
    client = Client.stdio(RAW[0], RAW[1:], pool=PoolLimits(min=1, max=1, max_in_flight=8))
    go = threading.Event()
    lock = threading.Lock()
    durations: list[float] = []
    failures: list[str] = []
    mismatched: list[tuple[str, str]] = []
    with client:
        client.call_tool("echo", {"message": "warm-up"})  # the session exists before the race

        def worker(n: int) -> None:
            mine: list[float] = []
            go.wait(10)
            for k in range(CALLS):
                message = f"{n}:{k}"
                t0 = time.perf_counter()
                try:
                    answer = client.call_tool("echo", {"message": message}).content[0].text
                except Exception as exc:  # noqa: BLE001 - counted and reported below
                    with lock:
                        failures.append(f"{n}:{k} {exc!r}")
                    continue
                finally:
                    mine.append(time.perf_counter() - t0)
                if answer != message:
                    with lock:
                        mismatched.append((message, answer))
            with lock:
                durations.extend(mine)

        threads = [threading.Thread(target=worker, args=(n,), daemon=True) for n in range(THREADS)]
        for t in threads:
            t.start()
        go.set()
        for t in threads:
            t.join(120)
        assert not any(t.is_alive() for t in threads), "a worker is still running after 120 s"
        stats = client.pool_stats()
    assert failures == [], f"{len(failures)} calls lost, e.g. {failures[:3]}"
    assert mismatched == [], f"answers reached the wrong caller: {mismatched[:3]}"
    assert len(durations) == THREADS * CALLS
    median, worst = statistics.median(durations), max(durations)
    assert worst <= 50 * median + 1.0, f"slowest call {worst * 1e3:.0f} ms, median {median * 1e3:.2f} ms"
    assert stats.created == 1 and stats.timeouts == 0 and stats.in_use == 0
    assert stats.borrowed == stats.returned >= THREADS * CALLS
