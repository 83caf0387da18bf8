"""A read's answers as domain objects: the page shown, what warms, and the diagnostics.

The planner decides what is shown (the page re-checked against the store, the scores, the
fields a reader may see); `services/api/render.py` turns these objects into the JSON the read
surface sends."""

from __future__ import annotations

import time
from dataclasses import dataclass

from services.core.rerank_usage import rerank_within_budget
from services.planner.explain import Ranking, ranking_query
from services.planner.fanout import GlobalPlan
from services.planner.fusion import Fused
from services.planner.graph import Neighbour, hydrate, record_neighbours
from services.planner.hints import HintReport, resolve_hint
from services.planner.rerank import RerankReport, rerank_page
from services.planner.spend import Spending
from shared.conditions import matches
from shared.model import DocKey, SidecarEntry, StoredDoc


@dataclass
class SemanticView:
    """A shown document's semantic state in the read's space (`include.semantic`)."""
    side: SidecarEntry | None
    space: str


@dataclass
class Shown:
    """One result on the page."""
    key: DocKey
    score: float  # in (0, 1], comparable across the pages of one query (Paging._shown_scores)
    matched_by: tuple[str, ...]
    explain_id: str = ""
    fields: dict[str, object] | None = None  # asked for with `include.fields`
    highlights: list[str] | None = None  # asked for with `include.highlights`, when the engine has some
    passage: dict[str, object] | None = None  # where a long document's best passage sits (a semantic hit)
    semantic: SemanticView | None = None  # asked for with `include.semantic`
    neighbors: list[Neighbour] | None = None  # asked for with `graph` (services/planner/graph.py)


@dataclass
class Warming:
    """What this read is waiting for, and why it does not wait for more."""
    queued: int
    budget_limited: int
    backpressure_limited: int


@dataclass
class Diagnostics:
    strategy: str
    strategy_reason: str
    fusion: str | None
    space: str
    model: str | None
    building_spaces: list[str]
    lexical_candidates: int
    lexical_ms: float
    semantic_state: str
    semantic_reason: str | None
    semantic_hits: int
    queued: int
    pending: int
    budget_limited: int
    backpressure_limited: int
    resolved: dict[str, int]
    semantic_ms: float
    follow_up: str | None
    elapsed_ms: float
    rerank: RerankReport | None = None  # asked for with `rerank: true` (services/planner/rerank.py)
    global_read: GlobalPlan | None = None  # a global read's legs (services/planner/fanout.py)
    domain_hint: HintReport | None = None  # what became of `semantic.domainHint` (services/planner/hints.py)


@dataclass
class Answer:
    """One answer of a read: the JSON answer, or one event of its stream."""
    results: list[Shown]
    strategy: str
    warming: Warming
    diagnostics: Diagnostics


