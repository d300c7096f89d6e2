"""A small TCP proxy on 127.0.0.1 that delays every chunk and can cut its connections.

Used in-process by the routing tests (``DelayProxy(target_port, delay=0.05)``) to put
three real servers at three "distances". It can also run alone::

    python tests/servers/proxy.py LISTEN_PORT TARGET_PORT [DELAY_SECONDS]

* ``delay`` — seconds added before each chunk is forwarded, both ways (a request and
  its answer cost at least ``2 * delay``); may be changed while running.
* :meth:`DelayProxy.cut` — closes every open connection and refuses new ones (they are
  accepted and closed at once) until :meth:`DelayProxy.restore`.
* :meth:`DelayProxy.close` — stops listening; idempotent. Every thread is a daemon and
  every blocking call has a timeout, so nothing outlives a test for long.
"""

from __future__ import annotations

import socket
import sys
import threading
import time

__all__ = ["DelayProxy"]

_POLL = 0.2


class DelayProxy:
    def __init__(self, target_port: int, *, delay: float = 0.0, listen_port: int = 0, target_host: str = "127.0.0.1") -> None:
        self.target = (target_host, target_port)
        self.delay = delay
        self._srv = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        self._srv.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self._srv.bind(("127.0.0.1", listen_port))
        self._srv.listen(64)
        self._srv.settimeout(_POLL)
        self.port: int = self._srv.getsockname()[1]
        self._lock = threading.Lock()
        self._conns: set[socket.socket] = set()
        self._cut = False
        self._closed = False
        self.accepted = 0
        self.refused = 0
        self._thread = threading.Thread(target=self._accept_loop, name=f"proxy-{self.port}", daemon=True)
        self._thread.start()

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    # ------------------------------------------------------------------ control

    def cut(self) -> None:
        """Close every connection and refuse new ones until :meth:`restore`."""
        with self._lock:
            self._cut = True
            conns, self._conns = self._conns, set()
        for c in conns:
            _close(c)

    def restore(self) -> None:
        with self._lock:
            self._cut = False

    def close(self) -> None:
        with self._lock:
            if self._closed:
                return
            self._closed = True
        self.cut()
        _close(self._srv)
        self._thread.join(2)

    def __enter__(self) -> "DelayProxy":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # ------------------------------------------------------------------ work

    def _accept_loop(self) -> None:
        while not self._closed:
            try:
                client, _ = self._srv.accept()
            except socket.timeout:
                continue
            except OSError:
                return
            with self._lock:
                refuse = self._cut or self._closed
            if refuse:
                self.refused += 1
                _close(client)
                continue
            try:
                upstream = socket.create_connection(self.target, timeout=2.0)
            except OSError:
                self.refused += 1
                _close(client)  # the server behind is down: the client sees the connection die
                continue
            self.accepted += 1
            with self._lock:
                self._conns.update((client, upstream))
            for a, b in ((client, upstream), (upstream, client)):
                threading.Thread(target=self._pump, args=(a, b), daemon=True).start()

    def _pump(self, src: socket.socket, dst: socket.socket) -> None:
        src.settimeout(_POLL)
        try:
            while not self._closed:
                try:
                    data = src.recv(65536)
                except socket.timeout:
                    with self._lock:
                        if src not in self._conns:
                            return
                    continue
                if not data:
                    return
                if self.delay > 0:
                    time.sleep(self.delay)
                dst.sendall(data)
        except OSError:
            return
        finally:
            with self._lock:
                self._conns.discard(src)
                self._conns.discard(dst)
            _close(src)
            _close(dst)


def _close(s: socket.socket) -> None:
    try:
        s.shutdown(socket.SHUT_RDWR)
    except OSError:
        pass
    try:
        s.close()
    except OSError:
        pass


if __name__ == "__main__":
    listen, target = int(sys.argv[1]), int(sys.argv[2])
    delay = float(sys.argv[3]) if len(sys.argv) > 3 else 0.0
    p = DelayProxy(target, delay=delay, listen_port=listen)
    print(f"proxy 127.0.0.1:{p.port} -> 127.0.0.1:{target} (+{delay}s per chunk)", flush=True)
    try:
        while True:
            time.sleep(3600)
    except KeyboardInterrupt:
        p.close()
