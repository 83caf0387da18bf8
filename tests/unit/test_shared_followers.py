"""Index followers and their positions: a file per process for embedded indexes, one position
in the store and one applier at a time for a shared index. Two store instances on one database
with two followers stand in for two API replicas; the shared index is a real QdrantVectorIndex
(qdrant-client local mode, which one process only can open, so both "replicas" share the
instance), counting what it is asked to upsert."""

from __future__ import annotations

import math
import threading
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path

import pytest
from qdrant_client import QdrantClient

from services.wiring import _build_followers, follower_name
from shared.adapters.qdrant_vectors import QdrantVectorIndex
from shared.adapters.sqlite_store import SqliteStore
from shared.adapters.tantivy_lexical import TantivyLexicalIndex
from shared.config import Settings
from shared.indexing import FilePosition, IndexFollower, StorePosition
from shared.model import DocKey, SemanticStatus, SidecarEntry, StoredDoc
from shared.ports import DocumentStore, SearchFilter

pytestmark = pytest.mark.filterwarnings("ignore:Payload indexes have no effect:UserWarning")

NAME = "vectors:qdrant:test/vibe-core"
Opener = Callable[[], DocumentStore]


class CountingQdrant(QdrantVectorIndex):
    """The real adapter on a local-mode client; records the keys it upserts and can pause an
    upsert (to hold the applier inside its lease while the test looks)."""

    def __init__(self) -> None:
        super().__init__(QdrantClient(location=":memory:"))
        self.upserted: list[str] = []
        self.entered, self.resume = threading.Event(), threading.Event()
        self.resume.set()

    def upsert(self, space: str, items: Sequence[tuple[StoredDoc, list[float]]]) -> None:
        self.entered.set()
        assert self.resume.wait(10)
        self.upserted += [d.key.doc_id for d, _ in items]
        super().upsert(space, items)


@pytest.fixture(params=["sqlite", "postgres"])
def opener(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Opener]:
    """Opens store instances on one database (each one a replica's connection to it)."""
    opened: list[DocumentStore] = []

    def open_store() -> DocumentStore:
        if request.param == "sqlite":
            opened.append(SqliteStore(tmp_path / "s.sqlite3"))
        else:
            from shared.adapters.postgres_store import PostgresStore

            opened.append(PostgresStore(request.getfixturevalue("postgres_url"), pool_size=3))
        return opened[-1]

    yield open_store
    for s in opened:
        s.close()


def ready(store: DocumentStore, *ids: str) -> None:
    """Documents written and embedded: a `doc` and a `vector` change each."""
    keys = [DocKey("t", "c", i) for i in ids]
    store.put_docs([StoredDoc(k, {"title": k.doc_id}, ["*"], None, "h" + k.doc_id, 1.0) for k in keys],
                   [SidecarEntry(k, "core", SemanticStatus.QUEUED, "h" + k.doc_id, updated_at=1.0) for k in keys])
    entries = [(s, [1.0, float(n)]) for n, s in enumerate(store.sidecars(keys, "core").values())]
    store.commit_vectors(entries, "m")


def replica(store: DocumentStore, index: CountingQdrant) -> IndexFollower:
    return IndexFollower(store, None, index, StorePosition(store, NAME), "core")


def searchable(index: QdrantVectorIndex) -> set[str]:
    hits = index.search("core", SearchFilter("t", None, ("*",)), [1.0, 1.0], 100)
    return {h.key.doc_id for h in hits}


def test_file_position_is_per_process_and_always_leased(tmp_path: Path) -> None:
    pos = FilePosition(tmp_path / "index.seq")
    assert pos.load() == 0
    pos.save(12)
    assert FilePosition(tmp_path / "index.seq").load() == 12 and (tmp_path / "index.seq").read_text() == "12"
    with pos.lease() as a, pos.lease() as b:
        assert a and b
    pos.reset()
    assert pos.load() == 0


