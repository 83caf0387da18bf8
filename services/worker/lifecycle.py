"""The lifecycle scheduler: the
other half of lazy. Every `VIBE_SCHEDULER_INTERVAL_SECONDS`, under a store lease (one leader
however many processes run it: `serve` threads, Celery beat tasks), one tick:

1. promotes collections whose window saw enough queries and hits, demotes idle ones, and
   starts a promotion backfill for each new eager collection;
2. pins documents touched often or found beside pinned ones (they outlive the idle bound);
3. evicts vectors unused for `VIBE_EVICT_IDLE_SECONDS` to the cold store, so the ANN index
   drops them (through the change log) and the next touch rehydrates without a provider call
   (a page of the sidecar per tick from a cursor in the store: within a pass of the idle bound);
4. prunes vectors and cold entries whose content no document has any more, and old usage;
   drops the cold copy of a vector that is back in the store (rehydrated: evicting it again
   writes a new one);
   moves a batch of what is still `ready` in each retired space to the cold store, and removes
   a retired space whose retention (`VIBE_RETIRED_SPACE_RETENTION_SECONDS`) has passed: it is
   claimed (`expiring`, so a re-activation racing it is refused), then its cold files, rows and
   the space go; deletes cold codes that no cold entry has referenced for two sweeps (what a
   process killed mid-eviction or mid-prune left); deletes the sidecar rows of documents that
   are gone (earlier versions left them), a batch per tick; compacts the change log (entries a
   later entry of the same document, kind and space superseded);
5. gives budget-refused documents of past days back to the lazy path;
6. publishes coverage and storage gauges.
Backfill steps run on their own, shorter cadence (`run_backfills`), and so does the move of a
retired space's vectors to the cold store (activation only retires the space; the move follows
in batches, `GET /semantic/spaces` shows it as `retiring`). The clock is injected, so
every decision can be replayed over simulated days (tests, `bench lifecycle`).
"""

from __future__ import annotations

import logging
import math
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, TypeVar

from services.core.backfill import Backfills
from services.core.promotion import PromotionPolicy, decide_collections
from shared.metrics import METRICS
from shared.model import BackfillTask, CollectionMode, DocKey, SemanticStatus, SidecarEntry, SpaceInfo, flatten
from shared.ports import CodeCursor, ColdStore, ProviderLedger, RowCursor, StoreOfRecord

log = logging.getLogger("vibe.lifecycle")

# A space's rows filled or realigned before a cut-over (`Lifecycle._in_batches`): after this
# long of batches, this pause for other processes' writes.
BATCH_SECONDS = 0.1
BATCH_PAUSE = 0.15  # above the busy handler's longest poll interval (100 ms)
T = TypeVar("T")
LEASE = "scheduler"
GAUGE_SHARE = 0.02  # the share of real time the coverage and size gauges may take (_paced_gauges)
ColdCode = tuple[str, str, str]  # tenant, space, content hash
# The store's names of the sweeps' cursors (`sweep_cursor`)
ORPHANS_CURSOR = "cold_orphans"
GONE_CURSOR = "gone_rows"
VECTORS_CURSOR = "orphan_vectors"
COLD_CURSOR = "orphan_cold"
COPIES_CURSOR = "cold_copies"
CHANGES_CURSOR = "change_log"
# The (tenant, space) pairs a tick's cold-orphan sweep visits at most, read as one page
# (`known_spaces_page`), beside its `evict_batch` codes: each pair costs a query of the cold store
# even when empty, so a tick's cost follows this, not the tenants. A pass over 10,000 tenants'
# pairs takes 50 ticks (50 min at the default interval), for leftovers of crashes.
SPACES_PAGE = 200
CHANGE_PAGES = 10  # change-log pages examined a tick (compact_change_log): ~30 ms SQLite, ~115 ms PostgreSQL
EVICT_CURSOR = "evict"
LEDGER_PAGES = 4  # ledger deletes of `evict_batch` rows a tick at most (prune_ledger)
PINS_CURSOR = "pins"
# The tick's eviction page, and its pins' page of usage rows, in `evict_batch`es of rows
# (`evict_page`, `_pin`): a row costs ~2.5 us to examine (SQLite, PostgreSQL: /tmp scripts,
# 2026-11-27), so 20,000 at the defaults take ~50 ms a tick and a pass over 1M rows 50 ticks
# (50 min at the default interval); one batch, 10 ms and 3.3 h.
EVICT_PAGE_BATCHES = 4


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
    gone_rows: int = 0  # sidecar rows of documents that are gone (left by earlier versions), deleted
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


