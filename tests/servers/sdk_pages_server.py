"""An official-SDK (`mcp` 2.3.0) server whose lists come in pages and whose results carry
caching hints (modern era: `ttlMs`/`cacheScope`).

- resources/list: 5 resources, 2 per page; resources/templates/list: 3, 2 per page;
  prompts/list: 3 prompts, 1 per page.
- resources/read of `count://reads` answers how many times it was read (to see caching);
  hint: ttl 60 s, private.
- prompts/list hint: ttl 60 s, public.
- tool `bump`: announces that the resource and prompt lists changed (both eras).

Usage: sdk_pages_server.py [--no-listen]   (stdio; --no-listen: subscriptions/listen unserved)
"""

from __future__ import annotations

import sys
import warnings
from typing import Any

from mcp.server.caching import CacheHint
from mcp.server.mcpserver import Context, MCPServer
from mcp_types import (
    ListPromptsResult,
    ListResourcesResult,
    ListResourceTemplatesResult,
    PaginatedRequestParams,
    Prompt,
    Resource,
    ResourceTemplate,
)

warnings.simplefilter("ignore")

server = MCPServer(
    "sdk-pages-server",
    subscriptions=False if "--no-listen" in sys.argv else None,
    cache_hints={
        "resources/read": CacheHint(ttl_ms=60_000, scope="private"),
        "prompts/list": CacheHint(ttl_ms=60_000, scope="public"),
    },
)

READS = {"n": 0}


@server.resource("count://reads", mime_type="text/plain")
def reads() -> str:
    """How many times this resource was read."""
    READS["n"] += 1
    return str(READS["n"])


RESOURCES = [Resource(uri=f"page://r/{i}", name=f"r{i}") for i in range(5)]
TEMPLATES = [ResourceTemplate(uri_template=f"page://t{i}/{{x}}", name=f"t{i}") for i in range(3)]
PROMPTS = [Prompt(name=f"p{i}") for i in range(3)]


def _page(items: list[Any], cursor: str | None, size: int) -> tuple[list[Any], str | None]:
    start = int(cursor) if cursor else 0
    end = start + size
    return items[start:end], (str(end) if end < len(items) else None)


async def _resources(ctx: Any, params: PaginatedRequestParams) -> ListResourcesResult:
    items, nxt = _page(RESOURCES, params.cursor, 2)
    return ListResourcesResult(resources=items, next_cursor=nxt)


async def _templates(ctx: Any, params: PaginatedRequestParams) -> ListResourceTemplatesResult:
    items, nxt = _page(TEMPLATES, params.cursor, 2)
    return ListResourceTemplatesResult(resource_templates=items, next_cursor=nxt)


async def _prompts(ctx: Any, params: PaginatedRequestParams) -> ListPromptsResult:
    items, nxt = _page(PROMPTS, params.cursor, 1)
    return ListPromptsResult(prompts=items, next_cursor=nxt)


@server.tool()
async def bump(ctx: Context) -> str:
    """Add a prompt and announce that the prompt and resource lists changed."""
    PROMPTS.append(Prompt(name=f"p{len(PROMPTS)}"))
    v = ctx.protocol_version
    if v is not None and v < "2026":
        await ctx.session.send_prompt_list_changed()
        await ctx.session.send_resource_list_changed()
    else:
        await ctx.notify_prompts_changed()
        await ctx.notify_resources_changed()
    return "bumped"


server._lowlevel_server.add_request_handler("resources/list", PaginatedRequestParams, _resources)
server._lowlevel_server.add_request_handler("resources/templates/list", PaginatedRequestParams, _templates)
server._lowlevel_server.add_request_handler("prompts/list", PaginatedRequestParams, _prompts)

if __name__ == "__main__":
    server.run("stdio")
