"""A small MCP server: answers the MCP methods for a :class:`Registry`, in both eras.

* modern (2026-07-28): ``server/discover``, per-request ``_meta`` carrying the protocol
  version (an unsupported one is answered with -32022 and the supported list), results
  marked ``resultType: "complete"``;
* legacy (2024-11-05 … 2025-11-25): the ``initialize`` handshake, ``ping``.

:class:`ServerCore` is transport-free (the Local transport calls it directly);
:func:`serve_stdio` runs it over newline-delimited JSON-RPC on stdin/stdout, requests
handled on a small thread pool so a slow tool never blocks the others.
"""

from __future__ import annotations

import logging
import sys
import threading
from concurrent.futures import ThreadPoolExecutor
from typing import IO, Any, Mapping

import msgspec

from .._errors import INTERNAL_ERROR, INVALID_PARAMS, METHOD_NOT_FOUND, MethodNotFound, RemoteError, UnsupportedProtocolVersion
from .._messages import (
    DiscoverResult, EmptyResult, Implementation, InitializeResult, ListToolsResult, ServerCapabilities, error_reply,
)
from .._constants import LEGACY_VERSIONS, META_SERVER_INFO, META_VERSION, MODERN_VERSIONS
from ._context import Context

#: a :class:`mcpsync.server.Registry` (not imported: the registry builds a core for its
#: :meth:`~mcpsync.server.Registry.local_handle`, so importing it here would be a cycle)
Registry = Any

__all__ = ["ServerCore", "serve_stdio", "MODERN_VERSIONS", "LEGACY_VERSIONS"]

log = logging.getLogger("mcpsync.server")


_decode = msgspec.json.Decoder().decode
_encode = msgspec.json.encode


class ServerCore:
    """Dispatches MCP requests to a :class:`Registry`. Thread-safe; holds no session state."""

    def __init__(self, registry: Registry) -> None:
        self.registry = registry
        self.capabilities = ServerCapabilities(
            tools={"listChanged": False},
            resources={"subscribe": False, "listChanged": False},
            prompts={"listChanged": False},
            logging={},
        )
        self.server_info = Implementation(name=registry.name, version=registry.version, title=registry.title)
        self._info_dict = msgspec.to_builtins(self.server_info)
        self._empty = EmptyResult()

    def modern_version(self, params: Mapping[str, Any] | None) -> str | None:
        """The modern protocol version a request asks for (``None``: a legacy request).

        Raises:
            UnsupportedProtocolVersion: the request names a version this server lacks.
        """
        if not params:
            return None
        meta = params.get("_meta")
        if not isinstance(meta, Mapping):
            return None
        version = meta.get(META_VERSION)
        if version is None:
            return None
        if version not in MODERN_VERSIONS:
            raise UnsupportedProtocolVersion(
                f"Unsupported protocol version: {version}",
                code=-32022,
                data={"supported": list(MODERN_VERSIONS), "requested": version},
            )
        return str(version)

    def handle(self, method: str, params: Mapping[str, Any] | None, ctx: Context | None = None) -> Any:
        """Answer one request: a msgspec Struct or a plain dict. Raises :class:`RemoteError`."""
        p = params or {}
        reg = self.registry
        if method == "tools/call":
            name = p.get("name")
            if not isinstance(name, str):
                raise RemoteError("tools/call needs a tool name", code=INVALID_PARAMS)
            args = p.get("arguments")
            if args is not None and not isinstance(args, Mapping):
                raise RemoteError("tools/call arguments must be an object", code=INVALID_PARAMS)
            return reg.call_tool(name, args, ctx)
        if method == "tools/list":
            return ListToolsResult(tools=reg.list_tools())
        if method == "server/discover":
            return DiscoverResult(
                supported_versions=list(MODERN_VERSIONS),
                capabilities=self.capabilities,
                instructions=reg.instructions,
                result_type="complete",
                ttl_ms=60_000,
                cache_scope="public",
                meta={META_SERVER_INFO: self._info_dict},
            )
        if method == "initialize":
            asked = p.get("protocolVersion")
            version = asked if asked in LEGACY_VERSIONS else LEGACY_VERSIONS[-1]
            return InitializeResult(
                protocol_version=version,
                capabilities=self.capabilities,
                server_info=self.server_info,
                instructions=reg.instructions,
            )
        if method == "ping" or method == "logging/setLevel":
            return self._empty
        if method == "resources/list":
            return {"resources": reg.list_resources()}
        if method == "resources/templates/list":
            return {"resourceTemplates": reg.list_resource_templates()}
        if method == "resources/read":
            uri = p.get("uri")
            if not isinstance(uri, str):
                raise RemoteError("resources/read needs a uri", code=INVALID_PARAMS)
            return reg.read_resource(uri)
        if method == "prompts/list":
            return {"prompts": reg.list_prompts()}
        if method == "prompts/get":
            name = p.get("name")
            if not isinstance(name, str):
                raise RemoteError("prompts/get needs a prompt name", code=INVALID_PARAMS)
            return reg.get_prompt(name, p.get("arguments"))
        raise MethodNotFound(f"Method not found: {method}", code=METHOD_NOT_FOUND)


