"""A write made during a migration that the per-minute bucket did not grant for the new space
(the migration's own steps keep the bucket near empty) still reaches the new space: the
migration's cursor may be past the document and its task done, so the scheduler's tick starts
the migration again (services/worker/lifecycle.py `_migration_backlog`). Before, activation
answered "1 documents still to embed" for good, and only `force` cut over."""

from __future__ import annotations

import types
from pathlib import Path

import pytest

from services.api.routes_lifecycle import activate, start_migration
from services.wiring import build
from shared.adapters import memory_budget
from shared.config import Settings
from shared.errors import VibeError
from shared.model import DocKey, Principal, SemanticStatus
from tests.unit.test_scheduler_switch import wait_for

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
