"""One instance grown to N documents (default 1M), measured as it grows.

    python -m bench scale --docs 1000000 --queries 60

Embedded profile (SQLite store, tantivy, qdrant-edge), hash embedder (the model is not what
is measured here: `bench latency` measures it), served over HTTP. Bulk ingest in chunks of
`--chunk` documents, request bodies encoded before the clock starts (the client's JSON
encoding is not the server's speed). At each checkpoint: ingest rate to acknowledged and to
searchable (index follower caught up), first-event p50/p95 per strategy over SSE (fresh
queries: each touches documents and embeds them with the hash embedder), a trivial round
trip (/healthz) and the raw engine query as baselines, the server's RSS and peak RSS, and the
data dir's disk use per component. Writes bench/results/perf-scale.json (the newest run)
and perf-scale-<stamp>.json + .md.
"""

from __future__ import annotations

import os
import random
import subprocess
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import orjson

from bench import report
from bench.harness import machine
from bench.spine import first_event_ms, raw_engine_ms, synthetic_docs, zipf_vocabulary
from harness.server import KEYS, Served, served

STRATEGIES = ("keyword", "semantic", "hybrid", "auto")
CHECKPOINTS = (10_000, 100_000, 250_000, 500_000, 1_000_000)
# Lazy throughout (no promotion to eager): the figures are the lazy read path's.
ENV = {"VIBE_EMBEDDER": "hash", "VIBE_EMBED_DIM": "384", "VIBE_PER_TENANT_PER_MIN": "1000000",
       "VIBE_PROMOTE_MIN_QUERIES": "1000000000", "VIBE_PROMOTE_MIN_HITS": "0"}


def _bodies(n: int, chunk: int, rng: random.Random, vocab: list[str]) -> Iterator[bytes]:
    for start in range(0, n, chunk):
        yield orjson.dumps({"docs": synthetic_docs(min(chunk, n - start), rng, 60, vocab, start=start)})


def _rss_mb(pid: int) -> dict[str, float]:
    out = {}
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith(("VmRSS:", "VmHWM:")):
            out[line.split(":")[0]] = round(int(line.split()[1]) / 1024, 1)
    return {"rss_mb": out.get("VmRSS", float("nan")), "peak_rss_mb": out.get("VmHWM", float("nan"))}


def _disk_mb(data_dir: Path) -> dict[str, float]:
    """Per component: the store (SQLite files), the lexical index, the vector index, the rest."""
    groups: dict[str, float] = {"store": 0.0, "lexical": 0.0, "vectors": 0.0, "other": 0.0}
    for path in data_dir.rglob("*"):
        if not path.is_file():
            continue
        top = path.relative_to(data_dir).parts[0]
        group = ("store" if top.startswith("vibe.sqlite3") else top if top in ("lexical", "vectors") else "other")
        groups[group] += path.stat().st_size / 1e6
    return {k: round(v, 1) for k, v in groups.items()} | {"total": round(sum(groups.values()), 1)}


def _caught_up(s: Served, timeout: float = 1800) -> float:
    """Seconds until the index follower has applied every change (documents are searchable)."""
    t0 = time.perf_counter()
    while time.perf_counter() - t0 < timeout:
        lag = s.call("GET", "/semantic/lag", "k-admin-a").json()
        if lag.get("indexFollowerLag", 0) == 0:
            return time.perf_counter() - t0
        time.sleep(0.2)
    raise TimeoutError("the index follower did not catch up")


