"""MCP server: agent retrieval tools over the same core."""
