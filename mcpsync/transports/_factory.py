"""The one place a transport is built from a kind and a target.

``Client``'s constructors, configuration files (``_config``), profiles (``_profiles``)
and routed clients all come here for a transport factory, so that each knows only the
kind of server it names and none of them imports ``Client`` back.

Kinds and targets:

==============  =============================================  ==============================================
kind            target                                         options (all optional)
==============  =============================================  ==============================================
``stdio``       ``(command, args)``                            env, inherit_env, cwd, max_message_size
``http``        the MCP endpoint URL                           headers, auth, verify, cert, proxy,
                                                               pool_size, max_message_size, sse_fallback
``sse``         the HTTP+SSE stream URL                        headers, auth, verify, cert, proxy,
                                                               pool_size, max_message_size
``websocket``   a ``ws://`` / ``wss://`` URL                   headers, token, auth, sslopt, max_message_size
``grpc``        ``host:port``                                  token, auth, metadata, secure,
                                                               root_certificates, scope, max_message_size
``local``       a :class:`mcpsync.server.Registry`, or an      (none)
                SDK / FastMCP server object
``inprocess``   an SDK / FastMCP server object                 (none)
==============  =============================================  ==============================================

Each built HTTP or HTTP+SSE factory owns one
:class:`~mcpsync.transports._http_pools.ClientConnections` (connection pools and a
cookie jar), shared by every transport it makes and by no other factory's: one client's
sockets and cookies never serve another client.

Example:
    >>> built = build("stdio", ("python", ["-m", "mcpsync.server.demo"]))
    >>> built.name, built.pool
    ('python', None)
    >>> build("http", "https://example.com/mcp").name
    'example.com'
"""

from __future__ import annotations

import os
from dataclasses import dataclass, replace
from typing import Any, Callable, Mapping, Union
from urllib.parse import urlsplit

from .._channel import Channel
from .._policies import PoolLimits, Timeouts
from ._base import Transport
from ._tls import Verify

__all__ = ["KINDS", "TRANSPORT_OPTIONS", "Built", "TransportFactory", "Verify", "build", "single_use", "stdio_args"]

#: A zero-argument callable returning a fresh, unconnected transport (or in-process channel).
TransportFactory = Callable[[], Union[Transport, Channel]]

#: The keyword options each kind's transport takes (the rest are the Client's).
TRANSPORT_OPTIONS: Mapping[str, frozenset[str]] = {
    "stdio": frozenset({"env", "inherit_env", "cwd", "max_message_size"}),
    "http": frozenset({"headers", "auth", "verify", "cert", "proxy", "pool_size", "max_message_size", "sse_fallback"}),
    "sse": frozenset({"headers", "auth", "verify", "cert", "proxy", "pool_size", "max_message_size"}),
    "websocket": frozenset({"headers", "token", "auth", "sslopt", "max_message_size"}),
    "grpc": frozenset({"token", "auth", "metadata", "secure", "root_certificates", "scope", "max_message_size"}),
    "local": frozenset(),
    "inprocess": frozenset(),
}

#: Every kind :func:`build` knows.
KINDS: tuple[str, ...] = tuple(TRANSPORT_OPTIONS)


@dataclass(frozen=True, slots=True)
class Built:
    """What :func:`build` returns.

    Attributes:
        factory: makes a fresh transport per connection.
        name: the server's default name in logs and errors (the command, host, URL ...).
        pool: the Client pool limits this transport wants unless the caller chose some
            (``None``: the Client's default).
    """

    factory: TransportFactory
    name: str
    pool: PoolLimits | None = None


def single_use(transport: Transport) -> TransportFactory:
    """A factory handing out one ready ``transport`` once: it cannot reconnect."""
    used = [False]

    def factory() -> Transport:
        if used[0]:
            from .._errors import ConnectError

            raise ConnectError(f"{transport.describe()}: a single Transport instance cannot reconnect; pass a factory")
        used[0] = True
        return transport

    return factory


def build(kind: str, target: Any, options: Mapping[str, Any] | None = None, *, timeouts: Timeouts = Timeouts.DEFAULT) -> Built:
    """A transport factory for a server of ``kind`` at ``target``.

    Args:
        kind: one of :data:`KINDS`.
        target: see the module's table.
        options: the kind's keyword options (:data:`TRANSPORT_OPTIONS`); ``None`` values
            are the defaults.
        timeouts: the Client's timeouts (connect, idle read, keepalive and close times
            of the transport come from them).

    Raises:
        ValueError: an unknown kind.
        TypeError: an option the kind does not take.
    """
    known = TRANSPORT_OPTIONS.get(kind)
    if known is None:
        raise ValueError(f"unknown transport kind {kind!r}: expected one of {', '.join(KINDS)}")
    opts = {k: v for k, v in (options or {}).items()}
    unknown = sorted(set(opts) - known)
    if unknown:
        raise TypeError(f"unexpected option {unknown[0]!r} for a {kind} transport")
    return _BUILDERS[kind](target, opts, timeouts)


def stdio_args(command: str, args: Any) -> list[str]:
    """``args`` of a stdio server as a list, refused at once when it is one string (which
    would run the command with one argument per character).

    Raises:
        TypeError: ``args`` is a string (the message shows the list to write).
    """
    if isinstance(args, (str, bytes)):
        import shlex

        text = args.decode() if isinstance(args, bytes) else args
        raise TypeError(
            f"stdio args must be a list of arguments, not one string {text!r}: write "
            f"Client.stdio({command!r}, {shlex.split(text)!r}) (shlex.split() splits a command line)"
        )
    return [os.fspath(a) for a in args]


