"""The MCP protocol surface beyond tools: resources, prompts, completion, logging,
subscriptions, client features (sampling, elicitation, roots), the modern era's
multi-round-trip requests (MRTR), result caching hints and the tasks extension.

:class:`ProtocolMixin` is a base of :class:`~mcpsync.Client`; it relies on the Client's
``request()``, ``notify()``, ``session``, ``on_notification()``, handler attributes and
``name``, and provides the hooks the Client calls: ``client_capabilities()``,
``_protocol_notification()``, ``_on_request()`` and ``_incomplete_result()``.

One API over both eras:

========================  ===================================  ====================================
feature                   legacy (≤ 2025-11-25)                modern (2026-07-28)
========================  ===================================  ====================================
sampling / elicitation /  server→client request, answered on   ``InputRequiredResult``: the call is
roots handlers            the worker pool                      retried with ``inputResponses`` and
                                                               the opaque ``requestState``
``subscribe(uri, cb)``    ``resources/subscribe`` +            ``subscriptions/listen`` on a daemon
                          ``notifications/resources/updated``  thread, demultiplexed by
                                                               ``io.modelcontextprotocol/subscriptionId``
list-changed callbacks    ``notifications/*/list_changed``     the same notifications on the listen
                                                               stream (opted in per kind)
log level                 ``logging/setLevel``                 ``_meta`` ``io.modelcontextprotocol/logLevel``
========================  ===================================  ====================================

What a server gets back when it asks this client for something (legacy era):

* a capability the client did not declare: ``-32601`` (method not found);
* a handler that raised: ``-32603`` (``client handler failed: ...``), or the handler's own
  :class:`~mcpsync.RemoteError` code and message if it raised one;
* a handler that did not answer within :attr:`ProtocolMixin.handler_timeout` (default:
  the request timeout): ``-32001`` (request timeout). The handler's thread is left to
  finish on its own; its late answer is dropped.

In the modern era the same three cases end the caller's request with
:class:`InputRequestError` (a :class:`~mcpsync.ProtocolError`, same code), since there is
no server request to answer. Either way the client keeps working.

MRTR applies to any method whose result says ``input_required`` (``tools/call``,
``prompts/get``, ``resources/read``): at most :attr:`ProtocolMixin.max_input_rounds`
rounds, each a new request, ``requestState`` copied back byte for byte.

Caching (modern era): ``resources/list``, ``resources/templates/list``, ``prompts/list``
and ``resources/read`` results carrying ``ttlMs`` are kept in this client for that long;
``cacheScope: "private"`` entries are keyed by the client's credential, so they are
never served to another one. ``notifications/*/list_changed`` drops the lists of that
kind, ``notifications/resources/updated`` the contents of that URI.

Tasks (``io.modelcontextprotocol/tasks``): a tool whose ``execution.taskSupport`` is
``"required"`` is called as a task and ``tasks/get`` is polled (at the server's
``pollInterval``) until it ends, then ``tasks/result`` gives the result; server
requests made while the task runs (e.g. elicitation) reach the handlers as usual.

Example:
    >>> with Client.stdio("npx", ["-y", "@modelcontextprotocol/server-everything"]) as c:  # doctest: +SKIP
    ...     print([r.uri for r in c.list_resources()][:2])
    ...     print(c.read_resource("demo://resource/static/document/architecture.md").text[:40])
    ...     sub = c.subscribe("demo://resource/static/document/architecture.md", print)
"""

from __future__ import annotations

import json
import logging
import threading
import time
from typing import Any, Callable, Iterable, Mapping, Sequence

import msgspec

from ._constants import META_LOG_LEVEL as _META_LOG, META_SUBSCRIPTION_ID as SUBSCRIPTION_ID
from ._errors import REQUEST_TIMEOUT as REQUEST_TIMEOUT_CODE
from ._errors import (
    METHOD_NOT_FOUND,
    URL_ELICITATION_REQUIRED,
    Cancelled,
    ConnectionClosed,
    InputRequestError,
    InvalidParams,
    MCPError,
    NetworkError,
    ProtocolError,
    RemoteError,
    RequestTimeout,
    ResourceNotFound,
)
from ._paging import paginate
from ._messages import RESULT_DECODERS, CallToolResult, Tool, to_builtins
from ._protocol_types import (
    CompleteResult,
    Completion,
    CreateTaskResult,
    GetPromptResult,
    ListTasksResult,
    Prompt,
    ReadResourceResult,
    Resource,
    ResourceTemplate,
    Task,
    TERMINAL_TASK_STATUSES,
    decode_create_task,
    decode_input_required,
)
from ._schema import OutputSchemaError, validate_output

__all__ = ["ProtocolMixin", "Subscription", "InputRequestError", "OutputSchemaError", "LIST_KINDS"]

log = logging.getLogger("mcpsync.client")

#: The lists whose changes may be watched with :meth:`ProtocolMixin.on_list_changed`.
LIST_KINDS = ("tools", "prompts", "resources")


_LEVELS = {
    "debug": logging.DEBUG,
    "info": logging.INFO,
    "notice": logging.INFO,
    "warning": logging.WARNING,
    "error": logging.ERROR,
    "critical": logging.CRITICAL,
    "alert": logging.CRITICAL,
    "emergency": logging.CRITICAL,
}

_LIST_CHANGED = {
    "notifications/tools/list_changed": "tools",
    "notifications/prompts/list_changed": "prompts",
    "notifications/resources/list_changed": "resources",
}
_FILTER_KEYS = {"tools": "toolsListChanged", "prompts": "promptsListChanged", "resources": "resourcesListChanged"}
#: Cached list methods dropped when a kind's list changes.
_INVALIDATES = {
    "prompts": ("prompts/list",),
    "resources": ("resources/list", "resources/templates/list"),
    "tools": (),
}

_STATE_LOCK = threading.Lock()
_mrtr = threading.local()


_UNKNOWN: Any = object()  # "definition not looked up yet"


