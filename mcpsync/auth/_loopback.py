"""The loopback redirect listener (RFC 8252 §7.3) that receives the authorization response.

It listens on ``127.0.0.1`` only, on an exact port (a fixed one, or one the OS picks and that
is then registered exactly, port included), answers one GET on its callback path, and hands the
query parameters to the waiting flow. Nothing it receives is logged.
"""

from __future__ import annotations

import http.server
import socket
import threading
from urllib.parse import parse_qs, urlsplit

from .._errors import AuthError

__all__ = ["LoopbackRedirect"]

_PAGE = (
    b"<!doctype html><html><head><meta charset='utf-8'><title>mcpsync</title></head>"
    b"<body><p>Authorization finished. You can close this window.</p></body></html>"
)


class _Handler(http.server.BaseHTTPRequestHandler):
    server: "_Server"

    def do_GET(self) -> None:  # noqa: N802 - http.server's naming
        parts = urlsplit(self.path)
        if parts.path != self.server.callback_path:
            self.send_error(404)
            return
        params = {k: v[0] for k, v in parse_qs(parts.query, keep_blank_values=True).items()}
        self.send_response(200)
        self.send_header("Content-Type", "text/html; charset=utf-8")
        self.send_header("Cache-Control", "no-store")
        self.send_header("Content-Length", str(len(_PAGE)))
        self.end_headers()
        self.wfile.write(_PAGE)
        self.server.deliver(params)

    def log_message(self, format: str, *args: object) -> None:  # the query holds the code
        return


class _Server(http.server.HTTPServer):
    # SO_REUSEADDR: the exact registered port must be reusable while old connections sit in TIME_WAIT
    # (on Linux it still refuses a port another socket is listening on).
    allow_reuse_address = True
    callback_path = "/callback"

    def __init__(self, port: int) -> None:
        super().__init__(("127.0.0.1", port), _Handler, bind_and_activate=False)
        self.timeout = 0.5
        self._result: dict[str, str] | None = None
        self._got = threading.Event()
        try:
            self.server_bind()
            self.server_activate()
        except OSError:
            self.server_close()
            raise

    def deliver(self, params: dict[str, str]) -> None:
        if self._result is None:
            self._result = params
        self._got.set()


class LoopbackRedirect:
    """A one-shot HTTP listener on ``http://127.0.0.1:<port>/callback``.

    Args:
        port: the exact port (0: let the OS pick one; :attr:`redirect_uri` then has it).
        path: the callback path.

    Example:
        >>> with LoopbackRedirect() as lb:
        ...     lb.redirect_uri.startswith("http://127.0.0.1:")
        True
    """

    def __init__(self, port: int = 0, path: str = "/callback") -> None:
        try:
            self._server = _Server(port)
        except OSError as exc:
            raise AuthError(f"cannot listen for the OAuth redirect on 127.0.0.1:{port}: {exc.strerror}") from exc
        self._server.callback_path = path
        self.port: int = self._server.server_address[1]
        self.redirect_uri = f"http://127.0.0.1:{self.port}{path}"
        self._thread = threading.Thread(target=self._serve, name="mcpsync-oauth-redirect", daemon=True)
        self._stop = threading.Event()
        self._thread.start()

    def __repr__(self) -> str:
        return f"LoopbackRedirect({self.redirect_uri!r})"

    def _serve(self) -> None:
        while not self._stop.is_set() and not self._server._got.is_set():
            self._server.handle_request()

    @staticmethod
    def port_free(port: int) -> bool:
        with socket.socket() as s:
            s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            try:
                s.bind(("127.0.0.1", port))
            except OSError:
                return False
        return True

    def deliver(self, callback_url: str) -> None:
        """Feed a redirect URL obtained some other way (a harness that captured it)."""
        parts = urlsplit(callback_url)
        self._server.deliver({k: v[0] for k, v in parse_qs(parts.query, keep_blank_values=True).items()})

    def wait(self, timeout: float) -> dict[str, str]:
        """The callback's query parameters; AuthError if none arrives within ``timeout`` s."""
        if not self._server._got.wait(timeout):
            raise AuthError(f"no authorization response reached {self.redirect_uri} within {timeout:g} s")
        if self._server._result is None:
            raise AuthError("the authorization was cancelled (the redirect listener was closed)")
        return dict(self._server._result)

    def close(self) -> None:
        self._stop.set()
        self._server._got.set()
        self._thread.join(timeout=2.0)
        self._server.server_close()

    def __enter__(self) -> "LoopbackRedirect":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
