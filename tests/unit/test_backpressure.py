"""Global backpressure from queue depth (shared/backpressure.py): backfills stop at
VIBE_BACKPRESSURE_QUEUE_DEPTH, on-touch embedding at VIBE_TOUCH_BACKPRESSURE_QUEUE_DEPTH. A read
under backpressure still answers with what is embedded, queues nothing (not even a
rehydration), and says why it does not warm; once the queue drains, touches queue again."""

from __future__ import annotations

import threading
from collections.abc import Sequence
from pathlib import Path

from prometheus_client import REGISTRY

from services.api.render import diagnostics_body, warming_body
from services.planner.planner import ReadRequest
from services.wiring import build
from shared.adapters.memory_queue import InProcessQueue
from shared.backpressure import Backpressure, queued_total
from shared.config import Settings
from shared.model import DocKey, EmbedJob, Principal, SemanticStatus
from tests.support.words import WordEmbedder

ALICE = Principal("t1", ("user:alice",), frozenset({"read", "write", "admin"}))


class Clock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


class _Depth:
    """A JobQueue's `depth` alone, set by hand (what Backpressure reads)."""

    def __init__(self, depth: dict[str, int] | Exception):
        self.answer = depth
        self.asked = 0

    def depth(self, tenant: str | None = None) -> dict[str, int]:
        self.asked += 1
        if isinstance(self.answer, Exception):
            raise self.answer
        return self.answer


def test_every_lane_counts_and_a_queue_that_cannot_be_measured_holds_nothing_back() -> None:
    assert queued_total({"interactive": 3, "bulk": 4, "inflight": 2, "unreachable": 1}) == 9
    q = _Depth({"interactive": 2, "bulk": 1})
    bp = Backpressure(q, 3)  # type: ignore[arg-type]
    assert bp.pressed() and bp.total() == 3
    q.answer = {"interactive": 1, "bulk": 1}
    assert not bp.pressed()  # ttl 0: read at every ask
    q.answer = {"interactive": 0, "bulk": 0, "unreachable": 1}
    assert not bp.pressed() and bp.total() is None
    q.answer = ConnectionError("broker away")
    assert not bp.pressed() and bp.total() is None


def test_the_depth_is_read_at_most_every_ttl_seconds() -> None:
    clock = Clock()
    q = _Depth({"interactive": 5})
    bp = Backpressure(q, 5, ttl=1.0, clock=clock)  # type: ignore[arg-type]
    assert bp.pressed() and bp.pressed() and q.asked == 1
    q.answer = {"interactive": 0}
    clock.now = 0.9
    assert bp.pressed() and q.asked == 1  # the last reading still stands
    clock.now = 1.0
    assert not bp.pressed() and q.asked == 2


class _HeldEmbedder(WordEmbedder):
    """Bag-of-words vectors; document batches wait for `release` (queries never do), so the
    jobs a touch queued stay in the queue (in flight) while the test reads again."""

    def __init__(self) -> None:
        self.release = threading.Event()

    def embed(self, texts: Sequence[str]) -> list[list[float]]:
        assert self.release.wait(60)
        return super().embed(texts)


def _denied() -> float:
    return REGISTRY.get_sample_value("vibe_budget_denied_total", {"budget": "backpressure"}) or 0.0


def _read(c: object, q: str) -> dict[str, object]:
    session = c.planner.open(ALICE, ReadRequest("c", q, "hybrid", limit=5), streaming=True)  # type: ignore[attr-defined]
    session.complete_semantic()
    session.touch()
    return {"warming": warming_body(session.warming()), "semantic": diagnostics_body(session.diagnostics())["semantic"],
            "page": [f.key.doc_id for f in session.ranking[:5]]}


