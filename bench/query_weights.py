"""The ONNX query encoder's two graphs, interleaved in one process: fp32 (the export) and the
int8 feed-forward weights (onnx_export.query_int8, the server's default).

    python -m bench.query_weights [--queries 150] [--rounds 3]

Each query goes through both graphs in turn, one sequence at a time on one intra-op thread as
the read path runs it, so the machine's load falls on both alike. Reports p50/p95 per graph,
the median of the paired ratios, and the lowest cosine of the int8 graph's vectors to the fp32
graph's (the bench queries, the export's probes and a few edge cases) and to torch's probe
vectors (what the server checks at load). Writes bench/results/query-weights-*.json.
"""

from __future__ import annotations

import argparse
import logging
import os
import random
import statistics
import tempfile
import time
from pathlib import Path
from typing import Any

import numpy as np

from bench import report
from bench.spine import zipf_vocabulary
from shared.adapters.embedders import onnx_embedder as oe
from shared.adapters.embedders import onnx_export as ox

MODEL = "all-MiniLM-L6-v2"
EDGES = ["", "a", "x", "the", "wing " * 400, "Repairing a punctured bike tyre",
         "Die Grenzschicht löst sich nahe der Hinterkante ab."]


def main(queries: int, rounds: int, cache_root: Path) -> Path:
    logging.getLogger("onnxruntime.quantization").setLevel(logging.WARNING)
    fp32 = oe.load(MODEL, cache_root, doc_nice=0, query_weights="fp32")
    int8 = oe.load(MODEL, cache_root, doc_nice=0, query_weights="int8")
    assert int8.query_file.name == ox.QUERY_INT8_FILE, "the int8 graph did not verify"
    rng = random.Random(3)
    vocab = zipf_vocabulary(20_000, random.Random(11))
    qs = [" ".join(rng.choices(vocab[20:2000], k=2)) for _ in range(queries)]
    load_before = os.getloadavg()
    times: dict[str, list[float]] = {"fp32": [], "int8": []}
    ratios = []
    for r in range(rounds):
        for i, q in enumerate(qs):
            pair = {}
            for name, emb in (("fp32", fp32), ("int8", int8)) if (i + r) % 2 == 0 else (("int8", int8), ("fp32", fp32)):
                t0 = time.perf_counter()
                emb.embed_query(q)
                pair[name] = (time.perf_counter() - t0) * 1000
                times[name].append(pair[name])
            ratios.append(pair["int8"] / pair["fp32"])
    load_after = os.getloadavg()
    texts = qs + list(ox.PROBES) + EDGES
    a, b = np.asarray([int8.embed_query(t) for t in texts]), np.asarray([fp32.embed_query(t) for t in texts])
    cos = np.sum(a * b, axis=1) / np.linalg.norm(a, axis=1) / np.linalg.norm(b, axis=1)
    worst = int(np.argmin(cos))
    manifest = ox.read_manifest(ox.entry_dir(cache_root, MODEL, oe.model_path(MODEL)))
    assert manifest is not None
    vs_torch = int8.use_query_model(int8.query_file, manifest)
    doc: dict[str, Any] = {
        "name": "query-weights", "queries": queries, "rounds": rounds,
        "p50_ms": {k: report.percentile(v, 0.5) for k, v in times.items()},
        "p95_ms": {k: report.percentile(v, 0.95) for k, v in times.items()},
        "paired_ratio_int8_to_fp32_p50": round(statistics.median(ratios), 3),
        "min_cosine_to_fp32": round(float(cos[worst]), 5), "min_cosine_text": texts[worst][:40],
        "min_cosine_to_torch_probes": round(vs_torch, 5),
        "load_average": {"before": load_before, "after": load_after},
        "samples": {k: [round(x, 3) for x in v] for k, v in times.items()}}
    md = (f"# Query encoder graphs, interleaved ({queries} queries x {rounds} rounds)\n\n"
          f"p50 fp32 {doc['p50_ms']['fp32']} ms, int8 feed-forward weights {doc['p50_ms']['int8']} ms; "
          f"paired ratio p50 {doc['paired_ratio_int8_to_fp32_p50']}; lowest cosine to fp32 "
          f"{doc['min_cosine_to_fp32']} ({doc['min_cosine_text']!r}), to torch's probes "
          f"{doc['min_cosine_to_torch_probes']}. "
          f"Load average {load_before} → {load_after}.\n")
    return report.write(doc, md)


if __name__ == "__main__":
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--queries", type=int, default=150)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--cache", type=Path, default=None, help="an ONNX cache root to reuse (default: a fresh one)")
    a = ap.parse_args()
    print(main(a.queries, a.rounds, a.cache or Path(tempfile.mkdtemp(prefix="vibe-qw-"))))
