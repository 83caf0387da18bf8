"""The lifecycle scheduler (services/core/lifecycle/) with an injected clock, over a real
store (SQLite and PostgreSQL), a file cold store, a recording job queue, the in-memory budget and
the real embed handler with a counting hash embedder: promotion, demotion, backfills that resume
after a restart, eviction, rehydration without a provider call, pruning, daily token caps,
reindex and forced re-embeds.

The simulated clock starts in 2001, long before the wall clock: the store is given the same
clock, so every stamp (status changes, embeddings, usage days) is simulated time, and a stamp
taken from the wall clock would show at once. No assertion reads the wall clock."""

from __future__ import annotations

import types
from collections.abc import Iterator, Sequence
from dataclasses import replace
from pathlib import Path
from typing import cast

import numpy as np
import pytest

from services.core.backfill import BackfillLimits, Backfills
from services.core.handlers import EmbedHandler
from services.core.lifecycle import Lifecycle, LifecycleConfig
from services.core.promotion import PromotionPolicy, decide_collections
from services.core.usage import UsageRecorder
from shared.adapters import memory_budget
from shared.adapters.cold_files import FileColdStore
from shared.adapters.memory_budget import MemoryBudget
from shared.costs import estimate_tokens, utc_day
from shared.model import (
    PUBLIC_PRINCIPAL,
    CollectionUsage,
    DocKey,
    EmbedJob,
    SemanticStatus,
    SidecarEntry,
    SpaceInfo,
    StoredDoc,
)
from shared.policy.eligibility import EligibilityPolicy
from shared.ports import StoreOfRecord
from tests.contract.test_store_contract import Opener, opener  # noqa: F401 - fixture
from tests.support.counting import CountingEmbedder

S = SemanticStatus
DAY = 86400.0
SIM_START = 983_746_800.0  # 2001-03-04 23:00 UTC: an hour before a day rollover
SPACE = "core"
POLICY = PromotionPolicy(min_queries=5, min_hits=20, window_seconds=3600.0, demote_idle_seconds=2 * DAY)
CFG = LifecycleConfig(SPACE, POLICY, doc_promote_touches=3.0, doc_promote_ttl_seconds=60 * DAY,
                      half_life_seconds=7 * DAY, evict_idle_seconds=30 * DAY, evict_batch=2, codec="float16")


class RecordingQueue:
    """A JobQueue that keeps what it is given (the handler is run by the test)."""

    def __init__(self) -> None:
        self.jobs: list[EmbedJob] = []

    def enqueue(self, jobs: Sequence[EmbedJob]) -> int:
        self.jobs += jobs
        return len(jobs)

    def depth(self, tenant: str | None = None) -> dict[str, int]:
        return {"bulk": 0, "interactive": 0}

    def on_done(self, callback: object) -> None: ...

    def start(self) -> None: ...

    def stop(self) -> None: ...

    def take(self) -> list[EmbedJob]:
        out, self.jobs = self.jobs, []
        return out


def text(i: str) -> str:
    return f"Document {i} explains boundary layer transition on swept wings in a wind tunnel study."


class Rig:
    def __init__(self, open_store: Opener, root: Path, monkeypatch: pytest.MonkeyPatch, per_minute: int = 1000,
                 daily_tokens: int = 0, decide: EligibilityPolicy | None = None):
        self.opener = open_store
        self.now = SIM_START
        self.mono = [0.0]
        monkeypatch.setattr(memory_budget, "time", types.SimpleNamespace(monotonic=lambda: self.mono[0]))
        self.store = cast(StoreOfRecord, open_store())
        self.store.clock = self.clock
        self.cold = FileColdStore(root / "cold", CFG.codec)
        self.queue = RecordingQueue()
        self.budget = MemoryBudget(per_minute)
        self.embedder = CountingEmbedder()
        self.policy = decide or EligibilityPolicy([])
        self.handler = EmbedHandler(self.store, self.embedder, EligibilityPolicy([]), {}, max_attempts=3,
                                    cold=self.cold, daily_tokens=daily_tokens, clock=self.clock)
        self.recorder = UsageRecorder(CFG.bucket_seconds, CFG.half_life_seconds, clock=self.clock)
        self.lifecycle = self.build()

    def clock(self) -> float:
        return self.now

    def build(self, policy: EligibilityPolicy | None = None, step_docs: int = 100) -> Lifecycle:
        """A fresh scheduler over the same store and queue (what a restarted process builds)."""
        pol = policy or self.policy
        backfills = Backfills(self.store, self.queue, self.budget, lambda d: pol.decide_doc(d, None),
                              BackfillLimits(step_docs=step_docs, reserve=0, backpressure=1000), self.clock)
        return Lifecycle(replace(CFG, daily_tokens=self.handler.daily_tokens), self.store, self.cold, backfills,
                         clock=self.clock)

    def advance(self, seconds: float) -> None:
        self.now += seconds

    def put(self, i: str, c: str = "c", body: str | None = None, status: SemanticStatus = S.NONE,
            reason: str | None = None) -> DocKey:
        key = DocKey("t", c, i)
        content = body or text(i)
        h = f"h-{abs(hash(content))}"
        self.store.put_docs([StoredDoc(key, {"body": content}, [PUBLIC_PRINCIPAL], None, h, self.now)],
                            [SidecarEntry(key, SPACE, status, h, reason, updated_at=self.now)])
        return key

    def side(self, key: DocKey) -> SidecarEntry:
        s = self.store.sidecar(key, SPACE)
        assert s is not None
        return s

    def run(self, keys: Sequence[DocKey], fresh: bool = False) -> None:
        jobs = [EmbedJob(k, SPACE, self.side(k).content_hash, fresh=fresh) for k in keys]
        self.handler.run(jobs)

    def run_queued(self) -> list[EmbedJob]:
        jobs = self.queue.take()
        if jobs:
            self.handler.run(jobs)
        return jobs

    def embed(self, *keys: DocKey) -> None:
        self.run(keys)
        assert all(self.side(k).status == S.READY for k in keys)

    def query(self, n: int, hits: int, c: str = "c", touched: Sequence[DocKey] = (),
              page: Sequence[DocKey] = ()) -> None:
        for _ in range(n):
            self.recorder.record("t", [c], {c: hits}, touched, page)
        assert self.recorder.flush(self.store)


