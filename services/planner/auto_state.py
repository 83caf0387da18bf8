"""What `auto` knows of a collection's state: the share of its documents embedded in the read's
space, from a set-based count of the store (one grouped count of the collection's sidecar rows,
as /semantic/coverage reads it) kept for a short TTL, so a read never counts anything itself
except the first time it meets a collection: a figure older than the TTL
(VIBE_AUTO_COVERAGE_TTL_SECONDS) is still used while a background count refreshes it.

`auto` uses it two ways (services/planner/strategy.py): a short query over a collection almost
nothing of which is embedded is answered by keyword (a semantic leg would find next to nothing
and only add the query embedding's cost), and a natural-language query over a mostly embedded
collection is hybrid, saying so with the figure."""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Protocol

log = logging.getLogger("vibe.planner")
MAX_ENTRIES = 10_000  # (tenant, collection, space) figures kept; tenants and collections come and go


class CoverageSource(Protocol):
    def coverage(self, tenant: str, collection: str | None, space: str) -> dict[str, object]: ...


@dataclass(frozen=True)
class AutoThresholds:
    keyword_below: float = 0.05  # embedded share under which a short query is keyword
    short_words: int = 3  # a query of at most this many words is short
    hybrid_above: float = 0.5  # embedded share from which natural language is hybrid "by state"


Key = tuple[str, str | None, str]  # tenant, collection (None: all of the tenant's), space


def _in_background(fn: Callable[[], None]) -> None:
    threading.Thread(target=fn, name="vibe-auto-coverage", daemon=True).start()


class CoverageCache:
    """Each (tenant, collection or all of the tenant's, space)'s embedded share. A scope's first
    read counts it; after `ttl` seconds a read still gets the figure it has at once while one
    background count (at most one per scope at a time) refreshes it: a read never waits for a
    count again, whatever the collection's size."""

    def __init__(self, store: CoverageSource, ttl: float = 30.0, thresholds: AutoThresholds | None = None,
                 clock: Callable[[], float] = time.monotonic,
                 background: Callable[[Callable[[], None]], None] = _in_background):
        self.store = store
        self.ttl = ttl
        self.thresholds = thresholds or AutoThresholds()
        self.clock = clock
        self.background = background
        self._figures: dict[Key, tuple[float, float]] = {}
        self._refreshing: set[Key] = set()
        self._lock = threading.Lock()

    def share(self, tenant: str, collection: str | None, space: str) -> float | None:
        """Ready documents over the documents with a semantic row in `space` (0 when none);
        None when the store cannot say (auto then decides by the query's shape alone)."""
        key = (tenant, collection, space)
        with self._lock:
            hit = self._figures.get(key)
            stale = hit is not None and self.clock() - hit[0] >= self.ttl and key not in self._refreshing
            if stale:
                self._refreshing.add(key)
        if hit is None:
            return self._count(key)
        if stale:
            self.background(lambda: self._refresh(key))
        return hit[1]

    def _refresh(self, key: Key) -> None:
        try:
            self._count(key)
        finally:
            with self._lock:
                self._refreshing.discard(key)

    def _count(self, key: Key) -> float | None:
        now = self.clock()
        try:
            cov = self.store.coverage(*key)
        except Exception:  # noqa: BLE001 - a figure for a heuristic: never fail the read for it
            log.warning("coverage lookup for auto failed", exc_info=True)
            return None
        total, ready = cov.get("total"), cov.get("ready")
        share = ready / total if isinstance(total, int) and isinstance(ready, int) and total > 0 else 0.0
        with self._lock:
            if len(self._figures) >= MAX_ENTRIES:
                self._figures.clear()
            self._figures[key] = (now, share)
        return share


def by_state(share: float | None, words: int, t: AutoThresholds,
             scope: str = "the collection") -> tuple[str, str] | None:
    """`auto`'s choice from the collection's state, when its state decides; None: by shape."""
    if share is None:
        return None
    if share < t.keyword_below and words <= t.short_words:
        return "keyword", (f"low_coverage: {share:.2f} of {scope} embedded < {t.keyword_below:g}, "
                           f"short query ({words} word{'s' if words != 1 else ''})")
    if share >= t.hybrid_above:
        return "hybrid", f"high_coverage: {share:.2f} of {scope} embedded >= {t.hybrid_above:g}"
    return None


def state_rule(cache: CoverageCache | None, tenant: str, collection: str,
               space: str) -> Callable[[int], tuple[str, str] | None] | None:
    """`by_state` for one read's scope (collection `any`: the tenant's figure), asked for lazily:
    only a read whose shape leaves the choice open looks the figure up."""
    if cache is None:
        return None
    scope = None if collection == "any" else collection
    label = "the tenant's documents" if scope is None else "the collection"
    return lambda words: by_state(cache.share(tenant, scope, space), words, cache.thresholds, label)
