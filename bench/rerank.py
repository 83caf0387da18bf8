"""The reranker's effect on a dev set: the same candidate lists, with and
without a `/rerank` endpoint, in the same run.

    python -m bench rerank --data ../shared/data/cranfield --url http://tei:8080/rerank --protocol tei
    python -m bench.rerank --data ../shared/data/cisi --url https://api.example/v2/rerank --model rerank-v3.5

Ingests the corpus into a fresh served instance, takes each judged query's top `candidates`
documents from `POST /v1/read` (strategy `hybrid` by default: what search_knowledge_base
reranks), and scores two rankings with ir-measures: the baseline as served, and the same
candidates reordered by the endpoint (shared/adapters/rerank_http.py, the adapter the tool
uses). Reports nDCG@10 / recall@100 / MRR@10 of both, their ratio, and reranker latency.

`--stand-in` runs the test suite's local stand-in (harness/rerank_server.py: word
overlap, NOT a cross-encoder) instead of a URL: it proves the harness end to end, it says
nothing about reranking quality, and its results are named `rerank-standin-*`.
"""

from __future__ import annotations

import argparse
import time
from pathlib import Path
from typing import Any

from bench import harness, ir, report
from bench.datasets import Dataset, load
from shared.adapters.rerank_http import HttpReranker

COLLECTION = "corpus"


def _text(doc: dict[str, Any]) -> str:
    return f"{doc['title']}\n{doc['text']}".strip()


def evaluate(s: Any, ds: Dataset, reranker: HttpReranker, strategy: str, candidates: int) -> dict[str, Any]:
    base: dict[str, list[str]] = {}
    reranked: dict[str, list[str]] = {}
    took: list[float] = []
    for qid, text in ds.judged_queries().items():
        ids = harness.read_ids(s, COLLECTION, text, strategy, limit=candidates)
        base[qid] = ids
        t0 = time.perf_counter()
        scores = reranker.rerank(text, [_text(ds.corpus[d]) for d in ids]) if ids else []
        took.append((time.perf_counter() - t0) * 1000)
        order = sorted(range(len(ids)), key=lambda i: (-scores[i], i))  # ties keep the served order
        reranked[qid] = [ids[i] for i in order]
    b, r = ir.aggregate(base, ds.qrels), ir.aggregate(reranked, ds.qrels)
    ratio = {m: round(r[m] / b[m], 4) if b[m] else None for m in b}
    return {"baseline": b, "reranked": r, "ratio": ratio, "rerank_ms_p50": report.percentile(took, 0.5),
            "rerank_ms_p95": report.percentile(took, 0.95)}


def main(data: Path, data_dir: Path, url: str | None, model: str | None = None, protocol: str = "cohere",
         embedder: str = "hash", strategy: str = "hybrid", candidates: int = 50, stand_in: bool = False) -> Path:
    ds = load(data)
    server: Any = None
    if stand_in:
        from harness.rerank_server import RerankServer

        server = RerankServer().__enter__()
        url = server.url
    if not url:
        raise SystemExit("give --url of a /rerank endpoint (or --stand-in for the harness smoke run)")
    reranker = HttpReranker(url, model, protocol, timeout=60)
    try:
        with harness.instance(data_dir, embedder) as s:
            harness.ingest(s, COLLECTION, [{"_id": d, **doc} for d, doc in ds.corpus.items()])
            if strategy != "keyword":
                harness.embed_all(s, COLLECTION)
            result = evaluate(s, ds, reranker, strategy, candidates)
    finally:
        reranker.close()
        if server is not None:
            server.__exit__(None, None, None)
    name = f"rerank-{'standin-' if stand_in else ''}{ds.name}"
    doc = {"name": name, "machine": harness.machine(), "dataset": ds.name, "docs": len(ds.corpus),
           "queries": len(ds.judged_queries()), "embedder": embedder, "strategy": strategy,
           "candidates": candidates, "reranker": "stand-in: word overlap, NOT a cross-encoder" if stand_in
           else {"url_host": url.split("/")[2] if "//" in url else url, "model": model, "protocol": protocol},
           **result}
    return report.write(doc, _markdown(doc))


def _markdown(doc: dict[str, Any]) -> str:
    rows = [[m, doc["baseline"][m], doc["reranked"][m], doc["ratio"][m]] for m in doc["baseline"]]
    who = doc["reranker"] if isinstance(doc["reranker"], str) else f"{doc['reranker']['model']} " \
        f"({doc['reranker']['protocol']})"
    return (f"# Reranker effect: {doc['dataset']} ({doc['docs']} docs, {doc['queries']} judged queries)\n\n"
            f"Top {doc['candidates']} `{doc['strategy']}` candidates ({doc['embedder']} embedder), reranked by "
            f"{who}. Reranker p50 {doc['rerank_ms_p50']} ms, p95 {doc['rerank_ms_p95']} ms per query.\n\n"
            + report.table(["measure", "baseline", "reranked", "ratio"], rows))


def _args() -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--data", type=Path, required=True, help="a BEIR-layout folder")
    p.add_argument("--data-dir", type=Path, default=None)
    p.add_argument("--url", default=None, help="the /rerank endpoint")
    p.add_argument("--model", default=None)
    p.add_argument("--protocol", choices=("cohere", "tei"), default="cohere")
    p.add_argument("--embedder", choices=("hash", "local"), default="hash")
    p.add_argument("--strategy", choices=("keyword", "hybrid", "semantic"), default="hybrid")
    p.add_argument("--candidates", type=int, default=50)
    p.add_argument("--stand-in", action="store_true", help="the test stand-in instead of --url (smoke only)")
    return p.parse_args()


if __name__ == "__main__":
    import tempfile

    a = _args()
    data_dir = a.data_dir or Path(tempfile.mkdtemp(prefix="vibe-bench-rerank-")) / "data"
    main(a.data, data_dir, a.url, a.model, a.protocol, a.embedder, a.strategy, a.candidates, a.stand_in)
