"""`VIBE_SCHEDULER_ENABLED=false` keeps a process from deciding, not from working: its scheduler
thread still runs the steps of a reindex it did not decide on (until 2026-11 the whole thread
stopped, and a reindex stalled after its first step of `VIBE_BACKFILL_STEP_DOCS`), still flushes
usage statistics, and never promotes however hot a collection is."""

from __future__ import annotations

import time
from collections.abc import Callable
from pathlib import Path

import pytest

from services.planner.planner import ReadRequest
from services.wiring import Container, build
from shared.config import Settings
from shared.model import DocKey, Principal, SemanticStatus

USER = Principal("t", ("user:u",), frozenset({"read", "write", "admin"}))
DOCS = 12
STEP = 3  # a reindex of 12 documents needs four steps, three of them on the thread


def wait_for(check: Callable[[], bool], what: str, seconds: float = 30.0) -> None:
    deadline = time.monotonic() + seconds
    while not check():
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.02)


def container(tmp_path: Path, enabled: bool) -> Container:
    return build(Settings(data_dir=tmp_path / "data", embedder="hash", embed_dim=32, workers=1,
                          scheduler_enabled=enabled, scheduler_interval_seconds=0.05,
                          backfill_interval_seconds=0.05, usage_flush_seconds=0.05, backfill_step_docs=STEP,
                          promote_min_queries=1, promote_min_hits=0, per_tenant_per_min=100_000))


@pytest.mark.parametrize("enabled", [False, True])
def test_a_process_that_does_not_decide_still_runs_backfills_and_flushes(tmp_path: Path, enabled: bool) -> None:
    c = container(tmp_path, enabled)
    c.start()
    try:
        docs = [c.docs.parse(USER, "c", f"d{i}", {"title": f"Doc {i}", "body": f"wing flutter case {i}"})
                for i in range(DOCS)]
        assert c.docs.put(docs) == ["created"] * DOCS
        keys = [DocKey("t", "c", f"d{i}") for i in range(DOCS)]
        backfills = c.lifecycle.backfills
        task = backfills.start("t", "c", "core", "reindex")
        backfills.step(task)  # what POST /semantic/reindex runs in the request
        c.scheduler.wake()

        def ready() -> int:
            return sum(s.status == SemanticStatus.READY for s in c.store.sidecars(keys, "core").values())

        wait_for(lambda: ready() == DOCS, "the reindex to finish on the scheduler thread")
        for _ in range(3):  # hot enough for promotion at once (one query, no hits needed)
            c.planner.open(USER, ReadRequest("c", "flutter", "keyword", limit=5)).finish()
        wait_for(lambda: c.store.collection_usage(0.0) != [], "the usage statistics to be flushed")
        if enabled:
            wait_for(lambda: any(m.mode == "eager" for m in c.store.collection_modes()), "a promotion")
        else:
            time.sleep(0.5)  # ten scheduler intervals: a deciding process would have promoted by now
            assert [m for m in c.store.collection_modes() if m.mode == "eager"] == []
    finally:
        c.stop()
