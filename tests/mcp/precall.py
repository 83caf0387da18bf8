"""A pre-call check loaded by the spawned MCP server in tests (VIBE_MCP_PRECALL_CHECK)."""

from __future__ import annotations

from typing import Any

from shared.agent_ports import PreCallDenied


def deny_big_topk(tenant: str, user: str, tool: str, params: dict[str, Any]) -> None:
    if tool == "extract_key_info" and params.get("topK") == 13:
        raise PreCallDenied("quota exhausted")
