"""A read's graph hydration (`graph: {depth}`): what it adds to a complete JSON answer.

    python -m bench.graph_read --docs 20000 --edges 100000 --queries 60

One tenant, `--docs` documents in two collections (hash embedder, keyword reads: the ranking's
own cost stays the same and small, so the hydration's share shows), `--edges` random edges
between them (a fifth behind an ACL the reader lacks, a tenth to documents never written), the
app served on a real socket. Each query (a word shared by ~1% of the documents, limit 20) is
asked with depth 0, 1 and 2, interleaved, and timed as the client sees the whole answer;
p50/p95 and the neighbours shown per read. Writes bench/results/graph-read.json.
"""

from __future__ import annotations

import argparse
import json
import random
import tempfile
import time
from pathlib import Path
from typing import Any

from bench import harness
from bench.report import percentile
from harness.server import Served, served

RESULTS = Path(__file__).resolve().parent / "results" / "graph-read.json"
READER = "k-reader"
KEYS = [*harness.KEYS, {"key": READER, "tenant": harness.TENANT, "principals": ["user:reader"], "scopes": ["read"]}]
WORDS = [f"w{i:03d}" for i in range(100)]


def _populate(s: Served, docs: int, edges: int, rng: random.Random) -> list[str]:
    refs = []
    batch: dict[str, list[dict[str, Any]]] = {"posts": [], "notes": []}
    for i in range(docs):
        collection = "posts" if i % 2 else "notes"
        refs.append(f"{collection}/d{i}")
        batch[collection].append({"_id": f"d{i}", "title": f"document {i} {rng.choice(WORDS)}",
                                  "body": " ".join(rng.choices(WORDS, k=12))})
    for collection, items in batch.items():
        harness.ingest(s, collection, items)
    out: list[dict[str, Any]] = []
    for i in range(edges):
        src, dst = rng.sample(refs, 2)
        if rng.random() < 0.1:
            dst = f"posts/ghost{i}"
        e: dict[str, Any] = {"_id": f"e{i}", "from": src, "to": dst, "predicate": "mentions",
                             "weight": round(rng.random(), 3)}
        if rng.random() < 0.2:
            e["_acl"] = ["user:someone-else", "user:bench"]
        out.append(e)
    harness.ingest(s, "semantic.edges", out)
    return refs


def main(docs: int, edges: int, queries: int, seed: int = 7) -> Path:
    rng = random.Random(seed)
    data = Path(tempfile.mkdtemp(prefix="vibe-graph-read-")) / "data"
    times: dict[int, list[float]] = {0: [], 1: [], 2: []}
    shown: dict[int, list[int]] = {0: [], 1: [], 2: []}
    with served(data, env={"VIBE_EMBEDDER": "hash", "VIBE_GRAPH_SPECULATION_PER_DOC": "0"}, keys=KEYS,
                validate=False) as s:
        t0 = time.perf_counter()
        _populate(s, docs, edges, rng)
        ingest_s = time.perf_counter() - t0
        for _ in range(3):  # warm-up
            s.read(READER, collection="any", q=rng.choice(WORDS), limit=20, semantic={"strategy": "keyword"})
        for _ in range(queries):
            q = rng.choice(WORDS)
            for depth in rng.sample([0, 1, 2], 3):
                body: dict[str, Any] = {"collection": "any", "q": q, "limit": 20, "semantic": {"strategy": "keyword"}}
                if depth:
                    body["graph"] = {"depth": depth}
                t = time.perf_counter()
                r = s.read(READER, **body)
                times[depth].append((time.perf_counter() - t) * 1000)
                assert r.status_code == 200, r.text
                shown[depth].append(sum(len(x.get("neighbors") or []) for x in r.json()["results"]))
    doc = {"name": "graph-read", "machine": harness.machine(), "docs": docs, "edges": edges, "queries": queries,
           "ingest_s": round(ingest_s, 1),
           "depths": {str(d): {"p50_ms": percentile(times[d], 0.5), "p95_ms": percentile(times[d], 0.95),
                               "neighbours_per_read": round(sum(shown[d]) / len(shown[d]), 1)} for d in times},
           "command": f"python -m bench.graph_read --docs {docs} --edges {edges} --queries {queries}"}
    RESULTS.parent.mkdir(parents=True, exist_ok=True)
    RESULTS.write_text(json.dumps(doc, indent=1) + "\n")
    print(json.dumps(doc["depths"]))
    return RESULTS


if __name__ == "__main__":
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--docs", type=int, default=20_000)
    ap.add_argument("--edges", type=int, default=100_000)
    ap.add_argument("--queries", type=int, default=60)
    a = ap.parse_args()
    main(a.docs, a.edges, a.queries)
