"""The scheduler's sweep of sidecar rows whose document is gone (Lifecycle.sweep_gone_rows,
stage `gone_rows`, store `prune_gone_rows`). Earlier versions left such rows (a backfill's
`ensure_sidecars` racing a delete); only `queued` ones were ever repaired, so the others stayed
in coverage for good. Over the real wiring, in SQLite and in PostgreSQL: the rows go whatever
their status, a batch per tick; a `ready` one's point leaves the vector index; a document's row
is never deleted, also when the document is written again while the sweep runs."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest
from prometheus_client import REGISTRY

from services.wiring import Container
from shared.model import PUBLIC_PRINCIPAL, DocKey, SemanticStatus, SidecarEntry, StoredDoc
from shared.ports import GonePage, RowCursor, SearchFilter
from tests.support.legacy_rows import leave_row_of_gone_document
from tests.unit.test_cold_orphans import SPACE, content, put_docs
from tests.unit.test_scheduler_switch import embed_now, running

S = SemanticStatus
LEFT = [S.NONE, S.QUEUED, S.STALE, S.READY, S.DENIED, S.DEFERRED, S.FAILED]  # as the earlier versions left them
EVERYONE = SearchFilter("t", None, ("*",))


@pytest.fixture(params=["sqlite", "postgres"])
def layout(request: pytest.FixtureRequest) -> dict[str, Any]:
    if request.param == "postgres":
        return {"store": "postgres", "postgres_url": request.getfixturevalue("postgres_url"),
                "postgres_pool_size": 2}
    return {"store": "sqlite"}


@contextmanager
def service(tmp_path: Path, layout: dict[str, Any], **settings: Any) -> Iterator[Container]:
    with running(tmp_path, **layout, **settings) as c:
        yield c


def repaired() -> float:
    return REGISTRY.get_sample_value("vibe_reconciler_repaired_total", {"reason": "document_gone"}) or 0.0


def leave(c: Container, doc_id: str, status: S, space: str = SPACE, content_hash: str | None = None,
          cold_ref: str | None = None) -> tuple[DocKey, str]:
    key = DocKey("t", "c", doc_id)
    leave_row_of_gone_document(c.store, SidecarEntry(key, space, status, content_hash or f"h-{doc_id}",
                                                     updated_at=c.store.clock(), cold_ref=cold_ref))
    return key, space


def lose_document(store: Any, key: DocKey) -> None:
    """Only the document's row goes, behind the store's back and unlogged: its `ready` row,
    vector and index point stay, the worst leftover a sweep can meet."""
    with store._lc_tx() as conn:
        store._x(conn, "DELETE FROM docs WHERE tenant=? AND collection=? AND doc_id=?", tuple(key))


def test_a_tick_deletes_rows_of_gone_documents_in_every_status_a_batch_at_a_time(
        tmp_path: Path, layout: dict[str, Any]) -> None:
    with service(tmp_path, layout, evict_batch=3) as c:
        cold, = put_docs(c, "cold")  # evicted, then deleted: its row comes back as the old race left it
        embed_now(c, SPACE, cold)
        assert c.lifecycle.evict(c.lifecycle.clock() + 10, 0.0, "t", "c") == 1
        h = content(c, cold)
        ref = c.store.cold_entry("t", h, SPACE)
        assert ref is not None and c.store.delete_doc(cold)
        gone = [leave(c, "cold", S.NONE, content_hash=h, cold_ref=ref)]
        gone += [leave(c, f"g{i}", status) for i, status in enumerate(LEFT)]
        gone.append(leave(c, "g7", S.READY, space="v2"))
        a, m, z = put_docs(c, "a", "m", "z")
        embed_now(c, SPACE, a)
        live = c.store.sidecars([a, m, z], SPACE)
        assert c.store.coverage_all(SPACE) == {"cold": 1, "none": 3, "queued": 1, "stale": 1, "ready": 2,
                                               "denied": 1, "deferred": 1, "failed": 1}
        before = repaired()

        reports = [c.lifecycle.tick() for _ in range(6)]
        # rows in key order, three a tick: [a cold g0] [g1 g2 g3] [g4 g5 g6] [g7 m z] [] then over again
        assert [r.gone_rows for r in reports] == [2, 3, 3, 1, 0, 0]
        assert [r.tenants.get("t", {}).get("goneRows") for r in reports] == [2, 3, 3, 1, None, None]
        assert all(r.failed == [] for r in reports)
        assert repaired() == before + len(gone)
        assert all(c.store.sidecar(k, space) is None for k, space in gone)
        assert c.store.sidecars([a, m, z], SPACE) == live  # a document's row is never touched
        assert c.store.coverage_all(SPACE) == {"ready": 1, "none": 2}
        assert c.store.coverage_all("v2") == {}
        assert c.store.coverage("t", "c", SPACE)["total"] == 3
        # the cold copy of the gone content went with the prune, as after any delete
        assert c.store.cold_entry("t", h, SPACE) is None and c.lifecycle.cold.get("t", SPACE, h) is None


def test_a_ready_row_of_a_gone_document_leaves_the_vector_index(tmp_path: Path, layout: dict[str, Any]) -> None:
    with service(tmp_path, layout) as c:
        a, b = put_docs(c, "a", "b")
        embed_now(c, SPACE, a, b)
        c.follower.sync()
        q = c.embedder.embed_query("wing flutter margins, case a")
        assert {h.key for h in c.vectors.search(SPACE, EVERYONE, q, 10)} == {a, b}
        head = c.store.change_log_head()
        lose_document(c.store, a)

        report = c.lifecycle.tick()  # its change reaches the embedded index at once (`after_change`)
        assert report.gone_rows == 1 and report.failed == []
        assert c.store.sidecar(a, SPACE) is None
        assert [h.key for h in c.vectors.search(SPACE, EVERYONE, q, 10)] == [b]
        assert (a, "unvector", SPACE) in {(x.key, x.op, x.space) for x in c.store.changes_since(head)}
        side = c.store.sidecar(b, SPACE)
        assert side is not None and side.status == S.READY


def test_a_document_written_again_after_the_sweep_found_its_row_keeps_it(
        tmp_path: Path, layout: dict[str, Any], monkeypatch: pytest.MonkeyPatch) -> None:
    with service(tmp_path, layout) as c:
        back, _ = leave(c, "back", S.STALE)
        stays, _ = leave(c, "stays", S.STALE)
        store: Any = c.store
        find = store._gone_page

        def then_written_again(after: RowCursor | None, limit: int) -> GonePage:
            page = find(after, limit)
            assert sorted(k.doc_id for k, _ in page[0]) == ["back", "stays"]
            put_docs(c, "back")
            return page

        monkeypatch.setattr(store, "_gone_page", then_written_again)
        assert c.lifecycle.tick().gone_rows == 1
        side = c.store.sidecar(back, SPACE)
        assert side is not None and side.content_hash == content(c, back) != "h-back"
        assert c.store.sidecar(stays, SPACE) is None


def test_on_postgres_a_row_a_write_in_flight_holds_is_kept(
        postgres_url: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """Under READ COMMITTED: the document is written again (its unchanged `ready` row with it)
    but not committed when the sweep reads and then deletes; the delete waits for the row, and
    the document is there when it goes on."""
    from shared.adapters.postgres_store import PostgresStore

    store = PostgresStore(postgres_url, pool_size=4)
    try:
        key = DocKey("t", "c", "back")
        row = SidecarEntry(key, SPACE, S.READY, "h1", updated_at=1.0)
        leave_row_of_gone_document(store, row)
        written, go = threading.Event(), threading.Event()
        align = store._lc_align_written

        def held(*args: Any) -> Any:  # in the write's transaction, after its document and row
            written.set()
            assert go.wait(30)
            return align(*args)

        monkeypatch.setattr(store, "_lc_align_written", held)
        writer = threading.Thread(target=store.put_docs, args=(
            [StoredDoc(key, {"body": "x"}, [PUBLIC_PRINCIPAL], None, "h1", 1.0)], [row]))
        writer.start()
        assert written.wait(30)
        swept: list[GonePage] = []
        sweeper = threading.Thread(target=lambda: swept.append(store.prune_gone_rows(None, 10)))
        sweeper.start()
        deadline = time.monotonic() + 30
        while not store._all("SELECT COUNT(*) AS n FROM pg_stat_activity WHERE wait_event_type='Lock' "
                             "AND datname=current_database()")[0]["n"]:
            assert time.monotonic() < deadline, "the sweep never waited for the write"
            time.sleep(0.01)
        go.set()
        writer.join(30)
        sweeper.join(30)
        assert swept == [([], None)]
        assert store.get_doc(key) is not None
        assert store.sidecar(key, SPACE) == row
    finally:
        store.close()


def test_a_restarted_scheduler_goes_on_where_the_last_one_stopped(tmp_path: Path, layout: dict[str, Any]) -> None:
    """The cursor is in the store: a restart (or the lease moving to another process) began
    again at the first row before, so a fleet restarting more often than a pass takes never
    reached its tail. Here every tick is a new process's, and the live rows in front fill a batch."""
    with service(tmp_path, layout, evict_batch=3) as c:
        live = put_docs(c, "a", "b", "c")
        gone = [leave(c, f"g{i}", S.STALE) for i in range(6)]
    swept = []
    for _ in range(3):
        with service(tmp_path, layout, evict_batch=3) as c:
            swept.append(c.lifecycle.tick().gone_rows)
    assert swept == [0, 3, 3]
    with service(tmp_path, layout, evict_batch=3) as c:
        assert all(c.store.sidecar(k, space) is None for k, space in gone)
        assert set(c.store.sidecars(live, SPACE)) == set(live)
