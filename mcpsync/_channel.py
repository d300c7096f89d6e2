"""What the Client needs from one connection to a server.

Two implementations exist: :class:`~mcpsync._dispatcher.Dispatcher` (JSON-RPC over a
byte :class:`~mcpsync.transports.Transport`) and the Local transport's in-process
channel, which calls registered Python functions with no serialisation.
"""

from __future__ import annotations

from typing import Any, Callable, Mapping, Protocol

import msgspec

from ._constants import META_VERSION  # where a modern-era request names its version: params._meta[META_VERSION]

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


_Raw = msgspec.Raw

#: the last undecoded ``_meta`` message_facts read and the version it names (held, so
#: that no other object can take its identity); replaced whole, so safe across threads
_raw_meta: tuple[Any, str | None] = (None, None)


def _version_of(meta: Any) -> str | None:
    """The protocol version a (decoded) ``_meta`` names, or None."""
    if type(meta) is not dict and not isinstance(meta, Mapping):
        return None
    version = meta.get(META_VERSION)
    return version if type(version) is str else None


def message_facts(
    id: Any,
    method: str | None,
    params: Any,
    decode: Callable[[Any], Any] | None = None,
    headers: Mapping[str, str] | None = None,
) -> MessageFacts | None:
    """The facts of a message with this ``id``, ``method`` and ``params``.

    ``params`` is the plain (dict) form; a ``_meta`` that is still undecoded JSON
    (``msgspec.Raw``) is passed through ``decode``. ``headers`` are passed on as they
    are. None when ``params`` has another shape (the caller then has no facts to give).
    """
    if params is None:
        return MessageFacts(id, method, safe_to_resend=method in SAFE_METHODS, headers=headers)
    if type(params) is not dict and not isinstance(params, Mapping):
        return None
    get = params.get
    modern = name = cancels = None
    meta = get("_meta")
    if meta is not None:
        if type(meta) is _Raw and decode is not None:
            # undecoded JSON, the same object call after call (a session encodes its _meta
            # once per value): its version is kept with it, so it is decoded only when new
            global _raw_meta
            known = _raw_meta
            if known[0] is meta:
                modern = known[1]
            else:
                modern = _version_of(decode(meta))
                _raw_meta = (meta, modern)
        else:
            # exact types first: isinstance(…, Mapping) goes through the ABC machinery
            # (dozens of bytecodes) and the common case is a dict
            if type(meta) is not dict and not isinstance(meta, Mapping):
                meta = decode(meta) if decode is not None else None
            modern = _version_of(meta)
    if method == "tools/call":
        tool = get("name")
        name = tool if type(tool) is str else None
    elif method == "notifications/cancelled":
        cancels = get("requestId")
    else:
        key = NAME_KEYS.get(method) if method is not None else None
        if key is not None:
            value = get(key)
            name = value if type(value) is str else None
    return MessageFacts(
        id,
        method,
        modern_version=modern,
        name=name,
        safe_to_resend=method in SAFE_METHODS,
        cancels=cancels,
        headers=headers,
    )

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
