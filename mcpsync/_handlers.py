"""What the client answers when a server asks it for something: sampling, elicitation,
roots, and where the server's log messages go.

The user's handlers are the Client's attributes (``sampling_handler``,
``elicitation_handler``, ``roots``, ``logging_handler``); :class:`Handlers` reads them at
each use, so replacing one on a live client takes effect at once.

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
from typing import Any, Callable, Mapping

import msgspec

from ._errors import REQUEST_TIMEOUT as REQUEST_TIMEOUT_CODE
from ._errors import METHOD_NOT_FOUND, RemoteError
from ._messages import to_builtins

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


class Handlers:
    """The client side of server→client requests and notifications, for one Client."""

    def __init__(self, client: Any, extensions: Mapping[str, Mapping[str, Any]] | None = None,
                 telemetry: Any = None) -> None:
        self._client = client
        self._telemetry = telemetry  # a Telemetry: each notification or request from the server is a span
        #: the ``extensions`` the client declares (identifier → settings), fixed at construction
        self.extensions: dict[str, dict[str, Any]] = {k: dict(v) for k, v in (extensions or {}).items()}
        self._notification_handlers: dict[str, list[Callable[[Mapping[str, Any] | None], None]]] = {}

    def add_notification_handler(self, method: str, handler: Callable[[Mapping[str, Any] | None], None]) -> None:
        """``Client.on_notification``."""
        with self._client._session.lock:
            self._notification_handlers.setdefault(method, []).append(handler)

    def notice(self, method: str, params: Mapping[str, Any] | None) -> None:
        """Every notification from the server as it is read (on the reader, before the
        worker's lane, which may be busy or full): the caches it makes stale are dropped at
        once. Quick, and no user code."""
        c = self._client
        if method == "notifications/tools/list_changed":
            c._tools.list_changed()
        else:
            c._subscriptions.notice(method, params)

    def notification(self, method: str, params: Mapping[str, Any] | None) -> None:
        """Every notification from the server (on the worker): to the part it concerns
        (log messages, subscriptions), then to the user's handlers of ``method``. (The
        caches it makes stale were dropped as it was read: :meth:`notice`.)"""
        tel = self._telemetry
        if tel is not None:
            tel.received(self._client, method, params, lambda: self._notification(method, params))
        else:
            self._notification(method, params)

    def _notification(self, method: str, params: Mapping[str, Any] | None) -> None:
        c = self._client
        try:
            if method == "notifications/message":
                self.log_message(params or {})
            else:
                c._subscriptions.notification(method, params or {})
        except Exception:
            log.exception("%s: handling %s failed", c.name, method)
        for handler in list(self._notification_handlers.get(method, ())):
            try:
                handler(params)
            except Exception:
                log.exception("handler for %s raised", method)

    def capabilities(self) -> dict[str, Any]:
        """Capabilities declared to the server: only those whose handler was given, and
        the extensions (SEP-2133) the client was built with."""
        c = self._client
        caps: dict[str, Any] = {}
        if c.sampling_handler is not None:
            caps["sampling"] = {}
        if c.elicitation_handler is not None:
            caps["elicitation"] = {"form": {}, "url": {}}
        if c.roots is not None:
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
        c = self._client
        if method == "ping":
            return {}
        if method == "roots/list":
            roots = c.roots
            if roots is None:
                raise RemoteError("this client declared no roots capability", code=METHOD_NOT_FOUND)
            if callable(roots):
                roots = self._bounded(roots, None, "roots")
            return {"roots": [{"uri": r} if isinstance(r, str) else dict(_plain(r)) for r in roots]}
        if method == "sampling/createMessage":
            if c.sampling_handler is None:
                raise RemoteError("this client declared no sampling capability", code=METHOD_NOT_FOUND)
            return _plain(self._bounded(c.sampling_handler, params, "sampling"))
        if method == "elicitation/create":
            if c.elicitation_handler is None:
                raise RemoteError("this client declared no elicitation capability", code=METHOD_NOT_FOUND)
            return fill_defaults(params, _plain(self._bounded(c.elicitation_handler, params, "elicitation")))
        raise RemoteError(f"method not supported by this client: {method}", code=METHOD_NOT_FOUND)

    def on_request(self, method: str, params: Mapping[str, Any] | None) -> Any:
        """Answer a server→client request (legacy era); runs on the worker pool."""
        tel = self._telemetry
        if tel is not None:
            return tel.received(self._client, method, params, lambda: self.answer(method, params or {}))
        return self.answer(method, params or {})

    def _bounded(self, fn: Callable[..., Any], params: Any, what: str) -> Any:
        """Run a user handler with a time bound (on its own daemon thread)."""
        c = self._client
        limit = c.handler_timeout
        if limit is None:
            limit = c.timeouts.request
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
        if self._client.elicitation_handler is None or not items:
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
        c = self._client
        if c.logging_handler is not None:
            c.logging_handler(params)
            return
        level = LEVELS.get(str(params.get("level", "info")), logging.INFO)
        logger = c._server_logger
        if params.get("logger"):
            logger = logger.getChild(str(params["logger"]))
        logger.log(level, "%s", params.get("data"))
