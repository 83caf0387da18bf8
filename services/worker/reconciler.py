"""The reconciler (a Celery beat task): sidecar rows stuck in `queued` are jobs nobody holds
any more (a message lost with its broker, a worker killed past the visibility timeout, an
enqueue refused while Redis was down). It re-enqueues them; jobs still pending in the
dedupe set are left alone, so a long but healthy backlog is not sent twice. A stuck row that
no job can finish is repaired instead (services/worker/repair.py, shared with a process's
start): re-enqueued, it would stay `queued` for good or be embedded into a space nobody reads.

A Redis lock (SET NX PX, not released early) makes it run at most once per interval however
many schedulers send the task."""

from __future__ import annotations

import logging
import uuid

from services.worker.repair import repair_stuck
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


def reconcile(store: StoreOfRecord, queue: CeleryQueue, settings: Settings) -> dict[str, int]:
    if not queue.try_lock(LOCK, uuid.uuid4().hex, lock_ms(settings)):
        METRICS.reconciler_runs.labels(outcome="locked").inc()
        return {"skipped": 1}
    now = store.clock()
    stuck = stuck_rows(store, settings, now)
    directory = SpaceDirectory(store, settings.space)
    cutoff = now - settings.reconcile_stuck_seconds
    requeue = {(r.key, r.space) for r in repair_stuck(store, directory, stuck, cutoff, now)}
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
