"""First answers with the in-process pipeline busy, with and without the foreground gate.

    python -m bench.foreground_ab --docs 100000 --queries 400

One embedded container in this process (SQLite, tantivy, qdrant-edge; the hash embedder, so
the pipeline's own Python work is what competes, not a model). Fresh queries back to back:
each one's first answer (`Planner.open` streaming + payload, as the SSE route builds it) is
timed, then its tail runs (deferred semantic leg, touch: its cold candidates are queued), so
the next answer is computed while the previous query's batch is in the pipeline. Queries
alternate between the gate on (`VIBE_FOREGROUND_MAX_WAIT_SECONDS` 0.05) and off (0), on the
same container, so load and corpus fall on both alike; the paired median is reported.
Writes bench/results/foreground-ab-<stamp>.json + .md.
"""

from __future__ import annotations

import argparse
import os
import random
import shutil
import tempfile
import time
from pathlib import Path
from typing import Any

from bench import report
from bench.harness import machine
from bench.spine import synthetic_docs, zipf_vocabulary
from services.api.render import answer_body
from services.planner.planner import ReadRequest
from services.wiring import build
from shared.config import Settings
from shared.model import Principal

READER = Principal("ta", ("user:alice", "group:eng"), frozenset({"read", "write", "admin"}))


def main(docs: int, queries: int, wait: float = 0.05) -> Path:
    rng = random.Random(11)
    vocab = zipf_vocabulary(20_000, rng)
    corpus = synthetic_docs(docs, rng, 60, vocab)
    root = Path(tempfile.mkdtemp(prefix="vibe-foreground-"))
    c = build(Settings(data_dir=root / "data", embedder="hash", embed_dim=384, per_tenant_per_min=1_000_000,
                       promote_min_queries=10**9, promote_min_hits=0, scheduler_enabled=False))
    c.start()
    out: dict[str, Any] = {}
    load_before = os.getloadavg()
    try:
        for i in range(0, docs, 2000):
            c.docs.put([c.docs.parse(READER, "syn", d["_id"], d) for d in corpus[i:i + 2000]])
        qs = [" ".join(rng.choices(vocab[20:2000], k=2)) for _ in range(2 * queries)]
        for strategy, todo in (("keyword", qs[:queries]), ("hybrid", qs[queries:])):
            ms: dict[str, list[float]] = {"gate": [], "off": []}
            for i, q in enumerate(todo):
                arm = "gate" if i % 2 else "off"
                c.planner.foreground.max_wait = wait if arm == "gate" else 0.0
                t0 = time.perf_counter()
                session = c.planner.open(READER, ReadRequest("syn", q, strategy, limit=10), True)
                answer_body(session.answer())
                ms[arm].append((time.perf_counter() - t0) * 1000)
                session.complete_semantic()
                session.touch()
            out[strategy] = {arm: {"p50_ms": report.percentile(v, 0.5), "p90_ms": report.percentile(v, 0.9)}
                             for arm, v in ms.items()}
            out[strategy]["samples"] = {arm: [round(x, 3) for x in v] for arm, v in ms.items()}
            print(strategy, {k: v for k, v in out[strategy].items() if k != "samples"}, flush=True)
    finally:
        c.stop()
        shutil.rmtree(root, ignore_errors=True)
    doc = {"name": "foreground-ab", "machine": machine(), "docs": docs, "queries_per_strategy": queries,
           "max_wait_seconds": wait, "strategies": out,
           "load_average": {"before": load_before, "after": os.getloadavg()}}
    rows = [[k, v["off"]["p50_ms"], v["gate"]["p50_ms"], v["off"]["p90_ms"], v["gate"]["p90_ms"]]
            for k, v in out.items()]
    md = (f"# First answers with the pipeline busy: gate on and off ({docs} docs, in process, hash embedder)\n\n"
          "Fresh queries back to back, each one's tail (touch) queued before the next; arms alternate on one "
          f"container. Load average {doc['load_average']}. Times in ms.\n\n"
          + report.table(["strategy", "off p50", "gate p50", "off p90", "gate p90"], rows))
    return report.write(doc, md)


if __name__ == "__main__":
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--docs", type=int, default=100_000)
    ap.add_argument("--queries", type=int, default=400)
    ap.add_argument("--max-wait", type=float, default=0.05)
    a = ap.parse_args()
    print(main(a.docs, a.queries, a.max_wait))
