"""DocumentStore contract: every adapter must pass it (the OpenSearch-backed store joins in #3)."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from shared.adapters.sqlite_store import SqliteStore
from shared.model import PUBLIC_PRINCIPAL, DocKey, SemanticStatus, SidecarEntry, StoredDoc
from shared.ports import DocumentStore

ADAPTERS: dict[str, Callable[[Path], DocumentStore]] = {"sqlite": lambda p: SqliteStore(p / "s.sqlite3")}
S = SemanticStatus


@pytest.fixture(params=sorted(ADAPTERS))
def store(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[DocumentStore]:
    s = ADAPTERS[request.param](tmp_path)
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
    assert store.vector_for_hash("t", "h2", "core") == pytest.approx([0.6, 0.8])
    assert store.vector_for_hash("other-tenant", "h2", "core") is None


def test_set_status_only_from(store: DocumentStore) -> None:
    put(store, "a", status=S.NONE)
    put(store, "b", status=S.DENIED)
    moved = store.set_status([key("a"), key("b")], "core", S.QUEUED, only_from=[S.NONE, S.STALE])
    assert moved == [key("a")]
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
    put(store, "a")
    put(store, "b")
    store.delete_doc(key("a"))
    changes = store.changes_since(0)
    assert [(c.key.doc_id, c.op) for c in changes] == [("a", "doc"), ("b", "doc"), ("a", "delete")]
    assert store.changes_since(changes[1].seq) == changes[2:]


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
