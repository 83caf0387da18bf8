"""Lifecycle over simulated time: the scheduler against eager and plain lazy.

    python -m bench lifecycle --data ../shared/data/cranfield
    python -m bench lifecycle --data ../shared/data/cisi --days 7 --docs 300 --queries 30   # smaller

In one process (`services.wiring.build`, SQLite store, embedded indexes, the real planner and
embed handler, no HTTP) and on an injected clock (nothing sleeps), `--days` simulated days
of a query stream replay through three arms built from the same corpus and vectors:

- `eager`: every document embedded up front, no scheduler;
- `lazy`: on-touch embedding, the scheduler off (vectors only ever accumulate);
- `lifecycle`: on-touch embedding with the scheduler ticking every `--tick-minutes`
  (promotion/demotion, document pins, eviction of vectors idle
  `--evict-idle-days` to the cold store, pruning, backfills). Usage statistics are flushed
  after every read (serve flushes every 2 s), so the promotion window counts what it should.

Optionally (`--no-promotion-arm`) the same scheduler with collection promotion off, so a
busy workload shows what promotion buys over staying lazy, and `--schedule 2x1000,12x0,16x100`
(days x reads a day) for a burst that promotes the collection at the product defaults (20
queries and 50 hits in 2 h), a quiet spell that demotes it (7 days) and a trickle after; the
plot marks promotions and demotions and shades the eager period.

The stream: `--per-day` hybrid reads a day (or `--schedule`) at uniform random times; each simulated week a
new random subset of `--hot` queries is Zipf-hot (weight 1/rank) and a `--tail` share of the
reads is uniform over the whole query population, so the hot set drifts every week.

Reported per simulated day: embedded (float32 vector rows) and cold bytes, provider calls
and documents sent to the provider (a counting wrapper around the embedder), rehydrations
from the cold store, and quality: nDCG@10 of the final hybrid answer (after the query's own
touch, as the SSE route's `done`) and of the first answer, averaged over that day's distinct
queries (each at its latest answer) and divided by eager hybrid on the same queries.

It also measures the cold codecs on the model's vectors of the whole dev set (float16
cosine to the original; int8 recall@10 of the original top 10 over the judged queries) and
proves rehydration makes no provider call: every document sent to the provider is counted
by content, so a vector re-embedded after eviction shows as a repeat, and at the end every
document still cold is touched again with the provider counter watched.

Results: bench/results/lifecycle-<set>-<timestamp>.{json,md,png}.
"""

from __future__ import annotations

import hashlib
import os
import random
import statistics
import tempfile
import time
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path
from typing import Any

import numpy as np

from bench import ir
from bench.datasets import Dataset, load
from bench.lazy import query_population
from bench.quality import COLLECTION, corpus_docs
from services.core.handlers import BatchOutcome
from services.planner.planner import COLD, ReadRequest
from services.wiring import Container, build
from shared.adapters.cold_files import decode, encode
from shared.config import Settings
from shared.model import DocKey, EmbedJob, Principal, SemanticStatus, centroid

TENANT = "bench"
PRINCIPAL = Principal(TENANT, ("user:bench",), frozenset({"read", "write", "admin"}))
LIMIT = 10
DAY = 86400.0
SIM_EPOCH = 1_767_225_600.0  # 2026-01-01T00:00:00Z, the simulated day 0
RESULTS = Path(__file__).resolve().parent / "results"
NO_PROMOTION = "lifecycle, no promotion"


# -- simulated time -----------------------------------------------------------------------------


class SimClock:
    def __init__(self, t: float = SIM_EPOCH):
        self.t = t

    def __call__(self) -> float:
        return self.t


# -- counting parts -----------------------------------------------------------------------------


class CountingEmbedder:
    """The Embedder port around the model: every provider call and document is counted, and
    documents are remembered by content, so any text sent twice (a re-embed after an
    eviction, instead of a rehydration) shows as a repeat."""

    def __init__(self, embed: Callable[[list[str]], list[list[float]]], model_id: str, dim: int):
        self._embed = embed
        self._model_id = model_id
        self._dim = dim
        self.calls = 0
        self.docs = 0
        self.query_calls = 0
        self.repeats = 0
        self._seen: set[bytes] = set()

    @property
    def model_id(self) -> str:
        return self._model_id

    @property
    def dim(self) -> int:
        return self._dim

    def embed(self, texts: Sequence[str]) -> list[list[float]]:
        self.calls += 1
        self.docs += len(texts)
        for t in texts:
            h = hashlib.blake2b(t.encode(), digest_size=16).digest()
            self.repeats += h in self._seen
            self._seen.add(h)
        return self._embed(list(texts))

    def embed_query(self, text: str) -> list[float]:
        self.query_calls += 1
        return self._embed([text])[0]

    def snapshot(self) -> dict[str, int]:
        return {"calls": self.calls, "docs": self.docs, "query_calls": self.query_calls, "repeats": self.repeats}


