"""The legs of a read: lexical candidates, the query vector and the semantic search."""

from __future__ import annotations

import time
from collections.abc import Sequence

from services.core.usage import OverBudget, embed_query_within_cap
from services.planner.fanout import global_lexical, global_semantic
from services.planner.fusion import (
    relative_scores,
)
from services.planner.similar import asked, source_of, without_source, without_source_hits
from services.planner.state import COLD, SessionState
from shared.model import (
    DocKey,
    Hit,
    SemanticStatus,
    centroid,
    hit,
)
from shared.ports import (
    Candidates,
    EmbedderError,
    ResolvedCandidates,
)


class Legs(SessionState):
    """The lexical and semantic legs: candidates from the engines, and the query vector."""

    def _lexical_leg(self, text: str, first: int | None = None) -> list[Hit]:
        """The lexical candidates, scores relative to the best (fusion.relative); only the
        first `first` of them when given (`_short_lexical`; `_full_lexical` reads the rest)."""
        t0 = time.perf_counter()
        if text and self.p.lexical_follower is not None:
            # writes made through another process are searched as they are now
            self.p.lexical_follower.catch_up(tenant=self.principal.tenant)
        source = source_of(self.req, self.principal.tenant)  # more-like-this: never its own hit
        found = (without_source(self._lexical_candidates(text, asked(self.k, source)), source, self.k)
                 if text else ResolvedCandidates([]))
        self._lexical_found, self._lexical_scores = found, relative_scores(found.scores)
        self._lexical_stats = None
        n = len(self._lexical_scores) if first is None else first
        hits = [hit(k, s) for k, s in zip(found.keys(n), self._lexical_scores, strict=False)]
        self.lexical_ms = (time.perf_counter() - t0) * 1000
        return hits

    def _lexical_candidates(self, text: str, n: int) -> Candidates:
        """The lexical index's candidates; a global read's are each collection's, merged."""
        if self.global_plan is None:
            return self.p.lexical.candidates(self.flt, text, n)
        return global_lexical(self.p.lexical, self.flt, text, self.global_plan, n)

    def _vector_search(self, vector: list[float], n: int) -> list[Hit]:
        """The active space's vector search; a global read's is each collection's, merged."""
        if self.global_plan is None:
            return self.p.vectors.search(self.space, self.flt, vector, n)
        return global_semantic(self.p.vectors, self.space, self.flt, vector, self.global_plan, n)

    def _more_lexical(self, n: int) -> None:
        """The first `n` lexical candidates with their keys (of a short first page's leg, from
        the same snapshot of the index)."""
        with self._steps:  # the stream's tail and the finisher may both complete it
            have, n = len(self.lexical_hits), min(n, len(self._lexical_scores))
            if n > have and self._lexical_found is not None:
                more = zip(self._lexical_found.keys(n)[have:], self._lexical_scores[have:n], strict=True)
                self.lexical_hits = [*self.lexical_hits, *(hit(k, s) for k, s in more)]  # a new list
            self._short_lexical = len(self.lexical_hits) < len(self._lexical_scores)

    def _full_lexical(self) -> None:
        """Every lexical candidate of a short first page (ranked with their own statistics)."""
        self._more_lexical(len(self._lexical_scores))
        self._lexical_stats = None

    def _doc_vector(self, space: str) -> list[float] | None:
        """More-like-this searches with the document's STORED vector: its fields never go
        to the provider from a read, so the allowlist, redaction and a writer's deny
        hold as they do for its embedding job. A document not embedded yet is queued, like a touch."""
        assert self.req.query_doc is not None
        collection, doc_id, _ = self.req.query_doc
        key = DocKey(self.principal.tenant, collection, doc_id)
        stored = self.p.store.vectors_for([key], space).get(key)
        vec = None if stored is None else centroid(stored)
        if vec is None:
            side = self.p.store.sidecar(key, space)
            if side is not None and side.status in COLD:
                self._spend([side])  # a touch's budget: the bucket, the cap, the queue shares
            denied = side is not None and side.status == SemanticStatus.DENIED
            self.semantic.state = "degraded"
            self.semantic.reason = "query_doc_denied" if denied else "query_doc_not_embedded"
        return vec

    def _cached_query_vector(self, space: str | None = None) -> list[float] | None:
        if self.req.query_vector is not None:  # a space being built has another model: no vector there
            return list(self.req.query_vector) if (space or self.space) == self.space else None
        if self._is_doc_query():
            return self._doc_vector(space or self.space)
        emb = self.p.embedder_for(space or self.space, self.principal.tenant)
        if emb is None:
            return None
        return self.p.query_cache.get(self.principal.tenant, emb.model_id, self._query_text(), self.flt.acl)

    def _query_vector(self, space: str | None = None) -> list[float] | None:
        if self.req.query_vector is not None:  # the caller's own: never embedded, never cached
            return self._cached_query_vector(space)
        emb = self.p.embedder_for(space or self.space, self.principal.tenant)
        if emb is None:
            self.semantic.state, self.semantic.reason = "degraded", "no_embedder"
            return None
        cached = self._cached_query_vector(space)
        if cached is not None or self._is_doc_query():
            return cached
        text = self._query_text()
        try:  # the daily token cap: a spent tenant answers lexically, with no provider call
            vec = embed_query_within_cap(self.p.usage, emb, self.principal.tenant, self.req.collection, text,
                                         space=space or self.space)
        except OverBudget:
            self.semantic.state, self.semantic.reason = "degraded", "budget"
            return None
        except EmbedderError as e:
            self.semantic.state, self.semantic.reason = "degraded", f"embedder_unavailable: {str(e)[:80]}"
            return None
        self.p.query_cache.put(self.principal.tenant, emb.model_id, text, vec, self.flt.acl)
        return vec

    def _short_list_decides_page(self) -> bool:
        """Whether a short search's page is the full list's: it returned all there is, or its
        last hit (one past the page) scores below the page's last one. Then every hit that
        scores as high as the page's last is in the short list (an exact top-k), and both lists
        order them alike (`_semantic_leg` breaks ties by key)."""
        end, hits = self.req.offset + self.req.limit, self.semantic.hits
        return len(hits) <= end or hits[end].score < hits[end - 1].score

    def _semantic_leg(self, k: int | None = None) -> None:
        """The vector search, `k` candidates (None: all `self.k`; fewer only for a first page,
        see `_short_semantic`)."""
        t0 = time.perf_counter()
        self._short_semantic = False
        if self.semantic.vector is None:
            self.semantic.vector = self._query_vector()
        if self.semantic.vector is None:
            return
        self.p.follower.catch_up(tenant=self.principal.tenant)
        k = min(k or self.k, self.k)
        source = source_of(self.req, self.principal.tenant)  # more-like-this: never its own hit
        hits = self._vector_search(self.semantic.vector, asked(k, source))
        for space in self.building:
            hits = self._with_building(space, hits, asked(k, source))
        # Equal scores in key order: engines return ties in no set order, and a page, its
        # cursor's next page and a short first search must agree on them.
        self.semantic.hits = without_source_hits(sorted(hits, key=lambda h: (-h.score, h.key)), source, k)
        self.semantic.took_ms = (time.perf_counter() - t0) * 1000
        self.semantic.state = "ready"

    def _with_building(self, space: str, active: list[Hit], k: int) -> list[Hit]:
        """During a migration, queries fan out to both spaces until it completes: search the space being built with its
        own model's query vector and, for the documents it already holds, take its score instead
        of the active space's. The two models' scores are put on one scale by standardising each
        list (never by comparing raw scores of different models)."""
        state, reason = self.semantic.state, self.semantic.reason
        vec = self._query_vector(space)
        self.semantic.state, self.semantic.reason = state, reason  # the building space is best effort
        if vec is None:
            return active
        fresh = self.p.vectors.search(space, self.flt, vec, k)
        if not fresh:
            return active
        merged = {h.key: s for h, s in zip(active, _standard(active), strict=True)}
        merged.update({h.key: s for h, s in zip(fresh, _standard(fresh), strict=True)})
        return [Hit(k, s) for k, s in sorted(merged.items(), key=lambda kv: -kv[1])]


def _standard(hits: Sequence[Hit]) -> list[float]:
    if not hits:
        return []
    scores = [h.score for h in hits]
    mean = sum(scores) / len(scores)
    sd = (sum((s - mean) ** 2 for s in scores) / len(scores)) ** 0.5 or 1.0
    return [(s - mean) / sd for s in scores]
