"""The ONNX export's graph as traced and as fused (onnx_export.fuse), fp32 and with the int8
query weights, interleaved in one process.

    python -m bench.encoder_fusion [--queries 150] [--rounds 3] [--prefixes-of QUERIES.jsonl ...]

Queries: synthetic two-to-six-word ones from the bench vocabulary (rare made-up words, several
word pieces each), or with `--prefixes-of`, the first 2-6 words of each query in those files
(English words: shorter sequences, where per-operator overhead weighs more).

The traced graph is the default (SDPA) attention exported as it was before the fusion (350
nodes for all-MiniLM-L6-v2); the fused one is what the service exports now (Attention,
SkipLayerNormalization, BiasGelu: 62 nodes). Each query goes through all four graphs in a
shuffled order, one sequence at a time on one intra-op thread as the read path runs it, so the
machine's load falls on all alike (but each graph's weights leave the caches while the others
run); each graph is then also timed alone, query after query (its weights stay cached). Also:
documents per second on one thread for both fp32 graphs, and the lowest cosine of each graph's
vectors to the fused fp32 graph's (the bench queries, the export's probes and edge cases) and to
torch's probe vectors. Writes bench/results/encoder-fusion-*.json.
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import random
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import numpy as np

from bench import report
from bench.query_weights import EDGES, MODEL
from bench.spine import synthetic_docs, zipf_vocabulary
from shared.adapters.embedders import onnx_embedder as oe
from shared.adapters.embedders import onnx_export as ox


def _traced(root: Path) -> Path:
    entry = root / "traced"
    subprocess.run([sys.executable, "-m", "shared.adapters.embedders.onnx_export", MODEL, str(entry), "--traced"],
                   check=True, capture_output=True, env={**os.environ, "HF_HUB_OFFLINE": "1"})
    return entry


def main(queries: int, rounds: int, root: Path, prefixes_of: list[Path] | None = None) -> Path:
    logging.getLogger("onnxruntime.quantization").setLevel(logging.WARNING)
    emb = oe.load(MODEL, root / "models", doc_nice=0)  # the service's (fused) export, verified
    fused = emb.onnx_file.parent
    traced = _traced(root)
    manifest = json.loads((fused / "manifest.json").read_text())
    graphs = {"traced-fp32": traced / "model.onnx", "traced-int8": ox.query_int8(traced),
              "fused-fp32": fused / "model.onnx", "fused-int8": ox.query_int8(fused)}
    sessions = {name: oe._session(path, 1) for name, path in graphs.items()}
    rng = random.Random(3)
    vocab = zipf_vocabulary(20_000, random.Random(11))
    if prefixes_of:
        texts = [json.loads(line)["text"] for path in prefixes_of for line in path.read_text().splitlines() if line]
        qs = [" ".join(t.split()[: rng.randint(2, 6)]) for t in rng.sample(texts, min(queries, len(texts)))]
    else:
        qs = [" ".join(rng.choices(vocab[20:2000], k=rng.randint(2, 6))) for _ in range(queries)]
    load_before = os.getloadavg()
    mixed: dict[str, list[float]] = {n: [] for n in sessions}
    for _ in range(rounds):
        for q in qs:
            for name in rng.sample(list(sessions), len(sessions)):
                t0 = time.perf_counter()
                emb._run(sessions[name], [q])
                mixed[name].append((time.perf_counter() - t0) * 1000)
    alone: dict[str, list[float]] = {n: [] for n in sessions}
    for name, session in sessions.items():
        for q in qs * rounds:
            t0 = time.perf_counter()
            emb._run(session, [q])
            alone[name].append((time.perf_counter() - t0) * 1000)
    docs = [f"{d['title']} {d['body']}" for d in synthetic_docs(64, random.Random(5), 60, vocab)]
    docs_per_s = {}
    for name in ("traced-fp32", "fused-fp32"):
        best = 0.0
        for _ in range(3):
            t0 = time.perf_counter()
            emb._run(sessions[name], docs)
            best = max(best, len(docs) / (time.perf_counter() - t0))
        docs_per_s[name] = round(best, 1)
    load_after = os.getloadavg()
    texts = qs + list(ox.PROBES) + EDGES
    ref = np.vstack([emb._run(sessions["fused-fp32"], [t]) for t in texts])
    torch_ref = np.asarray(manifest["reference"], dtype=np.float32)
    quality = {}
    for name, session in sessions.items():
        vecs = np.vstack([emb._run(session, [t]) for t in texts])
        probes = np.vstack([emb._run(session, [p]) for p in ox.PROBES])
        quality[name] = {"min_cosine_to_fused_fp32": round(float(oe._cosines(vecs, ref).min()), 6),
                         "min_cosine_to_torch_probes": round(float(oe._cosines(probes, torch_ref).min()), 6)}
    import onnx

    nodes = {name: len(onnx.load(str(path)).graph.node) for name, path in graphs.items()}
    out = {name: {"interleaved_p50_ms": report.percentile(mixed[name], 0.5),
                  "interleaved_p95_ms": report.percentile(mixed[name], 0.95),
                  "alone_p50_ms": report.percentile(alone[name], 0.5), "nodes": nodes[name], **quality[name]}
           for name in sessions}
    source = [str(p) for p in prefixes_of] if prefixes_of else "synthetic"
    doc: dict[str, Any] = {"name": "encoder-fusion", "model": MODEL, "queries": len(qs), "query_source": source,
                           "rounds": rounds,
                           "graphs": out, "docs_per_s_one_thread": docs_per_s, "fused_operators": manifest["fused"],
                           "load_average": {"before": load_before, "after": load_after},
                           "samples": {"interleaved_ms": {n: [round(x, 3) for x in v] for n, v in mixed.items()}}}
    rows = [[n, v["nodes"], v["interleaved_p50_ms"], v["alone_p50_ms"], v["min_cosine_to_fused_fp32"],
             v["min_cosine_to_torch_probes"]] for n, v in out.items()]
    md = (f"# ONNX query encoder: traced vs fused graph ({MODEL})\n\n"
          f"{len(qs)} two-to-six-word queries ({source}) x {rounds} rounds, one sequence at a time on one thread; "
          f"load average {load_before} -> {load_after}. Documents per second on one thread (64 synthetic "
          f"60-word documents, best of 3): {docs_per_s}.\n\n"
          + report.table(["graph", "nodes", "interleaved p50 ms", "alone p50 ms", "min cos to fused fp32",
                          "min cos to torch probes"], rows))
    return report.write(doc, md)


if __name__ == "__main__":
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--queries", type=int, default=150)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--prefixes-of", type=Path, nargs="*", help="queries.jsonl files: their queries' first words")
    a = ap.parse_args()
    with tempfile.TemporaryDirectory(prefix="vibe-encoder-fusion-") as tmp:
        print(main(a.queries, a.rounds, Path(tmp), a.prefixes_of))