class CountingCold:
    """The cold store as the handler sees it, counting the vectors it gave back."""

    def __init__(self, inner: Any):
        self.inner = inner
        self.hits = 0

    def get(self, tenant: str, space: str, content_hash: str) -> list[float] | None:
        vec = self.inner.get(tenant, space, content_hash)
        self.hits += vec is not None
        return vec

    def __getattr__(self, name: str) -> Any:
        return getattr(self.inner, name)


class SyncQueue:
    """The JobQueue port run inline: an enqueued job is handled before `enqueue` returns, so
    a read's touched documents are ready when it refreshes (no worker thread, no polling)."""

    def __init__(self, run_batch: Callable[[list[EmbedJob]], BatchOutcome], batch: int):
        self.run_batch = run_batch
        self.batch = batch
        self.retries = 0

    def enqueue(self, jobs: Sequence[EmbedJob]) -> int:
        jobs = list(jobs)
        for i in range(0, len(jobs), self.batch):
            self.retries += len(self.run_batch(jobs[i:i + self.batch]).retry)
        return len(jobs)

    def depth(self, tenant: str | None = None) -> dict[str, int]:
        return {}

    def on_done(self, callback: Callable[[list[DocKey]], None]) -> None:
        pass

    def start(self) -> None:
        pass

    def stop(self) -> None:
        pass


def make_embedder(kind: str) -> CountingEmbedder:
    if kind == "hash":
        from shared.adapters.embedders.hash_embedder import HashEmbedder

        h = HashEmbedder(384)
        return CountingEmbedder(h.embed, h.model_id, h.dim)
    global _MODEL
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    from bench.embed_server import CachedModel

    if _MODEL is None:
        _MODEL = CachedModel()  # the real all-MiniLM-L6-v2, vectors cached on disk by text
    return CountingEmbedder(_MODEL.embed, "all-MiniLM-L6-v2", 384)


_MODEL: Any = None


# -- the workload -------------------------------------------------------------------------------


@dataclass(frozen=True)
class Workload:
    days: int = 30
    per_day: int = 100
    hot: int = 20
    tail: float = 0.1
    zipf_s: float = 1.0
    seed: int = 1
    # (days, reads a day) spans in order, e.g. ((3, 1000), (17, 0), (10, 100)): a burst, quiet, a
    # trickle. Empty: `per_day` every day. Days past the last span read `per_day`.
    schedule: tuple[tuple[int, int], ...] = ()

    def reads_on(self, day: int) -> int:
        start = 0
        for n, reads in self.schedule:
            if day < start + n:
                return reads
            start += n
        return self.per_day


def parse_schedule(text: str) -> tuple[tuple[int, int], ...]:
    """'3x1000,17x0,10x100' -> ((3, 1000), (17, 0), (10, 100))."""
    out = []
    for part in text.split(","):
        n, reads = part.strip().split("x")
        out.append((int(n), int(reads)))
    return tuple(out)


def query_stream(qids: list[str], w: Workload) -> tuple[list[tuple[float, str]], dict[int, list[str]]]:
    """(simulated time, query id) in time order, and each week's hot set (Zipf-ranked)."""
    rng = random.Random(w.seed)
    hot_sets: dict[int, list[str]] = {}
    out: list[tuple[float, str]] = []
    for day in range(w.days):
        week = day // 7
        if week not in hot_sets:
            hot_sets[week] = rng.sample(qids, min(w.hot, len(qids)))
        hot = hot_sets[week]
        weights = [1 / (r + 1) ** w.zipf_s for r in range(len(hot))]
        for t in sorted(rng.uniform(0, DAY) for _ in range(w.reads_on(day))):
            qid = rng.choice(qids) if rng.random() < w.tail else rng.choices(hot, weights)[0]
            out.append((SIM_EPOCH + day * DAY + t, qid))
    return out, hot_sets


def subset(ds: Dataset, docs: int | None) -> Dataset:
    """A seeded sample of `docs` documents, the judgements restricted to it."""
    if docs is None or docs >= len(ds.corpus):
        return ds
    keep = set(random.Random(0).sample(sorted(ds.corpus), docs))
    qrels = {q: {d: r for d, r in rel.items() if d in keep} for q, rel in ds.qrels.items()}
    return Dataset(ds.name, {d: v for d, v in ds.corpus.items() if d in keep}, ds.queries,
                   {q: r for q, r in qrels.items() if r})


