"""Many threads hammering one shared Client: every answer reaches the thread that asked."""

from __future__ import annotations

import pytest

from mcpsync import Client
from tests.conftest import everything_command, server_command
from tests.helpers import hammer

pytestmark = pytest.mark.timeout(180)


@pytest.mark.parametrize("mode", ["legacy", "modern"])
def test_32_threads_x_200_calls_on_one_client(mode):
    cmd = server_command("raw_server.py")
    with Client.stdio(cmd[0], cmd[1:], mode=mode) as c:
        hammer(c, threads=32, calls=200, expect=lambda m: m)
        primary = c.diagnostics().primary
        assert primary is not None and primary.pending == 0
        assert primary.dropped == 0


def test_16_threads_against_server_everything():
    cmd = everything_command("stdio")
    with Client.stdio(cmd[0], cmd[1:]) as c:
        hammer(c, threads=16, calls=50)
