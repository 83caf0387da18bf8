"""A document the lexical leg finds but that has no sidecar row in the space read (left by a race
or an earlier version) is given one by the touch and embedded, instead of never being."""

from __future__ import annotations

from pathlib import Path

from services.planner.planner import ReadRequest
from services.wiring import build
from shared.adapters.memory_queue import InProcessQueue
from shared.adapters.sqlite_store import SqliteStore
from shared.config import Settings
from shared.metrics import METRICS
from shared.model import DocKey, Principal, SemanticStatus

ALICE = Principal("t", ("user:alice",), frozenset({"read", "write"}))


def _drop_row(store: SqliteStore, key: DocKey, space: str) -> None:
    with store._tx() as conn:
        conn.execute("DELETE FROM sidecar WHERE tenant=? AND collection=? AND doc_id=? AND space=?", (*key, space))


def test_a_found_document_without_a_row_gets_one_and_is_embedded(tmp_path: Path) -> None:
    c = build(Settings(data_dir=tmp_path / "data", embedder="hash"))
    c.start()
    try:
        space = c.settings.space
        c.docs.put([c.docs.parse(ALICE, "c", f"d{i}", {"body": f"gearbox lubrication {i}"}) for i in range(3)])
        c.docs.put([c.docs.parse(Principal("t", ("user:bob",), frozenset({"read", "write"})), "c", "secret",
                                 {"body": "gearbox lubrication secret", "_acl": ["user:bob"]})])
        lost, secret = DocKey("t", "c", "d0"), DocKey("t", "c", "secret")
        assert isinstance(c.store, SqliteStore)
        _drop_row(c.store, lost, space)
        _drop_row(c.store, secret, space)
        assert c.store.sidecar(lost, space) is None
        before = METRICS.reconciler_repaired.labels(reason="row_missing")._value.get()
        c.planner.open(ALICE, ReadRequest("c", "gearbox", "hybrid", limit=3))  # JSON: touches
        assert isinstance(c.queue, InProcessQueue) and c.queue.wait_idle(30)
        row = c.store.sidecar(lost, space)
        assert row is not None and row.status == SemanticStatus.READY
        assert METRICS.reconciler_repaired.labels(reason="row_missing")._value.get() == before + 1
        # Only what the caller's own filtered reads returned: another user's document stays as it was.
        assert c.store.sidecar(secret, space) is None
    finally:
        c.stop()
