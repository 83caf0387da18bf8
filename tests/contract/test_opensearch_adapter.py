"""What the OpenSearch adapter claims beyond the shared lexical contract, against a real node
(the session's `opensearch_url`; each test in its own index prefix, dropped afterwards): ACL
tokens past `ignore_above` fail closed, bulks are split by bytes and actions, an outdated
template is rebuilt from the store of record, and a change the engine refuses for good is
quarantined to the dead letters while the rest of the log applies.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from opensearchpy import OpenSearch

from shared.adapters import opensearch_lexical as osl
from shared.adapters.opensearch_lexical import OpenSearchBulkError, OpenSearchLexicalIndex, index_name
from shared.adapters.sqlite_store import SqliteStore
from shared.indexing import IndexFollower, StorePosition
from shared.model import PUBLIC_PRINCIPAL, DocKey, SemanticStatus, SidecarEntry, StoredDoc
from shared.ports import SearchFilter


@pytest.fixture
def index(opensearch_url: str) -> Iterator[OpenSearchLexicalIndex]:
    idx = OpenSearchLexicalIndex(OpenSearch(hosts=[opensearch_url], timeout=60),
                                 prefix=f"vibe-adapter-{uuid.uuid4().hex[:12]}-")
    yield idx
    idx.drop()
    idx.close()


def doc(doc_id: str, acl: list[str] | None = None, body: str = "rotor icing", tenant: str = "t") -> StoredDoc:
    return StoredDoc(DocKey(tenant, "c", doc_id), {"title": "rotor", "body": body}, acl or [PUBLIC_PRINCIPAL], None,
                     "h", 0.0)


def found(idx: OpenSearchLexicalIndex, acl: tuple[str, ...], text: str = "rotor", tenant: str = "t") -> set[str]:
    return {h.key.doc_id for h in idx.search(SearchFilter(tenant, None, acl), text, 100)}


def test_a_principal_past_ignore_above_matches_nothing_and_grants_nothing(index: OpenSearchLexicalIndex) -> None:
    """A principal longer than the `acl` keyword limit is not indexed: the document is unreadable
    through it (fail closed), its other principals still read it, and a principal sharing its
    first 1,024 characters (what a truncating engine would index) reads nothing."""
    limit = osl.ACL_IGNORE_ABOVE
    at_limit, past = "u:" + "a" * (limit - 2), "u:" + "a" * (limit - 2) + "b"
    twin = "u:" + "a" * (limit - 2) + "c"
    index.apply([doc("long", [past]), doc("both", [past, "g:short"]), doc("edge", [at_limit])], [])
    assert found(index, (past,)) == set()  # not even its own principal: unreadable, never readable
    assert found(index, (twin,)) == set() and found(index, (at_limit[:-1],)) == set()
    assert found(index, (at_limit,)) == {"edge"}  # up to the limit a principal is an exact term
    assert found(index, ("g:short",)) == {"both"}
    assert found(index, (PUBLIC_PRINCIPAL, twin)) == set()
    assert index.highlights(SearchFilter("t", None, (twin,)), "icing", [doc("long", [past])]) == {}


def test_bulks_are_split_by_bytes_and_actions_on_a_real_bulk(index: OpenSearchLexicalIndex,
                                                            monkeypatch: pytest.MonkeyPatch) -> None:
    """Small bounds: one apply goes out as several `_bulk` requests, each within both, in order
    (a delete then the re-index of the same key leaves it indexed), and the server has them all."""
    index.refresh = "true"  # each of the ~20 bulks would otherwise wait for the next 1 s refresh
    monkeypatch.setattr(osl, "BULK_ACTIONS", 7)
    monkeypatch.setattr(osl, "BULK_MAX_BYTES", 2_000)
    sent: list[list[dict[str, Any]]] = []
    real = index.client.bulk

    def bulk(body: list[dict[str, Any]], **kw: Any) -> Any:
        sent.append(body)
        return real(body=body, **kw)

    monkeypatch.setattr(index.client, "bulk", bulk)
    index.apply([doc(str(i), body="rotor " + "blade " * (i % 5) * 40) for i in range(40)], [])
    index.apply([doc("5", body="rotor hub"), doc("big", body="rotor " + "wing " * 1_000)],
                [DocKey("t", "c", "5"), DocKey("t", "c", "7")])
    assert found(index, (PUBLIC_PRINCIPAL,)) == {str(i) for i in range(40) if i != 7} | {"big"}
    assert found(index, (PUBLIC_PRINCIPAL,), "hub") == {"5"}
    actions = [sum(1 for line in body if {"index", "delete"} & line.keys()) for body in sent]
    assert len(sent) > 40 / 7 and max(actions) <= 7
    sizes = [osl.ndjson_size(body) for body in sent]
    assert all(size <= 2_000 for size, n in zip(sizes, actions, strict=True) if n > 1)
    assert any(size > 2_000 for size in sizes)  # the 5 KB document went alone
    assert sent[-2][0] == {"delete": {"_index": index_name("t", index.prefix), "_id": "c/5", "routing": "t"}}


def _store_with(tmp_path: Path, ids: list[str]) -> SqliteStore:
    store = SqliteStore(tmp_path / "store.sqlite3")
    for doc_id in ids:
        d = doc(doc_id)
        store.put_docs([d], [SidecarEntry(d.key, "core", SemanticStatus.NONE, "h")])
    return store


def _follower(store: SqliteStore, idx: OpenSearchLexicalIndex) -> IndexFollower:
    return IndexFollower(store, idx, None, StorePosition(store, "lexical:" + idx.prefix), "core")


def test_an_outdated_template_is_rebuilt_from_the_store(index: OpenSearchLexicalIndex, tmp_path: Path) -> None:
    """An index made by another release (its template stamped with another schema version) is
    emptied and rebuilt from the store of record on a process's first sync: what the store
    holds comes back, what only the old index held is gone, and the template is this release's."""
    store = _store_with(tmp_path, ["a", "b"])
    _follower(store, index).sync()
    assert found(index, (PUBLIC_PRINCIPAL,)) == {"a", "b"}
    old = osl.template_body(index.prefix)
    old["template"]["mappings"]["_meta"] = {"schema_version": osl.SCHEMA_VERSION - 1}
    index.client.indices.put_index_template(name=osl.template_name(index.prefix), body=old)
    index.apply([doc("stray")], [])  # a document the store never had (or no longer has)
    assert index.schema_outdated()

    fresh = OpenSearchLexicalIndex(index.client, prefix=index.prefix)  # the next process, on this release
    assert _follower(store, fresh).sync() == 2
    assert found(fresh, (PUBLIC_PRINCIPAL,)) == {"a", "b"}
    assert not fresh.schema_outdated()
    got = fresh.client.indices.get_index_template(name=osl.template_name(index.prefix))
    assert got["index_templates"][0]["index_template"]["template"]["mappings"]["_meta"] == osl.template_meta(
        fresh.languages)


