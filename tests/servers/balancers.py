"""Real load balancers (nginx, HAProxy) and SDK server replicas for the scale-out tests
and the scale benchmark. Not a test module.

Everything runs as the current user, on 127.0.0.1, in the foreground, with its config and
files in a temporary directory; every process is stopped (by its own pid / process group)
when its context ends. The binaries come from Debian packages (tests/setup/50-balancers.sh).
"""

from __future__ import annotations

import os
import pwd
import shutil
import signal
import subprocess
import sys
import time
from contextlib import contextmanager
from pathlib import Path
from typing import Iterator, Sequence

from tests.servers.http_support import free_port, wait_port

SERVERS = Path(__file__).resolve().parent
ROOT = SERVERS.parent.parent

#: nginx in front of MCP: HTTP/1.1 keep-alive to the upstreams, SSE unbuffered, long reads.
NGINX_PROXY = """
            proxy_http_version 1.1;
            proxy_set_header Connection "";
            proxy_set_header Host $http_host;
            proxy_buffering off;
            proxy_cache off;
            proxy_request_buffering off;
            proxy_read_timeout 3600s;
            proxy_send_timeout 3600s;
            proxy_connect_timeout 2s;
            proxy_next_upstream error timeout;
            proxy_next_upstream_tries 3;
"""


def binary(name: str) -> str | None:
    """The balancer's executable, or None when its package is not installed."""
    return shutil.which(name) or next((p for p in (f"/usr/sbin/{name}", f"/usr/bin/{name}") if os.access(p, os.X_OK)), None)


def _stop(proc: subprocess.Popen[bytes], grace: float = 5.0) -> None:
    """Stop a process we started, then its process group (the balancer's workers), by id."""
    if proc.poll() is None:
        proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(grace)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(grace)
    try:
        os.killpg(proc.pid, signal.SIGKILL)  # its own group (start_new_session): workers left behind
    except (ProcessLookupError, PermissionError):
        pass


class Replicas:
    """``n`` official-SDK Streamable HTTP servers (tests/servers/replica_server.py)."""

    def __init__(self, n: int, log: Path, *, stateless: bool, json_response: bool = False, prefix: str = "r") -> None:
        self.log = log
        self.names = [f"{prefix}{i}" for i in range(n)]
        self.ports = [free_port() for _ in range(n)]
        self.procs: list[subprocess.Popen[bytes] | None] = [None] * n
        self.flags = (["--stateless"] if stateless else []) + (["--json"] if json_response else [])

    def start(self, i: int | None = None) -> None:
        for k in range(len(self.names)) if i is None else [i]:
            argv = [sys.executable, str(SERVERS / "replica_server.py"), "--port", str(self.ports[k]),
                    "--name", self.names[k], "--log", str(self.log), *self.flags]
            proc = subprocess.Popen(argv, cwd=str(ROOT), stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                                    stderr=subprocess.DEVNULL, start_new_session=True,
                                    env={**os.environ, "PYTHONPATH": str(ROOT)})
            self.procs[k] = proc
        for k in range(len(self.names)) if i is None else [i]:
            wait_port(self.ports[k], self.procs[k], 60.0)  # type: ignore[arg-type]

    def kill(self, i: int) -> None:
        """Stop replica ``i`` at once (SIGKILL): its in-flight requests break."""
        proc = self.procs[i]
        if proc is not None and proc.poll() is None:
            proc.kill()
            proc.wait(10)

    def close(self) -> None:
        for proc in self.procs:
            if proc is not None:
                _stop(proc, 3.0)

    def __enter__(self) -> "Replicas":
        try:
            self.start()
        except BaseException:
            self.close()
            raise
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def _user_line() -> str:
    # nginx started by root would run its workers as "nobody": keep them as the current user
    return f"user {pwd.getpwuid(os.geteuid()).pw_name};" if os.geteuid() == 0 else ""


