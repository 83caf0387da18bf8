"""GET /v1/explain/{explainId}: why a result is where it is."""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import BaseModel, Field, RootModel
from pydantic.json_schema import SkipJsonSchema


class MatchReason(BaseModel):
    """A leg that found the document: its rank and score there; for the keyword leg, per field,
    the highlight fragments of the query's terms (as a read with include.highlights shows them)."""

    type: Literal["match"]
    leg: Literal["keyword", "semantic"]
    rank: int = Field(ge=1, description="the document's rank in that leg, from 1")
    score: float = Field(description=(
        "the leg's own score: keyword, BM25 relative to the best of the caller's results; semantic, "
        "the cosine similarity"))
    field: str | SkipJsonSchema[None] = Field(default=None, description=(
        "the document field the highlights come from (`_all` for a fragment across fields)"))
    highlights: list[str] | SkipJsonSchema[None] = Field(default=None, description=(
        "fragments with the matched terms in <b>, HTML-escaped"))


class EdgeHop(BaseModel):
    """One edge of a path, as stored in `semantic.edges`."""

    edge: str = Field(description="the edge document's id")
    from_: str = Field(alias="from", description="`<collection>/<id>`")
    to: str = Field(description="`<collection>/<id>`")
    predicate: str
    weight: float = Field(description="0 to 1; 1 when the edge sets none")


class EdgeReason(BaseModel):
    """Reached through the graph overlay: a read's `graph` hydration listed it under a result."""

    type: Literal["edge"]
    path: list[str] = Field(description="`collection/id` of each document on the way, the source first")
    edges: list[EdgeHop] | SkipJsonSchema[None] = Field(default=None, description=(
        "the edges of the path, in order (each as stored: it may point either way)"))
    depth: int | SkipJsonSchema[None] = Field(default=None, ge=1, le=2, description="edges from the result")


class CertReason(BaseModel):
    """A certificate the document requires, which the caller holds."""

    type: Literal["cert"]
    issuer: str = Field(description="the part of the certificate before the first `:`")
    name: str = Field(description="the part after it")
    rule: Literal["required"] = Field(description="`required`: a reader must hold it")


class NotEmbeddedReason(BaseModel):
    """Why the document has no vector in the ranking's space (from its semantic state now)."""

    type: Literal["not_embedded"]
    status: str = Field(description="its semantic status: none, queued, stale, denied, deferred, failed")
    reason: str | None = Field(description=(
        "why, as the sidecar says: a policy rule, the writer's intent, `budget`, `cert`, ..."))
    space: str


ExplainReason = Annotated[MatchReason | EdgeReason | CertReason | NotEmbeddedReason, Field(discriminator="type")]


class RerankContribution(BaseModel):
    """What the read's rerank stage (`rerank: true`) did with the document."""

    fusedRank: int = Field(description="its rank in the fused ranking, from 1")
    rank: int = Field(description="its rank as shown, after the reranker re-ordered the page")
    score: float | None = Field(description="the reranker's score; null: not sent (it carries certificates, "
                                            "or was past VIBE_READ_RERANK_CANDIDATES) and kept its place")


class LegContribution(BaseModel):
    """What one leg put into the ranking's score; the contributions sum to `score`."""

    leg: Literal["keyword", "semantic"]
    rank: int | None = Field(description="rank in the leg, from 1; null: the leg did not return it")
    raw: float | None = Field(description=(
        "the leg's own score (keyword: BM25 relative to the best of the caller's results, never raw "
        "BM25; semantic: cosine similarity); null: the leg did not return it"))
    normalised: float = Field(description=(
        "z-score fusion: the leg's z-score (its floor when the leg did not return it); RRF: 1/(k + rank); "
        "one leg alone: the raw score"))
    weight: float
    contribution: float = Field(description="weight x normalised: this leg's share of `score`")
    standIn: bool | SkipJsonSchema[None] = Field(default=None, description=(
        "true: the document has no vector yet and its semantic share is estimated from its keyword one"))


class Explanation(BaseModel):
    """Why a result is where it is: the fusion used, each leg's contribution, and the reasons."""

    id: str
    collection: str
    strategy: Literal["keyword", "semantic", "hybrid"]
    score: float = Field(description="the ranking's own score (the contributions' sum)")
    fusion: Literal["zscore", "rrf", "none"] = Field(description="the hybrid fusion used; none for one leg")
    shownScore: float = Field(description="`score` as the answer showed it, in (0, 1]")
    weights: dict[str, float] = Field(description="each leg's weight in the fusion")
    contributions: list[LegContribution]
    reasons: list[ExplainReason]
    expiresAt: float = Field(description="Unix time after which the explainId answers 404")
    rerank: RerankContribution | SkipJsonSchema[None] = Field(default=None, description=(
        "the read asked for `rerank: true` and the reranker answered"))


class NeighborExplanation(BaseModel):
    """Why a neighbour a read's `graph` hydration showed is there: the edge path from its result.
    Every edge and document on the path is checked again at lookup; a path no longer wholly
    readable answers 404."""

    id: str
    collection: str
    strategy: Literal["graph"]
    reasons: list[ExplainReason]
    expiresAt: float = Field(description="Unix time after which the explainId answers 404")


class ExplainAnswer(RootModel[Explanation | NeighborExplanation]):
    """GET /v1/explain/{explainId}: a ranked result's explanation, or a graph neighbour's edge path."""
