"""Byte transports (stdio, Streamable HTTP, HTTP+SSE, WebSocket, gRPC, an SDK server in
process) and the Local channel.

Each lives in its own module and is imported on first use, so that importing mcpsync
never pulls in grpcio or websocket-client unless they are used.
"""

from __future__ import annotations

from typing import Any

from ._base import Transport

__all__ = [
    "Transport",
    "StdioTransport",
    "StreamableHTTPTransport",
    "SSETransport",
    "WebSocketTransport",
    "GrpcTransport",
    "LocalChannel",
    "SDKServerTransport",
]

_LAZY = {
    "StdioTransport": ".stdio",
    "StreamableHTTPTransport": ".streamable_http",
    "SSETransport": ".sse",
    "WebSocketTransport": ".websocket",
    "GrpcTransport": ".grpc",
    "LocalChannel": ".local",
    "SDKServerTransport": ".inprocess",
}


def __getattr__(name: str) -> Any:
    mod = _LAZY.get(name)
    if mod is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    import importlib

    return getattr(importlib.import_module(mod, __name__), name)
