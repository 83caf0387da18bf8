"""Global reads (collection `any`): latency against a single-collection read, and quality of the
dev collections mixed in one tenant against each collection alone.

    python -m bench global-read --data ../shared/data/cranfield --data ../shared/data/cisi

Each dataset goes into its own collection of one tenant (ids stay per collection: both sets
number their documents from 1). Everything is embedded first (`POST /semantic/reindex`), so a
hybrid read is complete. Then, per strategy, every judged query of every dataset is asked twice,
interleaved: of its own collection, and of `any` (every collection: a leg each, merged). Quality
scores each ranking against its dataset's judgments (a document of another collection is never
relevant), so the global figure says what the other collections' documents cost a query;
latency is the complete JSON answer as the client sees it, p50/p95 and the ratio of medians.
Writes bench/results/global-read.json.
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

from bench import harness, ir, report
from bench.datasets import Dataset, load

LIMIT = 100  # recall@100 reads a hundred results


def _ingest(s: Any, datasets: list[Dataset]) -> dict[str, float]:
    took: dict[str, float] = {}
    for ds in datasets:
        docs = [{"_id": did, "title": d["title"], "text": d["text"]} for did, d in ds.corpus.items()]
        took[ds.name] = round(harness.ingest(s, ds.name, docs), 2)
        took[f"{ds.name}_embed"] = round(harness.embed_all(s, ds.name), 2)
    return took


def _read(s: Any, collection: str, q: str, strategy: str) -> tuple[list[str], float, dict[str, Any]]:
    """The ranking as `collection/id`, the client's milliseconds, and the diagnostics."""
    t0 = time.perf_counter()
    r = s.read(harness.KEY, collection=collection, q=q, limit=LIMIT, semantic={"strategy": strategy})
    ms = (time.perf_counter() - t0) * 1000
    r.raise_for_status()
    body = r.json()
    return [f"{x['collection']}/{x['id']}" for x in body["results"]], ms, body["diagnostics"]


def _qualified(ds: Dataset) -> dict[str, dict[str, int]]:
    return {q: {f"{ds.name}/{d}": v for d, v in rel.items()} for q, rel in ds.qrels.items()}


def _strategy(s: Any, datasets: list[Dataset], strategy: str) -> dict[str, Any]:
    out: dict[str, Any] = {"datasets": {}}
    single_ms: list[float] = []
    global_ms: list[float] = []
    foreign_top10 = 0
    asked = 0
    for ds in datasets:
        alone: dict[str, list[str]] = {}
        mixed: dict[str, list[str]] = {}
        for i, (qid, text) in enumerate(ds.judged_queries().items()):
            if i % 2:  # every other query asks `any` first: neither read always follows the other
                mixed[qid], ms2, diag = _read(s, "any", text, strategy)
                alone[qid], ms1, _ = _read(s, ds.name, text, strategy)
            else:
                alone[qid], ms1, _ = _read(s, ds.name, text, strategy)
                mixed[qid], ms2, diag = _read(s, "any", text, strategy)
            single_ms.append(ms1)
            global_ms.append(ms2)
            foreign_top10 += sum(1 for x in mixed[qid][:10] if not x.startswith(f"{ds.name}/"))
            asked += 1
            legs = diag.get("collections", [])
        qrels = _qualified(ds)
        out["datasets"][ds.name] = {"alone": ir.aggregate(alone, qrels), "global": ir.aggregate(mixed, qrels),
                                    "queries": len(alone)}
        print(f"{strategy:8} {ds.name:10} alone {out['datasets'][ds.name]['alone']} "
              f"global {out['datasets'][ds.name]['global']}")
    out["latency_ms"] = {
        "single_p50": report.percentile(single_ms, 0.5), "single_p95": report.percentile(single_ms, 0.95),
        "global_p50": report.percentile(global_ms, 0.5), "global_p95": report.percentile(global_ms, 0.95)}
    lat = out["latency_ms"]
    out["latency_ms"]["ratio_p50"] = round(lat["global_p50"] / lat["single_p50"], 2) if lat["single_p50"] else None
    out["foreign_in_top10_per_query"] = round(foreign_top10 / max(1, asked), 2)
    out["legs_reported"] = [leg["collection"] for leg in legs]
    print(f"{strategy:8} latency {out['latency_ms']}")
    return out


def _split(s: Any, datasets: list[Dataset], n: int) -> int:
    """Each dataset again, as `n` collections of its own (the same texts: their vectors come from
    the store by content hash, nothing is embedded twice); returns the tenant's collections."""
    for ds in datasets:
        items = list(ds.corpus.items())
        for i in range(n):
            part = [{"_id": did, "title": d["title"], "text": d["text"]} for did, d in items[i::n]]
            harness.ingest(s, f"{ds.name}-s{i:02}", part)
            harness.embed_all(s, f"{ds.name}-s{i:02}")
    return len(datasets) * (n + 1)


