from __future__ import annotations

import threading
import time
from dataclasses import dataclass, field

from shared.adapters.memory_budget import MemoryBudget
from shared.adapters.memory_queue import InProcessQueue
from shared.model import DocKey, EmbedJob


def test_budget_per_tenant_bucket() -> None:
    b = MemoryBudget(per_minute=10)
    assert b.take("t1", 7) == 7
    assert b.take("t1", 7) == 3
    assert b.take("t1", 1) == 0
    assert b.take("t2", 10) == 10  # tenants have separate buckets
    assert b.take("t1", 0) == 0


@dataclass
class Out:
    changed: list[DocKey] = field(default_factory=list)
    retry: list[EmbedJob] = field(default_factory=list)
    retry_after: float | None = None


def job(i: int, priority: str = "interactive", attempt: int = 0) -> EmbedJob:
    return EmbedJob(DocKey("t", "c", str(i)), "core", f"h{i}", priority, attempt)  # type: ignore[arg-type]


def test_queue_dedupes_batches_and_prefers_interactive() -> None:
    seen: list[list[str]] = []
    gate = threading.Event()

    def run(batch: list[EmbedJob]) -> Out:
        gate.wait(5)
        seen.append([j.priority for j in batch])
        return Out(changed=[j.key for j in batch])

    q = InProcessQueue(run, workers=1, batch_size=4, backoff_seconds=0.01)
    assert q.enqueue([job(i, "bulk") for i in range(6)]) == 6
    assert q.enqueue([job(0, "bulk")]) == 0  # same job key is pending already
    assert q.enqueue([job(100), job(101)]) == 2
    q.start()
    gate.set()
    assert q.wait_idle(10)
    q.stop()
    assert seen[0] == ["interactive", "interactive"]
    assert sum(len(b) for b in seen) == 8 and max(len(b) for b in seen) <= 4


def test_queue_retries_with_backoff_then_completes() -> None:
    calls: list[int] = []
    done: list[DocKey] = []

    def run(batch: list[EmbedJob]) -> Out:
        calls.append(batch[0].attempt)
        if batch[0].attempt < 2:
            return Out(retry=[EmbedJob(j.key, j.space, j.content_hash, j.priority, j.attempt + 1) for j in batch],
                       retry_after=0.05)
        return Out(changed=[j.key for j in batch])

    q = InProcessQueue(run, workers=1, batch_size=8, backoff_seconds=0.01)
    q.on_done(done.extend)
    q.start()
    t0 = time.monotonic()
    q.enqueue([job(1)])
    assert q.wait_idle(10)
    q.stop()
    assert calls == [0, 1, 2] and done == [DocKey("t", "c", "1")]
    assert time.monotonic() - t0 >= 0.1  # two waits of at least retry_after


def test_worker_survives_a_crashing_handler() -> None:
    attempts: list[int] = []

    def run(batch: list[EmbedJob]) -> Out:
        attempts.append(1)
        if len(attempts) == 1:
            raise RuntimeError("boom")
        return Out(changed=[j.key for j in batch])

    q = InProcessQueue(run, workers=1, batch_size=8, backoff_seconds=0.01)
    q.start()
    q.enqueue([job(1)])
    assert q.wait_idle(10)
    q.stop()
    assert len(attempts) == 2


def test_depth_by_tenant_shows_only_that_tenant() -> None:
    q = InProcessQueue(lambda batch: Out(), workers=1)
    q.enqueue([job(1), EmbedJob(DocKey("u", "c", "9"), "core", "h9")])
    assert q.depth("t")["interactive"] == 1 and q.depth("u")["interactive"] == 1
    assert q.depth("nobody") == {"interactive": 0, "bulk": 0, "inflight": 0, "retrying": 0}
    assert q.depth()["interactive"] == 2
