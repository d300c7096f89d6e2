"""The bridge: serve any MCP server (a stdio command or an HTTP URL) over WebSocket or gRPC.

WebSocket and gRPC are not official MCP transports, so no stock server speaks them;
the bridge is the other end of :class:`~mcpsync.transports.websocket.WebSocketTransport`
and :class:`~mcpsync.transports.grpc.GrpcTransport`. Every downstream connection (a
WebSocket, or a gRPC ``Session`` stream) gets its own upstream session — for a command,
its own child process — and every message is relayed unchanged both ways: responses,
server notifications and server→client requests (sampling, elicitation, roots) alike.
Request-scoped gRPC ``Call`` RPCs (the stateless 2026-07-28 era) share one upstream
session, with request ids rewritten so that concurrent calls never collide.

Command line::

    python -m mcpsync.server.bridge --websocket 127.0.0.1:8765 -- npx -y @modelcontextprotocol/server-everything
    python -m mcpsync.server.bridge --grpc :50051 --token s3cret -- python -m mcpsync.server.demo
    python -m mcpsync.server.bridge --websocket :8765 --url http://127.0.0.1:3001/mcp

The upstream command follows ``--``.

Hosts default to 127.0.0.1; port 0 picks a free port. Once listening the bridge prints
one line per endpoint on stdout (``mcpsync-bridge: websocket ws://127.0.0.1:8765/``).
A bearer token (``--token`` or the ``MCPSYNC_BRIDGE_TOKEN`` variable) makes it refuse
other clients (HTTP 401 / gRPC UNAUTHENTICATED). WebSocket handshakes from browser pages
of other origins are refused (HTTP 403) unless ``--allow-origin`` names them. SIGTERM and SIGINT shut it down cleanly:
listeners closed, sessions ended, child processes stopped.

The WebSocket side uses the ``websockets`` package (sync API); the gRPC side uses grpcio.
Both are optional extras (``mcpsync[bridge]`` / ``mcpsync[grpc]``).

Example:
    >>> from mcpsync.server.bridge import Bridge
    >>> from mcpsync.server._upstream import upstream_factory
    >>> bridge = Bridge(upstream_factory(["python", "-m", "mcpsync.server.demo"]))
    >>> ws = bridge.serve_websocket("127.0.0.1", 0)      # doctest: +SKIP
    >>> ws.url                                             # doctest: +SKIP
    'ws://127.0.0.1:40123/'
    >>> bridge.close()
"""

from __future__ import annotations

import argparse
import hmac
import itertools
import logging
import os
import queue
import signal
import sys
import threading
import uuid
from typing import Any, Callable, Sequence

import msgspec

from .._errors import MCPError
from .._messages import error_reply
from ..transports._base import Transport
from ..transports.grpc import DEFAULT_MAX_MESSAGE_SIZE, SERVICE, channel_options, decode_frame, encode_frame
from ._relay import Relay, normalise
from ._upstream import upstream_factory

__all__ = ["Bridge", "WebSocketEndpoint", "GrpcEndpoint", "main", "parse_address"]

log = logging.getLogger("mcpsync.bridge")

_END = object()
_json = msgspec.json.Decoder()
_encode = msgspec.json.encode
TOKEN_ENV = "MCPSYNC_BRIDGE_TOKEN"


def parse_address(text: str, default_host: str = "127.0.0.1") -> tuple[str, int]:
    """``"HOST:PORT"``, ``":PORT"`` or ``"PORT"`` → ``(host, port)``; the host defaults to loopback."""
    host, sep, port = text.rpartition(":")
    if not sep:
        host, port = "", text
    host = host.strip("[]") or default_host
    try:
        number = int(port)
    except ValueError:
        raise ValueError(f"not a HOST:PORT address: {text!r}") from None
    if not 0 <= number <= 65535:
        raise ValueError(f"port out of range: {text!r}")
    return host, number