class Lifecycle:
    def __init__(self, cfg: LifecycleConfig, store: StoreOfRecord, cold: ColdStore, backfills: Backfills,
                 clock: Callable[[], float] = time.time, after_change: Callable[[], object] | None = None,
                 spaces: Callable[[], set[str]] | None = None, active: Callable[[str], str] | None = None,
                 ledger: ProviderLedger | None = None):
        self.cfg = cfg
        self.store = store
        self.cold = cold
        self.backfills = backfills
        self.clock = clock
        self.after_change = after_change  # the embedded profile syncs its own indexes at once
        self.spaces = spaces  # every live space (shared/spaces.py); default: the configured one
        self.active = active or (lambda tenant: cfg.space)  # a tenant's active space
        self.ledger = ledger  # the provider-call ledger, pruned past its retention
        self._orphans: set[ColdCode] = set()  # unreferenced at this process's last sweep (sweep_cold_orphans)
        self.monotonic: Callable[[], float] = time.monotonic  # what paces the gauges (tests replace it)
        self._gauges_due = 0.0  # monotonic time from which the next tick publishes the gauges

    # -- entry points ------------------------------------------------------------------------

    def tick(self, now: float | None = None) -> TickReport:
        now = self.clock() if now is None else now
        started = time.perf_counter()
        with self.store.lease(LEASE) as leader:
            if not leader:
                METRICS.scheduler_runs.labels(outcome="not_leader").inc()
                return TickReport(skipped=True)
            report = self._tick(now)
            try:
                self.store.record_tick(now, report.tenants, report.failed)
            except Exception:  # noqa: BLE001 - the admin view's record must not undo the tick's work
                log.warning("scheduler tick not recorded", exc_info=True)
        METRICS.scheduler_runs.labels(outcome="failed" if report.failed else "ran").inc()
        METRICS.scheduler_seconds.observe(time.perf_counter() - started)
        if report.promoted or report.demoted or report.evicted or report.pinned or report.retired_expired:
            log.info("lifecycle tick", extra={k: v for k, v in report.body().items() if v})
        return report

    def run_backfills(self) -> int:
        """One step of every running backfill, then one batch of each retired space's move to
        the cold store (the short cadence: activation returns at once and wakes it)."""
        with self.store.lease(f"{LEASE}:backfill") as leader:
            queued = self.backfills.run() if leader else 0
        self.cool_retired(self.clock())
        return queued

    def first_step(self, task: BackfillTask) -> int:
        """A new task's first step now, so a small collection needs no wait, under the lease
        every backfill step holds. Run beside the scheduler's step of the same task, both read
        one cursor: the later write of the task's counters lost the other's (seen: a reindex that
        answered `queued: 150` showed `queued: 0` once done), and both took the bucket for the
        same documents. With the lease busy, the scheduler's next run (woken now) steps it."""
        with self.store.lease(f"{LEASE}:backfill") as leader:
            return self.backfills.step(task) if leader else 0

    # -- one tick ----------------------------------------------------------------------------

    def _tick(self, now: float) -> TickReport:
        """Every stage of a tick, each on its own: a stage that raises is logged, counted
        (`vibe_scheduler_stage_errors_total{stage}`) and named in GET /semantic/scheduler, and
        the others still run. Before, one failing query (seen: the migration backlog check)
        stopped promotion, pinning, eviction and pruning for every tenant, tick after tick, and
        the admin view only showed `lastTickAt` standing still."""
        r = TickReport()
        self._stage(r, "collections", lambda: self._collections(now, r), None)
        r.pinned = self._stage(r, "pin", lambda: self._pin(now, r), 0)
        r.evicted = self._stage(r, "evict", lambda: self.evict_page(now, r), 0)
        r.pruned_vectors, r.pruned_cold = self._stage(r, "prune", lambda: self.prune(now), (0, 0))
        r.dropped_cold_copies = self._stage(r, "cold_copies", self.drop_cold_copies, 0)
        r.retired_cooled = self._stage(r, "retired_cool", lambda: self.cool_retired(now), 0)
        r.retired_expired = self._stage(r, "retired_expire", lambda: self.expire_retired(now, r), [])
        r.cold_orphans = self._stage(r, "cold_orphans", self.sweep_cold_orphans, 0)
        r.gone_rows = self._stage(r, "gone_rows", lambda: self.sweep_gone_rows(r), 0)
        r.compacted_changes = self._stage(r, "change_log", self.compact_change_log, 0)
        r.pruned_ledger = self._stage(r, "ledger", lambda: self.prune_ledger(now), 0)
        r.requeued_budget = self._stage(r, "budget_requeue", lambda: self.store.requeue_budget_deferred(
            # refusals of past days come back; with no cap at all (an operator removed it and
            # restarted), today's too: they waited for midnight UTC, and no read or reindex
            # embedded them meanwhile
            _day_start(now) if self.cfg.daily_tokens else now + 1.0), 0)
        self._stage(r, "gauges", self._paced_gauges, None)
        return r

    def _paced_gauges(self) -> None:
        """`publish_gauges` at most `GAUGE_SHARE` of the time: its aggregates read whole tables
        (2.1 s for coverage on SQLite over 1M sidecar rows, 0.3-0.4 s for stored bytes; a helper's
        /tmp measurement, 2026-11-27), every tick, for figures a dashboard samples anyway. A pass
        that took `d` seconds is next run `d / GAUGE_SHARE` later, so a small store still
        refreshes every tick and a large one spends at most ~2% of a core on them. Paced on the
        process's monotonic clock, not the scheduler's (simulated in bench lifecycle): the cost is
        real time. The decisions of a tick never wait for it."""
        started = self.monotonic()
        if started < self._gauges_due:
            return
        self.publish_gauges()
        took = self.monotonic() - started
        self._gauges_due = started + took / GAUGE_SHARE

    @staticmethod
    def _stage(r: TickReport, name: str, run: Callable[[], T], failed: T) -> T:
        """One stage of a tick; `failed` is its result when it raises."""
        try:
            return run()
        except Exception:  # noqa: BLE001 - one stage's failure must not stop the others
            log.exception("scheduler stage failed", extra={"stage": name})
            METRICS.scheduler_stage_errors.labels(stage=name).inc()
            r.failed.append(name)
            return failed

    def _collections(self, now: float, r: TickReport) -> None:
        pol = self.cfg.promotion
        usage = self.store.collection_usage(now - pol.window_seconds)
        for change in decide_collections(pol, usage, self.store.collection_modes(), now):
            if not self.store.set_collection_mode(change, only_if_not_manual=True):
                continue
            METRICS.promotions.labels(action="promote" if change.mode == "eager" else "demote").inc()
            name = f"{change.tenant}/{change.collection}"
            r.note(change.tenant, "promoted" if change.mode == "eager" else "demoted", change.collection)
            if change.mode == "eager":
                r.promoted.append(name)
                self.backfills.start(change.tenant, change.collection, self.active(change.tenant), "promote")
            else:
                r.demoted.append(name)
        self._eager_backlog(r)
        self._migration_backlog(r)

    def _migration_backlog(self, r: TickReport) -> None:
        """A space being built with documents still to embed and no task running for it gets its
        migration again. A write made during a migration embeds into the new space at once, but
        what the per-minute bucket did not grant stays `none` (the migration's own steps keep
        the bucket near empty), and the migration's cursor may be past that document already:
        the migration finished, and activation refused with "documents still to embed" for good."""
        running = {(t.tenant, t.space) for t in self.store.tasks(running_only=True)}
        for sp in self.store.tenant_spaces():
            if sp.state != "building" or (sp.tenant, sp.space) in running:
                continue
            left = self.migration_backlog(sp)
            if left["none"] or left["stale"]:
                self.backfills.start(sp.tenant, None, sp.space, "migrate")
                r.backfills_started += 1

    def fill_rows(self, tenant: str, space: str, batch: int = 5000) -> float:
        """Before a forced cut-over to `space`: a `none` row there for every document of the
        tenant that has none (documents the migration never reached; a touch never spends on a
        document without a row), a short transaction per `batch` documents. Returns the time
        from which the cut-over's own pass must still look (`switch_space(filled_since=)`):
        a write during the fill gives its document a row in a building space itself, so the
        pass is a safety net over recent writes, with a minute's slack for other hosts' clocks."""
        return self._in_batches(self.store.fill_space_rows, "space rows filled", tenant, space, batch)

    def realign_rows(self, tenant: str, space: str, batch: int = 5000) -> float:
        """Before a retired space is made current again (rollback): its rows brought up to date
        with the documents (`realign_space`), a short transaction per `batch` documents. Returns
        the time from which the cut-over must still realign (`switch_space(realigned_since=)`):
        a write meanwhile moves the space's rows onto its new content itself, but gives its
        document no row in a retired space, and an ACL change must reach the vector index."""
        return self._in_batches(self.store.realign_space_rows, "space rows realigned", tenant, space, batch)

    def _in_batches(self, step: Callable[[str, str, tuple[str, str] | None, int, float],
                                         tuple[int, tuple[str, str] | None]],
                    done: str, tenant: str, space: str, batch: int) -> float:
        """`step` batch after batch to the end, with a pause of `BATCH_PAUSE` after every
        `BATCH_SECONDS` of them. A writer of this process waits for one batch at most (the
        store's ticket lock lets it in between two); one of another process waits in SQLite's
        busy handler, which polls every 100 ms at most and misses most gaps between back-to-back
        batches (at 1M documents it waited up to 0.53 s unpaced, 0.18 s paced). PostgreSQL
        queues lock waiters; the pauses cost it little."""
        since = self.store.clock() - 60.0
        after: tuple[str, str] | None = None
        written, worked = 0, 0.0
        while True:
            started = time.monotonic()
            n, after = step(tenant, space, after, batch, self.store.clock())
            written += n
            if after is None:
                break
            worked += time.monotonic() - started
            if worked >= BATCH_SECONDS:
                time.sleep(BATCH_PAUSE)
                worked = 0.0
        log.info(done, extra={"tenant": tenant, "space": space, "rows": written})
        return since

    def migration_backlog(self, sp: SpaceInfo) -> dict[str, int]:
        """What the migration into the building space `sp` has still to embed, by state (the
        backfill step's `_scoped` picks the same documents): the tick, activation and
        GET /semantic/spaces all count with this."""
        eager = [c for t, c in self.store.promoted() if t == sp.tenant]
        return self.store.migration_backlog(sp.tenant, sp.space, self.active(sp.tenant), sp.scope, eager)

    def _eager_backlog(self, r: TickReport) -> None:
        """An eager collection with documents still to embed (writes the per-minute bucket did
        not grant, a failed batch) gets a backfill, unless one is running for it."""
        running = {(t.tenant, t.collection) for t in self.store.tasks(running_only=True)}
        for m in self.store.collection_modes():
            if m.mode != "eager" or (m.tenant, m.collection) in running:
                continue
            states = self.store.coverage(m.tenant, m.collection, self.active(m.tenant))["states"]
            assert isinstance(states, dict)
            if any(int(states.get(s, 0)) for s in ("none", "stale", "cold")):  # not `failed`: no retry loop
                self.backfills.start(m.tenant, m.collection, self.active(m.tenant), "promote")
                r.backfills_started += 1

    def _pin(self, now: float, r: TickReport) -> int:
        """Document promotion: extend the life of documents touched often or co-occurring with
        pinned ones. Re-pinned once half the TTL has passed, not at every tick. A page of usage
        rows a tick from the store's cursor, as eviction's: a document that turns hot is pinned
        within a pass (1M rows: 50 ticks), against a TTL and an idle bound of days."""
        ttl = self.cfg.doc_promote_ttl_seconds
        hot, after = self.store.hot_docs_page(now, self.cfg.doc_promote_touches, self.cfg.half_life_seconds,
                                              _doc_cursor(self.store.sweep_cursor(PINS_CURSOR)),
                                              EVICT_PAGE_BATCHES * self.cfg.evict_batch, refresh_before=now + ttl / 2)
        self.store.set_sweep_cursor(PINS_CURSOR, after)
        if not hot:
            return 0
        n = self.store.pin_docs(hot, now + ttl)
        METRICS.pinned.inc(n)
        for k in set(hot):
            r.note(k.tenant, "pinned")
        return n

    def evict(self, now: float, idle_seconds: float | None = None, tenant: str | None = None,
              collection: str | None = None) -> int:
        """Move every unused vector of lazy collections (of the tenant and collection, if given)
        to the cold store now, `evict_batch` rows per transaction: `POST /semantic/evict`. The
        tick goes by pages instead (`evict_page`)."""
        idle = self.cfg.evict_idle_seconds if idle_seconds is None else idle_seconds
        moved: list[DocKey] = []
        for space in self._evicted_spaces():
            while rows := self.store.eviction_candidates(space, now - idle, now, self.cfg.evict_batch,
                                                          tenant, collection):
                done = self._evict_rows(rows, now) or []
                moved += done
                if len(rows) < self.cfg.evict_batch or not done:
                    break
        return self._evicted(moved)

    def evict_page(self, now: float, report: TickReport | None = None) -> int:
        """The tick's eviction: of `EVICT_PAGE_BATCHES` x `evict_batch` sidecar rows from where the
        last tick stopped (the store's cursor, as the sweeps'), the idle ones go cold, `evict_batch`
        per transaction; a pass that reaches the end starts over, and a store that fits in a page
        is examined whole at every tick, as before. `evict` read every `ready` row of each space
        per tick to find the idle ones: 0.3-1.8 s at 1M rows, to find none in the steady state. An
        idle vector now goes cold up to a pass later (1M rows: 50 ticks, 50 min at the default
        interval), against an idle bound of days. `report` counts the evictions per tenant."""
        rows, after = self.store.eviction_page(self._evicted_spaces(), now - self.cfg.evict_idle_seconds, now,
                                               _row_cursor(self.store.sweep_cursor(EVICT_CURSOR)),
                                               EVICT_PAGE_BATCHES * self.cfg.evict_batch)
        moved: list[DocKey] = []
        for i in range(0, len(rows), self.cfg.evict_batch):
            moved += self._evict_rows(rows[i:i + self.cfg.evict_batch], now) or []
        self.store.set_sweep_cursor(EVICT_CURSOR, after)
        return self._evicted(moved, report)

    def _evicted_spaces(self) -> list[str]:
        """Where eviction looks: every live space, or the configured one."""
        return sorted(self.spaces() if self.spaces is not None else {self.cfg.space})

    def _evicted(self, moved: list[DocKey], report: TickReport | None = None) -> int:
        if report is not None:
            for k in moved:
                report.note(k.tenant, "evicted")
        if moved:
            METRICS.evictions.inc(len(moved))
            self._changed()
        return len(moved)

    def _evict_rows(self, rows: list[SidecarEntry], now: float,
                    retired: tuple[str, str] | None = None) -> list[DocKey] | None:
        entries: list[tuple[SidecarEntry, str, int]] = []
        written: dict[tuple[str, str, str], tuple[str, int]] = {}
        for s in rows:
            where = (s.key.tenant, s.space, s.content_hash)
            if where not in written:
                vecs = self.store.vector_for_hash(s.key.tenant, s.content_hash, s.space)
                if vecs is None:
                    continue  # ready without a vector: /semantic/mismatch reports it; never guess
                written[where] = self.cold.put(s.key.tenant, s.space, s.content_hash, flatten(vecs))
            ref, nbytes = written[where]
            entries.append((s, ref, nbytes))
        if retired is None:
            moved = set(self.store.evict(entries, self.cfg.codec, now))
        else:
            out = self.store.evict_retired(*retired, entries, self.cfg.codec, now)
            moved = set(out or ())
        # A row used or rewritten meanwhile was not evicted: a file no cold entry records would
        # never be pruned, so it goes now (unless another row of that content was evicted).
        for s, _, _ in entries:
            if s.key not in moved and self.store.cold_entry(s.key.tenant, s.content_hash, s.space) is None:
                self.cold.delete(s.key.tenant, s.space, s.content_hash)
        return None if retired is not None and out is None else list(moved)

    def prune(self, now: float) -> tuple[int, int]:
        """Vectors and cold entries of content no document has any more (edited away, deleted),
        `evict_batch` of each examined per tick from where the last tick stopped: a pass over
        both tables each tick, with a document lookup per row, cost 1-2 s at 1M vectors to find
        nothing. The cursors are in the store, as the gone-rows sweep's, so a restart or another
        process's tick goes on where the pass stopped."""
        removed, after = self.store.prune_orphan_vectors(_hash_cursor(self.store.sweep_cursor(VECTORS_CURSOR)),
                                                         self.cfg.evict_batch)
        self.store.set_sweep_cursor(VECTORS_CURSOR, after)
        cold, after = self.store.prune_orphan_cold(_hash_cursor(self.store.sweep_cursor(COLD_CURSOR)),
                                                   self.cfg.evict_batch)
        self.store.set_sweep_cursor(COLD_CURSOR, after)
        for tenant, chash, space, _ref in cold:
            self.cold.delete(tenant, space, chash)
        if removed:
            METRICS.pruned.labels(store="vectors").inc(removed)
        if cold:
            METRICS.pruned.labels(store="cold").inc(len(cold))
        self.store.prune_usage(now - self.cfg.usage_retention_seconds)
        return removed, len(cold)

    def prune_ledger(self, now: float) -> int:
        """Provider-call ledger rows older than the retention go, a bounded number a tick (the
        delete holds the write lock): a backlog, say after the retention was shortened, drains
        over ticks instead of stalling one."""
        if self.ledger is None:
            return 0
        before, gone = now - self.cfg.ledger_retention_seconds, 0
        for _ in range(LEDGER_PAGES):
            n = self.ledger.prune_ledger(before, self.cfg.evict_batch)
            gone += n
            if n < self.cfg.evict_batch:
                break
        return gone

    def drop_cold_copies(self) -> int:
        """A rehydrated vector is back in the store: its cold copy goes (row, then file), since
        the next eviction writes it again and keeping it stores the vector twice. An eviction of
        the same content racing this at worst loses its file: the next touch then re-embeds.
        `evict_batch` cold entries examined per tick from the store's cursor, like `prune`."""
        gone, after = self.store.prune_cold_copies(_hash_cursor(self.store.sweep_cursor(COPIES_CURSOR)),
                                                   self.cfg.evict_batch)
        self.store.set_sweep_cursor(COPIES_CURSOR, after)
        for tenant, chash, space, _ref in gone:
            self.cold.delete(tenant, space, chash)
        if gone:
            METRICS.pruned.labels(store="cold_copies").inc(len(gone))
        return len(gone)

    def sweep_cold_orphans(self) -> int:
        """Delete cold codes that no cold entry references; `evict_batch` codes are examined per
        call, resuming where the last one stopped. A process killed between an eviction's
        `cold.put` and the store's commit (`_evict_rows`, also for a retired space), or between a
        prune's or a dropped cold copy's row deletion and its `cold.delete`, leaves such a code,
        and nothing else would ever remove it.

        Two phases, because the first window is also every eviction in flight: its code is
        written before the transaction that records the cold entry commits, so a code seen
        unreferenced once may just not be committed yet. A code goes only if it was unreferenced
        at this process's previous sweep (a tick interval ago at least, far longer than an
        eviction batch takes) and is still unreferenced when checked again right before its
        delete. Left: an eviction of the same content that writes the code again between that
        last check and the delete loses it, and its next touch re-embeds (as in
        `drop_cold_copies`).

        Where the sweep stopped is in the store, so a restarted scheduler, or another process
        taking the lease, goes on from there: when each began at the first code, a fleet that
        restarted more often than a pass takes never reached its tail. The candidates stay in
        this process's memory, on purpose: several processes tick on their own phases under the
        one lease (each `serve`, any Celery worker), so candidates in the store would be
        confirmed by whichever ticks next, possibly a second later, while an eviction in flight
        has not committed; this process's next tick is an interval away. A restart loses at most
        one batch's candidates, which the next pass finds again: a delay, never a wrong delete."""
        confirmed = 0
        candidates, self._orphans = sorted(self._orphans), set()
        for tenant, space, h in candidates:
            if self.store.cold_entry(tenant, h, space) is None:
                self.cold.delete(tenant, space, h)
                confirmed += 1
        self._orphans, examined = self._unreferenced_page(_code_cursor(self.store.sweep_cursor(ORPHANS_CURSOR)))
        METRICS.orphan_sweep_examined.labels(kind="codes").inc(examined)
        if confirmed:
            METRICS.pruned.labels(store="cold_orphans").inc(confirmed)
        if confirmed or self._orphans:
            log.info("cold orphans swept", extra={"deleted": confirmed, "candidates": len(self._orphans),
                                                  "examined": examined})
        return confirmed

    def sweep_gone_rows(self, report: TickReport | None = None) -> int:
        """Delete sidecar rows whose document is gone, whatever their status (`prune_gone_rows`),
        `evict_batch` rows examined per tick, resuming where the last one stopped. Earlier
        versions left them (a backfill racing a delete); the reconciler repairs only `queued`
        ones, so the rest counted in coverage for good. The cursor is in the store, like the cold
        orphan sweep's: a pass of 2M rows takes ~6.7 h at the defaults, and a fleet that began
        again at the first row at each restart never reached its tail.
        The vectors and cold entries of their content go with `prune`, as after a delete.
        Counted with the reconciler's repairs of the same leftovers
        (`vibe_reconciler_repaired_total{reason="document_gone"}`) and, per tenant, in the tick's
        `goneRows` (GET /semantic/scheduler `lastChange`)."""
        gone, after = self.store.prune_gone_rows(_row_cursor(self.store.sweep_cursor(GONE_CURSOR)),
                                                 self.cfg.evict_batch)
        self.store.set_sweep_cursor(GONE_CURSOR, after)
        if report is not None:
            for key, _ in gone:
                report.note(key.tenant, "goneRows")
        if gone:
            METRICS.reconciler_repaired.labels(reason="document_gone").inc(len(gone))
            log.info("rows of gone documents deleted", extra={"rows": len(gone)})
            self._changed()  # the embedded indexes drop the points of `ready` ones now
        return len(gone)

    def compact_change_log(self) -> int:
        """Delete change-log entries a later entry of the same key, op and space supersedes
        (`compact_changes`), `CHANGE_PAGES` pages of `evict_batch` entries examined per tick from
        the store's cursor, like the other sweeps. Without it the log grew by every edit,
        embedding, eviction and rehydration for good, and an index rebuild (a new schema,
        `rebuild-index`) replayed all of it; compacted, it holds about one entry per document
        and kind of change. Nothing a follower does changes: it applies a key's current state.
        Counted in `vibe_change_log_compacted_total` and the tick's `compacted_changes`; not in a
        tenant's `lastChange` (GET /semantic/scheduler): housekeeping that follows every write
        would push the decisions an operator looks for out of that view."""
        removed = 0
        for _ in range(CHANGE_PAGES):
            stop = self.store.sweep_cursor(CHANGES_CURSOR)
            by_tenant, after = self.store.compact_changes(_seq_cursor(stop), self.cfg.evict_batch)
            self.store.set_sweep_cursor(CHANGES_CURSOR, None if after is None else (str(after),))
            removed += sum(by_tenant.values())
            if after is None:
                break
        if removed:
            METRICS.change_log_compacted.inc(removed)
            log.info("change log compacted", extra={"entries": removed})
        return removed

    def _unreferenced_page(self, start: ColdCode | None) -> tuple[set[ColdCode], int]:
        """The next `evict_batch` codes of the cold store, over at most `SPACES_PAGE` of the
        (tenant, space) pairs the store knows, in order (an empty one costs one code), after
        `start` (the code where the last sweep stopped; None: from the first): those no cold
        entry references, and how many were examined. Records where this one stops (a pass that
        reaches the end starts over). The pairs are one page from `start` on
        (`known_spaces_page`): reading every pair at every tick (`known_spaces`) cost what the
        tenants did, and so did asking the cold store about thousands of them (a query each:
        at 10,000 tenants a tick took 0.19 s on SQLite and 0.75 s on PostgreSQL)."""
        budget, examined, found = self.cfg.evict_batch, 0, set[ColdCode]()
        # one pair more than a tick visits: where the next tick begins (none: the pass is done)
        pairs = self.store.known_spaces_page(None if start is None else (start[0], start[1]), SPACES_PAGE + 1)
        METRICS.orphan_sweep_examined.labels(kind="pairs").inc(min(len(pairs), SPACES_PAGE))
        for i, (tenant, space) in enumerate(pairs):
            after = start[2] if start is not None and (tenant, space) == start[:2] else ""
            while True:
                if budget <= 0 or i == SPACES_PAGE:
                    self.store.set_sweep_cursor(ORPHANS_CURSOR, (tenant, space, after))
                    return found, examined
                asked = budget
                page = self.cold.hashes(tenant, space, after, asked)
                budget -= max(1, len(page))
                examined += len(page)
                found.update((tenant, space, h) for h in set(page) - self.store.cold_referenced(tenant, space, page))
                if len(page) < asked:
                    break
                after = page[-1]
        self.store.set_sweep_cursor(ORPHANS_CURSOR, None)
        return found, examined

    # -- retired spaces (model rollback) ----------------------------------------------------------

    def retire_space(self, tenant: str, space: str, now: float, batches: int | None = None) -> int:
        """Move a retired space's `ready` vectors to the cold store (keyed by tenant, space and
        content hash, in the configured codec), `evict_batch` rows per transaction and at most
        `batches` batches (None: until none is left); its rows show `cold`, so re-activating it
        (`POST /semantic/spaces/{space}/activate`) needs no provider call for content that did
        not change. The vectors leave the store and the ANN index. Each batch re-checks, under
        the space's row lock, that the space is still retired: a re-activation or a retention
        expiry stops the move."""
        total, done = 0, 0
        while batches is None or done < batches:
            rows = self.store.keys_in_status(space, [SemanticStatus.READY], self.cfg.evict_batch, tenant)
            if not rows:
                break
            done += 1
            moved = self._evict_rows(rows, now, retired=(tenant, space))
            if moved is None:
                break  # no longer retired
            total += len(moved)
            # A ready row without a stored vector has no point in the index: it simply goes to
            # `none` (re-embedded if the space comes back), so this loop always ends.
            rest = [s.key for s in rows if s.key not in set(moved)]
            if rest:
                self.store.set_status(rest, space, SemanticStatus.NONE, only_from=[SemanticStatus.READY])
        if total:
            METRICS.evictions.inc(total)
            METRICS.retired_moved.inc(total)
            self._changed()
        return total

    def cool_retired(self, now: float, batches: int | None = 1) -> int:
        """The background move of retired spaces' vectors to the cold store (activation returns
        at once): `batches` batches per retired space per call (None: all), under a lease of its
        own, so however many processes call it (the backfill cadence of every `serve` thread and
        Celery beat's backfill task, the tick) one moves at a time. Also what became `ready` in
        a retired space after its retirement (a job in flight then)."""
        with self.store.lease(f"{LEASE}:retire") as leader:
            if not leader:
                return 0
            retired = [r for r in self.store.tenant_spaces() if r.state == "retired"]
            moved = sum(self.retire_space(r.tenant, r.space, now, batches) for r in retired)
            if moved or not retired:
                self._publish_retiring(retired)
            return moved

    def _publish_retiring(self, retired: list[SpaceInfo]) -> None:
        METRICS.retired_remaining.set(sum(self.store.count_in_status(r.tenant, r.space, SemanticStatus.READY)
                                          for r in retired))

    def retention_until(self, retired_at: float | None) -> float | None:
        keep = self.cfg.retired_retention_seconds
        return None if retired_at is None or keep <= 0 else retired_at + keep

    def expire_retired(self, now: float, report: TickReport | None = None) -> list[str]:
        """Retired spaces past their retention. The space is claimed first (`expiring`, checked
        again under its row lock in the store): a re-activation that commits before the claim
        wins and nothing is deleted; one that comes after is refused. Then cold files (a row
        without its file only re-embeds; a file without its row would never be pruned), the cold
        entries, the sidecar rows and the tenant's space. An expiry cut short resumes."""
        gone: list[str] = []
        keep = self.cfg.retired_retention_seconds
        for r in self.store.tenant_spaces():
            if r.state == "retired":
                until = self.retention_until(r.retired_at)
                if until is None or until > now:
                    continue
            elif r.state != "expiring":
                continue
            if not self.store.claim_expiry(r.tenant, r.space, now - keep if keep > 0 else float("-inf")):
                continue
            files = 0
            while hashes := self.store.cold_hashes(r.tenant, r.space, self.cfg.evict_batch):
                for h in hashes:
                    self.cold.delete(r.tenant, r.space, h)
                files += self.store.forget_cold(r.tenant, r.space, hashes)
            self.store.drop_space_vectors(r.tenant, r.space)
            self.store.forget_tenant_space(r.tenant, r.space)
            if files:
                METRICS.pruned.labels(store="retired").inc(files)
            log.info("retired space pruned", extra={"space": r.space, "cold_files": files,
                                                     "retired_at": r.retired_at})
            gone.append(f"{r.tenant}/{r.space}")
            if report is not None:
                report.note(r.tenant, "retiredExpired", r.space)
        if gone:
            self._changed()
        return gone

    def publish_gauges(self) -> None:
        states = self.store.coverage_all(self.cfg.space)
        total = sum(states.values())
        for state in ("none", "queued", "ready", "stale", "denied", "deferred", "failed", "cold"):
            METRICS.coverage_ratio.labels(state=state).set(states.get(state, 0) / total if total else 0.0)
        sizes = self.store.storage_report()
        METRICS.stored_bytes.labels(store="vectors").set(sizes["vectorBytes"])
        METRICS.stored_bytes.labels(store="cold").set(sizes["coldBytes"])

    def _changed(self) -> None:
        if self.after_change is not None:
            self.after_change()

    # -- operator decisions ----------------------------------------------------------------------

    def doc_state(self, key: DocKey, side: SidecarEntry | None) -> DocLifecycle:
        """What the scheduler knows and will do about one document (GET /semantic/status): the
        per-document counterpart of a collection's promotion reason and figures."""
        now = self.clock()
        u = self.store.doc_usage(key) or {}
        eager = (key.tenant, key.collection) in self.store.promoted()
        decayed_at, last_used, until = u.get("decayed_at"), u.get("last_used_at"), u.get("pinned_until")
        decay = 2.0 ** (((decayed_at or now) - now) / self.cfg.half_life_seconds)
        touches = (u.get("touches") or 0.0) * decay
        pinned = until if until is not None and until > now else None
        evictable = None
        if side is not None and side.status == SemanticStatus.READY and not eager:
            # the terms of Store.eviction_candidates: idle since its last use or embedding, not pinned
            used = max(last_used or 0.0, side.last_embedded_at or 0.0)
            hot = max(touches, (u.get("cooccur") or 0.0) * decay)
            evictable = max(used + self.cfg.evict_idle_seconds, self._last_pin_end(now, hot, pinned) or 0.0)
        return DocLifecycle(eager, last_used, round(touches, 3), pinned, evictable)

    def _last_pin_end(self, now: float, hot: float, pinned: float | None) -> float | None:
        """When the document's pin ends if it is not used again: `_pin` pins it for the TTL while
        its decayed count is at the bar, again once half the TTL has passed. Without this,
        `evictableAt` was the current pin's end, and every tick moved it on (seen: a document
        touched on four pages, TTL 10 s, stayed ready past three announced times). Assumes a
        re-pin as soon as it is due (the pins' page reaches the document within a pass, so a
        re-pin can come up to a pass later: 1M usage rows, 50 ticks)."""
        bar, ttl = self.cfg.doc_promote_touches, self.cfg.doc_promote_ttl_seconds
        if ttl <= 0 or hot < bar:
            return pinned
        cool = now + self.cfg.half_life_seconds * math.log2(hot / bar)  # the count falls below the bar
        end = pinned if pinned is not None else now + ttl  # the next tick pins it
        due = end - ttl / 2  # when the next re-pin is due; each one adds half the TTL
        if due < cool:
            end += math.ceil((cool - due) / (ttl / 2)) * (ttl / 2)
        return end

    def set_mode(self, tenant: str, collection: str, eager: bool) -> bool:
        now = self.clock()
        changed = self.store.set_collection_mode(
            CollectionMode(tenant, collection, "eager" if eager else "lazy", now, "manual", True, {}))
        if changed:
            METRICS.promotions.labels(action="promote" if eager else "demote").inc()
        return changed


# A stored cursor of another shape (none yet, another version's) starts the pass over.
def _row_cursor(stored: tuple[str, ...] | None) -> RowCursor | None:
    if stored is None or len(stored) != 4:
        return None
    tenant, collection, doc_id, space = stored
    return tenant, collection, doc_id, space


def _code_cursor(stored: tuple[str, ...] | None) -> ColdCode | None:
    if stored is None or len(stored) != 3:
        return None
    tenant, space, content_hash = stored
    return tenant, space, content_hash


def _hash_cursor(stored: tuple[str, ...] | None) -> CodeCursor | None:
    if stored is None or len(stored) != 3:
        return None
    tenant, content_hash, space = stored
    return tenant, content_hash, space


def _doc_cursor(stored: tuple[str, ...] | None) -> DocKey | None:
    if stored is None or len(stored) != 3:
        return None
    return DocKey(*stored)


def _seq_cursor(stored: tuple[str, ...] | None) -> int | None:
    """A change-log seq; anything else starts the pass over (as a malformed cursor does for every
    sweep) instead of failing the stage at every tick."""
    if stored is None or len(stored) != 1 or not stored[0].isdigit():
        return None
    return int(stored[0])


def _day_start(ts: float) -> float:
    return ts - ts % 86400.0
