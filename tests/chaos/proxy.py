"""A small TCP proxy on 127.0.0.1 that cuts connections on demand, for the chaos tests.

    with ChaosProxy(("127.0.0.1", upstream_port)) as proxy:
        url = f"http://127.0.0.1:{proxy.port}/mcp"
        ...
        proxy.cut_all()          # every open connection dies (RST, or FIN mid-stream)
        proxy.refuse(0.5)        # the port refuses new connections for 0.5 s
        proxy.set_upstream(...)  # point at a restarted server

Each accepted connection gets its own upstream connection and two pump threads; every
blocking call has a timeout, every thread is a daemon and ends when its sockets do, and
``close()`` ends them all (bounded joins). A refused upstream (a restarting server)
closes the client side at once, as a dead server would.
"""

from __future__ import annotations

import random
import select
import socket
import struct
import threading
import time
from typing import Iterator

__all__ = ["ChaosProxy"]

_LINGER_RST = struct.pack("ii", 1, 0)  # SO_LINGER on, 0 s: close() sends RST


class _Pair:
    __slots__ = ("client", "upstream", "dead", "threads", "running")

    def __init__(self, client: socket.socket, upstream: socket.socket) -> None:
        self.client = client
        self.upstream = upstream
        self.dead = threading.Event()
        self.threads: list[threading.Thread] = []
        self.running = 2  # pump directions still open (under the proxy's lock)

    def kill(self, reset: bool) -> None:
        if self.dead.is_set():
            return
        self.dead.set()
        for s in (self.client, self.upstream):
            try:
                if reset:  # RST at once; the pumps see a closed socket object and end
                    s.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, _LINGER_RST)
                    s.close()
                else:  # FIN both ways, mid-stream
                    s.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass


