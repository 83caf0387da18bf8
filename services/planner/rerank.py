"""The optional rerank stage of a read: a page's fused order re-scored by an outside reranker.

Asked for per read (`"rerank": true`) and only when a reranker is configured (VIBE_RERANK_URL;
the request is refused otherwise, never silently ignored). The page's documents, already
re-checked against the store as readable, are sent (at most VIBE_READ_RERANK_CANDIDATES of them,
in one provider call) with the text the semantic leg embeds. A document carrying certificates is
never sent: the reranker is an outside endpoint and no certificate policy names it; it keeps its
fused place and counts as `notSent`. A reranker that fails or times out, or a tenant whose
reranker budget is spent (services/core/rerank_usage.py), leaves the fused order: a read never
fails because of rerank."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field

from services.core.rerank_usage import RerankOverBudget
from shared.agent_ports import RerankError
from shared.model import DocKey, StoredDoc


@dataclass
class RerankReport:
    """What the stage did, for the read's diagnostics."""
    status: str  # reranked | failed | timeout | budget (the tenant's reranker budget is spent: nothing sent)
    provider: str
    sent: int = 0
    not_sent: int = 0
    error: str | None = None
    scores: dict[DocKey, float] = field(default_factory=dict)
    # each document's place on the page before and after (from 0), when the page was reranked
    moves: dict[DocKey, tuple[int, int]] = field(default_factory=dict)

    def explain(self, key: DocKey, offset: int) -> dict[str, object] | None:
        """What an explain record keeps of the stage for one document: its fused and reranked
        rank (from 1, in the whole ranking) and the reranker's score (null: not sent)."""
        if key not in self.moves:
            return None
        before, after = self.moves[key]
        return {"fusedRank": offset + before + 1, "rank": offset + after + 1, "score": self.scores.get(key)}


# Scores the documents (keys, their texts) in one provider call; raises RerankError when the call
# fails, RerankOverBudget when the tenant's reranker budget is spent (nothing was sent).
Scorer = Callable[[list[DocKey], list[str]], list[float]]


def rerank_page(score: Scorer, provider: str, page: list[DocKey], docs: Mapping[DocKey, StoredDoc],
                text_of: Callable[[StoredDoc], str], candidates: int,
                known: dict[DocKey, float]) -> tuple[list[int], RerankReport]:
    """The page's new order (indexes into `page`) and the report. The first `candidates`
    documents without certificates are scored and re-ordered among their own places; every
    other document keeps its place (ties keep the fused order). `known` holds the scores of this
    read's earlier calls (a stream's earlier events): only the others are sent, in one call,
    and their scores are added to it."""
    movable = [i for i, k in enumerate(page) if not docs[k].certs][:candidates]
    report = RerankReport("reranked", provider, not_sent=sum(1 for k in page if docs[k].certs))
    order = list(range(len(page)))
    if not movable:
        return order, report
    new = [i for i in movable if page[i] not in known]
    if new:
        try:
            got = score([page[i] for i in new], [text_of(docs[page[i]]) for i in new])
            if len(got) != len(new):
                raise RerankError("the reranker scored a different number of passages")
        except RerankOverBudget:
            report.status = "budget"
            return order, report
        except RerankError as e:
            report.status = "timeout" if "Timeout" in str(e) else "failed"
            report.error = str(e)[:200]
            return order, report
        known.update((page[i], float(s)) for i, s in zip(new, got, strict=True))
    report.sent = len(movable)
    report.scores = {page[i]: known[page[i]] for i in movable}
    ranked = sorted(range(len(movable)), key=lambda j: (-known[page[movable[j]]], j))
    for slot, j in zip(movable, ranked, strict=True):
        order[slot] = movable[j]
    report.moves = {page[i]: (i, after) for after, i in enumerate(order)}
    return order, report
