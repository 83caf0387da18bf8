"""The reconciler (a Celery beat task): sidecar rows stuck in `queued` are jobs nobody holds
any more (a message lost with its broker, a worker killed past the visibility timeout, an
enqueue refused while Redis was down). It re-enqueues them; jobs still pending in the
dedupe set are left alone, so a long but healthy backlog is not sent twice. A stuck row that
no job can finish is repaired instead (services/worker/repair.py, shared with a process's
start): re-enqueued, it would stay `queued` for good or be embedded into a space nobody reads.

A Redis lock (SET NX PX, not released early) makes it run at most once per interval however
many schedulers send the task."""

from __future__ import annotations

import uuid

from services.core.repair import reconcile_pass
from shared.adapters.celery_queue import CeleryQueue
from shared.config import Settings
from shared.metrics import METRICS
from shared.ports import StoreOfRecord
from shared.spaces import SpaceDirectory

LOCK = "vibe:lock:reconcile"


def lock_ms(settings: Settings) -> int:
    return max(500, int(settings.reconcile_interval_seconds * 900))


def reconcile(store: StoreOfRecord, queue: CeleryQueue, settings: Settings) -> dict[str, int]:
    if not queue.try_lock(LOCK, uuid.uuid4().hex, lock_ms(settings)):
        METRICS.reconciler_runs.labels(outcome="locked").inc()
        return {"skipped": 1}
    return reconcile_pass(store, SpaceDirectory(store, settings.space), queue, settings.reconcile_stuck_seconds,
                          settings.reconcile_batch)