# -- one instance --------------------------------------------------------------------------------


@dataclass(frozen=True)
class Policy:
    tick_minutes: float = 60.0
    evict_idle_days: float = 7.0
    pin_ttl_days: float = 7.0
    half_life_days: float = 7.0
    doc_promote_touches: float = 3.0
    codec: str = "float16"
    promotion: bool = True  # False: collection promotion can never fire (the "stay lazy" arm)


def _settings(data_dir: Path, embedder: str, p: Policy) -> Settings:
    promotion: dict[str, Any] = {} if p.promotion else {"promote_min_queries": 10**9, "promote_min_hits": 0}
    return Settings(data_dir=data_dir, embedder="hash" if embedder == "hash" else "openai",
                    scheduler_enabled=False, per_tenant_per_min=1_000_000,  # the policy, not the rate limit
                    evict_idle_seconds=p.evict_idle_days * DAY, doc_promote_ttl_seconds=p.pin_ttl_days * DAY,
                    usage_half_life_seconds=p.half_life_days * DAY, doc_promote_touches=p.doc_promote_touches,
                    cold_codec=p.codec,  # type: ignore[arg-type]
                    **promotion)


@dataclass
class Instance:
    c: Container
    emb: CountingEmbedder
    cold: CountingCold
    queue: SyncQueue
    clock: SimClock


def instance(emb: CountingEmbedder, p: Policy, embedder: str, clock: SimClock) -> Instance:
    data = Path(tempfile.mkdtemp(prefix="vibe-lifecycle-")) / "data"
    c = build(_settings(data, embedder, p), emb, clock)  # type: ignore[arg-type]  # every part on the simulated clock
    cold = CountingCold(c.handler.cold)
    c.handler.cold = cold  # type: ignore[assignment]

    def run_batch(jobs: list[EmbedJob]) -> BatchOutcome:
        out = c.handler.run(jobs)
        if out.changed:
            c.follower.sync()
        return out

    q = SyncQueue(run_batch, c.settings.embed_batch_size)
    c.queue = c.planner.queue = c.docs.queue = c.lifecycle.backfills.queue = q  # type: ignore[assignment]
    assert c.planner.usage is not None and c.lifecycle.clock is clock and c.handler.clock is clock
    c.follower.sync()
    return Instance(c, emb, cold, q, clock)


def ingest(inst: Instance, ds: Dataset) -> None:
    c = inst.c
    docs = [c.docs.parse(PRINCIPAL, COLLECTION, d["_id"], d) for d in corpus_docs(ds)]
    for i in range(0, len(docs), 500):
        c.docs.put(docs[i:i + 500])


def embed_all(inst: Instance, ds: Dataset) -> None:
    c, space = inst.c, inst.c.settings.space
    keys = [DocKey(TENANT, COLLECTION, d) for d in ds.corpus]
    sides = c.store.sidecars(keys, space)
    cold = [sides[k] for k in keys if k in sides and sides[k].status in COLD]
    moved = set(c.store.set_status([e.key for e in cold], space, SemanticStatus.QUEUED, only_from=COLD))
    c.queue.enqueue([EmbedJob(e.key, space, e.content_hash) for e in cold if e.key in moved])


def ask(inst: Instance, q: str) -> tuple[list[str], list[str]]:
    """One hybrid read as the SSE route runs it: the first answer, then touch and re-rank."""
    s = inst.c.planner.open(PRINCIPAL, ReadRequest(COLLECTION, q, "hybrid", limit=LIMIT), streaming=True)
    first = [f.key.doc_id for f in s.ranking[:LIMIT]]
    s.complete_semantic()
    s.touch()
    for _ in range(5):  # the inline queue has run the jobs: one refresh settles it
        if not s.awaits_backfill:
            break
        s.refresh()
    return first, [f.key.doc_id for f in s.ranking[:LIMIT]]


def storage(inst: Instance) -> dict[str, int]:
    c = inst.c
    rep = c.store.storage_report(TENANT)  # type: ignore[attr-defined]
    cov = c.store.coverage_all(c.settings.space)  # type: ignore[attr-defined]
    root = c.settings.cold_dir or c.settings.data_dir / "cold"
    return {"embedded_bytes": rep["vectorBytes"], "cold_bytes": rep["coldBytes"], "vectors": rep["vectors"],
            "cold_vectors": rep["cold"], "ready_docs": cov.get("ready", 0), "cold_docs": cov.get("cold", 0),
            # what the cold store takes on disk (allocated blocks: the packed file and its WAL, or
            # one file per vector with VIBE_COLD_STORE=files), against `cold_bytes`, the codes' size
            "cold_disk_bytes": sum(p.stat().st_blocks * 512 for p in root.rglob("*") if p.is_file())
            if root.exists() else 0}


