"""The MCP server: agent retrieval tools over the same core, with the official
`mcp` SDK (2.x `MCPServer`). Served over stdio (`vibe-semantic mcp`, acting as
`VIBE_MCP_KEY`) and over streamable HTTP at the API's `/mcp` (services/mcp/http.py), where
each request's bearer key decides tenant and principals.

Tools, by the names their clients call (older names stay as aliases):
- Rifflux (Markdown knowledge base search): `search_rifflux` (alias `search`), `reindex`, `reindex_status`,
  `get_chunk`, `get_file`, `index_status`;
- SurfSense (cited retrieval): `search_knowledge_base`, `citations.resolve`;
- `extract_key_info` (registered while VIBE_MCP_EXTRACT_KEY_INFO_ENABLED is on, the default);
- inner_voice / Surr memory: `inner_voice.retrieve` (alias `snippets.retrieve`), listed always and gated per
  call with `feature_disabled` unless `SURR_ENABLE_INNER_VOICE` is "1" (when it is unset,
  `VIBE_ENABLE_INNER_VOICE` decides).

Every parameter has a JSON-schema description; enums and bounds are in the schema (for
`search_rifflux`: `mode` lexical|semantic|hybrid, `top_k` ≥ 1, clamped to VIBE_MCP_MAX_TOP_K).
Arguments the schema refuses (missing, mistyped, out of bounds) come back as the tool's
error shape with `invalid_params`, not as SDK text (`VibeMCPServer.call_tool`).
"""

from __future__ import annotations

import inspect
import logging
from collections.abc import Callable
from typing import Annotated, Any, Literal

import anyio
from mcp.server.mcpserver import Context, MCPServer
from mcp.server.mcpserver.exceptions import ToolError, UnexpectedToolError
from mcp_types import CallToolResult, TextContent
from pydantic import Field, ValidationError

from services.container import Container
from services.core.keyring import KeyRing, dev_key, split_identity
from services.mcp.errors import invalid
from services.mcp.invoke import failed, invoke
from services.mcp.runtime import ToolRuntime, build_runtime
from services.mcp.tools import Tools
from shared.config import Settings
from shared.metrics import METRICS
from shared.model import Principal

log = logging.getLogger("vibe.mcp")

INSTRUCTIONS = ("Retrieval tools over vibe-semantic. search_knowledge_base returns passages numbered [n]; "
                "cite passages with [n] only; resolve numbers with citations.resolve.")

Query = Annotated[str, Field(description="Natural-language search text.")]
TopK = Annotated[int, Field(ge=1, le=100, description="Most results to return (1-100).")]
# Rifflux clients may send any positive top_k: above the server's limit it is clamped, and said so.
RiffluxTopK = Annotated[int, Field(ge=1, description="Most results to return: any positive number; above the "
                                                     "server's limit (VIBE_MCP_MAX_TOP_K, default 100) at most that "
                                                     "many come back and diagnostics.top_k says so.")]
Mode = Annotated[Literal["lexical", "semantic", "hybrid"], Field(
    description="lexical: BM25 only; semantic: cosine over embeddings only; hybrid: RRF of both (default).")]
Collection = Annotated[str | None, Field(
    description="Collection to use (default: the server's VIBE_MCP_COLLECTION); 'any' searches every "
                "collection the caller may read.")]
Conversation = Annotated[str | None, Field(
    description="Conversation whose citation registry numbers the passages [n] (1-256 characters).")]
ScopeArg = Annotated[dict[str, Any] | None, Field(
    description="Optional filter applied inside the engine query: {document_ids, folder_ids, connector_ids, "
                "thread_ids} lists of ids (strings or integers). Each non-empty list must hold (AND); an empty "
                "list is no constraint. folder_ids: ids as results' folder_id show them (a folder covers its "
                "subfolders); connector_ids / thread_ids: documents whose connector_id / thread_id field holds "
                "the id. Also paths (file path prefixes) and collection_ids.")]
DbPath = Annotated[str | None, Field(description="Rifflux's SQLite path: accepted and not used; this server "
                                                   "answers from its own store (diagnostics.db_path says so).")]


