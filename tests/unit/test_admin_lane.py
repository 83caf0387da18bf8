"""The admin lane (services/core/admin_lane.py): a backfill into a space whose model bills nothing
is not charged to the per-minute bucket and is paced by the queue instead; a paid provider's
backfill is charged as before; the daily token cap still refuses; the workers take the
interactive lane before the bulk lane's backlog; the progress view's rate and ETA.

Over a real store (SQLite and PostgreSQL), the real embed handler and the in-memory budget with
a simulated monotonic clock (tests/unit/test_lifecycle_scheduler.py `Rig`): every figure is a
count, none a duration."""

from __future__ import annotations

import threading
from collections.abc import Sequence
from dataclasses import replace
from pathlib import Path
from typing import cast

import pytest

from services.core.admin_lane import AdminLane, billed
from services.core.backfill import BackfillLimits, Backfills, progress
from services.core.backfill_rate import BackfillRates
from services.core.lifecycle import Lifecycle
from services.core.usage import UsageRecorder
from services.worker.scheduler import SchedulerThread
from shared.adapters.memory_queue import InProcessQueue
from shared.costs import utc_day
from shared.model import BackfillTask, DocKey, EmbedJob
from shared.model import SemanticStatus as S
from shared.ports import StoreOfRecord
from tests.contract.test_store_contract import Opener, opener  # noqa: F401 - fixture
from tests.unit.test_lifecycle_scheduler import SPACE, RecordingQueue, Rig

LOCAL, PAID = "local:all-MiniLM-L6-v2", "openai:text-embedding-3-small"


class DepthQueue(RecordingQueue):
    """A recording queue whose bulk depth is what it holds (what an admin-lane step reads)."""

    def depth(self, tenant: str | None = None) -> dict[str, int]:
        return {"bulk": sum(1 for j in self.jobs if tenant in (None, j.key.tenant)), "interactive": 0}


def _backfills(rig: Rig, model: str, ahead: int = 512, enabled: bool = True, reserve: int = 0) -> Backfills:
    rig.store.bind_space(SPACE, model, 64)
    return Backfills(rig.store, rig.queue, rig.budget, lambda d: rig.policy.decide_doc(d, None),
                     BackfillLimits(step_docs=2000, reserve=reserve, backpressure=100_000), rig.clock,
                     AdminLane(rig.store, SPACE, enabled, ahead))


def test_which_models_bill() -> None:
    assert not billed(LOCAL) and not billed("hash:v1@64")
    assert billed(PAID) and billed(None) and billed("something-else")


