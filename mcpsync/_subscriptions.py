"""Resource subscriptions and list-changed callbacks, over both eras.

========================  ===================================  ====================================
feature                   legacy (≤ 2025-11-25)                modern (2026-07-28)
========================  ===================================  ====================================
``subscribe(uri, cb)``    ``resources/subscribe`` +            ``subscriptions/listen`` on a daemon
                          ``notifications/resources/updated``  thread, demultiplexed by
                                                               ``io.modelcontextprotocol/subscriptionId``
list-changed callbacks    ``notifications/*/list_changed``     the same notifications on the listen
                                                               stream (opted in per kind)
========================  ===================================  ====================================

:class:`Subscriptions` keeps what is watched for one Client, routes the notifications
about it (:meth:`Subscriptions.notification`, on the worker), and restores it on a new
session connection (:meth:`Subscriptions.restore`). Requests about session state go on
the Client's session connection, so the notifications they ask for come back there.
"""

from __future__ import annotations

import logging
import threading
from typing import Any, Callable, Mapping

from ._constants import META_SUBSCRIPTION_ID as SUBSCRIPTION_ID
from ._cache import ResultCache
from ._errors import METHOD_NOT_FOUND, Cancelled, ConnectionClosed, MCPError, NetworkError, RemoteError, RequestTimeout
from ._ports import Requester
from ._settings import Settings

__all__ = ["Subscription", "Subscriptions", "LIST_KINDS", "SUBSCRIPTION_ID"]

log = logging.getLogger("mcpsync.client")

#: The lists whose changes may be watched with ``Client.on_list_changed``.
LIST_KINDS = ("tools", "prompts", "resources")


