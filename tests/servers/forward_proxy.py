"""A real HTTP forward proxy for the proxy tests: Debian's tinyproxy (tests/setup/55-tinyproxy.sh),
run as the current user in the foreground on 127.0.0.1 with its config in a temporary
directory, stopped (by its own pid) when the context ends. Not a test module.

It forwards plain requests (adding ``Via: 1.1 tinyproxy``) and tunnels ``CONNECT`` to any
port (no ``ConnectPort`` line); with ``auth=(user, password)`` it asks for Basic
credentials (407 without them). Its log names every request it carried.
"""

from __future__ import annotations

import shutil
import subprocess
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Iterator

from tests.servers.balancers import _stop
from tests.servers.http_support import free_port, wait_port

__all__ = ["TinyProxy", "tinyproxy", "tinyproxy_binary"]


def tinyproxy_binary() -> str | None:
    return shutil.which("tinyproxy") or next((p for p in ("/usr/bin/tinyproxy", "/usr/sbin/tinyproxy") if Path(p).exists()), None)


@dataclass(frozen=True)
class TinyProxy:
    port: int
    log: Path

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def requests(self) -> list[str]:
        """The request lines it carried (``GET http://… HTTP/1.1``, ``CONNECT host:port HTTP/1.1``)."""
        text = self.log.read_text(errors="replace") if self.log.exists() else ""
        return [line.split("): ", 1)[1] for line in text.splitlines() if "Request (file descriptor" in line]


@contextmanager
def tinyproxy(tmp: Path, *, auth: tuple[str, str] | None = None) -> Iterator[TinyProxy]:
    exe = tinyproxy_binary()
    if exe is None:
        raise RuntimeError("tinyproxy is not installed (tests/setup/55-tinyproxy.sh)")
    tmp.mkdir(parents=True, exist_ok=True)
    port = free_port()
    log = tmp / "tinyproxy.log"
    lines = [f"Port {port}", "Listen 127.0.0.1", "Timeout 60", "LogLevel Connect", f'LogFile "{log}"',
             "MaxClients 64", "Allow 127.0.0.1"]
    if auth is not None:
        lines.append(f"BasicAuth {auth[0]} {auth[1]}")
    conf = tmp / "tinyproxy.conf"
    conf.write_text("\n".join(lines) + "\n")
    proc = subprocess.Popen([exe, "-d", "-c", str(conf)], stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                            stderr=subprocess.PIPE, start_new_session=True)
    try:
        wait_port(port, proc, 20.0)
        yield TinyProxy(port, log)
    finally:
        _stop(proc)
        if proc.stderr:
            proc.stderr.close()
