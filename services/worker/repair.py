"""`queued` sidecar rows that no job can finish (issue 11), repaired instead of re-enqueued.

Two callers re-enqueue rows whose job is lost: the reconciler (a Celery beat task, for rows
stuck past `VIBE_RECONCILE_STUCK_SECONDS`) and a process's start (`Container.requeue_pending`,
for every row a previous run left `queued`: the embedded profile has no reconciler). Both pass
the rows through `repair_stuck` first, so the two cannot drift apart. This module imports no
Celery: the embedded profile never loads the distributed clients.
"""

from __future__ import annotations

from collections.abc import Sequence

from shared.metrics import METRICS
from shared.model import SemanticStatus, SidecarEntry
from shared.ports import StoreOfRecord
from shared.spaces import Spaces


def repair_stuck(store: StoreOfRecord, spaces: Spaces, rows: Sequence[SidecarEntry], stuck_before: float,
                 now: float) -> list[SidecarEntry]:
    """Repair the rows no job can finish and return the others (to re-enqueue). Rows of a
    document that is gone or of content it no longer has (left by an earlier bug) are fixed in
    the store (`repair_queued`, which re-checks that a row is still `queued` since before
    `stuck_before`, so a write committed meanwhile wins): the handler drops such a job, so the
    row would stay `queued` and, oldest first, fill every batch. Rows of a space that is not the
    tenant's active or building one (retired, being removed, or never the tenant's: `live()`
    lists every tenant's spaces and the configured one) go back to `none`, as a re-activation
    would put them (`realign_space`): embedding them is a provider call for a space nobody
    reads. Counted in `vibe_reconciler_repaired_total{reason}`."""
    reads = {tenant: _reads(spaces, tenant) for tenant in {r.key.tenant for r in rows}}
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


def _reads(spaces: Spaces, tenant: str) -> set[str]:
    """The spaces a job of the tenant may embed into: its active one and any it is building."""
    active, building = spaces.of(tenant)
    return {active, *building}