def test_a_local_model_reindex_skips_the_bucket_and_keeps_the_queue_ahead_bound(
        opener: Opener, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:  # noqa: F811
    rig = Rig(opener, tmp_path, monkeypatch, per_minute=10)
    rig.queue = DepthQueue()
    try:
        keys = [rig.put(f"d{i:03}") for i in range(300)]
        backfills = _backfills(rig, LOCAL, ahead=120)
        task = backfills.start("t", "c", SPACE, "reindex")
        assert backfills.run() == 120  # the bucket (10) does not bound it; the lane's depth does
        assert rig.budget.available("t") == 10, "an unmetered step took from the reads' bucket"
        assert backfills.run() == 0  # the lane is full: nothing more until the workers drain it
        rig.run_queued()
        assert backfills.run() == 120
        rig.run_queued()
        assert backfills.run() == 60
        rig.run_queued()
        backfills.run()
        (done,) = [t for t in rig.store.tasks("t") if t.id == task.id]
        assert (done.state, done.examined, done.queued) == ("done", 300, 300)
        assert all(rig.side(k).status == S.READY for k in keys)
        assert rig.budget.available("t") == 10
        assert rig.embedder.inputs == 300
    finally:
        rig.store.close()


@pytest.mark.parametrize(("model", "enabled"), [(PAID, True), (LOCAL, False)])
def test_a_paid_provider_or_the_lane_turned_off_stays_on_the_bucket(
        opener: Opener, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, model: str,  # noqa: F811
        enabled: bool) -> None:
    rig = Rig(opener, tmp_path, monkeypatch, per_minute=10)
    try:
        for i in range(300):
            rig.put(f"d{i:03}")
        backfills = _backfills(rig, model, enabled=enabled, reserve=4)
        backfills.start("t", "c", SPACE, "reindex")
        assert backfills.run() == 6  # the bucket above the reads' reserve
        assert rig.budget.available("t") == 4
        assert backfills.run() == 0
        rig.mono[0] += 60.0  # a minute refills the bucket: six more, never more
        assert backfills.run() == 6
    finally:
        rig.store.close()


def test_a_space_without_a_known_model_is_metered(opener: Opener, tmp_path: Path,  # noqa: F811
                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    rig = Rig(opener, tmp_path, monkeypatch, per_minute=10)
    try:
        for i in range(50):
            rig.put(f"d{i:03}")
        backfills = _backfills(rig, LOCAL)
        task = backfills.start("t", "c", "elsewhere", "reindex")  # no binding for the tenant's space
        assert backfills.lane is not None and not backfills.lane.unmetered(task)
    finally:
        rig.store.close()


def test_the_daily_token_cap_still_refuses_an_unmetered_reindex(
        opener: Opener, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:  # noqa: F811
    rig = Rig(opener, tmp_path, monkeypatch, per_minute=10, daily_tokens=100)
    try:
        keys = [rig.put(f"d{i:03}") for i in range(40)]
        backfills = _backfills(rig, LOCAL)
        backfills.start("t", "c", SPACE, "reindex")
        assert backfills.run() == 40
        rig.run_queued()
        ready = [k for k in keys if rig.side(k).status == S.READY]
        refused = [k for k in keys if rig.side(k).status == S.DEFERRED and rig.side(k).reason == "budget"]
        assert 0 < len(ready) < 40 and len(ready) + len(refused) == 40
        assert 0 < rig.store.tokens_used("t", utc_day(rig.now)) <= 100
    finally:
        rig.store.close()


def test_the_interactive_lane_is_served_before_the_bulk_backlog() -> None:
    """One worker busy with a bulk batch; a touch's job arrives behind 900 bulk jobs: the next
    batch the worker takes is the touch's, and only one bulk batch ran before it."""
    order: list[str] = []
    started, release = threading.Event(), threading.Event()
    done = threading.Event()

    class Out:
        def __init__(self) -> None:
            self.changed: list[DocKey] = []
            self.retry: list[EmbedJob] = []
            self.retry_after: float | None = None

    def run(batch: Sequence[EmbedJob]) -> Out:
        order.append(f"{batch[0].priority}:{len(batch)}")
        if not started.is_set():
            started.set()
            release.wait(30)
        if batch[0].priority == "interactive":
            done.set()
        return Out()

    q = InProcessQueue(run, workers=1, batch_size=32, bulk_batch_size=64)
    bulk = [EmbedJob(DocKey("t", "c", f"b{i}"), SPACE, f"h{i}", priority="bulk") for i in range(964)]
    q.enqueue(bulk)
    q.start()
    try:
        assert started.wait(30)
        q.enqueue([EmbedJob(DocKey("t", "o", "touched"), SPACE, "h", priority="interactive")])
        assert q.depth()["bulk"] == 900
        release.set()
        assert done.wait(30)
        assert order[:2] == ["bulk:64", "interactive:1"]
    finally:
        release.set()
        q.stop()


def test_progress_reports_a_rate_and_an_eta_that_follow_the_steps(
        opener: Opener, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:  # noqa: F811
    rig = Rig(opener, tmp_path, monkeypatch, per_minute=10)
    rig.queue = DepthQueue()
    try:
        for i in range(300):
            rig.put(f"d{i:03}")
        backfills = _backfills(rig, LOCAL, ahead=50)
        task = backfills.start("t", "c", SPACE, "reindex")
        first = progress(task)
        assert first["docsPerSecond"] is None and first["etaSeconds"] is None  # nothing measured yet
        seen = []
        for _ in range(7):
            rig.advance(5.0)
            backfills.run()
            rig.run_queued()
            (now,) = [t for t in rig.store.tasks("t") if t.id == task.id]
            seen.append(progress(now))
        running = [p for p in seen if p["state"] == "running"]
        assert len(running) >= 4
        for p in running:
            assert p["docsPerSecond"] == pytest.approx(10.0)  # 50 documents every 5 simulated seconds
            assert p["etaSeconds"] == pytest.approx((300 - p["examined"]) / 10.0)  # type: ignore[operator]
        pcts = [p["progressPct"] for p in seen]
        etas = [p["etaSeconds"] for p in seen]
        assert pcts == sorted(pcts) and etas == sorted(etas, reverse=True)  # type: ignore[type-var]
        assert seen[-1]["state"] == "done" and seen[-1]["etaSeconds"] == 0.0
    finally:
        rig.store.close()


def test_the_rate_is_the_recent_window_not_the_average_since_the_start() -> None:
    rates = BackfillRates(window=60.0)
    t = BackfillTask("x", "t", None, SPACE, "reindex", False, "", 0, 0, 10_000, "running", 0.0, 0.0)
    for at, examined in [(100.0, 100), (200.0, 200), (230.0, 1700), (260.0, 3200)]:
        rates.observe(replace(t, examined=examined, updated_at=at))
    # the window keeps the sample at its start (200 s) and after: 3,000 documents in 60 s
    assert rates.rate(replace(t, examined=3200, updated_at=260.0)) == pytest.approx(50.0)
    fresh = BackfillRates()
    assert fresh.rate(replace(t, examined=600, updated_at=60.0)) == pytest.approx(10.0)  # the average


def test_a_backfill_that_queued_is_stepped_again_when_its_lane_runs_low() -> None:
    """The serving process's scheduler thread steps backfills every interval; after a step that
    queued a lane's worth (`low` or more), a batch finishing with the bulk lane down to `low` wakes
    the next step at once."""
    queued = [300]

    class Life:
        def run_backfills(self) -> int:
            return queued[0]

    thread = SchedulerThread(cast(Lifecycle, Life()), cast(UsageRecorder, None), cast(StoreOfRecord, None),
                             decide=False, interval=3600, backfill_interval=3600, flush_interval=3600)
    depth = [300]
    after_batch = thread.drain_wake(lambda: depth[0], low=256)
    after_batch([])
    assert not thread._wake.is_set()  # no step has queued yet
    thread._backfill()
    after_batch([])
    assert not thread._wake.is_set()  # the lane is still deep
    depth[0] = 200
    after_batch([])
    assert thread._wake.is_set()
    thread._wake.clear()
    for trickle in (40, 0):  # a step on the bucket's trickle, or with nothing left: the interval paces it
        queued[0] = trickle
        thread._backfill()
        after_batch([])
        assert not thread._wake.is_set()
