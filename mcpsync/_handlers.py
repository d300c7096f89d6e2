"""What the client answers when a server asks it for something: sampling, elicitation,
roots, and where the server's log messages go.

The user's handlers (``sampling_handler``, ``elicitation_handler``, ``roots``,
``logging_handler``, ``handler_timeout``) are attributes of :class:`Handlers`, which the
Client's attributes of the same names read and write: :class:`Handlers` reads them at each
use, so replacing one on a live client takes effect at once. Notifications that concern
another part (a changed tool list, subscriptions, cached results) go to the callbacks the
Client wired at construction.

What a server gets back when it asks this client for something (legacy era):

* a capability the client did not declare: ``-32601`` (method not found);
* a handler that raised: ``-32603`` (``client handler failed: ...``), or the handler's own
  :class:`~mcpsync.RemoteError` code and message if it raised one;
* a handler that did not answer within ``Client.handler_timeout`` (default: the request
  timeout): ``-32001`` (request timeout). The handler's thread is left to finish on its
  own; its late answer is dropped.

In the modern era the same three cases end the caller's request with
:class:`~mcpsync._mrtr.InputRequestError` (same code), since there is no server request
to answer. Either way the client keeps working.
"""

from __future__ import annotations

import contextvars
import logging
import threading
from typing import Any, Callable, Mapping, Sequence

import msgspec

from ._errors import REQUEST_TIMEOUT as REQUEST_TIMEOUT_CODE
from ._errors import METHOD_NOT_FOUND, RemoteError
from ._messages import to_builtins
from ._settings import Settings

__all__ = ["Handlers", "LEVELS", "fill_defaults"]

log = logging.getLogger("mcpsync.client")


#: MCP log levels and the ``logging`` level each maps to.
LEVELS = {
    "debug": logging.DEBUG,
    "info": logging.INFO,
    "notice": logging.INFO,
    "warning": logging.WARNING,
    "error": logging.ERROR,
    "critical": logging.CRITICAL,
    "alert": logging.CRITICAL,
    "emergency": logging.CRITICAL,
}


def _plain(obj: Any) -> Any:
    if isinstance(obj, msgspec.Struct):
        return to_builtins(obj)
    return obj


def fill_defaults(params: Mapping[str, Any], result: Any) -> Any:
    """Form mode: an accepted answer gets the schema's defaults for fields it left out."""
    if not isinstance(result, Mapping) or result.get("action") != "accept":
        return result
    if params.get("mode") == "url":
        return result
    props = (params.get("requestedSchema") or {}).get("properties") or {}
    content = dict(result.get("content") or {})
    for name, spec in props.items():
        if name not in content and isinstance(spec, Mapping) and "default" in spec:
            content[name] = spec["default"]
    return {**result, "content": content}


#: ``received(method, params, run)``: runs ``run()`` for one message from the server
#: (telemetry: inside its span) and returns what it returned.
Received = Callable[[str, "Mapping[str, Any] | None", Callable[[], Any]], Any]
NotificationRoute = Callable[[str, "Mapping[str, Any] | None"], None]


