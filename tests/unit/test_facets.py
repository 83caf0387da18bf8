"""Filter tokens (shared/adapters/facets.py): the trie-coded ranges are exact, equality is by type."""

from __future__ import annotations

import math
import random

import pytest

from shared.adapters import facets
from shared.filters import MAX_STRING_CHARS
from shared.ports import FieldCondition


def _in_range(x: float, c: FieldCondition) -> bool:
    return ((c.gt is None or x > c.gt) and (c.gte is None or x >= c.gte)
            and (c.lt is None or x < c.lt) and (c.lte is None or x <= c.lte))


def test_sortable_keys_keep_the_order_of_numbers() -> None:
    xs = [-math.inf, -1e308, -2.5, -1.0, -5e-324, 0.0, 5e-324, 1.0, 2.5, 1e308, math.inf]
    assert [facets.sortable(x) for x in xs] == sorted(facets.sortable(x) for x in xs)
    assert facets.sortable(-0.0) == facets.sortable(0.0)


@pytest.mark.parametrize("seed", range(5))
def test_trie_ranges_hold_exactly_for_the_numbers_inside(seed: int) -> None:
    rng = random.Random(seed)
    pool = [rng.choice([rng.uniform(-1e6, 1e6), rng.randint(-50, 50),
                        rng.uniform(-1, 1) * 10 ** rng.randint(-300, 300)]) for _ in range(300)]
    stored = {x: set(facets.doc_tokens({"f": x}, trie=True)) for x in pool}
    for _ in range(100):
        a, b = rng.choice(pool), rng.choice(pool)
        bounds: dict[str, float] = {}
        if rng.random() < 0.8:
            bounds["gte" if rng.random() < 0.5 else "gt"] = min(a, b)
        if rng.random() < 0.8:
            bounds["lte" if rng.random() < 0.5 else "lt"] = max(a, b)
        cond = FieldCondition("f", "range", gt=bounds.get("gt"), gte=bounds.get("gte"), lt=bounds.get("lt"),
                              lte=bounds.get("lte"))
        tokens = set(facets.condition_tokens(cond))
        assert len(tokens) <= 16 * 30
        for x in pool:
            assert bool(tokens & stored[x]) == _in_range(x, cond), (x, bounds)


def test_equality_is_by_type() -> None:
    def eq(value: str | int | float | bool, stored: object) -> bool:
        return facets.holds(FieldCondition("f", "eq", (value,)), set(facets.doc_tokens({"f": stored}, trie=True)))

    assert eq(1, 1.0) and eq(1.0, 1) and eq("a", ["b", "a"]) and eq(True, [False, True])
    assert not eq(True, 1) and not eq(1, True) and not eq("1", 1) and not eq(1, "1") and not eq(0, False)
    assert not eq("a", {"nested": "a"})  # top-level fields only


def test_tokens_are_bounded_and_long_values_still_compare() -> None:
    long = "é" * 1000  # 2,000 bytes: hashed
    (tok,) = facets.doc_tokens({"f" * 300: long}, trie=False)
    assert len(tok.encode()) <= facets.MAX_TOKEN_BYTES
    assert facets.eq_tokens(FieldCondition("f" * 300, "eq", (long,))) == [tok]
    assert facets.eq_tokens(FieldCondition("f" * 300, "eq", (long[:-1] + "x",))) != [tok]
    # longer than any filter value the API accepts (shared/filters.py): not a filter token at all
    assert facets.doc_tokens({"body": "x" * (MAX_STRING_CHARS + 1)}, trie=True) == []
    assert len(facets.doc_tokens({"n" * 300: 5}, trie=True)) == 16  # long names: hashed prefix tokens


def test_non_finite_and_huge_numbers_are_not_indexed() -> None:
    assert facets.doc_tokens({"a": math.nan, "b": math.inf, "c": 10 ** 400}, trie=True) == []
    assert facets.num_payload({"a": math.nan, "b": [1, True, "2", 3.5]}) == {facets.num_field("b"): [1.0, 3.5]}
