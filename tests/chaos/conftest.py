"""The chaos suites run with the other CPU busy: a busy loop in a child process for each
test's duration, so that what they assert holds on a loaded machine, not only on an idle
one (``MCPSYNC_CHAOS_LOAD=0`` turns the load off, e.g. to compare)."""

from __future__ import annotations

import os
import subprocess
import sys
from typing import Iterator

import pytest


@pytest.fixture(autouse=True)
def busy_cpu() -> Iterator[None]:
    if os.environ.get("MCPSYNC_CHAOS_LOAD", "1") == "0":
        yield
        return
    # bounded in time: the loop ends by itself after 10 minutes if the test's teardown never runs
    loop = subprocess.Popen(
        [sys.executable, "-c", "import time\nend = time.monotonic() + 600\nwhile time.monotonic() < end: pass"],
        stdin=subprocess.DEVNULL,
    )
    try:
        yield
    finally:
        loop.kill()
        loop.wait(10)
