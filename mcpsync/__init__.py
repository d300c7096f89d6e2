"""mcpsync: a synchronous, thread-safe Model Context Protocol client.

Example:
    >>> from mcpsync import Client
    >>> with Client.stdio("python", ["-m", "mcpsync.server.demo"]) as client:   # doctest: +SKIP
    ...     print(client.call_tool("echo", {"message": "hi"}).text)
"""

import logging as _logging
from typing import TYPE_CHECKING

from ._agent_messages import agent_message
from ._client import Client, ServerSession
from ._diagnostics import ConnectionDiagnostics, Diagnostics
from ._losses import SessionLost
from ._errors import (
    InputRequestError,
    OutputSchemaError,
    AuthError,
    Cancelled,
    CircuitOpen,
    ConnectError,
    StartFailed,
    SessionExpired,
    ConnectionClosed,
    InvalidParams,
    MCPError,
    MessageTooLarge,
    MethodNotFound,
    NetworkError,
    PermissionDenied,
    PoolTimeout,
    ProtocolError,
    RemoteError,
    RequestTimeout,
    ResourceError,
    ResourceNotFound,
    ServerUnavailable,
    SkillIntegrityError,
    ToolError,
    ToolNotFound,
    UnsupportedProtocolVersion,
)
from ._messages import (
    AudioContent,
    CallToolResult,
    EmbeddedResource,
    ImageContent,
    Implementation,
    ResourceLink,
    TextContent,
    Tool,
    UnknownContent,
)
from ._skills import Skill, SkillFile, SkillInfo
from ._extensions import Extension
from ._tasks import ToolTask
from ._cache import ToolCache
from ._breaker import BreakerState
from ._metrics import MetricsRecorder, MetricsSnapshot
from ._subscriptions import Subscription
from ._protocol_types import (
    Completion,
    GetPromptResult,
    Prompt,
    PromptArgument,
    PromptMessage,
    ReadResourceResult,
    Resource,
    ResourceTemplate,
    Task,
)
from ._policies import BreakerPolicy, PoolLimits, ReconnectPolicy, RetryPolicy, RetryThrottle, Timeouts
from ._pool import PoolStats
from ._routing import Endpoint, EndpointState, NoEndpointAvailable
from ._speedups import IMPLEMENTATION as SPEEDUPS
from ._spec import ClientSpec, close_process_clients, process_client
from .transports._base import Transport

__version__ = "0.1.0"

# A library's logger gets a NullHandler and nothing else: the application decides where
# records go, and none reach stderr through logging's last-resort handler uninvited.
_logging.getLogger(__name__).addHandler(_logging.NullHandler())

if TYPE_CHECKING:  # what the lazy names below are, for mypy and pyright
    from ._config import ConfigError, ServerConfig, load_config
    from ._multi import MultiClient, ServerStatus, ToolEntry
    from ._otel import Telemetry, telemetry
    from ._profiles import ProfileError, profile_options
    from ._resources import ResourceManager

# Imported on first use, so that `import mcpsync` stays light.
_LAZY = {
    "MultiClient": "._multi",
    "ServerStatus": "._multi",
    "ToolEntry": "._multi",
    "ServerConfig": "._config",
    "ConfigError": "._config",
    "load_config": "._config",
    "profile_options": "._profiles",
    "ProfileError": "._profiles",
    "ResourceManager": "._resources",
    "Telemetry": "._otel",
    "telemetry": "._otel",
}


def __getattr__(name: str) -> object:
    mod = _LAZY.get(name)
    if mod is None:
        raise AttributeError(f"module 'mcpsync' has no attribute {name!r}")
    import importlib

    value = getattr(importlib.import_module(mod, __name__), name)
    globals()[name] = value
    return value

__all__ = [
    "Client",
    "MultiClient",
    "ServerStatus",
    "ToolEntry",
    "ServerConfig",
    "ConfigError",
    "load_config",
    "profile_options",
    "ProfileError",
    "Endpoint",
    "EndpointState",
    "NoEndpointAvailable",
    "PoolStats",
    "ResourceManager",
    "Telemetry",
    "telemetry",
    "ServerSession",
    "Diagnostics",
    "ConnectionDiagnostics",
    "ClientSpec",
    "process_client",
    "close_process_clients",
    "Transport",
    "Timeouts",
    "RetryPolicy",
    "RetryThrottle",
    "BreakerPolicy",
    "PoolLimits",
    "ReconnectPolicy",
    "BreakerState",
    "agent_message",
    "ToolCache",
    "MetricsRecorder",
    "MetricsSnapshot",
    "Tool",
    "CallToolResult",
    "TextContent",
    "ImageContent",
    "AudioContent",
    "ResourceLink",
    "EmbeddedResource",
    "UnknownContent",
    "Resource",
    "ResourceTemplate",
    "ReadResourceResult",
    "Prompt",
    "PromptArgument",
    "PromptMessage",
    "GetPromptResult",
    "Completion",
    "Task",
    "ToolTask",
    "Extension",
    "Subscription",
    "InputRequestError",
    "OutputSchemaError",
    "Implementation",
    "MCPError",
    "NetworkError",
    "ConnectError",
    "StartFailed",
    "SessionExpired",
    "SessionLost",
    "ConnectionClosed",
    "RequestTimeout",
    "ServerUnavailable",
    "CircuitOpen",
    "ProtocolError",
    "MessageTooLarge",
    "SkillIntegrityError",
    "Skill",
    "SkillInfo",
    "SkillFile",
    "RemoteError",
    "ToolError",
    "ToolNotFound",
    "InvalidParams",
    "ResourceError",
    "ResourceNotFound",
    "MethodNotFound",
    "UnsupportedProtocolVersion",
    "AuthError",
    "PermissionDenied",
    "PoolTimeout",
    "Cancelled",
    "SPEEDUPS",
    "__version__",
]