# ----------------------------------------------------------------------------- helpers


def _wrap_tools_call_decoder() -> None:
    """Let ``tools/call`` decode a ``CreateTaskResult`` (tasks extension).

    Only a result with no content, no structured content and a ``"task"`` member is
    looked at twice, so ordinary results pay nothing.
    """
    orig = RESULT_DECODERS["tools/call"]
    if getattr(orig, "_mcpsync_tasks", False):
        return
    typed = msgspec.json.Decoder(CallToolResult).decode  # the usual result, in this one frame

    def decode(raw: Any) -> Any:
        try:
            res = typed(raw)
        except msgspec.ValidationError:
            res = orig(raw)  # content of a kind the typed decoder does not know: block by block
        if not res.content and res.structured_content is None and b'"task"' in bytes(raw):
            try:
                return decode_create_task(raw)
            except msgspec.ValidationError:
                pass
        return res

    decode._mcpsync_tasks = True  # type: ignore[attr-defined]
    RESULT_DECODERS["tools/call"] = decode
    RESULT_DECODERS.setdefault("tasks/result", orig)


_wrap_tools_call_decoder()


class _Pending:
    """An ``input_required`` result met inside this thread's own MRTR loop."""

    __slots__ = ("raw",)

    def __init__(self, raw: Any) -> None:
        self.raw = raw


def _plain(obj: Any) -> Any:
    if isinstance(obj, msgspec.Struct):
        return to_builtins(obj)
    return obj


def _key(params: Mapping[str, Any] | None) -> str:
    return json.dumps(params or {}, sort_keys=True, default=str)


def _fill_defaults(params: Mapping[str, Any], result: Any) -> Any:
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


class Subscription:
    """The handle :meth:`ProtocolMixin.subscribe` returns; ``close()`` unsubscribes.

    Also a context manager.
    """

    def __init__(self, client: "ProtocolMixin", uri: str, callback: Callable[[str], None]) -> None:
        self.client = client
        self.uri = uri
        self.callback = callback

    def close(self) -> None:
        self.client.unsubscribe(self.uri, self.callback)

    def __enter__(self) -> "Subscription":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


class _Attempt:
    """One ``subscriptions/listen`` request."""

    __slots__ = ("filter", "id", "honored", "acked", "error", "stale", "channel")

    def __init__(self, filt: dict[str, Any]) -> None:
        self.filter = filt
        self.id: Any = None
        self.honored: dict[str, Any] = {}
        self.acked = threading.Event()
        self.error: BaseException | None = None
        self.stale = False
        self.channel: Any = None  # the channel the current request went out on


class _State:
    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.listen_lock = threading.Lock()
        self.subs: dict[str, list[Callable[[str], None]]] = {}
        self.list_cbs: dict[str, list[Callable[[str], None]]] = {k: [] for k in LIST_KINDS}
        self.legacy_subscribed: set[str] = set()
        self.cache: dict[tuple[Any, str, str], tuple[float, Any]] = {}
        self.gen = 0  # bumped by every invalidation
        self.tools: dict[str, Tool] | None = None
        self.tools_missing: set[str] = set()
        self.attempt: _Attempt | None = None  # the newest listen
        self.awaiting: list[_Attempt] = []  # sent, not yet acknowledged (FIFO)
        self.live: dict[Any, _Attempt] = {}  # acknowledged, not cancelled
        self.restores = 0  # legacy subscriptions restored on a new session connection
        self.acks = 0  # listen streams acknowledged so far (for tests and diagnostics)


# ----------------------------------------------------------------------------- mixin


