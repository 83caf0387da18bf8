"""The tick's housekeeping, each a bounded page from a cursor the store keeps (so a restart, or
another process taking the lease, goes on where the pass stopped): vectors and cold entries
whose content no document has any more, old usage and ledger rows, cold copies of rehydrated
vectors, cold codes no cold entry references (crash leftovers), sidecar rows of documents that
are gone, and change-log entries a later one superseded."""

from __future__ import annotations

import logging

from services.core.lifecycle.base import LifecycleBase
from services.core.lifecycle.cursors import ColdCode, code_cursor, hash_cursor, row_cursor, seq_cursor
from services.core.lifecycle.model import TickReport
from shared.metrics import METRICS

log = logging.getLogger("vibe.lifecycle")

# The store's names of the sweeps' cursors (`sweep_cursor`)
ORPHANS_CURSOR = "cold_orphans"
GONE_CURSOR = "gone_rows"
VECTORS_CURSOR = "orphan_vectors"
COLD_CURSOR = "orphan_cold"
COPIES_CURSOR = "cold_copies"
CHANGES_CURSOR = "change_log"
# The (tenant, space) pairs a tick's cold-orphan sweep visits at most, read as one page
# (`known_spaces_page`), beside its `evict_batch` codes: each pair costs a query of the cold store
# even when empty, so a tick's cost follows this, not the tenants. A pass over 10,000 tenants'
# pairs takes 50 ticks (50 min at the default interval), for leftovers of crashes.
SPACES_PAGE = 200
CHANGE_PAGES = 10  # change-log pages examined a tick (compact_change_log): ~30 ms SQLite, ~115 ms PostgreSQL
LEDGER_PAGES = 4  # ledger deletes of `evict_batch` rows a tick at most (prune_ledger)


