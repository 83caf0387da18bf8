"""The foreground gate over HTTP: two servers, one with the gate and one without, same corpus.

    python -m bench.foreground_http_ab --docs 20000 [--embedder hash|local]

Each server gets a background client of its own that keeps reading fresh hybrid queries to
`done` (other users: their touches keep the in-process pipeline busy); meanwhile fresh queries'
first SSE events are timed, each query sent to both servers in alternating order (2 shared
cores: load falls on both alike). `VIBE_FOREGROUND_MAX_WAIT_SECONDS` is 0.05 on one and 0 on
the other. Writes bench/results/foreground-http-ab-<stamp>.json + .md.
"""

from __future__ import annotations

import argparse
import os
import random
import shutil
import statistics
import tempfile
import threading
from contextlib import ExitStack
from pathlib import Path
from typing import Any

from bench import report
from bench.latency import ENV, READER
from bench.spine import first_event_ms, synthetic_docs, zipf_vocabulary
from harness.server import KEYS, Served, served

ARMS = {"gate": "0.05", "off": "0"}


def _load(s: Served, vocab: list[str], seed: int, stop: threading.Event) -> None:
    rng = random.Random(seed)
    while not stop.is_set():
        q = " ".join(rng.choices(vocab[20:2000], k=2))
        try:
            s.stream(READER, timeout=60, collection="syn", q=q, limit=10, semantic={"strategy": "hybrid"})
        except Exception:  # noqa: BLE001 - background load only; the timed reads report their own failures
            continue


def main(docs: int, queries: int, embedder: str) -> Path:
    rng = random.Random(11)
    vocab = zipf_vocabulary(20_000, rng)
    corpus = synthetic_docs(docs, rng, 60, vocab)
    qs = [" ".join(rng.choices(vocab[20:2000], k=2)) for _ in range(3 * queries + 20)]
    env = {**ENV, "VIBE_EMBEDDER": embedder, "VIBE_EMBED_DIM": "384"}
    root = Path(tempfile.mkdtemp(prefix="vibe-fg-http-"))
    out: dict[str, Any] = {}
    stop = threading.Event()
    try:
        with served(root / "seed" / "data", env=env, keys=KEYS) as s:
            for i in range(0, docs, 1000):
                s.bulk("k-admin-a", "syn", corpus[i:i + 1000]).raise_for_status()
        for arm in ARMS:
            shutil.copytree(root / "seed", root / arm)
        with ExitStack() as stack:
            servers = {arm: stack.enter_context(served(root / arm / "data", keys=KEYS,
                                                       env={**env, "VIBE_FOREGROUND_MAX_WAIT_SECONDS": wait}))
                       for arm, wait in ARMS.items()}
            for s in servers.values():
                for q in qs[:20]:
                    first_event_ms(s, q, "keyword")
            load_before = os.getloadavg()
            loaders = [threading.Thread(target=_load, args=(s, vocab, 99 + i, stop), daemon=True)
                       for i, s in enumerate(servers.values())]
            for t in loaders:
                t.start()
            for k, strategy in enumerate(("keyword", "hybrid", "auto")):
                ms: dict[str, list[float]] = {arm: [] for arm in ARMS}
                for i, q in enumerate(qs[20 + k * queries: 20 + (k + 1) * queries]):
                    for arm in (ARMS if i % 2 == 0 else reversed(ARMS)):
                        ms[arm].append(first_event_ms(servers[arm], q, strategy))
                diffs = [a - b for a, b in zip(ms["gate"], ms["off"], strict=True)]
                out[strategy] = {**{arm: {"p50_ms": report.percentile(v, 0.5), "p95_ms": report.percentile(v, 0.95)}
                                    for arm, v in ms.items()},
                                 "paired_diff_p50_ms": round(statistics.median(diffs), 3),
                                 "samples": {arm: [round(x, 3) for x in v] for arm, v in ms.items()}}
                print(strategy, {k2: v for k2, v in out[strategy].items() if k2 != "samples"}, flush=True)
            stop.set()
            for t in loaders:
                t.join(60)
    finally:
        stop.set()
        shutil.rmtree(root, ignore_errors=True)
    doc = {"name": "foreground-http-ab", "docs": docs, "queries_per_strategy": queries, "embedder": embedder,
           "strategies": out, "load_average": {"before": load_before, "after": os.getloadavg()}}
    rows = [[k, v["off"]["p50_ms"], v["gate"]["p50_ms"], v["paired_diff_p50_ms"]] for k, v in out.items()]
    md = (f"# First SSE events with the gate on and off ({docs} docs, {embedder} embedder, background readers)\n\n"
          f"Load average {doc['load_average']}. Times in ms.\n\n"
          + report.table(["strategy", "off p50", "gate p50", "paired gate - off p50"], rows))
    return report.write(doc, md)


if __name__ == "__main__":
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--docs", type=int, default=20_000)
    ap.add_argument("--queries", type=int, default=200)
    ap.add_argument("--embedder", default="hash")
    a = ap.parse_args()
    print(main(a.docs, a.queries, a.embedder))