class VibeMCPServer(MCPServer):
    """Arguments the SDK's schema validation refuses answer in the tool's error shape."""

    async def call_tool(self, name: str, arguments: dict[str, Any], context: Context[Any, Any] | None = None) -> Any:
        try:
            return await super().call_tool(name, arguments, context)
        except ToolError as e:
            if isinstance(e, UnexpectedToolError) or not isinstance(e.__cause__, ValidationError):
                raise
            METRICS.tool_calls.labels(tool=name[:64], outcome="invalid_params").inc()
            return failed(invalid(_describe(e.__cause__)))


def context_as_text(res: CallToolResult) -> CallToolResult:
    """The text a model reads is the `<retrieved_context>` alone, where `[n]` is the only
    number next to each passage; the JSON (chunk ids, document ids, scores) stays in the
    structured content for programs. A model shown ids beside passages cites them instead."""
    body = res.structured_content
    if res.is_error or not isinstance(body, dict) or not isinstance(body.get("context"), str):
        return res
    return res.model_copy(update={"content": [TextContent(type="text", text=body["context"])]})


def _describe(e: ValidationError) -> str:
    """Which arguments were refused and why, without echoing their values."""
    parts = []
    for err in e.errors()[:10]:
        where = ".".join(str(x) for x in err["loc"]) or "arguments"
        parts.append(f"{where}: {err['msg']}")
    return "invalid arguments: " + "; ".join(parts)


