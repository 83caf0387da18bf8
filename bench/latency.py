"""Read latency over HTTP at N synthetic documents, real model, as ratios to baselines.

    vibe-semantic bench latency --docs 100000 --queries 200

Per strategy, over SSE: time to the first `lexical` event and to `done` (which waits for the
touched documents to be embedded by the real all-MiniLM-L6-v2). Baselines measured in the
same run: the raw engine query (the same filtered BM25 query in this process on the
server's index), a trivial endpoint's round trip (/healthz), and the raw model's time to
embed as many documents as a query queued (so `done` reads as a multiple of pure model time).
Each strategy gets its own queries: a repeated query would find its documents embedded.
"""

from __future__ import annotations

import random
import statistics
import tempfile
import time
from pathlib import Path
from typing import Any

from bench import harness, report
from bench.spine import peak_rss_mb, raw_engine_ms, synthetic_docs, zipf_vocabulary
from tests.support.server import KEYS, Served, served

STRATEGIES = ("keyword", "auto", "hybrid")
READER = "k-alice"
# The per-tenant minute budget (200 by default) would stop queueing after the first queries:
# lifted so `done` measures real embedding work. Say so when quoting the numbers.
ENV = {"VIBE_EMBEDDER": "local", "VIBE_PER_TENANT_PER_MIN": "1000000"}


def timed_stream(s: Served, q: str, strategy: str) -> dict[str, float]:
    """Milliseconds to `done`, and how many documents the query queued for embedding."""
    t0 = time.perf_counter()
    events = s.stream(READER, timeout=120, collection="syn", q=q, limit=10, semantic={"strategy": strategy})
    done = (time.perf_counter() - t0) * 1000
    queued = events[-1][1].get("diagnostics", {}).get("semantic", {}).get("queued", 0)
    return {"done_ms": done, "queued": float(queued)}


def first_event_ms(s: Served, q: str, strategy: str) -> float:
    from bench.spine import first_event_ms as spine_first

    return spine_first(s, q, strategy)


def model_ms_per_doc(texts: list[str]) -> float:
    from shared.adapters.embedders.local_embedder import LocalEmbedder

    emb = LocalEmbedder()
    emb.embed(texts[:10])  # warm-up
    t0 = time.perf_counter()
    for i in range(0, len(texts), 10):
        emb.embed(texts[i:i + 10])
    return (time.perf_counter() - t0) * 1000 / len(texts)


def drain(s: Served, timeout: float = 600) -> None:
    """Wait until no embedding job of the tenant is queued, so one measurement's background
    work does not land in the next one's `done` time."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if s.call("GET", "/semantic/queueDepth", "k-admin-a").json()["queuedInStore"] == 0:
            return
        time.sleep(0.2)
    raise TimeoutError("embedding queue did not drain")


def measure(s: Served, queries: dict[str, list[str]]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for strategy, qs in queries.items():
        firsts = [first_event_ms(s, q, strategy) for q in qs[: len(qs) // 2]]
        drain(s)
        runs = [timed_stream(s, q, strategy) for q in qs[len(qs) // 2:]]
        drain(s)
        done = [r["done_ms"] for r in runs]
        out[strategy] = {"first_p50_ms": report.percentile(firsts, 0.5),
                         "first_p95_ms": report.percentile(firsts, 0.95),
                         "done_p50_ms": report.percentile(done, 0.5), "done_p95_ms": report.percentile(done, 0.95),
                         "queued_per_query_mean": round(statistics.fmean(r["queued"] for r in runs), 2)}
        print(strategy, out[strategy])
    return out


def trivial_ms(s: Served, n: int = 200) -> list[float]:
    out = []
    for _ in range(n):
        t0 = time.perf_counter()
        s.client.get("/healthz")
        out.append((time.perf_counter() - t0) * 1000)
    return out


def main(docs: int, queries: int) -> Path:
    rng = random.Random(11)
    vocab = zipf_vocabulary(20_000, rng)
    corpus = synthetic_docs(docs, rng, 60, vocab)
    qs = {st: [" ".join(rng.choices(vocab[20:2000], k=2)) for _ in range(queries)] for st in STRATEGIES}
    data_dir = Path(tempfile.mkdtemp(prefix="vibe-latency-")) / "data"
    with harness.progress() as bar, served(data_dir, env=ENV, keys=KEYS) as s:
        task = bar.add_task("ingest", total=len(corpus))
        t0 = time.perf_counter()
        for i in range(0, len(corpus), 1000):
            s.bulk("k-admin-a", "syn", corpus[i:i + 1000]).raise_for_status()
            bar.advance(task, 1000)
        ingest_s = time.perf_counter() - t0
        for q in qs["keyword"][:20]:
            first_event_ms(s, q, "keyword")  # warm-up
        res = measure(s, qs)
        trivial = trivial_ms(s)
        rss = peak_rss_mb(s.proc.pid)
    engine = raw_engine_ms(data_dir, [q for v in qs.values() for q in v])
    per_doc = model_ms_per_doc([d["title"] + "\n" + d["body"] for d in corpus[:200]])  # the same documents
    doc = _document(docs, queries, ingest_s, res, trivial, engine, per_doc, rss)
    return report.write(doc, _markdown(doc))


def _document(docs: int, queries: int, ingest_s: float, res: dict[str, Any], trivial: list[float],
              engine: list[float], per_doc: float, rss: float) -> dict[str, Any]:
    base = {"trivial_p50_ms": report.percentile(trivial, 0.5), "engine_p50_ms": report.percentile(engine, 0.5),
            "engine_p95_ms": report.percentile(engine, 0.95), "model_ms_per_doc": round(per_doc, 2)}
    for r in res.values():
        r["first_ratio_to_trivial"] = round(r["first_p50_ms"] / base["trivial_p50_ms"], 2)
        r["first_ratio_to_engine"] = round(r["first_p50_ms"] / base["engine_p50_ms"], 2)
        model = max(1.0, r["queued_per_query_mean"]) * per_doc
        r["done_ratio_to_model_time"] = round(r["done_p50_ms"] / model, 2)
    return {"name": "latency", "machine": harness.machine(), "docs": docs, "queries_per_strategy": queries,
            "embedder": "local (all-MiniLM-L6-v2)", "ingest_docs_per_s": round(docs / ingest_s, 1),
            "server_peak_rss_mb": round(rss, 1), "baselines": base, "strategies": res}


def _markdown(doc: dict[str, Any]) -> str:
    head = ["strategy", "first p50", "first p95", "÷ trivial", "÷ engine", "done p50", "done p95",
            "queued/query", "done ÷ model time"]
    rows = [[k, v["first_p50_ms"], v["first_p95_ms"], v["first_ratio_to_trivial"], v["first_ratio_to_engine"],
             v["done_p50_ms"], v["done_p95_ms"], v["queued_per_query_mean"], v["done_ratio_to_model_time"]]
            for k, v in doc["strategies"].items()]
    b = doc["baselines"]
    return (f"# Read latency over HTTP: {doc['docs']} docs, {doc['embedder']}\n\n"
            f"Baselines (same run): trivial round trip p50 {b['trivial_p50_ms']} ms, raw engine BM25 p50 "
            f"{b['engine_p50_ms']} ms (p95 {b['engine_p95_ms']}), model {b['model_ms_per_doc']} ms/doc. "
            f"Ingest {doc['ingest_docs_per_s']} docs/s; server peak RSS {doc['server_peak_rss_mb']} MB.\n\n"
            "Times in ms. First-event and `done` use separate halves of each strategy's queries.\n\n"
            + report.table(head, rows))