def _complete(result: Any) -> Any:
    if isinstance(result, dict):
        return {**result, "resultType": "complete"}
    if hasattr(result, "result_type"):
        return msgspec.structs.replace(result, result_type="complete")
    return result


def serve_stdio(
    registry: Registry,
    *,
    stdin: IO[bytes] | None = None,
    stdout: IO[bytes] | None = None,
    max_workers: int = 8,
) -> None:
    """Serve ``registry`` over newline-delimited JSON-RPC until stdin ends.

    While serving, ``sys.stdout`` is pointed at stderr so a stray ``print`` in a tool
    cannot corrupt the protocol stream.
    """
    rfile = stdin if stdin is not None else sys.stdin.buffer
    wfile = stdout if stdout is not None else sys.stdout.buffer
    saved_stdout = sys.stdout
    if stdout is None:
        sys.stdout = sys.stderr
    core = ServerCore(registry)
    wlock = threading.Lock()

    def write(obj: Any) -> None:
        data = _encode(obj) + b"\n"
        with wlock:
            try:
                wfile.write(data)
                wfile.flush()
            except (BrokenPipeError, ValueError, OSError):
                pass

    def run(rid: Any, method: str, params: Mapping[str, Any] | None) -> None:
        try:
            modern = core.modern_version(params) if method != "initialize" else None
            meta = (params or {}).get("_meta") if isinstance(params, Mapping) else None
            token = meta.get("progressToken") if isinstance(meta, Mapping) else None

            def progress(done: float, total: float | None = None, message: str | None = None) -> None:
                if token is None:
                    return
                body: dict[str, Any] = {"progressToken": token, "progress": done}
                if total is not None:
                    body["total"] = total
                if message is not None:
                    body["message"] = message
                write({"jsonrpc": "2.0", "method": "notifications/progress", "params": body})

            def log_message(level: str, data: Any) -> None:
                write({"jsonrpc": "2.0", "method": "notifications/message",
                       "params": {"level": level, "logger": registry.name, "data": data}})

            ctx = Context(progress, log_message, meta if isinstance(meta, Mapping) else None)
            result = core.handle(method, params, ctx)
            if modern is not None:
                result = _complete(result)
            write({"jsonrpc": "2.0", "id": rid, "result": result})
        except RemoteError as exc:
            write(error_reply(rid, exc.code, exc.message, exc.data))
        except Exception as exc:  # noqa: BLE001
            log.exception("%s failed", method)
            write(error_reply(rid, INTERNAL_ERROR, f"internal error: {exc}"))

    pool = ThreadPoolExecutor(max_workers=max_workers, thread_name_prefix="mcpsync-server")
    try:
        while True:
            line = rfile.readline()
            if not line:
                break
            line = line.strip()
            if not line:
                continue
            try:
                msg = _decode(line)
            except msgspec.DecodeError as exc:
                write(error_reply(None, -32700, f"Parse error: {exc}"))
                continue
            if not isinstance(msg, dict):
                write(error_reply(None, -32600, "Invalid Request: not an object"))
                continue
            method = msg.get("method")
            if not isinstance(method, str):
                continue  # a response (this server sends no requests) or junk
            if "id" not in msg:
                continue  # notifications: initialized, cancelled, ... need no action
            params = msg.get("params")
            if params is not None and not isinstance(params, dict):
                write(error_reply(msg["id"], INVALID_PARAMS, "params must be an object"))
                continue
            pool.submit(run, msg["id"], method, params)
    finally:
        pool.shutdown(wait=True)
        sys.stdout = saved_stdout


class LocalHandle:
    """What the in-process Local transport needs from a :class:`Registry`.

    Handed out by :meth:`Registry.local_handle` so that ``mcpsync.transports`` never
    imports ``mcpsync.server``: the transport calls ``call_tool`` (a tool on the caller's
    thread, progress and log callbacks wired into its :class:`Context`) and ``handle``
    (any other request, after the protocol version check).
    """

    __slots__ = ("name", "_core", "_call")

    def __init__(self, registry: Registry) -> None:
        self.name = registry.name
        self._core = ServerCore(registry)
        self._call = registry.call_tool

    def call_tool(self, name: str, arguments: Any, progress: Any = None, log: Any = None, meta: Any = None) -> Any:
        ctx = Context(progress, log, meta) if (progress is not None or log is not None) else None
        return self._call(name, arguments, ctx)

    def handle(self, method: str, params: Mapping[str, Any] | None) -> Any:
        self._core.modern_version(params)
        return self._core.handle(method, params, None)
