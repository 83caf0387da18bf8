"""Collections' modes: the tick promotes collections whose window saw enough queries or hits,
demotes idle ones, and starts a backfill for each new eager collection and for any eager
collection or building space with documents still to embed; an operator's manual decision
(`set_mode`) stands until an operator changes it."""

from __future__ import annotations

from services.core.lifecycle.base import LifecycleBase
from services.core.lifecycle.model import TickReport
from services.core.promotion import decide_collections
from shared.metrics import METRICS
from shared.model import CollectionMode, SpaceInfo


class CollectionModes(LifecycleBase):
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
        without this the migration would finish and activation refuse with "documents still to
        embed" for good."""
        running = {(t.tenant, t.space) for t in self.store.tasks(running_only=True)}
        for sp in self.store.tenant_spaces():
            if sp.state != "building" or (sp.tenant, sp.space) in running:
                continue
            left = self.migration_backlog(sp)
            if left["none"] or left["stale"]:
                self.backfills.start(sp.tenant, None, sp.space, "migrate")
                r.backfills_started += 1

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

    def set_mode(self, tenant: str, collection: str, eager: bool) -> bool:
        now = self.clock()
        changed = self.store.set_collection_mode(
            CollectionMode(tenant, collection, "eager" if eager else "lazy", now, "manual", True, {}))
        if changed:
            METRICS.promotions.labels(action="promote" if eager else "demote").inc()
        return changed
