"""What a connection's reader does with each message it read (the :class:`Dispatcher`'s
incoming side, mixed into it): an answer goes to the request waiting for it, a notification
to the worker's ordered lane (progress to its request's callback), a server→client request
to the worker's pool; an invalid or oversized message is counted and logged, and fails the
request it answers, if any.

While a reader has a message in hand (``_held``, see ``Dispatcher._lead``) and a signal
handler's exception could cut it short, the message's hand-over clears ``_held`` with no call
between the two (CPython runs signal handlers only at calls and backward jumps): the message
is then handed on exactly once, or, cut short before, goes back for the next reader. (A
notification may at worst be handed on twice, never lost; a server's request at worst lost,
never served twice.)
"""

from __future__ import annotations

import logging
import threading
import time
from typing import Any, Callable, Mapping

import msgspec

from ._channel import NotificationHandler, ProgressCallback, RequestHandler
from ._errors import (
    INTERNAL_ERROR, INVALID_REQUEST, METHOD_NOT_FOUND, MCPError, MessageTooLarge, ProtocolError, RemoteError,
    error_from_code,
)
from ._messages import Envelope, decode_envelope_unchecked, decode_params, encode, envelope_error, error_reply, oversized_id, response_id
from ._worker import Worker

__all__ = ["Incoming", "Pending"]

log = logging.getLogger("mcpsync.dispatcher")

_monotonic = time.monotonic


class Pending:
    """A request waiting for its answer: ``Pending()``, its fields set one by one (an
    ``__init__`` costs ~1,700 instructions; ``object.__new__(Pending)`` ~300 more than this)."""

    id: int
    method: str
    timeout: float
    deadline: float
    cap: float  # (set with progress: the most a progress notification may push the deadline to)
    progress: ProgressCallback | None = None
    lock: threading.Lock | None = None  # made when the caller must wait as a follower
    waiting = False
    signaled = False
    done = False
    result: Any = None
    error: BaseException | None = None



