"""A document written again exactly as stored is accepted without a write: no change-log entry,
so no index applies it again (a nightly full re-upload grew the log by the whole corpus)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from services.planner.planner import ReadRequest
from services.wiring import Container, build
from shared.adapters.sqlite_store import SqliteStore
from shared.config import Settings
from shared.metrics import METRICS
from shared.model import DocKey, Principal, StoredDoc

ALICE = Principal("t", ("user:alice",), frozenset({"read", "write"}))
BOB = Principal("t", ("user:bob",), frozenset({"read", "write"}))


@pytest.fixture(params=["sqlite", "postgres"])
def c(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Container]:
    extra = {} if request.param == "sqlite" else {"store": "postgres", "postgres_url": request.getfixturevalue(
        "postgres_url"), "postgres_pool_size": 2}  # PostgreSQL gives fields back from jsonb: still equal
    c = build(Settings(data_dir=tmp_path / "data", embedder="hash", **extra))
    c.start()
    try:
        yield c
    finally:
        c.stop()


def _doc(c: Container, doc_id: str, body: str, acl: list[str] | None = None) -> StoredDoc:
    raw: dict[str, object] = {"body": body}
    if acl is not None:
        raw["_acl"] = acl
    return c.docs.parse(ALICE, "c", doc_id, raw)


def _ids(c: Container, who: Principal, q: str) -> set[str]:
    return {f.key.doc_id for f in c.planner.open(who, ReadRequest("c", q, "keyword", limit=10)).ranking}


def test_an_identical_write_logs_nothing_and_answers_updated(c: Container) -> None:
    docs = [_doc(c, f"d{i}", f"gearbox lubrication {i}", ["user:alice", "user:bob"]) for i in range(3)]
    assert c.docs.put(docs) == ["created"] * 3
    head = c.store.change_log_head()
    before = METRICS.docs_unchanged._value.get()
    again = [_doc(c, f"d{i}", f"gearbox lubrication {i}", ["user:alice", "user:bob"]) for i in range(3)]
    assert c.docs.put(again) == ["updated"] * 3
    assert c.store.change_log_head() == head
    assert METRICS.docs_unchanged._value.get() == before + 3
    # One of them changed (its ACL only): that one is written, logged and enforced.
    mixed = [_doc(c, "d0", "gearbox lubrication 0", ["user:alice"]),
             _doc(c, "d1", "gearbox lubrication 1", ["user:alice", "user:bob"])]
    assert c.docs.put(mixed) == ["updated", "updated"]
    assert [ch.key.doc_id for ch in c.store.changes_since(head)] == ["d0"]
    assert "d0" not in _ids(c, BOB, "gearbox") and "d0" in _ids(c, ALICE, "gearbox")


def test_a_key_sent_twice_in_one_request_keeps_the_last(c: Container) -> None:
    c.docs.put([_doc(c, "d", "first text")])
    c.docs.put([_doc(c, "d", "second text"), _doc(c, "d", "first text")])
    stored = c.store.get_doc(DocKey("t", "c", "d"))
    assert stored is not None and stored.fields["body"] == "first text"


def test_an_identical_write_still_gives_a_missing_row_back(tmp_path: Path) -> None:
    c = build(Settings(data_dir=tmp_path / "data", embedder="hash"))
    c.start()
    try:
        c.docs.put([_doc(c, "d", "gearbox")])
        key, space = DocKey("t", "c", "d"), c.settings.space
        assert isinstance(c.store, SqliteStore)
        with c.store._tx() as conn:
            conn.execute("DELETE FROM sidecar WHERE tenant=? AND collection=? AND doc_id=? AND space=?", (*key, space))
        c.docs.put([_doc(c, "d", "gearbox")])
        assert c.store.sidecar(key, space) is not None
    finally:
        c.stop()