@pytest.fixture
def rig(opener: Opener, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Rig]:  # noqa: F811
    r = Rig(opener, tmp_path, monkeypatch)
    yield r
    r.store.close()


# -- promotion and demotion ------------------------------------------------------------------------------


def test_promotion_after_enough_queries_and_hits_in_the_window(rig: Rig) -> None:
    rig.query(5, 4)  # 5 queries, 20 hits: both thresholds met
    report = rig.lifecycle.tick()
    assert report.promoted == ["t/c"] and not report.skipped
    (m,) = rig.store.collection_modes("t")
    assert (m.mode, m.manual, m.since) == ("eager", False, rig.now)
    assert "5 queries" in m.reason and "20 hits" in m.reason
    assert m.figures["queries"] == 5 and m.figures["hits"] == 20 and m.figures["fired"] == ["queries", "hits"]
    assert rig.store.promoted() == {("t", "c")}
    (task,) = rig.store.tasks("t")
    assert (task.kind, task.collection, task.state) == ("promote", "c", "running")
    assert rig.lifecycle.tick().promoted == []  # decided once


@pytest.mark.parametrize(("queries", "hits_each", "fired"), [(5, 0, ["queries"]), (1, 20, ["hits"]),
                                                            (2, 10, ["hits"])])
def test_either_threshold_alone_promotes_and_the_reason_says_which(rig: Rig, queries: int, hits_each: int,
                                                                   fired: list[str]) -> None:
    """Enough queries OR enough hits within the window: one busy leg is enough."""
    rig.query(queries, hits_each)
    assert rig.lifecycle.tick().promoted == ["t/c"]
    (m,) = rig.store.collection_modes("t")
    assert m.mode == "eager" and m.figures["fired"] == fired
    other = {"queries": "hits", "hits": "queries"}[fired[0]]
    assert f"{m.figures[fired[0]]} {fired[0]} (at least" in m.reason and other not in m.reason


@pytest.mark.parametrize(("queries", "hits"), [(4, 4), (1, 19), (0, 0)])
def test_no_promotion_below_both_thresholds(rig: Rig, queries: int, hits: int) -> None:
    rig.query(queries, hits)
    assert rig.lifecycle.tick().promoted == []
    assert rig.store.promoted() == set() and rig.store.tasks("t") == []


def test_a_zero_hits_threshold_is_off_not_always_met() -> None:
    policy = replace(POLICY, min_hits=0)
    quiet = CollectionUsage("t", "c", 1, 0, 0.0)
    busy = CollectionUsage("t", "d", POLICY.min_queries, 0, 0.0)
    assert [m.collection for m in decide_collections(policy, [quiet, busy], [], 0.0)] == ["d"]


def test_queries_outside_the_window_do_not_promote(rig: Rig) -> None:
    rig.query(3, 4)
    rig.advance(2 * POLICY.window_seconds)
    rig.query(3, 4)  # 6 queries in all, but only 3 within the window
    assert rig.lifecycle.tick().promoted == []


def test_demotion_after_idle(rig: Rig) -> None:
    rig.query(5, 4)
    rig.lifecycle.tick()
    rig.advance(POLICY.demote_idle_seconds - 60)
    assert rig.lifecycle.tick().demoted == []
    rig.query(1, 0)  # a query resets the idle time
    rig.advance(POLICY.demote_idle_seconds - 60)
    assert rig.lifecycle.tick().demoted == []
    assert rig.store.promoted() == {("t", "c")}
    rig.advance(120)
    assert rig.lifecycle.tick().demoted == ["t/c"]
    (m,) = rig.store.collection_modes("t")
    assert m.mode == "lazy" and not m.manual and "no query" in m.reason
    assert rig.store.promoted() == set()


