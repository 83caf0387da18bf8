"""Fusion stays honest: the default fusion, chosen leave-one-collection-out.

    python -m bench.fusion_loo --data ../shared/data/cranfield --data ../shared/data/cisi

For each collection: a fresh in-process instance (`services.wiring.build`, the real engines
and planner), the corpus ingested and fully embedded (the cached all-MiniLM-L6-v2 vectors of
`bench/embed_server.py`), then every judged query read once through the planner with
`hybrid`, which gives the query's two legs exactly as the product fuses them: the lexical
candidates (BM25, scores relative to the caller's best) and the semantic hits. Each candidate
fusion is applied to those legs (services/planner/fusion.py, the code the product runs) and
scored with ir-measures; `keyword` and `semantic` are the legs alone.

The rule that picks a fusion from a group of collections: the largest LEAD, on the worst of
them, over the best of keyword, semantic and RRF k=60 (the requirement is to beat all three on
every set, so the pick maximises its smallest margin). Leave-one-collection-out: for each
held-out collection the rule sees only the OTHER collections, and the held-out collection is
reported with that pick, so no held-out figure comes from tuning on the set it reports. The
product default is the rule's pick over all collections (`pooled_pick`; Settings().fusion /
semantic_weight must equal it), evaluated through the planner's own hybrid answer as well, and
must beat keyword, semantic and RRF k=60 on every collection (`default_beats_all`).

No relevance set ships inside an installable package here (ir-datasets and beir download at
run time), so the collections are the dev sets in ../shared/data; pass more `--data` folders
(BEIR layout) to widen the vote.
"""

from __future__ import annotations

import argparse
import json
from collections.abc import Callable
from functools import partial
from pathlib import Path
from typing import Any

from bench import ir
from bench.datasets import Dataset, load
from bench.embed_server import CachedModel
from bench.quality import COLLECTION
from bench.touch_sim import PRINCIPAL, RESULTS, _container, _embed_all, _ingest
from services.planner.fusion import Fused, rrf, zscore
from services.planner.planner import ReadRequest
from shared.config import Settings
from shared.model import DocKey, Hit

LIMIT = 10
Fusion = Callable[[list[Hit], list[Hit], set[DocKey]], list[Fused]]


def _zscore(lx: list[Hit], sm: list[Hit], un: set[DocKey], w: float) -> list[Fused]:
    return zscore(lx, sm, w, unembedded=un)


def _rrf(lx: list[Hit], sm: list[Hit], un: set[DocKey], k: int) -> list[Fused]:
    return rrf(lx, sm, k, un)


def candidates() -> dict[str, Fusion]:
    """The fusions the vote chooses among: z-score at semantic weights 0.3..0.9, RRF at a
    few k (k=60 is the usual RRF constant, and Rifflux's)."""
    out: dict[str, Fusion] = {f"zscore w={w10 / 100:.2f}": partial(_zscore, w=w10 / 100) for w10 in range(30, 95, 5)}
    out.update({f"rrf k={k}": partial(_rrf, k=k) for k in (10, 30, 60, 100)})
    return out


def default_name(s: Settings) -> str:
    return f"zscore w={s.semantic_weight:.2f}" if s.fusion == "zscore" else f"rrf k={s.rrf_k}"


def legs(model: CachedModel, ds: Dataset) -> tuple[dict[str, Any], dict[str, list[str]]]:
    """Every judged query's two legs (and the planner's own hybrid page) on a fully embedded
    instance."""
    c, _ = _container(model, {})
    out: dict[str, Any] = {}
    planner_page: dict[str, list[str]] = {}
    try:
        _ingest(c, ds)
        _embed_all(c, ds)
        for qid, text in ds.judged_queries().items():
            s = c.planner.open(PRINCIPAL, ReadRequest(COLLECTION, text, "hybrid", limit=LIMIT))
            # the documents the planner stands in for (no vector: empty text, denied) are passed
            # on as it passes them
            out[qid] = (s.lexical_hits, s.semantic.hits, s._unembedded())
            planner_page[qid] = [f.key.doc_id for f in s.ranking[:LIMIT]]
    finally:
        c.queue.stop()
    return out, planner_page


def score(ds: Dataset, run: dict[str, list[str]]) -> float:
    return ir.aggregate(run, {q: ds.qrels[q] for q in run})["nDCG@10"]


def evaluate(ds: Dataset, per_query: dict[str, Any]) -> dict[str, float]:
    def ids(ranked: list[Any]) -> list[str]:
        return [h.key.doc_id for h in ranked[:LIMIT]]

    got = {"keyword": score(ds, {q: ids(lx) for q, (lx, _, _) in per_query.items()}),
           "semantic": score(ds, {q: ids(sm) for q, (_, sm, _) in per_query.items()})}
    for name, fuse in candidates().items():
        got[name] = score(ds, {q: ids(fuse(lx, sm, un)) for q, (lx, sm, un) in per_query.items()})
    return got


def lead(scores: dict[str, float], name: str) -> float:
    """How far a fusion is ahead of the best baseline on one collection."""
    return scores[name] - max(scores["keyword"], scores["semantic"], scores["rrf k=60"])


def choose(sets: dict[str, dict[str, float]], among: list[str]) -> str:
    """The candidate whose smallest lead over the baselines, across `among`, is largest."""
    return max(candidates(), key=lambda n: min(lead(sets[s], n) for s in among))


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--data", type=Path, action="append", required=True)
    ap.add_argument("--out", default="fusion_loo")
    a = ap.parse_args()
    model = CachedModel()
    default = default_name(Settings())
    sets: dict[str, dict[str, float]] = {}
    for folder in a.data:
        ds = load(folder)
        per_query, planner_page = legs(model, ds)
        sets[ds.name] = evaluate(ds, per_query)
        sets[ds.name]["default (planner hybrid)"] = score(ds, planner_page)
        print(ds.name, json.dumps(sets[ds.name]), flush=True)
    loo: dict[str, Any] = {}
    for held in sets:
        train = [s for s in sets if s != held] or [held]
        pick = choose(sets, train)
        loo[held] = {"chosen_on": train, "pick": pick, "held_out_ndcg10": sets[held][pick],
                     "default_ndcg10": sets[held][default]}
    rows = {name: {"keyword": r["keyword"], "semantic": r["semantic"], "rrf k=60": r["rrf k=60"],
                   "default": r[default], "default_via_planner": r["default (planner hybrid)"],
                   "loo_pick": loo[name]["pick"], "loo_pick_ndcg10": loo[name]["held_out_ndcg10"],
                   "loo_pick_beats_all": lead(r, loo[name]["pick"]) > 0}
            for name, r in sets.items()}
    beats = {name: r["default"] > max(r["keyword"], r["semantic"], r["rrf k=60"]) for name, r in rows.items()}
    pooled = choose(sets, list(sets))
    doc = {"default": default, "pooled_pick": pooled, "default_is_pooled_pick": pooled == default,
           "rule": "max over candidates of min over sets of (nDCG@10 - max(keyword, semantic, rrf k=60))",
           "measure": "nDCG@10", "sets": rows, "leave_one_out": loo,
           "default_beats_all": beats, "all_candidates": sets,
           "note": "no installable package ships a public relevance set in its wheel (ir-datasets, beir download "
                   "at run time); the collections are ../shared/data"}
    out = RESULTS / f"{a.out}.json"
    out.write_text(json.dumps(doc, indent=1))
    print(json.dumps({"sets": rows, "beats": beats, "pooled_pick": pooled, "default": default}, indent=1))
    print(out)


if __name__ == "__main__":
    main()
