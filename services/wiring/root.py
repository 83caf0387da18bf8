"""One process's parts (`build`): the stores, indexes, queue and embedders, the read flow with its
touch policy, the document service, the lifecycle scheduler, wired into a `Container`."""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import replace
from functools import partial
from typing import Any

from services.container import Container, RootHooks, Signal
from services.core.documents import DocumentService
from services.core.edge_fanout import EdgeFanout
from services.core.handlers import BatchOutcome
from services.core.repair import reconcile_pass
from services.core.rerank_usage import RerankBudget
from services.core.usage import UsageRecorder
from services.planner.auto_state import AutoThresholds, CoverageCache
from services.planner.graph import GraphBounds
from services.planner.passages import PassageLocator
from services.planner.planner import Planner, PlannerConfig
from services.planner.query_cache import QueryVectorCache
from services.planner.touch_policy import TouchPolicy
from services.planner.touch_switch import FollowUpSwitch
from services.wiring.agents import build_agent_adapters, build_named_rerankers, build_reranker
from services.wiring.embedders import SpaceEmbedders, build_handler, passage_config
from services.wiring.indexes import (
    _build_followers,
    _build_lexical,
    _build_vectors,
    claim_index_home,
    declared_filterable,
    release_index_home,
)
from services.wiring.lifecycle import build_lifecycle
from services.wiring.stores import (
    _build_queue,
    _eager,
    adopt_legacy_cold_dirs,
    build_budget,
    build_collections,
    build_explains,
    build_key_store,
    build_ledger,
    build_store,
)
from services.worker.scheduler import SchedulerThread
from shared.backpressure import Backpressure, TenantShare
from shared.collection_settings import EmbedFields
from shared.config import Settings, retired_settings
from shared.foreground import Foreground
from shared.model import EmbedJob
from shared.ports import (
    Embedder,
    StoreOfRecord,
)
from shared.spaces import SpaceDirectory
from shared.text.hashing import doc_text
from shared.text.redaction import redact

log = logging.getLogger("vibe.settings")


def touch_policy(settings: Settings, **tuning: Any) -> TouchPolicy:
    """The touch policy of this deployment: TouchPolicy's defaults with the operator's follow-up
    switch (VIBE_TOUCH_FOLLOW_UP). `tuning` sets other TouchPolicy fields: benchmarks and tests
    pass the result to `build(touch=)`; the product never does."""
    return replace(TouchPolicy(follow_up=settings.touch_follow_up), **tuning)


def build_follow_ups(settings: Settings, store: StoreOfRecord, policy: TouchPolicy) -> FollowUpSwitch:
    """The "auto" follow-up's switch on the store of record: every process built here (HTTP, MCP,
    workers, CLI) shares its collections' states through the store."""
    return FollowUpSwitch(window=policy.auto_window, store=store, flush_every=settings.touch_auto_flush_every,
                          refresh_seconds=settings.touch_auto_refresh_seconds, after=policy.auto_after,
                          below=policy.auto_below)