class Answers(Spending):
    """A read's answers: its page, re-checked and decorated as asked, with its state."""

    def answer(self, final: bool = False, rerank: bool = True) -> Answer:
        """`rerank=False`: the fused page even when the read asks for rerank (a stream's ranking
        events; its `rerank` events follow them, services/planner/flow.py)."""
        if final:
            self._full_semantic()  # `done` reports the whole candidate list
        # A stream shows its page again at every event: each one is re-checked against the store
        # (a document revoked between two events must not be in the next one, nor its fields).
        self._shown_ok.clear()
        top = self._readable_top()
        shown = self._shown_scores(top)
        top, shown, reranked = self._rerank(top, shown) if rerank else (top, shown, None)
        results = [Shown(f.key, s, tuple(f.matched_by)) for f, s in zip(top, shown, strict=True)]
        self._explain(results, top, shown, reranked)
        self._decorate(results, top)
        self._hydrate(results)
        out = Answer(results, self.strategy, self.warming(), self.diagnostics(final))
        out.diagnostics.rerank = reranked
        self._answered = True
        return out

    def _rerank(self, top: list[Fused], shown: list[float]) -> tuple[list[Fused], list[float], RerankReport | None]:
        """The page in the reranker's order when the read asks for it; each document keeps its
        shown score (the fused one, comparable across pages). Only re-checked documents reach
        here (`_readable_top`), so nothing the caller may not read is ever sent."""
        reranker = self.p.reranker_named(self.req.rerank_provider)
        if not self.req.rerank or reranker is None or not top:
            return top, shown, None
        if self._rerank_failed is not None:  # a failing reranker is not called again by this read
            return top, shown, self._rerank_failed
        # the front door refuses rerank without query text (a more-like-this query has none)
        query = self.req.q if self.req.q.strip() else (self.req.query_text or "")
        p, tenant = self.p, self.principal.tenant

        def score(keys: list[DocKey], texts: list[str]) -> list[float]:
            return rerank_within_budget(p.usage, p.rerank_budget, reranker, tenant, self.req.collection,
                                        self.space, query, keys, texts)

        order, report = rerank_page(score, reranker.model_id, [f.key for f in top],
                                    self._shown_ok, self.p.rerank_text, self.p.rerank_candidates,
                                    self._rerank_scores)
        if report.status != "reranked":
            self._rerank_failed = report
        return [top[i] for i in order], [shown[i] for i in order], report

    def _explain(self, results: list[Shown], top: list[Fused], shown: list[float],
                 reranked: RerankReport | None) -> None:
        """Each result's explain id: the page's records go to the store in one write."""
        cfg = self.p.cfg
        ranking = Ranking(self.strategy, cfg.fusion, cfg.semantic_weight,
                          ranking_query(self.req.q, self.req.query_text), self.space)
        stage = None if reranked is None else [reranked.explain(f.key, self.req.offset) for f in top]
        ids = self.p.explain.record(self.principal, ranking, list(zip(top, shown, strict=True)), stage)
        for r, eid in zip(results, ids, strict=True):
            r.explain_id = eid

    def _decorate(self, results: list[Shown], top: list[Fused]) -> None:
        wanted = self.req.include_fields
        if wanted and top:
            for r, f in zip(results, top, strict=True):
                r.fields = shown_fields(self._shown_ok[f.key], wanted)  # loaded by the page's re-check
        if self.req.include_highlights and top:
            text = self._lexical_text()
            docs = [self._shown_ok[f.key] for f in top]  # loaded by the page's re-check (_readable_top)
            hl = self.p.lexical.highlights(self.flt, text, [d for d in docs if d.readable_by(self.principal)])
            for r, f in zip(results, top, strict=True):
                if f.key in hl:
                    r.highlights = hl[f.key]
        self._locate_passages(results, top)
        if self.req.include_semantic and top:
            sides = self.p.store.sidecars([f.key for f in top], self.space)
            for r, f in zip(results, top, strict=True):
                r.semantic = SemanticView(sides.get(f.key), self.space)

    def _hydrate(self, results: list[Shown]) -> None:
        """`graph`: each result's neighbours by edges the caller may read (services/planner/graph.py)."""
        if not self.req.graph_depth or not results:
            return
        found, docs = hydrate(self.p.store, self.p.store, self.principal, [r.key for r in results],
                              self.req.graph_depth, self.p.graph)
        record_neighbours(self.p.explain, self.principal, found)
        for r in results:
            r.neighbors = found.get(r.key, [])
            if self.req.include_fields:
                for n in r.neighbors:
                    n.fields = shown_fields(docs[n.key], self.req.include_fields)

    def _locate_passages(self, results: list[Shown], top: list[Fused]) -> None:
        """Each semantic hit of a long document: where its best passage sits."""
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
                    r.passage = where

    def warming(self) -> Warming:
        if self._answered:  # a later event of a stream (a first answer's pending came from reads just made)
            self._drop_unreadable_pending()
        return Warming(len(self.pending), self.budget_limited, self.backpressure_limited)

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

    def diagnostics(self, final: bool = False) -> Diagnostics:
        sem = self.semantic
        state = sem.state
        if state == "ready" and self.pending:
            # still embedding touched documents; at `done` that means the wait bound passed
            state = "partial" if final else "warming"
        emb = self.p.embedder_for(self.space, self.principal.tenant)
        return Diagnostics(
            strategy=self.strategy, strategy_reason=self.strategy_reason,
            fusion=self.p.cfg.fusion if self.strategy == "hybrid" else None,
            space=self.space, model=emb.model_id if emb else None, building_spaces=list(self.building),
            lexical_candidates=len(self._lexical_scores), lexical_ms=self.lexical_ms,
            semantic_state=state, semantic_reason=sem.reason, semantic_hits=len(sem.hits),
            queued=self.queued_by_us, pending=len(self.pending), budget_limited=self.budget_limited,
            backpressure_limited=self.backpressure_limited, resolved=dict(self.resolved),
            semantic_ms=sem.took_ms, follow_up=self.follow_up_state,
            global_read=self.global_plan and self.global_plan.snapshot(),
            domain_hint=resolve_hint(self.req.domain_hint, self.space, self.building),
            elapsed_ms=(time.perf_counter() - self.started) * 1000)


def shown_fields(doc: StoredDoc, wanted: bool | tuple[str, ...]) -> dict[str, object]:
    """The stored fields a reader is shown: all (`True`) or the named ones that exist; never a
    `_`-prefixed field (`_acl`, `_vibe` live apart from the fields; this is belt and braces)."""
    if wanted is True:
        return {k: v for k, v in doc.fields.items() if not k.startswith("_")}
    names = wanted if isinstance(wanted, tuple) else ()
    return {k: doc.fields[k] for k in names if k in doc.fields and not k.startswith("_")}
