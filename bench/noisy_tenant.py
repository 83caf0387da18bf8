"""Tenant B's read and write latency with tenant A idle, then with A noisy (every admin action
at its limits: harness/noisy_tenant.py), on one served instance in the same run; reports
p50/p95 of both phases and the noisy/idle ratio. Short by design (well under 2 minutes at the
defaults). Writes bench/results/noisy-tenant-<stamp>.json + .md (not committed).

    python -m bench.noisy_tenant [--rounds 40] [--noise-threads 1] [--cost weighted|flat]

`--cost flat` charges every request one token (the old flat rate limit), so tenant A
runs as loud as its size bounds allow; `weighted` (the default, the server's) charges what a
request asks for, so A's bulks, large reads and backfills are refused past its rate.
"""

from __future__ import annotations

import argparse
import os
import shutil
import tempfile
import time
from pathlib import Path
from typing import Any

from bench import report
from harness.noisy_tenant import ENV, FLAT_COST, KEYS, Noise, Probe, quiet_client
from harness.server import served


def _figures(ms: list[float]) -> dict[str, float]:
    return {"p50_ms": report.percentile(ms, 0.5), "p95_ms": report.percentile(ms, 0.95)}


def _ratio(noisy: float, idle: float) -> float:
    return round(noisy / idle, 2) if idle else float("nan")


def main(rounds: int, noise_threads: int, warmup_seconds: float = 3.0, cost: str = "weighted") -> Path:
    root = Path(tempfile.mkdtemp(prefix="vibe-noisy-"))
    env = {**ENV, **(FLAT_COST if cost == "flat" else {})}
    phases: dict[str, dict[str, Any]] = {}
    started = time.monotonic()
    try:
        with served(root / "data", env=env, keys=KEYS) as s, quiet_client(s.base) as http:
            warm = Probe(http)
            for i in range(10):
                warm.round(i, "w")  # B's collection exists and its first reads are behind it
            idle = Probe(http)
            for i in range(rounds):
                idle.round(i, "i")
            noise = Noise(s.base, threads=noise_threads)
            noise.start()
            try:
                time.sleep(warmup_seconds)  # A's load under way before B is measured
                loud = Probe(http)
                for i in range(rounds):
                    loud.round(i, "l")
            finally:
                noise.stop()
            for name, p in (("idle", idle), ("noisy", loud)):
                phases[name] = {"read": _figures(p.read_ms), "write": _figures(p.write_ms),
                                "samples": {"read_ms": [round(x, 3) for x in p.read_ms],
                                            "write_ms": [round(x, 3) for x in p.write_ms]}}
            answers = dict(noise.answers)
    finally:
        shutil.rmtree(root, ignore_errors=True)
    ratios = {op: {q: _ratio(phases["noisy"][op][q], phases["idle"][op][q]) for q in ("p50_ms", "p95_ms")}
              for op in ("read", "write")}
    doc = {"name": "noisy-tenant", "rounds": rounds, "noise_threads": noise_threads, "cost": cost, "bounds": env,
           "phases": phases, "noisy_over_idle": ratios, "tenant_a_answers": answers,
           "seconds": round(time.monotonic() - started, 1), "load_average": os.getloadavg()}
    rows = [[op, phases["idle"][op]["p50_ms"], phases["noisy"][op]["p50_ms"], ratios[op]["p50_ms"],
             phases["idle"][op]["p95_ms"], phases["noisy"][op]["p95_ms"], ratios[op]["p95_ms"]]
            for op in ("read", "write")]
    md = (f"# Tenant B's latency with tenant A idle vs noisy ({rounds} rounds each, one run, {cost} cost)\n\n"
          f"Tenant A: bulks of {ENV['VIBE_MAX_BULK_DOCS']} documents just under {ENV['VIBE_MAX_DOC_BYTES']} bytes "
          f"into a collection it keeps promoting, reindexing, evicting and demoting, space migrations, reads with "
          f"limit {ENV['VIBE_MAX_LIMIT']} and k {ENV['VIBE_MAX_K']} ({noise_threads} thread(s) of each). "
          f"B: a PUT, then a keyword read that must find exactly it. Times in ms; load average "
          f"{doc['load_average']}.\n\n"
          + report.table(["B's", "idle p50", "noisy p50", "ratio p50", "idle p95", "noisy p95", "ratio p95"], rows)
          + f"\nTenant A's answers: {answers}\n")
    return report.write(doc, md)


if __name__ == "__main__":
    ap = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    ap.add_argument("--rounds", type=int, default=40)
    ap.add_argument("--noise-threads", type=int, default=1)
    ap.add_argument("--cost", choices=["weighted", "flat"], default="weighted")
    a = ap.parse_args()
    print(main(a.rounds, a.noise_threads, cost=a.cost))
