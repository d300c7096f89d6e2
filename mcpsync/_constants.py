"""The constants of the MCP protocol that mcpsync speaks: one home.

Protocol revisions, the ``_meta`` keys of the stateless (2026-07-28) envelope and of
the extensions, and the HTTP header names of Streamable HTTP. JSON-RPC error codes live
with the exception tree, in :mod:`mcpsync._errors`.

This module imports nothing of the package, so that every layer (the client, the
transports, the bundled servers) may take its constants from here.

Example:
    >>> LATEST_MODERN, LATEST_LEGACY
    ('2026-07-28', '2025-11-25')
    >>> MODERN_FIRST <= LATEST_MODERN
    True
"""

from __future__ import annotations

__all__ = [
    "MODERN_VERSIONS",
    "LEGACY_VERSIONS",
    "LATEST_MODERN",
    "LATEST_LEGACY",
    "MODERN_FIRST",
    "META_VERSION",
    "META_CLIENT_CAPABILITIES",
    "META_CLIENT_INFO",
    "META_SERVER_INFO",
    "META_LOG_LEVEL",
    "META_SUBSCRIPTION_ID",
    "SKILLS_EXTENSION",
    "TASKS_EXTENSION",
    "HEADER_SESSION_ID",
    "HEADER_PROTOCOL_VERSION",
    "HEADER_METHOD",
    "HEADER_NAME",
    "HEADER_LAST_EVENT_ID",
    "CLIENT_DOES_NOT_TRAVEL",
]

# --- protocol revisions -------------------------------------------------------------

#: Revisions with the stateless per-request envelope.
MODERN_VERSIONS: tuple[str, ...] = ("2026-07-28",)
#: Revisions reached through the initialize handshake, oldest first.
LEGACY_VERSIONS: tuple[str, ...] = ("2024-11-05", "2025-03-26", "2025-06-18", "2025-11-25")
LATEST_MODERN = MODERN_VERSIONS[-1]
LATEST_LEGACY = LEGACY_VERSIONS[-1]
#: The first modern revision: a version string compares ``>=`` to it when it is modern.
MODERN_FIRST = MODERN_VERSIONS[0]

# --- _meta keys ---------------------------------------------------------------------

META_VERSION = "io.modelcontextprotocol/protocolVersion"
META_CLIENT_CAPABILITIES = "io.modelcontextprotocol/clientCapabilities"
META_CLIENT_INFO = "io.modelcontextprotocol/clientInfo"
META_SERVER_INFO = "io.modelcontextprotocol/serverInfo"
META_LOG_LEVEL = "io.modelcontextprotocol/logLevel"
META_SUBSCRIPTION_ID = "io.modelcontextprotocol/subscriptionId"
#: The skills extension's identifier (capabilities and ``_meta``).
SKILLS_EXTENSION = "io.modelcontextprotocol/skills"
#: The tasks extension's identifier (SEP-2663: ``resultType: "task"``, ``tasks/get|update|cancel``).
TASKS_EXTENSION = "io.modelcontextprotocol/tasks"

# --- Streamable HTTP headers --------------------------------------------------------

HEADER_SESSION_ID = "Mcp-Session-Id"
HEADER_PROTOCOL_VERSION = "MCP-Protocol-Version"
HEADER_METHOD = "Mcp-Method"
HEADER_NAME = "Mcp-Name"
HEADER_LAST_EVENT_ID = "Last-Event-ID"

#: Why a Client cannot be pickled or copied, and what travels instead (``Client.__reduce_ex__``).
CLIENT_DOES_NOT_TRAVEL = (
    "a Client ({name}) holds threads, pipes and sockets and cannot be pickled or copied; "
    "send a mcpsync.ClientSpec (ClientSpec.stdio/http/from_config with the same arguments) to the "
    "worker and call spec.client() there: one client per worker process"
)
