"""Bulk ingest of two commits in one run (the 1M-document ingest rate).

    python -m bench.ingest_ab --docs 1000000 --baseline <git ref> [--current HEAD]

The `bench scale` setting (embedded profile, hash embedder, 2000-document bulks over HTTP,
bodies encoded before the clock starts, answers checked against /openapi.json as there), but
two servers side by side, each from a detached `git worktree` of its commit (committed code
only), same venv, each with its own data dir. Every chunk goes to both, in alternating order,
so the load of the machine (2 shared cores here) falls on both alike. Per checkpoint and
server: docs/s to acknowledged (request time only) and to searchable (plus the time the index
follower needed to catch up after the chunk), RSS, disk; the load average alongside.

The server started first is the slower one by about 2%, whatever its code: the same commit
against itself gave 0.980, 0.982 and 0.964 started current-first and 0.994 and 1.030 with
`--baseline-first` (100k documents, 2026-11-27). So compare with both orders and take the
geometric mean of the two ratios; a single ratio near 0.98 says nothing.
"""

from __future__ import annotations

import argparse
import os
import random
import tempfile
import time
from contextlib import ExitStack
from pathlib import Path
from typing import Any

from bench import report
from bench.first_event_ab import worktree
from bench.harness import machine
from bench.scale import CHECKPOINTS, ENV, _bodies, _caught_up, _disk_mb, _rss_mb
from bench.spine import zipf_vocabulary
from harness.server import KEYS, Served, served


def _send(s: Served, body: bytes) -> tuple[float, int]:
    t0 = time.perf_counter()
    r = s.call("POST", "/v1/collections/syn/docs:bulk", "k-admin-a", content=body,
               headers={"Content-Type": "application/json"})
    took = time.perf_counter() - t0
    if r.status_code != 200 or r.json()["rejected"]:
        raise RuntimeError(f"bulk failed: {r.status_code} {r.text[:300]}")
    return took, int(r.json()["accepted"])


def main(docs: int, baseline: str, current: str, chunk: int = 2000, baseline_first: bool = False) -> Path:
    rng = random.Random(13)
    vocab = zipf_vocabulary(20_000, rng)
    root = Path(tempfile.mkdtemp(prefix="vibe-ingest-ab-"))
    commits = {n: worktree(ref, root / f"code-{n}") for n, ref in (("current", current), ("baseline", baseline))}
    print("encoding request bodies (not timed)", flush=True)
    bodies = list(_bodies(docs, chunk, rng, vocab))
    marks = sorted({c for c in CHECKPOINTS if c < docs} | {docs})
    names = list(commits)[::-1] if baseline_first else list(commits)
    ack = dict.fromkeys(names, 0.0)
    settle = dict.fromkeys(names, 0.0)
    sent = dict.fromkeys(names, 0)
    points: list[dict[str, Any]] = []
    load0 = os.getloadavg()
    with ExitStack() as stack:
        servers = {n: stack.enter_context(served(root / n / "data", env=ENV, keys=KEYS, repo=root / f"code-{n}"))
                   for n in names}
        for i, body in enumerate(bodies):
            for n in names if i % 2 == 0 else names[::-1]:
                took, accepted = _send(servers[n], body)
                ack[n] += took
                sent[n] += accepted
                # what the follower still had to apply after the answer (0 when the write applied it)
                settle[n] += _caught_up(servers[n])
            if sent[names[0]] in marks:
                point: dict[str, Any] = {"docs": sent[names[0]], "load_average": os.getloadavg()}
                for n in names:
                    point[n] = {"ack_docs_per_s": round(sent[n] / ack[n], 1),
                                "searchable_docs_per_s": round(sent[n] / (ack[n] + settle[n]), 1),
                                **_rss_mb(servers[n].proc.pid), "disk_mb": _disk_mb(root / n / "data")}
                point["ratio_ack"] = round(point["current"]["ack_docs_per_s"] / point["baseline"]["ack_docs_per_s"], 3)
                points.append(point)
                print(point, flush=True)
    doc = {"name": "ingest-ab", "machine": machine(), "docs": docs, "chunk": chunk, "env": ENV, "commits": commits,
           "refs": {"current": current, "baseline": baseline}, "started_first": names[0], "points": points,
           "load_average_before": load0}
    return report.write(doc, _markdown(doc))


def _markdown(doc: dict[str, Any]) -> str:
    head = ["docs", "current ack docs/s", "current searchable docs/s", "baseline ack docs/s",
            "baseline searchable docs/s", "ratio (ack)", "current / baseline RSS MB", "current / baseline disk MB",
            "load average"]
    rows = [[p["docs"], p["current"]["ack_docs_per_s"], p["current"]["searchable_docs_per_s"],
             p["baseline"]["ack_docs_per_s"], p["baseline"]["searchable_docs_per_s"], p["ratio_ack"],
             f"{p['current']['rss_mb']} / {p['baseline']['rss_mb']}",
             f"{p['current']['disk_mb']['total']} / {p['baseline']['disk_mb']['total']}",
             " ".join(f"{x:.2f}" for x in p["load_average"])] for p in doc["points"]]
    c = doc["commits"]
    return (f"# Bulk ingest, two commits side by side, to {doc['docs']:,} documents\n\n"
            f"current `{c['current'][:10]}` ({doc['refs']['current']}), baseline `{c['baseline'][:10]}` "
            f"({doc['refs']['baseline']}). Embedded profile, hash embedder, bulks of {doc['chunk']} over HTTP, "
            "each chunk sent to both servers in alternating order (`python -m bench.ingest_ab`), "
            f"{doc.get('started_first', 'current')}'s server started first. Rates are cumulative "
            "from the first document.\n\n" + report.table(head, rows)
            + f"\nLoad average before {tuple(round(x, 2) for x in doc['load_average_before'])} (2 shared cores).\n")


if __name__ == "__main__":
    ap = argparse.ArgumentParser()
    ap.add_argument("--docs", type=int, default=1_000_000)
    ap.add_argument("--baseline", required=True)
    ap.add_argument("--current", default="HEAD")
    ap.add_argument("--chunk", type=int, default=2000)
    ap.add_argument("--baseline-first", action="store_true",
                    help="start the baseline's server first and send it the first chunk")
    a = ap.parse_args()
    main(a.docs, a.baseline, a.current, a.chunk, a.baseline_first)
