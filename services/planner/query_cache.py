"""LRU of query vectors, keyed by a hash of (tenant, principal set, model, text).

Scoped per tenant AND per principal set on purpose: a hit answers faster than a miss, so a
cache shared by a tenant would let one user learn from timing that another user of the tenant
(or of another tenant) recently asked exactly this question (so
caches are per tenant). A caller without a principal set (`principals=None`) is scoped by the
tenant alone.

Bounded by entries AND bytes: the key is a fixed-size digest of the text (a 1 MiB query costs
what a short one does), the vector is stored packed (8 bytes a dimension, values exact), and
texts longer than `max_text_chars` (the API's VIBE_MAX_QUERY_CHARS) are not cached at all, so
no path that skips the API's cap can fill the cache with them."""

from __future__ import annotations

import hashlib
import threading
from array import array
from collections import OrderedDict
from collections.abc import Iterable, Sequence

from prometheus_client import Counter, Gauge

from shared.config import Settings

_HITS = Counter("vibe_query_vector_cache_total", "Query vector cache lookups", ["result"])
_SIZE = Gauge("vibe_query_vector_cache_entries", "Entries in the query vector cache")
_BYTES = Gauge("vibe_query_vector_cache_bytes", "Estimated bytes held by the query vector cache")

ENTRY_OVERHEAD = 200  # dict slot, key and value objects, LRU links: a generous per-entry estimate


def cache_key(tenant: str, principals: Iterable[str] | None, model: str, text: str) -> bytes:
    """A 32-byte digest; every part length-prefixed so no two different tuples collide by
    concatenation, and the principal set order-free (the same key, in any order, is one scope)."""
    h = hashlib.blake2b(digest_size=32, person=b"vibe-qvc-v1")
    scope = None if principals is None else sorted(set(principals))
    parts: list[str] = [tenant, model, text] + (["\x00none"] if scope is None else ["\x00set", *scope])
    for part in parts:
        raw = part.encode("utf-8", "surrogatepass")
        h.update(len(raw).to_bytes(8, "big"))
        h.update(raw)
    return h.digest()


class QueryVectorCache:
    def __init__(self, capacity: int = 10_000, max_bytes: int = 64 * 1_048_576, max_text_chars: int = 4_096):
        self.capacity = capacity
        self.max_bytes = max_bytes
        self.max_text_chars = max_text_chars
        self._items: OrderedDict[bytes, array[float]] = OrderedDict()
        self._bytes = 0
        self._lock = threading.Lock()

    @classmethod
    def from_settings(cls, s: Settings) -> QueryVectorCache:
        return cls(s.query_cache_max_entries, s.query_cache_max_bytes, s.max_query_chars)

    @staticmethod
    def _cost(vec: array[float]) -> int:
        return vec.itemsize * len(vec) + ENTRY_OVERHEAD

    @property
    def bytes(self) -> int:
        return self._bytes

    def __len__(self) -> int:
        return len(self._items)

    def get(self, tenant: str, model: str, text: str, principals: Sequence[str] | None = None) -> list[float] | None:
        if len(text) > self.max_text_chars:
            return None
        key = cache_key(tenant, principals, model, text)
        with self._lock:
            packed = self._items.get(key)
            if packed is not None:
                self._items.move_to_end(key)
        _HITS.labels(result="hit" if packed is not None else "miss").inc()
        return packed.tolist() if packed is not None else None

    def put(self, tenant: str, model: str, text: str, vec: Sequence[float],
            principals: Sequence[str] | None = None) -> None:
        if len(text) > self.max_text_chars:
            return
        packed = array("d", vec)
        cost = self._cost(packed)
        if cost > self.max_bytes or self.capacity <= 0:
            return
        key = cache_key(tenant, principals, model, text)
        with self._lock:
            old = self._items.pop(key, None)
            if old is not None:
                self._bytes -= self._cost(old)
            self._items[key] = packed
            self._bytes += cost
            while len(self._items) > self.capacity or self._bytes > self.max_bytes:
                _, evicted = self._items.popitem(last=False)
                self._bytes -= self._cost(evicted)
            _SIZE.set(len(self._items))
            _BYTES.set(self._bytes)
