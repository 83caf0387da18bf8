"""Prometheus metrics. Every queue and cache has one; names are what dashboards use."""

from __future__ import annotations

from typing import Final

from prometheus_client import Counter, Gauge, Histogram

# How a Gauge combines across processes when a Celery worker serves its prefork children's
# values (prometheus_client multiprocess mode, services/worker/metrics_server.py; ignored in the
# single-process API). `live*`: a child's value is dropped when it exits, not kept forever.
_ANY_PROCESS: Final = "livemax"  # 1 if any live process is in that state
_SUM_PROCESSES: Final = "livesum"

_LATENCY_BUCKETS = (0.001, 0.0025, 0.005, 0.01, 0.02, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30)


class _Metrics:
    def __init__(self) -> None:
        self.jobs_queued = Counter("vibe_embed_jobs_queued_total", "Embedding jobs enqueued", ["priority"])
        self.jobs_completed = Counter("vibe_embed_jobs_completed_total", "Documents embedded")
        self.jobs_failed = Counter("vibe_embed_jobs_failed_total", "Jobs that ran out of retries")
        self.jobs_retried = Counter("vibe_embed_jobs_retried_total", "Jobs scheduled for a retry")
        self.jobs_skipped = Counter("vibe_embed_jobs_skipped_total", "Jobs with nothing to do", ["reason"])
        self.jobs_reused = Counter(
            "vibe_embed_vectors_reused_total", "Jobs satisfied from a stored vector (no provider call)"
        )
        self.queue_depth = Gauge("vibe_queue_depth", "Jobs waiting in the queue", ["queue"],
                                 multiprocess_mode=_ANY_PROCESS)
        self.embed_seconds = Histogram(
            "vibe_embed_batch_seconds", "Provider time per embedding batch", buckets=_LATENCY_BUCKETS
        )
        self.read_seconds = Histogram(
            "vibe_read_seconds", "readOnce time to the first answer", ["strategy", "mode"],
            buckets=_LATENCY_BUCKETS,
        )
        self.stream_done_seconds = Histogram(
            "vibe_stream_done_seconds", "readOnce stream time to `done`", ["strategy"], buckets=_LATENCY_BUCKETS
        )
        self.backfill_events = Counter("vibe_stream_backfill_total", "`semantic` re-rankings streamed")
        self.left_streams = Counter(
            "vibe_stream_left_touches_total",
            "Streams whose reader left before their touch: touched in the background, or dropped when too many wait",
            ["outcome"])
        self.background_yields = Counter("vibe_background_yields_total",
                                         "Embedding batches or index applies that waited for a first answer")
        self.budget_denied = Counter(
            "vibe_budget_denied_total", "Embeds not queued because a budget was exhausted", ["budget"]
        )
        self.docs_written = Counter("vibe_docs_written_total", "Documents accepted", ["op"])
        self.docs_unchanged = Counter("vibe_docs_unchanged_total",
                                      "Documents written again exactly as stored: accepted, nothing stored or logged")
        self.http_requests = Histogram(
            "vibe_http_request_seconds", "HTTP request time", ["route", "method", "status"],
            buckets=_LATENCY_BUCKETS
        )
        self.explain_cache = Gauge("vibe_explain_cache_entries", "Entries in the explain cache",
                                   multiprocess_mode=_SUM_PROCESSES)
        # Rows of the store's explain records (every replica's), counted by the expiry sweep.
        self.explain_records = Gauge("vibe_explain_records", "Explain records in the store of record",
                                     multiprocess_mode=_ANY_PROCESS)
        # Computed on scrape in the API (services/wiring/): changes committed to the store's log
        # that an index has not applied yet; "embedded" is this process's own indexes.
        self.follower_lag = Gauge("vibe_index_follower_lag_changes", "Change-log entries an index has not applied",
                                  ["follower"], multiprocess_mode=_ANY_PROCESS)
        # An index rebuilt from the store (schema version changed, or `vibe-semantic rebuild-index`).
        self.index_rebuilds = Counter("vibe_index_rebuilds_total", "Index rebuilds from the change log", ["follower"])
        self.index_rebuild_remaining = Gauge(
            "vibe_index_rebuild_remaining_changes", "Change-log entries a running index rebuild has still to replay",
            ["follower"], multiprocess_mode=_ANY_PROCESS)
        # Distributed profile: Celery/Redis queue, reconciler, provider breaker.
        self.jobs_deduped = Counter("vibe_embed_jobs_deduped_total", "Enqueues dropped: the job key was pending")
        self.jobs_postponed = Counter(
            "vibe_embed_jobs_postponed_total", "Jobs put back without spending an attempt", ["reason"]
        )
        self.enqueue_errors = Counter(
            "vibe_enqueue_errors_total", "Enqueues not sent because the broker was unreachable (left `queued`)"
        )
        self.redis_errors = Counter("vibe_redis_errors_total", "Redis calls that failed", ["component"])
        self.celery_batch_seconds = Histogram(
            "vibe_celery_batch_seconds", "Worker time per embedding task", ["queue"], buckets=_LATENCY_BUCKETS
        )
        self.broker_messages = Gauge("vibe_celery_broker_messages", "Task messages waiting in the broker", ["queue"],
                                     multiprocess_mode=_ANY_PROCESS)
        self.reconciler_requeued = Counter(
            "vibe_reconciler_requeued_total", "Stuck `queued` sidecar rows the reconciler re-enqueued"
        )
        self.reconciler_repaired = Counter(
            "vibe_reconciler_repaired_total",
            "Stuck `queued` sidecar rows no job could finish, repaired instead of re-enqueued, and (reason "
            "document_gone) the scheduler's deletes of rows in any status whose document is gone", ["reason"]
        )
        self.reconciler_runs = Counter("vibe_reconciler_runs_total", "Reconciler runs", ["outcome"])
        # Each process has its own breaker; a worker reports 1 for every state one of its children is in.
        self.breaker_state = Gauge("vibe_embedder_breaker_state", "1 for the provider breaker's state", ["state"],
                                   multiprocess_mode=_ANY_PROCESS)
        self.breaker_transitions = Counter(
            "vibe_embedder_breaker_transitions_total", "Provider breaker state changes", ["to"]
        )
        self.breaker_rejected = Counter(
            "vibe_embedder_breaker_rejected_total", "Embedding calls refused while the circuit was open"
        )
        # Lifecycle. No tenant labels on /metrics.
        self.promotions = Counter("vibe_promotions_total", "Collection mode changes", ["action"])
        self.evictions = Counter("vibe_evictions_total", "Vectors moved to the cold store")
        self.store_schema_version = Gauge("vibe_store_schema_version",
                                          "Schema version of the store of record this process migrated to at start")
        self.passages_capped = Counter("vibe_passages_capped_total",
                                       "Passages of long documents not embedded: past VIBE_MAX_PASSAGES")
        self.rehydrations = Counter("vibe_rehydrations_total",
                                    "Vectors restored from the cold store (no provider call)")
        self.pruned = Counter("vibe_vectors_pruned_total",
                              "Stored or cold vectors whose content no document has (store=cold_copies: "
                              "cold copies of vectors back in the store; cold_orphans: cold codes no cold "
                              "entry referenced at two sweeps, left by a crash)", ["store"])
        self.change_log_compacted = Counter("vibe_change_log_compacted_total",
                                            "Change-log entries deleted because a later entry of the same "
                                            "document, kind and space superseded them")
        # its rate shows the sweep's work a tick bounded by VIBE_EVICT_BATCH, not the tenants
        self.orphan_sweep_examined = Counter("vibe_cold_orphan_sweep_examined_total",
                                             "What the cold-orphan sweep read (kind=pairs: (tenant, space) pairs, "
                                             "a page at a time; codes: cold codes)", ["kind"])
        self.pinned = Counter("vibe_docs_pinned_total",
                              "Documents promoted (kept embedded) for touches or co-occurrence")
        self.provider_tokens = Counter("vibe_provider_tokens_total", "Estimated tokens sent to the embedding provider "
                                       "(kind=documents: embeddings of documents; queries: of query texts)", ["kind"])
        self.scheduler_runs = Counter("vibe_scheduler_runs_total", "Lifecycle scheduler ticks", ["outcome"])
        self.scheduler_stage_errors = Counter("vibe_scheduler_stage_errors_total",
                                              "Scheduler tick stages that raised (the tick's other stages still ran)",
                                              ["stage"])
        self.scheduler_seconds = Histogram("vibe_scheduler_tick_seconds", "Time of one scheduler tick",
                                           buckets=_LATENCY_BUCKETS)
        self.dead_letters = Counter("vibe_follower_dead_letters_total",
                                    "Index changes quarantined after the index refused them for good", ["follower"])
        self.follower_applied_ahead = Counter(
            "vibe_index_follower_applied_ahead_total",
            "Changes of one tenant applied to a private index ahead of other tenants' pending changes "
            "(applied again, in order, by the log's pass)")
        self.follower_errors = Counter("vibe_index_follower_errors_total",
                                       "Syncs on a request path that could not write the index (retried later)",
                                       ["follower"])
        self.backfill_queued = Counter("vibe_backfill_queued_total", "Jobs queued by backfills", ["kind"])
        # The admin lane (services/core/admin_lane.py): its rate is rate(vibe_backfill_examined_total),
        # its depth vibe_queue_depth{queue="bulk"} and what is left vibe_backfill_remaining_documents.
        self.backfill_examined = Counter("vibe_backfill_examined_total", "Documents backfill steps went past",
                                         ["kind"])
        self.backfill_unmetered = Counter("vibe_backfill_unmetered_total", "Jobs backfills queued for a model that "
                                          "bills nothing, without the per-minute bucket", ["kind"])
        self.backfill_remaining = Gauge("vibe_backfill_remaining_documents",
                                        "Documents running backfills have still to examine (all tenants)",
                                        multiprocess_mode=_ANY_PROCESS)
        self.backfill_cancelled = Counter("vibe_backfill_cancelled_total",
                                          "Backfills stopped because their reason ended (a promotion undone)", ["kind"])
        # Activation retires the old space at once; its vectors move to the cold store in the background.
        self.retired_moved = Counter("vibe_retired_vectors_moved_total",
                                     "Vectors of retired spaces moved to the cold store (background, in batches)")
        self.retired_remaining = Gauge("vibe_retired_vectors_remaining",
                                       "Vectors of retired spaces still to move to the cold store",
                                       multiprocess_mode=_ANY_PROCESS)
        self.coverage_ratio = Gauge("vibe_coverage_ratio", "Share of sidecar rows per state (active space)", ["state"],
                                    multiprocess_mode=_ANY_PROCESS)
        self.stored_bytes = Gauge("vibe_vector_bytes", "Bytes of vectors of record and in the cold store", ["store"],
                                  multiprocess_mode=_ANY_PROCESS)
        # The touch policy's "auto" follow-up (services/planner/touch_switch.py FollowUpSwitch). No collection
        # or tenant labels: the admin view (GET /semantic/touch) names the collections.
        self.follow_up_collections = Gauge(
            "vibe_touch_follow_up_collections", "Collections per \"auto\" follow-up state in the store "
            "(computed on scrape; every API replica reports the same store-wide figure)", ["state"],
            multiprocess_mode=_ANY_PROCESS)
        self.follow_up_changes = Counter(
            "vibe_touch_follow_up_changes_total", "\"auto\" follow-up state changes of a collection, counted once "
            "by the flush that made them (to = the new state)", ["to"])
        # Agent tools (MCP; the metric names extract_key_info operators know). No tenant labels on /metrics.
        self.tool_calls = Counter("tool_calls_total", "MCP tool calls", ["tool", "outcome"])
        self.tool_call_seconds = Histogram("tool_call_seconds", "MCP tool call time", ["tool"],
                                           buckets=_LATENCY_BUCKETS)
        self.embedding_latency = Histogram("embedding_latency_seconds", "Embedding time inside an MCP tool call",
                                           ["tool", "stage"], buckets=_LATENCY_BUCKETS)
        self.bm25_latency = Histogram("bm25_latency_seconds", "Lexical (BM25) time inside an MCP tool call",
                                      ["tool"], buckets=_LATENCY_BUCKETS)

        # The provider-call ledger (shared/ledger.py): rows written, rows past VIBE_LEDGER_RETENTION_DAYS pruned.
        self.ledger_rows_written = Counter("vibe_ledger_rows_written_total", "Provider-call ledger rows written")
        self.ledger_rows_pruned = Counter("vibe_ledger_rows_pruned_total",
                                          "Provider-call ledger rows removed by the retention sweep")

METRICS = _Metrics()
