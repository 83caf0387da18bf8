from __future__ import annotations

import statistics

import pytest

from services.planner.fusion import AGREE, rrf, single, stand_in_line, zscore
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


def test_zscore_weighs_standardised_scores() -> None:
    lex = [Hit(k("a"), 10.0), Hit(k("b"), 6.0), Hit(k("c"), 2.0)]  # mean 6, sd ~3.27
    sem = [Hit(k("c"), 0.9), Hit(k("b"), 0.5), Hit(k("a"), 0.1)]  # mean 0.5, sd ~0.33
    out = {f.key.doc_id: f for f in zscore(lex, sem, semantic_weight=0.8)}
    # c: lexical z -1.22, semantic z +1.22 -> 0.2*-1.22 + 0.8*1.22 = +0.73
    assert out["c"].score == pytest.approx(0.6 * 1.2247, abs=1e-3)
    assert out["b"].score == pytest.approx(0.0, abs=1e-9)
    assert [f.key.doc_id for f in zscore(lex, sem, 0.8)] == ["c", "b", "a"]
    assert [f.key.doc_id for f in zscore(lex, sem, 0.2)] == ["a", "b", "c"]


def test_zscore_document_missing_from_a_leg_gets_that_legs_floor() -> None:
    lex = [Hit(k("a"), 10.0), Hit(k("b"), 2.0)]
    sem = [Hit(k("b"), 0.9), Hit(k("c"), 0.1)]
    out = {f.key.doc_id: f for f in zscore(lex, sem, semantic_weight=0.5)}
    # a has no semantic score: it gets the semantic floor (c's z = -1), c the lexical floor (b's z = -1)
    assert out["a"].score == pytest.approx(0.5 * 1 + 0.5 * -1)
    assert out["c"].score == pytest.approx(0.5 * -1 + 0.5 * -1)
    assert out["a"].semantic_rank is None and out["c"].lexical_rank is None
    assert out["b"].matched_by == ["keyword", "semantic"]


def test_zscore_with_an_empty_leg_keeps_the_other_legs_order() -> None:
    lex = [Hit(k("a"), 3.0), Hit(k("b"), 2.0), Hit(k("c"), 1.0)]
    assert [f.key.doc_id for f in zscore(lex, [], 0.8)] == ["a", "b", "c"]


def test_zscore_unembedded_candidate_stands_in_with_its_lexical_score() -> None:
    # a: the best keyword match, not embedded yet; b, c embedded; d found by the semantic leg only.
    lex = [Hit(k("a"), 10.0), Hit(k("b"), 6.0), Hit(k("c"), 2.0)]
    sem = [Hit(k("b"), 0.9), Hit(k("c"), 0.5), Hit(k("d"), 0.1)]
    floor = [f.key.doc_id for f in zscore(lex, sem, 0.7)]
    lazy = {f.key.doc_id: f for f in zscore(lex, sem, 0.7, unembedded={k("a")})}
    assert floor.index("a") == 2  # at the semantic floor a sinks below the weaker embedded c
    lz_a = lazy["a"].score
    assert lz_a == pytest.approx((10.0 - 6.0) / statistics.pstdev([10.0, 6.0, 2.0]))  # weights sum to 1
    assert [d for d, _ in sorted(((d, f.score) for d, f in lazy.items()), key=lambda x: -x[1])][0] == "a"
    assert lazy["a"].semantic_rank is None and lazy["a"].matched_by == ["keyword"]


def test_zscore_unembedded_weak_keyword_match_is_not_put_below_the_semantic_floor() -> None:
    # c: a weak keyword match with no vector; its lexical z (-1.22) is below the semantic
    # floor (-0.71): it must not score below a document known to miss the semantic hits.
    lex = [Hit(k("a"), 10.0), Hit(k("b"), 9.0), Hit(k("c"), 1.0)]
    sem = [Hit(k("a"), 0.9), Hit(k("d"), 0.8), Hit(k("e"), 0.1)]
    lm, ls = statistics.fmean([10.0, 9.0, 1.0]), statistics.pstdev([10.0, 9.0, 1.0])
    sm, ss = statistics.fmean([0.9, 0.8, 0.1]), statistics.pstdev([0.9, 0.8, 0.1])
    lz, floor = (1.0 - lm) / ls, (0.1 - sm) / ss
    assert lz < floor
    out = {f.key.doc_id: f.score for f in zscore(lex, sem, 0.7, unembedded={k("c")})}
    assert out["c"] == pytest.approx(0.3 * lz + 0.7 * floor)


