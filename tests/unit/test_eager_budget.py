"""Eager writes spend the tenant's per-minute bucket: what the bucket does not
grant stays `none`, the write is still accepted, and the scheduler backfills the rest."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from services.wiring import Container, build
from shared.config import Settings
from shared.model import DocKey, Principal, SemanticStatus

WRITER = Principal("t", ("user:w",), frozenset({"read", "write", "admin"}))


@pytest.fixture
def container(tmp_path: Path) -> Iterator[Container]:
    c = build(Settings(data_dir=tmp_path / "data", embedder="hash", embed_dim=32, per_tenant_per_min=5,
                       per_query_max_embeds=2, scheduler_enabled=False, workers=1))
    c.scheduler_thread = False  # the test runs the ticks and backfill steps itself
    c.start()
    try:
        yield c
    finally:
        c.stop()


def test_eager_writes_beyond_the_bucket_stay_lazy_and_are_backfilled(container: Container) -> None:
    c = container
    assert c.lifecycle.set_mode("t", "hot", eager=True)
    docs = [c.docs.parse(WRITER, "hot", f"d{i}", {"title": f"Doc {i}", "body": f"wing flutter case {i}"})
            for i in range(8)]
    assert c.docs.put(docs) == ["created"] * 8  # accepted whatever the budget
    sides = c.store.sidecars([DocKey("t", "hot", f"d{i}") for i in range(8)], "core")
    spent = [k for k, s in sides.items() if s.status in (SemanticStatus.QUEUED, SemanticStatus.READY)]
    waiting = [k for k, s in sides.items() if s.status == SemanticStatus.NONE]
    assert len(spent) == 5 and len(waiting) == 3  # the bucket held five
    report = c.lifecycle.tick()
    assert report.backfills_started == 1
    tasks = [t for t in c.store.tasks("t") if t.collection == "hot" and t.kind == "promote"]
    assert tasks and tasks[-1].state == "running"
    # a second tick starts no second backfill while one runs
    assert c.lifecycle.tick().backfills_started == 0
