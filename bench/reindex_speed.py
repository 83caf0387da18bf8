"""Reindex at the speed of the model: an admin reindex with the local model, against the model's
own rate, and what it costs reads, all in one run.

    python -m bench reindex-speed [--seconds-before 60] [--docs 0]

On the dev abstracts (/work/shared/data: every collection's corpus, one collection `abs`),
embedded profile, the real all-MiniLM-L6-v2 on onnxruntime, the server's own worker threads:

a. the model's raw rate: documents per second embedding the first 1,024 of the same texts in
   calls of 64, in this process, with the server's encoder settings, while the server is idle;
b. before: a reindex paced by the per-minute bucket (VIBE_ADMIN_LANE_LOCAL_UNMETERED=false, the
   default 200 a minute) for `--seconds-before`, its measured rate and the time it implies for
   the corpus; after: the same server restarted with the admin lane (the defaults) finishes that
   reindex (the task resumes), then a forced reindex re-embeds every document: docs/s of both,
   as a share of (a); and the progress view's ETA at about a quarter of the forced reindex
   against the time it really took;
c. read latency (complete JSON answers, keyword and hybrid interleaved, distinct queries, paced
   alike) while the forced reindex runs, against the same reads idle: p50 and p95, as ratios.

Every measurement shares the machine with whatever else runs on it: the ratios, taken in one
run, are what to quote.
"""

from __future__ import annotations

import json
import os
import threading
import time
from pathlib import Path
from typing import Any

from bench import harness, report
from bench.datasets import load
from harness.server import Served

DATA = Path(os.environ.get("VIBE_BENCH_DATA", "/work/shared/data"))
COLLECTION = "abs"
BATCH = 64
RAW_SAMPLE = 1024  # texts of (a): 16 calls of 64, enough for a steady rate
# Promotion off: the benchmark's reindexes are the only backfills. Lifecycle ticks stay on.
BASE_ENV = {"VIBE_PROMOTE_MIN_QUERIES": "1000000000", "VIBE_PROMOTE_MIN_HITS": "0"}


def corpus(limit: int) -> tuple[list[dict[str, Any]], list[str]]:
    """Documents (`title`, `body`) of every dev collection and their queries."""
    docs: list[dict[str, Any]] = []
    queries: list[str] = []
    for folder in sorted(p for p in DATA.iterdir() if (p / "corpus.jsonl").exists()):
        ds = load(folder)
        docs += [{"_id": f"{ds.name}-{i}", "title": d["title"], "body": d["text"]} for i, d in ds.corpus.items()]
        queries += list(ds.queries.values())
    return (docs[:limit] if limit else docs), queries


def raw_rate(data_dir: Path, texts: list[str]) -> float:
    """(a) documents per second through the server's own encoder settings, calls of `BATCH`."""
    from shared.adapters.embedders.onnx_embedder import build_local
    from shared.config import Settings

    emb = build_local(Settings(data_dir=data_dir, embedder="local"))
    emb.embed(texts[:BATCH])  # warm-up
    t0 = time.perf_counter()
    for i in range(0, len(texts), BATCH):
        emb.embed(texts[i:i + BATCH])
    return len(texts) / (time.perf_counter() - t0)


def _backfill(s: Served, task_id: str) -> dict[str, Any]:
    r = s.call("GET", "/semantic/backfills", harness.KEY)
    r.raise_for_status()
    return next((t for t in r.json()["backfills"] if t["id"] == task_id), {})


def _settled(s: Served, task_id: str) -> bool:
    cov = harness.coverage(s, COLLECTION)
    return cov["states"].get("queued", 0) == 0 and _backfill(s, task_id).get("state") == "done"


