"""CollectionStore contract (shared/adapters/collection_settings_sql.py): settings rows, the
collection list and the paged removal, against SQLite and PostgreSQL alike, with the
`opener`/`store` fixtures of the DocumentStore contract."""

from __future__ import annotations

import pytest

from shared.collection_settings import CollectionSettings
from shared.model import PUBLIC_PRINCIPAL, CollectionMode, DocKey, SemanticStatus, SidecarEntry, StoredDoc
from shared.ports import StoreOfRecord
from tests.contract.test_store_contract import Opener, opener, store  # noqa: F401 - fixtures


@pytest.fixture
def cs(store: StoreOfRecord) -> StoreOfRecord:  # noqa: F811 - the imported fixture
    assert isinstance(store, StoreOfRecord)
    return store


def _put(s: StoreOfRecord, collection: str, n: int, content: str = "h", tenant: str = "t") -> list[DocKey]:
    keys = [DocKey(tenant, collection, f"d{i:03d}") for i in range(n)]
    s.put_docs([StoredDoc(k, {"title": k.doc_id}, [PUBLIC_PRINCIPAL], None, f"{content}{i}", 1.0)
                for i, k in enumerate(keys)],
               [SidecarEntry(k, "core", SemanticStatus.QUEUED, f"{content}{i}", updated_at=1.0)
                for i, k in enumerate(keys)])
    return keys


def test_settings_rows_are_per_tenant_and_replaced_whole(cs: StoreOfRecord) -> None:
    cs.put_collection_settings(CollectionSettings("t", "a", "fr", ("title",), None, 1.0))
    cs.put_collection_settings(CollectionSettings("u", "a", None, None, ("year",), 2.0))
    assert cs.collection_settings("t") == {"a": CollectionSettings("t", "a", "fr", ("title",), None, 1.0)}
    cs.put_collection_settings(CollectionSettings("t", "a", None, None, ("kind",), 3.0))
    assert cs.collection_settings("t")["a"] == CollectionSettings("t", "a", None, None, ("kind",), 3.0)
    assert set(cs.collection_settings("u")) == {"a"}


def test_names_come_from_documents_settings_and_modes_in_pages(cs: StoreOfRecord) -> None:
    _put(cs, "docs1", 3)
    _put(cs, "other-tenant", 1, tenant="u")
    cs.put_collection_settings(CollectionSettings("t", "configured", "en", None, None, 1.0))
    cs.set_collection_mode(CollectionMode("t", "promoted", "eager", 1.0, "manual", True))
    assert cs.collection_names("t", "", 10) == ["configured", "docs1", "promoted"]
    assert cs.collection_names("t", "configured", 1) == ["docs1"]
    assert cs.collection_doc_count("t", "docs1") == 3


def test_a_collection_goes_by_pages_with_its_rows_and_unshared_content(cs: StoreOfRecord) -> None:
    gone = _put(cs, "gone", 5)
    kept = _put(cs, "kept", 1)  # the content of gone/d000 ("h0") too
    sides = cs.sidecars([gone[0], gone[1], kept[0]], "core")
    cs.commit_vectors([(sides[k], [0.1, 0.2]) for k in sides], "m")
    head = cs.change_log_head()
    cs.charge_tokens("t", "2026-11-28", {"gone": (5, 100), "kept": (1, 20)}, 1, 0)
    cs.put_collection_settings(CollectionSettings("t", "gone", None, ("title",), None, 1.0))
    assert cs.delete_collection_page("t", "gone", 2)[0] == 2
    assert cs.collection_doc_count("t", "gone") == 3
    while cs.delete_collection_page("t", "gone", 2)[0]:
        pass
    assert cs.get_docs(gone) == {} and cs.sidecars(gone, "core") == {}
    assert {c.key for c in cs.changes_since(head, 100) if c.op == "delete"} == set(gone)  # the indexes follow
    cs.forget_collection("t", "gone")
    assert cs.collection_settings("t") == {} and cs.collection_names("t", "", 10) == ["kept"]
    assert cs.usage_by_day("t", "gone", 7) == []
    assert cs.usage_by_day("t", None, 7)[0]["tokens"] == 120  # the tenant's spend keeps it
    assert cs.get_docs(kept) and cs.sidecars(kept, "core")
    assert cs.vector_for_hash("t", "h1", "core") is None  # gone/d001's content: nobody has it now
    assert cs.vector_for_hash("t", "h0", "core") is not None  # kept/d000 has gone/d000's content