class WebSocketEndpoint:
    """A running WebSocket listener of a :class:`Bridge`."""

    def __init__(self, server: Any, host: str, port: int, scheme: str) -> None:
        self._server = server
        self.host = host
        self.port = port
        self.url = f"{scheme}://{host}:{port}/"
        self._thread = threading.Thread(target=server.serve_forever, name="mcpsync-bridge-ws", daemon=True)
        self._thread.start()

    def close(self) -> None:
        self._server.shutdown()
        self._thread.join(5.0)


class GrpcEndpoint:
    """A running gRPC listener of a :class:`Bridge`."""

    def __init__(self, server: Any, host: str, port: int) -> None:
        self._server = server
        self.host = host
        self.port = port
        self.target = f"{host}:{port}"
        self.url = f"grpc://{host}:{port}"

    def close(self) -> None:
        self._server.stop(grace=1.0).wait(5.0)


class Bridge:
    """Serves one upstream MCP server over WebSocket and/or gRPC.

    Args:
        upstream: zero-argument callable returning a fresh, unconnected upstream
            transport (see :func:`mcpsync.server._upstream.upstream_factory`).
        token: if set, downstream clients must send ``Authorization: Bearer <token>``.
        max_message_size: largest message accepted from a downstream client (bytes).
        connect_timeout: seconds to start / reach the upstream for a new session.
        allowed_origins: browser ``Origin`` values accepted besides loopback ones
            (``"*"``: any); WebSocket handshakes from other web origins get HTTP 403.
    """

    def __init__(
        self,
        upstream: Callable[[], Transport],
        *,
        token: str | None = None,
        max_message_size: int = DEFAULT_MAX_MESSAGE_SIZE,
        connect_timeout: float = 10.0,
        allowed_origins: Sequence[str] = (),
    ) -> None:
        self._factory = upstream
        self._allowed_origins = frozenset(allowed_origins)
        self._token = token
        self.max_message_size = max_message_size
        self.connect_timeout = connect_timeout
        self._lock = threading.Lock()
        self._relays: set[Relay] = set()
        self._endpoints: list[Any] = []
        self._shared: _SharedSession | None = None
        self._closed = False

    # ------------------------------------------------------------------ common

    def _authorised(self, value: str | None) -> bool:
        if self._token is None:
            return True
        expected = f"Bearer {self._token}"
        return value is not None and hmac.compare_digest(value.strip().encode(), expected.encode())

    def _origin_allowed(self, origin: str | None, bind_host: str) -> bool:
        """Browsers send ``Origin``: refuse web pages from elsewhere (cross-site WebSocket
        hijacking, DNS rebinding). No ``Origin`` (a program), a loopback origin or one of
        ``allowed_origins`` passes."""
        if origin is None or origin in self._allowed_origins or "*" in self._allowed_origins:
            return True
        from urllib.parse import urlsplit

        try:
            hostname = urlsplit(origin).hostname
        except ValueError:
            return False
        return hostname in ("127.0.0.1", "localhost", "::1") or (hostname is not None and hostname == bind_host)

    def _track(self, relay: Relay) -> bool:
        with self._lock:
            if self._closed:
                return False
            self._relays.add(relay)
            return True

    def _untrack(self, relay: Relay) -> None:
        with self._lock:
            self._relays.discard(relay)

    def sessions(self) -> int:
        """Open downstream sessions (for tests and logs)."""
        with self._lock:
            return len(self._relays)

    def close(self) -> None:
        """Stop listening, end every session, stop the upstream processes. Idempotent."""
        with self._lock:
            if self._closed:
                return
            self._closed = True
            endpoints, self._endpoints = self._endpoints, []
            relays = list(self._relays)
            shared, self._shared = self._shared, None
        for ep in endpoints:
            try:
                ep.close()
            except Exception:  # noqa: BLE001
                log.exception("closing %s failed", ep)
        for relay in relays:
            relay.close()
        if shared is not None:
            shared.close()

    def __enter__(self) -> "Bridge":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()

    # ------------------------------------------------------------------ WebSocket

    def serve_websocket(self, host: str = "127.0.0.1", port: int = 0, *, ssl_context: Any = None) -> WebSocketEndpoint:
        """Start a WebSocket listener (subprotocol ``mcp``) and return it."""
        try:
            from websockets.sync.server import serve
            from websockets.typing import Subprotocol
        except ImportError as exc:  # pragma: no cover
            raise MCPError("the WebSocket bridge needs the websockets package: pip install 'mcpsync[bridge]'") from exc

        def process_request(conn: Any, request: Any) -> Any:
            origins = request.headers.get_all("Origin")
            origin = origins[0] if len(origins) == 1 else (None if not origins else "(several)")
            if not self._origin_allowed(origin, host):
                return conn.respond(403, f"origin not allowed: {origin}\n")
            if not self._authorised(request.headers.get("Authorization")):
                response = conn.respond(401, "missing or wrong bearer token\n")
                response.headers["WWW-Authenticate"] = 'Bearer realm="mcpsync-bridge"'
                return response
            return None

        server = serve(
            self._ws_session,
            host,
            port,
            ssl=ssl_context,
            subprotocols=[Subprotocol("mcp")],
            process_request=process_request,
            compression=None,
            max_size=self.max_message_size,
            max_queue=64,
            ping_interval=60,
            ping_timeout=30,
        )
        actual = server.socket.getsockname()[1]
        ep = WebSocketEndpoint(server, host, actual, "wss" if ssl_context else "ws")
        with self._lock:
            self._endpoints.append(ep)
        return ep

    def _ws_session(self, conn: Any) -> None:
        from websockets.exceptions import ConnectionClosed as WsClosed

        def deliver(message: bytes) -> None:
            conn.send(message.decode("utf-8", "replace"))

        def on_end(reason: str) -> None:
            conn.close(1011, reason[:120])

        relay = Relay(self._factory(), deliver, on_end)
        try:
            relay.open(self.connect_timeout)
        except MCPError as exc:
            log.warning("upstream failed to start: %s", exc)
            conn.close(1011, "the upstream MCP server could not be started")
            relay.close()
            return
        if not self._track(relay):
            relay.close()
            conn.close(1001, "the bridge is shutting down")
            return
        peer = _peer(conn)
        log.info("websocket session from %s opened", peer)
        try:
            while not relay.closed():
                try:
                    message = conn.recv()
                except WsClosed:
                    break
                if isinstance(message, bytes):
                    conn.close(1003, "binary frames are not supported: send JSON-RPC as text")
                    break
                try:
                    err = relay.forward(message.encode("utf-8"))
                except MCPError as exc:
                    conn.close(1011, f"upstream gone: {exc}"[:120])
                    break
                if err is not None:
                    conn.send(err.decode())
        finally:
            self._untrack(relay)
            relay.close()
            log.info("websocket session from %s closed", peer)

    # ------------------------------------------------------------------ gRPC

    def serve_grpc(
        self,
        host: str = "127.0.0.1",
        port: int = 0,
        *,
        server_credentials: Any = None,
        max_workers: int = 64,
    ) -> GrpcEndpoint:
        """Start a gRPC listener of ``mcpsync.transport.v1.McpTransport`` and return it."""
        from concurrent.futures import ThreadPoolExecutor

        try:
            import grpc  # type: ignore[import-untyped]
        except ImportError as exc:  # pragma: no cover
            raise MCPError("the gRPC bridge needs grpcio: pip install 'mcpsync[grpc]'") from exc
        server = grpc.server(
            ThreadPoolExecutor(max_workers=max_workers, thread_name_prefix="mcpsync-bridge-grpc"),
            options=channel_options(self.max_message_size),
        )
        handlers = {
            "Session": grpc.stream_stream_rpc_method_handler(
                self._grpc_session, request_deserializer=decode_frame, response_serializer=encode_frame
            ),
            "Call": grpc.unary_stream_rpc_method_handler(
                self._grpc_call, request_deserializer=decode_frame, response_serializer=encode_frame
            ),
        }
        server.add_generic_rpc_handlers((grpc.method_handlers_generic_handler(SERVICE, handlers),))
        address = f"[{host}]:{port}" if ":" in host else f"{host}:{port}"
        if server_credentials is not None:
            actual = server.add_secure_port(address, server_credentials)
        else:
            actual = server.add_insecure_port(address)
        if not actual:
            raise MCPError(f"cannot listen on {address}")
        server.start()
        ep = GrpcEndpoint(server, host, actual)
        with self._lock:
            self._endpoints.append(ep)
        return ep

    def _grpc_auth(self, context: Any) -> None:
        import grpc

        md = dict(context.invocation_metadata() or ())
        if not self._authorised(md.get("authorization")):
            context.abort(grpc.StatusCode.UNAUTHENTICATED, "missing or wrong bearer token")

    def _grpc_session(self, requests: Any, context: Any) -> Any:
        import grpc

        self._grpc_auth(context)
        out: queue.SimpleQueue[Any] = queue.SimpleQueue()
        ended: list[str] = []

        def on_end(reason: str) -> None:
            ended.append(reason)
            out.put(_END)

        relay = Relay(self._factory(), out.put, on_end)
        try:
            relay.open(self.connect_timeout)
        except MCPError as exc:
            relay.close()
            context.abort(grpc.StatusCode.UNAVAILABLE, f"the upstream MCP server could not be started: {exc}")
        if not self._track(relay):
            relay.close()
            context.abort(grpc.StatusCode.UNAVAILABLE, "the bridge is shutting down")
        session_id = uuid.uuid4().hex
        context.send_initial_metadata((("mcp-session-id", session_id),))
        log.info("grpc session %s from %s opened", session_id, context.peer())
        context.add_callback(lambda: out.put(_END))

        def pump_in() -> None:
            try:
                for payload in requests:
                    err = relay.forward(payload)
                    if err is not None:
                        out.put(err)
            except MCPError as exc:
                ended.append(f"upstream gone: {exc}")
            except Exception:  # noqa: BLE001 - the RPC was cancelled
                pass
            out.put(_END)

        threading.Thread(target=pump_in, name="mcpsync-bridge-grpc-in", daemon=True).start()
        try:
            while True:
                item = out.get()
                if item is _END:
                    break
                yield item
            if ended and context.is_active():
                context.abort(grpc.StatusCode.UNAVAILABLE, ended[0])
        finally:
            self._untrack(relay)
            relay.close()
            log.info("grpc session %s closed", session_id)

    def _grpc_call(self, request: bytes, context: Any) -> Any:
        import grpc

        self._grpc_auth(context)
        if not request:
            return  # an empty frame is the client's handshake probe: metadata checked, nothing to relay
        with self._lock:
            if self._closed:
                context.abort(grpc.StatusCode.UNAVAILABLE, "the bridge is shutting down")
            shared = self._shared
            if shared is None or shared.dead():
                shared = self._shared = _SharedSession(self._factory, self.connect_timeout)
        try:
            yield from shared.call(request, context)
        except MCPError as exc:
            context.abort(grpc.StatusCode.UNAVAILABLE, f"upstream: {exc}")