def before(data_dir: Path, docs: list[dict[str, Any]], seconds: float) -> dict[str, Any]:
    """(b, before) the bucket-paced reindex for `seconds`; the raw rate (a) while idle."""
    env = {**BASE_ENV, "VIBE_ADMIN_LANE_LOCAL_UNMETERED": "false"}
    with harness.instance(data_dir, env=env) as s:
        harness.ingest(s, COLLECTION, docs)
        texts = [f"{d['title']}\n{d['body']}" for d in docs]
        rate_a = raw_rate(data_dir, texts[:RAW_SAMPLE])
        print(f"(a) raw model: {rate_a:.1f} docs/s")
        t0 = time.perf_counter()
        r = s.call("POST", "/semantic/reindex", harness.KEY, {"collection": COLLECTION})
        r.raise_for_status()
        while time.perf_counter() - t0 < seconds:
            time.sleep(1.0)
        took = time.perf_counter() - t0
        ready = int(harness.coverage(s, COLLECTION)["ready"])
    per_minute = 200
    return {"raw_docs_per_s": round(rate_a, 2), "seconds": round(took, 1), "ready": ready,
            "docs_per_s": round(ready / took, 2), "per_tenant_per_min": per_minute,
            "corpus_minutes_at_bucket": round(len(docs) / per_minute, 1)}


def reads(s: Served, queries: list[str], pace: float, stop: threading.Event | None = None) -> dict[str, list[float]]:
    """Keyword and hybrid JSON answers, interleaved, one every `pace` seconds."""
    out: dict[str, list[float]] = {"keyword": [], "hybrid": []}
    for i, q in enumerate(queries):
        if stop is not None and stop.is_set():
            break
        strategy = "keyword" if i % 2 == 0 else "hybrid"
        t0 = time.perf_counter()
        r = s.read(harness.KEY, collection=COLLECTION, q=q, limit=10, semantic={"strategy": strategy})
        r.raise_for_status()
        out[strategy].append((time.perf_counter() - t0) * 1000)
        time.sleep(pace)
    return out


def _pcts(xs: list[float]) -> dict[str, float]:
    return {"n": len(xs), "p50_ms": round(report.percentile(xs, 0.5), 2),
            "p95_ms": round(report.percentile(xs, 0.95), 2)}


def after(data_dir: Path, docs: list[dict[str, Any]], queries: list[str]) -> dict[str, Any]:
    """(b, after) and (c): the admin lane finishing the reindex, then a forced one under reads."""
    with harness.instance(data_dir, env=BASE_ENV) as s:
        # the bucket-paced task resumes on the admin lane (an accepted reindex is never lost)
        t0 = time.perf_counter()
        tasks = s.call("GET", "/semantic/backfills", harness.KEY).json()["backfills"]
        task_id = next(t["id"] for t in tasks if t["state"] == "running")
        start_ready = int(harness.coverage(s, COLLECTION)["ready"])
        while not _settled(s, task_id):
            time.sleep(0.25)
        resumed_s = time.perf_counter() - t0
        resumed_docs = int(harness.coverage(s, COLLECTION)["ready"]) - start_ready
        print(f"(b) resumed reindex: {resumed_docs} docs in {resumed_s:.1f}s")

        half = len(queries) // 2
        busy_q, idle_q = queries[:half], queries[half:2 * half]
        rate = max(1.0, resumed_docs / max(resumed_s, 1e-3))
        pace = max(0.02, len(docs) / rate / max(1, half))  # the busy reads spread over the forced reindex
        idle = reads(s, idle_q, pace)
        print("(c) idle", {k: _pcts(v) for k, v in idle.items()})

        stop = threading.Event()
        busy: dict[str, list[float]] = {}
        reader = threading.Thread(target=lambda: busy.update(reads(s, busy_q, pace, stop)))
        t1 = time.perf_counter()
        r = s.call("POST", "/semantic/reindex", harness.KEY, {"collection": COLLECTION, "force": True})
        r.raise_for_status()
        forced_id = str(r.json()["task"]["id"])
        reader.start()
        eta: dict[str, Any] = {}
        while not _settled(s, forced_id):
            t = _backfill(s, forced_id)
            if not eta and t.get("etaSeconds") is not None and t.get("progressPct", 0) >= 25:
                eta = {"at_pct": t["progressPct"], "eta_s": t["etaSeconds"], "docs_per_s": t["docsPerSecond"],
                       "at_s": time.perf_counter() - t1}
            time.sleep(0.25)
        forced_s = time.perf_counter() - t1
        stop.set()
        reader.join()
        if eta:
            eta["actual_remaining_s"] = round(forced_s - eta.pop("at_s"), 1)
        print(f"(b) forced reindex: {len(docs)} docs in {forced_s:.1f}s; eta {eta}")
    return {"resumed": {"docs": resumed_docs, "seconds": round(resumed_s, 1),
                        "docs_per_s": round(resumed_docs / resumed_s, 2)},
            "forced": {"docs": len(docs), "seconds": round(forced_s, 1), "docs_per_s": round(len(docs) / forced_s, 2),
                       "eta_at_a_quarter": eta},
            "reads": {"pace_s": round(pace, 3), "idle": {k: _pcts(v) for k, v in idle.items()},
                      "during_reindex": {k: _pcts(v) for k, v in busy.items()},
                      "samples": {"idle": idle, "during_reindex": busy}}}


