"""Would optimizing the embedded vector shards (qdrant-edge HNSW) be safe and worthwhile?

    .venv/bin/python -m bench.edge_hnsw --points 100000 --queries 100 --vectors minilm,hash

qdrant-edge searches a shard by brute force until `EdgeShard.optimize()` builds its HNSW
index, and nothing in the service calls it. This measures, on one `EdgeVectorIndex` (the
adapter itself: its payloads, payload indexes and filters), in one run so that every figure
has its baseline beside it:

- filtered search latency p50, k=10 and k=500, exact (`SearchParams(exact=True)`) before and
  after the optimize, and approximate after it at several `hnsw_ef`, with and without ACORN;
- recall@10 and @100 of the approximate search against the exact one, per caller: a broad
  caller, one collection, a 12% ACL group and a 0.5% ACL group (filtered HNSW is the risk);
- the optimize's duration (one indexing thread, as a background job on this 2-core machine
  would get), and whether the rest of the process runs during it: a Python thread ticking
  every 10 ms and a search from another thread, both started before the optimize;
- the alternative (minilm only, `--no-child-process` skips it): the optimize of a copy of the
  shard in a child process while this one keeps searching, and how long opening the
  optimized copy takes;
- reads after the optimize: no hit outside the caller's tenant/collection/ACL, points deleted
  after it stay gone, points upserted after it are found.

Vectors (say which in every report):
- `minilm`: all-MiniLM-L6-v2 vectors (the local model; cached by text in bench/.cache) of Cranfield + CISI
  documents and of their sentences (real vectors, about 20k), and to reach `--points`,
  synthetic neighbours of them: normalize(0.75 a + 0.25 b + noise), a and b real vectors of
  one source document, noise scaled so the cosine to `a` is about 0.9. Not a real 100k corpus:
  80% of the points sit close around the real ones.
- `hash`: the hash embedder (tests, the 1M scale bench) on the scale bench's synthetic
  documents (zipf pseudo-words): near-random 384-d vectors.
Queries: the datasets' query texts, embedded the same way.
"""

from __future__ import annotations

import os
import random
import re
import shutil
import statistics
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

import numpy as np
import qdrant_edge as qe

from bench import report
from bench.datasets import load
from bench.harness import machine
from shared.adapters.edge_vectors import EdgeVectorIndex, edge_point_id
from shared.model import DocKey, StoredDoc
from shared.ports import SearchFilter

DATA = Path("/work/shared/data")
SPACE = "default"
SENT = re.compile(r"(?<=[.!?])\s+")
# (name, filter): tenant t0 holds 90% of the points, t1 10% (never any caller's).
CALLERS: dict[str, SearchFilter] = {
    "broad": SearchFilter("t0", None, ("public", "group:g1")),
    "collection": SearchFilter("t0", ("c1",), ("public",)),
    "acl_12pct": SearchFilter("t0", None, ("group:big",)),
    "acl_0.5pct": SearchFilter("t0", None, ("group:g3",)),
}
# Search parameters after the optimize: qdrant-edge's default ef, set efs, and ACORN (the
# engine's filtered-HNSW search that also walks neighbours' neighbours when the filter is
# selective) at its default and at ef 256.
VARIANTS: dict[str, qe.SearchParams | None] = {
    "default": None, **{str(ef): qe.SearchParams(hnsw_ef=ef) for ef in (64, 128, 256, 512)},
    "acorn": qe.SearchParams(acorn=qe.AcornSearchParams(enable=True)),
    "acorn_256": qe.SearchParams(hnsw_ef=256, acorn=qe.AcornSearchParams(enable=True)),
}


def _texts(rng: random.Random) -> tuple[list[str], list[int], list[str]]:
    """Document and sentence texts, each with its source document's number; query texts."""
    texts: list[str] = []
    source: list[int] = []
    queries: list[str] = []
    n = 0
    for name in ("cranfield", "cisi"):
        ds = load(DATA / name)
        for d in ds.corpus.values():
            body = f"{d['title']}. {d['text']}".strip()
            texts.append(body[:2000])
            source.append(n)
            for s in SENT.split(d["text"]):
                if len(s.split()) >= 6:
                    texts.append(s[:1000])
                    source.append(n)
            n += 1
        queries += list(ds.queries.values())
    rng.shuffle(queries)
    return texts, source, queries


