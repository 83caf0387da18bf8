"""The global read's merge (services/planner/fanout.py): each leg's guaranteed share, the rest by
score, prefixes of each leg, keys read only as deep as asked; and the plan's bounds."""

from __future__ import annotations

from services.planner.fanout import (
    REST_BY_NAME,
    GlobalPlan,
    LegReport,
    MergedCandidates,
    fair_merge,
    global_lexical,
    plan_global,
)
from shared.model import DocKey, Hit
from shared.ports import ResolvedCandidates, SearchFilter


def test_each_leg_keeps_its_share_and_the_rest_goes_by_score() -> None:
    big = [10.0, 9.0, 8.0, 7.0, 6.0, 5.0]
    small = [1.0, 0.5]
    picks = fair_merge([big, small], share=2, cap=5)
    assert sorted(picks) == [(0, 0), (0, 1), (0, 2), (1, 0), (1, 1)]  # big: 2 + the 1 free slot; small: its 2
    assert [([big, small][i][r]) for i, r in picks] == [10.0, 9.0, 8.0, 1.0, 0.5]  # best first
    # one top-5 by score alone would have kept none of the small leg
    assert sorted(fair_merge([big, small], share=0, cap=5)) == [(0, r) for r in range(5)]


def test_a_sparse_leg_leaves_its_slots_to_the_others() -> None:
    picks = fair_merge([[5.0, 4.0, 3.0, 2.0], [1.0], []], share=2, cap=6)
    assert sorted(picks) == [(0, 0), (0, 1), (0, 2), (0, 3), (1, 0)]


def test_what_a_leg_keeps_is_a_prefix_even_with_ties() -> None:
    a = [3.0, 2.0, 2.0, 2.0, 1.0]
    b = [2.0, 2.0, 0.1]
    picks = fair_merge([a, b], share=1, cap=5)
    for leg in (0, 1):
        ranks = sorted(r for i, r in picks if i == leg)
        assert ranks == list(range(len(ranks)))
    assert len(picks) == 5


class _Counting:
    """Candidates that count how deep their keys were read."""

    def __init__(self, collection: str, scores: list[float]):
        self.scores = scores
        self.collection = collection
        self.read = 0

    def keys(self, n: int) -> list[DocKey]:
        self.read = max(self.read, min(n, len(self.scores)))
        return [DocKey("t", self.collection, str(i)) for i in range(min(n, len(self.scores)))]


def test_merged_keys_are_read_only_as_deep_as_asked() -> None:
    a, b = _Counting("a", [9.0, 8.0, 7.0, 6.0]), _Counting("b", [8.5, 1.0])
    merged = MergedCandidates([a, b], fair_merge([a.scores, b.scores], share=1, cap=6))
    assert merged.scores == [9.0, 8.5, 8.0, 7.0, 6.0, 1.0]
    assert merged.keys(2) == [DocKey("t", "a", "0"), DocKey("t", "b", "0")]
    assert (a.read, b.read) == (1, 1)
    assert [k.collection for k in merged.keys(10)] == ["a", "b", "a", "a", "a", "b"]
    assert (a.read, b.read) == (4, 2)
    resolved = ResolvedCandidates([])
    assert MergedCandidates([resolved], []).keys(3) == []


class _Names:
    def __init__(self, names: list[str]):
        self.names = names

    def collection_names(self, tenant: str, after: str, limit: int) -> list[str]:
        return sorted(self.names)[:limit]


def test_the_plan_bounds_the_legs_and_says_a_remainder() -> None:
    few = plan_global(_Names(["b", "a"]), "t", 500, 32, 20)  # type: ignore[arg-type]
    assert (few.collections, few.remainder, few.share, few.fetch, few.legs) == (("a", "b"), False, 250, 500, 2)
    many = plan_global(_Names([f"c{i:02}" for i in range(40)]), "t", 500, 32, 20)  # type: ignore[arg-type]
    assert len(many.collections) == 32 and many.remainder and many.legs == 33
    assert many.share == 20 and many.fetch == 40  # max(min_share, ceil(500 / 33)) = 20
    one = plan_global(_Names(["only"]), "t", 500, 32, 20)  # type: ignore[arg-type]
    assert (one.share, one.fetch) == (500, 500)  # one collection: the read a named collection gets
    reserved = plan_global(_Names(["mcp-task-abc", "notes"]), "t", 100, 32, 20)  # type: ignore[arg-type]
    assert reserved.collections == ("notes",) and not reserved.remainder
    assert many.rest == tuple(f"c{i:02}" for i in range(32, 40))  # the rest, named
    names = [f"c{i:04}" for i in range(32 + REST_BY_NAME + 1)]
    huge = plan_global(_Names(names), "t", 500, 32, 20)  # type: ignore[arg-type]
    assert huge.remainder and huge.rest is None  # too many to name: the whole tenant


class _Lexical:
    """A lexical index over fixed hits that records each query's collections and limit."""

    def __init__(self, hits: list[Hit]):
        self.hits = hits
        self.asked: list[tuple[tuple[str, ...] | None, int]] = []

    def candidates(self, flt: SearchFilter, text: str, limit: int) -> ResolvedCandidates:
        self.asked.append((flt.collections, limit))
        found = [h for h in self.hits if flt.collections is None or h.key.collection in flt.collections]
        return ResolvedCandidates(sorted(found, key=lambda h: -h.score)[:limit])


def _hits() -> list[Hit]:
    return [Hit(DocKey("t", c, f"{c}-{i}"), s - i) for c, s in (("a", 10.0), ("b", 9.5), ("c", 3.0), ("d", 2.0))
            for i in range(3)]


def test_the_remainder_names_the_rest_or_searches_the_tenant_without_the_own_legs() -> None:
    flt = SearchFilter("t", None, ("user:x",), certs=frozenset({"hr:pay"}))
    for rest in (("c", "d"), None):
        plan = GlobalPlan(("a", "b"), True, 8, 2, 4, [LegReport("a"), LegReport("b"), LegReport(None)], rest)
        index = _Lexical(_hits())
        merged = global_lexical(index, flt, "q", plan)  # type: ignore[arg-type]
        keys = merged.keys(8)
        assert len(keys) == len(set(keys)) == 8
        assert {k.collection for k in keys} == {"a", "b", "c"}  # the rest's best (c) reached the list
        assert [k.doc_id for k in keys if k.collection == "c"] == ["c-0", "c-1"]
        assert sorted(index.asked, key=str) == sorted([(("a",), 4), (("b",), 4),
                                                      (rest, 4 if rest else 8)], key=str)
        remainder = plan.reports[2]
        # by name it asks for a leg's fetch; over the tenant, the own legs' documents take most of its top 8
        assert remainder.lexical_kept == 2 and remainder.lexical_found == (4 if rest else 2)