class Sweeps(LifecycleBase):
    def prune(self, now: float) -> tuple[int, int]:
        """Vectors and cold entries of content no document has any more (edited away, deleted),
        `evict_batch` of each examined per tick from where the last tick stopped: a pass over
        both tables each tick, with a document lookup per row, would cost 1-2 s at 1M vectors to
        find nothing."""
        removed, after = self.store.prune_orphan_vectors(hash_cursor(self.store.sweep_cursor(VECTORS_CURSOR)),
                                                         self.cfg.evict_batch)
        self.store.set_sweep_cursor(VECTORS_CURSOR, after)
        cold, after = self.store.prune_orphan_cold(hash_cursor(self.store.sweep_cursor(COLD_CURSOR)),
                                                   self.cfg.evict_batch)
        self.store.set_sweep_cursor(COLD_CURSOR, after)
        for tenant, chash, space, _ref in cold:
            self.cold.delete(tenant, space, chash)
        if removed:
            METRICS.pruned.labels(store="vectors").inc(removed)
        if cold:
            METRICS.pruned.labels(store="cold").inc(len(cold))
        self.store.prune_usage(now - self.cfg.usage_retention_seconds)
        return removed, len(cold)

    def prune_ledger(self, now: float) -> int:
        """Provider-call ledger rows older than the retention go, a bounded number a tick (the
        delete holds the write lock): a backlog, say after the retention was shortened, drains
        over ticks instead of stalling one."""
        if self.ledger is None:
            return 0
        before, gone = now - self.cfg.ledger_retention_seconds, 0
        for _ in range(LEDGER_PAGES):
            n = self.ledger.prune_ledger(before, self.cfg.evict_batch)
            gone += n
            if n < self.cfg.evict_batch:
                break
        return gone

    def drop_cold_copies(self) -> int:
        """A rehydrated vector is back in the store: its cold copy goes (row, then file), since
        the next eviction writes it again and keeping it stores the vector twice. An eviction of
        the same content racing this at worst loses its file: the next touch then re-embeds.
        `evict_batch` cold entries examined per tick from the store's cursor, like `prune`."""
        gone, after = self.store.prune_cold_copies(hash_cursor(self.store.sweep_cursor(COPIES_CURSOR)),
                                                   self.cfg.evict_batch)
        self.store.set_sweep_cursor(COPIES_CURSOR, after)
        for tenant, chash, space, _ref in gone:
            self.cold.delete(tenant, space, chash)
        if gone:
            METRICS.pruned.labels(store="cold_copies").inc(len(gone))
        return len(gone)

    def sweep_cold_orphans(self) -> int:
        """Delete cold codes that no cold entry references; `evict_batch` codes are examined per
        call, resuming where the last one stopped. A process killed between an eviction's
        `cold.put` and the store's commit (`_evict_rows`, also for a retired space), or between a
        prune's or a dropped cold copy's row deletion and its `cold.delete`, leaves such a code,
        and nothing else would ever remove it.

        Two phases, because the first window is also every eviction in flight: its code is
        written before the transaction that records the cold entry commits, so a code seen
        unreferenced once may just not be committed yet. A code goes only if it was unreferenced
        at this process's previous sweep (a tick interval ago at least, far longer than an
        eviction batch takes) and is still unreferenced when checked again right before its
        delete. Left: an eviction of the same content that writes the code again between that
        last check and the delete loses it, and its next touch re-embeds (as in
        `drop_cold_copies`).

        Where the sweep stopped is in the store, so a restarted scheduler, or another process
        taking the lease, goes on from there: a fleet that restarted more often than a pass
        takes would otherwise never reach its tail. The candidates stay in this process's
        memory, on purpose: several processes tick on their own phases under the one lease
        (each `serve`, any Celery worker), so candidates in the store would be confirmed by
        whichever ticks next, possibly a second later, while an eviction in flight has not
        committed; this process's next tick is an interval away. A restart loses at most one
        batch's candidates, which the next pass finds again: a delay, never a wrong delete."""
        confirmed = 0
        candidates, self._orphans = sorted(self._orphans), set()
        for tenant, space, h in candidates:
            if self.store.cold_entry(tenant, h, space) is None:
                self.cold.delete(tenant, space, h)
                confirmed += 1
        self._orphans, examined = self._unreferenced_page(code_cursor(self.store.sweep_cursor(ORPHANS_CURSOR)))
        METRICS.orphan_sweep_examined.labels(kind="codes").inc(examined)
        if confirmed:
            METRICS.pruned.labels(store="cold_orphans").inc(confirmed)
        if confirmed or self._orphans:
            log.info("cold orphans swept", extra={"deleted": confirmed, "candidates": len(self._orphans),
                                                  "examined": examined})
        return confirmed

    def _unreferenced_page(self, start: ColdCode | None) -> tuple[set[ColdCode], int]:
        """The next `evict_batch` codes of the cold store, over at most `SPACES_PAGE` of the
        (tenant, space) pairs the store knows, in order (an empty one costs one code), after
        `start` (the code where the last sweep stopped; None: from the first): those no cold
        entry references, and how many were examined. Records where this one stops (a pass that
        reaches the end starts over). The pairs are one page from `start` on
        (`known_spaces_page`): reading every pair at every tick (`known_spaces`) would cost what
        the tenants do, and so would asking the cold store about thousands of them (a query
        each: at 10,000 tenants a tick took 0.19 s on SQLite and 0.75 s on PostgreSQL)."""
        budget, examined, found = self.cfg.evict_batch, 0, set[ColdCode]()
        # one pair more than a tick visits: where the next tick begins (none: the pass is done)
        pairs = self.store.known_spaces_page(None if start is None else (start[0], start[1]), SPACES_PAGE + 1)
        METRICS.orphan_sweep_examined.labels(kind="pairs").inc(min(len(pairs), SPACES_PAGE))
        for i, (tenant, space) in enumerate(pairs):
            after = start[2] if start is not None and (tenant, space) == start[:2] else ""
            while True:
                if budget <= 0 or i == SPACES_PAGE:
                    self.store.set_sweep_cursor(ORPHANS_CURSOR, (tenant, space, after))
                    return found, examined
                asked = budget
                page = self.cold.hashes(tenant, space, after, asked)
                budget -= max(1, len(page))
                examined += len(page)
                found.update((tenant, space, h) for h in set(page) - self.store.cold_referenced(tenant, space, page))
                if len(page) < asked:
                    break
                after = page[-1]
        self.store.set_sweep_cursor(ORPHANS_CURSOR, None)
        return found, examined

    def sweep_gone_rows(self, report: TickReport | None = None) -> int:
        """Delete sidecar rows whose document is gone, whatever their status (`prune_gone_rows`),
        `evict_batch` rows examined per tick, resuming where the last one stopped. A backfill
        racing a delete can leave them; the reconciler repairs only `queued` ones, so the rest
        would count in coverage for good. The cursor is in the store, like the cold orphan
        sweep's: a pass of 2M rows takes ~6.7 h at the defaults, and a fleet that began again at
        the first row at each restart would never reach its tail.
        The vectors and cold entries of their content go with `prune`, as after a delete.
        Counted with the reconciler's repairs of the same leftovers
        (`vibe_reconciler_repaired_total{reason="document_gone"}`) and, per tenant, in the tick's
        `goneRows` (GET /semantic/scheduler `lastChange`)."""
        gone, after = self.store.prune_gone_rows(row_cursor(self.store.sweep_cursor(GONE_CURSOR)),
                                                 self.cfg.evict_batch)
        self.store.set_sweep_cursor(GONE_CURSOR, after)
        if report is not None:
            for key, _ in gone:
                report.note(key.tenant, "goneRows")
        if gone:
            METRICS.reconciler_repaired.labels(reason="document_gone").inc(len(gone))
            log.info("rows of gone documents deleted", extra={"rows": len(gone)})
            self._changed()  # the embedded indexes drop the points of `ready` ones now
        return len(gone)

    def compact_change_log(self) -> int:
        """Delete change-log entries a later entry of the same key, op and space supersedes
        (`compact_changes`), `CHANGE_PAGES` pages of `evict_batch` entries examined per tick from
        the store's cursor, like the other sweeps. Uncompacted, the log would grow by every
        edit, embedding, eviction and rehydration for good, and an index rebuild (a new schema,
        `rebuild-index`) would replay all of it; compacted, it holds about one entry per
        document and kind of change. Nothing a follower does changes: it applies a key's current
        state. Counted in `vibe_change_log_compacted_total` and the tick's `compacted_changes`;
        not in a tenant's `lastChange` (GET /semantic/scheduler): housekeeping that follows
        every write would push the decisions an operator looks for out of that view."""
        removed = 0
        for _ in range(CHANGE_PAGES):
            stop = self.store.sweep_cursor(CHANGES_CURSOR)
            by_tenant, after = self.store.compact_changes(seq_cursor(stop), self.cfg.evict_batch)
            self.store.set_sweep_cursor(CHANGES_CURSOR, None if after is None else (str(after),))
            removed += sum(by_tenant.values())
            if after is None:
                break
        if removed:
            METRICS.change_log_compacted.inc(removed)
            log.info("change log compacted", extra={"entries": removed})
        return removed