def test_a_change_the_engine_refuses_is_quarantined_and_the_rest_applies(index: OpenSearchLexicalIndex,
                                                                         tmp_path: Path) -> None:
    """A real refusal: tenant u's index exists with a conflicting mapping (`doc_id` a number, as
    a hand-made index might have it), so its documents with other ids fail with a mapper error
    while numeric ones go in. The refused one becomes a dead letter of its tenant and is kept out
    of the index; the log moves on, other tenants' changes in the same batch apply, and so do
    later changes."""
    store = _store_with(tmp_path, ["a"])
    follower = _follower(store, index)
    follower.sync()  # the template is this release's: no rebuild will replace the index below
    index.client.indices.create(index=index_name("u", index.prefix), body={
        "mappings": {"properties": {"doc_id": {"type": "long"}}}})
    for d in (doc("1", tenant="u"), doc("x-refused", tenant="u"), doc("b"), doc("2", tenant="u")):
        store.put_docs([d], [SidecarEntry(d.key, "core", SemanticStatus.NONE, "h")])
    follower.sync()
    assert found(index, (PUBLIC_PRINCIPAL,), tenant="u") == {"1", "2"}
    assert found(index, (PUBLIC_PRINCIPAL,)) == {"a", "b"}
    assert follower.seq == store.change_log_head()
    letters = store.dead_letters("u")
    assert [(r["doc_id"], r["op"]) for r in letters] == [("x-refused", "doc")]
    assert "mapper_parsing_exception" in str(letters[0])
    assert store.dead_letters("t") == []
    with pytest.raises(OpenSearchBulkError):  # refused for good: the same again
        index.apply([doc("x-refused", tenant="u")], [])
    store.put_docs([doc("3", tenant="u")], [SidecarEntry(DocKey("u", "c", "3"), "core", SemanticStatus.NONE, "h")])
    follower.sync()
    assert found(index, (PUBLIC_PRINCIPAL,), tenant="u") == {"1", "2", "3"}


def test_an_index_made_before_certificates_gets_their_fields_and_keeps_its_documents(
        opensearch_url: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """A tenant index (and template) written by a release without certificates: the next
    process adds the fields to it (no rebuild), its documents stay readable by everyone, and
    documents written since require their certificates."""
    prefix = f"vibe-adapter-{uuid.uuid4().hex[:12]}-"
    old_template = osl.template_body

    def without_certs(*args: Any, **kwargs: Any) -> dict[str, Any]:
        body = old_template(*args, **kwargs)
        for field in osl.CERT_MAPPING:
            del body["template"]["mappings"]["properties"][field]
        return body

    monkeypatch.setattr(osl, "template_body", without_certs)
    old = OpenSearchLexicalIndex(OpenSearch(hosts=[opensearch_url], timeout=60), prefix=prefix, refresh="true")
    old.apply([doc("before")], [])
    mapping = old.client.indices.get_mapping(index=index_name("t", prefix))
    assert "certs_n" not in next(iter(mapping.values()))["mappings"]["properties"]
    old.close()
    monkeypatch.undo()
    new = OpenSearchLexicalIndex(OpenSearch(hosts=[opensearch_url], timeout=60), prefix=prefix, refresh="true")
    try:
        assert not new.schema_outdated()  # nothing to rebuild
        new.apply([StoredDoc(DocKey("t", "c", "after"), {"title": "rotor"}, ["*"], None, "h", 0.0,
                             certs=["iss:a"])], [])
        assert found(new, (PUBLIC_PRINCIPAL,)) == {"before"}
        held = SearchFilter("t", None, (PUBLIC_PRINCIPAL,), certs=frozenset({"iss:a"}))
        assert {h.key.doc_id for h in new.search(held, "rotor", 10)} == {"before", "after"}
    finally:
        new.drop()
        new.close()