def main(seconds_before: float, limit: int, data_dir: Path) -> Path:
    docs, queries = corpus(limit)
    b = before(data_dir, docs, seconds_before)
    a = after(data_dir, docs, queries)
    raw = b["raw_docs_per_s"]
    ratios: dict[str, Any] = {
        "before_share_of_model": round(b["docs_per_s"] / raw, 3),
        "resumed_share_of_model": round(a["resumed"]["docs_per_s"] / raw, 3),
        "forced_share_of_model": round(a["forced"]["docs_per_s"] / raw, 3),
        "speed_up_forced_vs_bucket": round(a["forced"]["docs_per_s"] / max(b["docs_per_s"], 1e-9), 1),
    }
    for strategy in ("keyword", "hybrid"):
        idle, busy = a["reads"]["idle"][strategy], a["reads"]["during_reindex"].get(strategy)
        if busy and busy["n"]:
            ratios[f"{strategy}_p50_busy_over_idle"] = round(busy["p50_ms"] / idle["p50_ms"], 2)
            ratios[f"{strategy}_p95_busy_over_idle"] = round(busy["p95_ms"] / idle["p95_ms"], 2)
    doc = {"name": "reindex-speed", "docs": len(docs), "batch": BATCH, "machine": harness.machine(),
           "command": f"python -m bench reindex-speed --seconds-before {seconds_before:g}"
                      + (f" --docs {limit}" if limit else ""),
           "model": b, "after": a, "ratios": ratios}
    md = "\n".join([
        f"# Reindex speed ({len(docs)} documents, all-MiniLM-L6-v2 on onnxruntime, embedded profile)", "",
        report.table(["", "docs/s", "share of the model"], [
            ["(a) model alone, calls of 64", raw, 1.0],
            ["(b) reindex on the per-minute bucket (200/min)", b["docs_per_s"], ratios["before_share_of_model"]],
            ["(b) the same reindex resumed on the admin lane", a["resumed"]["docs_per_s"],
             ratios["resumed_share_of_model"]],
            ["(b) forced reindex of every document, admin lane", a["forced"]["docs_per_s"],
             ratios["forced_share_of_model"]]]), "",
        report.table(["read (JSON)", "idle p50", "idle p95", "during reindex p50", "during reindex p95"], [
            [k, a["reads"]["idle"][k]["p50_ms"], a["reads"]["idle"][k]["p95_ms"],
             a["reads"]["during_reindex"].get(k, {}).get("p50_ms"),
             a["reads"]["during_reindex"].get(k, {}).get("p95_ms")] for k in ("keyword", "hybrid")]), "",
        f"ratios: {json.dumps(ratios)}", ""])
    return report.write(doc, md)