# -- arms ---------------------------------------------------------------------------------------


@dataclass
class Eager:
    ndcg: dict[str, float]
    storage: dict[str, int]
    provider: dict[str, int]
    doc_vectors: dict[str, list[float]] = field(default_factory=dict)
    seconds: float = 0.0


def run_eager(ds: Dataset, qids: list[str], emb: CountingEmbedder, embedder: str, p: Policy) -> Eager:
    t0 = time.perf_counter()
    clock = SimClock()
    inst = instance(emb, p, embedder, clock)
    ingest(inst, ds)
    embed_all(inst, ds)
    queries = ds.judged_queries()
    run = {q: ask(inst, queries[q])[1] for q in qids}
    vecs: dict[str, list[float]] = {}
    for d in ds.corpus:
        side = inst.c.store.sidecars([DocKey(TENANT, COLLECTION, d)], inst.c.settings.space)
        s = next(iter(side.values()), None)
        v = None if s is None else inst.c.store.vector_for_hash(TENANT, s.content_hash,  # type: ignore[attr-defined]
                                                                inst.c.settings.space)
        if v is not None:
            vecs[d] = centroid(v)
    out = Eager(ir.per_query(run, ds.qrels), storage(inst), emb.snapshot(), vecs)
    inst.c.store.close()
    out.seconds = round(time.perf_counter() - t0, 1)
    return out


def _ratio(run: dict[str, list[str]], ds: Dataset, eager: dict[str, float]) -> tuple[float, float, float]:
    """(mean nDCG@10, eager's on the same queries, ratio); None on a day without reads."""
    if not run:
        return None, None, None  # type: ignore[return-value]
    got = ir.per_query(run, ds.qrels)
    mine = statistics.fmean(got.values())
    base = statistics.fmean(eager[q] for q in got)
    return round(mine, 4), round(base, 4), round(mine / base, 4) if base else 0.0


def run_stream(name: str, ds: Dataset, stream: list[tuple[float, str]], days: int, emb: CountingEmbedder,
               embedder: str, p: Policy, eager: dict[str, float], scheduler: bool) -> dict[str, Any]:
    t0 = time.perf_counter()
    clock = SimClock()
    queries = ds.judged_queries()
    tick_s = p.tick_minutes * 60.0
    points: list[dict[str, Any]] = []
    ticks: dict[str, int] = {"ticks": 0, "promoted": 0, "demoted": 0, "pinned": 0, "evicted": 0,
                             "pruned_vectors": 0, "pruned_cold": 0, "backfill_jobs": 0}
    events: list[dict[str, Any]] = []  # collection promotions and demotions, in simulated days
    inst = instance(emb, p, embedder, clock)
    c = inst.c
    usage = c.planner.usage
    assert usage is not None
    ingest(inst, ds)
    next_tick = SIM_EPOCH + tick_s
    day_ticks = dict(ticks)
    last = emb.snapshot()
    last_rehydrated = 0

    def tick_until(t: float) -> None:
        nonlocal next_tick
        while next_tick <= t:
            clock.t = next_tick
            usage.flush(c.store)  # type: ignore[arg-type]
            if scheduler:
                r = c.lifecycle.tick(next_tick)
                ticks["ticks"] += 1
                for k in ("pinned", "evicted", "pruned_vectors", "pruned_cold"):
                    ticks[k] += getattr(r, k)
                ticks["promoted"] += len(r.promoted)
                ticks["demoted"] += len(r.demoted)
                events.extend({"at_day": round((next_tick - SIM_EPOCH) / DAY, 4), "action": action}
                              for action, names in (("promote", r.promoted), ("demote", r.demoted)) for _ in names)
                ticks["backfill_jobs"] += c.lifecycle.run_backfills()
            next_tick += tick_s

    i = 0
    for day in range(days):
        first: dict[str, list[str]] = {}
        final: dict[str, list[str]] = {}
        served = 0
        while i < len(stream) and stream[i][0] < SIM_EPOCH + (day + 1) * DAY:
            t, qid = stream[i]
            tick_until(t)
            clock.t = t
            f, g = ask(inst, queries[qid])
            first[qid], final[qid] = f, g
            usage.flush(c.store)  # type: ignore[arg-type]  # as serve's 2 s flush: per read
            served += 1
            i += 1
        tick_until(SIM_EPOCH + (day + 1) * DAY)  # the day's last tick (midnight) included
        clock.t = SIM_EPOCH + (day + 1) * DAY
        now = emb.snapshot()
        nd, base, ratio = _ratio(final, ds, eager)
        _, _, ratio_first = _ratio(first, ds, eager)
        st = storage(inst)
        mode = next((m.mode for m in c.store.collection_modes() if m.collection == COLLECTION), "lazy")
        points.append({"mode": mode,
            "day": day + 1, "queries": served, "distinct": len(final),
            **st, "stored_bytes": st["embedded_bytes"] + st["cold_bytes"],
            "embedded_fraction": round(st["ready_docs"] / len(ds.corpus), 4),
            "provider_calls": now["calls"] - last["calls"], "provider_docs": now["docs"] - last["docs"],
            "provider_calls_total": now["calls"], "provider_docs_total": now["docs"],
            "query_embeds": now["query_calls"] - last["query_calls"],
            "re_embedded_total": now["repeats"], "rehydrated": inst.cold.hits - last_rehydrated,
            "rehydrated_total": inst.cold.hits,
            "ndcg10": nd, "eager_ndcg10": base, "ratio_done": ratio, "ratio_first": ratio_first,
            **{f"tick_{k}": ticks[k] - day_ticks[k] for k in ticks},
        })
        last, last_rehydrated, day_ticks = now, inst.cold.hits, dict(ticks)
        print(f"{name:9} day {day + 1:2}: {points[-1]['embedded_bytes']:>9} B embedded "
              f"{points[-1]['cold_bytes']:>8} B cold, {points[-1]['provider_docs']:>4} docs to provider, "
              f"{points[-1]['rehydrated']:>4} rehydrated, quality {ratio} (first {ratio_first})", flush=True)
    check = rehydration_check(inst, ds) if scheduler else None
    c.store.close()
    return {"points": points, "ticks": ticks, "events": events, "queue_retries": inst.queue.retries,
            "rehydration_check": check, "seconds": round(time.perf_counter() - t0, 1)}


