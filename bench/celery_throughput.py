"""Celery + Redis vs the in-process runner on the same workload.

    .venv/bin/python -m bench.celery_throughput --docs 5000 --workers 2 --reads 200

Measured in one run, so the figures read as ratios:
  - job throughput (documents/s from `queued` to `ready` after a reindex of --docs documents)
    through Celery workers (one `vibe-semantic worker --concurrency W` process, a private
    redis-server) vs the in-process runner (W worker threads), same embedder, same batch size;
  - the read path's added latency: a JSON readOnce (keyword) over fresh cold documents, so
    its touch queues what the touch policy picks (`read_touch_queued` / --reads per read),
    p50/p95, with the Celery producer vs the in-process queue; and the bare `enqueue()` of
    50 jobs (the per-query ceiling).
The embedder is the hash embedder (CPU-bound, no model) unless --provider-ms is given: then
both runs call the local OpenAI-protocol server, which waits that long per call (a remote
provider's latency). Writes bench/results/celery-throughput-<timestamp>.json.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import tempfile
import time
from collections.abc import Iterator
from contextlib import ExitStack, contextmanager
from pathlib import Path
from typing import Any

from redis import Redis

from harness.celery_worker import start_worker
from harness.openai_server import OpenAIProtocolServer
from harness.postgres_server import postgres_server
from harness.redis_server import RedisServer
from services.api.routes_admin import reindex
from services.planner.planner import ReadRequest
from services.wiring import Container, build
from shared.config import Settings
from shared.model import DocKey, EmbedJob, Principal

TENANT = "bench"
ADMIN = Principal(TENANT, ("user:admin",), frozenset({"read", "write", "admin"}))


class SlowProvider(OpenAIProtocolServer):
    def __init__(self, dim: int, delay: float):
        super().__init__(dim)
        self.delay = delay

    def _answer(self, body: dict[str, Any]) -> tuple[int, dict[str, Any], dict[str, str]]:
        time.sleep(self.delay)
        return super()._answer(body)


def pct(xs: list[float], p: float) -> float:
    s = sorted(xs)
    return s[min(len(s) - 1, int(p * len(s)))]


def env_for(s: Settings) -> dict[str, str]:
    keep = ("queue", "redis_url", "data_dir", "embedder", "embed_dim", "embed_batch_size", "openai_base_url",
            "embed_model", "per_tenant_per_min", "workers", "store", "postgres_url")
    return {f"VIBE_{k.upper()}": str(getattr(s, k)) for k in keep if getattr(s, k) is not None}


def load(c: Container, collection: str, docs: int, group: int = 0) -> None:
    """Documents in a lazy collection: stored and indexed, nothing queued yet."""
    rows = [c.docs.parse(ADMIN, collection, f"d{i}",
                         {"title": f"g{i // 50 if group else 0} report {i}", "body": f"unique body {i} wing flow"})
            for i in range(docs)]
    for i in range(0, len(rows), 2000):
        c.docs.put(rows[i : i + 2000])


def drain_seconds(c: Container, collection: str, timeout: float = 1800) -> float:
    t0 = time.perf_counter()
    n = reindex(c, TENANT, collection)
    assert n > 0
    while c.store.queued_count(c.settings.space, TENANT):
        if time.perf_counter() - t0 > timeout:
            raise RuntimeError("jobs did not drain")
        time.sleep(0.01)
    return time.perf_counter() - t0


def read_latencies(c: Container, reads: int) -> tuple[list[float], list[float]]:
    """JSON reads whose touch queues fresh cold documents (group gK), and the bare enqueue of
    50 fresh jobs. Nothing consumes meanwhile, so only the producer is measured."""
    read_ms, enqueue_ms = [], []
    for k in range(reads):
        t0 = time.perf_counter()
        c.planner.open(ADMIN, ReadRequest("reads", f"g{k}", "keyword", limit=10), streaming=False)
        read_ms.append((time.perf_counter() - t0) * 1000)
    space = c.settings.space
    for k in range(reads):
        jobs = [EmbedJob(DocKey(TENANT, "enqueue-only", f"{k}-{i}"), space, f"fresh-{k}-{i}") for i in range(50)]
        t0 = time.perf_counter()
        c.queue.enqueue(jobs)
        enqueue_ms.append((time.perf_counter() - t0) * 1000)
    return read_ms, enqueue_ms


def summary(ms: list[float]) -> dict[str, float]:
    return {"p50_ms": round(pct(ms, 0.5), 3), "p95_ms": round(pct(ms, 0.95), 3),
            "mean_ms": round(statistics.fmean(ms), 3)}


@contextmanager
def container(s: Settings) -> Iterator[Container]:
    c = build(s)
    c.start()
    try:
        yield c
    finally:
        c.stop()


def run_profile(s: Settings, docs: int, reads: int, workers: int, tmp: Path) -> dict[str, Any]:
    out: dict[str, Any] = {}
    with container(s) as c:
        load(c, "work", docs)
        load(c, "reads", reads * 50, group=1)
        with ExitStack() as consumers:
            if s.queue == "celery":
                consumers.enter_context(_worker(s, workers, tmp))
            secs = drain_seconds(c, "work")
        out["throughput"] = {"docs": docs, "seconds": round(secs, 3), "docs_per_s": round(docs / secs, 1)}
        c.queue.stop()  # no consumer from here on: the producer alone is measured
        read_ms, enqueue_ms = read_latencies(c, reads)
        out["read_json_touch50"] = summary(read_ms)
        out["enqueue50"] = summary(enqueue_ms)
        out["read_touch_queued"] = c.store.queued_count(s.space, TENANT)  # proves the reads did queue
    return out


@contextmanager
def _worker(s: Settings, workers: int, tmp: Path) -> Iterator[None]:
    w = start_worker(env_for(s), tmp / "logs", concurrency=workers)
    try:
        yield
    finally:
        w.stop()


def _postgres_ratios(results: dict[str, Any]) -> dict[str, float]:
    if "celery_postgres" not in results:
        return {}
    pg, sq = results["celery_postgres"], results["celery"]
    read_pg, read_sq = pg["read_json_touch50"]["p50_ms"], sq["read_json_touch50"]["p50_ms"]
    return {"celery_postgres_vs_celery_sqlite_throughput": round(pg["throughput"]["docs_per_s"]
                                                                / sq["throughput"]["docs_per_s"], 3),
            "postgres_read_p50_added_ms": round(read_pg - read_sq, 3)}


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--docs", type=int, default=5000)
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--reads", type=int, default=200)
    ap.add_argument("--batch", type=int, default=32)
    ap.add_argument("--provider-ms", type=float, default=0.0, help="use the local OpenAI-protocol server")
    ap.add_argument("--postgres", action="store_true",
                    help="also Celery with the PostgreSQL store (a private cluster; the worker gets its own data dir)")
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as d, ExitStack() as stack:
        tmp = Path(d)
        redis = RedisServer(tmp / "redis").start()
        stack.callback(redis.stop)
        common: dict[str, Any] = {"embed_batch_size": args.batch, "workers": args.workers, "embed_dim": 384,
                                  "per_tenant_per_min": 10**9, "per_query_max_embeds": 50, "embedder": "hash"}
        if args.provider_ms:
            provider = stack.enter_context(SlowProvider(384, args.provider_ms / 1000))
            common.update(embedder="openai", openai_base_url=provider.base_url, embed_model="bench-embed")
        profiles: list[tuple[str, dict[str, Any]]] = [("in_process", {"queue": "embedded"}),
                                                      ("celery", {"queue": "celery"})]
        if args.postgres:
            pg = stack.enter_context(postgres_server())
            profiles.append(("celery_postgres", {"queue": "celery", "store": "postgres",
                                                 "postgres_url": pg.create_database("bench")}))
        results: dict[str, Any] = {}
        for name, chosen in profiles:
            # A profile's reads leave messages nobody consumed; the next profile's worker must not
            # find them (its store holds the same document ids and would embed them early).
            Redis.from_url(redis.url).flushall()
            s = Settings(redis_url=redis.url, data_dir=tmp / name, **common, **chosen)
            results[name] = run_profile(s, args.docs, args.reads, args.workers, tmp)
    report = {
        "bench": "celery_throughput", "when": time.strftime("%Y-%m-%dT%H:%M:%S"),
        "machine": {"cpus": os.cpu_count(), "python": platform.python_version()},
        "args": vars(args), "results": results,
        "ratios": {
            "celery_vs_in_process_throughput": round(results["celery"]["throughput"]["docs_per_s"]
                                                     / results["in_process"]["throughput"]["docs_per_s"], 3),
            "read_p50_added_ms": round(results["celery"]["read_json_touch50"]["p50_ms"]
                                       - results["in_process"]["read_json_touch50"]["p50_ms"], 3),
            "enqueue50_p50_added_ms": round(results["celery"]["enqueue50"]["p50_ms"]
                                            - results["in_process"]["enqueue50"]["p50_ms"], 3),
            **_postgres_ratios(results),
        },
    }
    out = Path(__file__).parent / "results" / f"celery-throughput-{time.strftime('%Y%m%d-%H%M%S')}.json"
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(report, indent=2))
    print(json.dumps(report, indent=2))
    print(f"wrote {out}")


if __name__ == "__main__":
    main()
