"""The MCP protocol surface beyond tools: resources, prompts, completion, logging,
subscriptions, client features (sampling, elicitation, roots) and the modern era's
multi-round-trip requests (MRTR).

:class:`ProtocolMixin` is a base of :class:`~mcpsync.Client`; it relies on the Client's
``request()``, ``notify()``, handler attributes and ``name``, and provides the hooks the
Client calls: ``client_capabilities()``, ``_protocol_notification()``, ``_on_request()``
and ``_incomplete_result()``.
"""

from __future__ import annotations

import logging
from typing import Any, Mapping

import msgspec

from ._errors import METHOD_NOT_FOUND, ProtocolError, RemoteError

__all__ = ["ProtocolMixin"]

log = logging.getLogger("mcpsync.client")


class ProtocolMixin:
    """MCP methods and server→client features, shared by both eras."""

    name: str
    sampling_handler: Any
    elicitation_handler: Any
    roots: Any
    logging_handler: Any
    _server_logger: logging.Logger

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

    def _protocol_notification(self, method: str, params: Mapping[str, Any] | None) -> None:
        """Called (on the worker) for every notification before user handlers."""
        if method == "notifications/message":
            self._log_message(params or {})

    def _log_message(self, params: Mapping[str, Any]) -> None:
        if self.logging_handler is not None:
            self.logging_handler(params)
            return
        level = {
            "debug": logging.DEBUG,
            "info": logging.INFO,
            "notice": logging.INFO,
            "warning": logging.WARNING,
            "error": logging.ERROR,
            "critical": logging.CRITICAL,
            "alert": logging.CRITICAL,
            "emergency": logging.CRITICAL,
        }.get(str(params.get("level", "info")), logging.INFO)
        self._server_logger.log(level, "%s", params.get("data"))

    def _on_request(self, method: str, params: Mapping[str, Any] | None) -> Any:
        """Answer a server→client request (legacy era); runs on the worker pool."""
        params = params or {}
        if method == "ping":
            return {}
        if method == "roots/list":
            if self.roots is None:
                raise RemoteError("this client declared no roots capability", code=METHOD_NOT_FOUND)
            roots = self.roots() if callable(self.roots) else self.roots
            return {"roots": [dict(r) for r in roots]}
        if method == "sampling/createMessage":
            if self.sampling_handler is None:
                raise RemoteError("this client declared no sampling capability", code=METHOD_NOT_FOUND)
            return _plain(self.sampling_handler(params))
        if method == "elicitation/create":
            if self.elicitation_handler is None:
                raise RemoteError("this client declared no elicitation capability", code=METHOD_NOT_FOUND)
            return _plain(self.elicitation_handler(params))
        raise RemoteError(f"method not supported by this client: {method}", code=METHOD_NOT_FOUND)


    def _incomplete_result(
        self, method: str, params: Mapping[str, Any] | None, raw: Any, result_type: str, *, timeout: float, progress: Any
    ) -> Any:
        """A modern-era result whose ``resultType`` is not ``complete`` (e.g. ``input_required``)."""
        raise ProtocolError(
            f"{self.name} answered {method} with resultType {result_type!r}, which this client cannot handle",
            code=-32600,
        )


def _plain(obj: Any) -> Any:
    if isinstance(obj, msgspec.Struct):
        return msgspec.to_builtins(obj)
    return obj
