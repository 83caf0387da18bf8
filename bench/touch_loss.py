"""Where the touch policy loses against eager hybrid, and where its spend goes.

    python -m bench.touch_loss --data ../shared/data/cranfield --seeds 1,2,3,4,5,6

`bench.touch_sim` gives two numbers per setting (quality over eager, spend over the oracle);
this replays the same streams with the default policy and says why they are what they are, so
the next policy idea starts from the loss instead of from a guess:

- `loss`: the nDCG@10 lazy gives up on the distinct queries of each stream's second half, split
  by cause: a relevant document of eager's page missing from lazy's and still without a vector
  (`missing_cold`), missing although it has one (`missing_embedded`: fusion of a partly
  embedded corpus ranks it lower), neither (`order`); `gained` is what lazy's own extra relevant
  documents win back. Also by how often the query was asked (a first touch or a repeat) and
  where the missing relevant documents sit in the query's lexical ranking.
- `spend`: the documents each ask embedded, by the how-many-th ask of its query it was, and how
  many of them some eager first page of the stream shows (`useful`).
- `oracle_yield`: over every judged query, the share of each lexical-rank band that eager
  hybrid's first page shows, also by `disagree` (how many of the lexical top 10 the page
  leaves out; a page takes exactly that many documents from below the top 10). It is what
  digging a band can buy at best, whatever policy picks inside it.

Writes bench/results/touch-loss-<dataset>.json.
"""

from __future__ import annotations

import argparse
import json
import statistics
from collections import Counter, defaultdict
from pathlib import Path
from typing import Any

from bench import ir
from bench.datasets import Dataset, load
from bench.embed_server import CachedModel
from bench.lazy import query_population, zipf_stream
from bench.quality import COLLECTION
from bench.touch_sim import PRINCIPAL, RESULTS, Eager, SimBudget, _ask, _close, _container, _embedded, _ingest, eager
from services.wiring import Container

BANDS = ((0, 10), (10, 15), (15, 20), (20, 30), (30, 40), (40, 60), (60, 100), (100, None))


def band(rank: int | None) -> str:
    if rank is None:
        return "not lexical"
    for lo, hi in BANDS:
        if hi is None or rank < hi:
            return f"{lo}-{hi}" if hi is not None else f"{lo}+"
    raise AssertionError("unreachable")


def lexical_ranks(c: Container, text: str, depth: int = 2000) -> list[str]:
    """The query's lexical ranking, under the bench principal's filter as the planner runs it."""
    flt = c.planner.search_filter(PRINCIPAL, COLLECTION)
    return [h.key.doc_id for h in c.lexical.search(flt, text, depth)]