class ProtocolMixin:
    """MCP methods and server→client features, shared by both eras."""

    name: str
    sampling_handler: Any
    elicitation_handler: Any
    roots: Any
    logging_handler: Any
    log_level: str | None
    _server_logger: logging.Logger

    #: Most ``InputRequiredResult`` rounds one call may take.
    max_input_rounds: int = 8
    #: Seconds a sampling/elicitation/roots handler may take (None: the request timeout).
    handler_timeout: float | None = None
    #: Seconds one ``subscriptions/listen`` request is left open before it is re-sent.
    listen_timeout: float = 120.0
    #: Honour modern ``ttlMs``/``cacheScope`` for resources, prompts and ``resources/read``.
    cache_results: bool = True

    # ------------------------------------------------------------------ state

    def _pstate(self) -> _State:
        st = self.__dict__.get("_protocol_state")
        if st is None:
            with _STATE_LOCK:
                st = self.__dict__.get("_protocol_state")
                if st is None:
                    st = self.__dict__["_protocol_state"] = _State()
        return st

    def _proto_era(self) -> str:
        return self.session.era  # type: ignore[attr-defined,no-any-return]

    def _proto_live_era(self) -> str | None:
        """The era of the open session connection, or None before the first connect."""
        conn = getattr(self, "_primary", None) or getattr(self, "_conn", None)
        session = getattr(conn, "session", None)
        return getattr(session, "era", None)

    def _proto_session_request(
        self, method: str, params: Mapping[str, Any] | None, timeout: float | None, attempt: "_Attempt | None" = None
    ) -> Any:
        """A request carrying session-scoped state (subscriptions, listens): it goes on the
        Client's session connection when it has one, so the notifications it asks for
        come back there and survive a pooled connection's reclaim."""
        primary = getattr(self, "_primary_connection", None)
        request_on = getattr(self, "_request_on", None)
        if primary is None or request_on is None:
            return self.request(method, params, timeout=timeout)  # type: ignore[attr-defined]
        t = self.timeouts.request if timeout is None else timeout  # type: ignore[attr-defined]
        conn = primary()
        if attempt is not None:
            attempt.channel = conn.channel
        return request_on(conn, method, params, t, None)

    def _restore_session_state(self, first: bool = False) -> None:
        """Called (on the worker) when the session connection was replaced: subscribe
        again. ``first``: the session's first connection, which has nothing to restore
        but may have to open the listen stream for callbacks registered before it."""
        if getattr(self, "closed", False):
            return
        st = self._pstate()
        if first:
            with st.lock:
                wanted = bool(st.subs or any(st.list_cbs.values()))
            try:
                if wanted and self._proto_era() == "modern":
                    self._proto_relisten(None)
            except MCPError as exc:
                log.warning("%s: could not open the subscriptions/listen stream: %s", self.name, exc)
            return
        self.clear_result_cache()  # updates may have been missed while disconnected
        try:
            if self._proto_era() != "legacy":
                self._proto_relisten(None)  # no-op while the listen thread re-listens by itself
                return
            with st.lock:
                uris = sorted(st.subs)
                st.legacy_subscribed.clear()
            for uri in uris:
                self._proto_session_request("resources/subscribe", {"uri": uri}, None)
                with st.lock:
                    st.legacy_subscribed.add(uri)
            if uris:
                st.restores += 1
        except MCPError as exc:
            log.warning("%s: restoring resource subscriptions failed: %s", self.name, exc)

    # ------------------------------------------------------------------ capabilities

    def client_capabilities(self) -> dict[str, Any]:
        """Capabilities declared to the server: only those whose handler was given."""
        caps: dict[str, Any] = {}
        if self.sampling_handler is not None:
            caps["sampling"] = {}
        if self.elicitation_handler is not None:
            caps["elicitation"] = {"form": {}, "url": {}}
        if self.roots is not None:
            caps["roots"] = {"listChanged": True}
        return caps

    # ------------------------------------------------------------------ paging + cache

    def _proto_credential(self) -> Any:
        """Who is asking, for private cache entries: the Client's ``credential`` (the
        authorization context the tool cache uses too), else its auth object, if any."""
        cred = getattr(self, "_cache_credential", None)
        if cred is not None:
            return cred
        auth = getattr(self, "auth", None)
        if auth is None:
            return "anonymous"
        return getattr(auth, "cache_key", None) or id(auth)

    def _proto_cached_request(
        self, method: str, params: Mapping[str, Any] | None, timeout: float | None, refresh: bool = False
    ) -> Any:
        st = self._pstate()
        pkey = _key(params)
        cred = self._proto_credential()
        gen = st.gen
        if self.cache_results and not refresh:
            now = time.monotonic()
            with st.lock:
                for scope in (cred, None):
                    hit = st.cache.get((scope, method, pkey))
                    if hit is not None:
                        if hit[0] > now:
                            return hit[1]
                        del st.cache[(scope, method, pkey)]
        result = self.request(method, params, timeout=timeout)  # type: ignore[attr-defined]
        ttl = getattr(result, "ttl_ms", None)
        if self.cache_results and ttl:
            scope = None if getattr(result, "cache_scope", None) == "public" else cred
            with st.lock:
                if st.gen != gen:
                    return result  # a change was announced while this was in flight
                if len(st.cache) > 1024:
                    st.cache.clear()
                st.cache[(scope, method, pkey)] = (time.monotonic() + ttl / 1000.0, result)
        return result

    def _proto_invalidate(self, methods: Iterable[str], uri: str | None = None) -> None:
        st = self._pstate()
        methods = tuple(methods)
        with st.lock:
            st.gen += 1
            for k in [k for k in st.cache if k[1] in methods]:
                if uri is None or json.loads(k[2]).get("uri") == uri:
                    del st.cache[k]

    def clear_result_cache(self) -> None:
        """Forget every cached result (resources, prompts, resource contents, tool schemas)."""
        st = self._pstate()
        with st.lock:
            st.gen += 1
            st.cache.clear()
            st.tools = None
            st.tools_missing.clear()

    def _proto_paged(self, method: str, attr: str, timeout: float | None, refresh: bool = False) -> list[Any]:
        def fetch(cursor: str | None) -> Any:
            return self._proto_cached_request(method, {"cursor": cursor} if cursor else None, timeout, refresh)

        return [item for page in paginate(fetch, server=self.name, method=method) for item in getattr(page, attr)]

    # ------------------------------------------------------------------ resources

    def list_resources(self, *, timeout: float | None = None, refresh: bool = False) -> list[Resource]:
        """Every resource the server lists, following ``nextCursor`` across pages
        (``refresh=True``: ask the server even if a cached list is still fresh)."""
        return self._proto_paged("resources/list", "resources", timeout, refresh)

    def list_resource_templates(self, *, timeout: float | None = None, refresh: bool = False) -> list[ResourceTemplate]:
        """Every resource template, following ``nextCursor`` across pages."""
        return self._proto_paged("resources/templates/list", "resource_templates", timeout, refresh)

    def read_resource(self, uri: str, *, timeout: float | None = None, refresh: bool = False) -> ReadResourceResult:
        """Read one resource.

        Args:
            uri: the resource's URI (a listed one or one matching a template).
            timeout: seconds to wait.
            refresh: read from the server even if a cached copy (modern ``ttlMs``) is
                still fresh.

        Returns:
            Its contents; ``.text`` joins the text items, ``.blob`` decodes the blobs.

        Raises:
            ResourceNotFound: the server has no such resource (-32602, or -32002 from
                older servers).
        """
        try:
            return self._proto_cached_request("resources/read", {"uri": uri}, timeout, refresh)  # type: ignore[no-any-return]
        except ResourceNotFound:
            raise
        except InvalidParams as exc:
            raise ResourceNotFound(exc.message, code=exc.code, data=exc.data, uri=uri) from None

    # ------------------------------------------------------------------ prompts

    def list_prompts(self, *, timeout: float | None = None, refresh: bool = False) -> list[Prompt]:
        """Every prompt the server offers, following ``nextCursor`` across pages."""
        return self._proto_paged("prompts/list", "prompts", timeout, refresh)

    def get_prompt(
        self, name: str, arguments: Mapping[str, Any] | None = None, *, timeout: float | None = None
    ) -> GetPromptResult:
        """Render a prompt with its arguments (values are sent as strings)."""
        params: dict[str, Any] = {"name": name}
        if arguments:
            params["arguments"] = {k: v if isinstance(v, str) else json.dumps(v) for k, v in arguments.items()}
        return self.request("prompts/get", params, timeout=timeout)  # type: ignore[attr-defined,no-any-return]

    # ------------------------------------------------------------------ completion

    def complete(
        self,
        ref: Prompt | ResourceTemplate | Mapping[str, Any] | str,
        argument: Mapping[str, Any] | tuple[str, str],
        *,
        context: Mapping[str, Any] | None = None,
        timeout: float | None = None,
    ) -> Completion:
        """Ask for completions of one argument of a prompt or resource template.

        Args:
            ref: a :class:`Prompt`, a :class:`ResourceTemplate`, a wire reference
                (``{"type": "ref/prompt", "name": ...}``), a prompt name, or a URI
                template (a string containing ``://`` or ``{``).
            argument: ``(name, partial_value)`` or ``{"name": ..., "value": ...}``.
            context: the values of arguments already chosen (``{"arg": "value"}``).
            timeout: seconds to wait.

        Returns:
            The completion values (``values``, ``total``, ``has_more``).
        """
        if isinstance(ref, Prompt):
            wire_ref: dict[str, Any] = {"type": "ref/prompt", "name": ref.name}
        elif isinstance(ref, ResourceTemplate):
            wire_ref = {"type": "ref/resource", "uri": ref.uri_template}
        elif isinstance(ref, str):
            if "://" in ref or "{" in ref:
                wire_ref = {"type": "ref/resource", "uri": ref}
            else:
                wire_ref = {"type": "ref/prompt", "name": ref}
        else:
            wire_ref = dict(ref)
        if isinstance(argument, tuple):
            arg = {"name": argument[0], "value": argument[1]}
        else:
            arg = {"name": argument["name"], "value": argument.get("value", "")}
        params: dict[str, Any] = {"ref": wire_ref, "argument": arg}
        if context:
            nested = context.get("arguments")
            inner: Mapping[str, Any] = nested if isinstance(nested, Mapping) else context
            params["context"] = {"arguments": {k: str(v) for k, v in inner.items()}}
        res: CompleteResult = self.request("completion/complete", params, timeout=timeout)  # type: ignore[attr-defined]
        return res.completion

    # ------------------------------------------------------------------ logging

    def set_log_level(self, level: str, *, timeout: float | None = None) -> None:
        """Ask the server for log messages at ``level`` and above.

        Legacy era: ``logging/setLevel``. Modern era: the level rides every request's
        ``_meta`` (``io.modelcontextprotocol/logLevel``).
        """
        if level not in _LEVELS:
            raise ValueError(f"unknown log level {level!r}; one of {', '.join(_LEVELS)}")
        self.log_level = level
        if self._proto_era() == "legacy":
            self._proto_session_request("logging/setLevel", {"level": level}, timeout)
            return
        # modern: connections copy the level into their _meta when they are opened; the
        # session connection is updated here (see the report for the Client change that
        # reads ``log_level`` at send time on every connection)
        primary = getattr(self, "_primary_connection", None)
        conn = primary() if primary is not None else None
        if conn is not None and getattr(conn, "meta", None) is not None:
            conn.meta = {**conn.meta, _META_LOG: level}

    def _proto_log_message(self, params: Mapping[str, Any]) -> None:
        if self.logging_handler is not None:
            self.logging_handler(params)
            return
        level = _LEVELS.get(str(params.get("level", "info")), logging.INFO)
        logger = self._server_logger
        if params.get("logger"):
            logger = logger.getChild(str(params["logger"]))
        logger.log(level, "%s", params.get("data"))

    # ------------------------------------------------------------------ notifications

    def _protocol_notification(self, method: str, params: Mapping[str, Any] | None) -> None:
        """Called (on the worker) for every notification before user handlers."""
        try:
            self._proto_route_notification(method, params or {})
        except Exception:
            log.exception("%s: handling %s failed", self.name, method)

    def _proto_route_notification(self, method: str, params: Mapping[str, Any]) -> None:
        if method == "notifications/message":
            self._proto_log_message(params)
            return
        meta = params.get("_meta") if isinstance(params.get("_meta"), Mapping) else None
        sid = meta.get(SUBSCRIPTION_ID) if meta else None
        if method == "notifications/subscriptions/acknowledged":
            self._proto_acknowledged(sid, params.get("notifications") or {})
            return
        if method == "notifications/resources/updated" or method in _LIST_CHANGED:
            if sid is not None and not self._proto_admit(sid, method, params):
                return
            self._proto_event(method, params)

    def _proto_event(self, method: str, params: Mapping[str, Any]) -> None:
        st = self._pstate()
        if method == "notifications/resources/updated":
            uri = str(params.get("uri", ""))
            self._proto_invalidate(("resources/read",), uri)
            with st.lock:
                callbacks = list(st.subs.get(uri, ()))
            arg = uri
        else:
            kind = _LIST_CHANGED[method]
            self._proto_invalidate(_INVALIDATES[kind])
            if kind == "tools":
                with st.lock:
                    st.tools = None
                    st.tools_missing.clear()
            with st.lock:
                callbacks = list(st.list_cbs[kind])
            arg = kind
        for cb in callbacks:
            try:
                cb(arg)
            except Exception:
                log.exception("%s: subscription callback %r raised", self.name, cb)

    # ------------------------------------------------------------------ subscriptions

    def subscribe(self, uri: str, callback: Callable[[str], None], *, timeout: float | None = None) -> Subscription:
        """Call ``callback(uri)`` (on the worker) whenever the server says ``uri`` changed.

        Legacy era: ``resources/subscribe``. Modern era: a ``subscriptions/listen``
        stream, re-opened with the new set of URIs; returns once the server has
        acknowledged it. Several callbacks may watch one URI; one that raises is logged
        and harms no other.

        Returns:
            A :class:`Subscription`; ``close()`` it (or call :meth:`unsubscribe`) to stop.

        Raises:
            RemoteError: the server refused the subscription (nothing is kept), or the
                client was made with ``push_updates=False`` (code -32601).
        """
        if not getattr(self, "push_updates", True):
            raise RemoteError(
                f"{self.name}: push updates are off for this client (push_updates=False, e.g. the "
                "professional profile): resources are re-read when their TTL runs out",
                code=METHOD_NOT_FOUND,
            )
        st = self._pstate()
        with st.lock:
            first = uri not in st.subs
            st.subs.setdefault(uri, []).append(callback)
        if first:
            try:
                if self._proto_era() == "legacy":
                    self._proto_session_request("resources/subscribe", {"uri": uri}, timeout)
                    with st.lock:
                        st.legacy_subscribed.add(uri)
                else:
                    self._proto_relisten(timeout)
            except BaseException:
                with st.lock:
                    cbs = st.subs.get(uri, [])
                    if callback in cbs:
                        cbs.remove(callback)
                    if not cbs:
                        st.subs.pop(uri, None)
                raise
        return Subscription(self, uri, callback)

    def unsubscribe(self, uri: str, callback: Callable[[str], None] | None = None, *, timeout: float | None = None) -> None:
        """Stop ``callback`` (or every callback, if None) watching ``uri``."""
        st = self._pstate()
        with st.lock:
            cbs = st.subs.get(uri)
            if cbs is None:
                return
            if callback is None:
                cbs.clear()
            elif callback in cbs:
                cbs.remove(callback)
            last = not cbs
            if last:
                del st.subs[uri]
            was = uri in st.legacy_subscribed
            st.legacy_subscribed.discard(uri)
        if not last or getattr(self, "closed", False):
            return
        if self._proto_era() == "legacy":
            if was:
                try:
                    self._proto_session_request("resources/unsubscribe", {"uri": uri}, timeout)
                except MCPError as exc:
                    log.debug("%s: resources/unsubscribe %s failed: %s", self.name, uri, exc)
        else:
            self._proto_relisten(timeout)

    def on_list_changed(self, kind: str, callback: Callable[[str], None], *, timeout: float | None = None) -> None:
        """Call ``callback(kind)`` whenever the server's ``kind`` list changes.

        Args:
            kind: ``"tools"``, ``"prompts"`` or ``"resources"``.
            callback: runs on the worker; cached lists of that kind are dropped first.
            timeout: modern era, connected: how long to wait for the listen stream's
                acknowledgement.

        Registering before the first connect does not connect; the legacy era then
        catches the server's first announcements (e.g. tools registered after
        ``notifications/initialized``).
        """
        if kind not in LIST_KINDS:
            raise ValueError(f"kind must be one of {LIST_KINDS}, not {kind!r}")
        st = self._pstate()
        with st.lock:
            first = not st.list_cbs[kind]
            st.list_cbs[kind].append(callback)
        if first and self._proto_live_era() == "modern":
            try:
                self._proto_relisten(timeout)
            except BaseException:
                with st.lock:
                    if callback in st.list_cbs[kind]:
                        st.list_cbs[kind].remove(callback)
                raise

    def remove_list_changed(self, kind: str, callback: Callable[[str], None]) -> None:
        """Stop a callback given to :meth:`on_list_changed`."""
        st = self._pstate()
        with st.lock:
            cbs = st.list_cbs.get(kind, [])
            if callback in cbs:
                cbs.remove(callback)
            last = not cbs
        if last and self._proto_live_era() == "modern" and not getattr(self, "closed", False):
            self._proto_relisten(None)

    # -- modern: subscriptions/listen

    def _proto_wanted_filter(self) -> dict[str, Any]:
        st = self._pstate()
        with st.lock:
            filt: dict[str, Any] = {_FILTER_KEYS[k]: True for k in LIST_KINDS if st.list_cbs[k]}
            if st.subs:
                filt["resourceSubscriptions"] = sorted(st.subs)
        return filt

    def _proto_relisten(self, timeout: float | None) -> None:
        """Make the open listen stream carry exactly the wanted filter."""
        st = self._pstate()
        with st.listen_lock:
            filt = self._proto_wanted_filter()
            current = st.attempt
            if current is not None and current.filter == filt and current.error is None and not current.stale:
                return
            old = current
            if not filt:
                st.attempt = None
                if old is not None:
                    self._proto_retire(old)
                return
            attempt = _Attempt(filt)
            st.attempt = attempt
            threading.Thread(
                target=self._proto_listen_loop, args=(attempt,), name=f"mcpsync-listen-{self.name}", daemon=True
            ).start()
            if self._proto_on_event_lane():
                # called from a callback: the acknowledgement is delivered on this very
                # thread, so waiting for it here would only time out
                if old is not None:
                    old.stale = True
                    self._proto_retire_when_acked(attempt, old)
                return
            wait = self.timeouts.request if timeout is None else timeout  # type: ignore[attr-defined]
            failure: BaseException | None = None
            if not attempt.acked.wait(wait):
                failure = RequestTimeout(
                    f"{self.name} did not acknowledge subscriptions/listen within {wait:g} s",
                    method="subscriptions/listen",
                    timeout=wait,
                )
            elif attempt.error is not None:
                failure = attempt.error
            if failure is not None:
                # keep the stream that worked; the caller rolls its registration back
                st.attempt = old
                self._proto_retire(attempt)
                raise failure
            if old is not None:
                self._proto_retire(old)

    def _proto_on_event_lane(self) -> bool:
        worker = getattr(self, "_worker", None)
        return getattr(worker, "_serial_thread", None) is threading.current_thread()

    def _proto_retire_when_acked(self, new: _Attempt, old: _Attempt) -> None:
        def wait() -> None:
            if new.acked.wait(self.timeouts.request):  # type: ignore[attr-defined]
                self._proto_retire(old)

        threading.Thread(target=wait, name=f"mcpsync-listen-retire-{self.name}", daemon=True).start()

    def _stop_listening(self) -> None:
        """End the modern listen stream (for ``Client.close()``, before the connections go)."""
        st = self._pstate()
        with st.listen_lock:
            attempt, st.attempt = st.attempt, None
        if attempt is not None:
            self._proto_retire(attempt)

    def _proto_retire(self, attempt: _Attempt) -> None:
        attempt.stale = True
        st = self._pstate()
        with st.lock:
            if attempt.id is not None:
                st.live.pop(attempt.id, None)
            rid = attempt.id
        if rid is None:
            return
        # end the old request locally too (its thread exits), when the channel can
        cancel = getattr(attempt.channel, "cancel", None)
        try:
            if cancel is not None:
                cancel(rid, "subscription replaced")
            elif attempt.channel is not None:
                attempt.channel.notify("notifications/cancelled", {"requestId": rid, "reason": "subscription replaced"})
        except MCPError:
            pass

    def _proto_listen_loop(self, attempt: _Attempt) -> None:
        st = self._pstate()
        backoff = 0.1
        first = True
        while not attempt.stale and not getattr(self, "closed", False):
            with st.lock:
                attempt.id = None
                st.awaiting.append(attempt)
            try:
                self._proto_session_request(
                    "subscriptions/listen", {"notifications": attempt.filter}, self.listen_timeout, attempt
                )
                backoff = 0.1  # ended gracefully: listen again
            except RequestTimeout:
                backoff = 0.1
            except (ConnectionClosed, NetworkError) as exc:
                if getattr(self, "closed", False):
                    break
                log.debug("%s: listen stream dropped (%s); re-listening", self.name, exc)
                time.sleep(backoff)
                backoff = min(backoff * 2, 5.0)
            except Cancelled:
                break  # retired: a newer stream replaced this one
            except MCPError as exc:
                attempt.error = exc
                attempt.acked.set()
                break
            finally:
                with st.lock:
                    if attempt in st.awaiting:
                        st.awaiting.remove(attempt)
                    if attempt.id is not None:
                        st.live.pop(attempt.id, None)
            if not first and not attempt.stale:
                # events may have been missed while no stream was open: cached lists are stale
                self._proto_invalidate(("resources/list", "resources/templates/list", "prompts/list", "resources/read"))
            first = False
        with st.lock:
            if attempt in st.awaiting:
                st.awaiting.remove(attempt)

    def _proto_acknowledged(self, sid: Any, honored: Mapping[str, Any]) -> None:
        st = self._pstate()
        with st.lock:
            if not st.awaiting:
                log.debug("%s: unexpected subscriptions acknowledgement %r", self.name, sid)
                return
            attempt = st.awaiting.pop(0)
            st.acks += 1
            attempt.id = sid
            attempt.honored = dict(honored)
            if not attempt.stale:
                st.live[sid] = attempt
        attempt.acked.set()
        if attempt.stale:
            self._proto_retire(attempt)

    def _proto_admit(self, sid: Any, method: str, params: Mapping[str, Any]) -> bool:
        """Only streams this client still listens on, and only what they acknowledged."""
        st = self._pstate()
        with st.lock:
            attempt = st.live.get(sid)
        if attempt is None:
            return False
        honored = attempt.honored
        if method == "notifications/resources/updated":
            return params.get("uri") in (honored.get("resourceSubscriptions") or ())
        return honored.get(_FILTER_KEYS[_LIST_CHANGED[method]]) is True

    # ------------------------------------------------------------------ roots

    def set_roots(self, roots: Sequence[Mapping[str, Any]] | Callable[[], Sequence[Mapping[str, Any]]]) -> None:
        """Replace the roots; a legacy-era server is told (``notifications/roots/list_changed``).

        The roots capability is declared at connect time, so a client created without
        ``roots`` keeps not offering them to an already connected server.
        """
        declared = self.roots is not None
        self.roots = roots
        if declared and not getattr(self, "closed", False) and self._proto_era() == "legacy":
            self.notify("notifications/roots/list_changed", None)  # type: ignore[attr-defined]

    # ------------------------------------------------------------------ client features

    def _proto_client_feature(self, method: str, params: Mapping[str, Any]) -> Any:
        """The answer to ``roots/list``, ``sampling/createMessage`` or ``elicitation/create``.

        Raises:
            RemoteError: -32601 (not declared), -32001 (handler timed out), or the
                handler's own RemoteError.
        """
        if method == "ping":
            return {}
        if method == "roots/list":
            if self.roots is None:
                raise RemoteError("this client declared no roots capability", code=METHOD_NOT_FOUND)
            roots = self.roots
            if callable(roots):
                roots = self._proto_bounded(roots, None, "roots")
            return {"roots": [{"uri": r} if isinstance(r, str) else dict(_plain(r)) for r in roots]}
        if method == "sampling/createMessage":
            if self.sampling_handler is None:
                raise RemoteError("this client declared no sampling capability", code=METHOD_NOT_FOUND)
            return _plain(self._proto_bounded(self.sampling_handler, params, "sampling"))
        if method == "elicitation/create":
            if self.elicitation_handler is None:
                raise RemoteError("this client declared no elicitation capability", code=METHOD_NOT_FOUND)
            return _fill_defaults(params, _plain(self._proto_bounded(self.elicitation_handler, params, "elicitation")))
        raise RemoteError(f"method not supported by this client: {method}", code=METHOD_NOT_FOUND)

    def _proto_bounded(self, fn: Callable[..., Any], params: Any, what: str) -> Any:
        """Run a user handler with a time bound (on its own daemon thread)."""
        limit = self.handler_timeout
        if limit is None:
            limit = self.timeouts.request  # type: ignore[attr-defined]
        box: dict[str, Any] = {}
        done = threading.Event()

        def run() -> None:
            try:
                box["result"] = fn() if params is None else fn(params)
            except BaseException as exc:  # handed to the waiting thread
                box["error"] = exc
            finally:
                done.set()

        threading.Thread(target=run, name=f"mcpsync-{what}-handler", daemon=True).start()
        if not done.wait(limit):
            raise RemoteError(f"the client's {what} handler did not answer within {limit:g} s", code=REQUEST_TIMEOUT_CODE)
        if "error" in box:
            raise box["error"]
        return box["result"]

    def _on_request(self, method: str, params: Mapping[str, Any] | None) -> Any:
        """Answer a server→client request (legacy era); runs on the worker pool."""
        return self._proto_client_feature(method, params or {})

    # ------------------------------------------------------------------ MRTR

    def _incomplete_result(
        self,
        method: str,
        params: Mapping[str, Any] | None,
        raw: Any,
        result_type: str,
        *,
        timeout: float,
        progress: Any,
        connection: Any = None,
    ) -> Any:
        """A modern-era result whose ``resultType`` is not ``complete``: answer
        ``input_required`` by retrying with ``inputResponses`` and ``requestState``.

        Each round is a new request (new id). With ``connection`` (the one that got the
        interim result) the rounds stay on it, so a server whose ``requestState`` is
        sealed per process still recognises it.
        """
        if result_type != "input_required":
            raise ProtocolError(
                f"{self.name} answered {method} with resultType {result_type!r}, which this client cannot handle",
                code=-32600,
            )
        if getattr(_mrtr, "active", False):
            return _Pending(raw)
        _mrtr.active = True
        try:
            current = raw
            for _round in range(self.max_input_rounds):
                ir = decode_input_required(current)
                if not ir.input_requests and ir.request_state is None:
                    raise ProtocolError(
                        f"{self.name} answered {method} with input_required but neither inputRequests nor requestState",
                        code=-32600,
                    )
                responses = self._proto_answer_inputs(method, ir.input_requests or {})
                retry = {k: v for k, v in (params or {}).items() if k not in ("inputResponses", "requestState")}
                if responses:
                    retry["inputResponses"] = responses
                if ir.request_state is not None:
                    retry["requestState"] = ir.request_state
                if connection is not None and hasattr(self, "_request_on"):
                    result = self._request_on(connection, method, retry, timeout, progress)
                else:
                    result = self.request(method, retry, timeout=timeout, progress=progress)  # type: ignore[attr-defined]
                if not isinstance(result, _Pending):
                    return result
                current = result.raw
            raise InputRequestError(
                f"{self.name} still asked for input after {self.max_input_rounds} rounds of {method}", code=-32600
            )
        finally:
            _mrtr.active = False

    def _proto_answer_inputs(self, method: str, requests: Mapping[str, Any]) -> dict[str, Any]:
        answers: dict[str, Any] = {}
        _mrtr.active = False  # a handler may call this client (and meet MRTR) itself
        try:
            for key, req in requests.items():
                req = req if isinstance(req, Mapping) else {}
                inner = str(req.get("method", ""))
                try:
                    answers[key] = self._proto_client_feature(inner, req.get("params") or {})
                except RemoteError as exc:
                    raise InputRequestError(
                        f"{self.name} needs {inner or 'input'} to finish {method}, and this client could not answer: "
                        f"{exc.message}",
                        code=exc.code,
                        request=inner,
                    ) from None
                except MCPError:
                    raise
                except Exception as exc:
                    log.exception("%s: %s handler raised", self.name, inner)
                    raise InputRequestError(
                        f"the client's handler for {inner} failed while {self.name} ran {method}: {exc}",
                        code=-32603,
                        request=inner,
                    ) from exc
        finally:
            _mrtr.active = True
        return answers

    # ------------------------------------------------------------------ tools: schema + tasks

    def _proto_tool_info(self, name: str, timeout: float | None = None) -> Tool | None:
        """The listed tool ``name``: from the Client's tool cache when it has one, else one
        ``tools/list`` per client, refreshed on list_changed."""
        get_tool = getattr(self, "get_tool", None)
        if get_tool is not None:
            return get_tool(name, timeout=timeout)  # type: ignore[no-any-return]  # bounded, never raises
        st = self._pstate()
        with st.lock:
            tools = st.tools
            missing = name in st.tools_missing
        if tools is not None and (name in tools or missing):
            return tools.get(name)
        try:
            listed = {t.name: t for t in self.list_tools(timeout=timeout)}  # type: ignore[attr-defined]
        except RemoteError:  # no tools here: nothing to check against
            listed = {}
        with st.lock:
            st.tools = listed
            if name not in listed:
                st.tools_missing.add(name)
        return listed.get(name)

    def check_tool_result(self, tool: Tool | str, result: CallToolResult) -> CallToolResult:
        """Validate ``result.structured_content`` against the tool's ``outputSchema``.

        ``isError`` results are not checked (they describe a failure in ``content``).

        Raises:
            OutputSchemaError: the structured content does not match (a ProtocolError).
        """
        info = self._proto_tool_info(tool) if isinstance(tool, str) else tool
        if info is None or info.output_schema is None or result.is_error:
            return result
        validate_output(info.output_schema, result.structured_content, tool=info.name)
        return result

    def call_tool_task(
        self,
        name: str,
        arguments: Mapping[str, Any] | None = None,
        *,
        ttl: int | None = None,
        timeout: float | None = None,
        meta: Mapping[str, Any] | None = None,
    ) -> Task:
        """Start a tool call as a task (``io.modelcontextprotocol/tasks``) and return its handle.

        Follow it with :meth:`get_task`, :meth:`wait_task` or :meth:`cancel_task`.

        Raises:
            ProtocolError: the server answered with a plain result instead of a task.
        """
        params: dict[str, Any] = {"name": name, "arguments": dict(arguments) if arguments else {}}
        params["task"] = {"ttl": ttl} if ttl is not None else {}
        if meta:
            params["_meta"] = dict(meta)
        res = self.request("tools/call", params, timeout=timeout)  # type: ignore[attr-defined]
        if isinstance(res, CreateTaskResult):
            return res.task
        raise ProtocolError(f"{self.name} ran {name} without creating a task", code=-32600, result=res)

    def get_task(self, task: Task | str, *, timeout: float | None = None) -> Task:
        """The task's current status (``tasks/get``)."""
        tid = task.task_id if isinstance(task, Task) else task
        return self.request("tasks/get", {"taskId": tid}, timeout=timeout)  # type: ignore[attr-defined,no-any-return]

    def cancel_task(self, task: Task | str, *, timeout: float | None = None) -> Task:
        """Ask the server to cancel the task (``tasks/cancel``)."""
        tid = task.task_id if isinstance(task, Task) else task
        return self.request("tasks/cancel", {"taskId": tid}, timeout=timeout)  # type: ignore[attr-defined,no-any-return]

    def list_tasks(self, *, timeout: float | None = None) -> list[Task]:
        """The tasks the server keeps for this client (``tasks/list``)."""

        def fetch(cursor: str | None) -> ListTasksResult:
            return self.request("tasks/list", {"cursor": cursor} if cursor else None, timeout=timeout)  # type: ignore[attr-defined,no-any-return]

        return [task for page in paginate(fetch, server=self.name, method="tasks/list") for task in page.tasks]

    def wait_task(self, task: Task | str, *, timeout: float | None = None) -> CallToolResult:
        """Poll ``tasks/get`` until the task ends (or needs input), then fetch ``tasks/result``.

        Args:
            task: the handle (or its id).
            timeout: seconds for the whole wait (default: the request timeout). On expiry
                the task is cancelled and :class:`RequestTimeout` is raised.

        Raises:
            Cancelled: the task was cancelled.
            RemoteError: the task failed with an error.
        """
        limit = self.timeouts.request if timeout is None else timeout  # type: ignore[attr-defined]
        deadline = time.monotonic() + limit
        current = task if isinstance(task, Task) else self.get_task(task, timeout=limit)
        while current.status not in TERMINAL_TASK_STATUSES and current.status != "input_required":
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                try:
                    self.cancel_task(current, timeout=2.0)
                except MCPError as exc:
                    log.debug("%s: tasks/cancel failed: %s", self.name, exc)
                raise RequestTimeout(
                    f"task {current.task_id} on {self.name} did not finish within {limit:g} s",
                    method="tasks/get",
                    timeout=limit,
                )
            interval = (current.poll_interval or 1000) / 1000.0
            time.sleep(min(max(interval, 0.05), 5.0, remaining))
            current = self.get_task(current, timeout=max(deadline - time.monotonic(), 0.5))
        if current.status == "cancelled":
            raise Cancelled(f"task {current.task_id} on {self.name} was cancelled", task=current)
        remaining = max(deadline - time.monotonic(), 0.5)
        return self.request("tasks/result", {"taskId": current.task_id}, timeout=remaining)  # type: ignore[attr-defined,no-any-return]

    def _proto_url_prerequisites(self, exc: RemoteError) -> bool:
        """``-32042`` (URL elicitation required): show each URL elicitation to the
        handler (never fetching the link). True when every one was accepted."""
        data = exc.data if isinstance(exc.data, Mapping) else {}
        items = data.get("elicitations") or []
        if self.elicitation_handler is None or not items:
            return False
        for item in items:
            if not isinstance(item, Mapping):
                return False
            answer = self._proto_client_feature("elicitation/create", {**item, "mode": "url"})
            if not isinstance(answer, Mapping) or answer.get("action") != "accept":
                return False
        return True

    def _protocol_call_tool(
        self,
        name: str,
        arguments: Mapping[str, Any] | None = None,
        *,
        timeout: float | None = None,
        progress: Any = None,
        meta: Mapping[str, Any] | None = None,
        task: bool | None = None,
        validate: bool = True,
        definition: Any = _UNKNOWN,
        **request_kw: Any,
    ) -> CallToolResult | Task:
        """``tools/call`` with the protocol details: a task-only tool (``execution.taskSupport:
        "required"``) is run as a task and waited for; ``task=True`` returns the handle
        instead; the result is checked against the tool's ``outputSchema``; a
        ``-32042`` URL-elicitation-required error is shown to the elicitation handler
        and, when every URL was accepted, the call is retried once.

        Meant as the body of :meth:`Client.call_tool`; ``request_kw`` (e.g. ``tool=``,
        ``safe_to_retry=``) go to ``request()`` with the plain ``tools/call``.
        """
        if definition is not _UNKNOWN:
            info = definition  # the caller looked it up already (None: not listed)
        else:
            info = self._proto_tool_info(name, timeout) if (validate or task is None) else None
        support = ((info.execution or {}).get("taskSupport") if info is not None else None) or "forbidden"
        if task or (task is None and support == "required"):
            handle = self.call_tool_task(name, arguments, timeout=timeout, meta=meta)
            if task:
                return handle
            result: Any = self.wait_task(handle, timeout=timeout)
        else:
            params: dict[str, Any] = {"name": name, "arguments": dict(arguments) if arguments else {}}
            if meta:
                params["_meta"] = dict(meta)
            try:
                result = self.request("tools/call", params, timeout=timeout, progress=progress, **request_kw)  # type: ignore[attr-defined]
            except RemoteError as exc:
                if exc.code != URL_ELICITATION_REQUIRED or not self._proto_url_prerequisites(exc):
                    raise
                # every prerequisite was accepted: one retry of the same call
                result = self.request("tools/call", params, timeout=timeout, progress=progress, **request_kw)  # type: ignore[attr-defined]
            if isinstance(result, CreateTaskResult):
                result = self.wait_task(result.task, timeout=timeout)
        if validate and info is not None:
            self.check_tool_result(info, result)
        return result  # type: ignore[no-any-return]