def _peer(conn: Any) -> str:
    try:
        host, port = conn.remote_address[:2]
        return f"{host}:{port}"
    except Exception:  # noqa: BLE001
        return "?"


class _SharedSession:
    """One upstream session multiplexing request-scoped ``Call`` RPCs (ids rewritten)."""

    def __init__(self, factory: Callable[[], Transport], connect_timeout: float) -> None:
        self._factory = factory
        self._timeout = connect_timeout
        self._lock = threading.Lock()
        self._relay: Relay | None = None
        self._ended = False
        self._ids = itertools.count(1)
        self._routes: dict[str, tuple[queue.SimpleQueue[Any], Any]] = {}
        self._progress: dict[Any, queue.SimpleQueue[Any]] = {}

    def dead(self) -> bool:
        return self._ended

    def _ensure(self) -> Relay:
        with self._lock:
            if self._relay is None:
                relay = Relay(self._factory(), self._route, self._on_end)
                relay.open(self._timeout)
                self._relay = relay
            return self._relay

    def _on_end(self, reason: str) -> None:
        with self._lock:
            self._ended = True
            routes = list(self._routes.values())
            self._routes.clear()
        for q, _ in routes:
            q.put(_END)

    def _route(self, message: bytes) -> None:
        try:
            obj = _json.decode(message)
        except msgspec.DecodeError:
            return
        if not isinstance(obj, dict):
            return
        if "method" not in obj:  # a response
            rid = obj.get("id")
            with self._lock:
                route = self._routes.pop(rid, None) if isinstance(rid, str) else None
            if route is not None:
                q, original = route
                obj["id"] = original
                q.put(_encode(obj))
                q.put(_END)
            return
        if obj.get("method") == "notifications/progress":
            token = (obj.get("params") or {}).get("progressToken")
            with self._lock:
                waiting = self._progress.get(token)
            if waiting is not None:
                waiting.put(message)
            return
        if "id" in obj:  # a server→client request: none exist in the request-scoped era
            reply = error_reply(obj["id"], -32601, "no client session on a request-scoped call")
            relay = self._relay
            if relay is not None:
                try:
                    relay.upstream.send(_encode(reply))
                except MCPError:
                    pass

    def call(self, request: bytes, context: Any) -> Any:
        msg, err = normalise(request)
        if msg is None:
            yield err
            return
        relay = self._ensure()
        obj = _json.decode(msg)
        if "method" not in obj or "id" not in obj:
            relay.upstream.send(msg)  # a notification: nothing comes back
            return
        q: queue.SimpleQueue[Any] = queue.SimpleQueue()
        wire_id = f"mcpsync-bridge-{next(self._ids)}"
        token = ((obj.get("params") or {}).get("_meta") or {}).get("progressToken")
        with self._lock:
            if self._ended:
                raise MCPError("the upstream session ended")
            self._routes[wire_id] = (q, obj["id"])
            if token is not None:
                self._progress[token] = q
        finished = threading.Event()

        def on_done() -> None:
            if finished.is_set():
                return
            with self._lock:
                pending = self._routes.pop(wire_id, None)
            if pending is not None:
                cancel = {"jsonrpc": "2.0", "method": "notifications/cancelled", "params": {"requestId": wire_id, "reason": "the gRPC call was cancelled"}}
                try:
                    relay.upstream.send(_encode(cancel))
                except MCPError:
                    pass
            q.put(_END)

        context.add_callback(on_done)
        obj["id"] = wire_id
        try:
            relay.upstream.send(_encode(obj))
            while True:
                item = q.get()
                if item is _END:
                    break
                yield item
        finally:
            finished.set()
            with self._lock:
                self._routes.pop(wire_id, None)
                if token is not None and self._progress.get(token) is q:
                    del self._progress[token]

    def close(self) -> None:
        relay = self._relay
        if relay is not None:
            relay.close()
        self._on_end("closed")


