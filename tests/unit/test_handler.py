"""The embed job handler against the real SQLite store and the hash embedder."""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from pathlib import Path

import pytest

from services.core.documents import DocumentService
from services.core.handlers import EmbedHandler
from shared.adapters.edge_vectors import EdgeVectorIndex
from shared.adapters.embedders.hash_embedder import HashEmbedder
from shared.adapters.sqlite_store import SqliteStore
from shared.adapters.tantivy_lexical import TantivyLexicalIndex
from shared.indexing import FilePosition, IndexFollower
from shared.model import DocKey, EmbedJob, Principal, SemanticStatus, StoredDoc
from shared.policy.eligibility import EligibilityPolicy
from shared.ports import EmbedderError, SearchFilter
from tests.support.counting import CountingEmbedder

ADMIN = Principal("t", ("user:admin",), frozenset({"read", "write", "admin"}))
TEXT = "Boundary layer transition on swept wings at high Reynolds numbers in a wind tunnel."


class NullQueue:
    def __init__(self) -> None:
        self.jobs: list[EmbedJob] = []

    def enqueue(self, jobs: Sequence[EmbedJob]) -> int:
        self.jobs += jobs
        return len(jobs)


class Rig:
    def __init__(self, root: Path):
        self.store = SqliteStore(root / "s.sqlite3")
        self.vectors = EdgeVectorIndex(root / "vec")
        self.follower = IndexFollower(self.store, TantivyLexicalIndex(root / "lex"), self.vectors,
                                      FilePosition(root / "seq"), "core")
        self.embedder = CountingEmbedder()
        policy = EligibilityPolicy([])
        self.docs = DocumentService(self.store, self.follower, NullQueue(), policy, {}, "core",  # type: ignore[arg-type]
                                    1_000_000, lambda tenant: set())
        self.handler = EmbedHandler(self.store, self.embedder, policy, {}, max_attempts=3)

    def put(self, doc_id: str, body: dict[str, object]) -> StoredDoc:
        doc = self.docs.parse(ADMIN, "c", doc_id, body)
        self.docs.put([doc])
        return doc

    def job(self, doc: StoredDoc) -> EmbedJob:
        self.store.set_status([doc.key], "core", SemanticStatus.QUEUED)
        return EmbedJob(doc.key, "core", doc.content_hash)

    def status(self, doc_id: str) -> SemanticStatus:
        side = self.store.sidecar(DocKey("t", "c", doc_id), "core")
        assert side is not None
        return side.status


@pytest.fixture
def rig(tmp_path: Path) -> Iterator[Rig]:
    r = Rig(tmp_path)
    yield r
    r.store.close()


def test_duplicate_jobs_embed_once(rig: Rig) -> None:
    doc = rig.put("a", {"title": "Wings", "body": TEXT})
    job = rig.job(doc)
    out = rig.handler.run([job, job])
    assert out.changed == [doc.key] and rig.embedder.calls == [1]
    assert rig.handler.run([job]).changed == [] and rig.embedder.calls == [1]
    assert rig.status("a") == SemanticStatus.READY


def test_job_for_old_content_is_dropped(rig: Rig) -> None:
    old = rig.put("a", {"title": "Wings", "body": TEXT})
    job = rig.job(old)
    rig.put("a", {"title": "Wings", "body": TEXT + " Revised."})
    assert rig.handler.run([job]).changed == [] and rig.embedder.calls == []
    assert rig.status("a") != SemanticStatus.READY


def test_writer_deny_at_job_time(rig: Rig) -> None:
    doc = rig.put("a", {"title": "Wings", "body": TEXT})
    job = rig.job(doc)
    rig.store.put_docs([StoredDoc(doc.key, doc.fields, doc.acl, "deny", doc.content_hash, 1.0)],
                       [rig.store.sidecar(doc.key, "core")])  # type: ignore[list-item]
    assert rig.handler.run([job]).changed == [doc.key]
    assert rig.status("a") == SemanticStatus.DENIED and rig.embedder.calls == []


def test_reverted_content_reuses_stored_vector(rig: Rig) -> None:
    first = rig.put("a", {"title": "Wings", "body": TEXT})
    rig.handler.run([rig.job(first)])
    second = rig.put("a", {"title": "Wings", "body": TEXT + " Revised."})
    assert rig.status("a") == SemanticStatus.STALE
    rig.handler.run([rig.job(second)])
    again = rig.put("a", {"title": "Wings", "body": TEXT})
    assert rig.status("a") == SemanticStatus.STALE
    assert rig.handler.run([rig.job(again)]).changed == [again.key]
    assert rig.embedder.calls == [1, 1]  # the third embed came from the store, not the provider


def test_ready_vector_follows_into_the_index_and_stale_leaves_it(rig: Rig) -> None:
    doc = rig.put("a", {"title": "Wings", "body": TEXT})
    rig.handler.run([rig.job(doc)])
    rig.follower.sync()
    flt = SearchFilter("t", None, ("*",))
    q = rig.embedder.embed_query(TEXT)
    assert [h.key for h in rig.vectors.search("core", flt, q, 5)] == [doc.key]
    rig.put("a", {"title": "Wings", "body": "Completely different text about boats and harbours."})
    assert rig.vectors.search("core", flt, q, 5) == []


def test_follower_rebuilds_a_lost_index(rig: Rig, tmp_path: Path) -> None:
    doc = rig.put("a", {"title": "Wings", "body": TEXT})
    rig.handler.run([rig.job(doc)])
    fresh = EdgeVectorIndex(tmp_path / "vec2")
    lex = TantivyLexicalIndex(tmp_path / "lex2")
    IndexFollower(rig.store, lex, fresh, FilePosition(tmp_path / "seq2"), "core").sync()
    flt = SearchFilter("t", None, ("*",))
    assert [h.key for h in fresh.search("core", flt, rig.embedder.embed_query(TEXT), 5)] == [doc.key]
    assert [h.key for h in lex.search(flt, "swept wings", 5)] == [doc.key]


class RefusingEmbedder(CountingEmbedder):
    """A provider that refuses (4xx, not transient) any batch holding a poisoned text."""

    def embed(self, texts: Sequence[str]) -> list[list[float]]:
        self.calls.append(len(texts))
        if any("POISON" in t for t in texts):
            raise EmbedderError("400 input too long", transient=False)
        return HashEmbedder.embed(self, texts)


def test_one_refused_document_does_not_sink_its_batch(rig: Rig) -> None:
    docs = [rig.put(i, {"title": i, "body": TEXT + (" POISON" if i == "bad" else "")}) for i in ("a", "bad", "b")]
    embedder = RefusingEmbedder()
    handler = EmbedHandler(rig.store, embedder, EligibilityPolicy([]), {}, max_attempts=3)
    out = handler.run([rig.job(d) for d in docs])
    assert (rig.status("a"), rig.status("b"), rig.status("bad")) == (
        SemanticStatus.READY, SemanticStatus.READY, SemanticStatus.FAILED)
    assert embedder.calls == [3, 1, 1, 1] and not out.retry  # the batch, then each document alone
