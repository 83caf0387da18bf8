"""The Qdrant server adapter beyond the shared contract, through qdrant-client's local mode:
congruence with the embedded adapter, collection layout, batching, dimension safety, reopen."""

from __future__ import annotations

from pathlib import Path
from typing import Any, cast

import numpy as np
import pytest
from qdrant_client import QdrantClient, models

from shared.adapters import facets
from shared.adapters import qdrant_vectors as qv
from shared.adapters.edge_vectors import EdgeVectorIndex
from shared.adapters.qdrant_vectors import QdrantVectorIndex
from shared.config import Settings
from shared.model import DocKey, StoredDoc
from shared.ports import FieldCondition, SearchFilter, VectorIndex

pytestmark = pytest.mark.filterwarnings("ignore:Payload indexes have no effect:UserWarning")


class Spy:
    """Delegates to a real client and records which methods were called with what: the
    calls are the real ones, the record shows the layout a server would receive."""

    def __init__(self, client: QdrantClient):
        self._client = client
        self.calls: list[tuple[str, tuple[Any, ...], dict[str, Any]]] = []

    def __getattr__(self, name: str) -> Any:
        target = getattr(self._client, name)
        if not callable(target):
            return target

        def call(*args: Any, **kwargs: Any) -> Any:
            self.calls.append((name, args, kwargs))
            return target(*args, **kwargs)

        return call


def _corpus(n: int, dim: int, seed: int) -> list[tuple[StoredDoc, list[float]]]:
    rng = np.random.default_rng(seed)
    vecs = rng.standard_normal((n, dim))
    vecs /= np.linalg.norm(vecs, axis=1, keepdims=True)
    acls = [["*"], ["g:a"], ["g:b"], ["g:a", "g:b"]]
    items = []
    for i in range(n):
        key = DocKey(f"t{i % 3}", f"c{i % 4}", f"d{i}")
        fields = {"kind": ("a", "b", "c")[i % 3], "n": i % 50, "tags": [f"t{i % 7}", f"t{i % 5}"], "flag": i % 2 == 0}
        items.append((StoredDoc(key, fields, acls[i % 4], None, "h", 0.0), vecs[i].tolist()))
    return items


def test_same_top_k_as_the_embedded_adapter(tmp_path: Path) -> None:
    """Exact search on small data: both adapters must return the same ids in the same order
    for every filter shape (tenant, ACL, collections, `only`)."""
    items = _corpus(300, 24, seed=11)
    edge: VectorIndex = EdgeVectorIndex(tmp_path / "edge")
    server: VectorIndex = QdrantVectorIndex(QdrantClient(location=":memory:"))
    for idx in (edge, server):
        idx.upsert("core", items)
    rng = np.random.default_rng(5)
    filters = [SearchFilter("t0", None, ("*",)), SearchFilter("t1", None, ("*", "g:a")),
               SearchFilter("t2", ("c1", "c2"), ("*", "g:a", "g:b")), SearchFilter("t0", ("c3",), ("g:b",)),
               SearchFilter("t0", None, ("*", "g:a", "g:b"), (FieldCondition("kind", "in", ("a", "c")),
                                                               FieldCondition("n", "range", gte=10, lt=40))),
               SearchFilter("t1", None, ("*", "g:a", "g:b"), (FieldCondition("tags", "eq", ("t3",)),
                                                               FieldCondition("flag", "eq", (True,)))),
               SearchFilter("t0", None, ("*", "g:a", "g:b"), ids=tuple(d.key for d, _ in items[:90]))]
    only = [k for k in (d.key for d, _ in items[:120]) if k.tenant == "t0"]
    compared = 0
    for _ in range(12):
        vec = rng.standard_normal(24)
        query = (vec / np.linalg.norm(vec)).tolist()
        for flt in filters:
            for subset in (None, only):
                a = edge.search("core", flt, query, 10, subset)
                b = server.search("core", flt, query, 10, subset)
                assert [h.key for h in a] == [h.key for h in b]
                assert [h.score for h in a] == pytest.approx([h.score for h in b], abs=1e-5)
                compared += len(a)
    assert compared > 500  # the filters really select something
    edge.close()
    server.close()


