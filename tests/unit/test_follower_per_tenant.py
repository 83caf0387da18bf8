"""A read catches the index up only when its own tenant has changes the index has not applied:
a read of tenant B does not queue behind tenant A's bulk being applied, and a read of a tenant
with a pending change still applies it before searching."""

from __future__ import annotations

import threading
import time
from collections.abc import Sequence
from pathlib import Path

from shared.adapters.sqlite_store import SqliteStore
from shared.adapters.tantivy_lexical import TantivyLexicalIndex
from shared.indexing import FilePosition, IndexFollower
from shared.model import PUBLIC_PRINCIPAL, DocKey, SemanticStatus, SidecarEntry, StoredDoc
from shared.ports import SearchFilter


class Held(TantivyLexicalIndex):
    """An apply that waits for `release` once `hold` is set: another tenant's bulk mid-apply."""

    def __init__(self, path: Path) -> None:
        super().__init__(path)
        self.hold = False
        self.inside = threading.Event()
        self.release = threading.Event()

    def apply(self, docs: Sequence[StoredDoc], deletes: Sequence[DocKey]) -> None:
        if self.hold and docs:
            self.inside.set()
            assert self.release.wait(10)
        super().apply(docs, deletes)


def _put(store: SqliteStore, tenant: str, doc_id: str, title: str) -> DocKey:
    k = DocKey(tenant, "c", doc_id)
    store.put_docs([StoredDoc(k, {"title": title}, [PUBLIC_PRINCIPAL], None, "h" + title, 1.0)],
                   [SidecarEntry(k, "core", SemanticStatus.NONE, "h" + title)])
    return k


def test_a_read_waits_only_for_its_own_tenants_changes(tmp_path: Path) -> None:
    store = SqliteStore(tmp_path / "s.sqlite3")
    lexical = Held(tmp_path / "lex")
    follower = IndexFollower(store, lexical, None, FilePosition(tmp_path / "seq"), "core")
    b = _put(store, "tb", "b1", "rotor")
    assert follower.catch_up()
    assert store.change_log_head("tb") == store.change_log_head() > 0 and store.change_log_head("nobody") == 0

    lexical.hold = True
    _put(store, "ta", "a1", "rotor bulk")
    writer = threading.Thread(target=follower.catch_up)  # tenant A's write, applying its bulk
    writer.start()
    assert lexical.inside.wait(10)  # A's apply holds the follower's lock now

    done = threading.Event()
    threading.Thread(target=lambda: (follower.catch_up(tenant="tb"), done.set())).start()
    assert done.wait(5), "tenant B's read queued behind tenant A's apply"
    hits = lexical.search(SearchFilter("tb", None, (PUBLIC_PRINCIPAL,)), "rotor", 10)
    assert [h.key for h in hits] == [b]

    # tenant A's own read has a pending change: it waits for the apply, then sees the document
    a_read = threading.Event()
    threading.Thread(target=lambda: (follower.catch_up(tenant="ta"), a_read.set())).start()
    assert not a_read.wait(0.3)
    lexical.release.set()
    writer.join(10)
    assert a_read.wait(10)
    hits = lexical.search(SearchFilter("ta", None, (PUBLIC_PRINCIPAL,)), "bulk", 10)
    assert [h.key.doc_id for h in hits] == ["a1"]


class HeldOn(TantivyLexicalIndex):
    """An apply that waits for `release` when it writes document `a2`."""

    def __init__(self, path: Path) -> None:
        super().__init__(path)
        self.inside = threading.Event()
        self.release = threading.Event()

    def apply(self, docs: Sequence[StoredDoc], deletes: Sequence[DocKey]) -> None:
        if any(d.key.doc_id == "a2" for d in docs):
            self.inside.set()
            assert self.release.wait(10)
        super().apply(docs, deletes)


