"""A write made during a migration that the per-minute bucket did not grant for the new space
(the migration's own steps keep the bucket near empty) still reaches the new space: the
migration's cursor may be past the document and its task done, so the scheduler's tick starts
the migration again (services/core/lifecycle/collection_modes.py `_migration_backlog`). Before, activation
answered "1 documents still to embed" for good, and only `force` cut over."""

from __future__ import annotations

import types
from dataclasses import replace
from pathlib import Path

import pytest

from services.api.spaces import activate, start_migration
from services.wiring import build
from shared.adapters import memory_budget
from shared.config import Settings
from shared.errors import VibeError
from shared.model import DocKey, Principal, SemanticStatus
from tests.unit.test_scheduler_switch import embed_now, running, wait_for
from tests.unit.test_scheduler_switch import ready as is_ready

USER = Principal("t", ("user:u",), frozenset({"read", "write", "admin"}))


def test_a_write_the_bucket_refused_during_a_migration_still_reaches_the_new_space(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    mono = [0.0]  # the bucket's clock: it refills only when the test says so
    monkeypatch.setattr(memory_budget, "time", types.SimpleNamespace(monotonic=lambda: mono[0]))
    c = build(Settings(data_dir=tmp_path / "data", embedder="hash", embed_dim=32, workers=1,
                       scheduler_interval_seconds=3600, per_tenant_per_min=60))
    c.scheduler_thread = False  # the test runs every step
    c.start()
    try:
        c.docs.put([c.docs.parse(USER, "c", f"d{i}", {"title": f"Doc {i}", "body": f"wing flutter case {i}"})
                    for i in range(5)])
        keys = [DocKey("t", "c", f"d{i}") for i in range(5)]
        assert start_migration(c, "t", "v2", "hash:v1@16", None)["state"] == "building"

        def ready(*ks: DocKey) -> bool:
            return all(s.status == SemanticStatus.READY for s in c.store.sidecars(list(ks), "v2").values())

        wait_for(lambda: ready(*keys), "the migration's documents")
        assert [(t.kind, t.state) for t in c.store.tasks("t")] == [("migrate", "done")]
        c.planner.budget.take("t", 10_000)  # the bucket is spent, as a busy migration keeps it
        late = DocKey("t", "c", "a-late")  # written after the migration passed its place
        c.docs.put([c.docs.parse(USER, "c", "a-late", {"title": "Late", "body": "written during the migration"})])
        side = c.store.sidecar(late, "v2")
        assert side is not None and side.status == SemanticStatus.NONE  # the bucket did not grant it
        with pytest.raises(VibeError, match="1 documents still to embed"):
            activate(c, "t", "v2", False)

        assert c.lifecycle.tick().backfills_started == 1  # the migration again, for what it missed
        mono[0] += 60.0  # the bucket refills
        assert c.lifecycle.run_backfills() == 1
        wait_for(lambda: ready(late), "the late document in the new space")
        c.lifecycle.run_backfills()  # the task ends
        assert activate(c, "t", "v2", False)["state"] == "active"
        assert c.lifecycle.tick().backfills_started == 0  # nothing left to build
    finally:
        c.stop()


def test_a_migration_of_what_is_ready_takes_up_what_reads_embed_meanwhile(tmp_path: Path) -> None:
    """Scope `ready`: the tick's backlog check counts only what the scope takes (documents ready
    in the active space, eager collections), so the migration is not started again for the
    never-embedded rest; a document a read embeds in the active space during the migration joins
    it at the next tick."""
    with running(tmp_path) as c:
        c.docs.put([c.docs.parse(USER, "c", f"d{i}", {"title": f"Doc {i}", "body": f"wing flutter case {i}"})
                    for i in range(6)]
                   + [c.docs.parse(USER, "e", "e0", {"title": "Eager", "body": "an eager collection embeds it all"})])
        keys = [DocKey("t", "c", f"d{i}") for i in range(6)]

        def ready(space: str, *ks: DocKey) -> bool:
            return is_ready(c, space, *ks)

        embed_now(c, "core", keys[0], keys[1])  # as a read's touch does, in the active space
        c.lifecycle.set_mode("t", "e", True)  # an eager collection: all of it is in scope
        out = start_migration(c, "t", "v2", "hash:v1@16", None, scope="ready")
        assert out["scope"] == "ready"
        wait_for(lambda: ready("v2", keys[0], keys[1], DocKey("t", "e", "e0")), "the scope in the new space")
        c.lifecycle.run_backfills()  # the task ends
        assert c.store.sidecar(keys[2], "v2") is not None and not ready("v2", keys[2])
        def migrations() -> int:
            return sum(1 for t in c.store.tasks("t") if t.kind == "migrate")

        c.lifecycle.tick()
        assert migrations() == 1  # the never-embedded rest is not its work: not started again

        embed_now(c, "core", keys[3])  # a read during the migration
        with pytest.raises(VibeError, match="1 documents still to embed"):
            activate(c, "t", "v2", False)
        c.lifecycle.tick()
        assert migrations() == 2
        c.lifecycle.run_backfills()
        wait_for(lambda: ready("v2", keys[3]), "the newly ready document in the new space")
        c.lifecycle.run_backfills()
        assert activate(c, "t", "v2", False)["state"] == "active"
        assert [s.status for s in c.store.sidecars(keys[4:], "v2").values()] == [SemanticStatus.NONE] * 2


def test_a_migration_left_running_by_a_crash_at_its_cut_over_stops(tmp_path: Path) -> None:
    """Activation commits the cut-over, then cancels the migration's task: a process killed in
    between left the task running on what had become the active space, and after a forced
    activation its next steps embedded the whole lazy corpus. A step now cancels a migration
    whose space is no longer being built."""
    with running(tmp_path, backfill_step_docs=3) as c:
        c.docs.put([c.docs.parse(USER, "c", f"d{i}", {"title": f"Doc {i}", "body": f"wing flutter case {i}"})
                    for i in range(9)])
        start_migration(c, "t", "v2", "hash:v1@16", None)
        (task,) = c.store.tasks("t", running_only=True)
        assert task.examined == 3
        rows = {r.space: r for r in c.store.tenant_spaces("t")}
        # the cut-over as activation commits it, and the crash before its tasks are cancelled
        assert c.store.switch_space(replace(rows["v2"], state="active", activated_at=1.0), "building",
                                    replace(rows["core"], state="retired"), c.store.clock(), fill_rows=True) == 6
        assert c.lifecycle.run_backfills() == 0  # the restarted scheduler's step
        (after,) = c.store.tasks("t")
        assert (after.state, after.examined) == ("cancelled", 3)
        states = c.store.coverage("t", None, "v2")["states"]
        assert isinstance(states, dict) and states["none"] == 6  # left to their first touch
