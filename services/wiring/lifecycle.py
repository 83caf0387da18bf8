"""The lifecycle scheduler's decisions and the backfills it runs, the same in `serve`'s thread and
in Celery beat tasks."""

from __future__ import annotations

import math
from collections.abc import Callable

from services.core.admin_lane import AdminLane
from services.core.backfill import BackfillLimits, Backfills
from services.core.lifecycle import Lifecycle, LifecycleConfig
from services.core.promotion import PromotionPolicy
from services.wiring.stores import build_cold, build_collections, build_ledger
from shared.collection_settings import EmbedFields, embed_fields_of
from shared.config import Settings
from shared.policy.eligibility import EligibilityPolicy
from shared.ports import (
    Budget,
    ColdStore,
    JobQueue,
    StoreOfRecord,
)
from shared.spaces import SpaceDirectory


def lifecycle_config(s: Settings) -> LifecycleConfig:
    return LifecycleConfig(
        s.space, PromotionPolicy(s.promote_min_queries, s.promote_min_hits, s.promote_window_seconds,
                                 s.demote_idle_seconds),
        s.doc_promote_touches, s.doc_promote_ttl_seconds, s.usage_half_life_seconds, s.evict_idle_seconds,
        s.evict_batch, s.cold_codec, s.retired_space_retention_seconds, s.tenant_daily_tokens,
        ledger_retention_seconds=s.ledger_retention_days * 86400.0)


def backfill_reserve(settings: Settings) -> int:
    """Tokens of the tenant's per-minute bucket a backfill step leaves to reads: a share of the
    bucket (VIBE_BACKFILL_READ_SHARE), not one query's ceiling. Leaving only a query's ceiling
    (50 of 200) holds the bucket near 50 while a promotion backfill runs, and a burst of 15
    queries on another collection then embeds 42 documents instead of 112 (distributed profile,
    README "Lifecycle"). A backfill only takes the top of the bucket as it refills, so its rate
    is the same while reads are idle; reads keep the rest of the bucket for their bursts."""
    cap = settings.per_tenant_per_min
    share = math.floor(cap * settings.backfill_read_share)
    # ... but below what one backfill interval refills, or the bucket would overflow between
    # steps and the backfill would lose rate while reads are idle.
    share = min(share, cap - math.ceil(cap * settings.backfill_interval_seconds / 60))
    return max(min(settings.per_query_max_embeds, cap // 4), share)


def build_lifecycle(settings: Settings, store: StoreOfRecord, queue: JobQueue, budget: Budget,
                    policy: EligibilityPolicy, after_change: Callable[[], object] | None = None,
                    cold: ColdStore | None = None) -> Lifecycle:
    """The scheduler's decisions, the same in `serve`'s thread and in Celery beat tasks."""
    limits = BackfillLimits(settings.backfill_step_docs, backfill_reserve(settings), settings.backpressure_queue_depth,
                            settings.tenant_queue_bound())
    fields = EmbedFields(build_collections(settings, store))
    backfills = Backfills(store, queue, budget, lambda d: policy.decide_doc(d, embed_fields_of(
        fields, d.key.tenant, d.key.collection)), limits, store.clock,
        AdminLane(store, settings.space, settings.admin_lane_local_unmetered, settings.admin_lane_ahead))
    directory = SpaceDirectory(store, settings.space)
    return Lifecycle(lifecycle_config(settings), store, cold or build_cold(settings, store), backfills, store.clock,
                     after_change=after_change, spaces=directory.live, active=directory.active,
                     ledger=build_ledger(store))