def test_touches_queue_nothing_while_the_queue_is_too_deep_and_again_once_it_drains(tmp_path: Path) -> None:
    emb = _HeldEmbedder()
    settings = Settings(data_dir=tmp_path / "data", embedder="openai", per_tenant_per_min=100_000,
                        touch_backpressure_queue_depth=4, touch_follow_up=False)
    c = build(settings, emb)
    c.start()
    try:
        bp = c.planner.backpressure
        assert bp is not None and bp.bound == 4 and bp.ttl == 1.0  # wired from the settings
        clock = Clock()
        bp.clock = clock  # the reading is taken again whenever the test moves the clock
        docs = [{"_id": f"a{i}", "body": f"alpha wing flutter {i} " * 3, "_acl": ["user:alice"]} for i in range(12)]
        docs += [{"_id": f"b{i}", "body": f"beta heat transfer {i} " * 3, "_acl": ["user:alice"]} for i in range(12)]
        c.docs.put([c.docs.parse(ALICE, "c", d["_id"], d) for d in docs])
        space = c.settings.space
        alpha = [DocKey("t1", "c", f"a{i}") for i in range(12)]
        beta = [DocKey("t1", "c", f"b{i}") for i in range(12)]

        first = _read(c, "alpha wing flutter")  # the queue is empty: the touch queues
        queued = first["semantic"]["queued"]  # type: ignore[index]
        assert isinstance(queued, int) and queued >= 4 and first["semantic"]["backpressureLimited"] == 0  # type: ignore[index]
        assert isinstance(c.queue, InProcessQueue) and queued_total(c.queue.depth()) >= 4  # held by the embedder

        clock.now += 1
        before = _denied()
        second = _read(c, "beta heat transfer")
        assert second["page"], "a read under backpressure still answers"
        limited = second["semantic"]["backpressureLimited"]  # type: ignore[index]
        assert isinstance(limited, int) and limited > 0 and second["semantic"]["queued"] == 0  # type: ignore[index]
        assert _denied() - before == limited
        assert "behind" in str(second["warming"]["message"]) and second["warming"]["queued"] == 0  # type: ignore[index]
        sides = c.store.sidecars(beta, space)
        assert all(s.status == SemanticStatus.NONE for s in sides.values())  # nothing was queued

        emb.release.set()
        assert c.queue.wait_idle(30)
        assert all(s.status == SemanticStatus.READY for k, s in c.store.sidecars(alpha, space).items()
                   if k.doc_id in {f"a{i}" for i in range(12)} and s.status != SemanticStatus.NONE)
        clock.now += 1
        third = _read(c, "beta heat transfer")  # drained: the same query's touch queues now
        assert third["semantic"]["backpressureLimited"] == 0 and third["semantic"]["queued"] > 0  # type: ignore[index]
        assert c.queue.wait_idle(30)
        assert any(s.status == SemanticStatus.READY for s in c.store.sidecars(beta, space).values())
    finally:
        emb.release.set()
        c.stop()


def test_a_backfill_step_waits_while_the_queue_is_at_its_bound(tmp_path: Path) -> None:
    """Backfills read the same gauge at their own bound (VIBE_BACKPRESSURE_QUEUE_DEPTH)."""
    emb = _HeldEmbedder()
    c = build(Settings(data_dir=tmp_path / "data", embedder="openai", per_tenant_per_min=100_000,
                       backpressure_queue_depth=2), emb)
    c.start()
    try:
        docs = [{"_id": f"a{i}", "body": f"alpha wing flutter {i}", "_acl": ["user:alice"]} for i in range(6)]
        c.docs.put([c.docs.parse(ALICE, "c", d["_id"], d) for d in docs])
        keys = [DocKey("t1", "c", f"a{i}") for i in range(6)]
        space = c.settings.space
        sides = c.store.sidecars(keys[:3], space)
        c.store.set_status(keys[:3], space, SemanticStatus.QUEUED, only_from=[SemanticStatus.NONE])
        c.queue.enqueue([EmbedJob(k, space, sides[k].content_hash) for k in keys[:3]])  # held: depth 3
        backfills = c.lifecycle.backfills  # the composition root's (its own thread steps it too)
        assert backfills.backpressure.bound == 2
        backfills.start("t1", "c", space, "reindex")
        before = _denied()
        assert backfills.run() == 0 and _denied() >= before + 1  # no step at the bound
        assert all(s.status == SemanticStatus.NONE for s in c.store.sidecars(keys[3:], space).values())
        emb.release.set()
        assert isinstance(c.queue, InProcessQueue) and c.queue.wait_idle(30)
        backfills.run()  # drained: a step (this one or the backfill thread's) queues the rest
        assert c.queue.wait_idle(30)
        assert all(s.status == SemanticStatus.READY for s in c.store.sidecars(keys, space).values())
    finally:
        emb.release.set()
        c.stop()
