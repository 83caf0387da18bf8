"""`VIBE_SCHEDULER_ENABLED=false` keeps a process from deciding, not from working: its scheduler
thread still runs the steps of a reindex it did not decide on (until 2026-11 the whole thread
stopped, and a reindex stalled after its first step of `VIBE_BACKFILL_STEP_DOCS`), still flushes
usage statistics, and never promotes however hot a collection is."""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any, cast

import pytest

from services.planner.planner import ReadRequest
from services.wiring import Container, build
from services.worker.scheduler import SchedulerThread
from shared.config import Settings
from shared.model import DocKey, EmbedJob, Principal, SemanticStatus
from shared.ports import Embedder

USER = Principal("t", ("user:u",), frozenset({"read", "write", "admin"}))
DOCS = 12
STEP = 3  # a reindex of 12 documents needs four steps, three of them on the thread


def wait_for(check: Callable[[], bool], what: str, seconds: float = 30.0) -> None:
    deadline = time.monotonic() + seconds
    while not check():
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.02)


@contextmanager
def running(tmp_path: Path, embedder: Embedder | None = None, **settings: Any) -> Iterator[Container]:
    """An embedded container over the hash embedder whose test runs every scheduler step itself."""
    c = build(Settings(data_dir=tmp_path / "data", embedder="hash", embed_dim=32, workers=1,
                       scheduler_interval_seconds=3600, **settings), embedder)
    c.scheduler_thread = False
    c.start()
    try:
        yield c
    finally:
        c.stop()


def ready(c: Container, space: str, *keys: DocKey) -> bool:
    """Whether every one of `keys` has a ready vector in `space`."""
    sides = c.store.sidecars(list(keys), space)
    return len(sides) == len(set(keys)) and all(s.status == SemanticStatus.READY for s in sides.values())


def embed_now(c: Container, space: str, *keys: DocKey, wait: bool = True) -> None:
    """Queue `keys` in `space` as a read's touch does, and wait until they are ready."""
    sides = c.store.sidecars(list(keys), space)
    c.store.set_status(list(keys), space, SemanticStatus.QUEUED)
    c.queue.enqueue([EmbedJob(k, space, sides[k].content_hash) for k in keys])
    if wait:
        wait_for(lambda: ready(c, space, *keys), f"{len(keys)} documents embedded in {space}")


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


class Calls:
    """Stands in for the lifecycle, the usage recorder and the store: counts what the thread runs."""

    def __init__(self) -> None:
        self.n = {"flush": 0, "backfill": 0, "tick": 0}

    def flush(self, store: object) -> None:
        self.n["flush"] += 1

    def run_backfills(self) -> int:
        self.n["backfill"] += 1
        return 0

    def tick(self) -> None:
        self.n["tick"] += 1


@pytest.mark.parametrize(("decide", "backfills"), [(False, False), (False, True), (True, True)])
def test_the_thread_runs_what_it_is_given_and_always_flushes(decide: bool, backfills: bool) -> None:
    """Distributed with VIBE_SCHEDULER_ENABLED=false (neither): an API replica still flushes its
    usage statistics, which Celery beat's promotion decisions count."""
    calls = Calls()
    t = SchedulerThread(cast(Any, calls), cast(Any, calls), cast(Any, calls), decide, 0.02, 0.02, 0.02,
                        backfills=backfills)
    t.start()
    try:
        wait_for(lambda: calls.n["flush"] >= 3, "flushes")
        time.sleep(0.1)
    finally:
        t.stop()
    assert (calls.n["backfill"] > 0) == backfills and (calls.n["tick"] > 0) == decide
