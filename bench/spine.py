"""Benchmark of the embedded spine, through the HTTP API of a served instance.

    .venv/bin/python -m bench.spine --docs 100000 --queries 300 --embed-docs 1000

Measured in one run, so the figures can be read as ratios:
  - bulk ingest documents/s through the API;
  - time to the first `lexical` SSE event, p50/p95, per strategy, against the raw engine
    query (the same filtered BM25 query in this process, on the server's index) and a
    trivial endpoint's round trip (/healthz);
  - embedding pipeline throughput (docs/s from `queued` to `ready` after /semantic/reindex)
    as a ratio to the raw model's encode throughput at the same batch size;
  - peak RSS of the server process (hash embedder at --docs; real model for the pipeline).
Writes bench/results/spine-<timestamp>.json.
"""

from __future__ import annotations

import argparse
import itertools
import json
import os
import platform
import random
import statistics
import time
from pathlib import Path
from typing import Any

from harness.server import Served, served

WORDS = [
    'wing', 'flow', 'boundary', 'layer', 'pressure', 'shock', 'wave', 'heat', 'transfer', 'flight',
    'speed', 'drag', 'lift', 'model', 'test', 'engine', 'rotor', 'blade', 'surface', 'stream',
    'turbulent', 'laminar', 'jet', 'nozzle', 'plate', 'body', 'cone', 'supersonic', 'subsonic',
    'theory', 'solution', 'method', 'equation', 'velocity', 'temperature', 'number', 'ratio',
    'effect', 'data', 'result', 'study', 'analysis', 'design', 'structure', 'load', 'stress',
    'panel', 'shell', 'buckling', 'vibration', 'frequency', 'mode', 'library', 'system',
    'information', 'retrieval', 'index', 'search', 'query', 'document', 'user', 'catalog', 'record',
    'book', 'research', 'science', 'journal', 'citation', 'term', 'subject', 'classification',
    'network', 'computer', 'service',
]


def percentile(xs: list[float], p: float) -> float:
    s = sorted(xs)
    return s[min(len(s) - 1, int(p * len(s)))]


def zipf_vocabulary(n: int, rng: random.Random) -> list[str]:
    """Pronounceable pseudo-words, so the corpus has a realistic term distribution."""
    syllables = [c + v for c in "bcdfghklmnprstvz" for v in "aeiou"]
    words: set[str] = set()
    while len(words) < n:
        words.add("".join(rng.choices(syllables, k=rng.randint(2, 4))))
    return sorted(words)


def synthetic_docs(n: int, rng: random.Random, body_words: int, vocab: list[str],
                   start: int = 0) -> list[dict[str, Any]]:
    """`start` numbers the ids, so a large corpus can be made (and sent) one chunk at a time."""
    # Cumulative weights once: `choices(weights=...)` would re-accumulate all of them per call
    # (the same draws either way), which made a 1M-document corpus take most of an hour.
    cum = list(itertools.accumulate(1 / (i + 1) for i in range(len(vocab))))
    return [{"_id": f"s{i}", "title": " ".join(rng.choices(vocab, cum_weights=cum, k=6)),
             "body": " ".join(rng.choices(vocab, cum_weights=cum, k=body_words)),
             "_acl": [rng.choice(["group:eng", "group:sales"])]} for i in range(start, start + n)]


def ingest(s: Served, collection: str, docs: list[dict[str, Any]], chunk: int = 1000) -> float:
    t0 = time.perf_counter()
    for i in range(0, len(docs), chunk):
        r = s.bulk("k-admin-a", collection, docs[i : i + chunk])
        assert r.status_code == 200 and r.json()["rejected"] == 0, r.text[:300]
    return len(docs) / (time.perf_counter() - t0)


def first_event_ms(s: Served, q: str, strategy: str) -> float:
    t0 = time.perf_counter()
    headers = {"Authorization": "Bearer k-alice", "Accept": "text/event-stream"}
    body = {"collection": "syn", "q": q, "semantic": {"strategy": strategy}, "limit": 10}
    with s.client.stream("POST", "/v1/read", json=body, headers=headers) as r:
        for line in r.iter_lines():
            if line.startswith("event: lexical"):
                elapsed = (time.perf_counter() - t0) * 1000
                r.close()
                return elapsed
    raise RuntimeError("no lexical event")


def raw_engine_ms(data_dir: Path, queries: list[str]) -> list[float]:
    """The same filtered BM25 query the server runs, in this process, on the server's index."""
    from shared.adapters.tantivy_lexical import TantivyLexicalIndex
    from shared.ports import SearchFilter

    idx = TantivyLexicalIndex(data_dir / "lexical")
    flt = SearchFilter("ta", ("syn",), ("*", "user:alice", "group:eng"))
    out = []
    for q in queries:
        t0 = time.perf_counter()
        idx.search(flt, q, 500)
        out.append((time.perf_counter() - t0) * 1000)
    return out


