"""Starting a backfill from a request (reindex, promote, migrate, rehydrate): the answer
carries the task after its first step."""

from __future__ import annotations

from services.container import Container
from services.core.backfill import progress, with_state


def _start_backfill(c: Container, tenant: str, collection: str | None, kind: str, force: bool,
                    space: str | None = None) -> dict[str, object]:
    """Create the task and run its first step now, so small collections need no wait."""
    backfills = c.lifecycle.backfills
    task = backfills.start(tenant, collection, space or c.spaces.active(tenant), kind, force)
    queued = c.lifecycle.first_step(task)
    # the answer shows the task after its first step: read before the scheduler, woken to go on,
    # can take a second one
    out = {"queued": queued, "task": progress(with_state(task, c.store))}
    c.scheduler.wake()
    return out
