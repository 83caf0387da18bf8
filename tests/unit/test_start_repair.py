"""An embedded process's start and `queued` rows no job can finish. The embedded
profile has no reconciler: at start it re-enqueues every row a previous run left `queued`. An
earlier bug could leave rows queued for a document that is gone or for content it no longer
has (the handler drops such a job, so the row stayed `queued` across every restart), and a
row of a space the tenant does not read was embedded into it. The start repairs them first,
with the reconciler's repair (services/worker/repair.py)."""

from __future__ import annotations

import time
from collections.abc import Sequence
from pathlib import Path
from typing import Literal

import pytest

from services.api.routes_admin import _lag
from services.wiring import build
from shared.adapters.memory_queue import InProcessQueue
from shared.config import Settings
from shared.metrics import METRICS
from shared.model import PUBLIC_PRINCIPAL, DocKey, EmbedJob, SemanticStatus, SidecarEntry, SpaceInfo, StoredDoc
from shared.ports import StoreOfRecord
from tests.support.legacy_rows import leave_row_of_gone_document

S = SemanticStatus
MODEL = "hash:v1@32"
REASONS = ("document_gone", "content_changed", "space_not_live")


def _settings(data: Path) -> Settings:
    return Settings(data_dir=data, embedder="hash", embed_dim=32, scheduler_enabled=False, workers=1)


def _doc(store: StoreOfRecord, tenant: str, doc_id: str, content: str, rows: dict[str, S],
         queued_for: str | None = None) -> DocKey:
    """A document whose rows were left as the earlier bug could leave them, an hour ago; a row
    `queued_for` other content waits for content the document no longer has."""
    key, then = DocKey(tenant, "c", doc_id), store.clock() - 3600
    store.put_docs([StoredDoc(key, {"body": f"gearbox lubrication interval {content}"}, [PUBLIC_PRINCIPAL], None,
                              content, then)],
                   [SidecarEntry(key, space, status, queued_for or content, updated_at=then)
                    for space, status in rows.items()])
    return key


def _space(tenant: str, space: str, state: Literal["active", "retired"], at: float) -> SpaceInfo:
    return SpaceInfo(tenant, space, MODEL, 32, state, at, at if state == "active" else None,
                     at if state == "retired" else None)


def _repaired() -> dict[str, float]:
    return {r: float(METRICS.reconciler_repaired.labels(reason=r)._value.get()) for r in REASONS}


