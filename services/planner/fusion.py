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


def _ranked(hits: Sequence[Hit]) -> dict[DocKey, tuple[int, float]]:
    return {h.key: (i + 1, h.score) for i, h in enumerate(hits)}


def rrf(lexical: Sequence[Hit], semantic: Sequence[Hit], k: int = 60) -> list[Fused]:
    """Sum of 1/(k + rank) over the lists a document appears in; ties broken by key so the
    order is deterministic."""
    lex, sem = _ranked(lexical), _ranked(semantic)
    out = []
    for key in dict.fromkeys([*lex, *sem]):
        f = Fused(key, 0.0)
        if key in lex:
            f.lexical_rank, f.lexical_score = lex[key]
            f.score += 1.0 / (k + f.lexical_rank)
            f.matched_by.append("keyword")
        if key in sem:
            f.semantic_rank, f.semantic_score = sem[key]
            f.score += 1.0 / (k + f.semantic_rank)
            f.matched_by.append("semantic")
        out.append(f)
    out.sort(key=lambda f: (-f.score, f.key.collection, f.key.doc_id))
    return out


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