def test_rrf_unembedded_candidate_counts_its_lexical_rank_twice() -> None:
    lex = [Hit(k("a"), 9.0), Hit(k("b"), 5.0)]
    sem = [Hit(k("b"), 0.9)]
    out = {f.key.doc_id: f.score for f in rrf(lex, sem, 60, unembedded={k("a")})}
    assert out["a"] == pytest.approx(2 / 61) and out["b"] == pytest.approx(1 / 62 + 1 / 61)
    assert rrf(lex, sem, 60, unembedded={k("a")})[0].key.doc_id == "a"
    assert rrf(lex, sem, 60)[0].key.doc_id == "b"


def test_zscore_default_weight_is_the_products() -> None:
    """Callers of zscore() without a weight (benchmarks, explain) fuse as a served read does:
    the default chosen leave-one-collection-out (bench/fusion_loo.py) is Settings'."""
    import inspect

    from shared.config import Settings

    assert inspect.signature(zscore).parameters["semantic_weight"].default == Settings().semantic_weight


def _loose_legs() -> tuple[list[Hit], list[Hit]]:
    """Twelve keyword candidates; the ten embedded ones (e0..e9) have semantic scores that do
    not follow their keyword scores; u0 (the best keyword match) and u1 have no vector."""
    lex = [Hit(k("u0"), 20.0), *(Hit(k(f"e{i}"), 19.0 - i) for i in range(10)), Hit(k("u1"), 5.0)]
    sem = [Hit(k(f"e{i}"), 0.5 + 0.04 * ((i * 7) % 10)) for i in range(10)]
    sem.sort(key=lambda h: -h.score)
    return lex, sem


def test_zscore_unembedded_candidate_stands_in_with_the_querys_own_line() -> None:
    """With enough embedded candidates, an unembedded one is given the semantic z that the
    query's embedded candidates show at its lexical z (least squares, slope in [0, 1]), not its
    lexical z: here the legs are unrelated, so the best keyword match without a vector no
    longer outranks the embedded document the semantic leg likes best."""
    lex, sem = _loose_legs()
    unembedded = {k("u0"), k("u1")}
    agree = zscore(lex, sem, 0.55, unembedded=unembedded, stand_in="agree")
    line = zscore(lex, sem, 0.55, unembedded=unembedded)
    assert agree[0].key.doc_id == "u0"
    assert line[0].key.doc_id != "u0"
    by = {f.key.doc_id: f.score for f in line}
    lm, ls = statistics.fmean(h.score for h in lex), statistics.pstdev(h.score for h in lex)
    sm, ss = statistics.fmean(h.score for h in sem), statistics.pstdev(h.score for h in sem)
    floor = (min(h.score for h in sem) - sm) / ss
    lz = (20.0 - lm) / ls
    xs = [(h.score - lm) / ls for h in lex[1:11]]
    ys = [(next(s.score for s in sem if s.key == h.key) - sm) / ss for h in lex[1:11]]
    mx, my = statistics.fmean(xs), statistics.fmean(ys)
    b = min(1.0, max(0.0, sum((x - mx) * (y - my) for x, y in zip(xs, ys, strict=True))
                     / sum((x - mx) ** 2 for x in xs)))
    stand_in = max(min(lz, my - b * mx + b * lz), floor)
    assert by["u0"] == pytest.approx(0.45 * lz + 0.55 * stand_in)
    assert stand_in < lz


def test_the_line_never_puts_a_candidate_below_the_semantic_floor_nor_above_its_lexical_z() -> None:
    lex, sem = _loose_legs()
    lm, ls = statistics.fmean(h.score for h in lex), statistics.pstdev(h.score for h in lex)
    sm, ss = statistics.fmean(h.score for h in sem), statistics.pstdev(h.score for h in sem)
    floor = (min(h.score for h in sem) - sm) / ss
    out = {f.key.doc_id: f.score for f in zscore(lex, sem, 0.5, unembedded={k("u0"), k("u1")})}
    lz_u1 = (5.0 - lm) / ls
    assert out["u1"] >= 0.5 * lz_u1 + 0.5 * floor - 1e-9
    lz_u0 = (20.0 - lm) / ls
    assert out["u0"] <= 0.5 * lz_u0 + 0.5 * lz_u0 + 1e-9


def test_stand_in_line_needs_enough_embedded_candidates() -> None:
    lex, sem = _loose_legs()
    fused = {f.key: f for f in zscore(lex, sem, 0.5)}
    few = {h.key for h in lex[:9]}  # only three candidates embedded
    stats = ((0.0, 1.0), (0.0, 1.0))
    assert stand_in_line(lex, fused, few, *stats, -1.0, 200) == AGREE
    assert stand_in_line(lex, fused, set(), *stats, -1.0, 200) == AGREE
    drawn = stand_in_line(lex, fused, {k("u0")}, *stats, -1.0, 200)
    assert drawn.pairs == 11 and 0.0 <= drawn.b <= 1.0 and drawn.spread > 0