def test_lag_counts_committed_changes_not_yet_applied(opener: Opener, monkeypatch: pytest.MonkeyPatch) -> None:
    store = opener()
    follower = replica(store, CountingQdrant())
    assert follower.lag() == 0 and follower.label == NAME
    ready(store, "a", "b")  # two `doc` and two `vector` changes
    assert follower.lag() == 4
    follower.sync()
    assert follower.lag() == 0

    def away() -> int:
        raise ConnectionError("database restarting")

    monkeypatch.setattr(store, "change_log_head", away)
    assert math.isnan(follower.lag())  # a scrape while the store is away reads "unknown", never raises


def test_a_new_replica_starts_at_the_shared_position(opener: Opener) -> None:
    index = CountingQdrant()
    first = replica(opener(), index)
    ready(first.store, "a", "b", "c")
    assert first.sync() == 6 and sorted(index.upserted) == ["a", "b", "c"]
    second = replica(opener(), index)  # a fresh process: no file, nothing of its own
    assert second.sync() == 0 and len(index.upserted) == 3
    assert second.seq == first.seq == first.store.changes_since(0)[-1].seq


def hold_lease_paused(first: IndexFollower, index: CountingQdrant) -> threading.Thread:
    """`first` writes "a" and starts applying it; returns once it holds the lease, paused
    inside its upsert until `index.resume` is set."""
    ready(first.store, "a")
    index.resume.clear()
    applying = threading.Thread(target=first.sync)
    applying.start()
    assert index.entered.wait(10)
    return applying


def test_one_applier_at_a_time_and_the_position_is_shared(opener: Opener) -> None:
    index = CountingQdrant()
    first, second = replica(opener(), index), replica(opener(), index)
    applying = hold_lease_paused(first, index)
    ready(second.store, "b")
    assert second.sync() == 0 and index.upserted == []  # skipped: `first` applies for both
    index.resume.set()
    applying.join(10)
    assert sorted(index.upserted) == ["a", "b"] and searchable(index) == {"a", "b"}
    assert first.seq == second.seq == second.store.changes_since(0)[-1].seq
    assert second.sync() == 0 and first.sync() == 0 and len(index.upserted) == 2


class Refusals(StorePosition):
    """A shared position that tells when its lease was refused (another replica holds it)."""

    def __init__(self, store: DocumentStore):
        super().__init__(store, NAME)
        self.refused = threading.Event()

    @contextmanager
    def lease(self) -> Iterator[bool]:
        with super().lease() as granted:
            if not granted:
                self.refused.set()
            yield granted


def test_a_writer_that_waits_returns_once_its_change_is_in_the_shared_index(opener: Opener) -> None:
    """A write (an ACL that revokes a reader, a delete) must be searched no more once it
    returns, even while another replica holds the lease."""
    index = CountingQdrant()
    first, store = replica(opener(), index), opener()
    position = Refusals(store)
    second = IndexFollower(store, None, index, position, "core")
    applying = hold_lease_paused(first, index)
    ready(second.store, "b")
    seen: list[set[str]] = []
    writer = threading.Thread(target=lambda: (second.sync(wait=30), seen.append(searchable(index))))
    writer.start()
    assert position.refused.wait(10)  # the writer is inside its sync, the lease taken
    index.resume.set()
    applying.join(10)
    writer.join(10)
    assert seen == [{"a", "b"}]
    assert second.sync(wait=0.05) == 0  # nothing pending: no wait at all


class CommitBeforeRelease(StorePosition):
    """The holder's lease, with another replica writing (and skipping its sync) after the
    holder's last read of the log and before it lets go: the narrowest window."""

    def __init__(self, store: DocumentStore, writer: Callable[[], None]):
        super().__init__(store, NAME)
        self.writer: Callable[[], None] | None = writer

    @contextmanager
    def lease(self) -> Iterator[bool]:
        with super().lease() as granted:
            yield granted
            writer, self.writer = self.writer, None
            if granted and writer is not None:
                writer()