_MODEL: Any = None


def _minilm(texts: list[str]) -> np.ndarray:
    global _MODEL
    from bench.embed_server import CachedModel

    _MODEL = _MODEL or CachedModel()  # the local model (one thread on this machine), vectors cached by text
    model = _MODEL
    out: list[list[float]] = []
    for i in range(0, len(texts), 512):
        out += model.embed(texts[i:i + 512])
        print(f"  embedded {min(len(texts), i + 512)}/{len(texts)}", flush=True)
    return np.asarray(out, dtype=np.float32)


def _unit(x: np.ndarray) -> np.ndarray:
    return np.asarray(x / np.maximum(np.linalg.norm(x, axis=-1, keepdims=True), 1e-12), dtype=np.float32)


def minilm_vectors(points: int, n_queries: int, rng: random.Random) -> tuple[np.ndarray, np.ndarray, dict[str, Any]]:
    texts, source, queries = _texts(rng)
    print(f"embedding {len(texts)} texts and {n_queries} queries with all-MiniLM-L6-v2 (cached in bench/.cache)")
    t0 = time.perf_counter()
    real = _minilm(texts)
    q = _minilm(queries[:n_queries])
    embed_s = time.perf_counter() - t0
    by_doc: dict[int, list[int]] = {}
    for i, s in enumerate(source):
        by_doc.setdefault(s, []).append(i)
    nrng = np.random.default_rng(7)
    extra = max(0, points - len(real))
    a = nrng.integers(0, len(real), extra)
    b = np.array([rng.choice(by_doc[source[i]]) for i in a], dtype=np.int64)
    noise = _unit(nrng.standard_normal((extra, real.shape[1])).astype(np.float32))
    mix = _unit(0.75 * real[a] + 0.25 * real[b])
    syn = _unit(mix + 0.45 * noise)
    cos = float(np.mean(np.sum(syn[:2000] * real[a[:2000]], axis=1))) if extra else 1.0
    vecs = np.concatenate([real, syn])[:points]
    order = nrng.permutation(len(vecs))
    return vecs[order], q, {"real_vectors": int(min(points, len(real))), "synthetic_vectors": int(extra),
                            "synthetic_mean_cosine_to_source": round(cos, 3), "embed_s": round(embed_s, 1)}


def hash_vectors(points: int, n_queries: int, rng: random.Random) -> tuple[np.ndarray, np.ndarray, dict[str, Any]]:
    from bench.spine import synthetic_docs, zipf_vocabulary
    from shared.adapters.embedders.hash_embedder import HashEmbedder

    vocab = zipf_vocabulary(20_000, rng)
    emb = HashEmbedder(384)
    docs = synthetic_docs(points, rng, 60, vocab)
    vecs = np.asarray(emb.embed([f"{d['title']} {d['body']}" for d in docs]), dtype=np.float32)
    q = np.asarray(emb.embed([" ".join(rng.choices(vocab[20:2000], k=2)) for _ in range(n_queries)]),
                   dtype=np.float32)
    return vecs, q, {"source": "bench.spine.synthetic_docs (60 zipf pseudo-words) + 2-word queries"}


def _payload_doc(i: int, rng: random.Random) -> StoredDoc:
    tenant = "t1" if rng.random() < 0.10 else "t0"
    acl = ["public"] if rng.random() < 0.7 else [f"group:g{rng.randrange(50)}"]
    if rng.random() < 0.12:
        acl.append("group:big")
    fields = {"kind": rng.choice(["a", "b", "c"]), "year": 1950 + rng.randrange(70)}
    return StoredDoc(DocKey(tenant, f"c{rng.randrange(3)}", f"d{i}"), fields, acl, None, "", 0.0)


