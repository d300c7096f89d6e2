"""Resources and prompts of a server (the demo server has one of each kind).

Run: python examples/resources_prompts.py
"""

from __future__ import annotations

import sys

from mcpsync import Client, GetPromptResult, Prompt, ReadResourceResult, Resource, ResourceTemplate


def main() -> None:
    with Client.stdio(sys.executable, ["-m", "mcpsync.server.demo"]) as client:
        resources: list[Resource] = client.list_resources()
        templates: list[ResourceTemplate] = client.list_resource_templates()
        print("resources:", [r.uri for r in resources], "templates:", [t.uri_template for t in templates])
        about: ReadResourceResult = client.read_resource("demo://about")
        print(about.text)

        prompts: list[Prompt] = client.list_prompts()
        print("prompts:", [p.name for p in prompts])
        rendered: GetPromptResult = client.get_prompt("summarize", {"text": "MCP is a protocol.", "style": "one line"})
        for message in rendered.messages:
            print(message.role, "->", message.content)


if __name__ == "__main__":
    main()
