"""Upstream connections of the bridge: a child process over stdio, or an HTTP URL.

The bridge talks to its upstream server through the same byte
:class:`~mcpsync.transports._base.Transport` interface the client uses:
:class:`~mcpsync.transports.stdio.StdioTransport` for a command (its stderr goes to the
``mcpsync.stderr.<name>`` logger), :class:`~mcpsync.transports.streamable_http.StreamableHTTPTransport`
for a URL.
"""

from __future__ import annotations

from typing import Callable, Mapping, Sequence

from ..transports._base import Transport

__all__ = ["upstream_factory"]

from .._speedups import DEFAULT_MAX_MESSAGE_SIZE


def upstream_factory(
    command: Sequence[str] | None = None,
    *,
    url: str | None = None,
    env: Mapping[str, str] | None = None,
    cwd: str | None = None,
    headers: Mapping[str, str] | None = None,
    max_message_size: int = DEFAULT_MAX_MESSAGE_SIZE,
    inherit_env: bool = False,
) -> Callable[[], Transport]:
    """A zero-argument callable giving a fresh, unconnected upstream transport.

    Exactly one of ``command`` (argv of a stdio server, run with ``env`` over a minimal
    environment, or over the bridge's whole one with ``inherit_env``) and ``url`` (a
    Streamable HTTP endpoint) is given.

    Example:
        >>> make = upstream_factory(["python", "-m", "mcpsync.server.demo"])
        >>> make().describe()
        'python -m mcpsync.server.demo'
    """
    if (command is None) == (url is None):
        raise ValueError("give an upstream command or an upstream url, not both")
    if command is not None:
        from ..transports.stdio import StdioTransport

        argv = list(command)
        if not argv:
            raise ValueError("the upstream command is empty")
        extra = dict(env or {})
        return lambda: StdioTransport(argv[0], argv[1:], env=extra, cwd=cwd, max_message_size=max_message_size,
                                      inherit_env=inherit_env)
    from ..transports.streamable_http import StreamableHTTPTransport

    target = str(url)
    hdrs = dict(headers or {})
    return lambda: StreamableHTTPTransport(target, headers=hdrs, max_message_size=max_message_size)
