"""The Celery queue's producer side and the reconciler against a private redis-server (no
worker): lanes, batching, dedupe by job key, per-tenant depth, the done signal, the lock, and
never raising while Redis is down."""

from __future__ import annotations

import base64
import json
import threading
import time
from pathlib import Path

from harness.redis_server import RedisServer
from services.worker.reconciler import reconcile
from shared.adapters.celery_queue import DONE_CHANNEL, QUEUES, CeleryQueue, decode
from shared.adapters.sqlite_store import SqliteStore
from shared.config import Settings
from shared.model import DocKey, EmbedJob, SemanticStatus, SidecarEntry, StoredDoc
from tests.integration.distributed.conftest import wait_for


def _queue(srv: RedisServer, **kw: object) -> CeleryQueue:
    s = Settings(queue="celery", redis_url=srv.url, embed_batch_size=4, redis_down_backoff_seconds=0.2, **kw)
    return CeleryQueue.from_settings(s)


def _job(i: int, tenant: str = "ta", priority: str = "bulk") -> EmbedJob:
    return EmbedJob(DocKey(tenant, "c", f"d{i}"), "core", f"h{i}", priority)  # type: ignore[arg-type]


def _messages(srv: RedisServer, lane: str) -> list[list[EmbedJob]]:
    """The jobs in each Celery message waiting in a lane (kombu envelope, base64 JSON body:
    [args, kwargs, embed]; args[0] is the batch)."""
    out = []
    for raw in srv.client().lrange(QUEUES[lane], 0, -1):
        args = json.loads(base64.b64decode(json.loads(raw)["body"]))[0]
        out.append([decode(j) for j in args[0]])
    return out


def test_lanes_batches_dedupe_and_depth(redis_srv: RedisServer) -> None:
    q = _queue(redis_srv)
    assert q.enqueue([_job(i) for i in range(10)]) == 10
    assert q.enqueue([_job(i) for i in range(10)]) == 0  # same job keys are pending
    assert q.enqueue([_job(3, priority="interactive")]) == 1  # a touch does not wait behind bulk
    assert q.enqueue([_job(3, priority="bulk")]) == 0
    assert q.enqueue([_job(0, tenant="tb")]) == 1  # tenants never dedupe each other
    bulk = _messages(redis_srv, "bulk")
    assert sorted(len(m) for m in bulk) == [1, 2, 4, 4]  # batches of at most embed_batch_size
    assert [len(m) for m in _messages(redis_srv, "interactive")] == [1]
    assert q.depth("ta") == {"interactive": 1, "bulk": 10}
    assert q.depth("tb") == {"interactive": 0, "bulk": 1}
    assert q.depth() == {"interactive": 1, "bulk": 11}
    assert q.release([_job(3), _job(4)]) == 3  # both lanes' marks for d3, and d4
    assert q.release([_job(3)]) == 0  # idempotent: a redelivered task cannot skew the counts
    assert q.depth("ta") == {"interactive": 0, "bulk": 8}
    assert q.enqueue([_job(4)]) == 1  # released keys can be enqueued again
    assert len(q.pending_job_keys("ta") or ()) == 9


def test_redis_down_never_raises_and_recovers(tmp_path: Path) -> None:
    srv = RedisServer(tmp_path).start()
    q = _queue(srv)
    srv.stop()
    assert q.enqueue([_job(1)]) == 0
    assert q.depth("ta") == {"interactive": 0, "bulk": 0, "unreachable": 1}
    assert q.pending_job_keys("ta") is None
    assert q.reconcile_report("ta") == {"reachable": False}
    srv.start()
    time.sleep(0.25)
    assert q.enqueue([_job(1)]) == 1
    srv.stop()


def test_on_done_callbacks_from_pubsub(redis_srv: RedisServer) -> None:
    q = _queue(redis_srv)
    got: list[list[DocKey]] = []
    ready = threading.Event()
    q.on_done(lambda keys: (got.append(keys), ready.set()))
    q.start()
    try:
        key = DocKey("ta", "c", "d1")
        wait_for(lambda: bool(redis_srv.client().pubsub_numsub(DONE_CHANNEL)[0][1]), 10, "the subscription")
        _queue(redis_srv).announce([key])  # as a worker process does
        assert ready.wait(10)
        assert got == [[key]]
    finally:
        q.stop()


def _store_with_queued(path: Path, n: int, age: float) -> SqliteStore:
    store = SqliteStore(path)
    docs = [StoredDoc(DocKey("ta", "c", f"d{i}"), {"t": i}, ["*"], None, f"h{i}", 0.0) for i in range(n)]
    side = [SidecarEntry(d.key, "core", SemanticStatus.QUEUED, d.content_hash, updated_at=time.time() - age)
            for d in docs]
    store.put_docs(docs, side)
    return store


def test_reconciler_requeues_stuck_rows_once_under_a_lock(redis_srv: RedisServer, tmp_path: Path) -> None:
    s = Settings(queue="celery", redis_url=redis_srv.url, reconcile_stuck_seconds=60, reconcile_interval_seconds=30)
    store = _store_with_queued(tmp_path / "s.sqlite3", 5, age=120)
    fresh = StoredDoc(DocKey("ta", "c", "new"), {}, ["*"], None, "hn", 0.0)
    store.put_docs([fresh], [SidecarEntry(fresh.key, "core", SemanticStatus.QUEUED, "hn", updated_at=time.time())])
    q = CeleryQueue.from_settings(s)
    assert q.enqueue([_job(0)]) == 1  # d0 is still pending: not sent twice
    assert reconcile(store, q, s) == {"stuck": 5, "requeued": 4, "repaired": 0}
    assert reconcile(store, q, s) == {"skipped": 1}  # a second scheduler's tick in the same interval
    assert q.depth("ta")["bulk"] == 5  # the fresh row was not touched
    report = q.reconcile_report("ta")
    assert report["stuckFound"] == 5 and report["requeued"] == 4
    assert "stuckFound" not in q.reconcile_report("tb")
