"""Small helpers the agent tools share, written against the Container's ports only."""

from __future__ import annotations

import math
from collections.abc import Sequence

from services.container import Container
from services.core.usage import OverBudget, embed_query_within_cap
from services.planner.planner import ReadRequest, ReadSession
from shared.metrics import METRICS
from shared.model import DocKey, EmbedJob, Hit, Principal, SemanticStatus, StoredDoc
from shared.ports import Embedder, EmbedderError, SearchFilter


def cosine(a: Sequence[float], b: Sequence[float]) -> float:
    """Cosine similarity; a zero denominator gives 0.0 (as Rifflux scores it), never NaN."""
    if len(a) != len(b):
        raise ValueError("cosine of vectors of different dimensions")
    dot = sum(x * y for x, y in zip(a, b, strict=True))
    na = math.sqrt(sum(x * x for x in a))
    nb = math.sqrt(sum(y * y for y in b))
    return 0.0 if na == 0.0 or nb == 0.0 else dot / (na * nb)


def space_embedder(c: Container, tenant: str) -> Embedder:
    """The embedder of the tenant's active space (a migrated tenant reads its new model)."""
    return c.embedders(c.spaces.active(tenant), tenant)


def embed_query(c: Container, emb: Embedder, tenant: str, collection: str, text: str) -> list[float]:
    """A tool's query embedding under the same daily cap and usage ledger as the read path's
    (usage.embed_query_within_cap). Raises OverBudget (no call made) or what the embedder raises."""
    return embed_query_within_cap(c.planner.usage, emb, tenant, collection, text, space=c.spaces.active(tenant),
                                  purpose="tool")


def query_vector(c: Container, text: str, tenant: str | None = None,
                 collection: str = "any") -> tuple[list[float] | None, str | None]:
    """The query's vector in the tenant's active space, or None (as in Rifflux: the semantic
    leg is then empty) with the reason, as a read's diagnostics name it: `budget` (the tenant's
    daily token cap is spent), `embedder_unavailable`, `dimension_mismatch`."""
    try:
        emb = c.embedder if tenant is None else space_embedder(c, tenant)
        vec = embed_query(c, emb, tenant, collection, text) if tenant is not None else emb.embed_query(text)
    except OverBudget:
        return None, "budget"
    except (EmbedderError, LookupError):
        return None, "embedder_unavailable"
    return (vec, None) if len(vec) == emb.dim else (None, "dimension_mismatch")


def exact_semantic(c: Container, flt: SearchFilter, qvec: list[float], limit: int,
                   only: Sequence[DocKey] | None = None) -> list[Hit]:
    """ANN candidates inside the filter, re-scored with exact cosine over the stored vectors
    of the active space. Vectors of another dimension are skipped, never compared (dim
    safety); the order is by descending cosine."""
    if limit <= 0:
        return []
    c.follower.catch_up(tenant=flt.tenant)
    space = c.spaces.active(flt.tenant)
    # A zero-norm query has no direction: any stored vector is as close as any other, so the
    # candidates come from an arbitrary probe direction and every cosine is 0.0 (rows with
    # cosine 0.0, not an empty semantic leg, as Rifflux clients expect).
    probe = qvec if any(qvec) else [1.0] + [0.0] * (len(qvec) - 1)
    hits = c.vectors.search(space, flt, probe, limit, only=only)
    stored = c.store.vectors_for([h.key for h in hits], space)
    # a long document scores by its best passage, as the vector index ranks it
    scored = [Hit(h.key, max(cosine(qvec, p) for p in vs)) for h in hits if (vs := stored.get(h.key))
              and len(vs[0]) == len(qvec)]
    scored.sort(key=lambda h: (-h.score, h.key.collection, h.key.doc_id))
    return scored


def embed_now(c: Container, docs: Sequence[StoredDoc]) -> int:
    """Embed freshly written documents through the same EmbedHandler the workers run
    (eligibility, redaction, dim safety, idempotency), synchronously, then let the vector
    index follow. Tools that ingest (reindex, extract_key_info) answer right after, so their
    vectors must exist when they return. Returns how many are ready."""
    if not docs:
        return 0
    space = c.spaces.active(docs[0].key.tenant)  # a tool writes for one caller, so one tenant
    sides = c.store.sidecars([d.key for d in docs], space)
    jobs = [EmbedJob(d.key, space, d.content_hash, priority="bulk", purpose="tool") for d in docs
            if (s := sides.get(d.key)) is None or s.status != SemanticStatus.READY]
    # The tenant's per-minute bucket applies to tools too; what it does not grant now
    # stays lazy and is embedded when a query touches it.
    granted = c.planner.budget.take(docs[0].key.tenant, len(jobs)) if jobs else 0
    if granted < len(jobs):
        METRICS.budget_denied.labels(budget="tenant").inc(len(jobs) - granted)
    jobs = jobs[:granted]
    batch = max(1, c.settings.embed_batch_size)
    for i in range(0, len(jobs), batch):
        c.handler.run(jobs[i:i + batch])
    c.follower.catch_up()
    after = c.store.sidecars([d.key for d in docs], space)
    return sum(1 for s in after.values() if s.status == SemanticStatus.READY)


def touch(c: Container, principal: Principal, collection: str, query: str, hits: list[Hit]) -> int:
    """Lazy on-touch embedding for candidates a tool's lexical leg found cold: the
    planner's own budgeted touch, so the next semantic query finds them ready."""
    session = ReadSession(c.planner, principal, ReadRequest(collection=collection, q=query, strategy="keyword"))
    session.lexical_hits = hits
    session.touch()
    return session.queued_by_us


def readable(c: Container, principal: Principal, keys: Sequence[DocKey]) -> dict[DocKey, StoredDoc]:
    """Documents re-checked against the caller after the engines' filtered queries: defence
    in depth, so nothing outside the caller's tenant and ACL is ever rendered."""
    docs = c.store.get_docs(list(keys))
    return {k: d for k, d in docs.items() if d.readable_by(principal)}