def _allowed(doc: StoredDoc, flt: SearchFilter) -> bool:
    return (doc.key.tenant == flt.tenant and (flt.collections is None or doc.key.collection in flt.collections)
            and bool(set(doc.acl) & set(flt.acl)))


def _query(shard: qe.EdgeShard, flt: SearchFilter, vec: list[float], k: int,
           params: qe.SearchParams | None) -> tuple[float, list[int]]:
    req = qe.QueryRequest(limit=k, query=qe.Query.Nearest(vec), filter=EdgeVectorIndex._filter(flt, None),
                          with_payload=False, params=params)
    t0 = time.perf_counter()
    pts = shard.query(req)
    return (time.perf_counter() - t0) * 1000, [int(p.id) for p in pts]


def _latency(shard: qe.EdgeShard, flt: SearchFilter, qs: np.ndarray, k: int,
             params: qe.SearchParams | None) -> tuple[float, list[list[int]]]:
    ms, ids = [], []
    for v in qs:
        t, got = _query(shard, flt, v.tolist(), k, params)
        ms.append(t)
        ids.append(got)
    return round(statistics.median(ms), 3), ids


def _recall(got: list[list[int]], truth: list[list[int]], k: int) -> float:
    per = [len(set(g[:k]) & set(t[:k])) / max(1, min(k, len(t))) for g, t in zip(got, truth, strict=True)]
    return round(statistics.mean(per), 4)


def _exact_table(shard: qe.EdgeShard, qs: np.ndarray) -> dict[str, Any]:
    out: dict[str, Any] = {}
    exact = qe.SearchParams(exact=True)
    for name, flt in CALLERS.items():
        p10, _ = _latency(shard, flt, qs, 10, exact)
        p500, ids = _latency(shard, flt, qs, 500, exact)
        out[name] = {"exact_p50_ms_k10": p10, "exact_p50_ms_k500": p500, "_truth": ids}
    return out


def _during_optimize(idx: EdgeVectorIndex, shard: qe.EdgeShard, q: list[float]) -> dict[str, Any]:
    """Optimize on a thread while this one ticks every 10 ms and another asks for one search
    0.3 s after the optimize started (it sleeps until then, so it holds no lock meanwhile)."""
    state: dict[str, Any] = {}

    def run() -> None:
        t0 = time.perf_counter()
        state["optimized"] = shard.optimize()
        state["optimize_end"] = time.perf_counter()
        state["optimize_s"] = state["optimize_end"] - t0

    def search() -> None:
        time.sleep(max(0.0, state["want"] - time.perf_counter()))
        hits = idx.search(SPACE, CALLERS["broad"], q, 10)
        state["search_end"], state["search_hits"] = time.perf_counter(), len(hits)

    t_start = time.perf_counter()
    state["want"] = t_start + 0.3
    searcher = threading.Thread(target=search)
    opt = threading.Thread(target=run)
    searcher.start()
    opt.start()
    ticks: list[float] = []
    while opt.is_alive():
        ticks.append(time.perf_counter())
        time.sleep(0.01)
    opt.join()
    searcher.join()
    end = state["optimize_end"]
    return {"optimize_s": round(state["optimize_s"], 2), "changed": state["optimized"],
            "python_ticks_during_optimize": len([t for t in ticks if t_start + 0.05 < t < end - 0.05]),
            "python_ticks_if_free": int((end - t_start) / 0.0101),
            "longest_python_gap_s": round(float(max(np.diff([t_start, *ticks, end]))), 2),
            "search_asked_0_3_s_in_answered_after_ms": round((state["search_end"] - state["want"]) * 1000, 1),
            # How much of the optimize (from the search's asking on) the search waited for.
            "search_wait_share_of_optimize": round((state["search_end"] - state["want"]) / (end - state["want"]), 3),
            "search_hits": state["search_hits"]}


