"""Placeholder (issue #4): the MCP server is not built yet."""

from __future__ import annotations

from shared.config import Settings


def run_stdio(settings: Settings) -> None:
    raise SystemExit("the MCP server is not built yet (issue #4)")
