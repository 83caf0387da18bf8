"""A shared lexical index that is away refuses every write: the follower keeps its position and
quarantines nothing, even when the batch holds changes that ask nothing of that index (vector
changes, which a lexical-only follower applies as no-ops)."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from shared.adapters.sqlite_store import SqliteStore
from shared.adapters.tantivy_lexical import TantivyLexicalIndex
from shared.errors import IndexUnavailable
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


class Flapping(TantivyLexicalIndex):
    """Answers according to `plan`, one entry per write that sends something (True: refused as by
    a server away); once the plan is used up, answers as the last entry says."""

    plan: list[bool] = []

    def apply(self, docs: Sequence[StoredDoc], deletes: Sequence[DocKey]) -> None:
        if docs or deletes:
            away = self.plan.pop(0) if len(self.plan) > 1 else self.plan[0]
            if away:
                raise ConnectionError("connection refused")
        super().apply(docs, deletes)


def _three_docs(tmp_path: Path) -> tuple[SqliteStore, Flapping, IndexFollower]:
    store = SqliteStore(tmp_path / "s.sqlite3")
    lexical = Flapping(tmp_path / "lex")
    follower = IndexFollower(store, lexical, None, FilePosition(tmp_path / "seq"), "core")
    keys = [DocKey("t", "c", i) for i in ("a", "b", "c")]
    docs = [StoredDoc(k, {"title": f"rotor {k.doc_id}"}, [PUBLIC_PRINCIPAL], None, "h" + k.doc_id, 1.0) for k in keys]
    store.put_docs(docs, [SidecarEntry(k, "core", SemanticStatus.QUEUED, "h" + k.doc_id) for k in keys])
    return store, lexical, follower


def test_an_index_back_in_the_middle_of_the_pass_quarantines_nothing(tmp_path: Path) -> None:
    """Away for the batch and the first change tried alone, back for the next ones: the first
    change was refused by the outage, not for good, and must be indexed (it was quarantined,
    an acknowledged document missing from OpenSearch after its restart)."""
    store, lexical, follower = _three_docs(tmp_path)
    lexical.plan = [True, True, False]
    follower.sync()
    assert store.dead_letters("t") == [] and follower.seq == store.change_log_head()
    hits = lexical.search(SearchFilter("t", None, (PUBLIC_PRINCIPAL,)), "rotor", 10)
    assert sorted(h.key.doc_id for h in hits) == ["a", "b", "c"]


def test_an_index_gone_in_the_middle_of_the_pass_quarantines_nothing(tmp_path: Path) -> None:
    """Away for the batch, answers the first change alone, then away again: the later changes
    are not refused for good; the position stays and they are applied once it is back."""
    store, lexical, follower = _three_docs(tmp_path)
    lexical.plan = [True, False, True]
    assert not follower.catch_up()
    assert store.dead_letters("t") == [] and follower.seq < store.change_log_head()
    lexical.plan = [False]
    follower.sync()
    hits = lexical.search(SearchFilter("t", None, (PUBLIC_PRINCIPAL,)), "rotor", 10)
    assert sorted(h.key.doc_id for h in hits) == ["a", "b", "c"]


class Unavailable(TantivyLexicalIndex):
    """Answers that it cannot take writes now (as OpenSearch away, or busy), counting the tries."""

    down = False
    tries = 0

    def apply(self, docs: Sequence[StoredDoc], deletes: Sequence[DocKey]) -> None:
        if self.down and (docs or deletes):
            self.tries += 1
            raise IndexUnavailable("connection refused")
        super().apply(docs, deletes)


def test_an_index_that_says_it_is_unavailable_is_tried_once_per_sync(tmp_path: Path) -> None:
    """No change-by-change pass (each try may wait for a timeout on a hung server): one try of
    the batch, nothing quarantined, the position kept; once it answers, everything applies."""
    store = SqliteStore(tmp_path / "s.sqlite3")
    lexical = Unavailable(tmp_path / "lex")
    follower = IndexFollower(store, lexical, None, FilePosition(tmp_path / "seq"), "core")
    lexical.down = True
    keys = [DocKey("t", "c", i) for i in ("a", "b", "c")]
    store.put_docs([StoredDoc(k, {"title": "rotor"}, [PUBLIC_PRINCIPAL], None, "h" + k.doc_id, 1.0) for k in keys],
                   [SidecarEntry(k, "core", SemanticStatus.QUEUED, "h" + k.doc_id) for k in keys])
    assert not follower.catch_up()
    assert lexical.tries == 1 and store.dead_letters("t") == [] and follower.seq == 0
    lexical.down = False
    follower.sync()
    hits = lexical.search(SearchFilter("t", None, (PUBLIC_PRINCIPAL,)), "rotor", 10)
    assert sorted(h.key.doc_id for h in hits) == ["a", "b", "c"]