_CHILD = """
import sys, qdrant_edge as qe
hnsw = qe.HnswIndexConfig(m=16, ef_construct=100, full_scan_threshold=10_000, max_indexing_threads=1)
cfg = qe.EdgeConfig(vectors=qe.EdgeVectorParams(size=int(sys.argv[2]), distance=qe.Distance.Cosine),
                    hnsw_config=hnsw)
shard = qe.EdgeShard.load(sys.argv[1], cfg)
shard.optimize()
shard.flush()
shard.close()
"""


def _child_optimize(idx: EdgeVectorIndex, root: Path, dim: int, qs: np.ndarray) -> dict[str, Any]:
    """The alternative: optimize a copy of the shard in a child process (nice 10) while this
    process keeps searching the live shard; then how long opening the optimized copy takes
    (the swap's share of a design that would adopt it). Figures only: nothing is swapped."""
    import subprocess
    import sys

    shard = idx._shards[SPACE]
    t0 = time.perf_counter()
    shard.flush()
    copy = root / "optimized-copy"
    shutil.copytree(root / SPACE, copy)
    copy_s = time.perf_counter() - t0
    base, _ = _latency(shard, CALLERS["broad"], qs[:50], 10, None)
    t0 = time.perf_counter()
    child = subprocess.Popen([sys.executable, "-c", _CHILD, str(copy), str(dim)],
                             preexec_fn=lambda: os.nice(10))  # noqa: PLW1509 - no threads in the child yet
    ms: list[float] = []
    ticks = 0
    while child.poll() is None:
        for v in qs[:50]:
            ms.append(_query(shard, CALLERS["broad"], v.tolist(), 10, None)[0])
        ticks += 1
        time.sleep(0.05)
    child_s = time.perf_counter() - t0
    t0 = time.perf_counter()
    loaded = qe.EdgeShard.load(str(copy))
    load_s = time.perf_counter() - t0
    info = loaded.info()
    hnsw_ms, _ = _latency(loaded, CALLERS["broad"], qs[:50], 10, None)
    loaded.close()
    shutil.rmtree(copy, ignore_errors=True)
    return {"returncode": child.returncode, "flush_and_copy_s": round(copy_s, 2), "child_optimize_s": round(child_s, 1),
            "searches_during": len(ms), "search_rounds_during": ticks,
            "broad_k10_p50_ms_before": base, "broad_k10_p50_ms_during": round(statistics.median(ms), 3) if ms else None,
            "broad_k10_p95_ms_during": report.percentile(ms, 0.95) if ms else None,
            "open_optimized_copy_s": round(load_s, 3), "copy_indexed_vectors": info.indexed_vectors_count,
            "copy_broad_k10_p50_ms": hnsw_ms}


def _reads_after(idx: EdgeVectorIndex, docs: list[StoredDoc], vecs: np.ndarray, qs: np.ndarray) -> dict[str, Any]:
    shard = idx._shards[SPACE]
    by_id = {edge_point_id(d.key): d for d in docs}
    leaks = 0
    for flt in CALLERS.values():
        for v in qs[:20]:
            _, ids = _query(shard, flt, v.tolist(), 500, None)
            leaks += sum(1 for i in ids if not _allowed(by_id[i], flt))
    # Deletes after the optimize: points of the optimized (non-appendable) segment.
    gone = [i for i in range(200) if _allowed(docs[i], CALLERS["broad"])][:50]
    idx.delete(SPACE, [docs[i].key for i in gone])
    found_deleted = 0
    for i in gone:
        hits = idx.search(SPACE, CALLERS["broad"], vecs[i].tolist(), 10)
        found_deleted += sum(1 for h in hits if h.key == docs[i].key)
    # Upserts after the optimize: new points, each looked up by its own vector.
    fresh = [StoredDoc(DocKey("t0", "c0", f"new{i}"), {"kind": "a"}, ["public"], None, "", 0.0) for i in range(50)]
    fvecs = _unit(np.random.default_rng(5).standard_normal((50, vecs.shape[1])).astype(np.float32))
    idx.upsert(SPACE, [(d, v.tolist()) for d, v in zip(fresh, fvecs, strict=True)])
    found_new = sum(1 for d, v in zip(fresh, fvecs, strict=True)
                    if any(h.key == d.key for h in idx.search(SPACE, CALLERS["broad"], v.tolist(), 10)))
    # Re-upserting an optimized point with a new ACL moves it: the old ACL must stop matching.
    moved = [i for i in range(200, 2000) if docs[i].key.tenant == "t0"][:20]
    for i in moved:
        d = docs[i]
        idx.upsert(SPACE, [(StoredDoc(d.key, d.fields, ["group:revoked"], None, "", 0.0), vecs[i].tolist())])
    stale = sum(1 for i in moved for h in idx.search(SPACE, SearchFilter("t0", None, tuple(docs[i].acl)),
                                                      vecs[i].tolist(), 10) if h.key == docs[i].key)
    return {"leaks_outside_filter": leaks, "deleted_found": found_deleted, "deleted": len(gone),
            "upserted_found": found_new, "upserted": len(fresh), "reacl_old_acl_found": stale,
            "reacl": len(moved)}


