"""Rank fusion. Reciprocal Rank Fusion with k=60 and ranks from 1 (seed 002), the Vibe
default for `hybrid`."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

from shared.model import DocKey, Hit


@dataclass
class Fused:
    key: DocKey
    score: float
    lexical_rank: int | None = None
    lexical_score: float | None = None
    semantic_rank: int | None = None
    semantic_score: float | None = None
    matched_by: list[str] = field(default_factory=list)


def rrf(lexical: Sequence[Hit], semantic: Sequence[Hit], k: int = 60) -> list[Fused]:
    """Sum of 1/(k + rank) over the lists a document appears in; ties broken by key so the
    order is deterministic. One pass per list: this runs on every answer, with ~500
    lexical candidates, so it avoids hashing each key more than once or twice."""
    out: dict[DocKey, Fused] = {}
    for rank, h in enumerate(lexical, 1):
        out[h.key] = Fused(h.key, 1.0 / (k + rank), rank, h.score, matched_by=["keyword"])
    for rank, h in enumerate(semantic, 1):
        f = out.get(h.key)
        if f is None:
            f = out[h.key] = Fused(h.key, 0.0)
        f.semantic_rank, f.semantic_score = rank, h.score
        f.score += 1.0 / (k + rank)
        f.matched_by.append("semantic")
    fused = list(out.values())
    fused.sort(key=lambda f: (-f.score, f.key.collection, f.key.doc_id))
    return fused


def single(hits: Sequence[Hit], leg: str) -> list[Fused]:
    """One leg's ranking in the fused shape, scores kept as the engine gave them."""
    out = []
    for i, h in enumerate(hits):
        f = Fused(h.key, h.score, matched_by=["keyword" if leg == "lexical" else "semantic"])
        if leg == "lexical":
            f.lexical_rank, f.lexical_score = i + 1, h.score
        else:
            f.semantic_rank, f.semantic_score = i + 1, h.score
        out.append(f)
    return out
