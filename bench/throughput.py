"""The local model's runtimes side by side, then the embedding pipeline against the raw model.

    python -m bench throughput [--docs 512] [--pipeline-docs 600]

Same run, same texts (synthetic 110-word documents, bench/spine.py):
  - query encoder latency, one query at a time: onnxruntime with 1 and 2 intra-op threads
    (the query graph `serve` uses: int8 weights by default), torch fp32 (and bf16 where the
    CPU has it natively);
  - document throughput per batch size (1..64) for onnxruntime and torch fp32/bf16, and each
    runtime's lowest cosine to torch fp32 over the same documents (quality must be equal);
  - end to end: a served instance (local model, default runtime) embeds `--pipeline-docs`
    documents after POST /semantic/reindex; docs/s as a ratio to the raw runtime it uses at the
    same batch size (keep >= 0.8x).
Writes bench/results/perf-throughput.json (the newest run) and perf-throughput-<stamp>.json + .md.
"""

from __future__ import annotations

import os
import random
import tempfile
import time
from pathlib import Path
from typing import Any

import numpy as np

from bench import report
from bench.harness import machine
from bench.spine import WORDS, ingest, peak_rss_mb, pipeline_throughput, synthetic_docs, zipf_vocabulary
from harness.server import served
from shared.ports import Embedder

BATCHES = (1, 4, 8, 16, 32, 64)
MODEL = "all-MiniLM-L6-v2"


def _docs_per_s(embed: Any, texts: list[str], batch: int) -> tuple[float, np.ndarray]:
    embed(texts[:batch])  # warm-up at this shape
    out = []
    t0 = time.perf_counter()
    for i in range(0, len(texts), batch):
        out.extend(embed(texts[i:i + batch]))
    return len(texts) / (time.perf_counter() - t0), np.asarray(out, dtype=np.float32)


def _query_ms(embed_query: Any, queries: list[str]) -> list[float]:
    embed_query(queries[0])
    took = []
    for q in queries:
        t0 = time.perf_counter()
        embed_query(q)
        took.append((time.perf_counter() - t0) * 1000)
    return took


def runtimes(cache: Path) -> dict[str, Any]:
    """name -> (embed(texts), embed_query(text)) for every runtime this machine can run."""
    import torch

    from shared.adapters.embedders.local_embedder import LocalEmbedder, _native_bf16
    from shared.adapters.embedders.onnx_embedder import load

    torch_model = LocalEmbedder()  # threads: all cores but one, as served
    out: dict[str, Any] = {"torch fp32": (lambda t: torch_model._encode(t, "fp32").tolist(),
                                          lambda q: torch_model._encode([q], "fp32")[0])}
    if _native_bf16():
        out["torch bf16"] = (lambda t: torch_model._encode(t, "bf16").tolist(),
                             lambda q: torch_model._encode([q], "bf16")[0])
    from shared.config import Settings

    served_queries = Settings.model_fields["embed_query_weights"].default  # the query graph `serve` uses
    for threads in (1, 2):
        onnx = load(MODEL, cache, batch_size=64, threads=threads, doc_nice=0, query_weights=served_queries)
        out[f"onnx {threads} thread{'s' if threads > 1 else ''}"] = (onnx.embed, onnx.embed_query)
    print("torch threads", torch.get_num_threads())
    return out


def measure_runtimes(texts: list[str], queries: list[str], cache: Path) -> dict[str, Any]:
    res: dict[str, Any] = {}
    ref: np.ndarray | None = None
    for name, (embed, embed_query) in runtimes(cache).items():
        took = _query_ms(embed_query, queries)
        per_batch = {}
        for b in BATCHES:
            rate, vecs = _docs_per_s(embed, texts, b)
            ref = vecs if ref is None else ref  # torch fp32 comes first: the reference
            per_batch[str(b)] = round(rate, 1)
        worst = round(float(np.min(np.sum(vecs * ref, 1))), 6)
        res[name] = {"query_p50_ms": report.percentile(took, 0.5), "query_p95_ms": report.percentile(took, 0.95),
                     "docs_per_s": per_batch, "min_cosine_to_torch_fp32": worst,
                     "query_samples_ms": [round(x, 3) for x in took]}
        print(name, {k: v for k, v in res[name].items() if k != "query_samples_ms"})
    return res