def build_server(rt: ToolRuntime) -> MCPServer:
    srv: MCPServer = VibeMCPServer("vibe-semantic", instructions=INSTRUCTIONS, log_level="WARNING")
    t = Tools(rt)

    def search_tool(name: str) -> None:
        @srv.tool(name=name, description="Search indexed chunks: lexical (BM25), semantic (cosine) or hybrid (RRF). "
                  "Returns {query, mode, count, embedding_model, results[chunk_id, path, heading_path, chunk_index, "
                  "content, score_breakdown]} (Rifflux contract).")
        def search(query: Query, ctx: Context, top_k: RiffluxTopK = 10, mode: Mode = "hybrid", db_path: DbPath = None,
                   collection: Collection = None, scope: ScopeArg = None,
                   conversation_id: Conversation = None) -> CallToolResult:
            params = {"query_chars": len(query), "top_k": min(top_k, 1 << 31), "mode": mode, "collection": collection,
                      "scoped": scope is not None, "conversation": bool(conversation_id)}
            return invoke(rt, ctx.headers, name, "read", params,
                          lambda c: t.search(c.principal, query, top_k, mode, collection, scope, conversation_id,
                                             db_path))

    search_tool("search_rifflux")
    search_tool("search")  # the name clients used before

    @srv.tool(name="search_knowledge_base", description="Hybrid search of the knowledge base (reranked when a "
              "reranker is configured), optionally scoped; every passage is registered and shown as [n] in "
              "`context` (SurfSense contract). Cite with [n] only.")
    def search_knowledge_base(query: Query, ctx: Context, scope: ScopeArg = None, top_k: TopK = 10,
                              conversation_id: Conversation = None, collection: Collection = None,
                              rerank: Annotated[bool, Field(description="Use the configured reranker (default "
                                                                        "true; no effect when none is).")] = True
                              ) -> CallToolResult:
        params = {"query_chars": len(query), "top_k": top_k, "collection": collection, "scoped": scope is not None,
                  "conversation": bool(conversation_id), "rerank": rerank}
        return context_as_text(invoke(rt, ctx.headers, "search_knowledge_base", "read", params,
                                      lambda c: t.knowledge_base(c.principal, query, scope, top_k, collection,
                                                                 conversation_id, rerank)))

    @srv.tool(name="reindex", description="Index Markdown/text files from folders into a collection (Rifflux "
              "contract): non-empty `paths` wins over `path`; neither = the server's working directory.")
    def reindex(ctx: Context,
                path: Annotated[str | None, Field(description="One file or folder to index.")] = None,
                paths: Annotated[list[str] | None, Field(description="Several files or folders; when non-empty, "
                                                                     "`path` is ignored.")] = None,
                force: Annotated[bool, Field(description="Re-index files whose content did not change.")] = False,
                prune_missing: Annotated[bool, Field(description="Drop the chunks of files that are gone from "
                                                                 "a scanned folder (default true).")] = True,
                background: Annotated[bool, Field(description="Validate now, index on a worker and return a "
                                                              "job_id; poll reindex_status.")] = False,
                collection: Collection = None) -> CallToolResult:
        params = {"path": path[:256] if path else path, "paths": len(paths) if paths is not None else None,
                  "first_paths": [x[:256] for x in (paths or [])[:5]], "force": force,
                  "prune_missing": prune_missing, "background": background,
                  "collection": collection[:128] if collection else collection}
        return invoke(rt, ctx.headers, "reindex", "write", params,
                      lambda c: t.reindex(c.principal, path, paths, force, collection, prune_missing, background))

    @srv.tool(name="reindex_status", description="Status of a background reindex: queued, running, done (with "
              "the reindex result) or failed (with the error).")
    def reindex_status(job_id: Annotated[str, Field(description="The job_id reindex(background=true) returned.")],
                       ctx: Context) -> CallToolResult:
        return invoke(rt, ctx.headers, "reindex_status", "read", {"job": job_id[:64]},
                      lambda c: t.reindex_status(c.principal, job_id))

    @srv.tool(name="get_chunk", description="One chunk by its chunk_id: {chunk: {chunk_id, path, heading_path, "
              "chunk_index, content}}.")
    def get_chunk(chunk_id: Annotated[str, Field(description="A chunk_id from a search result.")], ctx: Context,
                  collection: Collection = None) -> CallToolResult:
        return invoke(rt, ctx.headers, "get_chunk", "read", {"collection": collection},
                      lambda c: t.get_chunk(c.principal, chunk_id, collection))

    @srv.tool(name="get_file", description="Every chunk of one indexed file, in order: {chunks: [...]}.")
    def get_file(path: Annotated[str, Field(description="The file's path as search results show it (relative to "
                                                        "the indexed folder), or its absolute path.")],
                 ctx: Context, collection: Collection = None) -> CallToolResult:
        return invoke(rt, ctx.headers, "get_file", "read", {"path_chars": len(path), "collection": collection},
                      lambda c: t.get_file(c.principal, path, collection))

    @srv.tool(name="index_status", description="What the collection holds for the caller: files, chunks, "
              "embeddings, embedding_backend, embedding_model.")
    def index_status(ctx: Context, collection: Collection = None) -> CallToolResult:
        return invoke(rt, ctx.headers, "index_status", "read", {"collection": collection},
                      lambda c: t.index_status(c.principal, collection))

    @srv.tool(name="citations.resolve", description="Resolve [n] / [citation:n] numbers of a conversation.")
    def resolve(conversation_id: Annotated[str, Field(description="The conversation the numbers belong to.")],
                ctx: Context,
                numbers: Annotated[list[int] | None, Field(description="Citation numbers to resolve.")] = None,
                text: Annotated[str | None, Field(description="An answer whose [n] / [citation:n] tokens are "
                                                              "resolved and normalised to [citation:n].")] = None
                ) -> CallToolResult:
        params = {"conversation": True, "numbers": len(numbers or []), "text_chars": len(text or "")}
        return invoke(rt, ctx.headers, "citations.resolve", "read", params,
                      lambda c: t.resolve(c.principal, conversation_id, numbers, text))

    if rt.settings.mcp_extract_key_info_enabled:
        _extract_key_info_tool(srv, rt, t)

    def inner_voice_tool(name: str) -> None:
        @srv.tool(name=name, description="Provenance-rich snippets from the knowledge graph and thoughts; "
                  "retrieval only.")
        def inner_voice(
                query: Annotated[str, Field(description="Natural-language input.")], ctx: Context,
                top_k: Annotated[int | None, Field(description="Max snippets (default from config; clamped "
                                                               "to 1-50).")] = None,
                floor: Annotated[float | None, Field(description="Minimum cosine similarity (clamped to "
                                                                 "0-1; may adapt down to the min floor).")] = None,
                mix: Annotated[float | None, Field(description="KG share: 0.0 thoughts only, 1.0 KG only "
                                                               "(clamped to 0-1; default 0.6).")] = None,
                include_private: Annotated[bool, Field(description="Include private thoughts.")] = False,
                include_tags: Annotated[list[str] | None, Field(description="Only items with one of these "
                                                                            "tags.")] = None,
                exclude_tags: Annotated[list[str] | None, Field(description="Drop items with any of these "
                                                                            "tags.")] = None,
                conversation_id: Conversation = None) -> CallToolResult:
            params = {"query_chars": len(query), "top_k": top_k, "floor": floor, "mix": mix,
                      "include_private": include_private, "include_tags": len(include_tags or []),
                      "exclude_tags": len(exclude_tags or [])}
            return invoke(rt, ctx.headers, name, "read", params,
                          lambda c: t.inner_voice(c.principal, query, top_k, floor, mix, include_private,
                                                  include_tags or [], exclude_tags or [], conversation_id))

    inner_voice_tool("inner_voice.retrieve")
    inner_voice_tool("snippets.retrieve")  # the alternative name inner_voice clients may call

    return srv


