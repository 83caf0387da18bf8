"""DocumentStore contract: every adapter must pass it (SQLite for the embedded profile,
PostgreSQL for the distributed one; PostgreSQL-only concurrency tests are in
test_postgres_store.py)."""

from __future__ import annotations

from collections.abc import Callable, Iterator

import pytest

from shared.adapters.sqlite_store import SqliteStore
from shared.model import PUBLIC_PRINCIPAL, CollectionMode, DocKey, SemanticStatus, SidecarEntry, StoredDoc
from shared.ports import DocumentStore

Opener = Callable[[], DocumentStore]  # opens the adapter on the same durable location each call


def _sqlite(request: pytest.FixtureRequest) -> Opener:
    path = request.getfixturevalue("tmp_path") / "s.sqlite3"
    return lambda: SqliteStore(path)


def _postgres(request: pytest.FixtureRequest) -> Opener:
    from shared.adapters.postgres_store import PostgresStore

    url = request.getfixturevalue("postgres_url")  # a fresh database of a private server
    return lambda: PostgresStore(url, pool_size=4)


ADAPTERS: dict[str, Callable[[pytest.FixtureRequest], Opener]] = {"sqlite": _sqlite, "postgres": _postgres}
S = SemanticStatus


@pytest.fixture(params=sorted(ADAPTERS))
def opener(request: pytest.FixtureRequest) -> Opener:
    return ADAPTERS[request.param](request)


@pytest.fixture
def store(opener: Opener) -> Iterator[DocumentStore]:
    s = opener()
    yield s
    s.close()


def key(i: str, tenant: str = "t") -> DocKey:
    return DocKey(tenant, "c", i)


def put(store: DocumentStore, i: str, h: str = "h1", status: SemanticStatus = S.NONE, tenant: str = "t") -> None:
    k = key(i, tenant)
    store.put_docs([StoredDoc(k, {"title": i}, [PUBLIC_PRINCIPAL], None, h, 1.0)],
                   [SidecarEntry(k, "core", status, h, updated_at=1.0)])


def test_put_get_delete(store: DocumentStore) -> None:
    put(store, "a")
    d = store.get_doc(key("a"))
    assert d is not None and d.fields == {"title": "a"} and d.acl == ["*"]
    assert store.sidecar(key("a"), "core").status == S.NONE  # type: ignore[union-attr]
    assert store.delete_doc(key("a")) is True
    assert store.get_doc(key("a")) is None and store.sidecar(key("a"), "core") is None
    assert store.delete_doc(key("a")) is False


def test_commit_vectors_is_guarded_by_content_hash(store: DocumentStore) -> None:
    put(store, "a", "h1", S.QUEUED)
    side = store.sidecar(key("a"), "core")
    assert side is not None
    put(store, "a", "h2", S.QUEUED)  # content changed while the job ran
    assert store.commit_vectors([(side, [1.0, 0.0])], "m") == []
    assert store.sidecar(key("a"), "core").status == S.QUEUED  # type: ignore[union-attr]
    fresh = store.sidecar(key("a"), "core")
    assert store.commit_vectors([(fresh, [0.6, 0.8])], "m") == [key("a")]  # type: ignore[list-item]
    ready = store.sidecar(key("a"), "core")
    assert ready is not None and ready.status == S.READY and ready.model_id == "m" and ready.last_embedded_at
    assert store.vector_for_hash("t", "h2", "core") == [pytest.approx([0.6, 0.8])]
    assert store.vector_for_hash("other-tenant", "h2", "core") is None


def test_a_long_documents_passage_vectors_come_back_in_order(store: DocumentStore) -> None:
    """A document embedded as passages keeps one vector per passage, in order: the vector index
    scores it by its best one and a read names which one matched."""
    put(store, "a", "h1", S.QUEUED)
    side = store.sidecar(key("a"), "core")
    assert side is not None
    passages = [[1.0, 0.0, 0.0], [0.0, 1.0, 0.0], [0.0, 0.0, 1.0]]
    assert store.commit_vectors([(side, passages)], "m") == [key("a")]
    assert store.vector_for_hash("t", "h1", "core") == passages
    assert store.vectors_for([key("a")], "core") == {key("a"): passages}