def test_a_change_whose_writer_skipped_is_applied_by_the_holder(opener: Opener) -> None:
    index = CountingQdrant()
    other = replica(opener(), index)

    def write_and_skip() -> None:
        ready(other.store, "late")
        assert other.sync() == 0  # the lease is still held

    store = opener()
    holder = IndexFollower(store, None, index, CommitBeforeRelease(store, write_and_skip), "core")
    ready(store, "a")
    holder.sync()
    assert searchable(index) == {"a", "late"} and holder.seq == store.changes_since(0)[-1].seq


def test_rebuild_replays_the_log_under_the_lease(opener: Opener) -> None:
    index = CountingQdrant()
    follower = replica(opener(), index)
    ready(follower.store, "a", "b")
    follower.sync()
    with opener().follower_lease(NAME) as held:  # a replica is applying
        assert held and follower.rebuild(wait=0.2) is None
    assert len(index.upserted) == 2
    assert follower.rebuild(wait=0) == 4 and sorted(index.upserted) == ["a", "a", "b", "b"]


def test_build_gives_shared_indexes_their_own_store_position(tmp_path: Path) -> None:
    settings = Settings(data_dir=tmp_path, vectors="qdrant", qdrant_url="http://u:secret@qdrant:6333")
    store = SqliteStore(tmp_path / "s.sqlite3")
    lexical, vectors = TantivyLexicalIndex(tmp_path / "lex"), CountingQdrant()
    try:
        followers = _build_followers(settings, store, lexical, vectors)
        own, shared = followers.members
        assert (own.lexical, own.vectors, shared.lexical, shared.vectors) == (lexical, None, None, vectors)
        assert isinstance(own.position, FilePosition) and own.position.path == tmp_path / "index.seq"
        assert isinstance(shared.position, StorePosition) and followers.of_vectors() is shared
        assert shared.position.name == "vectors:qdrant:qdrant:6333/vibe-core"  # no credentials
        ready(store, "a")
        with SqliteStore(tmp_path / "s.sqlite3").follower_lease(shared.position.name) as held:
            assert held and followers.sync() == 2  # another replica applies to the shared index
        assert followers.seq == shared.seq == 0 < own.seq  # what is pending somewhere
        search = Settings(lexical="opensearch", opensearch_url="https://a:b@os:9200", space="s2")
        assert follower_name(search, "lexical") == "lexical:opensearch:os:9200/vibe-lex-"
        assert follower_name(search, "vectors") is None
    finally:
        lexical.close()
        store.close()


def test_a_read_waits_for_the_shared_vector_index_before_it_reranks(tmp_path: Path) -> None:
    """A document found ready in the store while another replica holds the shared index's
    lease is not searchable yet: the read keeps it pending (instead of ranking it at the
    semantic floor, neither searched nor imputed) until the index has caught up."""
    from services.planner.planner import ReadRequest
    from services.wiring import build
    from shared.model import EmbedJob, Principal

    c = build(Settings(data_dir=tmp_path, embedder="hash", embed_dim=32))
    try:
        c.follower.members[0].vectors = None  # the vector index becomes a shared one, as in wiring
        shared = IndexFollower(c.store, None, c.vectors, StorePosition(c.store, NAME), "core")
        c.follower.members.append(shared)
        c.planner.follower = shared
        who = Principal("t", ("user:a",), frozenset({"read", "write"}))
        c.docs.put([c.docs.parse(who, "c", i, {"title": f"gliders and wings {i}"}) for i in ("a", "b")])
        session = c.planner.open(who, ReadRequest("c", "gliders wings", "hybrid", limit=5))
        assert session.pending == {DocKey("t", "c", "a"), DocKey("t", "c", "b")}
        c.handler.run([EmbedJob(k, "core", c.store.get_doc(k).content_hash) for k in session.pending])  # type: ignore[union-attr]
        with SqliteStore(tmp_path / "vibe.sqlite3").follower_lease(NAME) as held:  # another replica applies
            assert held and session.refresh() is False
            assert len(session.pending) == 2  # ready in the store, not yet in the index
        session.refresh()
        assert session.pending == set()
        assert {f.key.doc_id for f in session.ranking if f.semantic_score is not None} == {"a", "b"}
    finally:
        c.stop()
