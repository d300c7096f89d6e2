"""The one interface every byte-moving transport implements.

A transport moves whole JSON-RPC messages, each one ``bytes`` holding a single JSON
object, between the client and one server. It knows nothing of request ids or MCP
methods; the :class:`~mcpsync._dispatcher.Dispatcher` above it does the correlation.

Contract (every implementation keeps it):

* ``connect(timeout)`` starts / reaches the peer, or raises :class:`ConnectError` within
  ``timeout`` seconds.
* ``send(message, timeout)`` is safe to call from many threads at once (writes are
  serialised, or are independent requests). It raises :class:`ConnectionClosed` when
  the peer is gone and :class:`RequestTimeout` if the write could not finish in time.
* ``receive(timeout)`` is called by one thread at a time (the dispatcher's current
  reader). It returns one message, ``None`` when ``timeout`` passed with nothing to read,
  and raises :class:`ConnectionClosed` at end of stream. An oversized message raises
  :class:`MessageTooLarge` (``head``/``tail`` attributes hold its first and last bytes)
  and the stream stays usable.
* ``close()`` is idempotent, safe from any thread, and never blocks longer than a few
  seconds.
* ``alive()`` is a cheap liveness check (process running, socket open).
* ``start_failure(wait)``: after the handshake failed, a :class:`StartFailed` when the
  peer can never answer (a child process that exited), waiting at most ``wait`` seconds
  to learn it; ``None`` otherwise. The client does not retry such a failure.
* ``starting()``: True while the peer is alive but has not yet said anything (a child
  process still starting up): the client then gives it its start budget, not the
  connect timeout.
"""

from __future__ import annotations

from types import TracebackType
from typing import Any

__all__ = ["Transport"]


class Transport:
    """Base class of the byte transports (stdio, HTTP, SSE, WebSocket, gRPC)."""

    #: True when every request travels on its own exchange (modern Streamable HTTP,
    #: gRPC ``Call``) so that no session state is shared between requests.
    request_scoped: bool = False

    #: Short name used in logs and errors ("stdio", "http", ...).
    kind: str = "transport"

    #: True when ``send`` takes a third argument, the message's
    #: :class:`~mcpsync._channel.MessageFacts` (id, method, era, ``Mcp-Name``, whether it
    #: is safe to resend), computed once by the dispatcher: ``send(message, timeout, facts)``.
    #: Such a transport never decodes what it sends to learn them.
    takes_facts: bool = False

    def connect(self, timeout: float) -> None:
        raise NotImplementedError

    def send(self, message: bytes, timeout: float | None = None) -> None:
        raise NotImplementedError

    def receive(self, timeout: float | None) -> bytes | None:
        raise NotImplementedError

    def close(self) -> None:
        raise NotImplementedError

    def alive(self) -> bool:
        return True

    def start_failure(self, wait: float = 0.0) -> Any:
        """A :class:`~mcpsync._errors.StartFailed` if the peer can never answer, else None."""
        return None

    def starting(self) -> bool:
        """True while the peer is alive but has said nothing yet (still starting)."""
        return False

    def set_protocol_version(self, version: str) -> None:
        """Told by the client once the protocol version is known (HTTP sends it as a header)."""

    def describe(self) -> str:
        """A human-readable address for logs and error messages."""
        return self.kind

    def session_info(self) -> dict[str, Any]:
        """Transport-level facts about the session (e.g. an HTTP session id)."""
        return {}

    def __enter__(self) -> "Transport":
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()