def test_a_write_decided_before_a_commit_keeps_the_committed_vector(store: DocumentStore) -> None:
    """A write reads the old sidecar outside its transaction; when a worker commits the
    vector of that same content in between, re-writing `queued` must not strand it."""
    put(store, "a", "h1", S.QUEUED)
    side = store.sidecar(key("a"), "core")
    assert side is not None
    assert store.commit_vectors([(side, [1.0, 0.0])], "m") == [key("a")]
    put(store, "a", "h1", S.QUEUED)  # the writer's stale decision: same content, still queued
    after = store.sidecar(key("a"), "core")
    assert after is not None and after.status == S.READY and after.model_id == "m"
    put(store, "a", "h2", S.QUEUED)  # new content is always taken
    assert store.sidecar(key("a"), "core").status == S.QUEUED  # type: ignore[union-attr]
    put(store, "a", "h2", S.DENIED)  # so is a policy decision on the same content
    assert store.sidecar(key("a"), "core").status == S.DENIED  # type: ignore[union-attr]


def test_set_status_only_from(store: DocumentStore) -> None:
    put(store, "a", status=S.NONE)
    put(store, "b", status=S.DENIED)
    moved = store.set_status([key("a"), key("b"), key("a")], "core", S.QUEUED, only_from=[S.NONE, S.STALE])
    assert moved == [key("a")]
    assert store.set_status([key("a"), key("a")], "core", S.STALE) == [key("a")]
    assert store.sidecar(key("b"), "core").status == S.DENIED  # type: ignore[union-attr]


def test_record_failure_keeps_reason(store: DocumentStore) -> None:
    put(store, "a", status=S.QUEUED)
    store.record_failure(key("a"), "core", "embed_error: 500", final=False)
    s = store.sidecar(key("a"), "core")
    assert s is not None and s.status == S.QUEUED and s.attempts == 1
    store.record_failure(key("a"), "core", "embed_error: 500", final=True)
    s = store.sidecar(key("a"), "core")
    assert s is not None and s.status == S.FAILED and s.reason == "embed_error: 500"


def test_change_log_is_ordered_and_complete(store: DocumentStore) -> None:
    assert store.change_log_head() == 0
    put(store, "a")
    put(store, "b")
    store.delete_doc(key("a"))
    changes = store.changes_since(0)
    assert [(c.key.doc_id, c.op) for c in changes] == [("a", "doc"), ("b", "doc"), ("a", "delete")]
    assert store.changes_since(changes[1].seq) == changes[2:]
    assert store.change_log_head() == changes[-1].seq


def test_coverage_is_per_tenant(store: DocumentStore) -> None:
    put(store, "a", status=S.NONE)
    put(store, "b", status=S.DENIED)
    store.set_status([key("b")], "core", S.DENIED, reason="writer_deny")
    put(store, "x", status=S.NONE, tenant="other")
    cov = store.coverage("t", "c", "core")
    assert cov["total"] == 2 and cov["states"]["denied"] == 1  # type: ignore[index]
    assert cov["skipped"] == {"writer_deny": 1}
    assert store.coverage("other", None, "core")["total"] == 1


def test_a_failed_transaction_changes_nothing(store: DocumentStore) -> None:
    k = key("a")
    bad = SidecarEntry(k, "core", S.NONE, "h", updated_at=1.0)
    with pytest.raises(Exception):  # noqa: B017 - any adapter error will do; what matters is atomicity
        store.put_docs([StoredDoc(k, {"x": object()}, ["*"], None, "h", 1.0)], [bad])
    assert store.get_doc(k) is None and store.sidecar(k, "core") is None and store.changes_since(0) == []


def test_delete_removes_the_vector_unless_shared_content_remains(store: DocumentStore) -> None:
    put(store, "a", "h1", S.QUEUED)
    put(store, "b", "h1", S.QUEUED)  # same content in another document of the tenant
    for k in ("a", "b"):
        side = store.sidecar(key(k), "core")
        assert side is not None
        store.commit_vectors([(side, [1.0, 0.0])], "m")
    store.delete_doc(key("a"))
    assert store.vector_for_hash("t", "h1", "core") is not None  # b still uses it
    store.delete_doc(key("b"))
    assert store.vector_for_hash("t", "h1", "core") is None
    assert store.vector_count("t", "core") == 0


def test_queue_counts_are_per_tenant(store: DocumentStore) -> None:
    put(store, "a", status=S.QUEUED)
    put(store, "x", status=S.QUEUED, tenant="other")
    put(store, "y", status=S.QUEUED, tenant="other")
    assert store.queued_count("core", "t") == 1 and store.queued_count("core", "other") == 2
    assert store.oldest_queued("core", "t") is not None and store.oldest_queued("core", "nobody") is None
    assert {r.key.doc_id for r in store.keys_in_status("core", [S.QUEUED], tenant="other")} == {"x", "y"}
    assert {r.key.tenant for r in store.keys_in_status("core", [S.QUEUED])} == {"t", "other"}