# --------------------------------------------------------------------------- CLI


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="mcpsync bridge",
        description="Serve an MCP server (a stdio command or an HTTP URL) over WebSocket and/or gRPC.",
        epilog="example: mcpsync bridge --websocket 127.0.0.1:8765 -- npx -y @modelcontextprotocol/server-everything",
    )
    p.add_argument("--websocket", metavar="HOST:PORT", help="listen for WebSocket clients (subprotocol mcp)")
    p.add_argument("--grpc", metavar="HOST:PORT", help="listen for gRPC clients (mcpsync.transport.v1.McpTransport)")
    p.add_argument("--url", help="upstream Streamable HTTP URL instead of a command")
    p.add_argument("--header", action="append", default=[], metavar="NAME:VALUE", help="header for the upstream URL")
    p.add_argument("--token", help=f"required bearer token (default: ${TOKEN_ENV} if set)")
    p.add_argument("--allow-origin", action="append", default=[], metavar="ORIGIN",
                   help="browser Origin accepted on the WebSocket besides loopback ones ('*': any)")
    p.add_argument("--max-message-size", type=int, default=DEFAULT_MAX_MESSAGE_SIZE, metavar="BYTES")
    p.add_argument("--tls-cert", help="PEM certificate chain: serve wss:// and TLS gRPC")
    p.add_argument("--tls-key", help="PEM private key for --tls-cert")
    p.add_argument("--env", action="append", default=[], metavar="NAME=VALUE",
                   help="a variable for the upstream command (which sees HOME, LOGNAME, PATH, SHELL, TERM, USER and these)")
    p.add_argument("--inherit-env", action="store_true", help="hand the upstream command the bridge's whole environment")
    p.add_argument("-v", "--verbose", action="store_true", help="log every session")
    p.add_argument("-q", "--quiet", action="store_true", help="hide the upstream server's stderr")
    return p


