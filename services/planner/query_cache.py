"""LRU of query vectors, keyed by (tenant, model, text).

Per tenant on purpose: a shared cache would let one tenant learn from timing that another
recently asked the same question (DESIGN.md §6: caches are per tenant)."""

from __future__ import annotations

import threading
from collections import OrderedDict

from prometheus_client import Counter, Gauge

_HITS = Counter("vibe_query_vector_cache_total", "Query vector cache lookups", ["result"])
_SIZE = Gauge("vibe_query_vector_cache_entries", "Entries in the query vector cache")


class QueryVectorCache:
    def __init__(self, capacity: int = 10_000):
        self.capacity = capacity
        self._items: OrderedDict[tuple[str, str, str], list[float]] = OrderedDict()
        self._lock = threading.Lock()

    def get(self, tenant: str, model: str, text: str) -> list[float] | None:
        key = (tenant, model, text)
        with self._lock:
            vec = self._items.get(key)
            if vec is not None:
                self._items.move_to_end(key)
        _HITS.labels(result="hit" if vec is not None else "miss").inc()
        return vec

    def put(self, tenant: str, model: str, text: str, vec: list[float]) -> None:
        with self._lock:
            self._items[(tenant, model, text)] = vec
            self._items.move_to_end((tenant, model, text))
            while len(self._items) > self.capacity:
                self._items.popitem(last=False)
            _SIZE.set(len(self._items))