def test_manual_decisions_are_never_overridden(rig: Rig) -> None:
    assert rig.lifecycle.set_mode("t", "c", eager=False)  # an operator keeps c lazy
    assert rig.lifecycle.set_mode("t", "d", eager=True)  # and d eager
    rig.query(50, 10, c="c")
    assert rig.lifecycle.tick().promoted == []
    rig.advance(10 * POLICY.demote_idle_seconds)
    report = rig.lifecycle.tick()
    assert report.promoted == [] and report.demoted == []
    assert {(m.collection, m.mode, m.manual) for m in rig.store.collection_modes("t")} == {
        ("c", "lazy", True), ("d", "eager", True)}


def test_only_one_scheduler_ticks_at_a_time(rig: Rig) -> None:
    other = cast(StoreOfRecord, rig.opener())
    try:
        with other.lease("scheduler") as held:
            assert held
            assert rig.lifecycle.tick().skipped
        assert not rig.lifecycle.tick().skipped
    finally:
        other.close()


# -- promotion backfill ----------------------------------------------------------------------------------


def test_promotion_backfills_within_budget_and_resumes_after_a_restart(
        opener: Opener, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:  # noqa: F811
    rig = Rig(opener, tmp_path, monkeypatch, per_minute=3)
    try:
        keys = [rig.put(f"d{i}") for i in range(8)]
        rig.embed(keys[2])  # already embedded: no job for it
        rig.budget.take("t", 3)  # the embedding took the bucket above; refill it fully
        rig.mono[0] += 60
        other = rig.put("x", c="other")
        rig.query(5, 4)
        rig.lifecycle.tick()
        assert rig.queue.jobs == []  # the tick starts the task; steps run on their own cadence
        assert rig.lifecycle.run_backfills() == 3
        first = rig.queue.take()
        assert [j.key for j in first] == [keys[0], keys[1], keys[3]]
        assert all(j.priority == "bulk" and not j.fresh for j in first)
        assert all(rig.side(j.key).status == S.QUEUED for j in first)
        assert rig.lifecycle.run_backfills() == 0  # the bucket is empty: no step spends it
        (task,) = rig.store.tasks("t", running_only=True)
        assert task.queued == 3 and task.examined == 4 and task.total == 8

        restarted = rig.build()  # a new process over the same store
        rig.mono[0] += 60
        assert restarted.run_backfills() == 3
        assert [j.key for j in rig.queue.take()] == keys[4:7]
        rig.mono[0] += 60
        assert restarted.run_backfills() == 1
        assert [j.key for j in rig.queue.take()] == [keys[7]]
        assert restarted.run_backfills() == 0
        (task,) = rig.store.tasks("t")
        assert (task.state, task.queued, task.examined) == ("done", 7, 8)
        assert rig.side(other).status == S.NONE  # another collection is not part of it
    finally:
        rig.store.close()


def test_a_new_promotion_replaces_an_unfinished_task(rig: Rig) -> None:
    first = rig.lifecycle.backfills.start("t", "c", SPACE, "promote")
    second = rig.lifecycle.backfills.start("t", "c", SPACE, "promote")
    states = {t.id: t.state for t in rig.store.tasks("t")}
    assert states == {first.id: "cancelled", second.id: "running"}


@pytest.mark.parametrize("how", ["manual", "idle"])
def test_a_demotion_stops_the_promotion_backfill(opener: Opener, tmp_path: Path,  # noqa: F811
                                                monkeypatch: pytest.MonkeyPatch, how: str) -> None:
    """A demoted collection is not embedded any further on the bulk lane: its vectors would be
    paid for and then evicted. Another collection's promotion goes on."""
    rig = Rig(opener, tmp_path, monkeypatch, per_minute=2)
    try:
        keys = [rig.put(f"d{i}") for i in range(6)]
        others = [rig.put(f"o{i}", c="o") for i in range(3)]
        rig.query(5, 4)
        rig.query(5, 4, c="o")
        rig.lifecycle.tick()
        assert rig.store.promoted() == {("t", "c"), ("t", "o")}
        rig.lifecycle.run_backfills()
        first = {j.key for j in rig.queue.take()}
        assert first and first <= {*keys, *others}
        if how == "manual":
            assert rig.lifecycle.set_mode("t", "c", eager=False)
        else:
            rig.advance(POLICY.demote_idle_seconds - 60)
            rig.query(1, 0, c="o")  # o keeps being asked
            rig.advance(120)
            assert rig.lifecycle.tick().demoted == ["t/c"]
        for _ in range(5):
            rig.mono[0] += 60
            rig.lifecycle.run_backfills()
        rest = {j.key for j in rig.queue.take()}
        assert not rest & set(keys), "a demoted collection was embedded further"
        assert {*first, *rest} >= set(others)
        states = {t.collection: t.state for t in rig.store.tasks("t")}
        assert states == {"c": "cancelled", "o": "done"}
    finally:
        rig.store.close()


# -- eviction, rehydration, pruning ------------------------------------------------------------------------


def test_idle_vectors_go_cold_pinned_documents_stay_and_rehydrate_without_a_provider_call(rig: Rig) -> None:
    keys = [rig.put(f"d{i}") for i in range(5)]
    hot, warm = keys[0], keys[1]
    rig.embed(*keys)
    before = {k: rig.store.vector_for_hash("t", rig.side(k).content_hash, SPACE) for k in keys}
    rig.query(1, 0, touched=[hot, hot, hot, warm])  # hot: 3 touches, enough to pin; warm: 1
    assert rig.lifecycle.tick().pinned == 1
    rig.advance(CFG.evict_idle_seconds - DAY)
    assert rig.lifecycle.tick().evicted == 0  # not idle long enough
    rig.advance(2 * DAY)
    head = rig.store.change_log_head()
    report = rig.lifecycle.tick()
    assert report.evicted == 4  # in batches of two (evict_batch)
    assert rig.side(hot).status == S.READY
    cold = keys[1:]
    for k in cold:
        s = rig.side(k)
        assert s.status == S.NONE and s.cold_ref
        assert rig.store.vector_for_hash("t", s.content_hash, SPACE) is None
        assert rig.store.cold_entry("t", s.content_hash, SPACE) == s.cold_ref
        assert rig.cold.get("t", SPACE, s.content_hash) is not None
    assert {(c.key, c.op) for c in rig.store.changes_since(head)} == {(k, "unvector") for k in cold}
    cov = rig.store.coverage("t", "c", SPACE)
    assert cov["states"]["cold"] == 4 and cov["states"]["ready"] == 1  # type: ignore[index]
    storage = rig.store.storage_report("t")
    assert storage["vectors"] == 1 and storage["cold"] == 4 and storage["coldBytes"] > 0

    rig.embedder.calls.clear()
    rig.run(cold)
    assert rig.embedder.calls == []  # rehydrated: no provider call
    for k in cold:
        s = rig.side(k)
        assert s.status == S.READY and s.cold_ref is None
        again = rig.store.vector_for_hash("t", s.content_hash, SPACE)
        assert again is not None and np.allclose(again, before[k] or [], atol=1e-3)  # float16


def test_evictable_at_counts_the_re_pins_a_hot_document_still_gets(rig: Rig) -> None:
    """`evictableAt` (GET /semantic/status) was the current pin's end, but a document whose
    decayed touches stay at the bar is pinned again at each tick past half its TTL: it stayed
    ready past the announced time, again and again. With ticks every 12 h it is evicted within
    two ticks of the time announced at its last use (a re-pin comes on the first tick after it is
    due), and not before."""
    hot, plain = rig.put("hot"), rig.put("plain")
    rig.embed(hot, plain)
    rig.query(1, 1, touched=[hot] * 100)  # decays to the bar of 3 in ~35 days: one re-pin at day 30
    rig.lifecycle.tick()  # pins it for 60 days
    announced = rig.lifecycle.doc_state(hot, rig.side(hot)).evictable_at
    pinned_now = rig.lifecycle.doc_state(hot, rig.side(hot)).pinned_until
    assert announced is not None and pinned_now is not None
    assert announced == pinned_now + CFG.doc_promote_ttl_seconds / 2  # the re-pin at day 30 adds half the TTL
    assert rig.lifecycle.doc_state(plain, rig.side(plain)).evictable_at == rig.now + CFG.evict_idle_seconds
    step = DAY / 2
    while rig.now + step < announced:
        rig.advance(step)
        rig.lifecycle.tick()
        assert rig.side(hot).status == S.READY, f"evicted {(announced - rig.now) / DAY:.1f} days early"
    for _ in range(3):  # a re-pin lands on the first tick after it is due (one interval late at most)
        rig.advance(step)
        rig.lifecycle.tick()
    assert rig.side(hot).status == S.NONE and rig.side(hot).cold_ref is not None


def test_each_tick_is_recorded_with_what_it_changed_per_tenant(rig: Rig) -> None:
    """GET /semantic/scheduler's record: the last tick, and per tenant the last tick that changed
    something for it and what (a tenant never sees another's)."""
    keys = [rig.put(f"d{i}") for i in range(3)]
    other = DocKey("u", "c", "x")
    rig.store.put_docs([StoredDoc(other, {"body": text("x")}, [PUBLIC_PRINCIPAL], None, "h-x", rig.now)],
                       [SidecarEntry(other, SPACE, S.NONE, "h-x", updated_at=rig.now)])
    rig.embed(*keys, other)
    assert rig.store.last_ticks("t") == (None, None)
    rig.query(1, 0, touched=[keys[0]] * 3)  # pins d0
    first = rig.now
    assert rig.lifecycle.tick().pinned == 1
    assert rig.store.last_ticks("t") == (first, (first, {"pinned": 1}))
    assert rig.store.last_ticks("u") == (first, None)
    rig.advance(CFG.evict_idle_seconds + DAY)  # t's vectors are in a now eager collection: u's go cold
    rig.query(5, 4)  # promotes c of tenant t
    second = rig.now
    report = rig.lifecycle.tick()
    assert report.promoted == ["t/c"] and report.evicted == 1 and "tenants" not in report.body()
    assert rig.store.last_ticks("t") == (second, (second, {"promoted": ["c"]}))
    assert rig.store.last_ticks("u") == (second, (second, {"evicted": 1}))
    rig.advance(3600)
    assert rig.lifecycle.tick().evicted == 0  # nothing changed: only the tick's time moves
    assert rig.store.last_ticks("t") == (second + 3600, (second, {"promoted": ["c"]}))


def test_a_failing_stage_does_not_stop_the_rest_of_the_tick(rig: Rig, monkeypatch: pytest.MonkeyPatch) -> None:
    """One stage that raises (seen: the migration backlog check, a query with a parameter too
    many) stopped promotion, pinning and eviction for every tenant, tick after tick. Now the
    other stages run, and the failed one is logged, counted and recorded for the admin view."""
    keys = [rig.put(f"d{i}") for i in range(2)]
    rig.embed(*keys)
    rig.advance(CFG.evict_idle_seconds + DAY)
    rig.query(5, 4)  # enough for a promotion ...

    def broken(*args: object, **kw: object) -> None:
        raise RuntimeError("the backlog query failed")

    with monkeypatch.context() as m:
        m.setattr(rig.store, "collection_usage", broken)  # ... which the failing stage would decide
        report = rig.lifecycle.tick()
    assert report.failed == ["collections"] and report.promoted == []
    assert report.evicted == 2  # eviction, after it, still ran
    assert rig.store.last_tick_failures() == ["collections"]
    report = rig.lifecycle.tick()
    assert report.failed == [] and report.promoted == ["t/c"]
    assert rig.store.last_tick_failures() == []


def test_a_rehydrated_vector_drops_its_cold_copy_and_goes_cold_again_without_a_provider_call(rig: Rig) -> None:
    a, b = rig.put("a"), rig.put("b")
    rig.embed(a, b)
    rig.advance(CFG.evict_idle_seconds + DAY)
    assert rig.lifecycle.tick().evicted == 2
    ha, hb = rig.side(a).content_hash, rig.side(b).content_hash
    rig.embedder.calls.clear()
    rig.run([a])  # rehydrated: its vector is back, the cold copy only doubles its bytes
    assert rig.side(a).status == S.READY and rig.store.cold_entry("t", ha, SPACE) is not None
    report = rig.lifecycle.tick()
    assert report.dropped_cold_copies == 1 and report.evicted == 0
    assert rig.store.cold_entry("t", ha, SPACE) is None and rig.cold.get("t", SPACE, ha) is None
    assert rig.store.cold_entry("t", hb, SPACE) == rig.side(b).cold_ref  # still cold: kept
    storage = rig.store.storage_report("t")
    assert (storage["vectors"], storage["cold"]) == (1, 1)
    rig.advance(CFG.evict_idle_seconds + DAY)  # idle again: a new cold copy, and back once more
    assert rig.lifecycle.tick().evicted == 1 and rig.cold.get("t", SPACE, ha) is not None
    rig.run([a, b])
    assert rig.embedder.calls == [] and rig.side(a).status == rig.side(b).status == S.READY
    assert rig.lifecycle.tick().dropped_cold_copies == 2
    assert rig.store.storage_report("t")["cold"] == 0


def test_eviction_skips_eager_collections(rig: Rig) -> None:
    a, b = rig.put("a"), rig.put("b", c="eager")
    rig.embed(a, b)
    rig.lifecycle.set_mode("t", "eager", eager=True)
    rig.advance(CFG.evict_idle_seconds + DAY)
    assert rig.lifecycle.tick().evicted == 1
    assert rig.side(a).cold_ref and rig.side(b).status == S.READY


def test_a_document_used_since_is_not_evicted(rig: Rig) -> None:
    a, b = rig.put("a"), rig.put("b")
    rig.embed(a, b)
    rig.advance(CFG.evict_idle_seconds - DAY)
    rig.query(1, 1, page=[a])  # shown on a page
    rig.advance(2 * DAY)
    assert rig.lifecycle.tick().evicted == 1
    assert rig.side(a).status == S.READY and rig.side(b).cold_ref


def test_pruning_after_an_edit(rig: Rig) -> None:
    a, b, c = rig.put("a"), rig.put("b"), rig.put("c")
    rig.embed(a, b, c)
    old_a, old_b = rig.side(a).content_hash, rig.side(b).content_hash
    rig.advance(CFG.evict_idle_seconds + DAY)
    rig.store.set_status([a, c], SPACE, S.STALE)  # keep a and c out of the eviction
    rig.lifecycle.evict(rig.now, tenant="t")
    assert rig.side(b).cold_ref and rig.cold.get("t", SPACE, old_b) is not None
    rig.put("a", body="An edited text about supersonic inlets and shock trains.")
    rig.put("b", body="An edited text about laminar flow control on nacelles.")
    rig.put("d", body=text("c"))  # a new document with c's content keeps c's vector alive
    rig.put("c", body="An edited text about vortex generators on flaps.")
    report = rig.lifecycle.tick()
    assert (report.pruned_vectors, report.pruned_cold) == (1, 1)
    assert rig.store.vector_for_hash("t", old_a, SPACE) is None
    assert rig.store.cold_entry("t", old_b, SPACE) is None and rig.cold.get("t", SPACE, old_b) is None
    assert rig.store.vector_for_hash("t", rig.side(DocKey("t", "c", "d")).content_hash, SPACE) is not None


# -- daily token caps -------------------------------------------------------------------------------------


def test_the_daily_token_cap_defers_and_the_next_day_gives_back(
        opener: Opener, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:  # noqa: F811
    cost = estimate_tokens(text("d0"))
    rig = Rig(opener, tmp_path, monkeypatch, daily_tokens=int(cost * 2.5))
    try:
        keys = [rig.put(f"d{i}") for i in range(4)]
        rig.run(keys[:3])
        assert rig.embedder.calls == [2]  # two fit in the cap; the third is not sent
        assert [rig.side(k).status for k in keys[:3]] == [S.READY, S.READY, S.DEFERRED]
        assert rig.side(keys[2]).reason == "budget"
        assert rig.store.tokens_used("t", utc_day(rig.now)) == 2 * cost
        rig.run([keys[3]])
        assert rig.embedder.calls == [2] and rig.side(keys[3]).status == S.DEFERRED
        cov = rig.store.coverage("t", None, SPACE)
        assert cov["skipped"] == {"budget": 2}  # type: ignore[index]
        assert rig.lifecycle.tick().requeued_budget == 0  # still today
        assert rig.side(keys[2]).status == S.DEFERRED
        rig.advance(DAY)  # the next UTC day
        assert rig.lifecycle.tick().requeued_budget == 2
        assert [rig.side(k).status for k in keys[2:]] == [S.NONE, S.NONE]
        rig.run(keys[2:])
        assert rig.embedder.calls == [2, 2] and all(rig.side(k).status == S.READY for k in keys)
        usage = rig.store.usage_by_day("t", None, 7)
        assert [u["documents"] for u in usage] == [2, 2] and [u["calls"] for u in usage] == [1, 1]
    finally:
        rig.store.close()


def test_a_reindex_asks_budget_refusals_again_and_without_a_cap_they_come_back_at_once(
        opener: Opener, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:  # noqa: F811
    """Refused for the daily cap, documents waited for midnight UTC whatever the operator did: a
    reindex skipped them, and with the cap removed (a restart without it) neither a touch nor a
    reindex embedded them. A reindex now asks again (what still does not fit is deferred again,
    with no provider call), and a scheduler with no cap gives today's refusals back at its tick."""
    cost = estimate_tokens(text("d0"))
    rig = Rig(opener, tmp_path, monkeypatch, daily_tokens=int(cost * 1.5))
    try:
        keys = [rig.put(f"d{i}") for i in range(3)]
        rig.run(keys)
        assert [rig.side(k).status for k in keys] == [S.READY, S.DEFERRED, S.DEFERRED]
        reindex = rig.lifecycle.backfills.start("t", "c", SPACE, "reindex")
        assert rig.lifecycle.backfills.step(reindex) == 2  # asked again ...
        rig.run_queued()
        assert rig.embedder.calls == [1]  # ... and, still over today's cap, refused without a call
        assert [rig.side(k).status for k in keys[1:]] == [S.DEFERRED, S.DEFERRED]
        assert rig.lifecycle.tick().requeued_budget == 0  # capped: they wait for tomorrow
        rig.handler.daily_tokens = 0  # the operator removes the cap and restarts
        rig.lifecycle = rig.build()
        assert rig.lifecycle.tick().requeued_budget == 2  # today's refusals come back at once
        assert [rig.side(k).status for k in keys[1:]] == [S.NONE, S.NONE]
        rig.run(keys[1:])
        assert rig.embedder.calls == [1, 2] and all(rig.side(k).status == S.READY for k in keys)
    finally:
        rig.store.close()


def test_query_embeddings_share_the_cap_and_roll_over_at_midnight_on_the_injected_clock(
        opener: Opener, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:  # noqa: F811
    cost = estimate_tokens(text("d0"))
    query = "boundary layer transition on swept wings"
    cap = 2 * cost + estimate_tokens(query)
    rig = Rig(opener, tmp_path, monkeypatch, daily_tokens=cap)
    reads = UsageRecorder(CFG.bucket_seconds, CFG.half_life_seconds, clock=rig.clock, ledger=rig.store,
                          daily_tokens=cap)
    try:
        assert reads.reserve_query_embedding("t", "c", query) is not None  # a read's query: reserved
        keys = [rig.put(f"d{i}") for i in range(3)]
        rig.run(keys)
        assert [rig.side(k).status for k in keys] == [S.READY, S.READY, S.DEFERRED]
        assert reads.reserve_query_embedding("t", "c", query) is None  # spent: the read answers lexically
        assert reads.reserve_query_embedding("u", "c", query) is not None  # another tenant's own day
        assert rig.store.usage_by_day("t", None, 7) == [
            {"day": "2001-03-04", "calls": 2, "documents": 2, "tokens": cap}]
        rig.advance(3600.0)  # 2001-03-05 00:00 UTC
        assert rig.store.tokens_used("t", "2001-03-05") == 0
        charge = reads.reserve_query_embedding("t", "c", query)
        assert charge is not None and charge.day == "2001-03-05"
        reads.release(charge)  # a failed call gives it back
        assert rig.store.tokens_used("t", "2001-03-05") == 0
        assert rig.lifecycle.tick().requeued_budget == 1  # refused yesterday, given back today
        rig.run([keys[2]])
        assert rig.side(keys[2]).status == S.READY
        assert rig.store.usage_by_day("t", None, 7) == [
            {"day": "2001-03-05", "calls": 1, "documents": 1, "tokens": cost},
            {"day": "2001-03-04", "calls": 2, "documents": 2, "tokens": cap}]
    finally:
        rig.store.close()


# -- reindex and force ------------------------------------------------------------------------------------


def test_reindex_re_decides_denied_and_deferred_docs_against_a_changed_policy(rig: Rig) -> None:
    still = rig.put("s", c="keep", status=S.DENIED, reason="policy:rule0")
    now_ok = rig.put("o", c="open", status=S.DENIED, reason="policy:rule0")
    later = rig.put("l", c="open", status=S.DEFERRED, reason="policy:rule0")
    budget = rig.put("b", c="open", status=S.DEFERRED, reason="budget")
    ready = rig.put("r", c="open")
    rig.embed(ready)
    new = EligibilityPolicy([{"if": {"collection": "^nothing$"}, "then": {"action": "embed"}},
                             {"if": {"collection": "^keep$"}, "then": {"action": "ignore"}}])
    lc = rig.build(policy=new)
    lc.backfills.start("t", None, SPACE, "reindex")
    rig.embedder.calls.clear()
    assert lc.run_backfills() == 3
    jobs = rig.queue.take()
    # a budget refusal is asked again too (the cap may have changed; the handler re-checks it)
    assert sorted(j.key for j in jobs) == sorted([now_ok, later, budget]) and all(not j.fresh for j in jobs)
    s = rig.side(still)
    assert (s.status, s.reason) == (S.DENIED, "policy:rule1")  # re-decided, and no job for it
    assert rig.side(ready).status == S.READY
    assert rig.embedder.calls == []
    rig.handler.run(jobs)
    assert rig.embedder.calls == [3] and rig.side(now_ok).status == S.READY and rig.side(budget).status == S.READY
    (task,) = rig.store.tasks("t")
    assert task.state == "done" and task.examined == 5


def test_force_re_embeds_ready_docs_with_a_provider_call(rig: Rig) -> None:
    a, b = rig.put("a"), rig.put("b")
    rig.embed(a, b)
    first = rig.side(a).last_embedded_at
    rig.embedder.calls.clear()
    lc = rig.build()
    lc.backfills.start("t", "c", SPACE, "reindex")
    assert lc.run_backfills() == 0  # without force, ready documents stay
    lc.backfills.start("t", "c", SPACE, "reindex", force=True)
    assert lc.run_backfills() == 2
    jobs = rig.run_queued()
    assert all(j.fresh for j in jobs)
    assert rig.embedder.calls == [2]  # a provider call even though the vectors are stored
    assert all(rig.side(k).status == S.READY for k in (a, b))
    assert (rig.side(a).last_embedded_at or 0) >= (first or 0)



# -- races the handler and the scheduler once had (daily cap between workers, a lost eviction's cold file) --------


def test_two_workers_together_stay_within_the_daily_cap(
        opener: Opener, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:  # noqa: F811
    cost = estimate_tokens(text("d0"))
    rig = Rig(opener, tmp_path, monkeypatch, daily_tokens=int(cost * 1.5))
    try:
        a, b = rig.put("d0"), rig.put("d1")
        other = EmbedHandler(rig.store, CountingEmbedder(), EligibilityPolicy([]), {}, max_attempts=3,
                             cold=rig.cold, daily_tokens=rig.handler.daily_tokens, clock=rig.clock)
        inner = rig.embedder.embed

        def interleaved(texts: Sequence[str]) -> list[list[float]]:
            other.run([EmbedJob(b, SPACE, rig.side(b).content_hash)])  # the second worker, meanwhile
            return inner(texts)

        monkeypatch.setattr(rig.embedder, "embed", interleaved)
        rig.run([a])
        assert rig.store.tokens_used("t", utc_day(rig.now)) <= rig.handler.daily_tokens
    finally:
        rig.store.close()


def test_a_lost_eviction_leaves_no_cold_file(rig: Rig, monkeypatch: pytest.MonkeyPatch) -> None:
    a = rig.put("a")
    rig.embed(a)
    old = rig.side(a).content_hash
    rig.advance(CFG.evict_idle_seconds + DAY)
    real_put = rig.cold.put

    def put_then_edit(tenant: str, space: str, content_hash: str, vector: Sequence[float]) -> tuple[str, int]:
        out = real_put(tenant, space, content_hash, vector)
        rig.put("a", body="An edit that lands while the eviction runs, about transonic buffet.")
        return out

    monkeypatch.setattr(rig.cold, "put", put_then_edit)
    assert rig.lifecycle.tick().evicted == 0
    rig.lifecycle.tick()  # prunes what no document uses
    assert rig.cold.get("t", SPACE, old) is None


# -- retired spaces (model rollback) ---------------------------------------------------------------------


def _retire(rig: Rig) -> None:
    rig.store.put_tenant_space(SpaceInfo("t", SPACE, rig.embedder.model_id, rig.embedder.dim, "retired", rig.now,
                                         retired_at=rig.now))


def test_a_retired_space_goes_cold_and_comes_back_without_a_provider_call_for_unchanged_content(rig: Rig) -> None:
    keys = [rig.put(f"d{i}") for i in range(5)]
    rig.embed(*keys)
    late = rig.put("late", status=S.QUEUED)  # a job in flight when the space is retired
    _retire(rig)
    head = rig.store.change_log_head()
    assert rig.lifecycle.retire_space("t", SPACE, rig.now) == 5  # in batches of two (evict_batch)
    assert {(c.key, c.op) for c in rig.store.changes_since(head)} == {(k, "unvector") for k in keys}
    for k in keys:
        s = rig.side(k)
        assert s.status == S.NONE and s.cold_ref and rig.store.vector_for_hash("t", s.content_hash, SPACE) is None
    assert rig.store.cold_by_space("t")[SPACE][0] == 5
    rig.run([late])  # the late job lands in the retired space...
    assert rig.side(late).status == S.READY
    assert rig.lifecycle.tick().retired_cooled == 1  # ...and the next tick moves it to the cold store too
    assert rig.side(late).cold_ref

    # an edited document loses its cold vector at the write (its row takes the new hash), a new
    # one gets a row at the re-activation
    edited = StoredDoc(keys[0], {"body": "An edited text about shock trains."}, [PUBLIC_PRINCIPAL], None, "h-new",
                       rig.now)
    rig.store.put_docs([edited], [])  # a retired space is not planned by a write
    assert (rig.side(keys[0]).status, rig.side(keys[0]).content_hash, rig.side(keys[0]).cold_ref) == \
        (S.STALE, "h-new", None)
    new = DocKey("t", "c", "new")
    rig.store.put_docs([StoredDoc(new, {"body": text("new")}, [PUBLIC_PRINCIPAL], None, "h-newdoc", rig.now)], [])
    assert rig.store.sidecar(new, SPACE) is None
    rig.store.put_tenant_space(SpaceInfo("t", SPACE, rig.embedder.model_id, rig.embedder.dim, "active", rig.now))
    assert rig.store.realign_space("t", SPACE, rig.now) == 1
    assert (rig.side(keys[0]).status, rig.side(keys[0]).content_hash, rig.side(keys[0]).cold_ref) == \
        (S.STALE, "h-new", None)
    assert rig.side(new).status == S.NONE
    rig.embedder.calls.clear()
    rig.run([*keys, late, new])
    assert rig.embedder.calls == [2]  # one batch: the edited and the new document only
    assert all(rig.side(k).status == S.READY for k in [*keys, late, new])


def test_a_retired_space_is_pruned_after_its_retention_and_kept_with_no_retention(rig: Rig) -> None:
    keys = [rig.put(f"d{i}") for i in range(3)]
    rig.embed(*keys)
    hashes = [rig.side(k).content_hash for k in keys]
    _retire(rig)
    retired = rig.now
    rig.lifecycle.retire_space("t", SPACE, rig.now)
    forever = Lifecycle(replace(CFG, retired_retention_seconds=0), rig.store, rig.cold, rig.lifecycle.backfills,
                        clock=rig.clock)
    rig.advance(CFG.retired_retention_seconds - 1)
    assert rig.lifecycle.tick().retired_expired == []
    assert all(rig.cold.get("t", SPACE, h) is not None for h in hashes)  # its documents still use them
    rig.advance(2)
    assert forever.tick().retired_expired == []  # 0: kept until re-activated
    assert rig.lifecycle.retention_until(retired) == retired + CFG.retired_retention_seconds
    assert forever.retention_until(retired) is None
    assert rig.lifecycle.tick().retired_expired == ["t/core"]
    assert all(rig.cold.get("t", SPACE, h) is None for h in hashes)
    assert rig.store.cold_by_space("t") == {} and rig.store.tenant_spaces("t") == []
    assert rig.store.sidecar(keys[0], SPACE) is None