def main(argv: Sequence[str] | None = None) -> int:
    """Run the bridge until SIGTERM / SIGINT. Returns the exit status."""
    argv = list(sys.argv[1:] if argv is None else argv)
    command: list[str] = []
    if "--" in argv:
        cut = argv.index("--")
        argv, command = argv[:cut], argv[cut + 1 :]
    args = _parser().parse_args(argv)
    logging.basicConfig(level=logging.INFO if args.verbose else logging.WARNING, stream=sys.stderr,
                        format="mcpsync-bridge: %(message)s")
    # the upstream's stderr (the stdio transport logs it line by line) stays visible
    logging.getLogger("mcpsync.stderr").setLevel(logging.WARNING if args.quiet else logging.INFO)
    logging.getLogger("websockets").setLevel(logging.WARNING)
    if not args.websocket and not args.grpc:
        print("mcpsync bridge: give --websocket HOST:PORT and/or --grpc HOST:PORT", file=sys.stderr)
        return 2
    if bool(command) == bool(args.url):
        print("mcpsync bridge: give an upstream command after -- or --url URL (one of them)", file=sys.stderr)
        return 2
    env = dict(item.split("=", 1) for item in args.env if "=" in item)
    headers = dict((k.strip(), v.strip()) for k, _, v in (h.partition(":") for h in args.header))
    try:
        factory = upstream_factory(command or None, url=args.url, env=env, headers=headers,
                                   max_message_size=args.max_message_size, inherit_env=args.inherit_env)
    except MCPError as exc:
        print(f"mcpsync bridge: {exc}", file=sys.stderr)
        return 2
    token = args.token if args.token is not None else (os.environ.get(TOKEN_ENV) or None)
    stop = threading.Event()

    def on_signal(signum: int, frame: Any) -> None:
        stop.set()

    previous = {sig: signal.signal(sig, on_signal) for sig in (signal.SIGTERM, signal.SIGINT)}
    bridge = Bridge(factory, token=token, max_message_size=args.max_message_size, allowed_origins=args.allow_origin)
    try:
        ssl_context = None
        grpc_creds = None
        if args.tls_cert:
            import ssl

            ssl_context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
            ssl_context.load_cert_chain(args.tls_cert, args.tls_key)
        try:
            if args.websocket:
                host, port = parse_address(args.websocket)
                ws = bridge.serve_websocket(host, port, ssl_context=ssl_context)
                print(f"mcpsync-bridge: websocket {ws.url}", flush=True)
            if args.grpc:
                host, port = parse_address(args.grpc)
                if args.tls_cert:
                    import grpc

                    with open(args.tls_key, "rb") as k, open(args.tls_cert, "rb") as c:
                        grpc_creds = grpc.ssl_server_credentials(((k.read(), c.read()),))
                g = bridge.serve_grpc(host, port, server_credentials=grpc_creds)
                print(f"mcpsync-bridge: grpc {g.target}", flush=True)
        except (OSError, ValueError, MCPError, RuntimeError) as exc:
            print(f"mcpsync bridge: cannot listen: {exc}", file=sys.stderr)
            return 1
        upstream = args.url or " ".join(command)
        print(f"mcpsync-bridge: upstream {upstream}", flush=True)
        while not stop.wait(1.0):
            pass
        return 0
    finally:
        bridge.close()
        for sig, handler in previous.items():
            signal.signal(sig, handler)


if __name__ == "__main__":
    sys.exit(main())
