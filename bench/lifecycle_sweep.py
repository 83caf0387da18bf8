"""Sweep of the lifecycle knobs that decide what stays embedded: pin TTL, usage
half-life and eviction idle time, over the same 30-day stream as `bench lifecycle`.

    python -m bench.lifecycle_sweep --data ../shared/data/cranfield \
        --configs 7:7:7,3:3:3,3:0:7,1:0:1,30:30:7          # evict-idle:pin-ttl:half-life, in days

Eager and lazy-without-eviction run once; then the lifecycle arm once per setting, on the
same stream and cached vectors. Choose on one dev set and check on the other: the rule
(`choose`) is fixed in code so a held-out run cannot move it.

Rule: among settings whose mean daily quality (done) is within `TOLERANCE` of lazy's, the
one with the fewest embedded + cold bytes at the end of the run; ties by documents sent to
the provider. A setting that sends more documents to the provider than lazy does not qualify.

Results: bench/results/lifecycle-sweep-<set>-<timestamp>.{json,md}.
"""

from __future__ import annotations

import argparse
import json
import statistics
import time
from dataclasses import asdict
from pathlib import Path
from typing import Any

from bench.datasets import load
from bench.lazy import query_population
from bench.lifecycle import RESULTS, Policy, Workload, make_embedder, query_stream, run_eager, run_stream, subset

TOLERANCE = 0.005


def parse_configs(text: str) -> list[Policy]:
    out = []
    for part in text.split(","):
        evict, pin, half = (float(x) for x in part.split(":"))
        out.append(Policy(evict_idle_days=evict, pin_ttl_days=pin, half_life_days=half))
    return out


def summary(arm: dict[str, Any]) -> dict[str, Any]:
    pts = arm["points"]
    last = pts[-1]
    served = [pt for pt in pts if pt["queries"]]
    return {
        "embedded_bytes": last["embedded_bytes"], "cold_bytes": last["cold_bytes"],
        "stored_bytes": last["stored_bytes"],
        "mean_embedded_bytes": round(statistics.fmean(pt["embedded_bytes"] for pt in pts)),
        "mean_stored_bytes": round(statistics.fmean(pt["stored_bytes"] for pt in pts)),
        "provider_docs": last["provider_docs_total"], "provider_calls": last["provider_calls_total"],
        "rehydrated": last["rehydrated_total"], "re_embedded": last["re_embedded_total"],
        "quality_done": round(statistics.fmean(pt["ratio_done"] for pt in served), 4),
        "quality_first": round(statistics.fmean(pt["ratio_first"] for pt in served), 4),
        "evicted": arm["ticks"]["evicted"], "pinned": arm["ticks"]["pinned"],
        "seconds": arm["seconds"],
    }


def choose(lazy: dict[str, Any], rows: list[dict[str, Any]]) -> dict[str, Any] | None:
    ok = [r for r in rows if r["quality_done"] >= lazy["quality_done"] - TOLERANCE
          and r["provider_docs"] <= lazy["provider_docs"]]
    return min(ok, key=lambda r: (r["stored_bytes"], r["provider_docs"])) if ok else None


def main(data: Path, configs: list[Policy], days: int = 30, per_day: int = 100, hot: int = 20, tail: float = 0.1,
         seed: int = 1, embedder: str = "local", out_dir: Path | None = None, held_out: bool = False) -> Path:
    started = time.perf_counter()
    ds = subset(load(data), None)
    qids = query_population(ds, None)
    w = Workload(days, per_day, hot, tail, 1.0, seed)
    stream, _ = query_stream(qids, w)
    base = Policy()
    eager = run_eager(ds, qids, make_embedder(embedder), embedder, base)
    lazy = summary(run_stream("lazy", ds, stream, days, make_embedder(embedder), embedder, base, eager.ndcg,
                              scheduler=False))
    rows = []
    for p in configs:
        arm = run_stream(f"e{p.evict_idle_days:g}p{p.pin_ttl_days:g}h{p.half_life_days:g}", ds, stream, days,
                         make_embedder(embedder), embedder, p, eager.ndcg, scheduler=True)
        rows.append({"evict_idle_days": p.evict_idle_days, "pin_ttl_days": p.pin_ttl_days,
                     "half_life_days": p.half_life_days, **summary(arm)})
        print(rows[-1], flush=True)
    best = choose(lazy, rows)
    doc = {"name": f"lifecycle-sweep-{ds.name}", "dataset": ds.name, "docs": len(ds.corpus),
           "workload": asdict(w), "tolerance": TOLERANCE,
           "eager": {"embedded_bytes": eager.storage["embedded_bytes"], "provider_docs": eager.provider["docs"],
                     "provider_calls": eager.provider["calls"]},
           "lazy": lazy, "rows": rows, "chosen": best, "held_out": held_out,
           "seconds": round(time.perf_counter() - started, 1)}
    out_dir = out_dir or RESULTS
    out_dir.mkdir(parents=True, exist_ok=True)
    stem = out_dir / f"{doc['name']}-{time.strftime('%Y%m%d-%H%M%S')}"
    stem.with_suffix(".json").write_text(json.dumps(doc, indent=1, sort_keys=True))
    md = markdown(doc)
    stem.with_suffix(".md").write_text(md)
    print(md)
    return stem.with_suffix(".json")