def rehydration_check(inst: Instance, ds: Dataset) -> dict[str, Any]:
    """Every document still cold at the end is touched again with the provider watched: the
    calls and documents sent must not move, and the documents must be ready again."""
    c, space = inst.c, inst.c.settings.space
    keys = [DocKey(TENANT, COLLECTION, d) for d in ds.corpus]
    sides = c.store.sidecars(keys, space)
    cold = [s for s in sides.values() if s.status == SemanticStatus.NONE and s.cold_ref]
    before, hits = inst.emb.snapshot(), inst.cold.hits
    moved = set(c.store.set_status([s.key for s in cold], space, SemanticStatus.QUEUED, only_from=COLD))
    c.queue.enqueue([EmbedJob(s.key, space, s.content_hash) for s in cold if s.key in moved])
    after = c.store.sidecars([s.key for s in cold], space)
    return {"cold_docs": len(cold), "rehydrated": inst.cold.hits - hits,
            "ready_after": sum(1 for s in after.values() if s.status == SemanticStatus.READY),
            "provider_calls": inst.emb.calls - before["calls"], "provider_docs": inst.emb.docs - before["docs"]}


# -- cold codecs --------------------------------------------------------------------------------


def codec_quality(doc_vectors: dict[str, list[float]], query_vectors: list[list[float]]) -> dict[str, Any]:
    """Each codec over the model's vectors of the whole dev set: cosine of the decoded vector
    to the original, and recall@10 of the original top 10 (exact cosine) over the queries."""
    ids = sorted(doc_vectors)
    orig = np.asarray([doc_vectors[d] for d in ids], dtype=np.float32)
    qs = np.asarray(query_vectors, dtype=np.float32)

    def unit(m: np.ndarray) -> np.ndarray:
        return m / np.maximum(np.linalg.norm(m, axis=1, keepdims=True), 1e-12)

    truth = np.argsort(-(unit(qs) @ unit(orig).T), axis=1)[:, :10]
    out: dict[str, Any] = {"docs": len(ids), "queries": len(qs)}
    for codec in ("float16", "int8"):
        dec = np.asarray([decode(encode(v, codec)) for v in orig], dtype=np.float32)
        cos = np.sum(unit(orig) * unit(dec), axis=1)
        top = np.argsort(-(unit(qs) @ unit(dec).T), axis=1)[:, :10]
        recall = [len(set(a) & set(b)) / 10 for a, b in zip(truth.tolist(), top.tolist(), strict=True)]
        out[codec] = {"bytes_per_vector": len(encode(orig[0], codec)), "float32_bytes": orig.shape[1] * 4,
                      "cosine_min": round(float(cos.min()), 7), "cosine_mean": round(float(cos.mean()), 7),
                      "recall10_mean": round(statistics.fmean(recall), 4), "recall10_min": round(min(recall), 4)}
    return out


# -- the report ---------------------------------------------------------------------------------


