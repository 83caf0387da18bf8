"""Explain records (V§9 explainability): why a result is where it is, looked up by the
`explainId` a ranking carries. Bounded LRU in memory; the caller's tenant and ACL are
checked again on lookup."""

from __future__ import annotations

import secrets
import threading
from collections import OrderedDict
from typing import TYPE_CHECKING

from shared.metrics import METRICS
from shared.model import Principal

if TYPE_CHECKING:
    from services.planner.fusion import Fused


class ExplainCache:
    def __init__(self, capacity: int = 50_000):
        self.capacity = capacity
        self._items: OrderedDict[str, tuple[str, dict[str, object]]] = OrderedDict()
        self._lock = threading.Lock()

    def put(self, principal: Principal, f: Fused, strategy: str, query: str,
            fusion: str = "rrf", shown: float | None = None) -> str:
        """`fusion`: the method that fused a hybrid ranking; `shown`: the result's `score` as
        the answer showed it (the record's `score` is the ranking's own)."""
        eid = secrets.token_urlsafe(9)
        reasons: list[dict[str, object]] = []
        if f.lexical_rank is not None:
            reasons.append({"type": "match", "leg": "keyword", "rank": f.lexical_rank, "score": f.lexical_score})
        if f.semantic_rank is not None:
            reasons.append({"type": "match", "leg": "semantic", "rank": f.semantic_rank,
                            "score": f.semantic_score})
        record: dict[str, object] = {
            "id": f.key.doc_id, "collection": f.key.collection, "strategy": strategy,
            "score": f.score, "fusion": fusion if strategy == "hybrid" else "none", "reasons": reasons,
        }
        if shown is not None:
            record["shownScore"] = shown
        with self._lock:
            self._items[eid] = (principal.tenant, record)
            while len(self._items) > self.capacity:
                self._items.popitem(last=False)
            METRICS.explain_cache.set(len(self._items))
        return eid

    def get(self, principal: Principal, eid: str) -> dict[str, object] | None:
        with self._lock:
            item = self._items.get(eid)
        if item is None or item[0] != principal.tenant:
            return None
        return item[1]
