"""Two checks of ideas for the touch economics that did not pan out, kept runnable.

    python -m bench.touch_norm --data ../shared/data/cisi --seeds 1,2,3

1. **The semantic leg's standardisation.** Z-score fusion standardises the semantic leg over
   its top 200 hits (services/planner/fusion.py). Eager hybrid's top 200 come from the whole
   corpus, a lazy read's from what is embedded, so the two put the same cosine at different z.
   With exactly eager's first pages embedded (`bench.touch_sim --oracle-pages`), taking the
   whole corpus's top-200 mean and spread instead (`corpus`: known here because the benchmark
   has every vector; no product could) lifts CISI from 0.987 to 0.999 of eager. The question is
   whether that carries to the stream, where the touch policy decides what is embedded: the
   same substitution on `touch_sim`'s Zipfian streams (`stream_corpus` against `stream`).
   It does not (2026-11-27, seeds 1-3: CISI 0.981 against 0.996, Cranfield 0.988 against
   0.991): the stand-in line and the touch policy were chosen with the leg as it is, and the
   partly embedded leg's own wider spread keeps lexical matches the touch then embeds. So an
   estimator of the corpus's statistics (one was tried: strata of lexical rank, each embedded
   document standing for the cold ones of its stratum; CISI 0.977) cannot help either.
2. **A per-collection switch by dig yield.** Follow-up touch with dig step 8 meets both bars
   on Cranfield and overspends on CISI (README "Touch economics"), so a collection could turn
   it on where its digs are seen to pay. What a process can see is the share of what a
   repeat's last touch probed (dug) that is on the repeat's page (`PageMemory.settled`); the
   offline log that found 1 in 4-5 (Cranfield) against 1 in 9 (CISI) measured eager's page,
   which no process sees. `yield` reports the visible share: 0.275 on Cranfield, 0.263 on CISI
   (seeds 1-3): it does not tell the two apart, so no switch was built on it.

The substitution is a monkeypatch of the planner's fusion for this process only (a diagnostic,
not a product setting). Writes bench/results/touch-norm-<dataset>.json.
"""

from __future__ import annotations

import argparse
import json
import statistics
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import numpy as np

from bench.datasets import Dataset, load
from bench.embed_server import CachedModel
from bench.lazy import query_population, zipf_stream
from bench.quality import corpus_docs
from bench.touch_sim import RESULTS, eager, oracle_pages, replay
from services.planner import fusion, touch
from services.planner import planner as planner_module
from shared.text.hashing import doc_text

DEPTH = 200  # fusion.zscore's standardisation depth


@contextmanager
def corpus_statistics(model: CachedModel, ds: Dataset) -> Iterator[None]:
    """While inside, every fused read standardises its semantic leg with the whole corpus's
    top-`DEPTH` mean and spread for its query vector (what eager hybrid's leg has)."""
    docs = corpus_docs(ds)
    vectors = np.asarray(model.embed([doc_text({"title": d["title"], "text": d["text"]}, None) for d in docs]),
                         dtype=np.float32)
    original_std, original_fuse = fusion._standardised, planner_module.ReadSession._fuse
    current: dict[str, tuple[float, float]] = {}

    def standardised(hits: Any, depth: int) -> tuple[float, float]:
        return current.get("stats") or original_std(hits, depth)

    def fuse(session: Any) -> Any:
        vec = session.semantic.vector
        if vec is not None:
            top = np.sort(vectors @ np.asarray(vec, dtype=np.float32))[::-1][:DEPTH]
            current["stats"] = fusion.mean_spread([float(x) for x in top])
        try:
            return original_fuse(session)
        finally:
            current.clear()

    fusion._standardised = standardised  # type: ignore[assignment]
    planner_module.ReadSession._fuse = fuse  # type: ignore[method-assign,assignment]
    try:
        yield
    finally:
        fusion._standardised = original_std  # type: ignore[assignment]
        planner_module.ReadSession._fuse = original_fuse  # type: ignore[method-assign]


@contextmanager
def probe_yield() -> Iterator[dict[str, int]]:
    """Counts, at every repeat that follows a probing touch, how many of the probed documents
    are on the repeat's page (what a process could see of its digs' yield)."""
    counts = {"probed": 0, "on_page": 0, "repeats": 0}
    original: Callable[..., bool | None] = touch.PageMemory.settled

    def settled(mem: touch.PageMemory, key: str, page: Any, rounds: int = 0) -> bool | None:
        with mem._lock:
            seen = mem._seen.get(key)
        if seen is not None and seen.probe:
            counts["probed"] += len(seen.probe)
            counts["on_page"] += len(seen.probe & frozenset(page))
            counts["repeats"] += 1
        return original(mem, key, page, rounds)

    touch.PageMemory.settled = settled  # type: ignore[method-assign,assignment]
    try:
        yield counts
    finally:
        touch.PageMemory.settled = original  # type: ignore[method-assign]


def _streams(model: CachedModel, ds: Dataset, base: Any, seeds: list[int], length: int) -> dict[str, Any]:
    qids = query_population(ds, None)
    runs = [replay(model, ds, {}, zipf_stream(qids, length, s), base, 0, 600.0) for s in seeds]
    ratio = [r["ratio_second_half"] for r in runs]
    x = [r["embedded_fraction"] / r["oracle_fraction"] for r in runs]
    return {"ratio_second_half": round(statistics.fmean(ratio), 4), "x_oracle": round(statistics.fmean(x), 4),
            "per_seed": [round(v, 4) for v in ratio]}


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--data", type=Path, required=True)
    ap.add_argument("--seeds", default="1,2,3")
    ap.add_argument("--length", type=int, default=400)
    a = ap.parse_args()
    ds = load(a.data)
    seeds = [int(s) for s in a.seeds.split(",")]
    model = CachedModel()
    base = eager(model, ds, {})  # every vector embedded: its own statistics are the corpus's
    out: dict[str, Any] = {"dataset": ds.name, "seeds": a.seeds, "length": a.length}
    out["oracle_pages"] = oracle_pages(model, ds, {}, base)
    with corpus_statistics(model, ds):
        out["oracle_pages_corpus"] = oracle_pages(model, ds, {}, base)
    with probe_yield() as counts:
        out["stream"] = _streams(model, ds, base, seeds, a.length)
    out["yield"] = {**counts, "share": round(counts["on_page"] / max(1, counts["probed"]), 4)}
    with corpus_statistics(model, ds):
        out["stream_corpus"] = _streams(model, ds, base, seeds, a.length)
    print(json.dumps(out, indent=1))
    path = RESULTS / f"touch-norm-{ds.name}.json"
    path.write_text(json.dumps(out, indent=1))
    print(path)


if __name__ == "__main__":
    main()