def _many(s: Any, datasets: list[Dataset], strategy: str) -> dict[str, Any]:
    """Latency only (the split copies make every relevant document appear twice): each query of
    its own collection and of `any`, now over every collection, interleaved."""
    single: list[float] = []
    wide: list[float] = []
    legs = 0
    for ds in datasets:
        for i, text in enumerate(ds.judged_queries().values()):
            order = [(ds.name, single), ("any", wide)]
            for collection, into in (order[::-1] if i % 2 else order):
                _, ms, diag = _read(s, collection, text, strategy)
                into.append(ms)
                if collection == "any":
                    legs = int(diag["global"]["legs"])
    out: dict[str, Any] = {"single_p50": report.percentile(single, 0.5), "single_p95": report.percentile(single, 0.95),
           "global_p50": report.percentile(wide, 0.5), "global_p95": report.percentile(wide, 0.95), "legs": legs}
    out["ratio_p50"] = round(out["global_p50"] / out["single_p50"], 2) if out["single_p50"] else None
    print(f"{strategy:8} many collections {out}")
    return out


def main(folders: list[Path], data_dir: Path, embedder: str, strategies: list[str], split: int = 16) -> Path:
    import os

    datasets = [load(f) for f in folders]
    load_before = [round(x, 1) for x in os.getloadavg()]
    with harness.instance(data_dir, embedder) as s:
        took = _ingest(s, datasets)
        # a warm-up pass, not reported: with the last strategy (hybrid) it leaves every query's vector in
        # the query cache, so neither read of a pair pays the query embedding the other one saved
        _strategy(s, datasets, strategies[-1])
        results = {st: _strategy(s, datasets, st) for st in strategies}
        many: dict[str, Any] = {}
        if split:
            many["collections"] = _split(s, datasets, split)
            many.update({st: _many(s, datasets, st) for st in strategies})
    doc = {"name": "global-read", "machine": harness.machine(), "embedder": embedder,
           "datasets": {ds.name: {"docs": len(ds.corpus), "queries": len(ds.judged_queries())} for ds in datasets},
           "seconds": took, "limit": LIMIT, "strategies": results, "many_collections": many,
           "load_average": {"before": load_before, "after": [round(x, 1) for x in os.getloadavg()]}}
    return report.write(doc, markdown(doc))


def markdown(doc: dict[str, Any]) -> str:
    rows = []
    for st, r in doc["strategies"].items():
        for name, d in r["datasets"].items():
            rows.append([st, name, d["alone"]["nDCG@10"], d["global"]["nDCG@10"], d["alone"]["recall@100"],
                         d["global"]["recall@100"]])
    lat = [[st, r["latency_ms"]["single_p50"], r["latency_ms"]["global_p50"], r["latency_ms"]["ratio_p50"],
            r["latency_ms"]["single_p95"], r["latency_ms"]["global_p95"], r["foreign_in_top10_per_query"]]
           for st, r in doc["strategies"].items()]
    names = ", ".join(f"{n} ({d['docs']} docs, {d['queries']} queries)" for n, d in doc["datasets"].items())
    many = doc.get("many_collections") or {}
    wide = [[st, m["legs"], m["single_p50"], m["global_p50"], m["ratio_p50"], m["single_p95"], m["global_p95"]]
            for st, m in many.items() if isinstance(m, dict)]
    load = doc.get("load_average", {})
    return (f"# Global reads: {names}, embedder {doc['embedder']}\n\n"
            + report.table(["strategy", "dataset", "nDCG@10 alone", "nDCG@10 global", "recall@100 alone",
                            "recall@100 global"], rows) + "\n"
            + report.table(["strategy", "single p50 ms", "global p50 ms", "ratio p50", "single p95 ms",
                            "global p95 ms", "other collection's docs in top 10"], lat)
            + (f"\nThe same tenant with each dataset also split into {many['collections']} collections in all "
               "(a global read's legs below; past VIBE_GLOBAL_MAX_COLLECTIONS, 32, the rest share one leg):\n\n"
               + report.table(["strategy", "legs", "single p50 ms", "global p50 ms", "ratio p50", "single p95 ms",
                               "global p95 ms"], wide) if wide else "")
            + (f"\nLoad average {load.get('before')} → {load.get('after')} (2 cores shared with other work: read the "
               "ratios).\n" if load else ""))


MARKS = ("<!-- global-read -->", "<!-- /global-read -->")


def section(found: tuple[Path, dict[str, Any]] | None) -> str | None:
    """bench/results/performance.md's section (bench/perf_report.py); None without a result."""
    if found is None:
        return None
    path, doc = found
    start, end = MARKS
    names = " and ".join(doc["datasets"])
    return (f"{start}\n## Global reads: every collection against one (`{path.name}`)\n\n"
            f"`python -m bench global-read --data ../shared/data/cranfield --data ../shared/data/cisi` (embedder "
            f"{doc['embedder']}, everything embedded first): {names} each in its own collection of one tenant; every "
            "judged query asked of its own collection and of `any` (a leg per collection, merged), interleaved, "
            f"JSON answers of {doc['limit']} results. Quality is scored against the query's own dataset, so the global "
            "figure is what the other collection's documents cost; latency is the client's, with the ratio of "
            "medians in the same run.\n\n" + markdown(doc).split("\n", 2)[2] + end + "\n")