def _stdio(target: Any, opts: dict[str, Any], timeouts: Timeouts) -> Built:
    from .stdio import StdioTransport

    command, args = target
    args = stdio_args(command, args)
    kw: dict[str, Any] = {"env": opts.get("env"), "cwd": opts.get("cwd"), "close_timeout": timeouts.close,
                          "inherit_env": bool(opts.get("inherit_env"))}
    if opts.get("max_message_size") is not None:
        kw["max_message_size"] = opts["max_message_size"]
    return Built(lambda: StdioTransport(command, args, **kw), os.path.basename(command))


def _http_kwargs(opts: Mapping[str, Any], timeouts: Timeouts) -> dict[str, Any]:
    """The transports' keywords: one :class:`HTTPOptions` (checked here, once: a bad
    ``verify``, ``cert`` or ``proxy`` fails the constructor) and one
    :class:`ClientConnections`, both shared by every transport of the client."""
    from ._http_options import HTTPOptions
    from ._http_pools import ClientConnections

    kw: dict[str, Any] = {
        "headers": dict(opts.get("headers") or {}),
        "auth": opts.get("auth"),
        "verify": True if opts.get("verify") is None else opts["verify"],
        "cert": opts.get("cert"),
        "proxy": opts.get("proxy"),
        "connect_timeout": timeouts.connect,
        "read_timeout": timeouts.idle,
        "pool_size": _pool_size(opts),
    }
    if opts.get("max_message_size") is not None:
        kw["max_message_size"] = opts["max_message_size"]
    return {"options": HTTPOptions(**kw), "connections": ClientConnections()}


def _pool_size(opts: Mapping[str, Any]) -> int:
    size = opts.get("pool_size")
    return 10 if size is None else int(size)


def _http_pool(opts: Mapping[str, Any]) -> PoolLimits:
    # One transport per client: urllib3 fans requests out over its own pool of TCP
    # connections, and every extra legacy-era transport would be another session.
    # As many calls in flight as there are sockets: the rest wait in the client's
    # pool, in arrival order (urllib3's own wait lets a returning thread go first).
    return replace(PoolLimits.SESSION, max_in_flight=max(_pool_size(opts), 1))


def _http_name(url: str) -> str:
    """An HTTP server's name in logs and errors: its host and port as they go on the wire
    (never the URL's userinfo)."""
    from ._http_options import wire_url

    wire = wire_url(url)[0]
    return urlsplit(wire).netloc or wire


def _http(target: Any, opts: dict[str, Any], timeouts: Timeouts) -> Built:
    from .streamable_http import StreamableHTTPTransport

    url = str(target)
    kw = _http_kwargs(opts, timeouts)
    kw["sse_fallback"] = True if opts.get("sse_fallback") is None else opts["sse_fallback"]
    return Built(lambda: StreamableHTTPTransport(url, **kw), _http_name(url), _http_pool(opts))


def _sse(target: Any, opts: dict[str, Any], timeouts: Timeouts) -> Built:
    from .sse import SSETransport

    url = str(target)
    kw = _http_kwargs(opts, timeouts)
    return Built(lambda: SSETransport(url, **kw), _http_name(url), _http_pool(opts))


def _websocket(target: Any, opts: dict[str, Any], timeouts: Timeouts) -> Built:
    from .websocket import WebSocketTransport

    url = str(target)
    auth = opts.get("auth")
    kw: dict[str, Any] = {"token": opts.get("token"), "sslopt": opts.get("sslopt"), "ping_interval": timeouts.keepalive}
    if opts.get("max_message_size"):
        kw["max_message_size"] = opts["max_message_size"]
    static = dict(opts.get("headers") or {})

    def factory() -> WebSocketTransport:
        # the auth hook is asked for fresh headers at every handshake
        headers = {**static, **auth.headers(url, "GET")} if auth is not None else static
        return WebSocketTransport(url, headers=headers, **kw)

    return Built(factory, url)


def _grpc(target: Any, opts: dict[str, Any], timeouts: Timeouts) -> Built:
    from .grpc import GrpcTransport

    address = str(target)
    auth = opts.get("auth")
    kw: dict[str, Any] = {
        "token": opts.get("token"),
        "secure": bool(opts.get("secure") or False),
        "root_certificates": opts.get("root_certificates"),
        "scope": opts.get("scope") or "session",
    }
    if opts.get("max_message_size"):
        kw["max_message_size"] = opts["max_message_size"]
    static = list(opts.get("metadata") or ())

    def factory() -> GrpcTransport:
        metadata = static
        if auth is not None:  # fresh headers at every connect, sent as lowercase metadata
            metadata = static + [(k.lower(), v) for k, v in auth.headers(address, "POST").items()]
        return GrpcTransport(address, metadata=metadata, **kw)

    return Built(factory, address)


def _local(target: Any, opts: dict[str, Any], timeouts: Timeouts) -> Built:
    from .inprocess import sdk_server_factory
    from .local import LocalChannel

    name = str(getattr(target, "name", None) or "local")
    sdk = sdk_server_factory(target)
    if sdk is not None:
        return Built(sdk, name)
    return Built(lambda: LocalChannel(target), name)


def _inprocess(target: Any, opts: dict[str, Any], timeouts: Timeouts) -> Built:
    from .inprocess import sdk_server_factory

    sdk = sdk_server_factory(target)
    if sdk is None:
        raise TypeError(f"not an MCP SDK or FastMCP server: {type(target).__name__}")
    return Built(sdk, str(getattr(target, "name", None) or "local"))


_BUILDERS: dict[str, Callable[[Any, dict[str, Any], Timeouts], Built]] = {
    "stdio": _stdio,
    "http": _http,
    "sse": _sse,
    "websocket": _websocket,
    "grpc": _grpc,
    "local": _local,
    "inprocess": _inprocess,
}