def build(settings: Settings, embedder: Embedder | None = None, clock: Callable[[], float] | None = None,
          touch: TouchPolicy | None = None) -> Container:
    """Every part of one process. `clock` (default the wall clock) is the store's, and through
    it every part's that stamps or decides by time (bench lifecycle replays simulated days).
    `touch` (default `touch_policy(settings)`) is the reads' touch policy, for benchmarks and
    tests that measure another."""
    from shared.adapters.embedders import build_embedder

    for name in retired_settings():
        log.warning("%s is no longer a setting and is ignored: the touch policy's defaults apply", name)
    store = build_store(settings, clock)
    home = claim_index_home(settings.data_dir)
    collections = build_collections(settings, store)
    lexical = _build_lexical(settings, home, store, collections)
    vectors = _build_vectors(settings, home, declared_filterable(settings, collections))
    emb = embedder or build_embedder(settings)
    handler = build_handler(settings, store, emb)
    follower = _build_followers(settings, store, lexical, vectors, home)
    signal = Signal()

    # The in-process pipeline yields to first answers (shared/foreground.py); Celery workers
    # are other processes and share neither the interpreter lock nor this gate.
    foreground = Foreground(settings.foreground_max_wait_seconds)

    def run_batch(jobs: list[EmbedJob]) -> BatchOutcome:
        foreground.yield_to_requests()
        out = handler.run(jobs)
        if out.changed:
            foreground.yield_to_requests()
            follower.catch_up()
        return out

    queue = _build_queue(settings, run_batch)
    queue.on_done(signal.fire)
    cfg = PlannerConfig(settings.space, settings.lexical_candidates, settings.per_query_max_embeds,
                        settings.rrf_k, settings.fusion, settings.semantic_weight,
                        touch_policy(settings) if touch is None else touch,
                        short_first_page=settings.vectors != "qdrant",
                        global_max_collections=settings.global_max_collections,
                        global_min_share=settings.global_min_share)
    budget = build_budget(settings)
    lifecycle = build_lifecycle(settings, store, queue, budget, handler.policy, follower.sync, handler.cold)
    usage = UsageRecorder(lifecycle.cfg.bucket_seconds, settings.usage_half_life_seconds, lifecycle.clock, store,
                          settings.tenant_daily_tokens, calls=handler.calls)
    spaces = SpaceDirectory(store, settings.space)
    embedders = handler.embedders
    assert isinstance(embedders, SpaceEmbedders)
    # A semantic leg waits for the vector index only.
    planner = Planner(cfg, store, lexical, vectors, emb, queue, budget, follower.of_vectors(),
                      build_explains(settings, store),
                      QueryVectorCache.from_settings(settings), usage=usage, spaces=spaces,
                      embedders=embedders.if_ready,  # a read never loads a model (`if_ready`)
                      lexical_follower=follower.of_lexical(), foreground=foreground,
                      follow_ups=build_follow_ups(settings, store, cfg.touch),
                      backpressure=Backpressure(queue, settings.touch_backpressure_queue_depth, ttl=1.0),
                      tenant_share=(share := TenantShare(queue, settings.tenant_queue_bound(), ttl=1.0)))
    planner.passages = PassageLocator(passage_config(settings), EmbedFields(collections))
    planner.reranker = build_reranker(settings)
    planner.rerankers = build_named_rerankers(settings)
    planner.rerank_budget = RerankBudget(settings.read_rerank_per_minute)
    planner.coverage = CoverageCache(store, settings.auto_coverage_ttl_seconds, AutoThresholds(
        settings.auto_keyword_below_coverage, settings.auto_short_query_words, settings.auto_hybrid_above_coverage))
    planner.rerank_candidates = settings.read_rerank_candidates
    planner.graph = GraphBounds(settings.graph_max_neighbors_per_node, settings.graph_max_neighbors_total,
                                settings.graph_speculation_per_doc)
    rerank_fields = EmbedFields(collections)
    # the reranker is an outside endpoint: it reads what an embedder would, masked the same way
    planner.rerank_text = lambda d: redact(doc_text(d.fields, rerank_fields.of(d.key.tenant, d.key.collection)))[0]
    docs = DocumentService(store, follower, queue, handler.policy, EmbedFields(collections), spaces,
                           settings.max_doc_bytes, lambda tenant: _eager(store, tenant),
                           settings.write_sync_wait_seconds,
                           (settings.acl_max_principal_bytes, settings.acl_max_bytes), budget, share)
    docs.fanout = EdgeFanout(store, store, settings.graph_max_edges_per_node)
    embedded = settings.queue != "celery"
    # The embedded profile's reconciler runs on the scheduler thread (the distributed one is a
    # Celery beat task, services/worker/reconciler.py).
    reconcile = (partial(reconcile_pass, store, spaces, queue, settings.reconcile_stuck_seconds,
                         settings.reconcile_batch) if embedded else None)
    # `VIBE_SCHEDULER_ENABLED=false` keeps this process from deciding (promotion, demotion, eviction,
    # pruning) and, distributed, from backfill steps (Celery beat runs them on the workers); usage
    # flushes always run, and embedded, backfill steps and the reconciler too (nothing else would).
    scheduler = SchedulerThread(lifecycle, usage, store, embedded and settings.scheduler_enabled,
                                settings.scheduler_interval_seconds,
                                settings.backfill_interval_seconds, settings.usage_flush_seconds,
                                reconcile, settings.reconcile_interval_seconds,
                                backfills=embedded or settings.scheduler_enabled)
    if embedded:  # an admin-lane backfill is stepped again as soon as its lane runs low
        queue.on_done(scheduler.drain_wake(lambda: queue.depth().get("bulk", 0), settings.admin_lane_ahead // 2))
    hooks = RootHooks(agent=partial(build_agent_adapters, settings), ledger=partial(build_ledger, store),
                      collections=partial(build_collections, settings, store),
                      before_start=partial(adopt_legacy_cold_dirs, settings, store),
                      release_index_home=partial(release_index_home, home),
                      key_store=partial(build_key_store, store))
    return Container(settings, store, lexical, vectors, emb, follower, queue, planner, docs, handler, lifecycle,
                     scheduler, spaces, embedders, home, hooks, signal, collections=collections)