def test_collection_per_space_with_cosine_tenant_index_and_per_tenant_graphs() -> None:
    spy = Spy(QdrantClient(location=":memory:"))
    idx = QdrantVectorIndex(cast(QdrantClient, spy), filterable=facets.fixed_fields(["n", "absent"]))
    idx.upsert("core", _corpus(3, 8, seed=1))
    created = [(a, k) for n, a, k in spy.calls if n == "create_collection"]
    assert created == [(("vibe-core",), {
        "vectors_config": models.VectorParams(size=8, distance=models.Distance.COSINE, multivector_config=None),
        "hnsw_config": models.HnswConfigDiff(m=0, payload_m=16), "metadata": {"schema_version": qv.SCHEMA_VERSION}})]
    indexes = [(a[1], k["field_schema"]) for n, a, k in spy.calls if n == "create_payload_index"]
    assert indexes == [
        ("tenant", models.KeywordIndexParams(type=models.KeywordIndexType.KEYWORD, is_tenant=True)),
        ("collection", models.PayloadSchemaType.KEYWORD), ("acl", models.PayloadSchemaType.KEYWORD),
        ("facet", models.PayloadSchemaType.KEYWORD), ("certs", models.PayloadSchemaType.KEYWORD),
        # the corpus's one numeric field declared filterable, under its hashed key, for range filters
        (f"num.{facets.num_field('n')}", models.PayloadSchemaType.FLOAT)]
    # asked for without waiting: the server builds it while every tenant's requests go on
    assert [k["wait"] for n, _, k in spy.calls if n == "create_payload_index"][-1] is False
    spy.calls.clear()
    idx.upsert("core", _corpus(3, 8, seed=2))  # the space is known: no more setup calls
    assert [n for n, _, _ in spy.calls] == ["upsert"]
    assert spy.calls[0][2]["wait"] is True


