"""`queued` sidecar rows that no job can finish, repaired instead of re-enqueued.

Three callers re-enqueue rows whose job is lost: the reconciler (a Celery beat task, for rows
stuck past `VIBE_RECONCILE_STUCK_SECONDS`), an embedded process's start (every row a previous
run left `queued`) and the embedded scheduler thread every `VIBE_RECONCILE_INTERVAL_SECONDS`
(rows stuck past the same bound while the process runs: a batch that failed `max_attempts`
times leaves its rows `queued`). All pass the rows through `repair_stuck` first, so they cannot
drift apart. This module imports no Celery: the embedded profile never loads the distributed
clients.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from typing import Protocol, runtime_checkable

from shared.metrics import METRICS
from shared.model import EmbedJob, SemanticStatus, SidecarEntry
from shared.ports import JobQueue, StoreOfRecord
from shared.spaces import Spaces, embedding_spaces

log = logging.getLogger("vibe.reconciler")


def repair_stuck(store: StoreOfRecord, spaces: Spaces, rows: Sequence[SidecarEntry], stuck_before: float,
                 now: float) -> list[SidecarEntry]:
    """Repair the rows no job can finish and return the others (to re-enqueue). Rows of a
    document that is gone or of content it no longer has (found in stores an older release wrote) are fixed in
    the store (`repair_queued`, which re-checks that a row is still `queued` since before
    `stuck_before`, so a write committed meanwhile wins): the handler drops such a job, so the
    row would stay `queued` and, oldest first, fill every batch. Rows of a space that is not the
    tenant's active or building one (retired, being removed, or never the tenant's: `live()`
    lists every tenant's spaces and the configured one) go back to `none`, as a re-activation
    would put them (`realign_space`): embedding them is a provider call for a space nobody
    reads. Counted in `vibe_reconciler_repaired_total{reason}`."""
    reads = {tenant: set(embedding_spaces(spaces, tenant)) for tenant in {r.key.tenant for r in rows}}
    by_space: dict[str, list[SidecarEntry]] = {}
    for r in rows:
        by_space.setdefault(r.space, []).append(r)
    keep: list[SidecarEntry] = []
    for space, group in sorted(by_space.items()):
        fixed = store.repair_queued(space, [r.key for r in group], stuck_before, now)
        done = {k for keys in fixed.values() for k in keys}
        dead = [r.key for r in group if r.key not in done and space not in reads[r.key.tenant]]
        fixed["space_not_live"] = store.set_status(dead, space, SemanticStatus.NONE,
                                                   only_from=[SemanticStatus.QUEUED]) if dead else []
        for reason, keys in fixed.items():
            METRICS.reconciler_repaired.labels(reason=reason).inc(len(keys))
        done.update(dead)  # one no longer `queued` has moved on: not re-enqueued either
        keep += [r for r in group if r.key not in done]
    return keep


def requeue_stuck(store: StoreOfRecord, spaces: Spaces, queue: JobQueue, stuck_for: float = 0.0,
                  limit: int = 1_000_000) -> dict[str | None, dict[str, int]]:
    """Every `queued` row of a live space with no progress for `stuck_for` seconds (0: every one,
    at start) is repaired or re-enqueued on the bulk lane. A row whose job the queue still holds
    is not sent twice (both queues dedupe by job key).
    `now` is taken before the rows are read: the store's re-check leaves a row that another
    process on the same store rewrites meanwhile. Returns what it found and did by tenant, and
    in all (key None)."""
    now = store.clock()
    cutoff = now - stuck_for
    out: dict[str | None, dict[str, int]] = {None: {"stuck": 0, "requeued": 0, "repaired": 0}}
    for space in sorted(spaces.live()):
        rows = [r for r in store.keys_in_status(space, [SemanticStatus.QUEUED], limit=limit)
                if stuck_for <= 0 or r.updated_at < cutoff]
        keep = repair_stuck(store, spaces, rows, cutoff, now)
        kept = {r.key for r in keep}
        by_tenant: dict[str, list[SidecarEntry]] = {}
        for r in rows:
            by_tenant.setdefault(r.key.tenant, []).append(r)
        for tenant, mine in sorted(by_tenant.items()):
            jobs = [EmbedJob(r.key, space, r.content_hash, priority="bulk", purpose="backfill")
                    for r in mine if r.key in kept]
            found = {"stuck": len(mine), "requeued": queue.enqueue(jobs), "repaired": len(mine) - len(jobs)}
            for who in (tenant, None):
                row = out.setdefault(who, {"stuck": 0, "requeued": 0, "repaired": 0})
                for k, v in found.items():
                    row[k] += v
    return out


@runtime_checkable
class _Recorded(Protocol):
    def record_reconcile(self, tenant: str | None, at: float, stuck: int, requeued: int) -> None: ...


def reconcile_pass(store: StoreOfRecord, spaces: Spaces, queue: JobQueue, stuck_for: float,
                   limit: int) -> dict[str, int]:
    """One reconciler pass, whichever runs it (the Celery beat task under its lock, an embedded
    process's start and its scheduler thread): counted in `vibe_reconciler_runs_total` and
    `..._requeued_total`, and recorded in the queue for /semantic/lag, in all and per tenant."""
    now = store.clock()
    found = requeue_stuck(store, spaces, queue, stuck_for, limit)
    total = found[None]
    if isinstance(queue, _Recorded):
        for tenant, row in found.items():
            queue.record_reconcile(tenant, now, stuck=row["stuck"], requeued=row["requeued"])
    METRICS.reconciler_requeued.inc(total["requeued"])
    METRICS.reconciler_runs.labels(outcome="ran").inc()
    if total["stuck"]:
        log.info("reconciled", extra=total)
    return total
