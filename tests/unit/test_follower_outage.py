"""A shared lexical index that is away refuses every write: the follower keeps its position and
quarantines nothing, even when the batch holds changes that ask nothing of that index (vector
changes, which a lexical-only follower applies as no-ops)."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from shared.adapters.sqlite_store import SqliteStore
from shared.adapters.tantivy_lexical import TantivyLexicalIndex
from shared.indexing import FilePosition, IndexFollower
from shared.model import PUBLIC_PRINCIPAL, DocKey, SemanticStatus, SidecarEntry, StoredDoc
from shared.ports import SearchFilter


class Away(TantivyLexicalIndex):
    """Refuses every write that sends something, as a server that does not answer."""

    down = False

    def apply(self, docs: Sequence[StoredDoc], deletes: Sequence[DocKey]) -> None:
        if self.down and (docs or deletes):
            raise ConnectionError("connection refused")
        super().apply(docs, deletes)


def test_an_index_away_quarantines_nothing_when_vector_changes_share_the_batch(tmp_path: Path) -> None:
    store = SqliteStore(tmp_path / "s.sqlite3")
    lexical = Away(tmp_path / "lex")
    follower = IndexFollower(store, lexical, None, FilePosition(tmp_path / "seq"), "core")
    keys = [DocKey("t", "c", i) for i in ("a", "b")]
    docs = [StoredDoc(k, {"title": "rotor"}, [PUBLIC_PRINCIPAL], None, "h" + k.doc_id, 1.0) for k in keys]
    store.put_docs(docs, [SidecarEntry(k, "core", SemanticStatus.QUEUED, "h" + k.doc_id) for k in keys])
    follower.sync()
    lexical.down = True
    b = DocKey("t", "c", "b")
    store.put_docs([StoredDoc(b, {"title": "rotor edited"}, [PUBLIC_PRINCIPAL], None, "h2", 2.0)],
                   [SidecarEntry(b, "core", SemanticStatus.QUEUED, "h2")])
    store.commit_vectors([(s, [1.0, 0.0]) for s in store.sidecars(keys[:1], "core").values()], "m")
    assert any(c.op != "doc" for c in store.changes_since(follower.seq, 10))
    assert not follower.catch_up()
    assert store.dead_letters("t") == [] and follower.seq < store.change_log_head()
    lexical.down = False
    follower.sync()
    hits = lexical.search(SearchFilter("t", None, (PUBLIC_PRINCIPAL,)), "edited", 10)
    assert [h.key for h in hits] == [b]
