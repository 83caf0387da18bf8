"""Settings of the read path: candidates, ceilings, streams, fusion, the touch's follow-up."""

from __future__ import annotations

import re
from typing import Annotated, Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator

PROVIDER_NAME = re.compile(r"^[A-Za-z0-9_-]{1,64}$")


class RerankProvider(BaseModel):
    """One named reranker (VIBE_RERANK_PROVIDERS): a Cohere- or TEI-compatible `/rerank` endpoint."""

    model_config = ConfigDict(extra="forbid", populate_by_name=True)
    url: str = Field(min_length=1, max_length=2048, pattern=r"^https?://")
    model: str | None = Field(default=None, max_length=256)
    protocol: Literal["cohere", "tei"] = "cohere"
    api_key: str | None = Field(default=None, alias="apiKey", repr=False, max_length=4096)


class ReadSettings(BaseModel):
    """What a read considers, spends and streams."""

    # Read path (the design's example numbers as defaults).
    space: str = Field(default="core", description=(
        "The default embedding space (a model's vectors) every tenant reads and writes unless it migrated"
        " to another."))
    lexical_candidates: int = Field(default=500, description=(
        "How many keyword hits a read considers for fusion and for embedding on touch."))
    max_limit: int = Field(default=200, description=(
        "Largest `limit` (results per page) a read may ask for; more is refused with 400."))
    max_k: int = Field(default=2000, description=(
        "Largest `semantic.k` (semantic candidates) a read may ask for; more is refused with 400."))
    # Global reads (collection `any`, services/planner/fanout.py): a leg per collection, each
    # guaranteed a share of the candidates; bounded because each leg is an engine query.
    global_max_collections: Annotated[int, Field(ge=1, le=1_000)] = Field(default=32, description=(
        "A global read (collection `any`) searches this many collections with a leg each; the tenant's other "
        "collections are searched together by one more leg (`diagnostics.global.remainder`)."))
    global_min_share: Annotated[int, Field(ge=1, le=2_000)] = Field(default=20, description=(
        "Fewest candidates each collection's leg of a global read is guaranteed in the merged list."))
    per_query_max_embeds: int = Field(default=50, description=(
        "Most documents one query may queue for embedding (the per-query ceiling)."))
    per_tenant_per_min: int = Field(default=200, description=(
        "Documents per minute a tenant may send to the embedder (touches, eager writes, backfills with a "
        "paid provider: VIBE_ADMIN_LANE_LOCAL_UNMETERED)."))
    stream_wait_seconds: float = Field(default=15.0, description=(
        "How long a stream waits for the embeddings its query queued before it ends with `done`."))
    # SSE hygiene: a `: keep-alive` comment after this many seconds without an
    # event, and the `retry:` reconnection hint (milliseconds) a stream starts with.
    stream_heartbeat_seconds: Annotated[float, Field(gt=0)] = Field(default=10.0, description=(
        "A stream sends a `: keep-alive` comment after this many seconds without an event."))
    stream_retry_ms: Annotated[int, Field(ge=0)] = Field(default=3_000, description=(
        "The `retry:` reconnection hint (milliseconds) every stream starts with."))
    # The in-process embedding pipeline waits for first answers in flight before each batch and
    # each index apply, at most this long each time (0 = never waits; shared/foreground.py).
    foreground_max_wait_seconds: Annotated[float, Field(ge=0, le=5)] = Field(default=0.05, description=(
        "The in-process embedding pipeline waits at most this long for first answers in flight before "
        "each batch (0 = never waits)."))
    # A stream's steps after its first event (the semantic leg, fusion, the touch) start this
    # long after it is sent and then wait for first answers in flight like the pipeline
    # (services/api/routes_read.py `_stream`): a client that reads first events back to back
    # sends its next query within about this time, and that query's first answer goes first.
    stream_tail_grace_seconds: Annotated[float, Field(ge=0, le=1)] = Field(default=0.003, description=(
        "A stream's steps after its first event (semantic leg, fusion, touch) start this long after it, "
        "so the next query's first answer goes first."))
    # POST .../docs:mget ids per request
    max_mget_ids: Annotated[int, Field(ge=1)] = Field(default=100, description=(
        "Most ids one `docs:mget` request may ask for."))
    # How long a write waits for a SHARED index (OpenSearch, Qdrant server) that another
    # replica is applying to reach it, so a revoked ACL or a delete is searched no more once
    # the write returns (shared/indexing.py). Embedded indexes apply in the writer's process.
    write_sync_wait_seconds: float = Field(default=2.0, description=(
        "How long a write waits for a shared index (OpenSearch, Qdrant server) applied by another replica"
        " to reach it."))
    rrf_k: int = Field(default=60, description=(
        "The k constant of reciprocal-rank fusion (VIBE_FUSION=rrf and the MCP hybrid search)."))
    # Hybrid fusion (services/planner/fusion.py), chosen leave-one-collection-out by
    # `python -m bench.fusion_loo`.
    fusion: Literal["zscore", "rrf"] = Field(default="zscore", description=(
        "Hybrid fusion: `zscore` (weighted z-scores, the default) or `rrf` (reciprocal-rank fusion)."))
    semantic_weight: Annotated[float, Field(ge=0.0, le=1.0)] = Field(default=0.55, description=(
        "Weight of the semantic leg in z-score fusion (the keyword leg gets the rest)."))
    # `auto` by collection state (services/planner/auto_state.py): the embedded share of a
    # collection, counted at most once per TTL per collection.
    auto_keyword_below_coverage: Annotated[float, Field(ge=0.0, le=1.0)] = Field(default=0.05, description=(
        "`auto` answers a short query by keyword when less than this share of the collection is embedded."))
    auto_short_query_words: Annotated[int, Field(ge=0, le=64)] = Field(default=3, description=(
        "A query of at most this many words is short (for VIBE_AUTO_KEYWORD_BELOW_COVERAGE)."))
    auto_hybrid_above_coverage: Annotated[float, Field(ge=0.0, le=1.0)] = Field(default=0.5, description=(
        "`auto` answers a natural-language query hybrid \"by state\" from this embedded share on (the reason "
        "says the figure)."))
    auto_coverage_ttl_seconds: Annotated[float, Field(ge=0.0, le=3600.0)] = Field(default=30.0, description=(
        "How long a collection's embedded share is reused by `auto` before the store counts it again."))
    # Graph hydration (`graph: {depth}`, services/planner/graph.py): bounds on what one read walks and shows.
    graph_max_neighbors_per_node: Annotated[int, Field(ge=1, le=100)] = Field(default=10, description=(
        "Most neighbours a read with `graph` shows for each document it expands (heaviest edges first)."))
    graph_max_neighbors_total: Annotated[int, Field(ge=1, le=1_000)] = Field(default=100, description=(
        "Most neighbours a read with `graph` shows for its whole page, all results and depths together."))
    graph_speculation_per_doc: Annotated[int, Field(ge=0, le=20)] = Field(default=3, description=(
        "Neighbour speculation: documents one edge away (`semantic.edges`) that a read's touch queues for "
        "embedding per page document (the first 3), readable by the caller, after everything else it queues "
        "and within the same per-query and tenant budgets (0: off)."))
    # A read's optional rerank stage (services/planner/rerank.py): the page's documents sent to the
    # reranker of VIBE_RERANK_URL in its one call, bounded so a large page cannot make it a big spend.
    read_rerank_candidates: Annotated[int, Field(ge=1, le=200)] = Field(default=50, description=(
        "Most documents of a page a read with `rerank: true` sends to the reranker (VIBE_RERANK_URL) in its one "
        "call; the rest keep their fused place."))
    # More rerankers a read may name (`rerank: {"provider": name}`); VIBE_RERANK_URL is `default`.
    # Bounded: each is a client the API process keeps open.
    rerank_providers: dict[str, RerankProvider] = Field(default_factory=dict, max_length=16, description=(
        "Named rerankers a read may choose with `rerank: {\"provider\": name}`: a JSON object name → "
        "`{\"url\", \"model\"?, \"protocol\"?: cohere|tei, \"apiKey\"?}` (at most 16; names of letters, digits, "
        "`_`, `-`, at most 64). VIBE_RERANK_URL is the provider `default`."))
    # Each rerank call is a provider call: a tenant's reads may make at most this many a minute in
    # one API process, so one tenant's reranked reads cannot run up another's bill or latency.
    read_rerank_per_minute: Annotated[int, Field(ge=0)] = Field(default=600, description=(
        "Most reranker calls a tenant's reads make per minute in one API process (0: no bound); past it a "
        "page keeps its fused order and says `diagnostics.rerank.status = \"budget\"`."))

    # Query text (POST /v1/read `q` and `semantic.query.text`), in characters.
    max_query_chars: Annotated[int, Field(ge=1)] = Field(default=4_096, description=(
        "Longest query text, in characters."))
    # Query-vector cache (services/planner/query_cache.py): bounded by bytes as well as entries.
    query_cache_max_entries: Annotated[int, Field(ge=0)] = Field(default=10_000, description=(
        "Entries of the query-vector cache."))
    query_cache_max_bytes: Annotated[int, Field(ge=0)] = Field(default=64 * 1_048_576, description=(
        "Bytes of the query-vector cache."))

    # The touch's follow-up: a streamed first read touches again once its first touch has landed.
    # `auto` decides per tenant and collection from what its streamed first reads say of their
    # lexical top (services/planner/touch_switch.py FollowUpSwitch); that state lives in the store
    # of record: a process writes its observations every `touch_auto_flush_every` of them (and at
    # once on a change of state) and re-reads the stored row at most every
    # `touch_auto_refresh_seconds` (how soon another replica's reads reach it). The policy's
    # finer numbers are TouchPolicy's defaults (services/planner/touch_policy.py).
    touch_follow_up: bool | Literal["auto"] = Field(default="auto", description=(
        "A streamed first read touches again once its first touch has landed: `auto` (per collection, "
        "where it pays), true or false."))
    touch_auto_flush_every: Annotated[int, Field(ge=1, le=10_000)] = Field(default=10, description=(
        "A process writes its `auto` observations of a collection to the store every this many reads."))
    touch_auto_refresh_seconds: Annotated[float, Field(ge=0)] = Field(default=30.0, description=(
        "How often a process re-reads a collection's stored `auto` state."))

    @field_validator("rerank_providers")
    @classmethod
    def _provider_names(cls, providers: dict[str, RerankProvider]) -> dict[str, RerankProvider]:
        for name in providers:
            if not PROVIDER_NAME.match(name) or name == "default":
                raise ValueError(f"rerank provider name {name!r}: letters, digits, _ and - (at most 64), "
                                 "not `default` (VIBE_RERANK_URL is `default`)")
        return providers