def measure_pipeline(n: int, batch: int, rng: random.Random, nice: int) -> dict[str, Any]:
    """The served pipeline (queue, worker, store, vector index) against the raw runtime it uses,
    in the same forward passes (`Settings.embed_model_batch_size`) and calls of `batch` documents.
    `nice`: VIBE_EMBED_DOC_NICE (the raw runtime runs at the bench's own priority)."""
    from shared.config import Settings

    passes = Settings.model_fields["embed_model_batch_size"].default
    docs = synthetic_docs(n, rng, 110, WORDS)
    data_dir = Path(tempfile.mkdtemp(prefix="vibe-throughput-")) / "data"
    env = {"VIBE_EMBEDDER": "local", "VIBE_EMBED_BATCH_SIZE": str(batch), "VIBE_PER_TENANT_PER_MIN": "1000000",
           "VIBE_EMBED_DOC_NICE": str(nice)}
    with served(data_dir, env=env) as s:
        ingest(s, "emb", docs)
        rate = pipeline_throughput(s, n)
        rss = peak_rss_mb(s.proc.pid)
    from shared.adapters.embedders.onnx_embedder import load

    served_runtime = "onnx" if any((data_dir / "models").glob("*/manifest.json")) else "torch"
    raw: Embedder
    if served_runtime == "onnx":
        raw = load(MODEL, data_dir / "models", batch_size=passes, doc_nice=0)
    else:
        from shared.adapters.embedders.local_embedder import LocalEmbedder

        raw = LocalEmbedder(batch_size=passes)
    texts = [d["title"] + "\n" + d["body"] for d in docs]
    raw_rate, _ = _docs_per_s(raw.embed, texts, batch)
    return {"docs": n, "batch": batch, "model_batch": passes, "doc_nice": nice, "runtime": served_runtime,
            "pipeline_docs_per_s": round(rate, 1),
            "raw_docs_per_s": round(raw_rate, 1), "ratio_to_raw": round(rate / raw_rate, 3),
            "server_peak_rss_mb": round(rss, 1)}


def main(docs: int = 512, pipeline_docs: int = 600, batch: int = 32) -> Path:
    rng = random.Random(3)
    texts = [d["title"] + "\n" + d["body"] for d in synthetic_docs(docs, rng, 110, WORDS)]
    vocab = zipf_vocabulary(2000, rng)
    queries = [" ".join(rng.choices(WORDS + vocab, k=rng.randint(2, 6))) for _ in range(200)]
    load0 = os.getloadavg()
    cache = Path(tempfile.mkdtemp(prefix="vibe-onnx-")) / "models"
    res = measure_runtimes(texts, queries, cache)
    pipe = [measure_pipeline(pipeline_docs, batch, rng, nice) for nice in (5, 0)]
    print(pipe)
    doc = {"name": "perf-throughput", "machine": machine(), "docs": docs, "batches": list(BATCHES),
           "runtimes": res, "pipeline": pipe, "load_average": {"before": load0, "after": os.getloadavg()}}
    return report.write(doc, _markdown(doc))


def _markdown(doc: dict[str, Any]) -> str:
    head = ["runtime", "query p50 ms", "query p95 ms", *(f"docs/s @{b}" for b in doc["batches"]),
            "min cosine to torch fp32"]
    rows = [[k, v["query_p50_ms"], v["query_p95_ms"], *(v["docs_per_s"][str(b)] for b in doc["batches"]),
             v["min_cosine_to_torch_fp32"]] for k, v in doc["runtimes"].items()]
    pipes = "\n".join(
        f"- document thread nice +{p['doc_nice']}: {p['pipeline_docs_per_s']} docs/s from `queued` to `ready` vs the "
        f"raw runtime's {p['raw_docs_per_s']} docs/s = **{p['ratio_to_raw']}x**; server peak RSS "
        f"{p['server_peak_rss_mb']} MB" for p in doc["pipeline"])
    first = doc["pipeline"][0]
    return (f"# The local model's runtimes ({doc['docs']} synthetic 110-word documents, same run)\n\n"
            + report.table(head, rows)
            + f"\nEnd to end (served, runtime {first['runtime']}, batch {first['batch']} in forward passes of "
              f"{first.get('model_batch', first['batch'])}, "
              f"{first['docs']} documents):\n\n"
            + pipes + f"\n\nLoad average before {doc['load_average']['before']}, after {doc['load_average']['after']} "
            "(2 shared cores: compare within the run).\n")
