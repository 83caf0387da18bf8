"""Settings of the MCP server and the agent tools (inner_voice, Rifflux, SurfSense, extract_key_info)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated, Any, Literal

from pydantic import AliasChoices, BaseModel, Field, field_validator
from pydantic_settings import NoDecode


class McpSettings(BaseModel):
    """The MCP server and its agent tools."""

    # the key `vibe-semantic mcp` (stdio) acts as
    mcp_key: str | None = Field(default=None, description="The API key `vibe-semantic mcp` (stdio) acts as.")
    # inner_voice's own names (SURR_*, MCP_NO_LOG) are read too; the VIBE_ name wins when both are
    # set, except for the gate: inner_voice clients are told the tool is on exactly when
    # SURR_ENABLE_INNER_VOICE is "1", so when that variable is set it alone decides.
    enable_inner_voice: bool = Field(default=False, validation_alias=AliasChoices(
        "VIBE_ENABLE_INNER_VOICE"), description=(
        "Enable the MCP `inner_voice.retrieve` tool when SURR_ENABLE_INNER_VOICE is not set."))
    surr_enable_inner_voice: str | None = Field(default=None, validation_alias=AliasChoices(
        "SURR_ENABLE_INNER_VOICE"), description=(
        "inner_voice's own gate: when set, it alone decides, and only the exact string `1` enables "
        "`inner_voice.retrieve` (`true`, `yes`, ` 1` do not); unset = VIBE_ENABLE_INNER_VOICE decides."))
    # where `reindex` stores chunks and `search` looks by default
    mcp_collection: str = Field(default="kb", description=(
        "Collection where the MCP `reindex` tool stores chunks and `search` looks by default."))
    mcp_max_file_bytes: int = Field(default=2_000_000, description="Largest file the MCP `reindex` tool reads.")
    mcp_chunk_chars: int = Field(default=1200, description="Characters per chunk when `reindex` splits a file.")
    mcp_chunk_overlap: int = Field(default=200, description="Characters two consecutive chunks share.")
    mcp_max_top_k: int = Field(default=100, description="Largest `top_k` an MCP search tool accepts.")
    mcp_no_log: bool = Field(default=False, validation_alias=AliasChoices(  # inner_voice's switch: counters only
        "VIBE_MCP_NO_LOG", "MCP_NO_LOG"), description=(
        "Counters only, no detailed logs of MCP tool calls (also read from MCP_NO_LOG)."))
    # "module:attr" of a PreCallCheck (extract_key_info's billing hook)
    mcp_precall_check: str | None = Field(default=None, description=(
        "`module:attr` of a hook called before each MCP tool call (for billing), after its arguments are "
        "checked."))
    inner_voice_kg_collection: str = Field(default="kg", description=(
        "Collection `inner_voice.retrieve` reads knowledge-graph entries from."))
    inner_voice_thoughts_collection: str = Field(default="thoughts", description=(
        "Collection `inner_voice.retrieve` reads thoughts from."))
    inner_voice_mix: float = Field(default=0.6, validation_alias=AliasChoices(
        "VIBE_INNER_VOICE_MIX", "SURR_INNER_VOICE_MIX"), description=(
        "Share of knowledge-graph results in `inner_voice.retrieve` (also SURR_INNER_VOICE_MIX)."))
    inner_voice_topk_default: int = Field(default=10, validation_alias=AliasChoices(
        "VIBE_INNER_VOICE_TOPK_DEFAULT", "SURR_INNER_VOICE_TOPK_DEFAULT"), description=(
        "Results `inner_voice.retrieve` returns when not asked (also SURR_INNER_VOICE_TOPK_DEFAULT)."))
    inner_voice_floor: float = Field(default=0.25, description="Default score floor of `inner_voice.retrieve`.")
    inner_voice_min_floor: float = Field(default=0.15, validation_alias=AliasChoices(
        "VIBE_INNER_VOICE_MIN_FLOOR", "SURR_INNER_VOICE_MIN_FLOOR"), description=(
        "Lowest score floor `inner_voice.retrieve` accepts (also SURR_INNER_VOICE_MIN_FLOOR)."))
    inner_voice_max_candidates_per_source: int = Field(default=150, validation_alias=AliasChoices(
        "VIBE_INNER_VOICE_MAX_CANDIDATES_PER_SOURCE", "SURR_INNER_VOICE_MAX_CANDIDATES_PER_SOURCE"), description=(
        "Candidates `inner_voice.retrieve` takes from each source (also "
        "SURR_INNER_VOICE_MAX_CANDIDATES_PER_SOURCE)."))
    # also read by the name the tool's own manual gives it (settings.mcp.extract_key_info.top_k_default)
    extract_top_k_default: Annotated[int, Field(ge=1)] = Field(default=5, validation_alias=AliasChoices(
        "VIBE_EXTRACT_TOP_K_DEFAULT", "VIBE_MCP_EXTRACT_KEY_INFO_TOP_K_DEFAULT"), description=(
        "Items `extract_key_info` returns when `topK` is omitted (also VIBE_MCP_EXTRACT_KEY_INFO_TOP_K_DEFAULT)."))
    extract_max_top_k: int = Field(default=20, description="Largest `topK` `extract_key_info` accepts.")
    extract_max_materials_chars: int = Field(default=200_000, description=(
        "Most characters of materials in one `extract_key_info` call."))
    extract_max_query_chars: int = Field(default=2_000, description="Longest `extract_key_info` query, in characters.")
    extract_max_chunk_chars: Annotated[int, Field(ge=100)] = Field(default=1_500, validation_alias=AliasChoices(
        "VIBE_EXTRACT_MAX_CHUNK_CHARS", "VIBE_MCP_EXTRACT_KEY_INFO_MAX_CHUNK_CHARS"), description=(
        "Characters per chunk of `extract_key_info` materials (also VIBE_MCP_EXTRACT_KEY_INFO_MAX_CHUNK_CHARS)."))
    # extract_key_info's fusion: 0.65 semantic/0.35 lexical, recency ties
    extract_fusion: Literal["rrf", "weighted"] = Field(default="weighted", description=(
        "Fusion of `extract_key_info`: `weighted` (0.65 semantic / 0.35 keyword, recency breaks ties) or "
        "`rrf`."))
    # `Authorization: Bearer <identity>@<key>` is how extract_key_info clients name their task
    # (the key is the user, the identity the task); on by default so those clients work as
    # written. The key still authenticates: an identity only picks a task among the key's own.
    extract_task_from_bearer: bool = Field(default=True, description=(
        "Accept `Authorization: Bearer <task>@<key>` (and VIBE_MCP_KEY=`<task>@<key>` over stdio): the key "
        "authenticates, `<task>` is the `extract_key_info` task when no `task_id` is given."))
    # The task of a call that names none (no task_id, no identity): extract_key_info clients
    # call with (query, materials, topK) only. Empty = such a call is refused with invalid_params.
    extract_default_task: str = Field(default="default", max_length=128, description=(
        "`extract_key_info` task of a call without `task_id` or identity (empty: such calls are refused)."))
    # A call's chunks are embedded only if the tenant's per-minute embedding budget holds them
    # all; short of that, the call waits this long at most for the bucket to refill (a
    # rate-limited call is retried, not failed at once), then answers `rate_limited`.
    extract_budget_wait_seconds: Annotated[float, Field(ge=0, le=60)] = Field(default=5.0, description=(
        "Longest `extract_key_info` waits for the tenant's per-minute embedding budget to hold its chunks "
        "before it answers `rate_limited`."))
    # The tool is registered only when on (off: not listed, calls answer "unknown tool").
    mcp_extract_key_info_enabled: bool = Field(default=True, description=(
        "Register the MCP `extract_key_info` tool."))
    # Tenant-labelled series of the agent tools' metrics, on their own endpoint; /metrics never
    # carries a tenant label (cardinality, and a scrape must not list the tenants).
    mcp_tenant_metrics: Literal["off", "hashed", "name"] = Field(default="off", description=(
        "`tool_calls_total`, `embedding_latency_seconds`, `bm25_latency_seconds` labelled by tenant at "
        "GET /metrics/tenants: `hashed` (a pseudonymous id of the tenant), `name` (the tenant itself) or `off`."))
    mcp_tenant_metrics_max_tenants: Annotated[int, Field(ge=1)] = Field(default=1_000, description=(
        "Most distinct tenant labels per process in GET /metrics/tenants; later tenants count as `_other`."))
    # then `embedder_unavailable`
    extract_embed_attempts: Annotated[int, Field(ge=1, le=10)] = Field(default=3, description=(
        "Embedder attempts in `extract_key_info` before it answers `embedder_unavailable`."))
    # doubled per retry
    extract_embed_backoff_seconds: Annotated[float, Field(ge=0)] = Field(default=0.2, description=(
        "First retry delay of those attempts (doubled per retry)."))
    # 0 = keep forever
    extract_task_retention_days: Annotated[float, Field(ge=0)] = Field(default=90.0, description=(
        "`extract_key_info` tasks unused this many days are purged (0 = kept forever)."))
    # The reranker (as in SurfSense): a Cohere/TEI-compatible `/rerank` endpoint; off when unset.
    # the full endpoint, e.g. http://tei:8080/rerank
    rerank_url: str | None = Field(default=None, description=(
        "Full URL of a Cohere- or TEI-compatible `/rerank` endpoint for `search_knowledge_base`; unset = "
        "no reranker."))
    rerank_model: str | None = Field(default=None, description="Model name sent to the reranker.")
    rerank_api_key: str | None = Field(default=None, repr=False, description="API key sent to the reranker.")
    rerank_protocol: Literal["cohere", "tei"] = Field(default="cohere", description="Reranker API: `cohere` or `tei`.")
    # fused candidates sent to the reranker
    rerank_candidates: Annotated[int, Field(ge=1, le=1000)] = Field(default=50, description=(
        "Fused candidates sent to the reranker."))
    rerank_timeout_seconds: Annotated[float, Field(gt=0)] = Field(default=10.0, description=(
        "Timeout of a reranker call; on failure the fused order is kept."))

    # Bounds of the agent tools' inputs and of what they may read.
    # Folders `reindex` may read: a JSON list, one path, or an os.pathsep-separated list. Empty
    # (the default) = reindex is off; the server's working directory is never a root by itself.
    mcp_reindex_roots: Annotated[list[Path], NoDecode] = Field(default_factory=list, description=(
        "Folders the MCP `reindex` tool may read, for every tenant: a JSON list, one path or an "
        "os.pathsep-separated list; empty = off."))
    # Folders bound to one tenant each, `{"<tenant>": [paths]}` (JSON): only that tenant's keys
    # reindex them (besides the shared VIBE_MCP_REINDEX_ROOTS), and no other tenant reaches
    # them through a root that holds them (services/mcp/reindex.py `Roots`).
    mcp_reindex_tenant_roots: dict[str, list[Path]] = Field(default_factory=dict, description=(
        "Folders bound to one tenant each, JSON `{\"<tenant>\": [paths]}`; only that tenant's keys reindex "
        "them."))
    # Background reindex jobs one tenant may have queued or running in a process (0 = no bound).
    mcp_reindex_jobs_per_tenant: Annotated[int, Field(ge=0)] = Field(default=4, description=(
        "Background reindex jobs one tenant may have queued or running (0 = no bound)."))
    # locations per reindex call
    mcp_reindex_max_paths: Annotated[int, Field(ge=1)] = Field(default=64, description="Locations per `reindex` call.")
    # files per reindex call
    mcp_reindex_max_files: Annotated[int, Field(ge=1)] = Field(default=10_000, description="Files per `reindex` call.")
    mcp_max_path_chars: Annotated[int, Field(ge=1)] = Field(default=4096, description=(
        "Longest path an MCP tool accepts, in characters."))
    # search, inner_voice.retrieve (as POST /v1/read)
    mcp_max_query_chars: Annotated[int, Field(ge=1)] = Field(default=4_096, description=(
        "Longest query of the MCP search tools, in characters."))
    # ids across a search scope's lists
    mcp_max_scope_ids: Annotated[int, Field(ge=1)] = Field(default=1_000, description=(
        "Most ids across a search scope's lists."))
    # one scope id, tag or collection name
    mcp_max_id_chars: Annotated[int, Field(ge=1)] = Field(default=1_024, description=(
        "Longest scope id, tag or collection name, in characters."))
    # include_tags / exclude_tags each
    mcp_max_tags: Annotated[int, Field(ge=1)] = Field(default=100, description=(
        "Most tags in `include_tags` or `exclude_tags`."))
    # citations.resolve numbers
    mcp_max_resolve_numbers: Annotated[int, Field(ge=1)] = Field(default=1_000, description=(
        "Most citation numbers one `citations.resolve` call takes."))
    # citations.resolve text
    mcp_max_resolve_text_chars: Annotated[int, Field(ge=1)] = Field(default=200_000, description=(
        "Longest text one `citations.resolve` call takes."))
    # extract_key_info task collections and ACL tokens are HMACs under this secret. None = a
    # random secret kept in DATA_DIR/mcp_task_secret (created on first use, mode 0600); API
    # replicas with separate data dirs must share one (set it) to share task materials.
    mcp_task_secret: str | None = Field(default=None, repr=False, min_length=16, description=(
        "Secret (16+ characters) for `extract_key_info` task ids; unset = kept in "
        "DATA_DIR/mcp_task_secret. Replicas must share one."))
    # extract_key_info material budget per API key per UTC day: characters of materials
    # submitted, and new chunks stored (and embedded). Refused with `quota_exceeded`.
    extract_daily_chars_per_key: Annotated[int, Field(ge=1)] = Field(default=2_000_000, description=(
        "Characters of materials an API key may submit to `extract_key_info` per UTC day."))
    extract_daily_chunks_per_key: Annotated[int, Field(ge=1)] = Field(default=10_000, description=(
        "New chunks an API key may store through `extract_key_info` per UTC day."))

    @field_validator("mcp_reindex_roots", mode="before")
    @classmethod
    def _reindex_roots(cls, raw: Any) -> Any:
        """A JSON list of paths, a JSON string, one plain path, or paths joined by os.pathsep;
        anything else is refused with a message naming the setting (never a decode traceback)."""
        import os

        if not isinstance(raw, str):
            return raw
        text = raw.strip()
        if not text:
            return []
        if text[0] in '[{"':
            try:
                value = json.loads(text)
            except json.JSONDecodeError:
                value = None
            if isinstance(value, str):
                value = [value]
            if not (isinstance(value, list) and all(isinstance(v, str) and v.strip() for v in value)):
                raise ValueError("VIBE_MCP_REINDEX_ROOTS must be a JSON list of paths, one path, or paths "
                                 f"separated by {os.pathsep!r}")
            return value
        parts = [p.strip() for p in text.split(os.pathsep)]
        if any(not p for p in parts):
            raise ValueError(f"VIBE_MCP_REINDEX_ROOTS has an empty entry between {os.pathsep!r} separators")
        return parts

    @field_validator("mcp_reindex_roots", mode="after")
    @classmethod
    def _no_nul_in_roots(cls, roots: list[Path]) -> list[Path]:
        if any("\x00" in str(r) for r in roots):
            raise ValueError("VIBE_MCP_REINDEX_ROOTS must not contain NUL characters")
        return roots

    @field_validator("mcp_reindex_tenant_roots", mode="after")
    @classmethod
    def _no_nul_in_tenant_roots(cls, roots: dict[str, list[Path]]) -> dict[str, list[Path]]:
        if any("\x00" in str(r) for rs in roots.values() for r in rs):
            raise ValueError("VIBE_MCP_REINDEX_TENANT_ROOTS must not contain NUL characters")
        return roots