def latency(s: Served, queries: list[str]) -> dict[str, Any]:
    res: dict[str, Any] = {}
    trivial = []
    for q in queries[:20]:
        first_event_ms(s, q, "keyword")
    for strategy in ("keyword", "auto", "hybrid"):
        times = []
        for q in queries:
            t0 = time.perf_counter()
            s.client.get("/healthz")
            trivial.append((time.perf_counter() - t0) * 1000)
            times.append(first_event_ms(s, q, strategy))
        res[strategy] = {"p50_ms": statistics.median(times), "p95_ms": percentile(times, 0.95)}
    res["trivial_round_trip_p50_ms"] = statistics.median(trivial)
    raw = raw_engine_ms(s.data_dir, queries)
    res["raw_engine_p50_ms"] = statistics.median(raw)
    res["raw_engine_p95_ms"] = percentile(raw, 0.95)
    for strategy in ("keyword", "auto", "hybrid"):
        res[strategy]["ratio_to_trivial"] = res[strategy]["p50_ms"] / res["trivial_round_trip_p50_ms"]
        res[strategy]["ratio_to_engine"] = res[strategy]["p50_ms"] / res["raw_engine_p50_ms"]
    return res


def raw_model_throughput(texts: list[str], batch: int) -> tuple[float, str]:
    """The runtime the served instance picks by default (onnxruntime when its export verifies),
    at the bench's own priority, so the pipeline ratio compares like with like."""
    import tempfile

    from shared.adapters.embedders.onnx_embedder import build_local
    from shared.config import Settings

    cfg = Settings(embedder="local", data_dir=Path(tempfile.mkdtemp(prefix="vibe-raw-")), embed_batch_size=batch,
                   embed_doc_nice=0)
    emb = build_local(cfg)
    emb.embed(texts[:batch])  # warm-up
    t0 = time.perf_counter()
    for i in range(0, len(texts), batch):
        emb.embed(texts[i : i + batch])
    rate = len(texts) / (time.perf_counter() - t0)
    return rate, f"{getattr(emb, 'runtime', 'torch')} {getattr(emb, 'precision', '')}"


def pipeline_throughput(s: Served, n: int) -> float:
    r = s.call("POST", "/semantic/reindex", "k-admin-a", {"collection": "emb"})
    # the first step queues what the admin lane lets it (VIBE_ADMIN_LANE_AHEAD), the rest follows
    assert r.status_code == 202 and 0 < r.json()["queued"] <= n, r.text
    t0 = time.perf_counter()
    while True:
        cov = s.call("GET", "/semantic/coverage?collection=emb", "k-admin-a").json()
        if cov["ready"] >= n:
            return n / (time.perf_counter() - t0)
        assert time.perf_counter() - t0 < 1800, cov
        time.sleep(0.2)


def peak_rss_mb(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) / 1024
    return float("nan")


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--docs", type=int, default=100_000)
    ap.add_argument("--queries", type=int, default=300)
    ap.add_argument("--embed-docs", type=int, default=1000)
    ap.add_argument("--batch", type=int, default=32)
    ap.add_argument("--workers", type=int, default=1)
    ap.add_argument("--out", type=Path, default=Path("bench/results"))
    args = ap.parse_args()
    rng = random.Random(7)
    result: dict[str, Any] = {"bench": "spine", "args": vars(args) | {"out": str(args.out)},
                              "machine": {"cpus": os.cpu_count(), "python": platform.python_version(),
                                          "platform": platform.platform()}}
    tmp = Path(os.environ.get("TMPDIR", "/tmp")) / f"vibe-bench-{os.getpid()}"
    # Read path and ingest: hash embedder, so background embedding does not take the CPU
    # the measured path needs (2 cores); the real model is measured below on its own.
    vocab = zipf_vocabulary(20_000, rng)
    with served(tmp / "lat" / "data", env={"VIBE_EMBEDDER": "hash"}) as s:
        docs = synthetic_docs(args.docs, rng, 60, vocab)
        result["ingest_docs_per_s"] = ingest(s, "syn", docs)
        queries = [" ".join(rng.choices(vocab[20:2000], k=2)) for _ in range(args.queries)]
        result["first_event"] = latency(s, queries)
        result["server_peak_rss_mb_hash_embedder"] = peak_rss_mb(s.proc.pid)
    embed_docs = synthetic_docs(args.embed_docs, rng, 110, WORDS)
    texts = [d["title"] + "\n" + d["body"] for d in embed_docs]
    result["raw_model_docs_per_s"], result["precision"] = raw_model_throughput(texts, args.batch)
    env = {"VIBE_EMBEDDER": "local", "VIBE_WORKERS": str(args.workers), "VIBE_EMBED_BATCH_SIZE": str(args.batch)}
    with served(tmp / "emb" / "data", env=env) as s:
        ingest(s, "emb", embed_docs)
        result["pipeline_docs_per_s"] = pipeline_throughput(s, len(embed_docs))
        result["pipeline_ratio_to_raw_model"] = result["pipeline_docs_per_s"] / result["raw_model_docs_per_s"]
        result["server_peak_rss_mb_local_model"] = peak_rss_mb(s.proc.pid)
    args.out.mkdir(parents=True, exist_ok=True)
    path = args.out / f"spine-{time.strftime('%Y%m%d-%H%M%S')}.json"
    path.write_text(json.dumps(result, indent=2))
    print(json.dumps(result, indent=2))
    print(f"wrote {path}")


if __name__ == "__main__":
    main()