def test_a_restart_repairs_the_queued_rows_no_job_can_finish_and_re_enqueues_the_others(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    data = tmp_path / "data"
    first = build(_settings(data))  # a previous run: it leaves these rows `queued` and stops
    store, at = first.store, first.store.clock() - 7200
    # ta moved from core (the configured space, retired for ta) to v2; tb still reads core
    store.bind_space("v2", MODEL, 32)
    store.put_tenant_space(_space("ta", "core", "retired", at))
    store.put_tenant_space(_space("ta", "v2", "active", at))
    lost = _doc(store, "ta", "lost", "h-lost", {"v2": S.QUEUED})  # its job died with the process
    edited = _doc(store, "ta", "edited", "h-new", {"v2": S.QUEUED}, queued_for="h-old")
    gone = _doc(store, "ta", "gone", "h-gone", {"v2": S.NONE})
    assert store.delete_doc(gone)  # then a row of it, as the earlier bug could leave one
    leave_row_of_gone_document(store, SidecarEntry(gone, "v2", S.QUEUED, "h-gone", updated_at=at))
    retired = _doc(store, "ta", "retired", "h-ret", {"core": S.QUEUED, "v2": S.READY})
    other = _doc(store, "tb", "other", "h-other", {"core": S.QUEUED})  # core is tb's active space
    stray = _doc(store, "tb", "stray", "h-stray", {"core": S.READY, "v2": S.QUEUED})  # v2 was never tb's
    first.stop()

    c = build(_settings(data))
    assert isinstance(c.queue, InProcessQueue)
    sent: list[EmbedJob] = []
    enqueue = c.queue.enqueue

    def spy(jobs: Sequence[EmbedJob]) -> int:
        sent.extend(jobs)
        return enqueue(jobs)

    monkeypatch.setattr(c.queue, "enqueue", spy)
    before, head = _repaired(), c.store.change_log_head()
    c.start()
    try:
        assert c.queue.wait_idle(30)
        # only jobs for content a document has, in a space its tenant reads
        assert sorted((j.key.doc_id, j.space, j.content_hash) for j in sent) == \
            [("lost", "v2", "h-lost"), ("other", "core", "h-other")]
        assert c.store.sidecar(gone, "v2") is None  # the document is gone: so is its row
        s = c.store.sidecar(edited, "v2")
        assert s is not None and (s.status, s.content_hash) == (S.STALE, "h-new")  # never the old content
        assert (edited, "unvector", "v2") in {(x.key, x.op, x.space) for x in c.store.changes_since(head)}
        assert _status(c.store, retired, "core") == S.NONE  # as a re-activation would put it
        assert _status(c.store, stray, "v2") == S.NONE
        assert _status(c.store, lost, "v2") == S.READY and _status(c.store, other, "core") == S.READY
        assert _status(c.store, retired, "v2") == S.READY and _status(c.store, stray, "core") == S.READY
        after = _repaired()
        assert {r: after[r] - before[r] for r in REASONS} == \
            {"document_gone": 1, "content_changed": 1, "space_not_live": 2}
        assert c.requeue_pending() == {"requeued": 0, "repaired": 0}  # nothing is left `queued`
    finally:
        c.stop()


def _status(store: StoreOfRecord, key: DocKey, space: str) -> S | None:
    s = store.sidecar(key, space)
    return None if s is None else s.status


def test_while_an_embedded_process_runs_its_scheduler_reconciles_rows_stuck_past_the_bound(tmp_path: Path) -> None:
    """A row left `queued` while the process runs (a batch that failed its last attempt leaves
    its rows so) is repaired or re-enqueued by the scheduler thread's reconcile pass, not only at
    the next start; a row still within `reconcile_stuck_seconds` is left to its job."""
    settings = Settings(data_dir=tmp_path / "data", embedder="hash", embed_dim=32, workers=1,
                        scheduler_enabled=True, scheduler_interval_seconds=3600, reconcile_interval_seconds=0.1,
                        reconcile_stuck_seconds=600)
    c = build(settings)
    runs = METRICS.reconciler_runs.labels(outcome="ran")._value.get()
    c.start()
    try:
        store = c.store
        lost = _doc(store, "ta", "lost", "h-lost", {"core": S.QUEUED})  # its job failed for good an hour ago
        edited = _doc(store, "ta", "edited", "h-new", {"core": S.QUEUED}, queued_for="h-old")
        key = DocKey("ta", "c", "recent")  # queued a moment ago: its job may still be running
        store.put_docs([StoredDoc(key, {"body": "recent"}, [PUBLIC_PRINCIPAL], None, "h-recent", store.clock())],
                       [SidecarEntry(key, "core", S.QUEUED, "h-recent", updated_at=store.clock())])
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline and _status(store, lost, "core") != S.READY:
            time.sleep(0.05)
        assert _status(store, lost, "core") == S.READY  # re-enqueued and embedded
        s = store.sidecar(edited, "core")
        assert s is not None and (s.status, s.content_hash) == (S.STALE, "h-new")  # repaired, never embedded
        assert _status(store, key, "core") == S.QUEUED  # not stuck yet: left alone
        assert METRICS.reconciler_runs.labels(outcome="ran")._value.get() > runs
        report = _lag(c, "ta")["reconciler"]  # /semantic/lag, as with the Celery reconciler
        assert report["lastRunAt"] is not None and report["stuckFound"] >= 1
        other = _lag(c, "tb")["reconciler"]
        assert other["lastRunAt"] is not None and "stuckFound" not in other  # never another tenant's numbers
    finally:
        c.stop()
