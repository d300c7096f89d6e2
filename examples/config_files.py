"""Server configuration files: the `mcpServers` JSON that editors use.

Run: python examples/config_files.py   (writes an mcp.json for the demo server in a temp dir)
"""

from __future__ import annotations

import json
import sys
import tempfile
from pathlib import Path

from mcpsync import Client, ConfigError, MultiClient, ServerConfig, load_config


def main() -> None:
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "mcp.json"
        demo = {"command": sys.executable, "args": ["-m", "mcpsync.server.demo"], "env": {"LOG_LEVEL": "${LOG_LEVEL:-info}"}}
        path.write_text(json.dumps({"mcpServers": {"demo": demo, "second": demo}}))

        config = load_config(path)
        server: ServerConfig = config.usable["demo"]
        print(config.names, server.transport, server.command)

        with Client.from_config(path, "demo") as client:  # one server
            print(client.call_tool("echo", {"message": "hi"}).text)

        with MultiClient.from_config(path) as servers:  # all of them at once
            print(sorted(t.name for t in servers.list_tools()))

        bad = Path(tmp) / "bad.json"
        bad.write_text(json.dumps({"mcpServers": {"demo": demo, "broken": {"command": "python", "args": ["-m", 3]}}}))
        config = load_config(bad)  # a malformed entry fails its server only
        print("usable:", list(config), "errors:", {name: str(exc) for name, exc in config.errors.items()})
        try:
            load_config(bad, strict=True)  # or the file, when asked
        except ConfigError as exc:  # the path of the field at fault
            print("ConfigError:", exc)
        else:
            raise AssertionError("a number in args should be refused")


if __name__ == "__main__":
    main()