def test_upserts_are_batched(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(qv, "UPSERT_BATCH", 4)
    spy = Spy(QdrantClient(location=":memory:"))
    idx = QdrantVectorIndex(cast(QdrantClient, spy))
    idx.upsert("core", _corpus(10, 8, seed=3))
    assert [len(k["points"]) for n, _, k in spy.calls if n == "upsert"] == [4, 4, 2]
    assert idx.count("core") == 10


def _request_bytes(points: list[models.PointStruct]) -> int:
    """The upsert body as the REST client sends it."""
    return len(models.PointsList(points=points).model_dump_json(exclude_unset=True).encode())


def test_upserts_are_sized_by_bytes(monkeypatch: pytest.MonkeyPatch) -> None:
    """Points with large ACLs must not add up to a request over Qdrant's
    size limit (which fails every tenant's change in it); each request stays under
    UPSERT_MAX_BYTES as sent, a single larger point goes alone, and nothing is lost."""
    monkeypatch.setattr(qv, "UPSERT_MAX_BYTES", 60_000)
    items = _corpus(12, 16, seed=4)
    big = [(StoredDoc(d.key, {}, [f"g:{i}-{j}-" + "x" * 200 for j in range(100)], None, "h", 0.0), v)
           for i, (d, v) in enumerate(items)]  # ~20 kB of ACL per point
    huge_doc = StoredDoc(DocKey("t0", "c0", "huge"), {}, ["g:" + "y" * 70_000], None, "h", 0.0)
    big.append((huge_doc, items[0][1]))
    spy = Spy(QdrantClient(location=":memory:"))
    idx = QdrantVectorIndex(cast(QdrantClient, spy))
    idx.upsert("core", big)
    sent = [k["points"] for n, _, k in spy.calls if n == "upsert"]
    assert [len(p) for p in sent] == [2] * 6 + [1]
    for points in sent:
        assert _request_bytes(points) <= 60_000 or len(points) == 1
    assert idx.count("core") == 13


def test_point_size_estimate_is_an_upper_bound() -> None:
    (d, v), = _corpus(1, 384, seed=5)
    doc = StoredDoc(d.key, {}, ["g:é" * 50, "user:ü"], None, "h", 0.0)
    vec = [x * 1e-7 for x in v]  # long exponents
    point = models.PointStruct(id=qv.point_id(doc.key), vector=[vec, vec], payload=qv.payload(doc))
    assert _request_bytes([point]) <= qv.point_bytes(doc, [vec, vec])


def test_a_space_keeps_its_dimension_and_another_dimension_gets_its_own_collection(tmp_path: Path) -> None:
    """Space names are per tenant: tenant u's `core` of 16 dimensions must neither be refused nor
    land in the 8-dimension collection of the other tenants' `core`."""
    idx = QdrantVectorIndex(QdrantClient(path=str(tmp_path / "q")))
    idx.upsert("core", _corpus(2, 8, seed=4))
    u = StoredDoc(DocKey("u", "c", "d0"), {}, ["*"], None, "h", 0.0)
    idx.upsert("core", [(u, [1.0] + [0.0] * 15)])
    idx.close()
    reopened = QdrantVectorIndex(QdrantClient(path=str(tmp_path / "q")))  # another process, later
    names = sorted(c.name for c in reopened.client.get_collections().collections)
    assert names == ["vibe-core", "vibe-core~16"]
    assert reopened.client.get_collection("vibe-core").config.params.vectors.size == 8  # type: ignore[union-attr]
    assert reopened.count("core") == 3
    mine = reopened.search("core", SearchFilter("u", None, ("*",)), [1.0] + [0.0] * 15, 5)
    assert [h.key for h in mine] == [u.key]
    assert reopened.search("core", SearchFilter("u", None, ("*",)), [1.0] * 8, 5) == []
    reopened.delete("core", [u.key])
    assert reopened.count("core") == 2
    reopened.close()


def test_delete_in_an_unknown_space_and_drop() -> None:
    idx = QdrantVectorIndex(QdrantClient(location=":memory:"))
    idx.delete("nope", [DocKey("t", "c", "1")])  # nothing to delete, no error
    idx.upsert("core", _corpus(3, 8, seed=5))
    idx.drop("core")
    assert idx.count("core") == 0 and idx.search("core", SearchFilter("t0", None, ("*",)), [1.0] * 8, 5) == []


def test_from_settings_needs_a_url() -> None:
    with pytest.raises(RuntimeError, match="VIBE_QDRANT_URL"):
        QdrantVectorIndex.from_settings(Settings(vectors="qdrant", qdrant_url=None))


def test_only_declared_fields_get_payload_indexes_and_at_most_the_bound() -> None:
    """A writer's document with 5,000 numeric fields used to make 5,000 payload indexes in the
    collection every tenant shares, each created inside the write; now only fields declared
    filterable get one, at most `max_indexes` per collection, and ranges on the others stay exact."""
    spy = Spy(QdrantClient(location=":memory:"))
    declared = {("t", "c"): {"f1", "f2", "f3", "f4", "f5"}}
    idx = QdrantVectorIndex(cast(QdrantClient, spy), filterable=lambda t, c: declared.get((t, c), set()),
                            max_indexes=3)
    wide = StoredDoc(DocKey("t", "c", "wide"), {f"f{i}": i for i in range(5000)}, ["*"], None, "h", 0.0)
    other = StoredDoc(DocKey("u", "c", "w2"), {f"f{i}": i for i in range(5000)}, ["*"], None, "h", 0.0)
    idx.upsert("core", [(wide, [1.0, 0.0]), (other, [0.0, 1.0])])
    nums = [a[1] for n, a, _ in spy.calls if n == "create_payload_index" and a[1].startswith("num.")]
    assert len(nums) == 3 and set(nums) <= {f"num.{facets.num_field(f)}" for f in declared[("t", "c")]}
    flt = SearchFilter("t", None, ("*",), (FieldCondition("f4321", "range", gte=4321, lte=4321),))
    assert [h.key.doc_id for h in idx.search("core", flt, [1.0, 0.0], 5)] == ["wide"]
    flt = SearchFilter("t", None, ("*",), (FieldCondition("f4321", "range", gt=4321),))
    assert idx.search("core", flt, [1.0, 0.0], 5) == []
    idx.close()
