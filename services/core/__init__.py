"""The core services every front door (HTTP API, MCP tools, CLI, workers) shares."""
