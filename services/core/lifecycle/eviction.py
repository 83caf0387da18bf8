"""Eviction: vectors of lazy collections unused for `evict_idle_seconds` move to the cold store
(keyed by tenant, space and content hash, in the configured codec), so the ANN index drops them
through the change log and the next touch rehydrates without a provider call. The tick moves a
page of the sidecar from a cursor in the store (`evict_page`); `POST /semantic/evict` moves
everything idle at once (`evict`)."""

from __future__ import annotations

from services.core.lifecycle.base import LifecycleBase
from services.core.lifecycle.cursors import row_cursor
from services.core.lifecycle.model import TickReport
from shared.metrics import METRICS
from shared.model import DocKey, SidecarEntry, flatten

EVICT_CURSOR = "evict"  # the store's name of the eviction page's cursor (`sweep_cursor`)
# The tick's eviction page, and its pins' page of usage rows, in `evict_batch`es of rows
# (`evict_page`, `Pins._pin`): a row costs ~2.5 us to examine (SQLite and PostgreSQL alike), so
# 20,000 at the defaults take ~50 ms a tick and a pass over 1M rows 50 ticks (50 min at the
# default interval); one batch would take 10 ms a tick and 3.3 h a pass.
EVICT_PAGE_BATCHES = 4


class Eviction(LifecycleBase):
    def evict(self, now: float, idle_seconds: float | None = None, tenant: str | None = None,
              collection: str | None = None) -> int:
        """Move every unused vector of lazy collections (of the tenant and collection, if given)
        to the cold store now, `evict_batch` rows per transaction: `POST /semantic/evict`. The
        tick goes by pages instead (`evict_page`)."""
        idle = self.cfg.evict_idle_seconds if idle_seconds is None else idle_seconds
        moved: list[DocKey] = []
        for space in self._evicted_spaces():
            while rows := self.store.eviction_candidates(space, now - idle, now, self.cfg.evict_batch,
                                                          tenant, collection):
                done = self._evict_rows(rows, now) or []
                moved += done
                if len(rows) < self.cfg.evict_batch or not done:
                    break
        return self._evicted(moved)

    def evict_page(self, now: float, report: TickReport | None = None) -> int:
        """The tick's eviction: of `EVICT_PAGE_BATCHES` x `evict_batch` sidecar rows from where the
        last tick stopped (the store's cursor, as the sweeps'), the idle ones go cold, `evict_batch`
        per transaction; a pass that reaches the end starts over, and a store that fits in a page
        is examined whole at every tick. Reading every `ready` row of each space per tick (as
        `evict` does) would cost 0.3-1.8 s at 1M rows, to find none in the steady state; by
        pages an idle vector goes cold up to a pass later (1M rows: 50 ticks, 50 min at the
        default interval), against an idle bound of days. `report` counts the evictions per
        tenant."""
        rows, after = self.store.eviction_page(self._evicted_spaces(), now - self.cfg.evict_idle_seconds, now,
                                               row_cursor(self.store.sweep_cursor(EVICT_CURSOR)),
                                               EVICT_PAGE_BATCHES * self.cfg.evict_batch)
        moved: list[DocKey] = []
        for i in range(0, len(rows), self.cfg.evict_batch):
            moved += self._evict_rows(rows[i:i + self.cfg.evict_batch], now) or []
        self.store.set_sweep_cursor(EVICT_CURSOR, after)
        return self._evicted(moved, report)

    def _evicted_spaces(self) -> list[str]:
        """Where eviction looks: every live space, or the configured one."""
        return sorted(self.spaces() if self.spaces is not None else {self.cfg.space})

    def _evicted(self, moved: list[DocKey], report: TickReport | None = None) -> int:
        if report is not None:
            for k in moved:
                report.note(k.tenant, "evicted")
        if moved:
            METRICS.evictions.inc(len(moved))
            self._changed()
        return len(moved)

    def _evict_rows(self, rows: list[SidecarEntry], now: float,
                    retired: tuple[str, str] | None = None) -> list[DocKey] | None:
        """Move `rows` to the cold store in one store transaction (of the retired space
        `retired`, if given: then None when the space is no longer retired)."""
        entries: list[tuple[SidecarEntry, str, int]] = []
        written: dict[tuple[str, str, str], tuple[str, int]] = {}
        for s in rows:
            where = (s.key.tenant, s.space, s.content_hash)
            if where not in written:
                vecs = self.store.vector_for_hash(s.key.tenant, s.content_hash, s.space)
                if vecs is None:
                    continue  # ready without a vector: /semantic/mismatch reports it; never guess
                written[where] = self.cold.put(s.key.tenant, s.space, s.content_hash, flatten(vecs))
            ref, nbytes = written[where]
            entries.append((s, ref, nbytes))
        if retired is None:
            moved = set(self.store.evict(entries, self.cfg.codec, now))
        else:
            out = self.store.evict_retired(*retired, entries, self.cfg.codec, now)
            moved = set(out or ())
        # A row used or rewritten meanwhile was not evicted: a file no cold entry records would
        # never be pruned, so it goes now (unless another row of that content was evicted).
        for s, _, _ in entries:
            if s.key not in moved and self.store.cold_entry(s.key.tenant, s.content_hash, s.space) is None:
                self.cold.delete(s.key.tenant, s.space, s.content_hash)
        return None if retired is not None and out is None else list(moved)
