from __future__ import annotations

import pytest

from services.planner.fusion import rrf, single
from shared.model import DocKey, Hit


def k(i: str) -> DocKey:
    return DocKey("t", "c", i)


def test_rrf_k60_ranks_from_one() -> None:
    lex = [Hit(k("a"), 9.0), Hit(k("b"), 5.0)]
    sem = [Hit(k("b"), 0.9), Hit(k("c"), 0.8)]
    out = {f.key.doc_id: f for f in rrf(lex, sem, 60)}
    assert out["a"].score == pytest.approx(1 / 61)
    assert out["b"].score == pytest.approx(1 / 62 + 1 / 61)
    assert out["c"].score == pytest.approx(1 / 62)
    assert out["b"].matched_by == ["keyword", "semantic"]
    assert (out["b"].lexical_rank, out["b"].semantic_rank) == (2, 1)
    assert [f.key.doc_id for f in rrf(lex, sem, 60)] == ["b", "a", "c"]


def test_rrf_ties_are_deterministic() -> None:
    a = rrf([Hit(k("x"), 1.0)], [Hit(k("y"), 1.0)])
    b = rrf([Hit(k("x"), 1.0)], [Hit(k("y"), 1.0)])
    assert [f.key for f in a] == [f.key for f in b] == [k("x"), k("y")]


def test_single_keeps_engine_scores() -> None:
    out = single([Hit(k("a"), 3.5)], "lexical")
    assert out[0].score == 3.5 and out[0].lexical_rank == 1 and out[0].matched_by == ["keyword"]
