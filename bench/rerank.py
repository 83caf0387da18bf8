"""The reranker's effect on a dev set: the same candidate lists, with and
without a `/rerank` endpoint, in the same run.

    python -m bench rerank --data ../shared/data/cranfield --url http://tei:8080/rerank --protocol tei
    python -m bench.rerank --data ../shared/data/cisi --url https://api.example/v2/rerank --model rerank-v3.5

Ingests the corpus into a fresh served instance, takes each judged query's top `candidates`
documents from `POST /v1/read` (strategy `hybrid` by default: what search_knowledge_base
reranks), and scores two rankings with ir-measures: the baseline as served, and the same
candidates reordered by the endpoint (shared/adapters/rerank_http.py, the adapter the tool
uses). Reports nDCG@10 / recall@100 / MRR@10 of both, their ratio, and reranker latency; then
the read path's own stage (`rerank: true` on `POST /v1/read`, served with the same endpoint as
VIBE_RERANK_URL): a complete JSON answer's p50/p95 with and without it, the same queries
interleaved in the same run, and the served pages' nDCG@10.

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


def read_path(s: Any, ds: Dataset, strategy: str, limit: int = 10) -> dict[str, Any]:
    """The rerank stage's cost inside `POST /v1/read` (`rerank: true`, the served reranker), the
    same queries with and without it, interleaved so both see the same machine state: p50/p95 of
    a complete JSON answer, and nDCG@10 of the served pages."""
    times: dict[str, list[float]] = {"fused": [], "reranked": []}
    pages: dict[str, dict[str, list[str]]] = {"fused": {}, "reranked": {}}
    statuses: dict[str, int] = {}
    for qid, text in ds.judged_queries().items():
        for name, rerank in (("fused", False), ("reranked", True)):
            t0 = time.perf_counter()
            r = s.read(harness.KEY, collection=COLLECTION, q=text, limit=limit, semantic={"strategy": strategy},
                       rerank=rerank)
            times[name].append((time.perf_counter() - t0) * 1000)
            r.raise_for_status()
            body = r.json()
            pages[name][qid] = [str(x["id"]) for x in body["results"]]
            if rerank:
                status = str(body["diagnostics"].get("rerank", {}).get("status", "none"))
                statuses[status] = statuses.get(status, 0) + 1
    p50 = {n: report.percentile(t, 0.5) for n, t in times.items()}
    p95 = {n: report.percentile(t, 0.95) for n, t in times.items()}
    return {"limit": limit, "read_ms_p50": p50, "read_ms_p95": p95,
            "read_p50_ratio": round(p50["reranked"] / p50["fused"], 3) if p50["fused"] else None,
            "ndcg10": {n: ir.aggregate(pg, ds.qrels)["nDCG@10"] for n, pg in pages.items()},
            "rerank_status": statuses}


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
        # the served reranker is the same endpoint, so the read path's stage can be timed beside it
        env = {"VIBE_RERANK_URL": url, "VIBE_RERANK_PROTOCOL": protocol, "VIBE_READ_RERANK_PER_MINUTE": "0",
               **({"VIBE_RERANK_MODEL": model} if model else {})}
        with harness.instance(data_dir, embedder, env=env) as s:
            harness.ingest(s, COLLECTION, [{"_id": d, **doc} for d, doc in ds.corpus.items()])
            if strategy != "keyword":
                harness.embed_all(s, COLLECTION)
            result = evaluate(s, ds, reranker, strategy, candidates)
            result["read_path"] = read_path(s, ds, strategy)
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
            + report.table(["measure", "baseline", "reranked", "ratio"], rows) + _read_path_md(doc["read_path"]))


def _read_path_md(rp: dict[str, Any]) -> str:
    rows = [[n, rp["read_ms_p50"][n], rp["read_ms_p95"][n], rp["ndcg10"][n]] for n in ("fused", "reranked")]
    return (f"\n\nIn the read path (`POST /v1/read`, limit {rp['limit']}, `rerank: true` against none, interleaved; "
            f"reranked p50 / fused p50 = {rp['read_p50_ratio']}; rerank status {rp['rerank_status']}):\n\n"
            + report.table(["read", "p50 ms", "p95 ms", "nDCG@10"], rows))


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
