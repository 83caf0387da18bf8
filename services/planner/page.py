"""The ranking of a read and the page it shows."""

from __future__ import annotations

import math

from services.planner.fusion import (
    Fused,
    leg_stats,
    rrf,
    single,
    zscore,
)
from services.planner.legs import Legs
from shared.conditions import matches
from shared.model import (
    DocKey,
    SemanticStatus,
)

IMPUTE_DEPTH = 200  # lexical candidates checked for a missing vector before fusion
MIN_SCORE = 1e-6  # the lowest `score` shown: every shown score is in (0, 1]


class Paging(Legs):
    """The ranking and its page: fusion, re-ranking as vectors arrive, the page re-checked
    against the store, the scores shown."""

    def _rank(self) -> None:
        if self.strategy == "keyword":
            self.ranking = single(self.lexical_hits, "lexical")
        elif self.strategy == "semantic":
            self.ranking = single(self.semantic.hits, "semantic")
        else:
            self.ranking = self._fuse()

    def _fuse(self) -> list[Fused]:
        cfg = self.p.cfg
        unembedded = self._unembedded()
        if cfg.fusion == "rrf":
            return rrf(self.lexical_hits, self.semantic.hits, cfg.rrf_k, unembedded)
        return zscore(self.lexical_hits, self.semantic.hits, cfg.semantic_weight, unembedded=unembedded,
                      stand_in=cfg.stand_in, lexical_stats=self._lexical_stats)

    def _unembedded(self) -> set[DocKey]:
        """Top lexical candidates with no vector in this space yet: fusion stands an estimate in
        for the unknown semantic score (fusion.stand_in_line). Candidates below IMPUTE_DEPTH keep the floor:
        they cannot reach a page whatever they are given, and the lookup stays one batch."""
        keys = [h.key for h in self.lexical_hits[:IMPUTE_DEPTH]]
        if not keys or self.semantic.state != "ready":
            return set()
        ready = self.p.store.ready_among(keys, self.space)
        return {k for k in keys if k not in ready}

    def _rank_first_page(self) -> None:
        """Rank the first lexical candidates alone, with the whole leg's statistics. Z-score and
        RRF order equal scores by key (the engine in its own order), so every candidate tied
        with the page's last is read first, and the one after them; should the fused scores
        still leave the page open (a candidate not read could tie with it), all of them."""
        self._lexical_stats = leg_stats(self._lexical_scores)
        end, scores = self.req.offset + self.req.limit, self._lexical_scores
        fused = self.strategy != "keyword"
        if fused and end < len(scores):
            past = end
            while past < len(scores) and scores[past] == scores[end - 1]:
                past += 1
            self._more_lexical(past + 1)
        self._rank()
        if fused and self._short_lexical and not self.ranking[end - 1].score > self.ranking[-1].score:
            self._full_lexical()
            self._rank()

    def _full_semantic(self) -> None:
        """Every semantic candidate of a short first search (the same page, see above)."""
        with self._steps:
            if self._short_semantic:
                self._semantic_leg()
                self._rank()

    def refresh(self) -> bool:
        """Check the pending documents; re-rank if any became ready. True if the visible
        ranking changed."""
        if not self.pending:
            return False
        sides = self.p.store.sidecars(list(self.pending), self.space)
        done = {k for k in self.pending if k not in sides or sides[k].status != SemanticStatus.QUEUED}
        if not done:
            return False
        if any(sides[k].status == SemanticStatus.READY for k in done if k in sides) and not self._vectors_caught_up():
            return False  # ready in the store, not yet searchable: look again at the next poll
        for k in done:
            # a refusal for cost is reported as `budget`, apart from policy deferrals
            status = ("budget" if k in sides and sides[k].reason == "budget"
                      else sides[k].status.value if k in sides else "deleted")
            self.resolved[status] = self.resolved.get(status, 0) + 1
        self.pending -= done
        if self.strategy not in ("semantic", "hybrid") or not self.resolved.get("ready"):
            return False
        return self._search_again()

    def _search_again(self) -> bool:
        """The semantic leg searched again and the ranking made anew; True if the visible
        ranking changed."""
        before = self._visible()
        self._semantic_leg()
        self._rank()
        return self._visible() != before

    def _vectors_caught_up(self) -> bool:
        """Whether the vector index has applied the log up to the head seen when documents
        were first found ready. An embedded index is applied by this process at once; a shared
        one (Qdrant server) by whichever replica holds its lease, and until then a ready
        document would be neither searched nor imputed and would drop to the floor."""
        if self._vector_target is None:
            # includes their vector changes (only the tenant's own changes matter to its read)
            self._vector_target = self.p.store.change_log_head(self.principal.tenant)
        self.p.follower.catch_up(tenant=self.principal.tenant)
        if self.p.follower.applied(self.principal.tenant) < self._vector_target:
            return False
        self._vector_target = None
        return True

    def _readable_top(self) -> list[Fused]:
        """The page, each document re-checked against the store of record before it is shown:
        an index another process has not caught up with yet (a revoked ACL, a delete, an edit
        that no longer meets the filter) must not decide what a caller sees. A document that
        fails leaves the ranking for good. The ranking's first document is checked too on a
        later page: its score anchors the shown scores (`_shown_scores`)."""
        where = self.req.where
        while True:
            top = self._page()
            unchecked = [f.key for f in [*self.ranking[:1], *top] if f.key not in self._shown_ok]
            if not unchecked:
                return top
            docs = self.p.store.get_docs(unchecked)
            bad = {k for k in unchecked if k not in docs or not docs[k].readable_by(self.principal)
                   or (where and not matches(where, docs[k].fields))}
            self._shown_ok.update((k, docs[k]) for k in unchecked if k not in bad)
            if not bad:
                return top
            if self._short_semantic:  # the page needs candidates past the short list
                self._semantic_leg()
                self._rank()
            if self._short_lexical:
                self._full_lexical()
                self._rank()
            self._hidden |= bad
            self.ranking = [f for f in self.ranking if f.key not in self._hidden]

    def _shown_scores(self, page: list[Fused]) -> list[float]:
        """`score` as shown: in (0, 1], higher is better, comparable across the pages of one
        query (anchored on the ranking's best, not the page's). The ranking's own scores are
        kept for explain; the mapping is monotone, so the order is the ranking's.
        - keyword: BM25 divided by the best BM25 of the caller's list (fusion.relative);
        - semantic: cosine similarity mapped onto (0, 1] as (1 + cos) / 2, an absolute figure
          (1: same direction as the query); a space being built standardises its scores, and
          then the hybrid rule below is used;
        - hybrid, z-score fusion: exp(fused - best fused), 1 for the best, each standard
          deviation behind it a factor e less (a lone hit scores 1);
        - hybrid, RRF: the RRF sum divided by the best possible (rank 1 in both legs)."""
        if not page:
            return []
        best = self.ranking[0].score
        raw = [f.score for f in page]
        if self.strategy == "keyword":
            shown = raw
        elif self.strategy == "semantic" and all(-1.0 <= s <= 1.0 for s in [best, *raw]):
            shown = [(1.0 + s) / 2.0 for s in raw]
        elif self.strategy == "hybrid" and self.p.cfg.fusion == "rrf":
            shown = [s * (self.p.cfg.rrf_k + 1) / 2.0 for s in raw]
        else:
            shown = [math.exp(min(0.0, s - best)) for s in raw]
        return [min(1.0, max(MIN_SCORE, round(s, 6))) for s in shown]
