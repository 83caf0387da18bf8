"""Explain records (explainability): why a result is where it is, looked up by the
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


# One record: (tenant, id, collection, strategy, score, fusion, lexical rank, lexical score,
# semantic rank, semantic score, shown score). A flat tuple of atomic values: the collector
# stops tracking such a tuple after one pass, so 50,000 cached records cost later collections
# nothing, where a dict with a list of dicts each (~8 tracked objects a record) made every full
# collection of a busy server walk ~400k objects (27 ms a pause, py-spy and gc.callbacks,
# back-to-back reads at 100k).
_Record = tuple[str, str, str, str, float, str, "int | None", "float | None", "int | None", "float | None",
                "float | None"]


class ExplainCache:
    def __init__(self, capacity: int = 50_000):
        self.capacity = capacity
        self._items: OrderedDict[str, _Record] = OrderedDict()
        self._lock = threading.Lock()

    def put(self, principal: Principal, f: Fused, strategy: str, query: str,
            fusion: str = "rrf", shown: float | None = None) -> str:
        """`fusion`: the method that fused a hybrid ranking; `shown`: the result's `score` as
        the answer showed it (the record's `score` is the ranking's own)."""
        eid = secrets.token_urlsafe(9)
        record: _Record = (principal.tenant, f.key.doc_id, f.key.collection, strategy, f.score,
                           fusion if strategy == "hybrid" else "none", f.lexical_rank, f.lexical_score,
                           f.semantic_rank, f.semantic_score, shown)
        with self._lock:
            self._items[eid] = record
            while len(self._items) > self.capacity:
                self._items.popitem(last=False)
            METRICS.explain_cache.set(len(self._items))
        return eid

    def get(self, principal: Principal, eid: str) -> dict[str, object] | None:
        with self._lock:
            item = self._items.get(eid)
        if item is None or item[0] != principal.tenant:
            return None
        _, doc_id, collection, strategy, score, fusion, lex_rank, lex_score, sem_rank, sem_score, shown = item
        reasons: list[dict[str, object]] = []
        if lex_rank is not None:
            reasons.append({"type": "match", "leg": "keyword", "rank": lex_rank, "score": lex_score})
        if sem_rank is not None:
            reasons.append({"type": "match", "leg": "semantic", "rank": sem_rank, "score": sem_score})
        record: dict[str, object] = {"id": doc_id, "collection": collection, "strategy": strategy, "score": score,
                                     "fusion": fusion, "reasons": reasons}
        if shown is not None:
            record["shownScore"] = shown
        return record