class Handlers:
    """The client side of server→client requests and notifications, for one Client.

    Args:
        settings: the Client's settings (name, timeouts, extensions).
        tools_changed: a ``tools/list_changed`` notification was read (the tools part).
        notice: any other notification as it is read (the subscriptions part: cached
            results it makes stale).
        route: a notification on the worker (the subscriptions part), before the user's handlers.
        received: wraps the handling of each message from the server (telemetry), or None.
    """

    def __init__(
        self, settings: Settings, *, tools_changed: Callable[[], None], notice: NotificationRoute,
        route: Callable[[str, Mapping[str, Any]], None], received: Received | None = None,
        sampling_handler: Callable[[Mapping[str, Any]], Any] | None = None,
        elicitation_handler: Callable[[Mapping[str, Any]], Any] | None = None,
        roots: Sequence[Mapping[str, Any]] | Callable[[], Sequence[Mapping[str, Any]]] | None = None,
        logging_handler: Callable[[Mapping[str, Any]], None] | None = None, log_level: str | None = None,
    ) -> None:
        self.name = settings.name
        self.request_timeout = settings.timeouts.request
        self._tools_changed = tools_changed
        self._notice = notice
        self._route = route
        self._received = received  # telemetry: each notification or request from the server is a span
        self.sampling_handler = sampling_handler
        self.elicitation_handler = elicitation_handler
        self.roots = roots
        self.logging_handler = logging_handler
        #: the level asked of the server for its log messages (None: not asked): the
        #: handshake and each modern request's ``_meta`` carry it
        self.log_level = log_level
        #: seconds a sampling/elicitation/roots handler may take (None: the request timeout)
        self.handler_timeout: float | None = None
        self.server_logger = logging.getLogger(f"mcpsync.server.{settings.name}")
        #: the ``extensions`` the client declares (identifier → settings), fixed at construction
        self.extensions: dict[str, dict[str, Any]] = {k: dict(v) for k, v in settings.extensions.items()}
        self._lock = threading.Lock()
        self._notification_handlers: dict[str, list[Callable[[Mapping[str, Any] | None], None]]] = {}

    def add_notification_handler(self, method: str, handler: Callable[[Mapping[str, Any] | None], None]) -> None:
        """``Client.on_notification``."""
        with self._lock:
            self._notification_handlers.setdefault(method, []).append(handler)

    def notice(self, method: str, params: Mapping[str, Any] | None) -> None:
        """Every notification from the server as it is read (on the reader, before the
        worker's lane, which may be busy or full): the caches it makes stale are dropped at
        once. Quick, and no user code."""
        if method == "notifications/tools/list_changed":
            self._tools_changed()
        else:
            self._notice(method, params)

    def notification(self, method: str, params: Mapping[str, Any] | None) -> None:
        """Every notification from the server (on the worker): to the part it concerns
        (log messages, subscriptions), then to the user's handlers of ``method``. (The
        caches it makes stale were dropped as it was read: :meth:`notice`.)"""
        received = self._received
        if received is not None:
            received(method, params, lambda: self._notification(method, params))
        else:
            self._notification(method, params)

    def _notification(self, method: str, params: Mapping[str, Any] | None) -> None:
        try:
            if method == "notifications/message":
                self.log_message(params or {})
            else:
                self._route(method, params or {})
        except Exception:
            log.exception("%s: handling %s failed", self.name, method)
        for handler in list(self._notification_handlers.get(method, ())):
            try:
                handler(params)
            except Exception:
                log.exception("handler for %s raised", method)

    def capabilities(self) -> dict[str, Any]:
        """Capabilities declared to the server: only those whose handler was given, and
        the extensions (SEP-2133) the client was built with."""
        caps: dict[str, Any] = {}
        if self.sampling_handler is not None:
            caps["sampling"] = {}
        if self.elicitation_handler is not None:
            caps["elicitation"] = {"form": {}, "url": {}}
        if self.roots is not None:
            caps["roots"] = {"listChanged": True}
        if self.extensions:
            caps["extensions"] = {k: dict(v) for k, v in self.extensions.items()}
        return caps

    def answer(self, method: str, params: Mapping[str, Any]) -> Any:
        """The answer to ``ping``, ``roots/list``, ``sampling/createMessage`` or ``elicitation/create``.

        Raises:
            RemoteError: -32601 (not declared), -32001 (handler timed out), or the
                handler's own RemoteError.
        """
        if method == "ping":
            return {}
        if method == "roots/list":
            roots = self.roots
            if roots is None:
                raise RemoteError("this client declared no roots capability", code=METHOD_NOT_FOUND)
            if callable(roots):
                roots = self._bounded(roots, None, "roots")
            return {"roots": [{"uri": r} if isinstance(r, str) else dict(_plain(r)) for r in roots]}
        if method == "sampling/createMessage":
            if self.sampling_handler is None:
                raise RemoteError("this client declared no sampling capability", code=METHOD_NOT_FOUND)
            return _plain(self._bounded(self.sampling_handler, params, "sampling"))
        if method == "elicitation/create":
            if self.elicitation_handler is None:
                raise RemoteError("this client declared no elicitation capability", code=METHOD_NOT_FOUND)
            return fill_defaults(params, _plain(self._bounded(self.elicitation_handler, params, "elicitation")))
        raise RemoteError(f"method not supported by this client: {method}", code=METHOD_NOT_FOUND)

    def on_request(self, method: str, params: Mapping[str, Any] | None) -> Any:
        """Answer a server→client request (legacy era); runs on the worker pool."""
        received = self._received
        if received is not None:
            return received(method, params, lambda: self.answer(method, params or {}))
        return self.answer(method, params or {})

    def _bounded(self, fn: Callable[..., Any], params: Any, what: str) -> Any:
        """Run a user handler with a time bound (on its own daemon thread)."""
        limit = self.handler_timeout
        if limit is None:
            limit = self.request_timeout
        box: dict[str, Any] = {}
        done = threading.Event()

        def run() -> None:
            try:
                box["result"] = fn() if params is None else fn(params)
            except BaseException as exc:  # handed to the waiting thread
                box["error"] = exc
            finally:
                done.set()

        # the caller's context goes along (contextvars: e.g. the OpenTelemetry span it runs in)
        threading.Thread(target=contextvars.copy_context().run, args=(run,), name=f"mcpsync-{what}-handler",
                         daemon=True).start()
        if not done.wait(limit):
            raise RemoteError(f"the client's {what} handler did not answer within {limit:g} s", code=REQUEST_TIMEOUT_CODE)
        if "error" in box:
            raise box["error"]
        return box["result"]

    def url_prerequisites(self, exc: RemoteError) -> bool:
        """``-32042`` (URL elicitation required): show each URL elicitation to the
        handler (never fetching the link). True when every one was accepted."""
        data = exc.data if isinstance(exc.data, Mapping) else {}
        items = data.get("elicitations") or []
        if self.elicitation_handler is None or not items:
            return False
        for item in items:
            if not isinstance(item, Mapping):
                return False
            answer = self.answer("elicitation/create", {**item, "mode": "url"})
            if not isinstance(answer, Mapping) or answer.get("action") != "accept":
                return False
        return True

    def log_message(self, params: Mapping[str, Any]) -> None:
        """``notifications/message``: to the logging handler, else to the per-server logger."""
        if self.logging_handler is not None:
            self.logging_handler(params)
            return
        level = LEVELS.get(str(params.get("level", "info")), logging.INFO)
        logger = self.server_logger
        if params.get("logger"):
            logger = logger.getChild(str(params["logger"]))
        logger.log(level, "%s", params.get("data"))
