"""What the HTTP transports share, gathered from the modules that hold it.

The parts live in ``_http_options`` (options, auth hook protocol, media types),
``_sse`` (the event-stream parser), ``_http_pools`` (pools and stream threads),
``_http_errors`` (error mapping, redaction, deadlines, bodies) and ``_http_headers``
(``Mcp-Param-*`` and auth headers); this module re-exports them so that callers import
one place.
"""

from __future__ import annotations

from .._speedups import DEFAULT_MAX_MESSAGE_SIZE  # noqa: F401 - re-exported
from ._http_options import AuthHook, HTTPOptions, media_type, origin_of  # noqa: F401 - re-exported
from ._sse import SSEEvent, SSEParser, _Oversized  # noqa: F401 - re-exported
from ._http_pools import Pools, _pools, acquire_pool, release_pool, StreamThreads  # noqa: F401 - re-exported
from ._http_errors import (  # noqa: F401 - re-exported
    translate,
    MAX_REDIRECTS,
    redirect_target,
    SNIPPET,
    redact,
    sent_secrets,
    status_error,
    request_timeout,
    read_body,
)
from ._http_headers import (  # noqa: F401 - re-exported
    encode_header_value,
    header_annotation_error,
    header_annotations,
    mcp_param_headers,
    call_auth_headers,
    MAX_DPOP_NONCE_RETRIES,
    dpop_nonce_challenge,
    auth_retry,
)

__all__ = [
    "AuthHook",
    "HTTPOptions",
    "SSEEvent",
    "SSEParser",
    "Pools",
    "acquire_pool",
    "release_pool",
    "media_type",
    "origin_of",
    "translate",
    "status_error",
    "redirect_target",
    "StreamThreads",
    "redact",
    "sent_secrets",
    "request_timeout",
    "encode_header_value",
    "header_annotation_error",
    "header_annotations",
    "mcp_param_headers",
    "DEFAULT_MAX_MESSAGE_SIZE",
]
