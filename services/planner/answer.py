"""A read's answers."""

from __future__ import annotations

import time

from services.planner.explain import Ranking, ranking_query
from services.planner.fusion import (
    Fused,
)
from services.planner.spend import Spending
from shared.filters import matches
from shared.model import (
    SemanticStatus,
    SidecarEntry,
    StoredDoc,
    visible_status,
)


class Answers(Spending):
    """A read's answers as the API shows them."""

    def payload(self, final: bool = False) -> dict[str, object]:
        if final:
            self._full_semantic()  # `done` reports the whole candidate list
        # A stream shows its page again at every event: each one is re-checked against the store
        # (a document revoked between two events must not be in the next one, nor its fields).
        self._shown_ok.clear()
        top = self._readable_top()
        shown = self._shown_scores(top)
        results = [self._result(f, s) for f, s in zip(top, shown, strict=True)]
        self._explain(results, top, shown)
        self._decorate(results, top)
        body: dict[str, object] = {"results": results, "strategy": self.strategy,
                                   "warming": self.warming(), "diagnostics": self.diagnostics(final)}
        self._answered = True
        return body

    def _result(self, f: Fused, shown: float) -> dict[str, object]:
        return {
            "id": f.key.doc_id,
            "collection": f.key.collection,
            "score": shown,
            "matchedBy": list(f.matched_by),
        }

    def _explain(self, results: list[dict[str, object]], top: list[Fused], shown: list[float]) -> None:
        """Each result's `explainId`: the page's records go to the store in one write."""
        cfg = self.p.cfg
        ranking = Ranking(self.strategy, cfg.fusion, cfg.semantic_weight,
                          ranking_query(self.req.q, self.req.query_text), self.space)
        ids = self.p.explain.record(self.principal, ranking, list(zip(top, shown, strict=True)))
        for r, eid in zip(results, ids, strict=True):
            r["explainId"] = eid

    def _decorate(self, results: list[dict[str, object]], top: list[Fused]) -> None:
        wanted = self.req.include_fields
        if wanted and top:
            for r, f in zip(results, top, strict=True):
                r["fields"] = shown_fields(self._shown_ok[f.key], wanted)  # loaded by the page's re-check
        if self.req.include_highlights and top:
            text = self._lexical_text()
            docs = [self._shown_ok[f.key] for f in top]  # loaded by the page's re-check (_readable_top)
            hl = self.p.lexical.highlights(self.flt, text, [d for d in docs if d.readable_by(self.principal)])
            for r, f in zip(results, top, strict=True):
                if f.key in hl:
                    r["highlights"] = hl[f.key]
        self._locate_passages(results, top)
        if self.req.include_semantic and top:
            sides = self.p.store.sidecars([f.key for f in top], self.space)
            for r, f in zip(results, top, strict=True):
                r["__semantic"] = semantic_projection(sides.get(f.key), self.space)

    def _locate_passages(self, results: list[dict[str, object]], top: list[Fused]) -> None:
        """`passage` on each semantic hit of a long document: where its best passage sits."""
        locator, query = self.p.passages, self.semantic.vector
        semantic = [f.key for f in top if "semantic" in f.matched_by and locator is not None
                    and locator.is_long(self._shown_ok[f.key])]
        if locator is None or query is None or not semantic:
            return
        vectors = self.p.store.vectors_for(semantic, self.space)
        for r, f in zip(results, top, strict=True):
            vecs = vectors.get(f.key)
            if vecs is not None and len(vecs) > 1:
                where = locator.locate(self._shown_ok[f.key], vecs, query)
                if where is not None:
                    r["passage"] = where

    def warming(self) -> dict[str, object]:
        if self._answered:  # a later event of a stream (a first answer's pending came from reads just made)
            self._drop_unreadable_pending()
        n = len(self.pending)
        if n:
            msg = f"Warming up… {n} results are being indexed"
        elif self.budget_limited:
            msg = f"Embedding budget reached: {self.budget_limited} results wait for it"
        elif self.backpressure_limited:
            msg = f"Indexing is behind: {self.backpressure_limited} results wait until it catches up"
        else:
            msg = "Nothing to warm up"
        return {"queued": n, "message": msg}

    def _drop_unreadable_pending(self) -> None:
        """Pending documents the caller may no longer read (an ACL revoked, a filter no longer
        met since the touch) leave `pending`: neither a warming count nor the stream's wait may
        follow a document the caller cannot see. A deleted one stays, for `refresh` to count."""
        if not self.pending:
            return
        docs = self.p.store.get_docs(list(self.pending))
        where = self.req.where
        self.pending = {k for k in self.pending if k not in docs or (
            docs[k].readable_by(self.principal) and (not where or matches(where, docs[k].fields)))}

    def diagnostics(self, final: bool = False) -> dict[str, object]:
        sem = self.semantic
        state = sem.state
        if state == "ready" and self.pending:
            # still embedding touched documents; at `done` that means the wait bound passed
            state = "partial" if final else "warming"
        return {
            "strategy": self.strategy,
            "strategyReason": self.strategy_reason,
            "fusion": self.p.cfg.fusion if self.strategy == "hybrid" else None,
            "space": self.space,
            "model": (emb.model_id if (emb := self.p.embedder_for(self.space, self.principal.tenant)) else None),
            "buildingSpaces": list(self.building),
            "lexical": {"candidates": len(self._lexical_scores), "tookMs": round(self.lexical_ms, 3)},
            "semantic": {
                "state": state, "reason": sem.reason, "hits": len(sem.hits),
                "queued": self.queued_by_us, "pending": len(self.pending),
                "budgetLimited": self.budget_limited, "backpressureLimited": self.backpressure_limited,
                "resolved": dict(self.resolved),
                "tookMs": round(sem.took_ms, 3),
            },
            "followUp": self.follow_up_state,
            "elapsedMs": round((time.perf_counter() - self.started) * 1000, 3),
        }


def shown_fields(doc: StoredDoc, wanted: bool | tuple[str, ...]) -> dict[str, object]:
    """The stored fields a reader is shown: all (`True`) or the named ones that exist; never a
    `_`-prefixed field (`_acl`, `_vibe` live apart from the fields; this is belt and braces)."""
    if wanted is True:
        return {k: v for k, v in doc.fields.items() if not k.startswith("_")}
    names = wanted if isinstance(wanted, tuple) else ()
    return {k: doc.fields[k] for k in names if k in doc.fields and not k.startswith("_")}

def semantic_projection(side: SidecarEntry | None, space: str) -> dict[str, object]:
    """`__semantic`: status, lastEmbeddedAt, space; the reason when one is kept."""
    if side is None:
        return {"status": SemanticStatus.NONE.value, "lastEmbeddedAt": None, "space": space}
    out: dict[str, object] = {
        "status": visible_status(side),
        "lastEmbeddedAt": iso_ms(side.last_embedded_at),
        "space": side.space,
    }
    if side.reason:
        out["reason"] = side.reason
    return out

def iso_ms(ts: float | None) -> str | None:
    """A stamp as the read and admin surfaces show it: UTC, milliseconds."""
    if ts is None:
        return None
    return time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(ts)) + f".{int(ts % 1 * 1000):03d}Z"
