"""The narrow face of the session that the parts above it are typed against.

:class:`Requester` is what :class:`~mcpsync._tools.Tools`,
:class:`~mcpsync._subscriptions.Subscriptions` and :class:`~mcpsync._reads.Reads` may ask
of :class:`~mcpsync._session.Session`: ``Client.__init__`` gives them the session as a
``Requester``, never the Client.
"""

from __future__ import annotations

import threading
from typing import Any, Callable, Mapping, Protocol

from ._channel import ProgressCallback
from ._handshake import ServerSession, _Connection
from ._policies import RetryPolicy
from ._worker import Worker

__all__ = ["Requester"]


class Requester(Protocol):
    """What a part may ask of the session it is given (:class:`~mcpsync._session.Session`)."""

    closed: bool
    stopping: threading.Event
    worker: Worker
    primary: _Connection | None

    def request(
        self, method: str, params: Mapping[str, Any] | None = None, timeout: float | None = None,
        progress: ProgressCallback | None = None, safe_to_retry: bool | Callable[[], bool] | None = None,
        tool: str | None = None, retry: RetryPolicy | None = None,
    ) -> Any:
        """A request under the breaker and the retry policy (``Client.request``)."""

    def primary_connection(self, timeout: float | None = None) -> _Connection:
        """The session connection (connecting if needed)."""

    def request_on(
        self, conn: _Connection, method: str, params: Mapping[str, Any] | None, t: float,
        progress: ProgressCallback | None, again: bool = False,
    ) -> Any:
        """One request on ``conn``, no retries (session-scoped state: subscriptions, listens)."""

    def facts(self) -> ServerSession:
        """The server's facts (era, version, capabilities); connects if needed."""
