"""Document pins: documents touched often, or found beside pinned ones, outlive the idle bound
(`doc_promote_ttl_seconds` at a time); and what the scheduler knows and will do about one
document (`doc_state`, GET /semantic/status)."""

from __future__ import annotations

import math

from services.core.lifecycle.base import LifecycleBase
from services.core.lifecycle.cursors import doc_cursor
from services.core.lifecycle.eviction import EVICT_PAGE_BATCHES
from services.core.lifecycle.model import DocLifecycle, TickReport
from shared.metrics import METRICS
from shared.model import DocKey, SemanticStatus, SidecarEntry

PINS_CURSOR = "pins"  # the store's name of the pins' cursor (`sweep_cursor`)


class Pins(LifecycleBase):
    def _pin(self, now: float, r: TickReport) -> int:
        """Document promotion: extend the life of documents touched often or co-occurring with
        pinned ones. Re-pinned once half the TTL has passed, not at every tick. A page of usage
        rows a tick from the store's cursor, as eviction's: a document that turns hot is pinned
        within a pass (1M rows: 50 ticks), against a TTL and an idle bound of days."""
        ttl = self.cfg.doc_promote_ttl_seconds
        hot, after = self.store.hot_docs_page(now, self.cfg.doc_promote_touches, self.cfg.half_life_seconds,
                                              doc_cursor(self.store.sweep_cursor(PINS_CURSOR)),
                                              EVICT_PAGE_BATCHES * self.cfg.evict_batch, refresh_before=now + ttl / 2)
        self.store.set_sweep_cursor(PINS_CURSOR, after)
        if not hot:
            return 0
        n = self.store.pin_docs(hot, now + ttl)
        METRICS.pinned.inc(n)
        for k in set(hot):
            r.note(k.tenant, "pinned")
        return n

    def doc_state(self, key: DocKey, side: SidecarEntry | None) -> DocLifecycle:
        """What the scheduler knows and will do about one document (GET /semantic/status): the
        per-document counterpart of a collection's promotion reason and figures."""
        now = self.clock()
        u = self.store.doc_usage(key) or {}
        eager = (key.tenant, key.collection) in self.store.promoted()
        decayed_at, last_used, until = u.get("decayed_at"), u.get("last_used_at"), u.get("pinned_until")
        decay = 2.0 ** (((decayed_at or now) - now) / self.cfg.half_life_seconds)
        touches = (u.get("touches") or 0.0) * decay
        pinned = until if until is not None and until > now else None
        evictable = None
        if side is not None and side.status == SemanticStatus.READY and not eager:
            # the terms of Store.eviction_candidates: idle since its last use or embedding, not pinned
            used = max(last_used or 0.0, side.last_embedded_at or 0.0)
            hot = max(touches, (u.get("cooccur") or 0.0) * decay)
            evictable = max(used + self.cfg.evict_idle_seconds, self._last_pin_end(now, hot, pinned) or 0.0)
        return DocLifecycle(eager, last_used, round(touches, 3), pinned, evictable)

    def _last_pin_end(self, now: float, hot: float, pinned: float | None) -> float | None:
        """When the document's pin ends if it is not used again: `_pin` pins it for the TTL while
        its decayed count is at the bar, again once half the TTL has passed. The current pin's
        end would be wrong: every tick that re-pins a hot document moves it on, so the
        announced `evictableAt` would pass with the document still ready. Assumes a re-pin as
        soon as it is due (the pins' page reaches the document within a pass, so a re-pin can
        come up to a pass later: 1M usage rows, 50 ticks)."""
        bar, ttl = self.cfg.doc_promote_touches, self.cfg.doc_promote_ttl_seconds
        if ttl <= 0 or hot < bar:
            return pinned
        cool = now + self.cfg.half_life_seconds * math.log2(hot / bar)  # the count falls below the bar
        end = pinned if pinned is not None else now + ttl  # the next tick pins it
        due = end - ttl / 2  # when the next re-pin is due; each one adds half the TTL
        if due < cool:
            end += math.ceil((cool - due) / (ttl / 2)) * (ttl / 2)
        return end
