"""The one Settings object (DESIGN.md §1: nothing else reads the environment).

Every name in DESIGN.md §5 is here with the `VIBE_` prefix. `profile` sets the defaults of
`queue`, `lexical`, `vectors` and `store`; each can still be chosen on its own.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated, Any, Literal

from pydantic import AliasChoices, BaseModel, Field, field_validator, model_validator
from pydantic_settings import BaseSettings, NoDecode, SettingsConfigDict

from shared.text.languages import LanguageMap


class ApiKey(BaseModel):
    """One entry of `VIBE_API_KEYS`."""

    key: str
    tenant: str
    principals: list[str] = Field(default_factory=list)
    scopes: list[Literal["read", "write", "admin"]] = Field(default_factory=lambda: ["read"])  # type: ignore[arg-type]
    certs: list[str] = Field(default_factory=list)  # certificates the key holds ("issuer:name")


class Settings(BaseSettings):
    model_config = SettingsConfigDict(env_prefix="VIBE_", extra="ignore", populate_by_name=True)

    profile: Literal["embedded", "distributed"] = "embedded"
    queue: Literal["embedded", "celery"] | None = None
    lexical: Literal["embedded", "opensearch"] | None = None
    vectors: Literal["embedded", "qdrant"] | None = None

    data_dir: Path = Path("./data")
    api_keys: list[ApiKey] = Field(default_factory=list)

    embedder: Literal["local", "openai", "hash"] = "local"
    embed_model: str = "all-MiniLM-L6-v2"
    embed_dim: int = 384  # used by the hash embedder; real models report their own
    # Local models (`local:<name>`) a tenant's space may use besides VIBE_EMBED_MODEL: names or
    # paths the operator vouches for; anything else is refused by its text (shared/model_specs.py).
    local_models: list[str] = Field(default_factory=list, max_length=100)
    # Fields whose numbers get a payload index in the vector collections every tenant shares
    # (range filters on other fields stay exact, read from the payload; shared/adapters/facets.py),
    # and at most this many such indexes per collection.
    filterable_fields: list[str] = Field(default_factory=list, max_length=1000)
    max_payload_indexes: Annotated[int, Field(ge=0, le=1000)] = 32
    embed_batch_size: int = 32  # documents per pipeline batch (store writes, a provider call, a queue message)
    # Documents per forward pass of the local model (onnxruntime or torch), within a pipeline
    # batch. Small passes pad less and keep activations in cache: with one document thread,
    # onnxruntime embeds 49.6 docs/s in passes of 4 against 38.0 in passes of 32, torch 50.0
    # against 47.3 (bench/results/perf-throughput-20261124-*.md).
    embed_model_batch_size: Annotated[int, Field(ge=1, le=256)] = 4
    openai_base_url: str | None = None
    openai_api_key: str | None = None

    redis_url: str = "redis://127.0.0.1:6379/0"
    opensearch_url: str | None = None
    # Every tenant index is `<prefix><tenant>-<hash>` and the template `<prefix>template`: deployments
    # (or test runs) sharing one cluster keep apart by prefix. Lowercase, as index names must be.
    opensearch_prefix: Annotated[str, Field(pattern=r"^[a-z0-9][a-z0-9_-]{0,40}-$")] = "vibe-lex-"
    qdrant_url: str | None = None

    host: str = "127.0.0.1"
    port: int = 8080
    debug: bool = False

    # Read path (DESIGN.md §3, V§4.2, V§4.3 example numbers as defaults).
    space: str = "core"
    lexical_candidates: int = 500
    max_limit: int = 200
    max_k: int = 2000
    per_query_max_embeds: int = 50
    per_tenant_per_min: int = 200
    stream_wait_seconds: float = 15.0
    # SSE hygiene (issue #13): a `: keep-alive` comment after this many seconds without an
    # event, and the `retry:` reconnection hint (milliseconds) a stream starts with.
    stream_heartbeat_seconds: Annotated[float, Field(gt=0)] = 10.0
    stream_retry_ms: Annotated[int, Field(ge=0)] = 3_000
    # The in-process embedding pipeline waits for first answers in flight before each batch and
    # each index apply, at most this long each time (0 = never waits; shared/foreground.py).
    foreground_max_wait_seconds: Annotated[float, Field(ge=0, le=5)] = 0.05
    # A stream's steps after its first event (the semantic leg, fusion, the touch) start this
    # long after it is sent and then wait for first answers in flight like the pipeline
    # (services/api/routes_read.py `_stream`): a client that reads first events back to back
    # sends its next query within about this time, and that query's first answer goes first.
    stream_tail_grace_seconds: Annotated[float, Field(ge=0, le=1)] = 0.003
    # Browser origins allowed to call the API (CORS): a JSON list or a comma-separated list;
    # empty (the default) sends no CORS headers at all.
    cors_origins: Annotated[list[str], NoDecode] = Field(default_factory=list)
    max_mget_ids: Annotated[int, Field(ge=1)] = 100  # POST .../docs:mget ids per request
    # How long a write waits for a SHARED index (OpenSearch, Qdrant server) that another
    # replica is applying to reach it, so a revoked ACL or a delete is searched no more once
    # the write returns (shared/indexing.py). Embedded indexes apply in the writer's process.
    write_sync_wait_seconds: float = 2.0
    rrf_k: int = 60
    # Hybrid fusion (services/planner/fusion.py), chosen leave-one-collection-out by
    # `python -m bench.fusion_loo` (bench/results/fusion_loo.json).
    fusion: Literal["zscore", "rrf"] = "zscore"
    semantic_weight: Annotated[float, Field(ge=0.0, le=1.0)] = 0.55
    # What z-score fusion gives a lexical candidate with no vector yet (fusion.stand_in_line):
    # the query's own line from lexical to semantic z ("line"), or its lexical z ("agree", the
    # behaviour before; kept for comparison in bench.touch_sim).
    fusion_stand_in: Literal["line", "agree"] = "line"

    # Workers.
    workers: int = 2
    job_max_attempts: int = 4
    job_backoff_seconds: float = 0.5
    # Threads the local model may use; 0 = all cores but one, so background embedding leaves
    # a core to the read path (bench latency: first events wait behind a busy model otherwise).
    embed_threads: int = 0
    # The local model's runtime (shared/adapters/embedders/onnx_embedder.py): auto = an ONNX
    # export (cached in <data_dir>/models, verified against torch) when it verifies, torch
    # otherwise (logged at start-up); onnx = fail at start-up without it. Documents follow
    # embed_doc_runtime (auto = onnxruntime: bench/throughput.py compares the two).
    embed_runtime: Literal["auto", "onnx", "torch"] = "auto"
    embed_doc_runtime: Literal["auto", "onnx", "torch"] = "auto"
    # How many nice levels below the process the local model's document thread runs (Linux,
    # per thread), so queries get a core first; 0 = same priority.
    embed_doc_nice: Annotated[int, Field(ge=0, le=19)] = 5
    # The serving process's garbage-collector thresholds (gc.set_threshold: allocations before a
    # young collection, young collections before a middle one, middle ones before a full one),
    # a JSON list. Each read allocates thousands of tracked objects (hits, keys, fused rows) and
    # CPython's (700, 10, 10) ran ~4 young collections a read and a full one (~30 ms) every ~30
    # reads; (5000, 20, 1000) spent a third of the collector time with no full collection in the
    # same 400 back-to-back reads at 100k documents (bench/results/gc-thresholds-*.json).
    gc_thresholds: tuple[Annotated[int, Field(ge=1)], Annotated[int, Field(ge=1)], Annotated[int, Field(ge=1)]] = (
        5000, 20, 1000)
    # The ONNX query encoder's weights: int8 = the feed-forward MatMuls' weights as int8 blocks
    # (onnx_export.query_int8), used only when its vectors of the probes are within 0.999
    # cosine of torch's at load (fp32 otherwise, logged); documents always go through fp32.
    embed_query_weights: Literal["int8", "fp32"] = "int8"

    # Input limits.
    max_doc_bytes: int = 1_048_576
    max_bulk_docs: int = 5_000
    max_bulk_bytes: int = 64 * 1_048_576
    # A bulk is stored in transactions of at most this many documents, the store's writer lock
    # and the index follower released between them, so another tenant's single write waits for
    # one chunk, not a whole 5,000-document bulk (issue 41). Each item still answers on its own.
    bulk_write_chunk: Annotated[int, Field(ge=1)] = 64

    # Eligibility and redaction (V§5, V§9): JSON in the environment.
    index_policy: list[dict[str, Any]] = Field(default_factory=list)
    embed_fields: dict[str, list[str]] = Field(default_factory=dict)

    # Lexical analysis language per collection (shared/text/languages.py; ISO code or English
    # name: "fr" or "french", or "simple": no stop words, no stemming), JSON in the environment:
    # '{"docs_fr": "fr"}'. Every other collection is analysed in `default_language`. Changing
    # either rebuilds the lexical index from the store of record at the next start (with
    # progress): set a collection's language before writing to it.
    default_language: str = "en"
    collection_languages: dict[str, str] = Field(default_factory=dict, max_length=10_000)

    # --- distributed (issue #3): Celery/Redis, reconciler, breaker ---
    # `vibe-semantic worker` serves Prometheus metrics for the whole worker (prefork children
    # included) on this port; None = off.
    metrics_port: int | None = None
    # A message a worker took but did not ack comes back after this long; it must exceed the
    # Per-collection settings stored through `PUT /v1/collections/{c}/settings` win over the two
    # above and over `embed_fields`; each process re-reads a tenant's rows after this many seconds
    # (shared/collection_settings.py): the bound on how long another replica's change takes.
    collection_settings_ttl_seconds: Annotated[float, Field(ge=0, le=60)] = 1.0
    # Documents a collection delete removes per transaction (`DELETE /v1/collections/{c}`), and
    # per `docs:deleteByFilter` call (the caller repeats the call while `more` is true).
    collection_delete_page: Annotated[int, Field(ge=1, le=10_000)] = 500
    delete_by_filter_max: Annotated[int, Field(ge=1, le=10_000)] = 1_000
    # longest batch plus the longest retry countdown, or a slow batch would run twice.
    celery_visibility_timeout: float = 3600.0
    celery_restore_interval: int = 10  # how often workers sweep for messages past the visibility timeout
    worker_queues: str = "interactive,control,bulk"  # lanes a worker consumes, strictly in this order
    redis_timeout_seconds: float = 0.5  # a dead broker must not stall a read or a write
    redis_down_backoff_seconds: float = 2.0  # after a Redis error, skip Redis this long (no per-call timeouts)
    job_dedupe_ttl_seconds: float = 3600.0  # a pending job key older than this no longer blocks a re-enqueue
    job_backoff_max_seconds: float = 60.0
    reconcile_interval_seconds: float = 30.0
    reconcile_stuck_seconds: float = 300.0  # `queued` longer than this without progress = a lost job
    reconcile_batch: int = 10_000
    queue_pubsub: bool = True  # workers announce finished jobs on Redis pub/sub (faster stream wake-ups)
    breaker_failures: int = 5  # consecutive non-429 provider failures that open the circuit
    breaker_cooldown_seconds: float = 30.0  # open → half-open (one probe call) after this long
    embed_timeout_seconds: float = 30.0  # per provider call (openai embedder)
    # The system of record (documents, sidecar state, vectors by content hash, change log):
    # SQLite in the data dir (one host) or PostgreSQL (API and workers on any host; each API
    # process keeps its embedded indexes in its own data dir). None = the profile's default.
    store: Literal["sqlite", "postgres"] | None = None
    postgres_url: str = "postgresql://vibe:vibe@postgres:5432/vibe"  # libpq URL or key=value DSN
    postgres_pool_size: int = 10  # connections per process (API threads, or one Celery pool child)

    # --- MCP and agent tools (issue #4) ---
    mcp_key: str | None = None  # the key `vibe-semantic mcp` (stdio) acts as
    # Seed 000's own names (SURR_*, MCP_NO_LOG) are read too; the VIBE_ name wins when both are set.
    enable_inner_voice: bool = Field(default=False, validation_alias=AliasChoices(
        "VIBE_ENABLE_INNER_VOICE", "SURR_ENABLE_INNER_VOICE"))
    mcp_collection: str = "kb"  # where `reindex` stores chunks and `search` looks by default
    mcp_max_file_bytes: int = 2_000_000
    mcp_chunk_chars: int = 1200
    mcp_chunk_overlap: int = 200
    mcp_max_top_k: int = 100
    mcp_no_log: bool = Field(default=False, validation_alias=AliasChoices(  # seed 000: counters only, no detail logs
        "VIBE_MCP_NO_LOG", "MCP_NO_LOG"))
    mcp_precall_check: str | None = None  # "module:attr" of a PreCallCheck (seed 004 billing hook)
    inner_voice_kg_collection: str = "kg"
    inner_voice_thoughts_collection: str = "thoughts"
    inner_voice_mix: float = Field(default=0.6, validation_alias=AliasChoices(
        "VIBE_INNER_VOICE_MIX", "SURR_INNER_VOICE_MIX"))
    inner_voice_topk_default: int = Field(default=10, validation_alias=AliasChoices(
        "VIBE_INNER_VOICE_TOPK_DEFAULT", "SURR_INNER_VOICE_TOPK_DEFAULT"))
    inner_voice_floor: float = 0.25
    inner_voice_min_floor: float = Field(default=0.15, validation_alias=AliasChoices(
        "VIBE_INNER_VOICE_MIN_FLOOR", "SURR_INNER_VOICE_MIN_FLOOR"))
    inner_voice_max_candidates_per_source: int = Field(default=150, validation_alias=AliasChoices(
        "VIBE_INNER_VOICE_MAX_CANDIDATES_PER_SOURCE", "SURR_INNER_VOICE_MAX_CANDIDATES_PER_SOURCE"))
    extract_top_k_default: int = 5
    extract_max_top_k: int = 20
    extract_max_materials_chars: int = 200_000
    extract_max_query_chars: int = 2_000
    extract_max_chunk_chars: int = 1_500
    extract_fusion: Literal["rrf", "weighted"] = "weighted"  # seed 004: 0.65 semantic/0.35 lexical, recency ties
    # Seed 004 `Authorization: Bearer <identity>@<token>`: when on, a call without task_id takes
    # <identity> as its task and <token> as the API key (off: task_id is required).
    extract_task_from_bearer: bool = False
    extract_embed_attempts: Annotated[int, Field(ge=1, le=10)] = 3  # then `embedder_unavailable`
    extract_embed_backoff_seconds: Annotated[float, Field(ge=0)] = 0.2  # doubled per retry
    extract_task_retention_days: Annotated[float, Field(ge=0)] = 90.0  # 0 = keep forever
    # --- reranker (seed 001 §4.3, V§10): a Cohere/TEI-compatible `/rerank` endpoint; off when unset ---
    rerank_url: str | None = None  # the full endpoint, e.g. http://tei:8080/rerank
    rerank_model: str | None = None
    rerank_api_key: str | None = Field(default=None, repr=False)
    rerank_protocol: Literal["cohere", "tei"] = "cohere"
    rerank_candidates: Annotated[int, Field(ge=1, le=1000)] = 50  # fused candidates sent to the reranker
    rerank_timeout_seconds: Annotated[float, Field(gt=0)] = 10.0

    # --- lifecycle (issue 11): scheduler, promotion, eviction, cold store, spaces, cost caps ---
    # (lead's block; DESIGN.md §5 "Lifecycle")
    # The scheduler (a thread in `serve`; a Celery beat task in the distributed profile) decides
    # every interval under a store lease, so one process leads however many run it.
    # False: this process runs no lifecycle tick (promotion, demotion, eviction, pruning,
    # retired-space expiry, the day's requeue of budget-deferred documents). Its thread still
    # flushes usage statistics; embedded, it also runs backfill steps (reindex, migration,
    # promotion) and the reconciler, which nothing else would; distributed, it leaves those to
    # the workers (Celery beat). Until 2026-11 false stopped the whole thread: a large reindex
    # stalled after its first step, and an API replica's usage never reached the store.
    # Celery beat (distributed) decides whatever this says.
    scheduler_enabled: bool = True
    scheduler_interval_seconds: Annotated[float, Field(gt=0)] = 60.0
    # Usage statistics: each API process buffers them in memory and flushes this often (a
    # read never waits for a statistics write); counts within the promotion window are exact
    # to one bucket (window / 12).
    usage_flush_seconds: Annotated[float, Field(gt=0)] = 2.0
    # Collection promotion (V§4.3 `collection: {queries: 20, hits: 50, windowMins: 120}`).
    promote_min_queries: Annotated[int, Field(ge=1)] = 20
    promote_min_hits: Annotated[int, Field(ge=0)] = 50
    promote_window_seconds: Annotated[float, Field(gt=0)] = 7200.0
    demote_idle_seconds: Annotated[float, Field(gt=0)] = 7 * 86400.0
    # Document promotion (V§4.3 `doc: {touches: 3, ttlDays: 30}`): a document touched this often
    # (decayed with the half-life) or found this often beside pinned ones is kept embedded
    # (pinned) for the TTL from the tick that finds it so, and pinned again while its decayed
    # count stays there: a burst of touches keeps a document for about half-lives x log2(count /
    # touches) beyond its last use, plus the TTL.
    doc_promote_touches: Annotated[float, Field(gt=0)] = 3.0
    doc_promote_ttl_seconds: Annotated[float, Field(ge=0)] = 30 * 86400.0
    usage_half_life_seconds: Annotated[float, Field(gt=0)] = 7 * 86400.0
    # Eviction to the cold store (V§4.3 "vectors unused for N days"; V§12 FP16/INT8 cold codes).
    evict_idle_seconds: Annotated[float, Field(gt=0)] = 30 * 86400.0
    evict_batch: Annotated[int, Field(ge=1)] = 5000
    cold_codec: Literal["float16", "int8"] = "float16"
    cold_dir: Path | None = None  # default DATA_DIR/cold; legacy files (and `files`) on a shared volume
    # `packed` (default): codes many to a page, in `cold.sqlite3` in the cold dir (SQLite store) or
    # a PostgreSQL table beside the store of record (no shared volume); files evicted before are
    # still read. `files`: one file per vector (as before 2026-11), at least a filesystem block each:
    # 5x (float16) to 10x (int8) the codes' size on ext4 (shared/adapters/cold_packed.py).
    cold_store: Literal["packed", "files"] = "packed"
    # Model rollback: a space retired at activation keeps its vectors in the cold store this
    # long (re-activating it needs no provider call for unchanged content); then they go.
    # 0 = kept until the space is re-activated.
    retired_space_retention_seconds: Annotated[float, Field(ge=0)] = 7 * 86400.0
    # Backfills (promotion, reindex, space migration) advance by at most this many documents per
    # step, spending only what the tenant's per-minute bucket holds beyond what reads keep.
    backfill_step_docs: Annotated[int, Field(ge=1)] = 2000
    # The share of the per-minute bucket that backfills leave to reads (touches). A backfill
    # still gets the whole refill rate while reads are idle (it takes the top of the bucket as it
    # refills); what this buys is the burst reads can spend at once while a backfill runs.
    backfill_read_share: Annotated[float, Field(ge=0, le=0.95)] = 0.75
    backfill_interval_seconds: Annotated[float, Field(gt=0)] = 2.0
    # Global backpressure (shared/backpressure.py): no backfill step while this many jobs wait in
    # the queue (every lane together), and no on-touch embedding while the touch's bound does:
    # twice as deep by default, so backfills yield first and reads, which someone waits for, last.
    backpressure_queue_depth: Annotated[int, Field(ge=1)] = 20_000
    touch_backpressure_queue_depth: Annotated[int, Field(ge=1)] = 40_000
    # Jobs one tenant may have queued (every lane, rehydrations included) before its touches and
    # backfills queue no more (shared/backpressure.py TenantShare): below the bounds above, so
    # no tenant alone stops the others' embedding. None = a quarter of the backfill bound; 0 = off.
    tenant_queue_max: Annotated[int, Field(ge=0)] | None = None

    def tenant_queue_bound(self) -> int:
        return self.backpressure_queue_depth // 4 if self.tenant_queue_max is None else self.tenant_queue_max
    # Cost caps (V§12): embedding tokens per tenant per UTC day (0 = no cap) and the price used
    # for /semantic/usage estimates (None = 0.02 $/1M tokens for openai, 0 for local models).
    tenant_daily_tokens: Annotated[int, Field(ge=0)] = 0
    embed_cost_per_million_tokens: float | None = None


    # --- touch economics (issue 11, bench lazy): helper B's block ---
    # What a query spends embedding on (services/planner/touch.py; tuned with `bench lazy` and
    # `python -m bench.touch_sim`, results in bench/results/touch-*).
    # adaptive (default): the page first, `limit` x factor deep (at least min_depth), a repeat
    # whose page is unstable digs to twice that, and a repeat whose page is settled (the same
    # documents as at its last touch, or its last dig did not reach the page) spends nothing
    # past its page; depth/fixed: the earlier policies. The finer knobs (similar probes, probe
    # rounds) are TouchPolicy fields, measured with bench.touch_sim `policy.*` settings.
    touch_policy: Literal["adaptive", "depth", "fixed"] = "adaptive"
    touch_depth_factor: float = 1.0
    touch_min_depth: int = 10
    speculate_neighbors: int = 0
    speculate_sources: int = 3
    # adaptive only (TouchPolicy fields of the same names without `touch_`; dig step chosen on
    # Cranfield, checked on CISI: bench/results/touch-cranfield.json, touch-cisi*.json):
    touch_dig_step: Annotated[int, Field(ge=0)] = 5
    touch_dig_max: Annotated[int, Field(ge=0)] = 60
    touch_remember: bool = True
    touch_probe_rounds: Annotated[int, Field(ge=0)] = 3
    touch_similar: Annotated[int, Field(ge=0)] = 0
    touch_first_under_budget: Annotated[int, Field(ge=0)] = 1
    touch_reach_best: Annotated[int, Field(ge=0)] = 10  # TouchPolicy.reach_best (0 = off)
    touch_reach_until: Annotated[int, Field(ge=0)] = 2  # TouchPolicy.reach_until (0 = every touch)
    touch_stable_zone: Annotated[float, Field(gt=0, le=1)] = 0.4  # TouchPolicy.stable_zone
    touch_unstable_least: Annotated[int, Field(ge=1, le=100)] = 2  # TouchPolicy.unstable_least
    # TouchPolicy.follow_up: a streamed first read touches again once landed; "auto": per tenant and
    # collection, where its first reads agree with their lexical top (touch.FollowUpSwitch), then
    # with `touch_auto_dig_step` for that collection's digs
    touch_follow_up: bool | Literal["auto"] = "auto"
    touch_auto_dig_step: Annotated[int, Field(ge=0)] = 8  # TouchPolicy.auto_dig_step
    # "auto", a collection whose first reads disagree with their lexical top: follow up too, with
    # these probing rounds and dig step (TouchPolicy.auto_disagree*); false = no follow-up there
    touch_auto_disagree: bool = True
    touch_auto_disagree_probe_rounds: Annotated[int, Field(ge=0)] = 1
    touch_auto_disagree_dig_step: Annotated[int, Field(ge=0)] = 4
    # The "auto" switch's state lives in the store of record (touch.FollowUpSwitch): a process writes
    # its observations of a collection every `touch_auto_flush_every` of them (and at once when one
    # changes the collection's state) and reads the stored row again at most every
    # `touch_auto_refresh_seconds` (how soon another replica's reads reach it)
    touch_auto_after: Annotated[int, Field(ge=1)] = 50  # TouchPolicy.auto_after: first reads before a state
    # TouchPolicy.auto_below: "agree" while the running mean is below it
    touch_auto_below: Annotated[float, Field(allow_inf_nan=False)] = -0.05
    touch_auto_flush_every: Annotated[int, Field(ge=1, le=10_000)] = 10
    touch_auto_refresh_seconds: Annotated[float, Field(ge=0)] = 30.0

    # --- hardening (issue 12): input bounds, adapters, MCP: helper C's block ---
    # ACL bounds (services/api/writes.py DocumentService._acl): each principal is one keyword term
    # in OpenSearch, whose `acl` field ignores terms over 1024 characters (fail closed: a dropped
    # term matches nobody), so a principal stays below that; the total bounds a point's payload.
    acl_max_principal_bytes: Annotated[int, Field(ge=1, le=1024)] = 512
    acl_max_bytes: Annotated[int, Field(ge=1)] = 65_536
    # Query text (POST /v1/read `q` and `semantic.query.text`), in characters.
    max_query_chars: Annotated[int, Field(ge=1)] = 4_096
    # Query-vector cache (services/planner/query_cache.py): bounded by bytes as well as entries.
    query_cache_max_entries: Annotated[int, Field(ge=0)] = 10_000
    query_cache_max_bytes: Annotated[int, Field(ge=0)] = 64 * 1_048_576
    # Longest input the openai embedder sends, in UTF-8 bytes (longer ones are cut at a character
    # boundary): a byte-level BPE token covers at least one byte, so 8,000 bytes stay under the
    # 8,191-token input limit of OpenAI's embedding models whatever the script.
    embed_max_input_bytes: Annotated[int, Field(ge=16)] = 8_000
    # GET /metrics asks for `Authorization: Bearer <token>` when set (off by default).
    metrics_token: str | None = None
    # Per-tenant request rate (token bucket in the API process; 0 = no limit) and its burst.
    per_tenant_requests_per_second: Annotated[float, Field(ge=0)] = 200.0
    per_tenant_request_burst: Annotated[int, Field(ge=1)] = 400
    # What a request costs in that bucket (services/api/ratelimit.py `RequestCost`): one token
    # per this many body bytes (at least 1; at the default rate a tenant's bulks get about
    # 3 MB/s, more in a burst: a bench's one-stream upload of 500-byte documents is not refused),
    # plus (limit + k) / this for POST /v1/read, plus a fixed cost for admin actions that start
    # a backfill. Never more than the burst at once; charged into debt (ratelimit.py).
    rate_cost_body_bytes: Annotated[int, Field(ge=1)] = 16_384
    rate_cost_read_candidates: Annotated[int, Field(ge=1)] = 100
    rate_cost_backfill: Annotated[float, Field(ge=0)] = 50.0
    # Requests of one tenant running at once in this process (until the answer's head is sent),
    # so one tenant cannot hold every thread of the event loop's pool (40); the others wait in
    # the event loop, off the pool. 0 = no cap.
    per_tenant_max_inflight: Annotated[int, Field(ge=0)] = 8

    # --- hardening (issue 12): agent tools: helper E's block ---
    # Folders `reindex` may read: a JSON list, one path, or an os.pathsep-separated list. Empty
    # (the default) = reindex is off; the server's working directory is never a root by itself.
    mcp_reindex_roots: Annotated[list[Path], NoDecode] = Field(default_factory=list)
    # Folders bound to one tenant each, `{"<tenant>": [paths]}` (JSON): only that tenant's keys
    # reindex them (besides the shared VIBE_MCP_REINDEX_ROOTS), and no other tenant reaches
    # them through a root that holds them (services/mcp/reindex.py `Roots`).
    mcp_reindex_tenant_roots: dict[str, list[Path]] = Field(default_factory=dict)
    # Background reindex jobs one tenant may have queued or running in a process (0 = no bound).
    mcp_reindex_jobs_per_tenant: Annotated[int, Field(ge=0)] = 4
    mcp_reindex_max_paths: Annotated[int, Field(ge=1)] = 64  # locations per reindex call
    mcp_reindex_max_files: Annotated[int, Field(ge=1)] = 10_000  # files per reindex call
    mcp_max_path_chars: Annotated[int, Field(ge=1)] = 4096
    mcp_max_query_chars: Annotated[int, Field(ge=1)] = 4_096  # search, inner_voice.retrieve (as POST /v1/read)
    mcp_max_scope_ids: Annotated[int, Field(ge=1)] = 1_000  # ids across a search scope's lists
    mcp_max_id_chars: Annotated[int, Field(ge=1)] = 1_024  # one scope id, tag or collection name
    mcp_max_tags: Annotated[int, Field(ge=1)] = 100  # include_tags / exclude_tags each
    mcp_max_resolve_numbers: Annotated[int, Field(ge=1)] = 1_000  # citations.resolve numbers
    mcp_max_resolve_text_chars: Annotated[int, Field(ge=1)] = 200_000  # citations.resolve text
    # extract_key_info task collections and ACL tokens are HMACs under this secret. None = a
    # random secret kept in DATA_DIR/mcp_task_secret (created on first use, mode 0600); API
    # replicas with separate data dirs must share one (set it) to share task materials.
    mcp_task_secret: str | None = Field(default=None, repr=False, min_length=16)
    # extract_key_info material budget per API key per UTC day: characters of materials
    # submitted, and new chunks stored (and embedded). Refused with `quota_exceeded`.
    extract_daily_chars_per_key: Annotated[int, Field(ge=1)] = 2_000_000
    extract_daily_chunks_per_key: Annotated[int, Field(ge=1)] = 10_000

    # --- keys and end-user tokens (POST /v1/keys, POST /v1/tokens; docs/keys-and-tokens.md) ---
    # HS256 secret that signs end-user tokens. None: embedded, a random one kept in
    # DATA_DIR/token-secret (mode 0600); distributed, `serve` refuses to start (replicas must share it).
    token_secret: str | None = Field(default=None, repr=False, min_length=32)
    token_ttl_seconds: Annotated[int, Field(ge=1)] = 3600  # a token's life when `ttlSeconds` is not given
    token_max_ttl_seconds: Annotated[int, Field(ge=1, le=86_400)] = 86_400  # the longest `ttlSeconds` accepted
    max_keys_per_tenant: Annotated[int, Field(ge=1)] = 1000  # API-made keys (bootstrap keys not counted)
    # How often an API process asks the store whether keys changed (a revocation reaches it within this)
    key_refresh_seconds: Annotated[float, Field(gt=0, le=1)] = 0.5

    @field_validator("cors_origins", mode="before")
    @classmethod
    def _origins(cls, raw: Any) -> Any:
        """VIBE_CORS_ORIGINS: `["https://a.example", ...]` or `https://a.example,https://b.example`."""
        if not isinstance(raw, str):
            return raw
        text = raw.strip()
        if text.startswith("["):
            value = json.loads(text)
            if not (isinstance(value, list) and all(isinstance(v, str) for v in value)):
                raise ValueError("VIBE_CORS_ORIGINS must be a JSON list of origins or a comma-separated list")
            return [v.strip() for v in value if v.strip()]
        return [p.strip() for p in text.split(",") if p.strip()]

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

    @model_validator(mode="after")
    def _known_languages(self) -> Settings:
        self.language_map()  # ValueError (naming the supported languages) at start, not at a write
        return self

    def language_map(self) -> LanguageMap:
        return LanguageMap.parse(self.default_language, self.collection_languages)

    @model_validator(mode="after")
    def _profile_defaults(self) -> Settings:
        distributed = self.profile == "distributed"
        if self.queue is None:
            self.queue = "celery" if distributed else "embedded"
        if self.lexical is None:
            self.lexical = "opensearch" if distributed else "embedded"
        if self.vectors is None:
            self.vectors = "qdrant" if distributed else "embedded"
        if self.store is None:
            self.store = "postgres" if distributed else "sqlite"
        return self

    def keys_json(self) -> str:
        return json.dumps([k.model_dump() for k in self.api_keys])
