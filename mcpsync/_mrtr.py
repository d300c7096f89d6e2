"""Multi-round-trip requests (modern era): the driver of ``input_required`` rounds.

A modern server that needs something from the client (a sampling answer, an
elicitation, the roots) ends the request with an ``InputRequiredResult``: the client
answers each ``inputRequests`` entry and sends the same request again, new id, with
``inputResponses`` and the opaque ``requestState`` copied back byte for byte. At most
``max_rounds`` rounds are made.

:func:`drive` knows nothing of connections or handlers: it is given how to answer one
input request and how to send the next round, so it is pure logic.

A round sent by :func:`drive` may itself come back ``input_required``; the sending
layer then hands the raw result back wrapped in :class:`Pending` instead of starting a
nested driver (:func:`inside`), and the same loop goes on.
"""

from __future__ import annotations

import logging
import threading
from typing import Any, Callable, Mapping

from ._errors import InputRequestError, MCPError, ProtocolError, RemoteError
from ._protocol_types import decode_input_required

__all__ = ["InputRequestError", "Pending", "answer_all", "drive", "inside"]

log = logging.getLogger("mcpsync.client")

_local = threading.local()


class Pending:
    """An ``input_required`` result met inside this thread's own round loop."""

    __slots__ = ("raw",)

    def __init__(self, raw: Any) -> None:
        self.raw = raw


def inside() -> bool:
    """True while this thread's :func:`drive` is sending a round (not answering input)."""
    return getattr(_local, "active", False)


def drive(
    server: str,
    method: str,
    params: Mapping[str, Any] | None,
    raw: Any,
    *,
    answer: Callable[[str, Mapping[str, Any]], Any],
    send: Callable[[dict[str, Any]], Any],
    max_rounds: int,
) -> Any:
    """Answer ``input_required`` results until the request completes.

    Args:
        server: the server's name (in errors).
        method: the request's method.
        params: the request's original params.
        raw: the first ``input_required`` result (undecoded).
        answer: ``answer(inner_method, inner_params)`` gives the client's answer to one
            input request; raises :class:`~mcpsync.RemoteError` when it cannot.
        send: ``send(params)`` sends one round and returns its decoded result, or a
            :class:`Pending` when that round asked for input again.
        max_rounds: most rounds one request may take.

    Raises:
        InputRequestError: an input request could not be answered, or too many rounds.
        ProtocolError: an ``input_required`` result with nothing to answer.
    """
    if inside():
        return Pending(raw)
    _local.active = True
    try:
        current = raw
        for _round in range(max_rounds):
            ir = decode_input_required(current)
            if not ir.input_requests and ir.request_state is None:
                raise ProtocolError(
                    f"{server} answered {method} with input_required but neither inputRequests nor requestState",
                    code=-32600,
                )
            responses = answer_all(server, method, ir.input_requests or {}, answer)
            retry = {k: v for k, v in (params or {}).items() if k not in ("inputResponses", "requestState")}
            if responses:
                retry["inputResponses"] = responses
            if ir.request_state is not None:
                retry["requestState"] = ir.request_state
            result = send(retry)
            if not isinstance(result, Pending):
                return result
            current = result.raw
        raise InputRequestError(f"{server} still asked for input after {max_rounds} rounds of {method}", code=-32600)
    finally:
        _local.active = False


def answer_all(
    server: str, method: str, requests: Mapping[str, Any], answer: Callable[[str, Mapping[str, Any]], Any]
) -> dict[str, Any]:
    """The client's answers to ``inputRequests`` (key → ``{"method", "params"}``), by key:
    MRTR rounds here, a task's input requests in :mod:`mcpsync._tasks`.

    Raises:
        InputRequestError: one of them could not be answered (the handler's code, or -32603).
    """
    answers: dict[str, Any] = {}
    was = getattr(_local, "active", False)
    _local.active = False  # a handler may call the client (and meet MRTR) itself
    try:
        for key, req in requests.items():
            req = req if isinstance(req, Mapping) else {}
            inner = str(req.get("method", ""))
            try:
                answers[key] = answer(inner, req.get("params") or {})
            except RemoteError as exc:
                raise InputRequestError(
                    f"{server} needs {inner or 'input'} to finish {method}, and this client could not answer: "
                    f"{exc.message}",
                    code=exc.code,
                    request=inner,
                ) from None
            except MCPError:
                raise
            except Exception as exc:
                log.exception("%s: %s handler raised", server, inner)
                raise InputRequestError(
                    f"the client's handler for {inner} failed while {server} ran {method}: {exc}",
                    code=-32603,
                    request=inner,
                ) from exc
    finally:
        _local.active = was
    return answers
