"""What the lifecycle scheduler is told (`LifecycleConfig`) and what it reports: a tick's
changes (`TickReport`) and one document's standing (`DocLifecycle`)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from services.core.promotion import PromotionPolicy


@dataclass(frozen=True)
class LifecycleConfig:
    space: str = "core"
    promotion: PromotionPolicy = field(default_factory=PromotionPolicy)
    doc_promote_touches: float = 3.0
    doc_promote_ttl_seconds: float = 30 * 86400.0
    half_life_seconds: float = 7 * 86400.0
    evict_idle_seconds: float = 30 * 86400.0
    evict_batch: int = 5000
    codec: str = "float16"
    # A retired space's cold files are kept this long after its retirement (model rollback);
    # then they, its sidecar rows and the space itself go. 0 = kept until re-activated.
    retired_retention_seconds: float = 7 * 86400.0
    daily_tokens: int = 0  # VIBE_TENANT_DAILY_TOKENS (0 = no cap)
    ledger_retention_seconds: float = 90 * 86400.0  # VIBE_LEDGER_RETENTION_DAYS

    @property
    def bucket_seconds(self) -> float:
        """Usage buckets: counts in the promotion window are exact to one bucket."""
        return max(1.0, self.promotion.window_seconds / 12)

    @property
    def usage_retention_seconds(self) -> float:
        return max(self.promotion.window_seconds, self.promotion.demote_idle_seconds) + self.bucket_seconds


@dataclass
class TickReport:
    promoted: list[str] = field(default_factory=list)
    demoted: list[str] = field(default_factory=list)
    pinned: int = 0
    evicted: int = 0
    pruned_vectors: int = 0
    pruned_cold: int = 0
    dropped_cold_copies: int = 0  # cold copies of vectors that are back in the store (rehydrated)
    retired_cooled: int = 0  # vectors of retired spaces moved to the cold store
    retired_expired: list[str] = field(default_factory=list)  # tenant/space past its retention
    cold_orphans: int = 0  # cold codes no cold entry referenced at two sweeps (crash leftovers), deleted
    gone_rows: int = 0  # sidecar rows of documents that are gone, deleted
    compacted_changes: int = 0  # change-log entries a later entry of the same key superseded, deleted
    requeued_budget: int = 0
    pruned_ledger: int = 0  # provider-call ledger rows past their retention, deleted
    backfills_started: int = 0
    skipped: bool = False
    failed: list[str] = field(default_factory=list)  # the stages that raised (the others ran)
    # per tenant, what this tick changed for it (GET /semantic/scheduler shows each tenant its own)
    tenants: dict[str, dict[str, Any]] = field(default_factory=dict)

    def body(self) -> dict[str, object]:
        return {k: v for k, v in self.__dict__.items() if k != "tenants"}

    def note(self, tenant: str, what: str, item: str | None = None, n: int = 1) -> None:
        """Count `n` under `what` for `tenant`, or list `item` there."""
        mine = self.tenants.setdefault(tenant, {})
        if item is None:
            mine[what] = int(mine.get(what, 0)) + n
        else:
            mine.setdefault(what, []).append(item)


@dataclass(frozen=True)
class DocLifecycle:
    eager: bool  # its collection embeds on write (never evicted)
    last_used_at: float | None
    touches: float  # decayed to now (a pin comes at `doc_promote_touches`)
    pinned_until: float | None  # a current pin only
    # a ready vector: from then the scheduler moves it cold unless it is used (the tick whose
    # eviction page reaches its row: within a pass, 50 ticks over 1M rows at the defaults)
    evictable_at: float | None
