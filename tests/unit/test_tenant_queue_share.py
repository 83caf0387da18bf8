"""One tenant cannot fill the shared job queue: its jobs (rehydrations from the cold store
included, which call no provider and so took nothing from the per-minute bucket) stop at its
share of the queue (VIBE_TENANT_QUEUE_MAX), below the global backpressure bound, while another
tenant's touches still queue theirs. The queue's workers are not started: jobs stay queued."""

from __future__ import annotations

from pathlib import Path

from services.planner.planner import ReadRequest
from services.wiring import build
from shared.backpressure import queued_total
from shared.config import Settings
from shared.model import CollectionMode, DocKey, EmbedJob, Principal, SemanticStatus

ANN = Principal("ta", ("user:ann",), frozenset({"read", "write", "admin"}))
BEA = Principal("tb", ("user:bea",), frozenset({"read", "write", "admin"}))
SHARE = 10


def _body(i: int) -> dict[str, object]:
    return {"body": f"turbine blade cooling report {i} with film holes and thermal barrier coating"}


def test_a_rehydrating_tenant_stops_at_its_share_and_another_tenant_still_queues(tmp_path: Path) -> None:
    c = build(Settings(data_dir=tmp_path / "data", embedder="hash", scheduler_enabled=False,
                       tenant_queue_max=SHARE, per_tenant_per_min=1_000_000, backfill_step_docs=500))
    try:
        space = c.settings.space
        a = [c.docs.parse(ANN, "a", f"d{i}", _body(i)) for i in range(60)]
        c.docs.put(a)
        c.docs.put([c.docs.parse(BEA, "b", f"d{i}", _body(i)) for i in range(5)])
        c.handler.run([EmbedJob(d.key, space, d.content_hash) for d in a])
        assert c.lifecycle.evict(c.store.clock() + 60, idle_seconds=0, tenant="ta") == 60
        # a rollback-sized rehydration: every evicted vector of the tenant at once
        task = c.lifecycle.backfills.start("ta", None, space, "rehydrate")
        c.lifecycle.backfills.step(task)
        assert queued_total(c.queue.depth("ta")) == SHARE
        # its reads queue no more (not even rehydrations) ...
        c.planner.open(ANN, ReadRequest("a", "turbine blade cooling", "hybrid", limit=20))
        assert queued_total(c.queue.depth("ta")) == SHARE
        # ... and the other tenant's touch still queues its own
        read = c.planner.open(BEA, ReadRequest("b", "turbine blade cooling", "hybrid", limit=5))
        assert queued_total(c.queue.depth("tb")) > 0 and read.backpressure_limited == 0
        sides = c.store.sidecars([d.key for d in a], space)
        assert sum(s.status == SemanticStatus.QUEUED for s in sides.values()) == SHARE  # the rest wait
        # the task resumes where its share stopped it, once its jobs drain
        assert c.store.tasks("ta", running_only=True)
    finally:
        c.store.close()


def test_bulk_writes_into_an_eager_collection_stop_at_the_share(tmp_path: Path) -> None:
    c = build(Settings(data_dir=tmp_path / "data", embedder="hash", scheduler_enabled=False,
                       tenant_queue_max=SHARE, per_tenant_per_min=1_000_000))
    try:
        now = c.store.clock()
        for tenant in ("ta", "tb"):
            c.store.set_collection_mode(CollectionMode(tenant, "e", "eager", now, "manual", True))
        c.docs.put([c.docs.parse(ANN, "e", f"d{i}", _body(i)) for i in range(50)])  # one bulk at its bound
        c.docs.put([c.docs.parse(ANN, "e", f"x{i}", _body(i)) for i in range(20)])  # and another
        assert queued_total(c.queue.depth("ta")) == SHARE
        sides = c.store.sidecars([DocKey("ta", "e", f"d{i}") for i in range(50)], c.settings.space)
        assert sum(s.status == SemanticStatus.NONE for s in sides.values()) == 50 - SHARE  # the backfill's
        c.docs.put([c.docs.parse(BEA, "e", f"d{i}", _body(i)) for i in range(5)])
        assert queued_total(c.queue.depth("tb")) == 5  # the other tenant's eager writes still queue
    finally:
        c.store.close()