class ChaosProxy:
    """Forwards 127.0.0.1:``port`` to ``upstream``; cuts and refuses on demand.

    Args:
        upstream: (host, port) to forward to.
        port: the port to listen on (0: a free one, kept across :meth:`refuse`).
        connect_timeout: for the upstream connect.

    Attributes:
        accepted: connections accepted so far.
        cut: connections cut by :meth:`cut_all`.
        upstream_failures: accepted connections dropped because the upstream refused.
    """

    def __init__(self, upstream: tuple[str, int], port: int = 0, connect_timeout: float = 1.0) -> None:
        self.upstream = upstream
        self.connect_timeout = connect_timeout
        self._lock = threading.Lock()
        self._pairs: set[_Pair] = set()
        self._stop = threading.Event()
        self._refuse_until = 0.0
        self._listener: socket.socket | None = self._listen(port)
        self.port: int = self._listener.getsockname()[1]
        self.accepted = 0
        self.cut = 0
        self.upstream_failures = 0
        self.refusals = 0
        self._thread = threading.Thread(target=self._accept_loop, name=f"chaos-proxy-{self.port}", daemon=True)
        self._thread.start()

    # -- control ---------------------------------------------------------------------

    @property
    def address(self) -> tuple[str, int]:
        return ("127.0.0.1", self.port)

    def open_connections(self) -> int:
        with self._lock:
            return sum(1 for p in self._pairs if not p.dead.is_set())

    def set_upstream(self, upstream: tuple[str, int]) -> None:
        self.upstream = upstream

    def cut_all(self, reset: bool | None = None, rng: random.Random | None = None) -> int:
        """Kill every open connection; ``reset`` None picks RST or FIN per connection."""
        rng = rng or random
        with self._lock:
            pairs = [p for p in self._pairs if not p.dead.is_set()]
        for pair in pairs:
            pair.kill(reset if reset is not None else rng.random() < 0.5)
        with self._lock:
            self.cut += len(pairs)
        return len(pairs)

    def refuse(self, seconds: float) -> None:
        """Stop listening for ``seconds``: new connections get ECONNREFUSED meanwhile."""
        with self._lock:
            listener, self._listener = self._listener, None
            self._refuse_until = time.monotonic() + seconds
            self.refusals += 1
        if listener is not None:
            try:
                listener.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass
            listener.close()

    def close(self) -> None:
        self._stop.set()
        with self._lock:
            listener, self._listener = self._listener, None
            pairs = list(self._pairs)
        if listener is not None:
            try:
                listener.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass
            listener.close()
        for pair in pairs:
            pair.kill(reset=True)
        self._thread.join(5)
        for pair in pairs:
            for th in pair.threads:
                th.join(2)

    def __enter__(self) -> "ChaosProxy":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # -- internals -----------------------------------------------------------------------

    @staticmethod
    def _listen(port: int) -> socket.socket:
        s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        s.bind(("127.0.0.1", port))
        s.listen(128)
        return s

    def _accept_loop(self) -> None:
        while not self._stop.is_set():
            with self._lock:
                listener = self._listener
                until = self._refuse_until
            if listener is None:
                if time.monotonic() < until:
                    self._stop.wait(0.01)
                    continue
                try:
                    fresh = self._listen(self.port)
                except OSError:
                    self._stop.wait(0.05)  # the port is briefly busy: try again
                    continue
                with self._lock:
                    if self._stop.is_set():
                        fresh.close()
                        return
                    self._listener = listener = fresh
            try:
                r, _, _ = select.select([listener], [], [], 0.1)
                if not r:
                    continue
                client, _ = listener.accept()
            except (OSError, ValueError):
                continue  # closed by refuse() or close()
            self._start_pair(client)

    def _start_pair(self, client: socket.socket) -> None:
        self.accepted += 1
        try:
            upstream = socket.create_connection(self.upstream, timeout=self.connect_timeout)
        except OSError:
            self.upstream_failures += 1
            try:
                client.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, _LINGER_RST)
            except OSError:
                pass
            client.close()
            return
        for s in (client, upstream):
            s.settimeout(None)
            s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        pair = _Pair(client, upstream)
        with self._lock:
            if self._stop.is_set():
                client.close()
                upstream.close()
                return
            self._pairs.add(pair)
        for src, dst in ((client, upstream), (upstream, client)):
            th = threading.Thread(target=self._pump, args=(pair, src, dst), name="chaos-proxy-pump", daemon=True)
            pair.threads.append(th)
            th.start()

    def _pump(self, pair: _Pair, src: socket.socket, dst: socket.socket) -> None:
        try:
            while not pair.dead.is_set():
                r, _, _ = select.select([src], [], [], 0.2)
                if not r:
                    continue
                data = src.recv(65536)
                if not data:
                    break
                dst.sendall(data)
        except (OSError, ValueError):
            pass
        finally:
            # half-close: pass the EOF on; the pair ends when both directions have
            try:
                dst.shutdown(socket.SHUT_WR)
            except OSError:
                pass
            self._finish(pair)

    def _finish(self, pair: _Pair) -> None:
        with self._lock:
            pair.running -= 1
            if pair.running > 0:
                return  # the other direction still flows (a half-closed connection)
            self._pairs.discard(pair)
        pair.dead.set()
        for s in (pair.client, pair.upstream):
            try:
                s.close()
            except OSError:
                pass


def _self_test() -> Iterator[str]:  # pragma: no cover - a manual smoke check
    srv = socket.socket()
    srv.bind(("127.0.0.1", 0))
    srv.listen(1)
    with ChaosProxy(srv.getsockname()) as proxy:
        c = socket.create_connection(proxy.address, timeout=2)
        s, _ = srv.accept()
        c.sendall(b"ping")
        yield s.recv(4).decode()
        proxy.cut_all(reset=True)
        c.settimeout(2)
        try:
            yield repr(c.recv(4))
        except OSError as exc:
            yield repr(exc)


if __name__ == "__main__":  # pragma: no cover
    for line in _self_test():
        print(line)