def test_a_writer_stops_waiting_once_another_threads_apply_passed_its_change(tmp_path: Path) -> None:
    store = SqliteStore(tmp_path / "s.sqlite3")
    lexical = HeldOn(tmp_path / "lex")
    follower = IndexFollower(store, lexical, None, FilePosition(tmp_path / "seq"), "core")
    follower.catch_up()
    _put(store, "ta", "a1", "first")
    _put(store, "tb", "b1", "written by b")  # B's write, stored; its catch-up comes below
    _put(store, "ta", "a2", "held")
    applier = threading.Thread(target=lambda: follower.sync(batch=1))  # A's drain, one change a batch
    applier.start()
    assert lexical.inside.wait(10)  # a1 and b1 applied and saved; a2 in progress, the lock held
    done = threading.Event()
    threading.Thread(target=lambda: (follower.sync(tenant="tb"), done.set())).start()
    try:
        assert done.wait(5), "B's write waited for the rest of A's drain"
    finally:
        lexical.release.set()
        applier.join(10)
    hits = lexical.search(SearchFilter("tb", None, (PUBLIC_PRINCIPAL,)), "written", 10)
    assert [h.key.doc_id for h in hits] == ["b1"]


def test_a_tenants_catch_up_applies_the_log_up_to_its_own_newest_change(tmp_path: Path) -> None:
    """Not to the head: another tenant's pipeline adding changes all the while must not keep a
    caller applying for it. The rest is the next full sync's."""
    store = SqliteStore(tmp_path / "s.sqlite3")
    lexical = TantivyLexicalIndex(tmp_path / "lex")
    follower = IndexFollower(store, lexical, None, FilePosition(tmp_path / "seq"), "core")
    follower.catch_up()
    _put(store, "ta", "a1", "gearbox")
    _put(store, "tb", "b1", "propeller")
    _put(store, "ta", "a2", "turbine")
    follower.sync(tenant="tb")  # the ordered path (taken when an apply ahead cannot be made)
    assert follower.seq == store.change_log_head("tb") < store.change_log_head()
    ta = SearchFilter("ta", None, (PUBLIC_PRINCIPAL,))
    assert [h.key.doc_id for h in lexical.search(ta, "gearbox", 10)] == ["a1"]
    assert follower.catch_up()
    assert follower.seq == store.change_log_head()
    assert [h.key.doc_id for h in lexical.search(ta, "turbine", 10)] == ["a2"]


def test_a_tenants_pending_changes_are_applied_ahead_of_others_then_again_in_order(tmp_path: Path) -> None:
    """A writer or reader of tenant B applies B's own pending changes at once, ahead of tenant
    A's pending ones and while A's apply holds the follower's lock; the ordered pass applies
    everything later (B's change again, to the same effect)."""
    store = SqliteStore(tmp_path / "s.sqlite3")
    lexical = Held(tmp_path / "lex")
    follower = IndexFollower(store, lexical, None, FilePosition(tmp_path / "seq"), "core")
    follower.catch_up()
    _put(store, "ta", "a0", "gearbox")  # pending, ahead of B's change in the log
    lexical.hold = True
    writer = threading.Thread(target=follower.catch_up)  # A's apply of a0: holds the lock, stuck inside
    writer.start()
    assert lexical.inside.wait(10)
    lexical.hold = False
    _put(store, "ta", "a1", "turbine")
    b = _put(store, "tb", "b1", "propeller")
    done = threading.Event()
    threading.Thread(target=lambda: (follower.catch_up(tenant="tb"), done.set())).start()
    try:
        assert done.wait(5), "B waited for A's apply"
        tb, ta = SearchFilter("tb", None, (PUBLIC_PRINCIPAL,)), SearchFilter("ta", None, (PUBLIC_PRINCIPAL,))
        assert [h.key for h in lexical.search(tb, "propeller", 10)] == [b]
        assert lexical.search(ta, "turbine", 10) == []  # A's change still waits for the ordered pass
        assert follower.seq < store.change_log_head("tb")  # the position has not moved past B's change
    finally:
        lexical.release.set()
        writer.join(10)
    deadline = time.monotonic() + 10  # the ordered pass, on its own thread, moves the position
    while follower.seq < store.change_log_head() and time.monotonic() < deadline:
        time.sleep(0.01)
    assert follower.seq == store.change_log_head()
    assert [h.key.doc_id for h in lexical.search(ta, "turbine", 10)] == ["a1"]
    assert [h.key for h in lexical.search(tb, "propeller", 10)] == [b]
