"""The one interface every byte-moving transport implements.

A transport moves whole JSON-RPC messages, each one ``bytes`` holding a single JSON
object, between the client and one server. It knows nothing of request ids or MCP
methods; the :class:`~mcpsync._dispatcher.Dispatcher` above it does the correlation.

Contract (every implementation keeps it):

* ``connect(timeout)`` starts / reaches the peer, or raises :class:`ConnectError` within
  ``timeout`` seconds.
* ``send(message, timeout, facts)`` is safe to call from many threads at once (writes are
  serialised, or are independent requests). It raises :class:`ConnectionClosed` when
  the peer is gone and :class:`RequestTimeout` if the write could not finish in time.
  ``facts`` are the message's :class:`~mcpsync._channel.MessageFacts` (id, method, era,
  ``Mcp-Name``, extra headers, whether it is safe to resend), computed once by the layer
  that encoded it: a transport never decodes what it sends to learn them. They are given
  when the transport's :attr:`Transport.needs_facts` says it reads them; None otherwise.
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
from typing import TYPE_CHECKING, Any, Callable

if TYPE_CHECKING:
    from .._channel import MessageFacts

__all__ = ["Transport"]


class Transport:
    """Base class of the byte transports (stdio, HTTP, SSE, WebSocket, gRPC).

    What a transport may offer beyond the contract above is declared here with its
    default, so the layers above read it as they read any attribute (never by probing
    with ``getattr``): :attr:`needs_facts`, :attr:`idle_switch`, :meth:`set_session_lost_handler`,
    :meth:`receive_alone`, :attr:`next_message` with :meth:`wait_first`, :meth:`wait_readable`, :meth:`set_failure_handler`,
    :attr:`session_id`, :attr:`pid`, :attr:`returncode`.
    """

    #: True when every request travels on its own exchange (modern Streamable HTTP,
    #: gRPC ``Call``) so that no session state is shared between requests.
    request_scoped: bool = False

    #: Short name used in logs and errors ("stdio", "http", ...).
    kind: str = "transport"

    #: True when :meth:`send` reads its ``facts`` (HTTP headers and era, gRPC routing): the
    #: layer above computes them for such a transport only (they cost a few thousand
    #: instructions a message that a pipe would never read).
    needs_facts: bool = False

    #: The switch that turns the transport's readiness watch off while a caller reads the
    #: answer itself and on again when it is done (stdio's epoll:
    #: :class:`~mcpsync._speedups.EpollSwitch`); None: nothing to switch.
    idle_switch: Any = None

    #: Where the transport leaves the next message, a list of one (stdio: its framer's;
    #: the others: their inbox's, :class:`~mcpsync.transports._inbox.Inbox`):
    #: :meth:`wait_first` reads until a message is there, and the leader takes it
    #: (``data = box[0]; box[0] = None``) with no call between the take and its keeping (a
    #: message returned through a call can be lost to a signal handler's exception: CPython
    #: runs handlers right after a call returns, before its value is stored); None (a
    #: transport that has none): the leader reads with :meth:`receive_alone`.
    next_message: list[bytes | None] | None = None

    def connect(self, timeout: float) -> None:
        raise NotImplementedError

    def send(self, message: bytes, timeout: float | None = None, facts: MessageFacts | None = None) -> None:
        raise NotImplementedError

    def receive(self, timeout: float | None) -> bytes | None:
        """The next message, None after ``timeout`` s (None: no bound); ConnectionClosed at the
        end. For a transport with :attr:`next_message`: :meth:`wait_first`, then the message
        taken out of the box (a transport without one overrides this)."""
        box = self.next_message
        if box is None:
            raise NotImplementedError
        if not self.wait_first(timeout):
            return None
        data = box[0]
        box[0] = None
        return data

    def receive_alone(self, timeout: float | None) -> bytes | None:
        """:meth:`receive` for a caller that knows no other thread reads now (the
        dispatcher's leader): a transport may skip its reader lock."""
        return self.receive(timeout)

    def wait_first(self, timeout: float | None) -> bool:
        """Read until a message is in :attr:`next_message` (True), or ``timeout`` s passed (False),
        for a caller that knows no other thread reads now; for a transport with a next_message list."""
        raise NotImplementedError

    def wait_readable(self, timeout: float) -> bool:
        """Wait up to ``timeout`` s for something to read, holding nothing meanwhile; True
        when there may be (the default: always, the read itself then waits)."""
        return True

    def set_failure_handler(self, handler: Callable[[Any, Any], None] | None) -> None:
        """``handler(request_id, error)`` hears of a request whose exchange failed after
        :meth:`send` returned (an HTTP response stream); transports whose requests cannot
        fail so ignore it."""

    def set_session_lost_handler(self, handler: Callable[[str], None] | None) -> None:
        """``handler(session_id)`` hears that the server no longer knows the session, when the
        transport learns it on its own (Streamable HTTP's GET stream); others ignore it."""

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

    @property
    def session_id(self) -> str | None:
        """The transport's own session id (Streamable HTTP's ``Mcp-Session-Id``), or None."""
        return None

    @property
    def pid(self) -> int | None:
        """The server process's id (stdio), or None."""
        return None

    @property
    def returncode(self) -> int | None:
        """The server process's exit status once it has ended (stdio), or None."""
        return None

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
