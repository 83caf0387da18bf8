"""EdgeStore contract (shared/ports/edges.py), on every store of record: edges are found by
either end in one lookup, bounded per reference and direction heaviest first, kept in step by
the documents' own writes and deletes, and never across tenants."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from shared.edges import EDGES
from shared.model import PUBLIC_PRINCIPAL, DocKey, StoredDoc
from shared.ports import StoreOfRecord
from tests.contract.test_store_contract import ADAPTERS, Opener


@pytest.fixture(params=sorted(ADAPTERS))
def store(request: pytest.FixtureRequest) -> Iterator[StoreOfRecord]:
    opener: Opener = ADAPTERS[request.param](request)
    s = opener()
    assert isinstance(s, StoreOfRecord)
    yield s
    s.close()


def edge(eid: str, src: str, dst: str, weight: float | None = None, tenant: str = "t") -> StoredDoc:
    fields: dict[str, object] = {"from": src, "to": dst, "predicate": "mentions"}
    if weight is not None:
        fields["weight"] = weight
    return StoredDoc(DocKey(tenant, EDGES, eid), fields, [PUBLIC_PRINCIPAL], None, f"h-{eid}", 1.0)


def ids(docs: list[StoredDoc]) -> list[str]:
    return sorted(d.key.doc_id for d in docs)


def test_edges_are_found_by_either_end_heaviest_first_and_bounded(store: StoreOfRecord) -> None:
    store.put_docs([edge("e1", "posts/a", "posts/b", 0.9), edge("e2", "posts/a", "notes/c", 0.1),
                    edge("e3", "posts/a", "posts/d"),  # no weight: 1.0
                    edge("e4", "notes/c", "posts/b", 0.5), edge("e5", "posts/x", "posts/y", 0.5),
                    edge("o1", "posts/a", "posts/b", 1.0, tenant="other")], [])
    assert ids(store.edges_touching("t", ["posts/a"], 10)) == ["e1", "e2", "e3"]
    assert ids(store.edges_touching("t", ["posts/a"], 2)) == ["e1", "e3"]  # the two heaviest
    assert ids(store.edges_touching("t", ["posts/b"], 10)) == ["e1", "e4"]  # as `to`
    assert ids(store.edges_touching("t", ["posts/b", "notes/c"], 10)) == ["e1", "e2", "e4"]
    assert store.edges_touching("t", ["posts/none"], 10) == []
    assert ids(store.edges_touching("other", ["posts/a"], 10)) == ["o1"]
    assert store.edge_degrees("t", ["posts/a", "posts/b", "notes/c", "posts/none"]) == {
        "posts/a": 3, "posts/b": 2, "notes/c": 2}


def test_an_edge_rewritten_or_deleted_moves_with_its_document(store: StoreOfRecord) -> None:
    store.put_docs([edge("e1", "posts/a", "posts/b")], [])
    store.put_docs([edge("e1", "posts/a", "posts/c")], [])
    assert ids(store.edges_touching("t", ["posts/b"], 10)) == []
    assert ids(store.edges_touching("t", ["posts/c"], 10)) == ["e1"]
    assert store.delete_doc(DocKey("t", EDGES, "e1"))
    assert store.edges_touching("t", ["posts/a", "posts/c"], 10) == [] and store.edge_degrees("t", ["posts/a"]) == {}


def test_a_document_elsewhere_with_from_and_to_fields_is_not_an_edge(store: StoreOfRecord) -> None:
    store.put_docs([StoredDoc(DocKey("t", "mail", "m1"), {"from": "posts/a", "to": "posts/b"},
                              [PUBLIC_PRINCIPAL], None, "h", 1.0)], [])
    assert store.edges_touching("t", ["posts/a"], 10) == [] and store.edge_degrees("t", ["posts/a"]) == {}


def test_many_references_in_one_call(store: StoreOfRecord) -> None:
    store.put_docs([edge(f"e{i}", f"posts/n{i}", "posts/hub", i / 1000) for i in range(700)], [])
    found = store.edges_touching("t", [f"posts/n{i}" for i in range(700)], 1)
    assert len(found) == 700
    assert len(store.edges_touching("t", ["posts/hub"], 5)) == 5
    assert store.edge_degrees("t", ["posts/hub"]) == {"posts/hub": 700}
