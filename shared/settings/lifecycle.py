"""Settings of the lifecycle: the scheduler, promotion, eviction and the cold store, backfills,
backpressure, cost caps, the provider-call ledger and explain records."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Literal

from pydantic import BaseModel, Field


class LifecycleSettings(BaseModel):
    """What the scheduler decides, and when."""

    # The scheduler (a thread in `serve`; a Celery beat task in the distributed profile) decides
    # every interval under a store lease, so one process leads however many run it.
    # False: this process runs no lifecycle tick (promotion, demotion, eviction, pruning,
    # retired-space expiry, the day's requeue of budget-deferred documents). Its thread still
    # flushes usage statistics; embedded, it also runs backfill steps (reindex, migration,
    # promotion) and the reconciler, which nothing else would; distributed, it leaves those to
    # the workers (Celery beat). Stopping the whole thread instead would stall a large reindex
    # after its first step and keep an API replica's usage from ever reaching the store.
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
    # still read. `files`: one file per vector (the older layout), at least a filesystem block each:
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
    # The admin lane (services/core/admin_lane.py): a backfill into a space whose model costs no
    # fee (a local model, hash) costs CPU, not money, and the per-minute bucket held a 5,000-
    # document reindex to 26 minutes on a model embedding ~100 documents a second. Such a
    # backfill is paced by the queue instead: it keeps at most `admin_lane_ahead` of the tenant's
    # jobs waiting on the bulk lane, which the workers take after every interactive job. Paid
    # providers stay on the bucket; the daily token cap applies to every provider call.
    admin_lane_local_unmetered: bool = Field(default=True, description=(
        "Backfills (reindex, promotion, migration) into a space with a local or hash model are not "
        "charged to the per-minute bucket (paced by the queue instead); paid providers always are."))
    admin_lane_ahead: Annotated[int, Field(ge=1, le=100_000)] = Field(default=512, description=(
        "Most of a tenant's jobs an unmetered backfill keeps waiting on the bulk lane."))
    admin_lane_batch: Annotated[int, Field(ge=1, le=1024)] = Field(default=64, description=(
        "Documents per batch the embedded profile's workers take from the bulk lane (backfills, eager "
        "writes); the interactive lane keeps VIBE_EMBED_BATCH_SIZE."))
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

    # The provider-call ledger.
    # One row per provider call per document (GET /semantic/ledger); the lifecycle sweep prunes
    # rows older than this, a bounded batch per tick.
    ledger_retention_days: Annotated[int, Field(ge=1, le=3650)] = Field(default=90, description=(
        "Days a provider-call ledger row (GET /semantic/ledger) is kept before the periodic "
        "lifecycle sweep prunes it. The usage totals of GET /semantic/usage are kept apart and stay."))

    # Explain records.
    # Records live in the store of record, so an explainId answers on every replica and after a
    # restart until this; the per-tenant cap keeps one tenant's reads from filling the store.
    explain_ttl_seconds: Annotated[int, Field(ge=1, le=7 * 86_400)] = Field(default=3600, description=(
        "Seconds an `explainId` answers (GET /v1/explain/{explainId}) on every replica; expired "
        "records are swept from the store of record."))
    explain_max_per_tenant: Annotated[int, Field(ge=100, le=10_000_000)] = Field(default=100_000, description=(
        "Explain records kept per tenant; past it the tenant's oldest go first (each process enforces "
        "it every few hundred records it writes)."))