def _stored_eager(e: Eager) -> dict[str, int]:
    return {"embedded_bytes": e.storage["embedded_bytes"], "cold_bytes": 0,
            "stored_bytes": e.storage["embedded_bytes"], "provider_docs_total": e.provider["docs"],
            "provider_calls_total": e.provider["calls"]}


def main(data: Path, days: int = 30, docs: int | None = None, queries: int | None = None, per_day: int = 100,
         hot: int = 20, tail: float = 0.1, seed: int = 1, policy: Policy | None = None, embedder: str = "local",
         out_dir: Path | None = None, schedule: tuple[tuple[int, int], ...] = (),
         no_promotion_arm: bool = False) -> Path:
    started = time.perf_counter()
    p = policy or Policy()
    ds = subset(load(data), docs)
    qids = query_population(ds, queries)
    w = Workload(days, per_day, hot, tail, 1.0, seed, schedule)
    stream, hot_sets = query_stream(qids, w)
    emb_eager, emb_lazy, emb_life = make_embedder(embedder), make_embedder(embedder), make_embedder(embedder)
    eager = run_eager(ds, qids, emb_eager, embedder, p)
    print(f"eager: {eager.storage}, provider {eager.provider}, {eager.seconds} s", flush=True)
    arms = {
        "lazy": run_stream("lazy", ds, stream, days, emb_lazy, embedder, p, eager.ndcg, scheduler=False),
        "lifecycle": run_stream("lifecycle", ds, stream, days, emb_life, embedder, p, eager.ndcg, scheduler=True),
    }
    if no_promotion_arm:  # the same scheduler with collection promotion off: what staying lazy costs
        arms[NO_PROMOTION] = run_stream("no-promo", ds, stream, days, make_embedder(embedder), embedder,
                                        replace(p, promotion=False), eager.ndcg, scheduler=True)
    judged = ds.judged_queries()
    qvecs = [emb_eager.embed_query(judged[q]) for q in qids]
    codecs = codec_quality(eager.doc_vectors, qvecs)
    suffix = "".join(f"-{k}{v}" for k, v in (("d", docs), ("q", queries)) if v is not None)
    suffix += f"-{days}d" if days != 30 else ""
    suffix += f"-{per_day}pd" if per_day != 100 and not schedule else ""
    suffix += "-s" + "-".join(f"{n}x{r}" for n, r in schedule) if schedule else ""
    name = f"lifecycle-{ds.name}{suffix}"
    doc: dict[str, Any] = {
        "name": name, "dataset": ds.name, "docs": len(ds.corpus), "query_population": len(qids),
        "embedder": emb_eager.model_id, "workload": asdict(w), "policy": asdict(p),
        "hot_sets": {str(k): v for k, v in hot_sets.items()}, "stream_length": len(stream),
        "eager": {**_stored_eager(eager), "ndcg10": round(statistics.fmean(eager.ndcg[q] for q in qids), 4),
                  "seconds": eager.seconds},
        "arms": arms, "codecs": codecs, "seconds": round(time.perf_counter() - started, 1),
    }
    return write(doc, out_dir or RESULTS)


def write(doc: dict[str, Any], out_dir: Path) -> Path:
    import json

    out_dir.mkdir(parents=True, exist_ok=True)
    stem = out_dir / f"{doc['name']}-{time.strftime('%Y%m%d-%H%M%S')}"
    doc["plot"] = plot(doc, stem.with_suffix(".png"))
    path = stem.with_suffix(".json")
    path.write_text(json.dumps(doc, indent=1, sort_keys=True))
    md = markdown(doc)
    stem.with_suffix(".md").write_text(md)
    print(md)
    return path


def _nan(v: float | None) -> float:
    return float("nan") if v is None else v


def _mean(arm: dict[str, Any], key: str) -> float | None:
    """Mean over the days that had reads."""
    vals = [pt[key] for pt in arm["points"] if pt.get(key) is not None]
    return round(statistics.fmean(vals), 4) if vals else None