def run_kind(kind: str, points: int, n_queries: int, child_process: bool = True) -> dict[str, Any]:
    rng = random.Random(11)
    t0 = time.perf_counter()
    vecs, qs, about = (minilm_vectors if kind == "minilm" else hash_vectors)(points, n_queries, rng)
    about["vectors_s"] = round(time.perf_counter() - t0, 1)
    root = Path(tempfile.mkdtemp(prefix="vibe-edge-hnsw-"))
    try:
        idx = EdgeVectorIndex(root)
        prng = random.Random(3)
        docs = [_payload_doc(i, prng) for i in range(len(vecs))]
        t0 = time.perf_counter()
        for s in range(0, len(docs), 2000):
            idx.upsert(SPACE, [(d, v.tolist()) for d, v in zip(docs[s:s + 2000], vecs[s:s + 2000], strict=True)])
        idx.flush()
        upsert_s = time.perf_counter() - t0
        counts = {n: sum(1 for d in docs if _allowed(d, f)) for n, f in CALLERS.items()}
        # One indexing thread: what a background optimize could take on this 2-core machine.
        idx.close()
        hnsw = qe.HnswIndexConfig(m=16, ef_construct=100, full_scan_threshold=10_000, max_indexing_threads=1)
        idx._shards[SPACE] = qe.EdgeShard.load(str(root / SPACE), qe.EdgeConfig(
            vectors=qe.EdgeVectorParams(size=vecs.shape[1], distance=qe.Distance.Cosine), hnsw_config=hnsw))
        shard = idx._shards[SPACE]
        info0 = shard.info()
        before = _exact_table(shard, qs)
        for name, flt in CALLERS.items():  # default params before the optimize: plain segments, exact anyway
            before[name]["default_p50_ms_k10"] = _latency(shard, flt, qs, 10, None)[0]
        print("before", {n: {k: v for k, v in r.items() if not k.startswith("_")} for n, r in before.items()})
        child = _child_optimize(idx, root, vecs.shape[1], qs) if kind == "minilm" and child_process else None
        print("child process", child)
        during = _during_optimize(idx, shard, qs[0].tolist())
        print("during", during)
        info1 = shard.info()
        after: dict[str, Any] = {}
        exact_after = _exact_table(shard, qs)
        for name, flt in CALLERS.items():
            truth = before[name].pop("_truth")
            exact_after[name].pop("_truth")
            row: dict[str, Any] = {"matching_points": counts[name], **before[name],
                                   "exact_after_p50_ms_k10": exact_after[name]["exact_p50_ms_k10"],
                                   "exact_after_p50_ms_k500": exact_after[name]["exact_p50_ms_k500"], "hnsw": {}}
            for label, params in VARIANTS.items():
                p10, ids10 = _latency(shard, flt, qs, 10, params)
                p500, ids500 = _latency(shard, flt, qs, 500, params)
                row["hnsw"][label] = {
                    "p50_ms_k10": p10, "p50_ms_k500": p500,
                    "recall_at_10": _recall(ids10, [t[:10] for t in truth], 10),
                    "recall_at_100": _recall(ids500, [t[:100] for t in truth], 100),
                    "recall_at_500": _recall(ids500, truth, 500)}
            after[name] = row
            print(name, {k: v for k, v in row.items() if k != "hnsw"},
                  {e: (r["recall_at_10"], r["recall_at_100"], r["p50_ms_k10"], r["p50_ms_k500"])
                   for e, r in row["hnsw"].items()})
        reads = _reads_after(idx, docs, vecs, qs)
        print("reads after", reads)
        idx.close()
        return {"vectors": kind, "about_vectors": about, "points": len(vecs), "queries": len(qs),
                "upsert_s": round(upsert_s, 1), "hnsw_config": {"m": 16, "ef_construct": 100,
                                                                  "full_scan_threshold_kb": 10_000,
                                                                  "max_indexing_threads": 1},
                "segments_before": info0.segments_count, "indexed_before": info0.indexed_vectors_count,
                "segments_after": info1.segments_count, "indexed_after": info1.indexed_vectors_count,
                "during_optimize": during, "child_process_optimize": child, "callers": after,
                "reads_after_optimize": reads}
    finally:
        shutil.rmtree(root, ignore_errors=True)


