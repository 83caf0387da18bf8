"""Backfills: rolling, budgeted passes over a tenant's documents (promotion backfill,
reindex, migration to a new space). A task is a row in the store with a cursor; each
step examines the next documents in key order, queues on the bulk lane those that need
embedding, and moves the cursor only past what it handled, so a restart resumes exactly there.

A step spends only what the tenant's per-minute bucket holds beyond the reads' share
(`BackfillLimits.reserve`: reads keep priority), and none while the queue is deeper than the
backpressure bound. A task whose model bills nothing (a local model) is on the admin lane
instead (services/core/admin_lane.py): not charged to the bucket, it keeps the tenant's bulk lane
a bounded depth ahead of the workers, which serve interactive jobs first. Neither kind queues
past the tenant's share of the queue (`tenant_jobs`).
Restoring an evicted vector from the cold store calls no provider and takes nothing from the
bucket (but does take a place in that share). Documents a policy keeps from the provider
(`denied`, `deferred`) are re-decided here, in the step, against the current policy: no job and
no provider call for a decision that stays the same.
"""

from __future__ import annotations

import logging
import time
import uuid
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace

from services.core.admin_lane import AdminLane
from services.core.backfill_rate import RATES
from shared.backpressure import Backpressure, TenantShare
from shared.metrics import METRICS
from shared.model import BackfillTask, Decision, DocKey, EmbedJob, SemanticStatus, SidecarEntry, StoredDoc
from shared.ports import BackfillStore, Budget, JobQueue, StoreOfRecord

log = logging.getLogger("vibe.backfill")
CURSOR_SEP = "\x1f"
EMBEDDABLE = (SemanticStatus.NONE, SemanticStatus.STALE, SemanticStatus.FAILED)
RECHECK = (SemanticStatus.DENIED, SemanticStatus.DEFERRED)


@dataclass(frozen=True)
class BackfillLimits:
    step_docs: int = 2000
    reserve: int = 50  # tokens of the per-minute bucket left for reads (one query's ceiling)
    backpressure: int = 20_000  # no step while this many jobs wait
    tenant_jobs: int = 0  # a tenant's step queues nothing past this many of its jobs (0: no bound)


