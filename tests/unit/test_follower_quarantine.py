"""A change an index refuses for good is quarantined instead of blocking the log for every
tenant; an index that refuses everything is down, and nothing is skipped."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import pytest

from shared.adapters.sqlite_store import SqliteStore
from shared.adapters.tantivy_lexical import TantivyLexicalIndex
from shared.indexing import FilePosition, IndexFollower
from shared.model import PUBLIC_PRINCIPAL, DocKey, SemanticStatus, SidecarEntry, StoredDoc
from shared.ports import SearchFilter


class Refusing(TantivyLexicalIndex):
    """The real tantivy index, refusing documents whose id starts with `poison` (like an
    OpenSearch bulk with an immense term), or everything while `down`."""

    down = False

    def apply(self, docs: Sequence[StoredDoc], deletes: Sequence[DocKey]) -> None:
        if self.down or any(d.key.doc_id.startswith("poison") for d in docs):
            raise RuntimeError("immense term")
        super().apply(docs, deletes)


def _put(store: SqliteStore, doc_id: str) -> None:
    key = DocKey("t", "c", doc_id)
    doc = StoredDoc(key, {"body": f"flutter report {doc_id}"}, [PUBLIC_PRINCIPAL], None, f"h-{doc_id}", 1.0)
    store.put_docs([doc], [SidecarEntry(key, "core", SemanticStatus.NONE, f"h-{doc_id}")])


@pytest.fixture
def rig(tmp_path: Path) -> tuple[SqliteStore, Refusing, IndexFollower]:
    store = SqliteStore(tmp_path / "s.sqlite3")
    lexical = Refusing(tmp_path / "lex")
    return store, lexical, IndexFollower(store, lexical, None, FilePosition(tmp_path / "seq"), "core")


def _found(lexical: Refusing) -> set[str]:
    return {h.key.doc_id for h in lexical.search(SearchFilter("t", None, (PUBLIC_PRINCIPAL,)), "flutter", 50)}


def test_a_refused_change_is_quarantined_and_later_changes_still_apply(
        rig: tuple[SqliteStore, Refusing, IndexFollower]) -> None:
    store, lexical, follower = rig
    for doc_id in ("a", "poison", "b"):
        _put(store, doc_id)
    follower.sync()
    assert _found(lexical) == {"a", "b"}
    assert follower.seq == store.change_log_head()  # the log moved past the poison
    letters = store.dead_letters("t")
    assert [(r["doc_id"], r["op"]) for r in letters] == [("poison", "doc")] and "immense term" in str(letters[0])
    assert store.dead_letters("other") == []  # per tenant
    _put(store, "c")
    follower.sync()
    assert _found(lexical) == {"a", "b", "c"}


def test_an_index_that_refuses_everything_is_down_and_nothing_is_skipped(
        rig: tuple[SqliteStore, Refusing, IndexFollower]) -> None:
    store, lexical, follower = rig
    _put(store, "a")
    follower.sync()
    lexical.down = True
    _put(store, "b")
    _put(store, "c")
    with pytest.raises(RuntimeError):
        follower.sync()
    assert follower.seq < store.change_log_head() and store.dead_letters("t") == []
    lexical.down = False
    follower.sync()
    assert _found(lexical) == {"a", "b", "c"}
