"""A backfill's first step, run by the API call that starts it (`POST /semantic/reindex`,
`/promote`, `/spaces`), holds the lease every backfill step holds. Run beside the scheduler's
step of the same task, both read one cursor and the later write of the task's counters lost the
other's (seen in the distributed profile: a reindex answered `queued: 150` and then showed
`queued: 0`), and both took the per-minute bucket for the same documents."""

from __future__ import annotations

from pathlib import Path

from services.api.backfills import _start_backfill
from services.core.lifecycle.base import LEASE
from services.wiring import build
from shared.config import Settings
from shared.model import Principal
from tests.unit.test_scheduler_switch import wait_for

USER = Principal("t", ("user:u",), frozenset({"read", "write", "admin"}))


def test_the_first_step_waits_for_a_step_in_progress_elsewhere(tmp_path: Path) -> None:
    c = build(Settings(data_dir=tmp_path / "data", embedder="hash", embed_dim=32, workers=1,
                       scheduler_interval_seconds=3600))
    c.scheduler_thread = False  # the test runs every step
    c.start()
    try:
        c.docs.put([c.docs.parse(USER, "c", f"d{i}", {"title": f"Doc {i}", "body": f"wing flutter case {i}"})
                    for i in range(6)])
        with c.store.lease(f"{LEASE}:backfill") as held:  # another process is stepping backfills
            assert held
            out = _start_backfill(c, "t", "c", "reindex", False)
        task = out["task"]
        assert isinstance(task, dict)
        assert (out["queued"], task["examined"], task["state"]) == (0, 0, "running")  # left to that process
        assert c.lifecycle.run_backfills() == 6  # the scheduler's next run steps it, once
        wait_for(lambda: c.store.coverage("t", "c", "core")["ready"] == 6, "the reindex's documents")
        c.lifecycle.run_backfills()
        (done,) = c.store.tasks("t")
        assert (done.state, done.examined, done.queued) == ("done", 6, 6)
        # with the lease free the first step runs at once, as before
        again = _start_backfill(c, "t", "c", "reindex", True)
        assert again["queued"] == 6
    finally:
        c.stop()
