"""What the Client needs from one connection to a server.

Two implementations exist: :class:`~mcpsync._dispatcher.Dispatcher` (JSON-RPC over a
byte :class:`~mcpsync.transports.Transport`) and the Local transport's in-process
channel, which calls registered Python functions with no serialisation.
"""

from __future__ import annotations

from typing import Any, Callable, Mapping, Protocol

import msgspec

from ._constants import META_VERSION  # where a modern-era request names its version: params._meta[META_VERSION]
from ._speedups import facts_of

__all__ = [
    "Channel",
    "MessageFacts",
    "ProgressCallback",
    "NotificationHandler",
    "RequestHandler",
    "SAFE_METHODS",
    "message_facts",
]

#: the params member whose value a modern-era request repeats in ``Mcp-Name`` (the tasks
#: extension, SEP-2663: a ``tasks/*`` request names its task, so that a balancer can route
#: it to the instance that holds the task)
NAME_KEYS = {
    "tools/call": "name", "prompts/get": "name", "resources/read": "uri",
    "tasks/get": "taskId", "tasks/update": "taskId", "tasks/cancel": "taskId",
}

#: Requests that are safe to send again: they read, or set a state to the same value, so
#: a repeat duplicates no side effect. The Client retries them after any transient
#: failure; a transport may re-issue them when a stream breaks before the answer. The one
#: table of it (``tools/call`` is judged per tool, from its annotations, by the Client).
SAFE_METHODS = frozenset(
    {
        "ping",
        "server/discover",
        "tools/list",
        "resources/list",
        "resources/templates/list",
        "resources/read",
        "prompts/list",
        "prompts/get",
        "completion/complete",
        "tasks/get",
        "tasks/list",
        "tasks/result",
        "logging/setLevel",
        "resources/subscribe",
        "resources/unsubscribe",
    }
)


class MessageFacts(msgspec.Struct, frozen=True):
    """What a transport may need to know about one outgoing message, computed once by
    the layer that encoded it, so that no transport decodes the bytes it is given.

    Attributes:
        id: the request id (None for a notification).
        method: the JSON-RPC method.
        modern_version: the protocol version the request names in its ``_meta``
            (modern era), None for a legacy-era message.
        name: what the modern era's ``Mcp-Name`` header carries (the tool or prompt
            name, the resource URI), None when the method names nothing.
        safe_to_resend: the method is in :data:`SAFE_METHODS`.
        cancels: the request id a ``notifications/cancelled`` cancels.
        headers: extra request headers the layer above computed for a transport that
            has headers (e.g. the ``Mcp-Param-*`` headers a tool's ``x-mcp-header``
            annotations ask for, from :mod:`mcpsync._tools`), None when there are none.
    """

    id: Any = None
    method: str | None = None
    modern_version: str | None = None
    name: str | None = None
    safe_to_resend: bool = False
    cancels: Any = None
    headers: Mapping[str, str] | None = None

    @property
    def is_request(self) -> bool:
        return self.method is not None and self.id is not None


class _MessageFacts(Protocol):
    def __call__(
        self,
        id: Any,
        method: str | None,
        params: Any,
        decode: Callable[[Any], Any] | None = None,
        headers: Mapping[str, str] | None = None,
    ) -> MessageFacts | None:
        """The facts of a message with this ``id``, ``method`` and ``params``.

        ``params`` is the plain (dict) form; a ``_meta`` that is still undecoded JSON
        (``msgspec.Raw``) is passed through ``decode`` (the last one read is kept with the
        version it names, so that a session's one ``_meta`` is decoded once). ``headers``
        are passed on as they are. None when ``params`` has another shape (the caller then
        has no facts to give).
        """


#: (see :class:`_MessageFacts`) compiled with the HTTP lane (``_speedups._pyhttp.facts_of``,
#: made of the parts above): every request to a transport that reads facts computes them
message_facts: _MessageFacts = facts_of(MessageFacts, SAFE_METHODS, NAME_KEYS, META_VERSION, Mapping)

#: progress(progress, total, message)
ProgressCallback = Callable[[float, "float | None", "str | None"], None]
#: on_notification(method, params) — params as plain JSON (dict) or None
NotificationHandler = Callable[[str, "Mapping[str, Any] | None"], None]
#: on_request(method, params) -> result (JSON-compatible); raise RemoteError for an error reply
RequestHandler = Callable[[str, "Mapping[str, Any] | None"], Any]


class Channel(Protocol):
    """A connection as the Client sees it.

    ``request`` blocks until the response arrives and returns the undecoded result
    (``msgspec.Raw``) or an already-built Python object (Local transport); the Client
    decodes either with :func:`mcpsync._decoders.decode_result`. It raises the typed
    errors of :mod:`mcpsync._errors` (RemoteError for an error response, RequestTimeout,
    ConnectionClosed, ...). Handlers registered with ``set_handlers`` are never called on
    the thread that reads the connection, except ``on_notice`` (the owner's quick
    bookkeeping of every notification as it is read, no user code).
    """

    def request(
        self,
        method: str,
        params: Mapping[str, Any] | None,
        timeout: float | None = None,
        progress: ProgressCallback | None = None,
    ) -> Any: ...

    def notify(self, method: str, params: Mapping[str, Any] | None = None) -> None: ...

    def set_handlers(
        self,
        on_notification: NotificationHandler | None = None,
        on_request: RequestHandler | None = None,
        on_notice: NotificationHandler | None = None,
    ) -> None: ...

    def alive(self) -> bool: ...

    def close(self) -> None: ...