@contextmanager
def nginx(http_block: str, port: int, tmp: Path) -> Iterator[Path]:
    """Run nginx in the foreground with ``http_block`` inside ``http {}``; yields the
    access log (format: ``<upstream_addr> <Mcp-Name header> <status>`` per request)."""
    exe = binary("nginx")
    if exe is None:
        raise RuntimeError("nginx is not installed (tests/setup/50-balancers.sh)")
    tmp.mkdir(parents=True, exist_ok=True)
    access = tmp / "access.log"
    conf = tmp / "nginx.conf"
    conf.write_text(f"""
{_user_line()}
worker_processes 1;
daemon off;
pid {tmp}/nginx.pid;
error_log {tmp}/error.log warn;
events {{ worker_connections 4096; }}
http {{
    log_format mcp '$upstream_addr $http_mcp_name $status';
    access_log {access} mcp;
    client_body_temp_path {tmp}/body;
    proxy_temp_path {tmp}/proxy;
    fastcgi_temp_path {tmp}/fastcgi;
    uwsgi_temp_path {tmp}/uwsgi;
    scgi_temp_path {tmp}/scgi;
    keepalive_timeout 75s;
    keepalive_requests 100000;
{http_block}
}}
""")
    proc = subprocess.Popen([exe, "-p", str(tmp), "-c", str(conf)], stdin=subprocess.DEVNULL,
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, start_new_session=True)
    try:
        wait_port(port, proc, 20.0)
        yield access
    finally:
        _stop(proc)
        if proc.stderr:
            proc.stderr.close()


def nginx_upstream(name: str, ports: Sequence[int], *, keepalive: int = 64) -> str:
    servers = "\n".join(f"        server 127.0.0.1:{p} max_fails=1 fail_timeout=10s;" for p in ports)
    return f"""
    upstream {name} {{
{servers}
        keepalive {keepalive};
        keepalive_timeout 60s;
    }}
"""


def nginx_round_robin(ports: Sequence[int], port: int) -> str:
    """nginx round-robin over ``ports`` at ``127.0.0.1:port/mcp``."""
    return nginx_upstream("replicas", ports) + f"""
    server {{
        listen 127.0.0.1:{port};
        location /mcp {{
            proxy_pass http://replicas;
{NGINX_PROXY}
        }}
    }}
"""


@contextmanager
def haproxy(backend_servers: Sequence[int], port: int, tmp: Path, *, stick: str = "session") -> Iterator[Path]:
    """HAProxy at ``127.0.0.1:port`` in front of ``backend_servers``, sticking each MCP
    session to the replica that created it: by ``Mcp-Session-Id`` learnt from the response
    (``stick="session"``), or by a cookie it inserts in the first answer, ``SRV=r<i>``
    (``stick="cookie"``, as AWS ALB and many ingresses do; requests without it are
    dealt round-robin). A replica that fails its health check is taken out; a session
    whose replica is down is redispatched (``option redispatch``), and that replica answers
    404 for it. Every answer names its replica in ``X-Replica``."""
    exe = binary("haproxy")
    if exe is None:
        raise RuntimeError("haproxy is not installed (tests/setup/50-balancers.sh)")
    tmp.mkdir(parents=True, exist_ok=True)
    servers = "\n".join(
        f"    server r{i} 127.0.0.1:{p} check inter 300ms fall 1 rise 2" + (f" cookie r{i}" if stick == "cookie" else "")
        for i, p in enumerate(backend_servers)
    )
    if stick == "cookie":
        rule = "    cookie SRV insert indirect nocache"
    else:
        rule = ("    stick-table type string len 128 size 100k expire 1h\n"
                "    stick store-response res.hdr(mcp-session-id)\n"
                "    stick match req.hdr(mcp-session-id)")
    cfg = tmp / "haproxy.cfg"
    cfg.write_text(f"""
global
    maxconn 1024
defaults
    mode http
    timeout connect 2s
    timeout client 1h
    timeout server 1h
    timeout http-keep-alive 60s
    option http-keep-alive
    option redispatch
    retries 2
frontend mcp
    bind 127.0.0.1:{port}
    default_backend replicas
backend replicas
    balance roundrobin
{rule}
    http-response set-header X-Replica %s
{servers}
""")
    proc = subprocess.Popen([exe, "-db", "-f", str(cfg)], stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                            stderr=subprocess.PIPE, start_new_session=True)
    try:
        wait_port(port, proc, 20.0)
        yield cfg
    finally:
        _stop(proc)
        if proc.stderr:
            proc.stderr.close()


def wait_log(path: Path, count: int, timeout: float) -> int:
    """Wait (bounded) until ``path`` has ``count`` lines; the number it has."""
    deadline = time.monotonic() + timeout
    n = 0
    while time.monotonic() < deadline:
        n = len(path.read_text().splitlines()) if path.exists() else 0
        if n >= count:
            return n
        time.sleep(0.05)
    return n