class Incoming:
    """The incoming side of a :class:`~mcpsync._dispatcher.Dispatcher` (its attributes,
    declared here, are set by its constructor)."""

    name: str
    worker: Worker
    request_timeout: float
    code_table: Mapping[int, type[RemoteError]] | None
    _mu: threading.Lock
    _pending: dict[Any, Pending]
    _held: bytes | None
    _received: Any
    _dropped: Any
    _dead: BaseException | None
    _closed: bool
    _on: tuple[NotificationHandler | None, RequestHandler | None, NotificationHandler | None]  # notification, request, notice
    _send: Callable[..., None]

    def _fail(self, slot: Pending, exc: BaseException) -> None:  # under self._mu: the call ends with exc
        slot.error = exc
        slot.done = True
        self._wake(slot)

    def _wake(self, slot: Pending) -> None:  # under self._mu
        if slot.waiting and not slot.signaled:
            slot.signaled = True
            slot.lock.release()  # type: ignore[union-attr]  # waiting implies a lock

    def _handle(self, data: bytes) -> None:
        """Count one message read and deliver it; an invalid one is logged and dropped."""
        next(self._received)
        try:
            env = decode_envelope_unchecked(data)
        except (msgspec.ValidationError, msgspec.DecodeError) as exc:
            self._drop_invalid(data, exc)
            return
        self._deliver(env, data)

    def _drop_invalid(self, data: bytes, exc: msgspec.ValidationError | msgspec.DecodeError) -> None:
        """Count and log a message that is not a valid JSON-RPC envelope. One shaped like an
        answer to a pending request (``"jsonrpc": "1.0"`` or none, or bytes that start like a
        response but do not parse) fails that request with :class:`ProtocolError` at once."""
        next(self._dropped)
        error = envelope_error(exc)
        rid = response_id(data)
        if isinstance(rid, str) and rid.isdigit():
            rid = int(rid)
        slot = None
        if rid is not None:
            with self._mu:
                slot = self._pending.pop(rid, None)
                if slot is not None:
                    self._fail(slot, ProtocolError(
                        f"{self.name} answered {slot.method} with an invalid JSON-RPC message: {error}",
                        code=getattr(error, "code", INVALID_REQUEST), method=slot.method))
        if slot is not None:
            log.warning("%s sent an invalid answer to %s: %s: %.200r", self.name, slot.method, error, data)
        else:
            log.warning("%s sent an invalid message (dropped): %s: %.200r", self.name, error, data)

    def _deliver(self, env: Envelope, data: bytes) -> None:
        if env.method is None:
            self._handle_response(env, data)
        elif env.id is None:
            self._handle_notification(env)
        else:
            self._held = None  # (a request is better lost than its handler run twice)
            self.worker.submit(self._serve_request, env)

    def _handle_response(self, env: Envelope, data: bytes) -> None:
        rid = env.id
        if isinstance(rid, str) and rid.isdigit():
            rid = int(rid)
        pending = self._pending
        with self._mu:
            slot = pending[rid] if rid is not None and rid in pending else None
            if slot is not None:
                err = env.error
                error: BaseException | None = None
                if err is not None:
                    if len(env.result):
                        error = ProtocolError(  # invalid JSON-RPC: the server is not well (the breaker counts it)
                            f"{self.name} answered {slot.method} with both a result and an error "
                            f"({err.code}: {err.message[:200]})", code=INVALID_REQUEST)
                    else:
                        error = error_from_code(err.code, err.message, err.data, method=slot.method, table=self.code_table)
                elif len(env.result) == 0:
                    error = ProtocolError(f"response to {slot.method} has neither result nor error", code=-32600)
                # handed on with no call until the wake (see _lead)
                del pending[rid]
                if error is None:
                    slot.result = env.result
                else:
                    slot.error = error
                slot.done = True
                self._held = None
                if slot.waiting and not slot.signaled:
                    slot.signaled = True
                    slot.lock.release()  # type: ignore[union-attr]  # waiting implies a lock
                return
            self._held = None
        next(self._dropped)
        if env.error is not None and rid is None:
            log.warning("%s reported an error: %s (%s)", self.name, env.error.message, env.error.code)
        else:
            log.warning("%s answered an unknown request id %r (dropped)", self.name, env.id)

    def _handle_notification(self, env: Envelope) -> None:
        method = env.method
        assert method is not None
        params = decode_params(env)
        notice = self._on[2]
        if notice is not None:
            try:
                notice(method, params)
            except Exception:
                log.exception("noticing %s from %s failed", method, self.name)
        if method == "notifications/progress" and isinstance(params, dict):
            token = params.get("progressToken")
            with self._mu:
                slot = self._pending.get(token)
                if slot is not None and slot.progress is not None:  # (only a request that gave a token)
                    slot.deadline = min(_monotonic() + slot.timeout, slot.cap)
            if slot is not None and slot.progress is not None:
                self.worker.serial(slot.progress, params.get("progress", 0), params.get("total"), params.get("message"))
                self._held = None  # (after: a notification is better delivered twice than lost)
                return
        handler = self._on[0]
        if handler is not None:
            self.worker.serial(handler, method, params)
        self._held = None

    def _serve_request(self, env: Envelope) -> None:
        handler = self._on[1]
        method = env.method or ""
        try:
            if handler is None:
                raise RemoteError(f"method not supported by this client: {method}", code=METHOD_NOT_FOUND)
            result = handler(method, decode_params(env))
            reply: dict[str, Any] = {"jsonrpc": "2.0", "id": env.id, "result": result if result is not None else {}}
        except RemoteError as exc:
            reply = error_reply(env.id, exc.code, exc.message, exc.data)
        except Exception as exc:
            log.exception("handler for %s raised", method)
            reply = error_reply(env.id, INTERNAL_ERROR, f"client handler failed: {exc}")
        if self._dead is None and not self._closed:
            try:
                self._send(encode(reply), self.request_timeout)
            except MCPError as exc:
                log.warning("could not answer %s request from %s: %s", method, self.name, exc)

    def _oversized(self, exc: MessageTooLarge) -> None:
        rid = oversized_id(getattr(exc, "head", b"") or b"", getattr(exc, "tail", b"") or b"")
        with self._mu:
            slot = self._pending.pop(rid, None) if rid is not None else None
            if slot is not None:
                self._fail(slot, MessageTooLarge(f"the answer to {slot.method} from {self.name} was too large: {exc}"))
                return
        next(self._dropped)
        log.warning("%s sent an oversized message (dropped): %s", self.name, exc)
