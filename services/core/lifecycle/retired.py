"""Retired spaces (model rollback): activation only retires the previous space; its `ready`
vectors then move to the cold store in batches (`GET /semantic/spaces` shows it as
`retiring`), so re-activating it needs no provider call for content that did not change. Past
its retention (`VIBE_RETIRED_SPACE_RETENTION_SECONDS`) it is claimed (`expiring`, so a
re-activation racing it is refused), then its cold files, rows and the space itself go."""

from __future__ import annotations

import logging

from services.core.lifecycle.base import LEASE
from services.core.lifecycle.eviction import Eviction
from services.core.lifecycle.model import TickReport
from shared.metrics import METRICS
from shared.model import SemanticStatus, SpaceInfo

log = logging.getLogger("vibe.lifecycle")


class RetiredSpaces(Eviction):
    def retire_space(self, tenant: str, space: str, now: float, batches: int | None = None) -> int:
        """Move a retired space's `ready` vectors to the cold store (keyed by tenant, space and
        content hash, in the configured codec), `evict_batch` rows per transaction and at most
        `batches` batches (None: until none is left); its rows show `cold`, so re-activating it
        (`POST /semantic/spaces/{space}/activate`) needs no provider call for content that did
        not change. The vectors leave the store and the ANN index. Each batch re-checks, under
        the space's row lock, that the space is still retired: a re-activation or a retention
        expiry stops the move."""
        total, done = 0, 0
        while batches is None or done < batches:
            rows = self.store.keys_in_status(space, [SemanticStatus.READY], self.cfg.evict_batch, tenant)
            if not rows:
                break
            done += 1
            moved = self._evict_rows(rows, now, retired=(tenant, space))
            if moved is None:
                break  # no longer retired
            total += len(moved)
            # A ready row without a stored vector has no point in the index: it simply goes to
            # `none` (re-embedded if the space comes back), so this loop always ends.
            rest = [s.key for s in rows if s.key not in set(moved)]
            if rest:
                self.store.set_status(rest, space, SemanticStatus.NONE, only_from=[SemanticStatus.READY])
        if total:
            METRICS.evictions.inc(total)
            METRICS.retired_moved.inc(total)
            self._changed()
        return total

    def cool_retired(self, now: float, batches: int | None = 1) -> int:
        """The background move of retired spaces' vectors to the cold store (activation returns
        at once): `batches` batches per retired space per call (None: all), under a lease of its
        own, so however many processes call it (the backfill cadence of every `serve` thread and
        Celery beat's backfill task, the tick) one moves at a time. Also what became `ready` in
        a retired space after its retirement (a job in flight then)."""
        with self.store.lease(f"{LEASE}:retire") as leader:
            if not leader:
                return 0
            retired = [r for r in self.store.tenant_spaces() if r.state == "retired"]
            moved = sum(self.retire_space(r.tenant, r.space, now, batches) for r in retired)
            if moved or not retired:
                self._publish_retiring(retired)
            return moved

    def _publish_retiring(self, retired: list[SpaceInfo]) -> None:
        METRICS.retired_remaining.set(sum(self.store.count_in_status(r.tenant, r.space, SemanticStatus.READY)
                                          for r in retired))

    def retention_until(self, retired_at: float | None) -> float | None:
        keep = self.cfg.retired_retention_seconds
        return None if retired_at is None or keep <= 0 else retired_at + keep

    def expire_retired(self, now: float, report: TickReport | None = None) -> list[str]:
        """Retired spaces past their retention. The space is claimed first (`expiring`, checked
        again under its row lock in the store): a re-activation that commits before the claim
        wins and nothing is deleted; one that comes after is refused. Then cold files (a row
        without its file only re-embeds; a file without its row would never be pruned), the cold
        entries, the sidecar rows and the tenant's space. An expiry cut short resumes."""
        gone: list[str] = []
        keep = self.cfg.retired_retention_seconds
        for r in self.store.tenant_spaces():
            if r.state == "retired":
                until = self.retention_until(r.retired_at)
                if until is None or until > now:
                    continue
            elif r.state != "expiring":
                continue
            if not self.store.claim_expiry(r.tenant, r.space, now - keep if keep > 0 else float("-inf")):
                continue
            files = 0
            while hashes := self.store.cold_hashes(r.tenant, r.space, self.cfg.evict_batch):
                for h in hashes:
                    self.cold.delete(r.tenant, r.space, h)
                files += self.store.forget_cold(r.tenant, r.space, hashes)
            self.store.drop_space_vectors(r.tenant, r.space)
            self.store.forget_tenant_space(r.tenant, r.space)
            if files:
                METRICS.pruned.labels(store="retired").inc(files)
            log.info("retired space pruned", extra={"space": r.space, "cold_files": files,
                                                     "retired_at": r.retired_at})
            gone.append(f"{r.tenant}/{r.space}")
            if report is not None:
                report.note(r.tenant, "retiredExpired", r.space)
        if gone:
            self._changed()
        return gone
