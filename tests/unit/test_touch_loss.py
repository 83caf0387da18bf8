"""bench.touch_loss's bookkeeping: which cause a query's loss is put under, and the bands."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from bench.touch_loss import band, loss_summary

Doc = tuple[int | None, bool]  # lexical rank, embedded


def _docs(rows: Sequence[Doc]) -> list[dict[str, object]]:
    return [{"doc": f"d{i}", "lexical_rank": r, "embedded": e} for i, (r, e) in enumerate(rows)]


def _q(asks: int, eager: float, lazy: float, missing: Sequence[Doc] = (), extra: Sequence[Doc] = ()) -> dict[str, Any]:
    return {"query": "q", "asks": asks, "eager": eager, "lazy": lazy, "missing": _docs(missing), "extra": _docs(extra)}


def test_bands_cover_every_rank_once() -> None:
    assert [band(r) for r in (0, 9, 10, 14, 15, 39, 40, 99, 100, 5000, None)] == [
        "0-10", "0-10", "10-15", "10-15", "15-20", "30-40", "40-60", "60-100", "100+", "100+", "not lexical"]


def test_a_loss_goes_to_the_first_cause_that_explains_it() -> None:
    rows = [
        _q(1, 0.8, 0.5, missing=[(12, False), (3, True)]),  # a cold relevant document missing: cold
        _q(2, 0.6, 0.5, missing=[(25, True)]),  # missing, but embedded: fusion ranked it lower
        _q(3, 0.4, 0.6, extra=[(11, True)]),  # lazy found one eager did not: a gain (negative loss)
        _q(5, 0.5, 0.45),  # the same relevant documents, another order
    ]
    s = loss_summary(rows)
    assert s["loss_by_cause"] == {"gained": -0.2, "missing_cold": 0.3, "missing_embedded": 0.1, "order": 0.05}
    assert s["missing_relevant_by_band"] == {"0-10 embedded": 1, "10-15 cold": 1, "20-30 embedded": 1}
    assert s["by_asks"]["1"] == {"queries": 1, "eager": 0.8, "lazy": 0.5}
    assert s["by_asks"]["3+"]["queries"] == 2
    assert s["ratio"] == round(2.05 / 2.3, 4) and s["query_instances"] == 4