def test_an_accepted_write_survives_a_reopen(opener: Opener) -> None:
    first = opener()
    put(first, "a", "h1", S.QUEUED)
    side = first.sidecar(key("a"), "core")
    assert side is not None and first.commit_vectors([(side, [0.25, -0.5, 1.0])], "m") == [key("a")]
    first.set_collection_mode(CollectionMode("t", "c", "eager", 1.0, "manual", True))  # type: ignore[attr-defined]
    first.close()
    again = opener()
    try:
        doc = again.get_doc(key("a"))
        assert doc is not None and doc.fields == {"title": "a"} and doc.content_hash == "h1"
        assert again.sidecar(key("a"), "core").status == S.READY  # type: ignore[union-attr]
        assert again.vectors_for([key("a")], "core") == {key("a"): [[0.25, -0.5, 1.0]]}
        assert [c.op for c in again.changes_since(0)] == ["doc", "vector"]
        assert again.promoted() == {("t", "c")} and again.bind_space("core", "m", 3) == ("m", 3)
        assert again.bind_space("core", "other", 4) == ("m", 3)  # first use wins, across reopens
    finally:
        again.close()


def test_batch_reads_answer_for_many_keys_across_collections(store: DocumentStore) -> None:
    keys = [DocKey("t", f"c{i % 3}", f"d{i}") for i in range(1200)]
    store.put_docs([StoredDoc(k, {"n": i}, ["*"], None, f"h{i}", 1.0) for i, k in enumerate(keys)],
                   [SidecarEntry(k, "core", S.QUEUED, f"h{i}", updated_at=1.0) for i, k in enumerate(keys)])
    wanted = [*keys[::7], DocKey("t", "c0", "missing"), DocKey("other", "c1", "d1")]
    assert set(store.get_docs(wanted)) == set(keys[::7])
    assert set(store.sidecars(wanted, "core")) == set(keys[::7]) and store.sidecars(wanted, "other-space") == {}
    ready = [(e, [float(i), 1.0]) for i, e in enumerate(store.sidecars(keys[:10], "core").values())]
    assert sorted(store.commit_vectors(ready, "m")) == sorted(keys[:10])
    assert set(store.vectors_for(keys[:20], "core")) == set(keys[:10])
    assert store.ready_among([*keys[:20], DocKey("t", "c0", "missing")], "core") == set(keys[:10])
    assert store.ready_among(keys[:20], "other-space") == set() == store.ready_among([], "core")
    moved = store.set_status(keys[5:15], "core", S.STALE, only_from=[S.READY])
    assert moved == keys[5:10]  # in the caller's order, only the rows that were ready
    assert store.vectors_for(keys[:20], "core").keys() == set(keys[:5])
    assert sorted(store.collection_keys("t", "c1")) == sorted(k for k in keys if k.collection == "c1")
    assert len(list(store.collection_keys("t", None))) == 1200


def test_a_follower_position_is_kept_per_name_and_never_lowered(opener: Opener) -> None:
    first = opener()
    assert first.follower_position("vectors:x") == 0
    first.advance_follower_position("vectors:x", 7)
    first.advance_follower_position("vectors:x", 3)  # a slower applier's late save
    first.advance_follower_position("lexical:y", 2)
    first.close()
    again = opener()  # another process on the same database sees it
    try:
        assert again.follower_position("vectors:x") == 7 and again.follower_position("lexical:y") == 2
        again.advance_follower_position("vectors:x", 9)
        again.reset_follower_position("vectors:x")
        assert again.follower_position("vectors:x") == 0 and again.follower_position("lexical:y") == 2
    finally:
        again.close()


@pytest.fixture
def two(opener: Opener) -> Iterator[tuple[DocumentStore, DocumentStore]]:
    """Two instances on one database, as two processes have."""
    a, b = opener(), opener()
    yield a, b
    a.close()
    b.close()


def granted(store: DocumentStore, name: str = "n") -> bool:
    with store.follower_lease(name) as held:
        return held


def test_a_follower_lease_has_one_holder_across_store_instances(two: tuple[DocumentStore, DocumentStore]) -> None:
    a, b = two
    with a.follower_lease("n") as held:
        assert held and not granted(b) and not granted(a)  # another instance, or another thread of this one
        assert granted(b, "other name")
    assert granted(b)


def test_a_follower_lease_is_released_when_the_holder_raises(two: tuple[DocumentStore, DocumentStore]) -> None:
    a, b = two
    with pytest.raises(RuntimeError, match="index down"), a.follower_lease("n") as held:
        assert held
        raise RuntimeError("index down")
    assert granted(b) and granted(a)