def replay(model: CachedModel, ds: Dataset, base: Eager, seed: int, length: int,
           qids: list[str]) -> dict[str, Any]:
    stream = zipf_stream(qids, length, seed)
    oracle = {d for q in set(stream) for d in base.top[q]}
    queries = ds.judged_queries()
    c, _ = _container(model, {})
    c.planner.budget = SimBudget(0)
    final: dict[str, list[str]] = {}
    asks: Counter[str] = Counter()
    spend: dict[str, list[int]] = defaultdict(lambda: [0, 0])
    try:
        _ingest(c, ds)
        before: set[str] = set()
        for qid in stream:
            asks[qid] += 1
            final[qid] = _ask(c, queries[qid])[1]
            now = _embedded(c, ds)
            new, before = now - before, now
            nth = str(min(asks[qid], 4)) if asks[qid] < 4 else "4+"
            spend[nth][0] += len(new)
            spend[nth][1] += len(new & oracle)
        embedded = _embedded(c, ds)
        half = sorted(set(stream[len(stream) // 2:]))
        per_query = []
        for q in half:
            ranks = {d: i for i, d in enumerate(lexical_ranks(c, queries[q]))}
            rel = ds.qrels.get(q, {})
            e, lz = base.top[q], final[q]

            per_query.append({"query": q, "asks": asks[q], "eager": ir.per_query({q: e}, ds.qrels).get(q, 0.0),
                              "lazy": ir.per_query({q: lz}, ds.qrels).get(q, 0.0),
                              "missing": _relevant([d for d in e if d not in lz], rel, ranks, embedded),
                              "extra": _relevant([d for d in lz if d not in e], rel, ranks, embedded)})
    finally:
        _close(c)
    return {"seed": seed, "queries": per_query,
            "spend": {k: {"embedded": v[0], "useful": v[1]} for k, v in sorted(spend.items())}}


def _relevant(docs: list[str], rel: dict[str, int], ranks: dict[str, int],
              embedded: set[str]) -> list[dict[str, Any]]:
    return [{"doc": d, "lexical_rank": ranks.get(d), "embedded": d in embedded} for d in docs if rel.get(d, 0) > 0]


def loss_summary(rows: list[dict[str, Any]]) -> dict[str, Any]:
    cause: Counter[str] = Counter()
    by_asks: dict[str, list[float]] = defaultdict(lambda: [0.0, 0.0, 0])
    where: Counter[str] = Counter()
    for r in rows:
        gap = r["eager"] - r["lazy"]
        cold = [m for m in r["missing"] if not m["embedded"]]
        if cold:
            cause["missing_cold"] += gap
        elif r["missing"]:
            cause["missing_embedded"] += gap
        elif r["extra"]:
            cause["gained"] += gap
        else:
            cause["order"] += gap
        for m in r["missing"]:
            where[f"{band(m['lexical_rank'])} {'embedded' if m['embedded'] else 'cold'}"] += 1
        k = "1" if r["asks"] == 1 else "2" if r["asks"] == 2 else "3+"
        by_asks[k][0] += r["eager"]
        by_asks[k][1] += r["lazy"]
        by_asks[k][2] += 1
    eager_sum = sum(r["eager"] for r in rows)
    return {"ratio": round(sum(r["lazy"] for r in rows) / eager_sum, 4) if eager_sum else 0.0,
            "query_instances": len(rows),
            "loss_by_cause": {k: round(v, 3) for k, v in sorted(cause.items())},
            "by_asks": {k: {"queries": int(v[2]), "eager": round(v[0], 3), "lazy": round(v[1], 3)}
                        for k, v in sorted(by_asks.items())},
            "missing_relevant_by_band": dict(sorted(where.items()))}


def oracle_yield(model: CachedModel, ds: Dataset, base: Eager) -> dict[str, Any]:
    c, _ = _container(model, {})
    seen: Counter[str] = Counter()
    shown: Counter[str] = Counter()
    by_disagree: dict[int, Counter[str]] = defaultdict(Counter)
    try:
        _ingest(c, ds)
        for q, text in ds.judged_queries().items():
            lex = lexical_ranks(c, text)
            page = set(base.top[q])
            disagree = min(6, sum(1 for d in lex[:10] if d not in page))
            by_disagree[disagree]["queries"] += 1
            for i, d in enumerate(lex):
                b = band(i)
                seen[b] += 1
                shown[b] += d in page
                by_disagree[disagree][b] += d in page
            shown["not lexical"] += len(page - set(lex))
    finally:
        _close(c)
    return {"share_shown": {b: round(shown[b] / seen[b], 4) for b in seen},
            "not_lexical_on_pages": shown["not lexical"],
            "shown_per_query_by_disagree": {str(k): {b: round(v[b] / v["queries"], 3) for b in v if b != "queries"}
                                            | {"queries": v["queries"]} for k, v in sorted(by_disagree.items())}}


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--data", type=Path, required=True)
    ap.add_argument("--seeds", default="1,2,3,4,5,6")
    ap.add_argument("--length", type=int, default=400)
    ap.add_argument("--queries", type=int, default=None)
    a = ap.parse_args()
    ds = load(a.data)
    qids = query_population(ds, a.queries)
    model = CachedModel()
    base = eager(model, ds, {})
    runs = [replay(model, ds, base, int(s), a.length, qids) for s in a.seeds.split(",")]
    rows = [r for run in runs for r in run["queries"]]
    spend: dict[str, dict[str, int]] = defaultdict(lambda: {"embedded": 0, "useful": 0})
    for run in runs:
        for k, v in run["spend"].items():
            spend[k]["embedded"] += v["embedded"]
            spend[k]["useful"] += v["useful"]
    doc = {"dataset": ds.name, "docs": len(ds.corpus), "length": a.length, "seeds": a.seeds,
           "command": f"python -m bench.touch_loss --data {a.data} --seeds {a.seeds}",
           "loss": loss_summary(rows),
           "per_seed_ratio": {run["seed"]: loss_summary(run["queries"])["ratio"] for run in runs},
           "spend_by_ask": {k: v | {"useful_share": round(v["useful"] / max(1, v["embedded"]), 3)}
                            for k, v in sorted(spend.items())},
           "oracle_yield": oracle_yield(model, ds, base),
           "mean_eager_ndcg": round(statistics.fmean(r["eager"] for r in rows), 4) if rows else 0.0}
    out = RESULTS / f"touch-loss-{ds.name}{'-q' + str(a.queries) if a.queries else ''}.json"
    out.write_text(json.dumps(doc, indent=1))
    print(json.dumps({k: doc[k] for k in ("loss", "per_seed_ratio", "spend_by_ask")}, indent=1))
    print(out)


if __name__ == "__main__":
    main()
