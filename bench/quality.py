"""Retrieval quality with everything embedded ("eager"), per strategy, over HTTP.

    python -m bench quality --data ../shared/data/cranfield

Ingests the corpus into a fresh served instance (real all-MiniLM-L6-v2 by default), runs
`POST /semantic/reindex` until coverage is 100%, then asks every judged query with each
strategy and scores the rankings with ir-measures (nDCG@10, recall@100, MRR@10). Writes
bench/results/quality-<dataset>-<timestamp>.json and a Markdown summary beside it.
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

from bench import harness, ir, report
from bench.datasets import Dataset, load

STRATEGIES = ("keyword", "semantic", "hybrid", "auto")
COLLECTION = "corpus"


def corpus_docs(ds: Dataset) -> list[dict[str, Any]]:
    return [{"_id": did, "title": d["title"], "text": d["text"]} for did, d in ds.corpus.items()]


def run_strategy(s: Any, ds: Dataset, strategy: str) -> tuple[dict[str, list[str]], list[float]]:
    run: dict[str, list[str]] = {}
    took: list[float] = []
    for qid, text in ds.judged_queries().items():
        t0 = time.perf_counter()
        run[qid] = harness.read_ids(s, COLLECTION, text, strategy, limit=100)
        took.append((time.perf_counter() - t0) * 1000)
    return run, took


def evaluate(s: Any, ds: Dataset) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for strategy in STRATEGIES:
        run, took = run_strategy(s, ds, strategy)
        out[strategy] = {**ir.aggregate(run, ds.qrels), "latency_ms_p50": report.percentile(took, 0.5),
                         "latency_ms_p95": report.percentile(took, 0.95)}
        print(f"{ds.name:10} {strategy:8} {out[strategy]}")
    return out


def main(data: Path, data_dir: Path, embedder: str = "local") -> Path:
    ds = load(data)
    with harness.instance(data_dir, embedder) as s:
        ingest_s = harness.ingest(s, COLLECTION, corpus_docs(ds))
        embed_s = harness.embed_all(s, COLLECTION)
        results = evaluate(s, ds)
    doc = {"name": f"quality-{ds.name}", "machine": harness.machine(), "dataset": ds.name,
           "docs": len(ds.corpus), "queries": len(ds.judged_queries()), "embedder": embedder,
           "ingest_seconds": round(ingest_s, 2), "embed_seconds": round(embed_s, 2), "strategies": results}
    return report.write(doc, _markdown(doc))


def _markdown(doc: dict[str, Any]) -> str:
    rows = [[k, v["nDCG@10"], v["recall@100"], v["MRR@10"], v["latency_ms_p50"], v["latency_ms_p95"]]
            for k, v in doc["strategies"].items()]
    head = ["strategy", "nDCG@10", "recall@100", "MRR@10", "p50 ms", "p95 ms"]
    return (f"# Quality, eager: {doc['dataset']} ({doc['docs']} docs, {doc['queries']} judged queries, "
            f"embedder {doc['embedder']})\n\n" + report.table(head, rows))
