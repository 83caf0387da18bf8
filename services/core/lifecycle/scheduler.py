"""The lifecycle scheduler's tick: every `VIBE_SCHEDULER_INTERVAL_SECONDS`, under a store lease
(one leader however many processes run it: `serve` threads, Celery beat tasks), each stage on
its own (the modules beside this one hold them):

1. collections: promote busy ones, demote idle ones, backfill eager collections and building
   spaces with documents still to embed (collection_modes.py);
2. pins: documents touched often or found beside pinned ones outlive the idle bound (pins.py);
3. eviction: vectors idle for `VIBE_EVICT_IDLE_SECONDS` move to the cold store, a page of the
   sidecar per tick (eviction.py);
4. sweeps: orphan vectors and cold entries, old usage, cold copies of rehydrated vectors, cold
   orphans, rows of gone documents, the change log, the provider-call ledger (sweeps.py);
   retired spaces' vectors to the cold store, and their expiry (retired.py);
5. budget-refused documents of past days go back to the lazy path;
6. coverage and storage gauges, paced to a small share of real time.
Backfill steps run on their own, shorter cadence (`run_backfills`), and so does the move of a
retired space's vectors to the cold store. The clock is injected, so every decision can be
replayed over simulated days (tests, `bench lifecycle`).
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from typing import TypeVar

from services.core.lifecycle.base import LEASE
from services.core.lifecycle.collection_modes import CollectionModes
from services.core.lifecycle.cutover import Cutover
from services.core.lifecycle.model import TickReport
from services.core.lifecycle.pins import Pins
from services.core.lifecycle.retired import RetiredSpaces
from services.core.lifecycle.sweeps import Sweeps
from shared.metrics import METRICS
from shared.model import BackfillTask

log = logging.getLogger("vibe.lifecycle")

T = TypeVar("T")
GAUGE_SHARE = 0.02  # the share of real time the coverage and size gauges may take (_paced_gauges)


class Lifecycle(CollectionModes, Pins, RetiredSpaces, Sweeps, Cutover):
    """The scheduler the embedded process and the Celery workers both run: every concern's
    stage, and the entry points the front doors call."""

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
        every backfill step holds. Run beside the scheduler's step of the same task, both would
        read one cursor: the later write of the task's counters would lose the other's (a
        reindex that answered `queued: 150` would show `queued: 0` once done), and both would
        take the bucket for the same documents. With the lease busy, the scheduler's next run
        (woken now) steps it."""
        with self.store.lease(f"{LEASE}:backfill") as leader:
            return self.backfills.step(task) if leader else 0

    def _tick(self, now: float) -> TickReport:
        """Every stage of a tick, each on its own: a stage that raises is logged, counted
        (`vibe_scheduler_stage_errors_total{stage}`) and named in GET /semantic/scheduler, and
        the others still run, so one failing query cannot stop promotion, pinning, eviction and
        pruning for every tenant, tick after tick."""
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

    def _paced_gauges(self) -> None:
        """`publish_gauges` at most `GAUGE_SHARE` of the time: its aggregates read whole tables
        (2.1 s for coverage on SQLite over 1M sidecar rows, 0.3-0.4 s for stored bytes), every
        tick, for figures a dashboard samples anyway. A pass that took `d` seconds is next run
        `d / GAUGE_SHARE` later, so a small store still refreshes every tick and a large one
        spends at most ~2% of a core on them. Paced on the process's monotonic clock, not the
        scheduler's (simulated in bench lifecycle): the cost is real time. The decisions of a
        tick never wait for it."""
        started = self.monotonic()
        if started < self._gauges_due:
            return
        self.publish_gauges()
        took = self.monotonic() - started
        self._gauges_due = started + took / GAUGE_SHARE

    def publish_gauges(self) -> None:
        states = self.store.coverage_all(self.cfg.space)
        total = sum(states.values())
        for state in ("none", "queued", "ready", "stale", "denied", "deferred", "failed", "cold"):
            METRICS.coverage_ratio.labels(state=state).set(states.get(state, 0) / total if total else 0.0)
        sizes = self.store.storage_report()
        METRICS.stored_bytes.labels(store="vectors").set(sizes["vectorBytes"])
        METRICS.stored_bytes.labels(store="cold").set(sizes["coldBytes"])


def _day_start(ts: float) -> float:
    return ts - ts % 86400.0
