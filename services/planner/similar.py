"""More-like-this and vector queries: the source document kept out of its own ranking, and a
caller's vector used as the query vector.

The source is dropped from each leg's engine result before fusion, ranking and paging (each
leg asks its engine for one hit more), so a page, its count and its cursor never see it: a
page that filtered it out would be one short and shift every later page by one.
"""

from __future__ import annotations

from collections.abc import Sequence

from services.planner.request import ReadRequest
from shared.model import DocKey, Hit, hit
from shared.ports import Candidates, ResolvedCandidates

# The virtual collection of every document the caller may read (more-like-this over all of
# them). A read names it; no document is ever stored in it (services/core/documents.py).
NODES = "semantic.nodes"


def source_of(req: ReadRequest, tenant: str) -> DocKey | None:
    """The document a more-like-this read is about (None: not such a read)."""
    if req.query_doc is None:
        return None
    collection, doc_id, _ = req.query_doc
    return DocKey(tenant, collection, doc_id)


def asked(k: int, source: DocKey | None) -> int:
    """How many hits to ask an engine for so that `k` remain once the source is dropped."""
    return k + 1 if source is not None else k


def without_source_hits(hits: Sequence[Hit], source: DocKey | None, k: int) -> list[Hit]:
    """The engine's hits minus the source, at most `k` of them, in the engine's order."""
    if source is None:
        return list(hits)
    return [h for h in hits if h.key != source][:k]


def without_source(found: Candidates, source: DocKey | None, k: int) -> Candidates:
    """A lexical leg's candidates minus the source. The keys are read at once (a lazy list
    cannot tell which score is the source's): a more-like-this read reads its whole list."""
    if source is None:
        return found
    scores = found.scores
    keys = found.keys(len(scores))
    kept = [hit(key, s) for key, s in zip(keys, scores, strict=False) if key != source][:k]
    return ResolvedCandidates(kept)