def _extract_key_info_tool(srv: MCPServer, rt: ToolRuntime, t: Tools) -> None:
    """extract_key_info(query, materials, topK): the task comes from `task_id`, else the
    caller's identity (`Bearer <task>@<key>`), else VIBE_EXTRACT_DEFAULT_TASK."""
    s = rt.settings

    def extract_key_info(query: Annotated[str, Field(description="Natural-language question.")],
                         materials: Annotated[str, Field(description="Unstructured source text containing "
                                                                     "candidate answers.")],
                         ctx: Context,
                         topK: int | None = None,  # noqa: N803 - the name clients send
                         task_id: Annotated[str | None, Field(description="The task the materials belong to "
                                                                          "(default: the identity of `Bearer "
                                                                          "<task>@<key>`, else the server's "
                                                                          "default task).")] = None,
                         fusion: Annotated[Literal["weighted", "rrf"] | None, Field(
                             description="weighted: 0.65 semantic + 0.35 lexical, ties by recency (default); "
                                         "rrf: reciprocal rank fusion.")] = None) -> CallToolResult:
        params = {"query_chars": len(query), "materials_chars": len(materials), "topK": topK, "fusion": fusion}
        checked: dict[str, Any] = {}

        def check(c: Any) -> None:
            checked["req"] = t.extract_check(c, query, materials, topK, task_id, fusion)
            params["task"] = checked["req"].task[:128]

        return invoke(rt, ctx.headers, "extract_key_info", "read", params,
                      lambda c: t.extract(c, checked["req"]), task=(task_id or "")[:128] or None, check=check)

    # topK's bounds and default are the operator's settings, so they are set on the signature
    # the SDK builds the input schema from (a static annotation could not name them).
    top_k = Annotated[int, Field(ge=1, le=s.extract_max_top_k, description=(
        f"Number of snippets to return (default {s.extract_top_k_default}, at most {s.extract_max_top_k})."))]
    sig = inspect.signature(extract_key_info, eval_str=True)
    extract_key_info.__signature__ = sig.replace(parameters=[  # type: ignore[attr-defined]
        p.replace(annotation=top_k, default=min(s.extract_top_k_default, s.extract_max_top_k))
        if p.name == "topK" else p for p in sig.parameters.values()])
    srv.tool(name="extract_key_info", description="Top-K context strings from ad-hoc materials for a task: "
             "returns a list of strings.")(extract_key_info)


def stdio_principal(settings: Settings) -> tuple[KeyRing, Principal, str, str | None]:
    """The key the stdio server acts as (its principal, the key itself and the identity of an
    `<identity>@<key>` VIBE_MCP_KEY): VIBE_MCP_KEY among VIBE_API_KEYS, or the local dev key
    when no keys are configured (the same rule as `serve`). The `<identity>@<key>` form is the
    stdio twin of the `Bearer <identity>@<key>` header, accepted under the same setting."""
    keys = list(settings.api_keys) or [dev_key(settings.data_dir)]
    ring = KeyRing(keys)
    token = settings.mcp_key or (keys[0].key if not settings.api_keys else None)
    found = ring.lookup(token) if token else None
    identity = None
    if found is None and token and settings.extract_task_from_bearer:
        identity, token = split_identity(token)
        found = ring.lookup(token) if identity is not None else None
    if found is None or token is None:
        raise SystemExit("vibe-semantic mcp: set VIBE_MCP_KEY to one of VIBE_API_KEYS (or <identity>@<key>)")
    return ring, found, token, identity


def run_stdio(settings: Settings, build: Callable[[Settings], Container]) -> None:
    """Serve the tools over stdio with the container `build` (the composition root's) makes."""
    from shared.logging import configure_logging

    configure_logging(settings.debug)  # JSON lines on stderr; stdout carries the protocol
    ring, principal, token, identity = stdio_principal(settings)
    container = build(settings)
    container.start()
    rt = build_runtime(container, ring, fixed=(principal, token), identity=identity)
    try:
        anyio.run(build_server(rt).run_stdio_async)
    finally:
        container.stop()
        rt.close()
