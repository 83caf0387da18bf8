"""What the Python SDK adds to a readOnce call over raw HTTP (target <= 0.3 ms at p50).

    .venv/bin/python -m bench.sdk_overhead [--docs 2000] [--rounds 20]

One served app (hash embedder, keyword strategy: the server does the same work every time),
one keep-alive connection per side. The same queries go through `Client.read` and
through a raw `httpx.Client.post` + `.json()` (the baseline, measured in the same run),
interleaved pair by pair in a random order, so drift of a shared machine hits both sides
alike. Reported: p50/p95 of each side, the p50 of the per-pair difference (the added latency),
and the SDK's own CPU work measured without a network (building the body, reading the
answer into typed objects) as a cross-check of that difference.

Results: bench/results/sdk_overhead.json (+ .md).
"""

from __future__ import annotations

import argparse
import json
import random
import statistics
import tempfile
import time
from pathlib import Path
from typing import Any

import httpx
from vibe_semantic_client import Client
from vibe_semantic_client import _core as core
from vibe_semantic_client.models import ReadAnswer

from bench import harness, report
from bench.spine import synthetic_docs, zipf_vocabulary

COLLECTION = "syn"
LIMIT = 10
TARGET_MS = 0.3
# The per-tenant request rate (200/s by default) would answer 429 to a tight loop: off here.
ENV = {"VIBE_PER_TENANT_REQUESTS_PER_SECOND": "0"}


def _ms(xs: list[float]) -> dict[str, float]:
    return {"p50": round(statistics.median(xs), 4), "p95": round(report.percentile(xs, 0.95), 4),
            "mean": round(statistics.fmean(xs), 4), "n": len(xs)}


def sdk_cpu_ms(answer: dict[str, Any], queries: list[str], reps: int = 2000) -> float:
    """Per call, in this process only: the body the SDK builds and its typed reading of a real answer."""
    t0 = time.perf_counter()
    for i in range(reps):
        core.read_body(COLLECTION, queries[i % len(queries)], "keyword", LIMIT, {})
        ReadAnswer.from_json(answer)
    return (time.perf_counter() - t0) * 1000 / reps


def measure(base: str, queries: list[str], rounds: int, seed: int) -> dict[str, Any]:
    rng = random.Random(seed)
    headers = {"Authorization": f"Bearer {harness.KEY}", "Accept": "application/json"}
    sdk_ms: list[float] = []
    raw_ms: list[float] = []
    diffs: list[float] = []
    answer: dict[str, Any] = {}
    with Client(base, harness.KEY, retries=0) as sdk, httpx.Client(base_url=base, timeout=30) as raw:
        def via_sdk(q: str) -> float:
            t0 = time.perf_counter()
            sdk.read(COLLECTION, q, strategy="keyword", limit=LIMIT)
            return (time.perf_counter() - t0) * 1000

        def via_raw(q: str) -> float:
            nonlocal answer
            t0 = time.perf_counter()
            body = {"collection": COLLECTION, "q": q, "semantic": {"strategy": "keyword"}, "limit": LIMIT}
            r = raw.post("/v1/read", json=body, headers=headers)
            r.raise_for_status()
            answer = r.json()
            return (time.perf_counter() - t0) * 1000

        for q in queries[:20]:  # warm-up: connections, the index's caches, both code paths
            via_sdk(q)
            via_raw(q)
        for _ in range(rounds):
            for q in queries:
                if rng.random() < 0.5:
                    s, r = via_sdk(q), via_raw(q)
                else:
                    r, s = via_raw(q), via_sdk(q)
                sdk_ms.append(s)
                raw_ms.append(r)
                diffs.append(s - r)
    cpu = sdk_cpu_ms(answer, queries)
    return {"sdk_ms": _ms(sdk_ms), "raw_ms": _ms(raw_ms), "added_ms_paired": _ms(diffs),
            "added_ms_p50_of_sides": round(statistics.median(sdk_ms) - statistics.median(raw_ms), 4),
            "sdk_cpu_ms_per_call": round(cpu, 4), "hits_per_answer": len(answer.get("results", []))}


def main(docs: int, rounds: int, n_queries: int, seed: int) -> dict[str, Any]:
    rng = random.Random(seed)
    vocab = zipf_vocabulary(2000, rng)
    corpus = synthetic_docs(docs, rng, 60, vocab)
    for d in corpus:
        d.pop("_acl")  # the bench key reads everything
    queries = [" ".join(rng.choices(vocab[:300], k=2)) for _ in range(n_queries)]
    with tempfile.TemporaryDirectory(prefix="vibe-bench-sdk-") as tmp, \
            harness.instance(Path(tmp) / "data", embedder="hash", env=ENV) as s:
        harness.ingest(s, COLLECTION, corpus)
        figures = measure(s.base, queries, rounds, seed)
    added = figures["added_ms_paired"]["p50"]
    doc = {"name": "sdk_overhead", "at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
           "machine": harness.machine(),
           "setup": {"docs": docs, "queries": n_queries, "rounds": rounds, "pairs": n_queries * rounds,
                     "strategy": "keyword", "limit": LIMIT, "embedder": "hash", "seed": seed,
                     "rate_limit": "off (VIBE_PER_TENANT_REQUESTS_PER_SECOND=0)"},
           **figures, "target_ms_p50": TARGET_MS, "meets_target": added <= TARGET_MS}
    md = (f"# SDK overhead: `Client.read` vs raw httpx POST /v1/read\n\n"
          f"{docs} docs, {n_queries} queries x {rounds} rounds, interleaved pairs; keyword, limit {LIMIT}.\n\n"
          + report.table(["", "p50 ms", "p95 ms", "mean ms"], [
              ["raw httpx", figures["raw_ms"]["p50"], figures["raw_ms"]["p95"], figures["raw_ms"]["mean"]],
              ["SDK read", figures["sdk_ms"]["p50"], figures["sdk_ms"]["p95"], figures["sdk_ms"]["mean"]],
              ["added (paired)", added, figures["added_ms_paired"]["p95"], figures["added_ms_paired"]["mean"]]])
          + f"\nSDK CPU per call without network: {figures['sdk_cpu_ms_per_call']} ms. "
          f"Target p50 added <= {TARGET_MS} ms: {'met' if doc['meets_target'] else 'NOT met'}.\n")
    report.RESULTS.mkdir(parents=True, exist_ok=True)
    out = report.RESULTS / "sdk_overhead.json"
    out.write_text(json.dumps(doc, indent=1, sort_keys=True))
    out.with_suffix(".md").write_text(md)
    print(md)
    return doc


if __name__ == "__main__":
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--docs", type=int, default=2000)
    ap.add_argument("--rounds", type=int, default=20)
    ap.add_argument("--queries", type=int, default=50)
    ap.add_argument("--seed", type=int, default=1)
    a = ap.parse_args()
    main(a.docs, a.rounds, a.queries, a.seed)