def plot(doc: dict[str, Any], path: Path) -> str:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    life, lazy, eager = doc["arms"]["lifecycle"]["points"], doc["arms"]["lazy"]["points"], doc["eager"]
    nopro = doc["arms"].get(NO_PROMOTION, {}).get("points")
    xs = [pt["day"] for pt in life]
    fig, axes = plt.subplots(4, 1, figsize=(8, 11), sharex=True, height_ratios=[3, 3, 3, 1.3])
    ax = axes[0]
    kib = 1024.0
    ax.axhline(eager["stored_bytes"] / kib, color="C0", label="eager (all embedded)")
    ax.plot(xs, [pt["stored_bytes"] / kib for pt in lazy], color="C1", label="lazy, no eviction")
    ax.plot(xs, [pt["embedded_bytes"] / kib for pt in life], color="C2", label="lifecycle: embedded")
    ax.plot(xs, [pt["stored_bytes"] / kib for pt in life], "--", color="C2", label="lifecycle: embedded + cold")
    if nopro:
        ax.plot(xs, [pt["stored_bytes"] / kib for pt in nopro], "--", color="C3",
                label="lifecycle, no promotion: embedded + cold")
    ax.set_ylabel("vector bytes (KiB)")
    ax.legend(fontsize=7)
    ax = axes[1]
    ax.axhline(eager["provider_docs_total"], color="C0", label="eager")
    ax.plot(xs, [pt["provider_docs_total"] for pt in lazy], color="C1", label="lazy, no eviction")
    ax.plot(xs, [pt["provider_docs_total"] for pt in life], color="C2", label="lifecycle")
    ax.plot(xs, [pt["rehydrated_total"] for pt in life], ":", color="C2", label="lifecycle: rehydrated (no call)")
    if nopro:
        ax.plot(xs, [pt["provider_docs_total"] for pt in nopro], color="C3", label="lifecycle, no promotion")
    ax.set_ylabel("documents embedded (cumulative)")
    ax.legend(fontsize=7)
    ax = axes[2]
    ax.axhline(1.0, color="C0", label="eager")
    ax.plot(xs, [_nan(pt["ratio_done"]) for pt in lazy], ".-", color="C1", markersize=3, label="lazy (done)")
    ax.plot(xs, [_nan(pt["ratio_done"]) for pt in life], ".-", color="C2", markersize=3, label="lifecycle (done)")
    ax.plot(xs, [_nan(pt["ratio_first"]) for pt in life], "x:", color="C2", markersize=3,
            label="lifecycle (first answer)")
    ax.plot(xs, [_nan(pt["ratio_first"]) for pt in lazy], "x:", color="C1", markersize=3, label="lazy (first answer)")
    if nopro:
        ax.plot(xs, [_nan(pt["ratio_first"]) for pt in nopro], "x:", color="C3", markersize=3,
                label="no promotion (first answer)")
    ax.set_ylabel("nDCG@10 / eager hybrid")
    ax.legend(fontsize=7, ncol=2)
    ax = axes[3]
    ax.bar(xs, [pt["queries"] for pt in life], color="grey", width=0.8)
    ax.set_ylabel("reads/day")
    ax.set_xlabel("simulated day (hot set changes at the dotted lines; shaded: collection eager)")
    for week in range(1, (len(xs) - 1) // 7 + 1):
        for a in axes:
            a.axvline(7 * week + 0.5, color="grey", linewidth=0.5, linestyle=":")
    for ev in doc["arms"]["lifecycle"].get("events", []):  # x = simulated days since the start (day d ends at d)
        x = ev["at_day"]
        for a in axes:
            a.axvline(x, color="C4" if ev["action"] == "promote" else "C5", linewidth=1.0)
        axes[0].annotate(ev["action"], (x, axes[0].get_ylim()[1]), fontsize=7, rotation=90, va="top")
    starts = [(ev["at_day"], ev["action"]) for ev in doc["arms"]["lifecycle"].get("events", [])]
    open_at = None
    for x, action in starts + [(xs[-1], "end")]:
        if action == "promote" and open_at is None:
            open_at = x
        elif action != "promote" and open_at is not None:
            for a in axes:
                a.axvspan(open_at, x, color="C4", alpha=0.08)
            open_at = None
    reads = doc["workload"]["schedule"] and "scheduled reads" or f"{doc['workload']['per_day']} queries/day"
    fig.suptitle(f"Lifecycle: {doc['dataset']} ({doc['docs']} docs, {reads})")
    fig.savefig(path, dpi=100, bbox_inches="tight")
    plt.close("all")
    return path.name


def _table(head: Sequence[str], rows: Sequence[Sequence[Any]]) -> str:
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    return "\n".join(lines + ["| " + " | ".join(str(c) for c in r) + " |" for r in rows]) + "\n"


def markdown(doc: dict[str, Any]) -> str:
    life, lazy, eager = doc["arms"]["lifecycle"], doc["arms"]["lazy"], doc["eager"]
    w, p = doc["workload"], doc["policy"]
    head = ["day", "queries", "eager bytes", "lazy bytes", "lifecycle embedded", "lifecycle cold",
            "lazy docs→provider", "lifecycle docs→provider", "rehydrated", "evicted", "pinned",
            "lazy quality", "lifecycle quality", "lifecycle first", "lifecycle mode"]
    rows = [[b["day"], b["queries"], eager["stored_bytes"], a["stored_bytes"], b["embedded_bytes"], b["cold_bytes"],
             a["provider_docs"], b["provider_docs"], b["rehydrated"], b["tick_evicted"], b["tick_pinned"],
             a["ratio_done"], b["ratio_done"], b["ratio_first"], b.get("mode", "lazy")]
            for a, b in zip(lazy["points"], life["points"], strict=True)]

    la, li = lazy["points"][-1], life["points"][-1]

    def row(label: str, arm: dict[str, Any]) -> list[Any]:
        pt = arm["points"][-1]
        return [label, pt["embedded_bytes"], pt["cold_bytes"], pt["provider_docs_total"], pt["provider_calls_total"],
                pt["rehydrated_total"], _mean(arm, "ratio_done"), _mean(arm, "ratio_first")]

    summary = [["eager", eager["stored_bytes"], 0, eager["provider_docs_total"], eager["provider_calls_total"], 0,
                1.0, 1.0], row("lazy, no eviction", lazy), row("lifecycle", life)]
    nopro = doc["arms"].get(NO_PROMOTION)
    if nopro:
        summary.append(row(NO_PROMOTION, nopro))
    events = life.get("events", [])
    ev_text = ("Collection mode changes (lifecycle): " + ", ".join(
        f"{e['action']} at day {e['at_day']:g}" for e in events) + ".\n\n") if events else (
        "Collection promotion did not fire.\n\n")
    c = doc["codecs"]
    codec_rows = [[k, c[k]["bytes_per_vector"], c[k]["float32_bytes"], c[k]["cosine_min"], c[k]["cosine_mean"],
                   c[k]["recall10_mean"], c[k]["recall10_min"]] for k in ("float16", "int8")]
    chk = life["rehydration_check"] or {}
    return (
        f"# Lifecycle over {w['days']} simulated days: {doc['dataset']} ({doc['docs']} docs, "
        f"{doc['query_population']} distinct queries, embedder {doc['embedder']})\n\n"
        f"Stream: {doc['stream_length']} hybrid reads, "
        + (f"days x reads a day {w['schedule']}" if w.get("schedule") else f"{w['per_day']} a day")
        + f"; each week {w['hot']} queries are "
        f"Zipf-hot (s={w['zipf_s']}) and {w['tail']:.0%} of reads are uniform over all queries. "
        f"Scheduler every {p['tick_minutes']:g} simulated minutes; eviction after {p['evict_idle_days']:g} idle "
        f"days, document pins for {p['pin_ttl_days']:g} days after {p['doc_promote_touches']:g} decayed touches "
        f"(half-life {p['half_life_days']:g} days), cold codec {p['codec']}. Collection promotion at the "
        "product defaults. Quality = mean nDCG@10 of the final hybrid answer over the day's distinct "
        "queries / eager hybrid on the same queries (`first` = the answer before the query's own touch). "
        f"Eager hybrid nDCG@10 over the population: {eager['ndcg10']}.\n\n"
        "## End of the run\n\n"
        + _table(["arm", "embedded bytes", "cold bytes", "docs to provider", "provider calls", "rehydrated",
                  "mean daily quality (done)", "mean daily quality (first)"], summary)
        + f"\nScheduler totals (lifecycle): {life['ticks']}.\n\n" + ev_text
        + f"Rehydration makes no provider call: {li['re_embedded_total']} documents were sent to the provider twice "
        f"over the run (a re-embed instead of a rehydration would count here; the lazy arm, which never evicts, "
        f"sent {la['re_embedded_total']}: identical texts of two documents in one batch) against "
        f"{li['rehydrated_total']} "
        f"rehydrations; at the end the {chk.get('cold_docs', 0)} documents still cold were touched again: "
        f"{chk.get('rehydrated', 0)} rehydrated, {chk.get('ready_after', 0)} ready, "
        f"{chk.get('provider_calls', 0)} provider calls, {chk.get('provider_docs', 0)} documents sent.\n\n"
        "## Cold codecs on the model's vectors\n\n"
        f"{c['docs']} document vectors, {c['queries']} queries; recall@10 = overlap of the top 10 by exact "
        "cosine over decoded vectors with the top 10 over the originals.\n\n"
        + _table(["codec", "bytes/vector", "float32 bytes", "cosine min", "cosine mean", "recall@10 mean",
                  "recall@10 min"], codec_rows)
        + "\n## Per simulated day\n\n" + _table(head, rows)
        + f"\nPlot: {doc['plot']}. Run time {doc['seconds']} s (eager {eager['seconds']} s, lazy "
        f"{lazy['seconds']} s, lifecycle {life['seconds']} s).\n"
    )