def _first_events(s: Served, queries: list[str]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for i, strategy in enumerate(STRATEGIES):
        qs = queries[i::len(STRATEGIES)]
        took = [first_event_ms(s, q, strategy) for q in qs]
        out[strategy] = {"first_p50_ms": report.percentile(took, 0.5), "first_p95_ms": report.percentile(took, 0.95),
                         "samples": [round(x, 3) for x in took]}
    trivial = []
    for _ in range(100):
        t0 = time.perf_counter()
        s.client.get("/healthz")
        trivial.append((time.perf_counter() - t0) * 1000)
    out["trivial_p50_ms"] = report.percentile(trivial, 0.5)
    return out


def main(docs: int, queries: int, chunk: int = 2000) -> Path:
    rng = random.Random(13)
    vocab = zipf_vocabulary(20_000, rng)
    data_dir = Path(tempfile.mkdtemp(prefix="vibe-scale-")) / "data"
    print("encoding request bodies (not timed)")
    bodies = list(_bodies(docs, chunk, rng, vocab))
    marks = sorted({c for c in CHECKPOINTS if c < docs} | {docs})
    points: list[dict[str, Any]] = []
    sent, ack_s, load0 = 0, 0.0, os.getloadavg()
    with served(data_dir, env=ENV, keys=KEYS) as s:
        for body in bodies:
            t0 = time.perf_counter()
            r = s.call("POST", "/v1/collections/syn/docs:bulk", "k-admin-a",
                       content=body, headers={"Content-Type": "application/json"})
            ack_s += time.perf_counter() - t0
            if r.status_code != 200 or r.json()["rejected"]:
                raise RuntimeError(f"bulk failed: {r.status_code} {r.text[:300]}")
            sent += r.json()["accepted"]
            if sent in marks:
                settle_s = _caught_up(s)
                qs = [" ".join(rng.choices(vocab[20:2000], k=2)) for _ in range(queries * len(STRATEGIES))]
                point = {"docs": sent, "ingest_ack_docs_per_s": round(sent / ack_s, 1),
                         "ingest_searchable_docs_per_s": round(sent / (ack_s + settle_s), 1),
                         "follower_settle_s_after_last_chunk": round(settle_s, 2),
                         **_first_events(s, qs), **_rss_mb(s.proc.pid), "disk_mb": _disk_mb(data_dir),
                         "load_average": os.getloadavg()}
                engine = raw_engine_ms(data_dir, qs[:100]) if sent == docs else []
                if engine:
                    point["engine_p50_ms"] = report.percentile(engine, 0.5)
                points.append(point)
                print({k: v for k, v in point.items() if k not in STRATEGIES}, {
                    st: point[st]["first_p50_ms"] for st in STRATEGIES})
        peak = _rss_mb(s.proc.pid)
    du = subprocess.run(["du", "-sm", str(data_dir)], capture_output=True, text=True).stdout.split()[0]
    doc = {"name": "perf-scale", "machine": machine(), "docs": docs, "chunk": chunk, "env": ENV,
           "queries_per_strategy": queries, "points": points, "final": peak | {"du_mb": int(du)},
           "load_average_before": load0}
    return report.write(doc, _markdown(doc))


def _markdown(doc: dict[str, Any]) -> str:
    head = ["docs", "ack docs/s", "searchable docs/s", *(f"{s} first p50 (p95)" for s in STRATEGIES),
            "/healthz p50", "RSS MB", "peak RSS MB", "disk MB (store/lexical/vectors)"]
    rows = [[p["docs"], p["ingest_ack_docs_per_s"], p["ingest_searchable_docs_per_s"],
             *(f"{p[s]['first_p50_ms']} ({p[s]['first_p95_ms']})" for s in STRATEGIES), p["trivial_p50_ms"],
             p["rss_mb"], p["peak_rss_mb"],
             f"{p['disk_mb']['total']} ({p['disk_mb']['store']}/{p['disk_mb']['lexical']}/{p['disk_mb']['vectors']})"]
            for p in doc["points"]]
    last = doc["points"][-1]
    per_m = 1e6 / last["docs"]
    return (f"# Scale: one embedded instance grown to {doc['docs']:,} documents\n\n"
            "Embedded profile (SQLite, tantivy, qdrant-edge), hash embedder (384 dims), served over HTTP, "
            f"bulk chunks of {doc['chunk']}. Times in ms; first events over SSE on fresh two-word queries "
            f"({doc['queries_per_strategy']} per strategy and checkpoint). Only documents a query touched "
            "have vectors (lazy), so *vectors* disk is the touched ones.\n\n"
            + report.table(head, rows)
            + f"\nPer million documents: peak RSS {round(last['peak_rss_mb'] * per_m)} MB, disk "
              f"{round(last['disk_mb']['total'] * per_m)} MB (store {round(last['disk_mb']['store'] * per_m)}, "
              f"lexical {round(last['disk_mb']['lexical'] * per_m)}). Raw engine BM25 p50 at the end: "
              f"{last.get('engine_p50_ms', '—')} ms. Load average before {doc['load_average_before']}, at the "
              f"end {last['load_average']} (2 shared cores).\n")
