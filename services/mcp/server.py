"""The MCP server (issue #4): agent retrieval tools over the same core, with the official
`mcp` SDK (2.x `MCPServer`). Served over stdio (`vibe-semantic mcp`, acting as
`VIBE_MCP_KEY`) and over streamable HTTP at the API's `/mcp` (services/mcp/http.py), where
each request's bearer key decides tenant and principals.

Tools: `search`, `reindex`, `citations.resolve`, `extract_key_info`, and
`inner_voice.retrieve` when `VIBE_ENABLE_INNER_VOICE=1` (listed always; gated per call with
`feature_disabled`, as seed 000 asks for a typed error).
"""

from __future__ import annotations

import logging
from typing import Any

import anyio
from mcp.server.mcpserver import Context, MCPServer
from mcp_types import CallToolResult

from services.api.auth import KeyRing, dev_key
from services.mcp.invoke import invoke
from services.mcp.runtime import ToolRuntime, build_runtime
from services.mcp.tools import Tools
from shared.config import Settings
from shared.model import Principal

log = logging.getLogger("vibe.mcp")

INSTRUCTIONS = ("Retrieval tools over vibe-semantic. Pass a conversation_id to get [n] citation numbers; "
                "cite passages with [n] only; resolve numbers with citations.resolve.")


def build_server(rt: ToolRuntime) -> MCPServer:
    srv: MCPServer = MCPServer("vibe-semantic", instructions=INSTRUCTIONS, log_level="WARNING")
    t = Tools(rt)

    @srv.tool(name="search", description="Hybrid/lexical/semantic search over chunks (seed 002).")
    def search(query: str, ctx: Context, top_k: int = 10, mode: str = "hybrid", collection: str | None = None,
               scope: dict[str, Any] | None = None, conversation_id: str | None = None) -> CallToolResult:
        params = {"query_chars": len(query), "top_k": top_k, "mode": mode, "collection": collection,
                  "scoped": scope is not None, "conversation": bool(conversation_id)}
        return invoke(rt, ctx.headers, "search", "read", params,
                      lambda c: t.search(c.principal, query, top_k, mode, collection, scope, conversation_id))

    @srv.tool(name="reindex", description="Index Markdown/text folders into a collection (seed 002 §4.5).")
    def reindex(ctx: Context, path: str | None = None, paths: list[str] | None = None, force: bool = False,
                collection: str | None = None) -> CallToolResult:
        params = {"path": path[:256] if path else path, "paths": len(paths) if paths is not None else None,
                  "first_paths": [x[:256] for x in (paths or [])[:5]], "force": force,
                  "collection": collection[:128] if collection else collection}
        return invoke(rt, ctx.headers, "reindex", "write", params,
                      lambda c: t.reindex(c.principal, path, paths, force, collection))

    @srv.tool(name="citations.resolve", description="Resolve [n] / [citation:n] numbers of a conversation.")
    def resolve(conversation_id: str, ctx: Context, numbers: list[int] | None = None,
                text: str | None = None) -> CallToolResult:
        params = {"conversation": True, "numbers": len(numbers or []), "text_chars": len(text or "")}
        return invoke(rt, ctx.headers, "citations.resolve", "read", params,
                      lambda c: t.resolve(c.principal, conversation_id, numbers, text))

    @srv.tool(name="extract_key_info", description="Top-K context strings from ad-hoc materials (seed 004).")
    def extract_key_info(query: str, materials: str, ctx: Context, topK: int | None = None,  # noqa: N803
                         task_id: str = "default", fusion: str | None = None) -> CallToolResult:
        params = {"query_chars": len(query), "materials_chars": len(materials), "topK": topK, "fusion": fusion}
        return invoke(rt, ctx.headers, "extract_key_info", "read", params,
                      lambda c: t.extract(c, query, materials, topK, task_id, fusion), task=task_id[:128])

    @srv.tool(name="inner_voice.retrieve", description="Provenance-rich snippets from KG and thoughts (seed 000).")
    def inner_voice(query: str, ctx: Context, top_k: int | None = None, floor: float | None = None,
                    mix: float | None = None, include_private: bool = False, include_tags: list[str] | None = None,
                    exclude_tags: list[str] | None = None, conversation_id: str | None = None) -> CallToolResult:
        params = {"query_chars": len(query), "top_k": top_k, "floor": floor, "mix": mix,
                  "include_private": include_private, "include_tags": len(include_tags or []),
                  "exclude_tags": len(exclude_tags or [])}
        return invoke(rt, ctx.headers, "inner_voice.retrieve", "read", params,
                      lambda c: t.inner_voice(c.principal, query, top_k, floor, mix, include_private,
                                              include_tags or [], exclude_tags or [], conversation_id))

    return srv


def stdio_principal(settings: Settings) -> tuple[KeyRing, Principal, str]:
    """The key the stdio server acts as (its principal and the key itself): VIBE_MCP_KEY among
    VIBE_API_KEYS, or the local dev key when no keys are configured (the same rule as `serve`)."""
    keys = list(settings.api_keys) or [dev_key(settings.data_dir)]
    ring = KeyRing(keys)
    token = settings.mcp_key or (keys[0].key if not settings.api_keys else None)
    found = ring.lookup(token) if token else None
    if found is None or token is None:
        raise SystemExit("vibe-semantic mcp: set VIBE_MCP_KEY to one of VIBE_API_KEYS")
    return ring, found, token


def run_stdio(settings: Settings) -> None:
    from services.wiring import build
    from shared.logging import configure_logging

    configure_logging(settings.debug)  # JSON lines on stderr; stdout carries the protocol
    ring, principal, token = stdio_principal(settings)
    container = build(settings)
    container.start()
    rt = build_runtime(container, ring, fixed=(principal, token))
    try:
        anyio.run(build_server(rt).run_stdio_async)
    finally:
        container.stop()
        rt.close()