class Backfills:
    def __init__(self, store: StoreOfRecord, queue: JobQueue, budget: Budget, decide: Callable[[StoredDoc], Decision],
                 limits: BackfillLimits, clock: Callable[[], float] = time.time, lane: AdminLane | None = None):
        self.store = store
        self.lane = lane  # None: every task is charged to the bucket
        self.queue = queue
        self.budget = budget
        self.decide = decide
        self.limits = limits
        self.clock = clock
        self.backpressure = Backpressure(queue, limits.backpressure)  # read at every run: once a tick
        self.share = TenantShare(queue, limits.tenant_jobs)  # read at every step

    def start(self, tenant: str, collection: str | None, space: str, kind: str, force: bool = False) -> BackfillTask:
        """A new task; an unfinished task for the same scope and space is replaced by it."""
        now = self.clock()
        for old in self.store.tasks(tenant, running_only=True):
            if old.collection == collection and old.space == space and old.kind == kind:
                self.store.update_task(old.id, old.cursor, old.examined, old.queued, "cancelled", now)
        task = BackfillTask(uuid.uuid4().hex, tenant, collection, space, kind, force, "", 0, 0,  # type: ignore[arg-type]
                            self.store.count_docs(tenant, collection), "running", now, now)
        self.store.create_task(task)
        return task

    def run(self) -> int:
        """One step of every running task; returns the jobs queued."""
        if self.backpressure.pressed():
            METRICS.budget_denied.labels(budget="backpressure").inc()
            return 0
        tasks = self.store.tasks(running_only=True)
        METRICS.backfill_remaining.set(sum(max(0, t.total - t.examined) for t in tasks))
        eager = self.store.promoted() if any(t.kind in ("promote", "rehydrate") for t in tasks) else set()
        return sum(self.step(t, eager) for t in tasks if self._still_wanted(t, eager))

    def _still_wanted(self, task: BackfillTask, eager: set[tuple[str, str]]) -> bool:
        """A promotion's backfill ends with the promotion. Without this, a collection demoted
        (by an operator or for idleness) went on being embedded on the bulk lane, spending the
        tenant's provider budget on vectors the next eviction sends to the cold store. Checked
        against the store at every step, so a demotion through any replica stops it.
        A migration ends with its space's building: activation cancels it after the cut-over
        commits, and a process killed in between left it running on what is now the active
        space, where it would have embedded the whole lazy corpus after a forced activation."""
        if task.kind == "promote" and (task.tenant, task.collection) not in eager:
            why = "the collection is no longer eager"
        elif task.kind == "migrate" and not any(r.space == task.space and r.state == "building"
                                                for r in self.store.tenant_spaces(task.tenant)):
            why = "the space is no longer being built"
        else:
            return True
        self.store.update_task(task.id, task.cursor, task.examined, task.queued, "cancelled", self.clock())
        METRICS.backfill_cancelled.labels(kind=task.kind).inc()
        log.info(f"backfill cancelled: {why}",
                 extra={"task": task.id, "kind": task.kind, "examined": task.examined, "queued": task.queued})
        return False

    def step(self, task: BackfillTask, eager: set[tuple[str, str]] | None = None) -> int:
        """One step of `task`; `eager`: the promoted collections (read from the store if None
        and the task needs them)."""
        if eager is None:
            eager = self.store.promoted() if task.kind == "rehydrate" else set()
        keys = self.store.keys_after(task.tenant, task.collection, task.cursor, self.limits.step_docs)
        now = self.clock()
        if not keys:
            self.store.update_task(task.id, task.cursor, task.examined, task.queued, "done", now)
            log.info("backfill done", extra={"task": task.id, "kind": task.kind, "queued": task.queued})
            return 0
        docs = self.store.get_docs(keys)
        sides = self._sidecars(keys, docs, task.space)
        scoped = self._scoped(task, keys)
        unmetered = self.lane is not None and self.lane.unmetered(task)
        if unmetered:
            assert self.lane is not None
            room = self.lane.room(self.queue, task.tenant)
        else:
            room = max(0, self.budget.available(task.tenant) - self.limits.reserve)
        # The tenant's share of the queue bounds every job of the step, rehydrations included: a
        # rollback restoring a whole space calls no provider, but filled the queue alone.
        jobs_room = self.share.room(task.tenant)
        todo: list[SidecarEntry] = []
        paid: list[SidecarEntry] = []  # the part of `todo` that calls the provider
        handled = len(keys)
        for i, k in enumerate(keys):
            side, doc = sides.get(k), docs.get(k)
            if scoped is not None and k not in scoped:
                continue  # a scoped migration leaves it to its first touch in the new space
            if doc is not None and side is not None and self._wants_embedding(task, doc, side, eager):
                if jobs_room is not None and len(todo) >= jobs_room:
                    handled = i  # the tenant's share is full: resume here once its jobs drain
                    METRICS.budget_denied.labels(budget="tenant_queue").inc()
                    break
                if not self._rehydrates(task, side):
                    if len(paid) >= room:
                        handled = i  # out of budget: resume at this document next step
                        break
                    paid.append(side)
                todo.append(side)
        granted = len(paid) if unmetered else self.budget.take(task.tenant, len(paid)) if paid else 0
        if granted < len(paid):  # another process spent the bucket meanwhile
            cut = todo.index(paid[granted])
            handled, todo = keys.index(todo[cut].key), todo[:cut]
        queued = self._queue(task, todo)
        if unmetered and paid:
            METRICS.backfill_unmetered.labels(kind=task.kind).inc(min(len(paid), queued))
        METRICS.backfill_examined.labels(kind=task.kind).inc(handled)
        last = keys[handled - 1] if handled else None
        cursor = task.cursor if last is None else f"{last.collection}{CURSOR_SEP}{last.doc_id}"
        done = handled == len(keys) and len(keys) < self.limits.step_docs
        state = "done" if done else "running"
        self.store.update_task(task.id, cursor, task.examined + handled, task.queued + queued, state, now)
        RATES.observe(replace(task, cursor=cursor, examined=task.examined + handled, queued=task.queued + queued,
                              state=state, updated_at=now))  # type: ignore[arg-type]
        return queued

    def _sidecars(self, keys: Sequence[DocKey], docs: dict[DocKey, StoredDoc],
                  space: str) -> dict[DocKey, SidecarEntry]:
        """Sidecar rows in the task's space; a new space has none yet (the migration embeds
        every document, not only those a sidecar lists)."""
        sides = self.store.sidecars(keys, space)
        missing = [SidecarEntry(k, space, SemanticStatus.NONE, docs[k].content_hash, updated_at=self.clock())
                   for k in keys if k in docs and k not in sides]
        if missing:
            self.store.ensure_sidecars(missing)
            sides = self.store.sidecars(keys, space)
        return sides

    def _scoped(self, task: BackfillTask, keys: Sequence[DocKey]) -> set[DocKey] | None:
        """The keys a migration with scope `ready` embeds (None: no scope, all of them): those
        `ready` or `queued` in the tenant's active space now, and those of eager collections.
        The same terms as `StoreOfRecord.migration_backlog`, which decides when it is done."""
        if task.kind != "migrate":
            return None
        rows = self.store.tenant_spaces(task.tenant)
        target = next((r for r in rows if r.space == task.space), None)
        source = next((r.space for r in rows if r.state == "active"), None)
        if target is None or target.scope == "all" or source is None:
            return None
        eager = {c for t, c in self.store.promoted() if t == task.tenant}
        held = self.store.sidecars([k for k in keys if k.collection not in eager], source)
        return ({k for k in keys if k.collection in eager}
                | {k for k, s in held.items() if s.status in (SemanticStatus.READY, SemanticStatus.QUEUED)})

    @staticmethod
    def _rehydrates(task: BackfillTask, side: SidecarEntry) -> bool:
        """Whether the job restores an evicted vector from the cold store: no provider call, so
        nothing from the bucket (as a touch does). A rollback of a space whose vectors went cold
        was paced at the per-minute bucket though it spends nothing. A forced task re-embeds."""
        return not task.force and side.status == SemanticStatus.NONE and side.cold_ref is not None

    def _wants_embedding(self, task: BackfillTask, doc: StoredDoc, side: SidecarEntry,
                         eager: set[tuple[str, str]]) -> bool:
        if side.status in EMBEDDABLE:
            if task.kind != "rehydrate" or side.cold_ref is not None or side.status == SemanticStatus.STALE:
                return True
            # A rollback restores what the space held: evicted vectors (no provider call) and
            # documents edited since that had one. A document it never embedded stays as a
            # write leaves it: embedded in an eager collection, on its first touch elsewhere.
            # Embedding those too made a lazy tenant's rollback embed its whole corpus.
            return (doc.key.tenant, doc.key.collection) in eager
        if side.status == SemanticStatus.READY:
            return task.force
        if side.status == SemanticStatus.DEFERRED and side.reason == "budget":
            # Refused for the daily cap: asked again (the cap may have been raised); what still
            # does not fit is deferred again by the handler's cap check, with no provider call.
            # Before, a reindex left them for midnight UTC whatever the cap now was.
            return task.kind == "reindex"
        if side.status in RECHECK:
            decision = self.decide(doc)
            if decision.action == "embed":
                return True
            status = SemanticStatus.DENIED if decision.action == "ignore" else SemanticStatus.DEFERRED
            if (status, decision.reason) != (side.status, side.reason):
                self.store.set_status([doc.key], side.space, status, decision.reason)
        return False

    def _queue(self, task: BackfillTask, todo: list[SidecarEntry]) -> int:
        if not todo:
            return 0
        by_status: dict[SemanticStatus, list[SidecarEntry]] = {}
        for s in todo:
            by_status.setdefault(s.status, []).append(s)
        moved: set[DocKey] = set()
        for status, rows in by_status.items():
            moved |= set(self.store.set_status([r.key for r in rows], task.space, SemanticStatus.QUEUED,
                                               only_from=[status]))
        purpose = {"promote": "eager", "migrate": "migration"}.get(task.kind, "backfill")
        jobs = [EmbedJob(s.key, task.space, s.content_hash, priority="bulk", fresh=task.force, purpose=purpose)
                for s in todo if s.key in moved]
        self.queue.enqueue(jobs)
        METRICS.backfill_queued.labels(kind=task.kind).inc(len(jobs))
        return len(jobs)


def progress(task: BackfillTask) -> dict[str, object]:
    """A task as admin endpoints show it."""
    pct = 100.0 if task.state == "done" else round(100.0 * task.examined / task.total, 2) if task.total else 0.0
    return {"id": task.id, "kind": task.kind, "collection": task.collection, "space": task.space,
            "force": task.force, "state": task.state, "examined": task.examined, "total": task.total,
            "queued": task.queued, "progressPct": min(100.0, pct), **RATES.figures(task)}


def with_state(task: BackfillTask, store: BackfillStore) -> BackfillTask:
    """The task as the store has it now."""
    return next((t for t in store.tasks(task.tenant) if t.id == task.id), replace(task))
