"""Reliability at full size (Load and Crashes).

    .venv/bin/python -m bench.reliability --profile embedded --duration 60
    .venv/bin/python -m bench.reliability --profile distributed --duration 60
    .venv/bin/python -m bench.reliability --crashes      # tests/reliability/test_crashes.py, outcomes recorded

Load: the mixed workload of harness/workload.py (JSON reads of every strategy, hybrid SSE
reads, single PUTs, bulk writes, deletes, GETs, admin GETs) from --threads client threads, two
tenants, an eager and a lazy collection, for --duration seconds, against
  - embedded: one `vibe-semantic serve` (SQLite, tantivy, qdrant-edge, in-process workers);
  - distributed: the API + 2 Celery worker processes + beat on a private Redis and a private
    PostgreSQL (API and workers share only those two).
Both embed through the local OpenAI-protocol provider (hash vectors), so each document text
sent to it is counted. The request rate limit is off (a 429 would count as an error) and so is
the embedding budget (eager documents must reach `ready`). Afterwards: every acknowledged
write read back (GET) with its last acknowledged content, every acknowledged delete gone, a
keyword read of each live document's version token, a semantic read of a sample of `ready`
ones, /semantic/mismatch. Writes bench/results/reliability-<profile>-<timestamp>.{json,md}.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import re
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from harness.postgres_server import postgres_server
from harness.redis_server import RedisServer
from harness.server import REPO, Served
from harness.stack import LOAD_KEYS, base_env, distributed
from harness.workload import (
    Ledger,
    RecordingProvider,
    WorkloadConfig,
    mismatch,
    run_workload,
    verify,
    wait_settled,
)

RESULTS = Path(__file__).resolve().parent / "results"
EAGER, LAZY = "eager", "lazy"


def promote(base: str) -> None:
    import httpx
    for key in LOAD_KEYS:
        r = httpx.post(f"{base}/semantic/promote", json={"collection": EAGER},
                       headers={"Authorization": f"Bearer {key}"})
        r.raise_for_status()


@contextmanager
def profile(name: str, root: Path, provider: RecordingProvider) -> Iterator[str]:
    if name == "embedded":
        app = Served(root / "data", env=base_env(provider, root / "data"))
        try:
            yield app.base
        finally:
            app.stop()
        return
    redis = RedisServer(root / "redis").start()
    try:
        with postgres_server() as pg, distributed(root, provider, redis, pg.create_database("bench"), workers=2) as s:
            yield s.api.base
    finally:
        redis.stop()


def stuck_after_edit(ledger: Ledger, not_ready: list[str]) -> list[str]:
    return [x for x in not_ready if x.endswith(": queued") and len(ledger.entries[x.split()[0]].texts) > 1]


def run_load(args: argparse.Namespace) -> dict[str, Any]:
    with tempfile.TemporaryDirectory(prefix="vibe-rel-") as tmp, RecordingProvider(dim=64) as provider, \
            profile(args.profile, Path(tmp), provider) as base:
        promote(base)
        cfg = WorkloadConfig(keys=LOAD_KEYS, collections=[EAGER, LAZY], threads=args.threads, duration=args.duration,
                             bulk_size=args.bulk_size, run=args.profile[0], seed=args.seed)
        t0 = time.monotonic()
        ledger, rec, _ = run_workload(base, cfg)
        elapsed = time.monotonic() - t0
        print(rec.table(), flush=True)
        t1 = time.monotonic()
        wait_settled(base, ledger, {EAGER}, timeout=args.settle)
        settle = time.monotonic() - t1
        dups = provider.duplicates()  # before verify: its semantic reads send document texts as queries
        embedded = provider.doc_embeddings()
        doc_texts, distinct = sum(embedded.values()), len(embedded)
        verdict = verify(base, ledger, {EAGER}, semantic_sample=200, keyword_limit=args.keyword_limit)
        mm = mismatch(base, LOAD_KEYS)
    summary = verdict.summary()
    stuck = stuck_after_edit(ledger, verdict.not_ready)
    ops = sum(len(v) for v in rec.latency.values())
    return {
        "profile": args.profile, "duration_s": round(elapsed, 1), "threads": args.threads, "bulk_size": args.bulk_size,
        "seed": args.seed, "ops": ops, "ops_per_s": round(ops / elapsed, 1), "errors": rec.error_count(),
        "error_examples": rec.errors[:20], "routes": rec.summary(), "settle_s": round(settle, 1),
        "verdict": summary, "lost_writes": summary["lost"] + summary["resurrected"],
        "eager_stuck_queued_after_edit": len(stuck),
        "provider": {"document_texts": doc_texts, "distinct": distinct,
                     "embedded_more_than_once": len(dups), "calls": provider.calls},
        "mismatch": {k: {x: m.get(x) for x in ("ready", "missingVectors", "queuedWithoutJob")} for k, m in mm.items()},
        "machine": {"cpus": os.cpu_count(), "python": platform.python_version(), "platform": platform.platform()},
    }


def markdown_load(r: dict[str, Any]) -> str:
    v = r["verdict"]
    lines = [f"# Reliability: mixed load, {r['profile']} profile", "",
             f"{r['threads']} client threads (two tenants), {r['duration_s']} s, {r['ops']} requests "
             f"({r['ops_per_s']}/s), bulk {r['bulk_size']} docs, seed {r['seed']}; {r['machine']['cpus']} CPUs.", "",
             f"**Errors: {r['errors']}** (5xx, transport, 429 or wrong answer). **Lost writes: {r['lost_writes']}** "
             f"(of {v['checked']} documents checked; resurrected deletes {v['resurrected']}). "
             f"Keyword misses {v['keyword_missing']}, deleted still found {v['keyword_deleted']}, "
             f"semantic misses {v['semantic_missing']} (sample of ready). Eager not ready after "
             f"{r['settle_s']} s: {v['not_ready']} (of which edited while queued, the known bug: "
             f"{r['eager_stuck_queued_after_edit']}).", "",
             f"States: {json.dumps(v['states'])}. Provider: {r['provider']['document_texts']} document texts, "
             f"{r['provider']['distinct']} distinct, "
             f"{r['provider']['embedded_more_than_once']} embedded more than once. "
             f"Mismatch: {json.dumps(r['mismatch'])}.", "",
             "| route | n | errors | p50 ms | p99 ms | max ms |", "|---|---:|---:|---:|---:|---:|"]
    for route, s in r["routes"].items():
        lines.append(f"| {route} | {s['n']} | {s['errors']} | {s['p50_ms']} | {s['p99_ms']} | {s['max_ms']} |")
    if r["error_examples"]:
        lines += ["", "Errors:", *[f"- `{e}`" for e in r["error_examples"]]]
    return "\n".join(lines) + "\n"


def run_crashes() -> dict[str, Any]:
    """The crash scenarios of tests/reliability/ (kill -9 API during bulk and follower batches,
    worker kill -9 on PostgreSQL under load, Redis + PostgreSQL down 10 s), their outcome lines."""
    cmd = [sys.executable, "-m", "pytest", "-q", "-s", "-p", "no:cacheprovider", "tests/reliability/test_crashes.py",
           "tests/reliability/test_eager_edit.py", "-rA", "--durations=0"]
    t0 = time.monotonic()
    p = subprocess.run(cmd, cwd=REPO, capture_output=True, text=True, env={**os.environ, "HF_HUB_OFFLINE": "1"})
    out = p.stdout + p.stderr
    lines = [ln for ln in out.splitlines() if ln.startswith("[") or re.match(r"^(PASSED|FAILED|XFAIL|XPASS|ERROR) ", ln)
             or re.search(r"\d+\.\d+s (call|setup)", ln) or " passed" in ln or " failed" in ln]
    return {"command": " ".join(cmd[2:]), "returncode": p.returncode, "elapsed_s": round(time.monotonic() - t0, 1),
            "outcome_lines": lines}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--profile", choices=["embedded", "distributed"], default="embedded")
    ap.add_argument("--duration", type=float, default=60.0)
    ap.add_argument("--threads", type=int, default=6)
    ap.add_argument("--bulk-size", type=int, default=50)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--settle", type=float, default=180.0, help="seconds to wait for eager documents to be ready")
    ap.add_argument("--keyword-limit", type=int, default=None, help="keyword-check at most this many (all by default)")
    ap.add_argument("--crashes", action="store_true", help="run the crash scenarios instead of the load")
    args = ap.parse_args()
    RESULTS.mkdir(parents=True, exist_ok=True)
    stamp = time.strftime("%Y%m%d-%H%M%S")
    if args.crashes:
        r = run_crashes()
        name = f"reliability-crashes-{stamp}"
        md = (f"# Reliability: crash scenarios\n\n`{r['command']}` "
              f"(exit {r['returncode']}, {r['elapsed_s']} s)\n\n")
        md += "```\n" + "\n".join(r["outcome_lines"]) + "\n```\n"
    else:
        r = run_load(args)
        name = f"reliability-{args.profile}-{stamp}"
        md = markdown_load(r)
    (RESULTS / f"{name}.json").write_text(json.dumps(r, indent=2))
    (RESULTS / f"{name}.md").write_text(md)
    print(md)
    print(f"wrote {RESULTS / name}.json and .md")


if __name__ == "__main__":
    main()
