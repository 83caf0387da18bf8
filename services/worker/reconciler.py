"""The reconciler (a Celery beat task): sidecar rows stuck in `queued` are jobs nobody holds
any more (a message lost with its broker, a worker killed past the visibility timeout, an
enqueue refused while Redis was down). It re-enqueues them; jobs still pending in the
dedupe set are left alone, so a long but healthy backlog is not sent twice. A stuck row that
no job can finish is repaired instead (`repair`): re-enqueued, it would stay `queued` for good
or be embedded into a space nobody reads.

A Redis lock (SET NX PX, not released early) makes it run at most once per interval however
many schedulers send the task."""

from __future__ import annotations

import logging
import uuid

from shared.adapters.celery_queue import CeleryQueue
from shared.config import Settings
from shared.metrics import METRICS
from shared.model import EmbedJob, SemanticStatus, SidecarEntry
from shared.ports import StoreOfRecord
from shared.spaces import SpaceDirectory

log = logging.getLogger("vibe.reconciler")
LOCK = "vibe:lock:reconcile"


def lock_ms(settings: Settings) -> int:
    return max(500, int(settings.reconcile_interval_seconds * 900))


def stuck_rows(store: StoreOfRecord, settings: Settings, now: float) -> list[SidecarEntry]:
    cutoff = now - settings.reconcile_stuck_seconds
    rows: list[SidecarEntry] = []
    for space in sorted(SpaceDirectory(store, settings.space).live()):  # spaces in migration too
        rows += store.keys_in_status(space, [SemanticStatus.QUEUED], limit=settings.reconcile_batch)
    return [r for r in rows if r.updated_at < cutoff]


def repair(store: StoreOfRecord, settings: Settings, rows: list[SidecarEntry], now: float) -> list[SidecarEntry]:
    """Repair the stuck rows no job can finish and return the others (to re-enqueue). Rows of a
    document that is gone or of content it no longer has (left by an earlier bug) are fixed in
    the store (`repair_queued`): the handler drops such a job, so the row would stay `queued`
    and, oldest first, fill every batch. Rows of a space that is not the tenant's active or
    building one (retired, being removed, or never the tenant's: `live()` lists every tenant's
    spaces and the configured one) go back to `none`, as a re-activation would put them
    (`realign_space`): embedding them is a provider call for a space nobody reads."""
    directory = SpaceDirectory(store, settings.space)
    reads = {tenant: _reads(directory, tenant) for tenant in {r.key.tenant for r in rows}}
    cutoff = now - settings.reconcile_stuck_seconds
    by_space: dict[str, list[SidecarEntry]] = {}
    for r in rows:
        by_space.setdefault(r.space, []).append(r)
    keep: list[SidecarEntry] = []
    for space, group in sorted(by_space.items()):
        fixed = store.repair_queued(space, [r.key for r in group], cutoff, now)
        done = {k for keys in fixed.values() for k in keys}
        dead = [r.key for r in group if r.key not in done and space not in reads[r.key.tenant]]
        fixed["space_not_live"] = store.set_status(dead, space, SemanticStatus.NONE,
                                                   only_from=[SemanticStatus.QUEUED]) if dead else []
        for reason, keys in fixed.items():
            METRICS.reconciler_repaired.labels(reason=reason).inc(len(keys))
        done.update(dead)  # one no longer `queued` has moved on: not re-enqueued either
        keep += [r for r in group if r.key not in done]
    return keep


def _reads(directory: SpaceDirectory, tenant: str) -> set[str]:
    """The spaces a job of the tenant may embed into: its active one and any it is building."""
    active, building = directory.of(tenant)
    return {active, *building}


def reconcile(store: StoreOfRecord, queue: CeleryQueue, settings: Settings) -> dict[str, int]:
    if not queue.try_lock(LOCK, uuid.uuid4().hex, lock_ms(settings)):
        METRICS.reconciler_runs.labels(outcome="locked").inc()
        return {"skipped": 1}
    now = store.clock()
    stuck = stuck_rows(store, settings, now)
    requeue = {(r.key, r.space) for r in repair(store, settings, stuck, now)}
    by_tenant: dict[str, list[SidecarEntry]] = {}
    for r in stuck:
        by_tenant.setdefault(r.key.tenant, []).append(r)
    total = {"stuck": len(stuck), "requeued": 0, "repaired": len(stuck) - len(requeue)}
    for tenant, rows in by_tenant.items():
        jobs = [EmbedJob(r.key, r.space, r.content_hash, priority="bulk") for r in rows if (r.key, r.space) in requeue]
        sent = queue.enqueue(jobs)
        queue.record_reconcile(tenant, now, stuck=len(rows), requeued=sent)
        total["requeued"] += sent
    queue.record_reconcile(None, now, stuck=total["stuck"], requeued=total["requeued"])
    METRICS.reconciler_requeued.inc(total["requeued"])
    METRICS.reconciler_runs.labels(outcome="ran").inc()
    if total["stuck"]:
        log.info("reconciled", extra=total)
    return total