def markdown(doc: dict[str, Any]) -> str:
    head = ["arm", "evict idle d", "pin TTL d", "half-life d", "embedded bytes", "cold bytes", "embedded+cold",
            "mean embedded+cold over days", "docs to provider", "provider calls", "rehydrated", "evicted",
            "quality (done)", "quality (first)"]
    e, la = doc["eager"], doc["lazy"]
    rows = [["eager", "", "", "", e["embedded_bytes"], 0, e["embedded_bytes"], e["embedded_bytes"],
             e["provider_docs"], e["provider_calls"], 0, 0, 1.0, 1.0],
            ["lazy, no eviction", "", "", "", la["embedded_bytes"], 0, la["stored_bytes"], la["mean_stored_bytes"],
             la["provider_docs"], la["provider_calls"], 0, 0, la["quality_done"], la["quality_first"]]]
    for r in doc["rows"]:
        pick = " (held out: the rule's pick here, not used)" if doc.get("held_out") else " (chosen)"
        rows.append(["lifecycle" + (pick if r == doc["chosen"] else ""), f"{r['evict_idle_days']:g}",
                     f"{r['pin_ttl_days']:g}", f"{r['half_life_days']:g}", r["embedded_bytes"], r["cold_bytes"],
                     r["stored_bytes"], r["mean_stored_bytes"], r["provider_docs"], r["provider_calls"],
                     r["rehydrated"], r["evicted"], r["quality_done"], r["quality_first"]])
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    lines += ["| " + " | ".join(str(c) for c in r) + " |" for r in rows]
    w = doc["workload"]
    return (f"# Lifecycle knob sweep: {doc['dataset']} ({doc['docs']} docs), {w['days']} days, {w['per_day']} "
            f"reads a day, {w['hot']} hot queries drifting weekly, tail {w['tail']}\n\n"
            "Quality = mean over days of nDCG@10 (final answer, `first` = before the query's own touch) over the "
            "day's distinct queries / eager hybrid. Bytes at the end of the run. Rule: quality (done) within "
            f"{doc['tolerance']} of lazy and no more documents to the provider than lazy; then fewest "
            "embedded+cold bytes."
            + (" This set is held out: its rows check the setting chosen on the other set.\n\n"
               if doc.get("held_out") else "\n\n") + "\n".join(lines) + f"\n\nRun time {doc['seconds']} s.\n")


def cli() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--data", type=Path)
    ap.add_argument("--configs", default="7:7:7", help="evict-idle:pin-ttl:half-life days, comma-separated")
    ap.add_argument("--days", type=int, default=30)
    ap.add_argument("--per-day", type=int, default=100)
    ap.add_argument("--embedder", default="local")
    ap.add_argument("--out-dir", type=Path, default=None)
    ap.add_argument("--held-out", action="store_true", help="a check of a setting chosen on another set")
    ap.add_argument("--render", type=Path, default=None, help="rewrite the .md of this result .json and exit")
    a = ap.parse_args()
    if a.render is not None:
        doc = json.loads(a.render.read_text())
        doc["held_out"] = doc.get("held_out") or a.held_out
        a.render.write_text(json.dumps(doc, indent=1, sort_keys=True))
        a.render.with_suffix(".md").write_text(markdown(doc))
        return
    main(a.data, parse_configs(a.configs), a.days, a.per_day, embedder=a.embedder, out_dir=a.out_dir,
         held_out=a.held_out)


if __name__ == "__main__":
    cli()