def _markdown(doc: dict[str, Any]) -> str:
    lines = [f"# qdrant-edge HNSW: optimize or not ({doc['stamp']})\n",
             f"Machine: {doc['machine']}; load before {doc['load_average_before']}\n"]
    for r in doc["runs"]:
        d = r["during_optimize"]
        lines.append(f"\n## {r['vectors']} vectors, {r['points']:,} points, {r['queries']} queries\n")
        lines.append(f"About the vectors: {r['about_vectors']}\n")
        lines.append(f"Optimize in this process: {d['optimize_s']} s (one indexing thread); a Python thread "
                     f"ticked {d['python_ticks_during_optimize']} times of ~{d['python_ticks_if_free']} (longest "
                     f"gap {d['longest_python_gap_s']} s); a search asked 0.3 s in was answered "
                     f"{d['search_asked_0_3_s_in_answered_after_ms']} ms later (share of the optimize it "
                     f"waited for: {d.get('search_wait_share_of_optimize')}).\n")
        if r["child_process_optimize"]:
            lines.append(f"Optimize of a copy in a child process: {r['child_process_optimize']}\n")
        lines.append(f"Reads after the optimize: {r['reads_after_optimize']}\n")
        rows = []
        for name, c in r["callers"].items():
            for ef, h in c["hnsw"].items():
                rows.append([name, c["matching_points"], c["exact_p50_ms_k10"], c["exact_p50_ms_k500"], ef,
                             h["p50_ms_k10"], h["p50_ms_k500"], h["recall_at_10"], h["recall_at_100"],
                             round(c["exact_p50_ms_k10"] / max(h["p50_ms_k10"], 1e-3), 1)])
        lines.append(report.table(["caller", "matching", "exact k10 ms", "exact k500 ms", "search params",
                                   "hnsw k10 ms", "hnsw k500 ms", "recall@10", "recall@100", "speed-up k10"], rows))
    return "\n".join(lines)


def main(points: int, queries: int, kinds: list[str], child_process: bool = True) -> Path:
    load0 = os.getloadavg()
    runs = [run_kind(k, points, queries, child_process) for k in kinds]
    doc = {"name": "edge-hnsw", "machine": machine(), "load_average_before": load0,
           "load_average_after": os.getloadavg(), "stamp": time.strftime("%Y%m%d-%H%M%S"), "runs": runs}
    return report.write(doc, _markdown(doc))


if __name__ == "__main__":
    import argparse

    ap = argparse.ArgumentParser()
    ap.add_argument("--points", type=int, default=100_000)
    ap.add_argument("--queries", type=int, default=100)
    ap.add_argument("--vectors", default="minilm,hash")
    ap.add_argument("--no-child-process", action="store_true", help="skip the child-process optimize (minilm)")
    a = ap.parse_args()
    main(a.points, a.queries, a.vectors.split(","), not a.no_child_process)
