"""A read session's state, shared by its concerns (legs, page, spend, answers)."""

from __future__ import annotations

import threading
import time
from dataclasses import dataclass, field

from services.planner.deps import PlannerDeps
from services.planner.fanout import GlobalPlan, plan_global
from services.planner.fusion import (
    Fused,
    LegStats,
)
from services.planner.request import ReadRequest
from services.planner.rerank import RerankReport
from shared.errors import ErrorCode, VibeError
from shared.filters import describe
from shared.model import (
    DocKey,
    Hit,
    Principal,
    SemanticStatus,
    SidecarEntry,
    StoredDoc,
)
from shared.ports import (
    Candidates,
)
from shared.text.hashing import doc_text

COLD = (SemanticStatus.NONE, SemanticStatus.STALE)


@dataclass
class SemanticLeg:
    state: str = "skipped"  # skipped | ready | degraded; reported as warming/partial while pending
    reason: str | None = None
    vector: list[float] | None = None
    hits: list[Hit] = field(default_factory=list)
    took_ms: float = 0.0


def _evicted(side: SidecarEntry) -> bool:
    """Its vector went to the cold store (eviction leaves `none` with a cold reference; a
    rewrite clears the reference): a job for it rehydrates without a provider call."""
    return side.status == SemanticStatus.NONE and side.cold_ref is not None


class SessionState:
    """One read's state between its first answer and `done`, and the questions every concern
    asks of it (the query's text, the page, the scope)."""

    def __init__(self, planner: PlannerDeps, principal: Principal, req: ReadRequest):
        self.p = planner
        self.principal = principal
        self.req = req
        self.flt = planner.search_filter(principal, req.collection, req.where)
        self.space, self.building = planner.spaces.of(principal.tenant)
        self._shown_ok: dict[DocKey, StoredDoc] = {}  # documents re-checked readable (see _readable_top)
        # the reranker's scores so far: a stream's later events send only documents not yet scored
        self._rerank_scores: dict[DocKey, float] = {}
        self._rerank_failed: RerankReport | None = None  # a read calls a failing reranker once
        self._hidden: set[DocKey] = set()  # documents that failed that check
        self._answered = False  # an answer was built (later ones re-check pending documents too)
        self.k = req.k or planner.cfg.lexical_candidates
        # A read of every collection fans out, one leg per collection (services/planner/fanout.py);
        # the legs are decided once, so the stream's refreshes search what the first answer did.
        self.global_plan: GlobalPlan | None = None
        if req.collection == "any":
            cfg = planner.cfg
            self.global_plan = plan_global(planner.store, principal.tenant, self.k, cfg.global_max_collections,
                                           cfg.global_min_share)
        self.lexical_hits: list[Hit] = []
        self.semantic = SemanticLeg()
        self.strategy: str = req.strategy
        self.strategy_reason = "requested"
        self.pending: set[DocKey] = set()
        self._first_touch = False  # this read's touch was its query's first (touch.PageMemory)
        self._followed = False  # follow_up() has run
        self._observed = False  # this first read's agreement with its lexical top was counted ("auto")
        # The "auto" follow-up state this read's touches were last planned with (diagnostics `followUp`;
        # None: no touch planned, or the follow-up is not "auto")
        self.follow_up_state: str | None = None
        # A streamed semantic read searches first for its page only (offset + limit + 1 hits: the
        # one past the page tells whether there is a next). The page is the full list's page, so
        # all `k` candidates are fetched only for what reports or needs them: the `done` answer
        # (`_full_semantic`), a page re-check that drops a document, a refresh as vectors arrive.
        self._short_semantic = False
        self._lexical_later = False  # a streamed semantic read's lexical leg waits for complete_semantic
        # A streamed keyword or hybrid read ranks first only the lexical candidates its page
        # needs (their keys are read from the index as they are asked for: `Candidates`);
        # complete_semantic() reads the rest. The fused scores are the whole leg's all the same
        # (`_lexical_stats`), and the page is the whole ranking's page (`_rank_first_page`).
        self._short_lexical = False
        self._lexical_found: Candidates | None = None
        self._lexical_scores: list[float] = []  # every candidate's (relative) score, best first
        self._lexical_stats: LegStats | None = None
        self._vector_target: int | None = None  # log head the vector index must reach (refresh)
        self.queued_by_us = 0
        self.budget_limited = 0
        self.backpressure_limited = 0  # cold candidates not queued: the job queue was too deep
        # A stream's steps after its first answer (complete_semantic, touch) run on whichever
        # thread gets them, and a reader that leaves hands the rest to the planner's finisher
        # (`Planner.finish_left`): one at a time, and the touch once.
        self._steps = threading.RLock()
        self.touched = False
        self.failed = False  # the stream ended with an error: nothing is finished for it
        self.resolved: dict[str, int] = {}
        self.ranking: list[Fused] = []
        self.lexical_ms = 0.0
        self.started = time.perf_counter()

    def _lexical_text(self) -> str:
        if self.req.q.strip():
            return self.req.q
        if self.req.query_text:
            return self.req.query_text
        doc = self._query_doc()
        return doc_text(doc[0], doc[1])[:2000] if doc else ""

    def _query_doc(self) -> tuple[dict[str, object], list[str] | None] | None:
        if self.req.query_doc is None:
            return None
        collection, doc_id, fields = self.req.query_doc
        doc = self.p.store.get_doc(DocKey(self.principal.tenant, collection, doc_id))
        if doc is None or not doc.readable_by(self.principal):
            raise VibeError(ErrorCode.NOT_FOUND, "semantic.query.doc not found")
        return doc.fields, fields

    def _query_text(self) -> str:
        return self.req.query_text or self.req.q or self._lexical_text()

    def _is_doc_query(self) -> bool:
        return self.req.query_doc is not None and not self.req.query_text and not self.req.q.strip()

    def _page(self) -> list[Fused]:
        return self.ranking[self.req.offset: self.req.offset + self.req.limit]

    def _visible(self) -> list[tuple[DocKey, float]]:
        return [(f.key, round(f.score, 9)) for f in self._page()]

    def _scope_key(self) -> str:
        """The collection plus the filter and the page: one query text under two filters, or
        its second page, is another page to remember (touch page memory keys on it)."""
        if not self.flt.where and not self.req.offset:
            return self.req.collection
        return f"{self.req.collection}\x1f{describe(self.flt.where)!r}\x1f{self.req.offset}"

    @property
    def has_more(self) -> bool:
        """Whether the ranking holds results past this page (a next cursor is worth giving)."""
        return len(self.ranking) > self.req.offset + self.req.limit

    @property
    def semantic_deferred(self) -> bool:
        return self.semantic.state == "embedding_query"

    @property
    def awaits_backfill(self) -> bool:
        """A keyword ranking never changes as vectors arrive, so its stream need not wait."""
        return bool(self.pending) and self.strategy != "keyword"

    def _spend(self, cold: list[SidecarEntry]) -> None:
        raise NotImplementedError  # spend.Spending

