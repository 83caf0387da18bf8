"""IR metrics through ir-measures (trec_eval underneath), never hand-written."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import ir_measures
from ir_measures import RR, R, nDCG

MEASURES = {"nDCG@10": nDCG @ 10, "recall@100": R @ 100, "MRR@10": RR @ 10}

Run = Mapping[str, Sequence[str]]  # query id -> ranked doc ids


def _run_dict(run: Run) -> dict[str, dict[str, float]]:
    # trec_eval sorts by score: give strictly decreasing scores that keep our order.
    # An empty ranking becomes one unjudged placeholder, so the query scores 0 instead of
    # silently dropping out of the mean.
    return {q: {d: float(len(ranked) - i) for i, d in enumerate(ranked)} if ranked else {"__none__": 0.0}
            for q, ranked in run.items()}


def aggregate(run: Run, qrels: Mapping[str, Mapping[str, int]]) -> dict[str, float]:
    """Mean of each measure over the judged queries; a query with no results scores 0."""
    full = {q: list(run.get(q, [])) for q in qrels}
    scores = ir_measures.calc_aggregate(list(MEASURES.values()), qrels, _run_dict(full))
    return {name: round(float(scores[m]), 4) for name, m in MEASURES.items()}


def per_query(run: Run, qrels: Mapping[str, Mapping[str, int]], measure: str = "nDCG@10") -> dict[str, float]:
    full = {q: list(run.get(q, [])) for q in qrels if q in run}
    out = {q: 0.0 for q in full}
    for m in ir_measures.iter_calc([MEASURES[measure]], qrels, _run_dict(full)):
        if m.query_id in out:  # the evaluator also reports judged queries absent from the run
            out[m.query_id] = float(m.value)
    return out