LIST_CHANGED = {
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
_ALL_CACHED = ("resources/list", "resources/templates/list", "prompts/list", "resources/read")


class Subscription:
    """The handle ``Client.subscribe`` returns; ``close()`` unsubscribes.

    Also a context manager.
    """

    def __init__(self, subscriptions: "Subscriptions", uri: str, callback: Callable[[str], None]) -> None:
        self._subscriptions = subscriptions
        self.uri = uri
        self.callback = callback

    def close(self) -> None:
        self._subscriptions.unsubscribe(self.uri, self.callback, None)

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


class Subscriptions:
    """What one Client watches, and the listen stream that carries it (modern era).

    Args:
        settings: the Client's settings (name, request timeout).
        session: the session: its session connection carries subscriptions and listens.
        results: the Client's result cache (what a notification makes stale is dropped).
    """

    def __init__(self, settings: Settings, session: Requester, results: ResultCache) -> None:
        self.name = settings.name
        self.request_timeout = settings.timeouts.request
        self.push_updates = settings.push_updates
        self.settings = settings
        self.session = session
        self.results = results
        #: seconds one ``subscriptions/listen`` request is left open before it is re-sent
        self.listen_timeout = 120.0
        self.lock = threading.Lock()
        self.listen_lock = threading.Lock()
        self.subs: dict[str, list[Callable[[str], None]]] = {}
        self.list_cbs: dict[str, list[Callable[[str], None]]] = {k: [] for k in LIST_KINDS}
        self.legacy_subscribed: set[str] = set()
        self.attempt: _Attempt | None = None  # the newest listen
        self.awaiting: list[_Attempt] = []  # sent, not yet acknowledged (FIFO)
        self.live: dict[Any, _Attempt] = {}  # acknowledged, not cancelled
        self.restores = 0  # legacy subscriptions restored on a new session connection
        self.acks = 0  # listen streams acknowledged so far

    # ------------------------------------------------------------------ plumbing

    @property
    def _name(self) -> str:
        return self.name

    def _era(self) -> str:
        return self.session.facts().era

    def _live_era(self) -> str | None:
        """The era of the open session connection, or None before the first connect."""
        conn = self.session.primary
        session = conn.session if conn is not None else None
        return session.era if session is not None else None

    def request(self, method: str, params: Mapping[str, Any] | None, timeout: float | None, attempt: _Attempt | None = None) -> Any:
        """A request carrying session-scoped state, on the session connection (no retries)."""
        t = self.request_timeout if timeout is None else timeout
        session = self.session
        conn = session.primary_connection()
        if attempt is not None:
            attempt.channel = conn.channel
        return session.request_on(conn, method, params, t, None)

    # ------------------------------------------------------------------ public

    def subscribe(self, uri: str, callback: Callable[[str], None], timeout: float | None) -> Subscription:
        self.settings.need_lasting_session("subscribe()")
        if not self.push_updates:
            raise RemoteError(f"{self.name}: push updates are off for this client (push_updates=False, e.g. the "
                              "professional profile): resources are re-read when their TTL runs out", code=METHOD_NOT_FOUND)
        with self.lock:
            first = uri not in self.subs
            self.subs.setdefault(uri, []).append(callback)
        if first:
            try:
                if self._era() == "legacy":
                    self.request("resources/subscribe", {"uri": uri}, timeout)
                    with self.lock:
                        self.legacy_subscribed.add(uri)
                else:
                    self.relisten(timeout)
            except BaseException:
                with self.lock:
                    cbs = self.subs.get(uri, [])
                    if callback in cbs:
                        cbs.remove(callback)
                    if not cbs:
                        self.subs.pop(uri, None)
                raise
        return Subscription(self, uri, callback)

    def unsubscribe(self, uri: str, callback: Callable[[str], None] | None, timeout: float | None) -> None:
        with self.lock:
            cbs = self.subs.get(uri)
            if cbs is None:
                return
            if callback is None:
                cbs.clear()
            elif callback in cbs:
                cbs.remove(callback)
            last = not cbs
            if last:
                del self.subs[uri]
            was = uri in self.legacy_subscribed
            self.legacy_subscribed.discard(uri)
        if not last or self.session.closed:
            return
        if self._era() == "legacy":
            if was:
                try:
                    self.request("resources/unsubscribe", {"uri": uri}, timeout)
                except MCPError as exc:
                    log.debug("%s: resources/unsubscribe %s failed: %s", self._name, uri, exc)
        else:
            self.relisten(timeout)

    def on_list_changed(self, kind: str, callback: Callable[[str], None], timeout: float | None) -> None:
        self.settings.need_lasting_session("on_list_changed()")
        if kind not in LIST_KINDS:
            raise ValueError(f"kind must be one of {LIST_KINDS}, not {kind!r}")
        with self.lock:
            first = not self.list_cbs[kind]
            self.list_cbs[kind].append(callback)
        if first and self._live_era() == "modern":
            try:
                self.relisten(timeout)
            except BaseException:
                with self.lock:
                    if callback in self.list_cbs[kind]:
                        self.list_cbs[kind].remove(callback)
                raise

    def remove_list_changed(self, kind: str, callback: Callable[[str], None]) -> None:
        with self.lock:
            cbs = self.list_cbs.get(kind, [])
            if callback in cbs:
                cbs.remove(callback)
            last = not cbs
        if last and self._live_era() == "modern" and not self.session.closed:
            self.relisten(None)

    def restore(self, first: bool = False) -> None:
        """Called (on the worker) when the session connection was replaced: subscribe
        again. ``first``: the session's first connection, which has nothing to restore
        but may have to open the listen stream for callbacks registered before it."""
        if self.session.closed:
            return
        if first:
            with self.lock:
                wanted = bool(self.subs or any(self.list_cbs.values()))
            try:
                if wanted and self._era() == "modern":
                    self.relisten(None)
            except MCPError as exc:
                log.warning("%s: could not open the subscriptions/listen stream: %s", self._name, exc)
            return
        self.results.clear()  # updates may have been missed while disconnected
        try:
            if self._era() != "legacy":
                self.relisten(None)  # no-op while the listen thread re-listens by itself
                return
            with self.lock:
                uris = sorted(self.subs)
                self.legacy_subscribed.clear()
            for uri in uris:
                self.request("resources/subscribe", {"uri": uri}, None)
                with self.lock:
                    self.legacy_subscribed.add(uri)
            if uris:
                self.restores += 1
        except MCPError as exc:
            log.warning("%s: restoring resource subscriptions failed: %s", self._name, exc)

    def watching(self) -> tuple[tuple[str, ...], tuple[str, ...], bool, bool, int, int]:
        """(URIs subscribed, list kinds watched, a listen stream open, it acknowledged, listen
        acknowledgements so far, legacy restores so far): a consistent snapshot."""
        with self.lock:
            attempt = self.attempt
            return (tuple(sorted(self.subs)), tuple(k for k, cbs in self.list_cbs.items() if cbs), attempt is not None,
                    attempt is not None and attempt.acked.is_set(), self.acks, self.restores)

    def stop(self) -> None:
        """End the modern listen stream (for ``Client.close()``, before the connections go)."""
        with self.listen_lock:
            attempt, self.attempt = self.attempt, None
        if attempt is not None:
            self._retire(attempt)

    # ------------------------------------------------------------------ notifications

    def notification(self, method: str, params: Mapping[str, Any]) -> None:
        """Route one notification about subscriptions or lists (on the worker)."""
        meta = params.get("_meta") if isinstance(params.get("_meta"), Mapping) else None
        sid = meta.get(SUBSCRIPTION_ID) if meta else None
        if method == "notifications/subscriptions/acknowledged":
            self._acknowledged(sid, params.get("notifications") or {})
            return
        if method == "notifications/resources/updated" or method in LIST_CHANGED:
            if sid is not None and not self._admit(sid, method, params):
                return
            self._event(method, params)

    def notice(self, method: str, params: Mapping[str, Any] | None) -> None:
        """A notification as it is read (``Handlers.notice``: before the worker's lane): the
        cached results it makes stale are dropped at once."""
        if method == "notifications/resources/updated" and isinstance(params, Mapping):
            self.results.invalidate(("resources/read",), str(params.get("uri", "")))
        elif method in LIST_CHANGED and _INVALIDATES[LIST_CHANGED[method]]:
            self.results.invalidate(_INVALIDATES[LIST_CHANGED[method]])

    def _event(self, method: str, params: Mapping[str, Any]) -> None:
        # (the caches were dropped as the notification was read: notice)
        if method == "notifications/resources/updated":
            uri = str(params.get("uri", ""))
            with self.lock:
                callbacks = list(self.subs.get(uri, ()))
            arg = uri
        else:
            kind = LIST_CHANGED[method]
            with self.lock:
                callbacks = list(self.list_cbs[kind])
            arg = kind
        for cb in callbacks:
            try:
                cb(arg)
            except Exception:
                log.exception("%s: subscription callback %r raised", self._name, cb)

    def _acknowledged(self, sid: Any, honored: Mapping[str, Any]) -> None:
        with self.lock:
            if not self.awaiting:
                log.debug("%s: unexpected subscriptions acknowledgement %r", self._name, sid)
                return
            attempt = self.awaiting.pop(0)
            self.acks += 1
            attempt.id = sid
            attempt.honored = dict(honored)
            if not attempt.stale:
                self.live[sid] = attempt
        attempt.acked.set()
        if attempt.stale:
            self._retire(attempt)

    def _admit(self, sid: Any, method: str, params: Mapping[str, Any]) -> bool:
        """Only streams this client still listens on, and only what they acknowledged."""
        with self.lock:
            attempt = self.live.get(sid)
        if attempt is None:
            return False
        honored = attempt.honored
        if method == "notifications/resources/updated":
            return params.get("uri") in (honored.get("resourceSubscriptions") or ())
        return honored.get(_FILTER_KEYS[LIST_CHANGED[method]]) is True

    # ------------------------------------------------------------------ modern: subscriptions/listen

    def wanted_filter(self) -> dict[str, Any]:
        with self.lock:
            filt: dict[str, Any] = {_FILTER_KEYS[k]: True for k in LIST_KINDS if self.list_cbs[k]}
            if self.subs:
                filt["resourceSubscriptions"] = sorted(self.subs)
        return filt

    def relisten(self, timeout: float | None) -> None:
        """Make the open listen stream carry exactly the wanted filter."""
        with self.listen_lock:
            filt = self.wanted_filter()
            current = self.attempt
            if current is not None and current.filter == filt and current.error is None and not current.stale:
                return
            old = current
            if not filt:
                self.attempt = None
                if old is not None:
                    self._retire(old)
                return
            attempt = _Attempt(filt)
            self.attempt = attempt
            threading.Thread(
                target=self._listen_loop, args=(attempt,), name=f"mcpsync-listen-{self._name}", daemon=True
            ).start()
            if self.session.worker.on_serial_lane():
                # called from a callback: the acknowledgement is delivered on this very
                # thread, so waiting for it here would only time out
                if old is not None:
                    old.stale = True
                    self._retire_when_acked(attempt, old)
                return
            wait = self.request_timeout if timeout is None else timeout
            failure: BaseException | None = None
            if not attempt.acked.wait(wait):
                failure = RequestTimeout(
                    f"{self._name} did not acknowledge subscriptions/listen within {wait:g} s",
                    method="subscriptions/listen",
                    timeout=wait,
                )
            elif attempt.error is not None:
                failure = attempt.error
            if failure is not None:
                # keep the stream that worked; the caller rolls its registration back
                self.attempt = old
                self._retire(attempt)
                raise failure
            if old is not None:
                self._retire(old)

    def _retire_when_acked(self, new: _Attempt, old: _Attempt) -> None:
        def wait() -> None:
            if new.acked.wait(self.request_timeout):
                self._retire(old)

        threading.Thread(target=wait, name=f"mcpsync-listen-retire-{self._name}", daemon=True).start()

    def _retire(self, attempt: _Attempt) -> None:
        attempt.stale = True
        with self.lock:
            if attempt.id is not None:
                self.live.pop(attempt.id, None)
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

    def _listen_loop(self, attempt: _Attempt) -> None:
        session = self.session
        backoff = 0.1
        first = True
        while not attempt.stale and not session.closed:
            with self.lock:
                attempt.id = None
                self.awaiting.append(attempt)
            try:
                self.request("subscriptions/listen", {"notifications": attempt.filter}, self.listen_timeout, attempt)
                backoff = 0.1  # ended gracefully: listen again
            except RequestTimeout:
                backoff = 0.1
            except (ConnectionClosed, NetworkError) as exc:
                if session.closed:
                    break
                log.debug("%s: listen stream dropped (%s); re-listening", self._name, exc)
                session.stopping.wait(backoff)
                backoff = min(backoff * 2, 5.0)
            except Cancelled:
                break  # retired: a newer stream replaced this one
            except MCPError as exc:
                attempt.error = exc
                attempt.acked.set()
                break
            finally:
                with self.lock:
                    if attempt in self.awaiting:
                        self.awaiting.remove(attempt)
                    if attempt.id is not None:
                        self.live.pop(attempt.id, None)
            if not first and not attempt.stale:
                # events may have been missed while no stream was open: cached lists are stale
                self.results.invalidate(_ALL_CACHED)
            first = False
        with self.lock:
            if attempt in self.awaiting:
                self.awaiting.remove(attempt)
