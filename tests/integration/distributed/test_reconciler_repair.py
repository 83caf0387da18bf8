"""The reconciler and `queued` rows no job can finish: an earlier bug left rows
`queued` for a (document, space) whose content is gone, and a row of a space the tenant no
longer reads keeps the same promise of a job. Re-enqueued, such a row stays `queued` for good
(the handler drops a job whose document is gone or whose content changed) or is embedded into
a space nobody reads; the reconciler repairs it instead. Over both stores of record, with the
real Celery queue on a private redis-server (no worker: what was sent is read from Redis)."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Literal

import pytest

from harness.redis_server import RedisServer
from services.worker.reconciler import LOCK, reconcile
from shared.adapters.celery_queue import CeleryQueue
from shared.config import Settings
from shared.metrics import METRICS
from shared.model import PUBLIC_PRINCIPAL, DocKey, SemanticStatus, SidecarEntry, SpaceInfo, StoredDoc
from shared.ports import StoreOfRecord
from tests.contract.test_store_contract import Opener, opener  # noqa: F401 - fixture
from tests.support.legacy_rows import leave_row_of_gone_document

S = SemanticStatus
NOW = 983_746_800.0
STUCK = 300.0
OLD = NOW - 2 * STUCK  # stuck: older than the reconciler's bound


@pytest.fixture
def store(opener: Opener) -> Iterator[StoreOfRecord]:  # noqa: F811
    s: StoreOfRecord = opener()  # type: ignore[assignment]
    s.clock = lambda: NOW
    yield s
    s.close()


def _doc(store: StoreOfRecord, tenant: str, doc_id: str, content: str, rows: dict[str, S]) -> DocKey:
    key = DocKey(tenant, "c", doc_id)
    store.put_docs([StoredDoc(key, {"body": content}, [PUBLIC_PRINCIPAL], None, content, OLD)],
                   [SidecarEntry(key, space, status, content, updated_at=OLD) for space, status in rows.items()])
    return key


def _space(tenant: str, space: str, state: Literal["active", "retired"]) -> SpaceInfo:
    return SpaceInfo(tenant, space, "hash:v1@32", 32, state, OLD, OLD if state == "active" else None,
                     OLD if state == "retired" else None)


def _repaired(reason: str) -> float:
    return float(METRICS.reconciler_repaired.labels(reason=reason)._value.get())


def test_rows_no_job_can_finish_are_repaired_and_the_others_re_enqueued(
        store: StoreOfRecord, redis_srv: RedisServer) -> None:
    # ta migrated from core (the configured space, retired for ta) to v2; tb still reads core
    store.put_tenant_space(_space("ta", "core", "retired"))
    store.put_tenant_space(_space("ta", "v2", "active"))
    lost = _doc(store, "ta", "lost", "h-lost", {"v2": S.QUEUED})  # a lost job: re-enqueued
    edited = DocKey("ta", "c", "edited")  # its row waits for content the document no longer has
    store.put_docs([StoredDoc(edited, {"body": "h-new"}, [PUBLIC_PRINCIPAL], None, "h-new", OLD)],
                   [SidecarEntry(edited, "v2", S.QUEUED, "h-old", updated_at=OLD)])
    gone = _doc(store, "ta", "gone", "h-gone", {"v2": S.NONE})
    assert store.delete_doc(gone)  # then a row of it, as the earlier bug could leave one
    leave_row_of_gone_document(store, SidecarEntry(gone, "v2", S.QUEUED, "h-gone", updated_at=OLD))
    retired = _doc(store, "ta", "retired", "h-ret", {"core": S.QUEUED, "v2": S.READY})  # core is retired for ta
    other = _doc(store, "tb", "other", "h-other", {"core": S.QUEUED})  # core is tb's active space
    stray = _doc(store, "tb", "stray", "h-stray", {"core": S.NONE, "v2": S.QUEUED})  # v2 was never tb's
    fresh = _doc(store, "ta", "fresh", "h-fresh", {"v2": S.NONE})
    assert store.set_status([fresh], "v2", S.QUEUED) == [fresh]  # queued just now: a job holds it

    settings = Settings(queue="celery", redis_url=redis_srv.url, reconcile_stuck_seconds=STUCK)
    queue = CeleryQueue.from_settings(settings)
    before = {r: _repaired(r) for r in ("document_gone", "content_changed", "space_not_live")}
    head = store.change_log_head()
    assert reconcile(store, queue, settings) == {"stuck": 6, "requeued": 2, "repaired": 4}

    # only jobs for content a document has, in a space its tenant reads
    assert queue.pending_job_keys("ta") == {("ta", "c", "lost", "v2", "h-lost")}
    assert queue.pending_job_keys("tb") == {("tb", "c", "other", "core", "h-other")}
    assert store.sidecar(gone, "v2") is None  # the document is gone: so is its row
    s = store.sidecar(edited, "v2")
    assert s is not None and (s.status, s.content_hash) == (S.STALE, "h-new")  # never the old content
    assert [(c.key, c.op, c.space) for c in store.changes_since(head)] == [(edited, "unvector", "v2")]
    s = store.sidecar(retired, "core")
    assert s is not None and s.status == S.NONE  # back to `none`, as a re-activation would put it
    assert _status(store, stray, "v2") == S.NONE
    assert _status(store, retired, "v2") == S.READY and _status(store, fresh, "v2") == S.QUEUED
    assert _status(store, lost, "v2") == S.QUEUED and _status(store, other, "core") == S.QUEUED
    assert {r: _repaired(r) - n for r, n in before.items()} == \
        {"document_gone": 1, "content_changed": 1, "space_not_live": 2}

    # the next run finds only the rows still waiting for their (re-sent) jobs
    redis_srv.client().delete(LOCK)
    assert reconcile(store, queue, settings) == {"stuck": 2, "requeued": 0, "repaired": 0}


def _status(store: StoreOfRecord, key: DocKey, space: str) -> S | None:
    s = store.sidecar(key, space)
    return None if s is None else s.status

