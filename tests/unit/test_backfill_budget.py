"""What backfills take from the tenant's per-minute bucket. They leave reads most of it
(services/wiring/lifecycle.py `backfill_reserve`) and still get the whole refill rate while reads are idle;
restoring an evicted vector from the cold store takes nothing (no provider call).

Found by running the distributed profile: with a promotion backfill of one collection running,
the bucket sat at one query's ceiling (50 of 200), and a burst of 15 queries on another
collection embedded 42 documents where it embedded 112 without the backfill."""

from __future__ import annotations

from pathlib import Path

import pytest

from services.core.backfill import BackfillLimits, Backfills
from services.wiring import backfill_reserve
from shared.config import Settings
from shared.model import SemanticStatus as S
from tests.contract.test_store_contract import Opener, opener  # noqa: F401 - fixture
from tests.unit.test_lifecycle_scheduler import CFG, DAY, SPACE, Rig


def test_the_reserve_follows_the_bucket_and_the_backfill_cadence() -> None:
    assert backfill_reserve(Settings(per_tenant_per_min=200)) == 150
    assert backfill_reserve(Settings(per_tenant_per_min=20)) == 15
    # A slow cadence: between two steps the bucket refills 100 of 200; a reserve above 100
    # would let it overflow, and the backfill would lose rate with reads idle.
    assert backfill_reserve(Settings(per_tenant_per_min=200, backfill_interval_seconds=30)) == 100
    assert backfill_reserve(Settings(per_tenant_per_min=200, backfill_read_share=0)) == 50
    assert backfill_reserve(Settings(per_tenant_per_min=0)) == 0


def test_reads_keep_their_share_while_the_backfill_keeps_its_rate(opener: Opener, tmp_path: Path,  # noqa: F811
                                                                    monkeypatch: pytest.MonkeyPatch) -> None:
    settings = Settings(per_tenant_per_min=200)
    rig = Rig(opener, tmp_path, monkeypatch, per_minute=200)
    try:
        for i in range(400):
            rig.put(f"d{i}")
        backfills = Backfills(rig.store, rig.queue, rig.budget, lambda d: rig.policy.decide_doc(d, None),
                              BackfillLimits(2000, backfill_reserve(settings), 1000), rig.clock)
        backfills.start("t", "c", SPACE, "reindex")
        first = backfills.run()
        assert first > 0
        assert rig.budget.available("t") >= 150, "a backfill step left reads less than their share"
        # A burst of reads now finds its share...
        assert rig.budget.take("t", 120) == 120
        # ... and with reads idle, the backfill takes the refill as it comes: a minute of 2 s
        # steps queues about a minute's worth (200), less what the burst took from the top.
        queued = 0
        for _ in range(30):
            rig.mono[0] += 2.0
            queued += backfills.run()
        assert queued >= 200 - 120 - 10, queued
        assert rig.budget.available("t") >= 150 - 10
        # Over the next minute, with reads idle, the whole refill rate.
        later = 0
        for _ in range(30):
            rig.mono[0] += 2.0
            later += backfills.run()
        assert 190 <= later <= 200, later
    finally:
        rig.store.close()


@pytest.mark.parametrize("force", [False, True])
def test_restoring_evicted_vectors_takes_nothing_from_the_bucket(opener: Opener, tmp_path: Path,  # noqa: F811
                                                                 monkeypatch: pytest.MonkeyPatch, force: bool) -> None:
    """A backfill over evicted documents (a model rollback's `rehydrate`, a reindex, a migration
    meeting the building space's cold vectors) restores them with no provider call, so it is not
    paced by the bucket: with the bucket empty, every evicted document is queued at once and the
    cursor stops at the first one that needs the provider. A forced task re-embeds: paced."""
    rig = Rig(opener, tmp_path, monkeypatch, per_minute=2)
    try:
        cold = [rig.put(f"d{i}") for i in range(5)]
        rig.embed(*cold)
        never = rig.put("e0")  # never embedded: needs the provider
        rig.advance(CFG.evict_idle_seconds + DAY)
        while rig.lifecycle.tick().evicted:
            pass
        assert all(rig.side(k).status == S.NONE and rig.side(k).cold_ref for k in cold)
        assert rig.budget.take("t", 2) == 2  # reads spent the bucket
        backfills = Backfills(rig.store, rig.queue, rig.budget, lambda d: rig.policy.decide_doc(d, None),
                              BackfillLimits(2000, 0, 1000), rig.clock)
        task = backfills.start("t", "c", SPACE, "reindex", force=force)
        backfills.run()
        queued = {j.key for j in rig.queue.take()}
        if force:
            assert queued == set()
            return
        assert queued == set(cold)
        assert never not in queued
        (now,) = [t for t in rig.store.tasks("t") if t.id == task.id]
        assert now.state == "running" and now.examined == len(cold)  # resumes at `never`
        rig.embedder.calls.clear()
        rig.run(cold)
        assert rig.embedder.calls == []
        assert all(rig.side(k).status == S.READY for k in cold)
    finally:
        rig.store.close()
