"""Model Context Protocol servers' tools under the same gate as the built-in tools (docs/mcp.md):
config.py (the policy file's `[mcp]`), listing.py (a listed tool, checked), tool.py (as a
clawgate tool), risk.py (asks by default), results.py, launch.py (the sandbox, the
transports), connection.py (one server, supervised), supervisor.py (all of them)."""
