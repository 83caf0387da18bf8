"""The one Settings object (nothing else reads the environment).

Every setting the API documents (docs/configuration.md) is here with the `VIBE_` prefix. `profile` sets the defaults of
`queue`, `lexical`, `vectors` and `store`; each can still be chosen on its own.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated, Any, Literal

from pydantic import AliasChoices, BaseModel, Field, field_validator, model_validator
from pydantic_settings import BaseSettings, NoDecode, SettingsConfigDict

from shared.text.languages import LanguageMap

# SURR_EMBED_PROVIDER values and the embedder each selects.
SURR_PROVIDERS: dict[str, Literal["local", "openai", "hash"]] = {"openai": "openai", "local": "local", "hash": "hash"}
# Dimensions of well-known models, so a contradicting SURR_EMBED_DIM stops the service before
# any model is loaded or any provider is called.
KNOWN_MODEL_DIMS: dict[str, int] = {
    "all-MiniLM-L6-v2": 384, "sentence-transformers/all-MiniLM-L6-v2": 384,
    "text-embedding-3-small": 1536, "text-embedding-3-large": 3072, "text-embedding-ada-002": 1536,
}


class ApiKey(BaseModel):
    """One entry of `VIBE_API_KEYS`."""

    key: str
    tenant: str
    principals: list[str] = Field(default_factory=list)
    scopes: list[Literal["read", "write", "admin"]] = Field(default_factory=lambda: ["read"])  # type: ignore[arg-type]
    certs: list[str] = Field(default_factory=list)  # certificates the key holds ("issuer:name")


class Settings(BaseSettings):
    # `.env` in the working directory fills what the environment leaves unset (the environment wins).
    model_config = SettingsConfigDict(env_prefix="VIBE_", extra="ignore", populate_by_name=True,
                                      env_file=".env", env_file_encoding="utf-8")

    profile: Literal["embedded", "distributed"] = Field(default="embedded", description=(
        "Deployment profile: `embedded` (one process, no servers) or `distributed` (PostgreSQL, "
        "Redis/Celery, OpenSearch, Qdrant); sets the defaults of queue, lexical, vectors and store."))
    queue: Literal["embedded", "celery"] | None = Field(default=None, description=(
        "Where embedding jobs run: `embedded` (threads in the serving process) or `celery` (workers "
        "through Redis); unset = the profile's default."))
    lexical: Literal["embedded", "opensearch"] | None = Field(default=None, description=(
        "Keyword (BM25) index: `embedded` (tantivy in the data dir) or `opensearch`; unset = the "
        "profile's default."))
    vectors: Literal["embedded", "qdrant"] | None = Field(default=None, description=(
        "Vector index: `embedded` (qdrant-edge in the data dir) or `qdrant` (a Qdrant server); unset = "
        "the profile's default."))

    data_dir: Path = Field(default=Path("./data"), description=(
        "Directory for the embedded store, indexes, model cache, cold store and generated secrets."))
    api_keys: list[ApiKey] = Field(default_factory=list, description=(
        "Bootstrap API keys, a JSON list of `{\"key\", \"tenant\", \"principals\", \"scopes\"}`; empty = `make "
        "run` creates a local dev key."))

    embedder: Literal["local", "openai", "hash"] = Field(default="local", description=(
        "Embedding provider: `local` (a sentence-transformers model in process), `openai` (an OpenAI-"
        "compatible API) or `hash` (deterministic test vectors)."))
    embed_model: str = Field(default="all-MiniLM-L6-v2", description=(
        "Model name for the embedder (for `local`, a name or path; for `openai`, the API's model id)."))
    # used by the hash embedder; real models report their own
    embed_dim: int = Field(default=384, description=(
        "Vector dimension of the `hash` embedder; real models report their own."))
    # Local models (`local:<name>`) a tenant's space may use besides VIBE_EMBED_MODEL: names or
    # paths the operator vouches for; anything else is refused by its text (shared/model_specs.py).
    local_models: list[str] = Field(default_factory=list, max_length=100, description=(
        "Local models (names or paths) a tenant's space may use besides VIBE_EMBED_MODEL; others are "
        "refused."))
    # Fields whose numbers get a payload index in the vector collections every tenant shares
    # (range filters on other fields stay exact, read from the payload; shared/adapters/facets.py),
    # and at most this many such indexes per collection.
    filterable_fields: list[str] = Field(default_factory=list, max_length=1000, description=(
        "Numeric fields that get a payload index in the vector collections all tenants share (range "
        "filters on other fields stay exact)."))
    max_payload_indexes: Annotated[int, Field(ge=0, le=1000)] = Field(default=32, description=(
        "At most this many payload indexes per shared vector collection."))
    # documents per pipeline batch (store writes, a provider call, a queue message)
    embed_batch_size: int = Field(default=32, description=(
        "Documents per embedding batch: one store write, one provider call, one queue message."))
    # Documents per forward pass of the local model (onnxruntime or torch), within a pipeline
    # batch. Small passes pad less and keep activations in cache: with one document thread,
    # onnxruntime embeds 49.6 docs/s in passes of 4 against 38.0 in passes of 32, torch 50.0
    # against 47.3 (bench/results/perf-throughput-20261124-*.md).
    embed_model_batch_size: Annotated[int, Field(ge=1, le=256)] = Field(default=4, description=(
        "Documents per forward pass of the local model within a batch (small passes pad less)."))
    openai_base_url: str | None = Field(default=None, description=(
        "Base URL of the OpenAI-compatible embeddings API (unset = OpenAI's)."))
    openai_api_key: str | None = Field(default=None, description="API key for the `openai` embedder.")

    redis_url: str = Field(default="redis://127.0.0.1:6379/0", description=(
        "Redis URL for the Celery broker, job deduplication and budgets (distributed profile)."))
    opensearch_url: str | None = Field(default=None, description="OpenSearch URL when VIBE_LEXICAL=opensearch.")
    # Every tenant index is `<prefix><tenant>-<hash>` and the template `<prefix>template`: deployments
    # (or test runs) sharing one cluster keep apart by prefix. Lowercase, as index names must be.
    opensearch_prefix: Annotated[str, Field(pattern=r"^[a-z0-9][a-z0-9_-]{0,40}-$")] = Field(
        default="vibe-lex-", description=(
        "Prefix of every OpenSearch index and template name, so deployments sharing a cluster stay apart."))
    qdrant_url: str | None = Field(default=None, description="Qdrant server URL when VIBE_VECTORS=qdrant.")

    host: str = Field(default="127.0.0.1", description="Address `serve` listens on.")
    port: int = Field(default=8080, description="TCP port `serve` listens on.")
    debug: bool = Field(default=False, description="Verbose (debug-level) logging.")
    access_log: bool = Field(default=True, description=(
        "One JSON line per HTTP request (logger `vibe.access`: method, path, route, status, duration, bytes, "
        "tenant, request id; never a query string, body or key); a stream's line when it ends."))

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
    per_query_max_embeds: int = Field(default=50, description=(
        "Most documents one query may queue for embedding (the per-query ceiling)."))
    per_tenant_per_min: int = Field(default=200, description=(
        "Documents per minute a tenant may send to the embedder (touches, eager writes, backfills)."))
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
    # Browser origins allowed to call the API (CORS): a JSON list or a comma-separated list;
    # empty (the default) sends no CORS headers at all.
    cors_origins: Annotated[list[str], NoDecode] = Field(default_factory=list, description=(
        "Browser origins allowed to call the API (CORS): a JSON list or comma-separated origins; empty = "
        "no CORS headers."))
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
    # `python -m bench.fusion_loo` (bench/results/fusion_loo.json).
    fusion: Literal["zscore", "rrf"] = Field(default="zscore", description=(
        "Hybrid fusion: `zscore` (weighted z-scores, the default) or `rrf` (reciprocal-rank fusion)."))
    semantic_weight: Annotated[float, Field(ge=0.0, le=1.0)] = Field(default=0.55, description=(
        "Weight of the semantic leg in z-score fusion (the keyword leg gets the rest)."))
    # What z-score fusion gives a lexical candidate with no vector yet (fusion.stand_in_line):
    # the query's own line from lexical to semantic z ("line"), or its lexical z ("agree", the
    # behaviour before; kept for comparison in bench.touch_sim).
    fusion_stand_in: Literal["line", "agree"] = Field(default="line", description=(
        "Score z-score fusion gives a keyword candidate with no vector yet: `line` (predicted from the "
        "query's embedded candidates) or `agree` (its keyword z)."))

    # Workers.
    workers: int = Field(default=2, description=(
        "Embedding worker threads in the embedded profile; default Celery concurrency for `vibe-semantic "
        "worker`."))
    job_max_attempts: int = Field(default=4, description=(
        "Attempts per embedding job before its documents are marked failed."))
    job_backoff_seconds: float = Field(default=0.5, description=(
        "First retry delay of a failed embedding job (doubled per attempt, with jitter)."))
    # Threads the local model may use; 0 = all cores but one, so background embedding leaves
    # a core to the read path (bench latency: first events wait behind a busy model otherwise).
    embed_threads: int = Field(default=0, description="Threads the local model may use; 0 = all cores but one.")
    # The local model's runtime (shared/adapters/embedders/onnx_embedder.py): auto = an ONNX
    # export (cached in <data_dir>/models, verified against torch) when it verifies, torch
    # otherwise (logged at start-up); onnx = fail at start-up without it. Documents follow
    # embed_doc_runtime (auto = onnxruntime: bench/throughput.py compares the two).
    embed_runtime: Literal["auto", "onnx", "torch"] = Field(default="auto", description=(
        "Local model runtime for queries: `auto` (onnxruntime when its graph verifies, else torch if the "
        "`export` extra is installed), `onnx` or `torch` (needs the `export` extra)."))
    embed_doc_runtime: Literal["auto", "onnx", "torch"] = Field(default="auto", description=(
        "Local model runtime for documents: `auto` (onnxruntime), `onnx` or `torch` (needs the `export` "
        "extra)."))
    # How many nice levels below the process the local model's document thread runs (Linux,
    # per thread), so queries get a core first; 0 = same priority.
    embed_doc_nice: Annotated[int, Field(ge=0, le=19)] = Field(default=5, description=(
        "Nice levels below the process at which the document-embedding thread runs (Linux), so queries "
        "get a core first."))
    # The serving process's garbage-collector thresholds (gc.set_threshold: allocations before a
    # young collection, young collections before a middle one, middle ones before a full one),
    # a JSON list. Each read allocates thousands of tracked objects (hits, keys, fused rows) and
    # CPython's (700, 10, 10) ran ~4 young collections a read and a full one (~30 ms) every ~30
    # reads; (5000, 20, 1000) spent a third of the collector time with no full collection in the
    # same 400 back-to-back reads at 100k documents (bench/results/gc-thresholds-*.json).
    gc_thresholds: tuple[Annotated[int, Field(ge=1)], Annotated[int, Field(ge=1)], Annotated[int, Field(ge=1)]] = Field(
        default=(5000, 20, 1000), description=(
        "The serving process's garbage-collector thresholds, a JSON list of three integers."))
    # The ONNX query encoder's weights: int8 = the feed-forward MatMuls' weights as int8 blocks
    # (onnx_export.query_int8), used only when its vectors of the probes are within 0.999
    # cosine of torch's at load (fp32 otherwise, logged); documents always go through fp32.
    embed_query_weights: Literal["int8", "fp32"] = Field(default="int8", description=(
        "Weights of the ONNX query encoder: `int8` (checked against torch at load, else fp32) or `fp32`."))

    # Input limits.
    max_doc_bytes: int = Field(default=1_048_576, description="Largest document accepted, in bytes.")
    passage_chars: int = Field(default=1000, ge=200, le=100_000, description=(
        "A document whose text is longer is embedded as passages of at most this many characters "
        "(split on headings, paragraphs, sentences); its semantic score is its best passage's. "
        "1000 fits all-MiniLM-L6-v2's 256 word pieces."))
    passage_overlap: int = Field(default=120, ge=0, le=10_000, description=(
        "Characters a passage cut inside a paragraph repeats from the one before it."))
    max_passages: int = Field(default=256, ge=1, le=4096, description=(
        "Most passages embedded per document (usage and budgets count each one); text past them is "
        "counted in vibe_passages_capped_total."))
    max_bulk_docs: int = Field(default=5_000, description="Most documents in one bulk request.")
    max_bulk_bytes: int = Field(default=64 * 1_048_576, description="Largest bulk request body, in bytes.")
    # A bulk is stored in transactions of at most this many documents, the store's writer lock
    # and the index follower released between them, so another tenant's single write waits for
    # one chunk, not a whole 5,000-document bulk. Each item still answers on its own.
    bulk_write_chunk: Annotated[int, Field(ge=1)] = Field(default=64, description=(
        "A bulk is stored in transactions of at most this many documents, so other tenants' writes wait "
        "for one chunk only."))

    # Eligibility and redaction: JSON in the environment.
    index_policy: list[dict[str, Any]] | dict[str, Any] = Field(default_factory=list, description=(
        "Eligibility policy deciding which documents are embedded, and where: the object `{\"default\": "
        "{\"action\": \"sample\", \"p\": 0.1}, \"rules\": [{\"if\": {...}, \"then\": {\"action\": "
        "\"embed|ignore|defer|sample\", \"p\"?, \"space\"?, \"fields\"?}}]}` or just the list of rules. "
        "Conditions: `collection`, `mime`, `type`, `app` (regexes), `tokenCount`, `sensitivity`, `certs`. "
        "Rules win over a writer's deny, which wins over the heuristics; `default` applies last."))
    # Which certificates each external provider may receive documents under. Documents with
    # no certificates are unaffected; local models receive everything (the text stays here).
    provider_certs: dict[str, list[str]] = Field(default_factory=dict, validation_alias=AliasChoices(
        "VIBE_PROVIDER_CERTS"), description=(
        "Certificates under which documents may be sent to an external embedding provider, JSON "
        "`{\"openai\": [\"acme:public\", \"docs:*\"]}` (`issuer:*`: every certificate of that issuer). A "
        "document carrying any other certificate is never sent to that provider: a policy rule "
        "`{\"if\": {\"certs\": ...}, \"then\": {\"space\": ...}}` may route it to a space with a local model, "
        "else it stays `deferred` with reason `cert`. Empty = certificate-bearing documents stay local."))
    embed_fields: dict[str, list[str]] = Field(default_factory=dict, description=(
        "Fields embedded per collection, JSON `{\"<collection>\": [\"title\", \"body\"]}`; collection settings "
        "win over it."))

    # Lexical analysis language per collection (shared/text/languages.py; ISO code or English
    # name: "fr" or "french", or "simple": no stop words, no stemming), JSON in the environment:
    # '{"docs_fr": "fr"}'. Every other collection is analysed in `default_language`. Changing
    # either rebuilds the lexical index from the store of record at the next start (with
    # progress): set a collection's language before writing to it.
    default_language: str = Field(default="en", description=(
        "Keyword-analysis language of every collection not named in VIBE_COLLECTION_LANGUAGES (ISO code, "
        "English name or `simple`)."))
    collection_languages: dict[str, str] = Field(default_factory=dict, max_length=10_000, description=(
        "Keyword-analysis language per collection, JSON `{\"<collection>\": \"fr\"}`; a change rebuilds the "
        "keyword index at the next start."))

    # --- distributed: Celery/Redis, reconciler, breaker ---
    # `vibe-semantic worker` serves Prometheus metrics for the whole worker (prefork children
    # included) on this port; None = off.
    metrics_port: int | None = Field(default=None, description=(
        "Port on which `vibe-semantic worker` serves Prometheus metrics for the whole worker; unset = "
        "off."))
    # A message a worker took but did not ack comes back after this long; it must exceed the
    # Per-collection settings stored through `PUT /v1/collections/{c}/settings` win over the two
    # above and over `embed_fields`; each process re-reads a tenant's rows after this many seconds
    # (shared/collection_settings.py): the bound on how long another replica's change takes.
    collection_settings_ttl_seconds: Annotated[float, Field(ge=0, le=60)] = Field(default=1.0, description=(
        "How often a process re-reads stored collection settings (the bound on how long another replica's"
        " change takes)."))
    # Documents a collection delete removes per transaction (`DELETE /v1/collections/{c}`), and
    # per `docs:deleteByFilter` call (the caller repeats the call while `more` is true).
    collection_delete_page: Annotated[int, Field(ge=1, le=10_000)] = Field(default=500, description=(
        "Documents a collection delete removes per transaction."))
    delete_by_filter_max: Annotated[int, Field(ge=1, le=10_000)] = Field(default=1_000, description=(
        "Most documents one `docs:deleteByFilter` call deletes (repeat while `more` is true)."))
    # longest batch plus the longest retry countdown, or a slow batch would run twice.
    celery_visibility_timeout: float = Field(default=3600.0, description=(
        "Seconds before a message a worker took but did not acknowledge is delivered again; must exceed "
        "the longest batch plus retry."))
    # how often workers sweep for messages past the visibility timeout
    celery_restore_interval: int = Field(default=10, description=(
        "Seconds between workers' sweeps for messages past the visibility timeout."))
    # lanes a worker consumes, strictly in this order
    worker_queues: str = Field(default="interactive,control,bulk", description=(
        "Lanes a worker consumes, strictly in this order (comma-separated)."))
    # a dead broker must not stall a read or a write
    redis_timeout_seconds: float = Field(default=0.5, description=(
        "Timeout of each Redis call, so a dead broker does not stall reads or writes."))
    # after a Redis error, skip Redis this long (no per-call timeouts)
    redis_down_backoff_seconds: float = Field(default=2.0, description="After a Redis error, skip Redis for this long.")
    # a pending job key older than this no longer blocks a re-enqueue
    job_dedupe_ttl_seconds: float = Field(default=3600.0, description=(
        "A pending-job key older than this no longer blocks a re-enqueue."))
    job_backoff_max_seconds: float = Field(default=60.0, description="Longest retry delay of an embedding job.")
    reconcile_interval_seconds: float = Field(default=30.0, description=(
        "How often the reconciler looks for rows stuck in `queued`."))
    # `queued` longer than this without progress = a lost job
    reconcile_stuck_seconds: float = Field(default=300.0, description=(
        "A row `queued` this long without progress counts as a lost job and is repaired or re-enqueued."))
    reconcile_batch: int = Field(default=10_000, description="Most stuck rows the reconciler handles per pass.")
    # workers announce finished jobs on Redis pub/sub (faster stream wake-ups)
    queue_pubsub: bool = Field(default=True, description=(
        "Workers announce finished jobs on Redis pub/sub, so streams wake up sooner."))
    # consecutive non-429 provider failures that open the circuit
    breaker_failures: int = Field(default=5, description=(
        "Consecutive non-429 provider failures that open the circuit breaker (reads then answer "
        "lexically)."))
    # open → half-open (one probe call) after this long
    breaker_cooldown_seconds: float = Field(default=30.0, description=(
        "How long the circuit stays open before one probe call."))
    # per provider call (openai embedder)
    embed_timeout_seconds: float = Field(default=30.0, description="Timeout of each call to the `openai` embedder.")
    # The system of record (documents, sidecar state, vectors by content hash, change log):
    # SQLite in the data dir (one host) or PostgreSQL (API and workers on any host; each API
    # process keeps its embedded indexes in its own data dir). None = the profile's default.
    store: Literal["sqlite", "postgres"] | None = Field(default=None, description=(
        "System of record: `sqlite` (in the data dir, one host) or `postgres`; unset = the profile's "
        "default."))
    # libpq URL or key=value DSN
    postgres_url: str = Field(default="postgresql://vibe:vibe@postgres:5432/vibe", description=(
        "PostgreSQL URL (libpq URL or key=value DSN) when VIBE_STORE=postgres."))
    # connections per process (API threads, or one Celery pool child)
    postgres_pool_size: int = Field(default=10, description="PostgreSQL connections per process.")

    # --- MCP and agent tools ---
    # the key `vibe-semantic mcp` (stdio) acts as
    mcp_key: str | None = Field(default=None, description="The API key `vibe-semantic mcp` (stdio) acts as.")
    # inner_voice's own names (SURR_*, MCP_NO_LOG) are read too; the VIBE_ name wins when both are
    # set, except for the gate: inner_voice clients are told the tool is on exactly when
    # SURR_ENABLE_INNER_VOICE is "1", so when that variable is set it alone decides.
    enable_inner_voice: bool = Field(default=False, validation_alias=AliasChoices(
        "VIBE_ENABLE_INNER_VOICE"), description=(
        "Enable the MCP `inner_voice.retrieve` tool when SURR_ENABLE_INNER_VOICE is not set."))
    # inner_voice's clients configure the embedder with SURR_EMBED_*; VIBE_EMBEDDER,
    # VIBE_EMBED_MODEL and VIBE_EMBED_DIM win when both are set.
    surr_embed_provider: str | None = Field(default=None, validation_alias=AliasChoices(
        "SURR_EMBED_PROVIDER"), description=(
        "The embedding provider (`openai`, `local` or `hash`) when VIBE_EMBEDDER is not set."))
    surr_embed_model: str | None = Field(default=None, validation_alias=AliasChoices(
        "SURR_EMBED_MODEL"), description="The embedding model when VIBE_EMBED_MODEL is not set.")
    surr_embed_dim: Annotated[int, Field(ge=1, le=65_536)] | None = Field(
        default=None, validation_alias=AliasChoices("SURR_EMBED_DIM"), description=(
            "The model's vector dimension: the `hash` embedder's when VIBE_EMBED_DIM is not set; for a "
            "real model, a check: a model of another dimension stops the service at start-up."))
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
    # --- reranker (as in SurfSense): a Cohere/TEI-compatible `/rerank` endpoint; off when unset ---
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

    # --- lifecycle: scheduler, promotion, eviction, cold store, spaces, cost caps ---
    # (lead's block)
    # The scheduler (a thread in `serve`; a Celery beat task in the distributed profile) decides
    # every interval under a store lease, so one process leads however many run it.
    # False: this process runs no lifecycle tick (promotion, demotion, eviction, pruning,
    # retired-space expiry, the day's requeue of budget-deferred documents). Its thread still
    # flushes usage statistics; embedded, it also runs backfill steps (reindex, migration,
    # promotion) and the reconciler, which nothing else would; distributed, it leaves those to
    # the workers (Celery beat). Until 2026-11 false stopped the whole thread: a large reindex
    # stalled after its first step, and an API replica's usage never reached the store.
    # Celery beat (distributed) decides whatever this says.
    scheduler_enabled: bool = Field(default=True, description=(
        "Whether this `serve` process runs lifecycle ticks (promotion, eviction, pruning); false still "
        "flushes usage and runs backfill steps."))
    scheduler_interval_seconds: Annotated[float, Field(gt=0)] = Field(default=60.0, description=(
        "Seconds between lifecycle ticks."))
    # Usage statistics: each API process buffers them in memory and flushes this often (a
    # read never waits for a statistics write); counts within the promotion window are exact
    # to one bucket (window / 12).
    usage_flush_seconds: Annotated[float, Field(gt=0)] = Field(default=2.0, description=(
        "How often each API process writes its buffered usage statistics to the store."))
    # Collection promotion (defaults `collection: {queries: 20, hits: 50, windowMins: 120}`).
    promote_min_queries: Annotated[int, Field(ge=1)] = Field(default=20, description=(
        "Queries within the promotion window that make a collection eager (either this or "
        "VIBE_PROMOTE_MIN_HITS is enough)."))
    promote_min_hits: Annotated[int, Field(ge=0)] = Field(default=50, description=(
        "First-page hits within the promotion window that make a collection eager (either this or "
        "VIBE_PROMOTE_MIN_QUERIES is enough); 0 = hits alone never promote."))
    promote_window_seconds: Annotated[float, Field(gt=0)] = Field(default=7200.0, description=(
        "The window over which promotion counts queries and hits."))
    demote_idle_seconds: Annotated[float, Field(gt=0)] = Field(default=7 * 86400.0, description=(
        "An automatically promoted collection is demoted after this long without a query."))
    # Document promotion (defaults `doc: {touches: 3, ttlDays: 30}`): a document touched this often
    # (decayed with the half-life) or found this often beside pinned ones is kept embedded
    # (pinned) for the TTL from the tick that finds it so, and pinned again while its decayed
    # count stays there: a burst of touches keeps a document for about half-lives x log2(count /
    # touches) beyond its last use, plus the TTL.
    doc_promote_touches: Annotated[float, Field(gt=0)] = Field(default=3.0, description=(
        "Decayed touches (or appearances beside pinned documents) that pin a document embedded."))
    doc_promote_ttl_seconds: Annotated[float, Field(ge=0)] = Field(default=30 * 86400.0, description=(
        "How long a pinned document stays pinned after the tick that pins it."))
    usage_half_life_seconds: Annotated[float, Field(gt=0)] = Field(default=7 * 86400.0, description=(
        "Half-life of a document's decayed touch count."))
    # Eviction to the cold store (FP16/INT8 cold codes, to save space).
    evict_idle_seconds: Annotated[float, Field(gt=0)] = Field(default=30 * 86400.0, description=(
        "Vectors of lazy collections unused this long move to the cold store."))
    evict_batch: Annotated[int, Field(ge=1)] = Field(default=5000, description=(
        "Page size of the lifecycle's sweeps (eviction, pruning, retiring a space)."))
    cold_codec: Literal["float16", "int8"] = Field(default="float16", description=(
        "Encoding of cold vectors: `float16` or `int8`."))
    # default DATA_DIR/cold; legacy files (and `files`) on a shared volume
    cold_dir: Path | None = Field(default=None, description="Directory of the cold store; unset = DATA_DIR/cold.")
    # `packed` (default): codes many to a page, in `cold.sqlite3` in the cold dir (SQLite store) or
    # a PostgreSQL table beside the store of record (no shared volume); files evicted before are
    # still read. `files`: one file per vector (as before 2026-11), at least a filesystem block each:
    # 5x (float16) to 10x (int8) the codes' size on ext4 (shared/adapters/cold_packed.py).
    cold_store: Literal["packed", "files"] = Field(default="packed", description=(
        "Cold store layout: `packed` (many codes to a page, in SQLite or PostgreSQL) or `files` (one file"
        " per vector)."))
    # Model rollback: a space retired at activation keeps its vectors in the cold store this
    # long (re-activating it needs no provider call for unchanged content); then they go.
    # 0 = kept until the space is re-activated.
    retired_space_retention_seconds: Annotated[float, Field(ge=0)] = Field(default=7 * 86400.0, description=(
        "A retired space's cold vectors are kept this long for a rollback (0 = until re-activated)."))
    # Backfills (promotion, reindex, space migration) advance by at most this many documents per
    # step, spending only what the tenant's per-minute bucket holds beyond what reads keep.
    backfill_step_docs: Annotated[int, Field(ge=1)] = Field(default=2000, description=(
        "Most documents one backfill step (promotion, reindex, migration) advances."))
    # The share of the per-minute bucket that backfills leave to reads (touches). A backfill
    # still gets the whole refill rate while reads are idle (it takes the top of the bucket as it
    # refills); what this buys is the burst reads can spend at once while a backfill runs.
    backfill_read_share: Annotated[float, Field(ge=0, le=0.95)] = Field(default=0.75, description=(
        "Share of the per-minute embedding budget that backfills leave to reads."))
    backfill_interval_seconds: Annotated[float, Field(gt=0)] = Field(default=2.0, description=(
        "Seconds between backfill steps."))
    # Global backpressure (shared/backpressure.py): no backfill step while this many jobs wait in
    # the queue (every lane together), and no on-touch embedding while the touch's bound does:
    # twice as deep by default, so backfills yield first and reads, which someone waits for, last.
    backpressure_queue_depth: Annotated[int, Field(ge=1)] = Field(default=20_000, description=(
        "No backfill step while this many jobs wait in the queue (all lanes)."))
    touch_backpressure_queue_depth: Annotated[int, Field(ge=1)] = Field(default=40_000, description=(
        "No embedding on touch while this many jobs wait in the queue (all lanes); reads then answer with"
        " what is embedded."))
    # Jobs one tenant may have queued (every lane, rehydrations included) before its touches and
    # backfills queue no more (shared/backpressure.py TenantShare): below the bounds above, so
    # no tenant alone stops the others' embedding. None = a quarter of the backfill bound; 0 = off.
    tenant_queue_max: Annotated[int, Field(ge=0)] | None = Field(default=None, description=(
        "Jobs one tenant may have queued before its touches and backfills queue no more; unset = a "
        "quarter of VIBE_BACKPRESSURE_QUEUE_DEPTH, 0 = off."))

    def tenant_queue_bound(self) -> int:
        return self.backpressure_queue_depth // 4 if self.tenant_queue_max is None else self.tenant_queue_max
    # Cost caps: embedding tokens per tenant per UTC day (0 = no cap) and the price used
    # for /semantic/usage estimates (None = 0.02 $/1M tokens for openai, 0 for local models).
    tenant_daily_tokens: Annotated[int, Field(ge=0)] = Field(default=0, description=(
        "Embedding tokens per tenant per UTC day (documents and queries); 0 = no cap."))
    embed_cost_per_million_tokens: float | None = Field(default=None, description=(
        "Price used for the cost estimates of `/semantic/usage`; unset = 0.02 for openai, 0 for local "
        "models."))

    # --- provider-call ledger: helper H5's block ---
    # One row per provider call per document (GET /semantic/ledger); the lifecycle sweep prunes
    # rows older than this, a bounded batch per tick.
    ledger_retention_days: Annotated[int, Field(ge=1, le=3650)] = Field(default=90, description=(
        "Days a provider-call ledger row (GET /semantic/ledger) is kept before the periodic "
        "lifecycle sweep prunes it. The usage totals of GET /semantic/usage are kept apart and stay."))

    # --- explain records: helper H6's block ---
    # Records live in the store of record, so an explainId answers on every replica and after a
    # restart until this; the per-tenant cap keeps one tenant's reads from filling the store.
    explain_ttl_seconds: Annotated[int, Field(ge=1, le=7 * 86_400)] = Field(default=3600, description=(
        "Seconds an `explainId` answers (GET /v1/explain/{explainId}) on every replica; expired "
        "records are swept from the store of record."))
    explain_max_per_tenant: Annotated[int, Field(ge=100, le=10_000_000)] = Field(default=100_000, description=(
        "Explain records kept per tenant; past it the tenant's oldest go first (each process enforces "
        "it every few hundred records it writes)."))


    # --- touch economics (bench lazy): helper B's block ---
    # What a query spends embedding on (services/planner/touch.py; tuned with `bench lazy` and
    # `python -m bench.touch_sim`, results in bench/results/touch-*).
    # adaptive (default): the page first, `limit` x factor deep (at least min_depth), a repeat
    # whose page is unstable digs to twice that, and a repeat whose page is settled (the same
    # documents as at its last touch, or its last dig did not reach the page) spends nothing
    # past its page; depth/fixed: the earlier policies. The finer knobs (similar probes, probe
    # rounds) are TouchPolicy fields, measured with bench.touch_sim `policy.*` settings.
    touch_policy: Literal["adaptive", "depth", "fixed"] = Field(default="adaptive", description=(
        "What a query embeds: `adaptive` (page first, digs deeper on unstable repeats), `depth` or "
        "`fixed`."))
    touch_depth_factor: float = Field(default=1.0, description="A touch's depth as a multiple of the read's `limit`.")
    touch_min_depth: int = Field(default=10, description="Smallest touch depth, in keyword candidates.")
    speculate_neighbors: int = Field(default=0, description="Neighbours queued per page document on a touch (0 = off).")
    speculate_sources: int = Field(default=3, description=(
        "How many page documents lend their neighbours when VIBE_SPECULATE_NEIGHBORS is on."))
    # adaptive only (TouchPolicy fields of the same names without `touch_`; dig step chosen on
    # Cranfield, checked on CISI: bench/results/touch-cranfield.json, touch-cisi*.json):
    touch_dig_step: Annotated[int, Field(ge=0)] = Field(default=5, description=(
        "How much deeper a repeated query with an unstable page looks (adaptive)."))
    touch_dig_max: Annotated[int, Field(ge=0)] = Field(default=60, description=(
        "A dig never goes deeper than this many keyword candidates (adaptive)."))
    touch_remember: bool = Field(default=True, description=(
        "A repeated query whose page is unchanged since its last touch spends nothing past its page "
        "(adaptive)."))
    touch_probe_rounds: Annotated[int, Field(ge=0)] = Field(default=3, description=(
        "Probing rounds a repeated query may spend below its page (adaptive)."))
    touch_similar: Annotated[int, Field(ge=0)] = Field(default=0, description=(
        "Extra cold candidates per touch ranked by likeness to the semantic leg's best hits (0 = off)."))
    touch_first_under_budget: Annotated[int, Field(ge=0)] = Field(default=1, description=(
        "Under the per-minute budget, a query's first touch embeds only this many of its page's cold "
        "documents."))
    # TouchPolicy.reach_best (0 = off)
    touch_reach_best: Annotated[int, Field(ge=0)] = Field(default=10, description=(
        "A dig stops where a candidate could no longer reach the page with the semantic score of this hit"
        " (0 = off)."))
    # TouchPolicy.reach_until (0 = every touch)
    touch_reach_until: Annotated[int, Field(ge=0)] = Field(default=2, description=(
        "The reach bound applies until a query has been touched this many times (0 = always)."))
    # TouchPolicy.stable_zone
    touch_stable_zone: Annotated[float, Field(gt=0, le=1)] = Field(default=0.4, description=(
        "A page is unstable while it uses documents in this deepest share of the embedded keyword prefix."))
    # TouchPolicy.unstable_least
    touch_unstable_least: Annotated[int, Field(ge=1, le=100)] = Field(default=2, description=(
        "A page counts as unstable only when at least this many of its documents sit in that zone."))
    # TouchPolicy.follow_up: a streamed first read touches again once landed; "auto": per tenant and
    # collection, where its first reads agree with their lexical top (touch.FollowUpSwitch), then
    # with `touch_auto_dig_step` for that collection's digs
    touch_follow_up: bool | Literal["auto"] = Field(default="auto", description=(
        "A streamed first read touches again once its first touch has landed: `auto` (per collection, "
        "where it pays), true or false."))
    # TouchPolicy.auto_dig_step
    touch_auto_dig_step: Annotated[int, Field(ge=0)] = Field(default=8, description=(
        "Dig step of a collection the `auto` follow-up has turned on (agree state)."))
    # "auto", a collection whose first reads disagree with their lexical top: follow up too, with
    # these probing rounds and dig step (TouchPolicy.auto_disagree*); false = no follow-up there
    touch_auto_disagree: bool = Field(default=True, description=(
        "With `auto`, collections whose first reads disagree with their keyword top follow up too, with a"
        " short probe."))
    touch_auto_disagree_probe_rounds: Annotated[int, Field(ge=0)] = Field(default=1, description=(
        "Probing rounds of the disagree follow-up."))
    touch_auto_disagree_dig_step: Annotated[int, Field(ge=0)] = Field(default=4, description=(
        "Dig step of the disagree follow-up."))
    # The "auto" switch's state lives in the store of record (touch.FollowUpSwitch): a process writes
    # its observations of a collection every `touch_auto_flush_every` of them (and at once when one
    # changes the collection's state) and reads the stored row again at most every
    # `touch_auto_refresh_seconds` (how soon another replica's reads reach it)
    # TouchPolicy.auto_after: first reads before a state
    touch_auto_after: Annotated[int, Field(ge=1)] = Field(default=50, description=(
        "Streamed first reads a collection needs before the `auto` switch decides its state."))
    # TouchPolicy.auto_below: "agree" while the running mean is below it
    touch_auto_below: Annotated[float, Field(allow_inf_nan=False)] = Field(default=-0.05, description=(
        "The `auto` switch counts a collection as agreeing while its running mean is below this."))
    touch_auto_flush_every: Annotated[int, Field(ge=1, le=10_000)] = Field(default=10, description=(
        "A process writes its `auto` observations of a collection to the store every this many reads."))
    touch_auto_refresh_seconds: Annotated[float, Field(ge=0)] = Field(default=30.0, description=(
        "How often a process re-reads a collection's stored `auto` state."))

    # --- hardening: input bounds, adapters, MCP: helper C's block ---
    # ACL bounds (services/api/writes.py DocumentService._acl): each principal is one keyword term
    # in OpenSearch, whose `acl` field ignores terms over 1024 characters (fail closed: a dropped
    # term matches nobody), so a principal stays below that; the total bounds a point's payload.
    acl_max_principal_bytes: Annotated[int, Field(ge=1, le=1024)] = Field(default=512, description=(
        "Longest ACL principal, in bytes."))
    acl_max_bytes: Annotated[int, Field(ge=1)] = Field(default=65_536, description=(
        "Largest `_acl` of one document, in bytes."))
    # Query text (POST /v1/read `q` and `semantic.query.text`), in characters.
    max_query_chars: Annotated[int, Field(ge=1)] = Field(default=4_096, description=(
        "Longest query text, in characters."))
    # Query-vector cache (services/planner/query_cache.py): bounded by bytes as well as entries.
    query_cache_max_entries: Annotated[int, Field(ge=0)] = Field(default=10_000, description=(
        "Entries of the query-vector cache."))
    query_cache_max_bytes: Annotated[int, Field(ge=0)] = Field(default=64 * 1_048_576, description=(
        "Bytes of the query-vector cache."))
    # Longest input the openai embedder sends, in UTF-8 bytes (longer ones are cut at a character
    # boundary): a byte-level BPE token covers at least one byte, so 8,000 bytes stay under the
    # 8,191-token input limit of OpenAI's embedding models whatever the script.
    embed_max_input_bytes: Annotated[int, Field(ge=16)] = Field(default=8_000, description=(
        "Longest input the `openai` embedder sends, in UTF-8 bytes (longer input is cut at a character "
        "boundary)."))
    # GET /metrics asks for `Authorization: Bearer <token>` when set (off by default).
    metrics_token: str | None = Field(default=None, description=(
        "When set, `/metrics` and the worker's metrics port ask for `Authorization: Bearer <token>`."))
    # Per-tenant request rate (token bucket in the API process; 0 = no limit) and its burst.
    per_tenant_requests_per_second: Annotated[float, Field(ge=0)] = Field(default=200.0, description=(
        "Request tokens per second per tenant (0 = no limit); excess requests answer 429."))
    per_tenant_request_burst: Annotated[int, Field(ge=1)] = Field(default=400, description=(
        "Burst size of the per-tenant request bucket."))
    # What a request costs in that bucket (services/api/ratelimit.py `RequestCost`): one token
    # per this many body bytes (at least 1; at the default rate a tenant's bulks get about
    # 3 MB/s, more in a burst: a bench's one-stream upload of 500-byte documents is not refused),
    # plus (limit + k) / this for POST /v1/read, plus a fixed cost for admin actions that start
    # a backfill. Never more than the burst at once; charged into debt (ratelimit.py).
    rate_cost_body_bytes: Annotated[int, Field(ge=1)] = Field(default=16_384, description=(
        "A request costs one rate-limit token per this many body bytes (at least one)."))
    rate_cost_read_candidates: Annotated[int, Field(ge=1)] = Field(default=100, description=(
        "A read also costs (limit + k) / this many tokens."))
    rate_cost_backfill: Annotated[float, Field(ge=0)] = Field(default=50.0, description=(
        "Tokens an admin action that starts a backfill costs (promote, reindex, spaces)."))
    # Requests of one tenant running at once in this process (until the answer's head is sent),
    # so one tenant cannot hold every thread of the event loop's pool (40); the others wait in
    # the event loop, off the pool. 0 = no cap.
    per_tenant_max_inflight: Annotated[int, Field(ge=0)] = Field(default=8, description=(
        "Requests of one tenant running at once in a process; others wait (0 = no cap)."))

    # --- hardening: agent tools: helper E's block ---
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

    # --- keys and end-user tokens (POST /v1/keys, POST /v1/tokens; docs/keys-and-tokens.md) ---
    # HS256 secret that signs end-user tokens. None: embedded, a random one kept in
    # DATA_DIR/token-secret (mode 0600); distributed, `serve` refuses to start (replicas must share it).
    token_secret: str | None = Field(default=None, repr=False, min_length=32, description=(
        "HS256 secret (32+ characters) that signs end-user tokens; unset = kept in DATA_DIR/token-secret "
        "(embedded), required when distributed."))
    # a token's life when `ttlSeconds` is not given
    token_ttl_seconds: Annotated[int, Field(ge=1)] = Field(default=3600, description=(
        "Life of an end-user token when `ttlSeconds` is not given."))
    # the longest `ttlSeconds` accepted
    token_max_ttl_seconds: Annotated[int, Field(ge=1, le=86_400)] = Field(default=86_400, description=(
        "Longest `ttlSeconds` a token may ask for."))
    # API-made keys (bootstrap keys not counted)
    max_keys_per_tenant: Annotated[int, Field(ge=1)] = Field(default=1000, description=(
        "API-made keys per tenant (bootstrap keys not counted)."))
    # How often an API process asks the store whether keys changed (a revocation reaches it within this)
    key_refresh_seconds: Annotated[float, Field(gt=0, le=1)] = Field(default=0.5, description=(
        "How often an API process checks for key changes (a revocation reaches it within this)."))

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
    def _inner_voice_gate(self) -> Settings:
        if self.surr_enable_inner_voice is not None:
            self.enable_inner_voice = self.surr_enable_inner_voice == "1"
        return self

    @model_validator(mode="after")
    def _surr_embedder(self) -> Settings:
        """SURR_EMBED_* fill what the VIBE_ names leave unset; a declared dimension that a known
        model contradicts is a start-up error (an unknown model is checked when it is loaded)."""
        given = self.model_fields_set
        if self.surr_embed_provider is not None and "embedder" not in given:
            provider = self.surr_embed_provider.strip().lower()
            if provider not in SURR_PROVIDERS:
                raise ValueError(f"SURR_EMBED_PROVIDER {self.surr_embed_provider!r} is not one of "
                                 f"{sorted(SURR_PROVIDERS)}")
            self.embedder = SURR_PROVIDERS[provider]
        if self.surr_embed_model and "embed_model" not in given:
            self.embed_model = self.surr_embed_model.strip()
        if self.surr_embed_dim is not None and "embed_dim" not in given:
            self.embed_dim = self.surr_embed_dim
        dim = self.declared_embed_dim()
        known = KNOWN_MODEL_DIMS.get(self.embed_model)
        if dim is not None and self.embedder != "hash" and known is not None and known != dim:
            raise ValueError(f"SURR_EMBED_DIM={dim} disagrees with the model {self.embed_model!r}, whose "
                             f"vectors have {known} dimensions")
        return self

    def declared_embed_dim(self) -> int | None:
        """The dimension the operator declared for the configured model (SURR_EMBED_DIM), if any."""
        return self.surr_embed_dim

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
