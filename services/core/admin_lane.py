"""The admin lane: how fast explicit background work (reindex, promotion backfill, migration,
rollback) may queue embeddings.

The tenant's per-minute bucket exists to cap what a provider bills and to keep a share of the
embedder for reads. For a model that bills nothing (a local model, the hash test model) the cost
is CPU, and the bucket (200 documents a minute by default) held a 5,000-document reindex to 26
minutes on a model that embeds about 100 documents a second. Such a backfill is paced by the
queue instead: each step tops the tenant's bulk lane up to `ahead` jobs, and the workers take
the bulk lane only when no interactive job waits (shared/adapters/memory_queue.py, the Celery
lanes), while the serving process's pipeline yields to first answers (shared/foreground.py).

A paid provider (anything not `local:` or `hash:`, and any space whose model cannot be read) stays
on the bucket, and the daily token cap (`VIBE_TENANT_DAILY_TOKENS`) is charged by the embed
handler for every provider call, admin or not.
"""

from __future__ import annotations

from dataclasses import dataclass

from shared.model import BackfillTask
from shared.ports import JobQueue, SpaceStore

FREE_MODEL_KINDS = ("local:", "hash:")


def billed(model_id: str | None) -> bool:
    """Whether embedding with `model_id` may cost money: a model id starts with its kind
    (`local:`, `hash:`, `openai:`); an unknown or missing one counts as billed."""
    return model_id is None or not model_id.startswith(FREE_MODEL_KINDS)


@dataclass(frozen=True)
class AdminLane:
    """Which backfills skip the per-minute bucket, and how far ahead of the workers they queue."""

    store: SpaceStore
    default_space: str
    unmetered_local: bool = True
    ahead: int = 512

    def model_of(self, task: BackfillTask) -> str | None:
        """The model of the task's space: the operator's for the configured space, the tenant's
        own row for a space a migration made."""
        binding = (self.store.space_binding(task.space) if task.space == self.default_space
                   else self.store.tenant_space_binding(task.tenant, task.space))
        return binding[0] if binding else None

    def unmetered(self, task: BackfillTask) -> bool:
        """Whether the task's provider calls skip the per-minute bucket: a forced re-embed too,
        as long as the model bills nothing."""
        return self.unmetered_local and not billed(self.model_of(task))

    def room(self, queue: JobQueue, tenant: str) -> int:
        """Jobs an unmetered step may queue now: what keeps the tenant's bulk lane `ahead` deep
        (enough for the workers between two steps, little enough that a cancelled or superseded
        task leaves a short tail)."""
        depth = queue.depth(tenant)
        if depth.get("unreachable"):
            return 0  # the queue cannot say how deep it is: queue nothing rather than flood it
        return max(0, self.ahead - int(depth.get("bulk", 0)) - int(depth.get("inflight", 0)))
