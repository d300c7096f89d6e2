"""One downstream connection relayed to one upstream MCP session, both ways."""

from __future__ import annotations

import logging
import threading
from typing import Any, Callable

import msgspec

from .._constants import META_VERSION
from .._errors import MCPError, MessageTooLarge, NetworkError
from .._messages import error_reply
from ..transports._base import Transport

__all__ = ["Relay", "normalise"]

log = logging.getLogger("mcpsync.bridge")

_json = msgspec.json.Decoder()
_encode = msgspec.json.encode
_POLL = 0.5
_META_VERSION = META_VERSION.encode()


def normalise(message: bytes) -> tuple[bytes | None, bytes | None]:
    """Check that ``message`` is one JSON object; return ``(message, None)`` or ``(None, error_reply)``.

    A message with raw newlines (pretty-printed JSON) is re-encoded compactly, because
    stdio framing is one message per line.
    """
    try:
        obj = _json.decode(message)
    except msgspec.DecodeError as exc:
        return None, _encode(error_reply(None, -32700, f"parse error: {exc}"))
    if not isinstance(obj, dict):
        return None, _encode(error_reply(None, -32600, "a message must be one JSON-RPC object"))
    if b"\n" in message or b"\r" in message:
        message = _encode(obj)
    return message, None


class Relay:
    """Pumps ``upstream`` messages into ``deliver`` on a thread; :meth:`forward` sends the other way.

    Args:
        upstream: a fresh, unconnected transport to the real server.
        deliver: sends one message downstream (called on the pump thread only).
        on_end: called once with a reason when the upstream ends on its own.
    """

    def __init__(self, upstream: Transport, deliver: Callable[[bytes], None], on_end: Callable[[str], None]) -> None:
        self.upstream = upstream
        self._deliver = deliver
        self._on_end = on_end
        self._closed = threading.Event()
        self._thread: threading.Thread | None = None
        self._close_lock = threading.Lock()
        self._done = False
        self._version_known = False
        self._init_ids: set[Any] = set()

    def open(self, timeout: float) -> None:
        self.upstream.connect(timeout)
        self._thread = threading.Thread(target=self._pump, name="mcpsync-bridge-pump", daemon=True)
        self._thread.start()

    def forward(self, message: bytes) -> bytes | None:
        """Send one downstream message upstream; returns an error reply for the sender, if any."""
        msg, err = normalise(message)
        if msg is None:
            return err
        if not self._version_known:
            self._watch_version(msg)
        self.upstream.send(msg)
        return None

    # The upstream transport may need the protocol version (HTTP sends it as a header):
    # learn it from the relayed traffic, as a client would.
    def _watch_version(self, msg: bytes) -> None:
        if b'"initialize"' in msg or _META_VERSION in msg:
            try:
                obj = _json.decode(msg)
            except msgspec.DecodeError:
                return
            if obj.get("method") == "initialize" and "id" in obj:
                self._init_ids.add(obj["id"])
                return
            meta = (obj.get("params") or {}).get("_meta") if isinstance(obj.get("params"), dict) else None
            version = meta.get(_META_VERSION.decode()) if isinstance(meta, dict) else None
            if isinstance(version, str):
                self._set_version(version)

    def _set_version(self, version: str) -> None:
        self._version_known = True
        try:
            self.upstream.set_protocol_version(version)
        except Exception:  # noqa: BLE001
            log.debug("upstream refused protocol version %s", version, exc_info=True)

    def _watch_reply(self, msg: bytes) -> None:
        if b'"protocolVersion"' not in msg:
            return
        try:
            obj = _json.decode(msg)
        except msgspec.DecodeError:
            return
        if isinstance(obj, dict) and obj.get("id") in self._init_ids:
            self._init_ids.discard(obj.get("id"))
            version = (obj.get("result") or {}).get("protocolVersion")
            if isinstance(version, str):
                self._set_version(version)

    def closed(self) -> bool:
        return self._closed.is_set()

    def close(self) -> None:
        """Close the upstream; a second caller waits until the first has finished."""
        self._closed.set()
        with self._close_lock:
            if self._done:
                return
            try:
                self.upstream.close()
            except Exception:  # noqa: BLE001
                log.exception("closing the upstream failed")
            t = self._thread
            if t is not None and t is not threading.current_thread():
                t.join(2.0)
            self._done = True

    def _pump(self) -> None:
        receive = self.upstream.receive
        reason = "the upstream server closed the connection"
        try:
            while not self._closed.is_set():
                try:
                    msg = receive(_POLL)
                except MessageTooLarge as exc:
                    log.warning("dropped an oversized upstream message: %s", exc)
                    continue
                except NetworkError as exc:
                    reason = f"upstream ended: {exc}"
                    break
                if msg is None:
                    continue
                if self._init_ids:
                    self._watch_reply(msg)
                try:
                    self._deliver(msg)
                except Exception as exc:  # noqa: BLE001 - the downstream is gone
                    reason = f"downstream gone: {exc}"
                    break
        except MCPError as exc:
            reason = f"upstream failed: {exc}"
        if not self._closed.is_set():
            try:
                self._on_end(reason)
            except Exception:  # noqa: BLE001
                log.exception("ending the downstream failed")
