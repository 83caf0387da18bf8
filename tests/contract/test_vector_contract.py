"""VectorIndex contract: every adapter must pass it.

The Qdrant server adapter runs here through qdrant-client's local mode (`path=`): the same
adapter code as against a server; local mode ignores HNSW and payload-index settings only.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path

import numpy as np
import pytest
from qdrant_client import QdrantClient

from shared.adapters.edge_vectors import EdgeVectorIndex
from shared.adapters.qdrant_vectors import QdrantVectorIndex
from shared.adapters.schema_stamp import VERSION_FILE
from shared.model import PUBLIC_PRINCIPAL, DocKey, StoredDoc
from shared.ports import FieldCondition, Rebuildable, SearchFilter, VectorIndex
from tests.contract.cert_cases import DOC_CERTS, HELD_SEES

# Local mode warns once that payload indexes have no effect there; the server uses them.
pytestmark = pytest.mark.filterwarnings("ignore:Payload indexes have no effect:UserWarning")


def _qdrant_local(path: Path) -> VectorIndex:
    return QdrantVectorIndex(QdrantClient(path=str(path)))


ADAPTERS: dict[str, Callable[[Path], VectorIndex]] = {"qdrant-edge": EdgeVectorIndex, "qdrant-client": _qdrant_local}


@pytest.fixture(params=sorted(ADAPTERS))
def index(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[VectorIndex]:
    idx = ADAPTERS[request.param](tmp_path / "vec")
    yield idx
    idx.close()


def unit(seed: int, dim: int = 16) -> list[float]:
    v = np.random.default_rng(seed).standard_normal(dim)
    return (v / np.linalg.norm(v)).tolist()


def doc(tenant: str, coll: str, i: str, acl: list[str] | None = None) -> StoredDoc:
    return StoredDoc(DocKey(tenant, coll, i), {}, acl or [PUBLIC_PRINCIPAL], None, "h", 0.0)


def F(tenant: str = "t", acl: tuple[str, ...] = ("*",), cols: tuple[str, ...] | None = None) -> SearchFilter:
    return SearchFilter(tenant, cols, acl)


def test_nearest_first_and_cosine_scores(index: VectorIndex) -> None:
    index.upsert("core", [(doc("t", "c", str(i)), unit(i)) for i in range(20)])
    hits = index.search("core", F(), unit(7), 5)
    assert hits[0].key.doc_id == "7" and hits[0].score == pytest.approx(1.0, abs=1e-4)
    assert [h.score for h in hits] == sorted((h.score for h in hits), reverse=True)


def test_filters_tenant_acl_collection_and_only(index: VectorIndex) -> None:
    index.upsert("core", [(doc("t", "a", "pub"), unit(1)), (doc("t", "a", "eng", ["g:eng"]), unit(1)),
                          (doc("t", "b", "b1"), unit(1)), (doc("u", "a", "other"), unit(1))])
    got = lambda f, only=None: {h.key.doc_id for h in index.search("core", f, unit(1), 10, only)}  # noqa: E731
    assert got(F()) == {"pub", "b1"}
    assert got(F(acl=("*", "g:eng"))) == {"pub", "eng", "b1"}
    assert got(F(cols=("a",), acl=("*", "g:eng"))) == {"pub", "eng"}
    assert got(F("u")) == {"other"}
    assert got(F(), [DocKey("t", "a", "pub")]) == {"pub"}
    assert got(F(), []) == set()


def test_a_document_of_passages_scores_by_its_best_passage(index: VectorIndex) -> None:
    """A long document's passages are one point: found by any of its passages, scored by the
    best, listed once, filtered like any point, and ranked among plain documents by score."""
    short = [(doc("t", "c", f"s{i}"), unit(i)) for i in range(10)]
    long_doc = (doc("t", "c", "long"), [unit(100), unit(101), unit(3)])  # its last passage is s3's
    secret = (doc("t", "c", "secret", ["g:hr"]), [unit(200), unit(5)])
    index.upsert("core", [*short, long_doc, secret])
    hits = index.search("core", F(), unit(3), 3)
    assert {h.key.doc_id for h in hits[:2]} == {"s3", "long"}
    assert hits[0].score == pytest.approx(1.0, abs=1e-4) and hits[1].score == pytest.approx(1.0, abs=1e-4)
    assert [h.key.doc_id for h in index.search("core", F(), unit(101), 2)][0] == "long"
    assert len([h for h in index.search("core", F(), unit(100), 20) if h.key.doc_id == "long"]) == 1
    assert "secret" not in {h.key.doc_id for h in index.search("core", F(), unit(5), 20)}  # the ACL holds
    assert index.search("core", F(acl=("*", "g:hr")), unit(5), 1)[0].key.doc_id in {"secret", "s5"}
    scores = [h.score for h in index.search("core", F(), unit(100), 12)]
    assert scores == sorted(scores, reverse=True) and len(scores) == 11


def test_a_document_moves_between_one_and_several_passages_and_is_deleted_whole(index: VectorIndex) -> None:
    d = doc("t", "c", "d")
    index.upsert("core", [(d, unit(1))])
    index.upsert("core", [(d, [unit(2), unit(3)])])  # it grew: its old single vector is gone
    assert index.count("core") == 1
    assert [h.key.doc_id for h in index.search("core", F(), unit(3), 5)] == ["d"]
    assert index.search("core", F(), unit(1), 5)[0].score < 0.9
    index.upsert("core", [(d, [unit(4)])])  # and shrank again
    assert index.count("core") == 1
    assert index.search("core", F(), unit(4), 5)[0].score == pytest.approx(1.0, abs=1e-4)
    index.upsert("core", [(d, [unit(5), unit(6)])])
    index.delete("core", [d.key])
    assert index.count("core") == 0 and index.search("core", F(), unit(5), 5) == []


def test_hits_carry_their_full_key_whatever_the_collections_named(index: VectorIndex) -> None:
    index.upsert("core", [(doc("t", "a", "1"), unit(1)), (doc("t", "b", "2"), unit(1)), (doc("u", "a", "3"), unit(1))])
    keys = lambda f: {h.key for h in index.search("core", f, unit(1), 10)}  # noqa: E731
    assert keys(F()) == keys(F(cols=("a", "b"))) == {DocKey("t", "a", "1"), DocKey("t", "b", "2")}
    assert keys(F(cols=("b",))) == {DocKey("t", "b", "2")}
    assert keys(F("u", cols=("a",))) == {DocKey("u", "a", "3")}


@pytest.mark.parametrize("cache", ["on", "full"])
def test_a_reopened_edge_index_resolves_keys_it_never_wrote(tmp_path: Path, cache: str,
                                                            monkeypatch: pytest.MonkeyPatch) -> None:
    """The edge adapter maps point ids to keys from its own upserts and resolves the others from
    their payloads: another process's points (here: the index reopened), and every point once
    its map is full, come back with their full keys, and a deleted point never does."""
    from shared.adapters import edge_vectors

    if cache == "full":
        monkeypatch.setattr(edge_vectors, "KEY_CACHE_MAX", 0)
    docs = [doc("t", "a", "1"), doc("t", "b", "2"), doc("u", "a", "3"), doc("t", "a", "4")]
    first = EdgeVectorIndex(tmp_path / "vec")
    first.upsert("core", [(d, unit(1)) for d in docs])
    first.close()
    again = EdgeVectorIndex(tmp_path / "vec")
    try:
        keys = lambda f: sorted(h.key for h in again.search("core", f, unit(1), 10))  # noqa: E731
        want = [DocKey("t", "a", "1"), DocKey("t", "a", "4"), DocKey("t", "b", "2")]
        assert keys(F()) == keys(F()) == want  # resolved, then remembered
        assert keys(F("u")) == [DocKey("u", "a", "3")]
        again.delete("core", [DocKey("t", "a", "4")])
        assert keys(F()) == want[::2]
        assert len(again._keys) == (0 if cache == "full" else 3)
    finally:
        again.close()


def test_upsert_replaces_payload_and_delete_removes(index: VectorIndex) -> None:
    index.upsert("core", [(doc("t", "c", "1"), unit(3))])
    index.upsert("core", [(doc("t", "c", "1", ["g:x"]), unit(3))])
    assert index.search("core", F(), unit(3), 5) == []
    assert len(index.search("core", F(acl=("g:x",)), unit(3), 5)) == 1
    index.delete("core", [DocKey("t", "c", "1")])
    assert index.search("core", F(acl=("g:x",)), unit(3), 5) == []


def test_one_space_name_of_two_tenants_with_two_dimensions(index: VectorIndex, tmp_path: Path) -> None:
    """Space names are per tenant: tenant a's `core@v2` (16 dimensions) and tenant b's `core@v2`
    (8) live side by side; neither sees, overwrites nor deletes the other's vectors."""
    a = [(doc("a", "c", str(i)), unit(i)) for i in range(5)]
    b = [(doc("b", "c", str(i)), unit(i, dim=8)) for i in range(5)]
    index.upsert("core@v2", a)
    index.upsert("core@v2", b + [(doc("a", "c", "x"), unit(9))])  # one follower batch, both dimensions
    hits = index.search("core@v2", F("a"), unit(3), 10)
    assert hits[0].key == DocKey("a", "c", "3") and {h.key.tenant for h in hits} == {"a"} and len(hits) == 6
    hits = index.search("core@v2", F("b"), unit(3, dim=8), 10)
    assert hits[0].key == DocKey("b", "c", "3") and {h.key.tenant for h in hits} == {"b"} and len(hits) == 5
    assert index.search("core@v2", F("b"), unit(3), 10) == []  # b has no 16-dimension vectors
    index.delete("core@v2", [DocKey("b", "c", "3"), DocKey("a", "c", "4")])
    assert DocKey("b", "c", "3") not in {h.key for h in index.search("core@v2", F("b"), unit(3, dim=8), 10)}
    assert len(index.search("core@v2", F("a"), unit(3), 10)) == 5
    assert index.count("core@v2") == 9  # type: ignore[attr-defined]


def test_unknown_space_is_empty(index: VectorIndex) -> None:
    assert index.search("nope", F(), unit(1), 5) == []


# -- metadata filters and the id allow-list: payload filters inside the query --

def mdoc(i: str, fields: dict[str, object], acl: list[str] | None = None, coll: str = "c",
         tenant: str = "t") -> StoredDoc:
    return StoredDoc(DocKey(tenant, coll, i), fields, acl or [PUBLIC_PRINCIPAL], None, "h", 0.0)


META = [mdoc("s", {"lang": "en", "year": 1999, "tags": ["wind", "ice"]}),
        mdoc("d", {"lang": "de", "year": 2005.5, "tags": "wind"}),
        mdoc("b", {"lang": "en", "flag": True, "year": -3, "n": 1}),
        mdoc("n", {"flag": 1, "n": 1.0, "year": 2010, "a.b[0]": "dots"}),
        mdoc("x", {"lang": "en", "year": 2007}, ["g:secret"]),
        mdoc("o", {"lang": "en", "year": 2001}, coll="other")]


def W(*conds: FieldCondition, acl: tuple[str, ...] = ("*",), cols: tuple[str, ...] | None = None,
      ids: tuple[DocKey, ...] | None = None) -> SearchFilter:
    return SearchFilter("t", cols, acl, tuple(conds), ids)


@pytest.fixture
def meta(index: VectorIndex) -> Callable[..., set[str]]:
    index.upsert("core", [(d, unit(i)) for i, d in enumerate(META)])

    def got(f: SearchFilter, limit: int = 50, only: list[DocKey] | None = None) -> set[str]:
        return {h.key.doc_id for h in index.search("core", f, unit(0), limit, only)}
    return got


def test_metadata_equality_in_lists_and_types(meta: Callable[..., set[str]]) -> None:
    assert meta(W(FieldCondition("lang", "eq", ("en",)))) == {"s", "b", "o"}
    assert meta(W(FieldCondition("lang", "in", ("de", "fr")))) == {"d"}
    assert meta(W(FieldCondition("tags", "eq", ("ice",)))) == {"s"}
    assert meta(W(FieldCondition("tags", "in", ("wind",)))) == {"s", "d"}
    assert meta(W(FieldCondition("flag", "eq", (True,)))) == {"b"}
    assert meta(W(FieldCondition("flag", "eq", (1,)))) == {"n"}
    assert meta(W(FieldCondition("n", "eq", (1,)))) == {"b", "n"}
    assert meta(W(FieldCondition("year", "eq", ("1999",)))) == set()
    assert meta(W(FieldCondition("a.b[0]", "eq", ("dots",)))) == {"n"}  # no JSON-path reading of names
    assert meta(W(FieldCondition("lang", "eq", ("en",)), FieldCondition("tags", "eq", ("wind",)))) == {"s"}


def test_metadata_ranges(meta: Callable[..., set[str]]) -> None:
    r = lambda **b: meta(W(FieldCondition("year", "range", **b)))  # noqa: E731
    assert r(gte=2000) == {"d", "n", "o"}
    assert r(gt=2005.5) == {"n"}
    assert r(gte=2005.5, lte=2005.5) == {"d"}
    assert r(gt=2005.5, lt=2010) == set()
    assert r(lt=0) == {"b"}
    assert meta(W(FieldCondition("flag", "range", gte=0, lte=2))) == {"n"}  # booleans are not numbers


def test_metadata_filters_combine_with_acl_collections_ids_and_only(meta: Callable[..., set[str]]) -> None:
    en = FieldCondition("lang", "eq", ("en",))
    assert meta(W(en, cols=("c",))) == {"s", "b"}
    assert meta(W(en, acl=("*", "g:secret"), cols=("c",))) == {"s", "b", "x"}
    assert meta(W(FieldCondition("year", "range", gte=2007, lte=2007))) == set()
    keys = (DocKey("t", "c", "s"), DocKey("t", "other", "o"), DocKey("t", "c", "x"), DocKey("u", "c", "d"))
    assert meta(W(ids=keys)) == {"s", "o"}
    assert meta(W(en, ids=keys, cols=("c",))) == {"s"}
    assert meta(W(ids=())) == set()
    assert meta(W(ids=keys), only=[DocKey("t", "other", "o"), DocKey("t", "c", "b")]) == {"o"}


def test_metadata_filter_applies_before_the_top_k(index: VectorIndex) -> None:
    near = [(mdoc(f"hi{i}", {"k": "no"}), unit(1)) for i in range(40)]
    far = [(mdoc(f"lo{i}", {"k": "yes"}), unit(100 + i)) for i in range(3)]
    index.upsert("core", near + far)
    hits = index.search("core", W(FieldCondition("k", "eq", ("yes",))), unit(1), 2)
    assert len(hits) == 2 and {h.key.doc_id for h in hits} <= {"lo0", "lo1", "lo2"}


def test_outdated_schema_is_detected_and_reset(index: VectorIndex) -> None:
    assert isinstance(index, Rebuildable)
    index.upsert("core", [(mdoc("1", {}), unit(1))])
    assert not index.schema_outdated()
    index.reset_schema()
    assert not index.schema_outdated()
    assert index.search("core", W(), unit(1), 5) == []
    index.upsert("core", [(mdoc("1", {"lang": "en"}), unit(1))])
    assert [h.key.doc_id for h in index.search("core", W(FieldCondition("lang", "eq", ("en",))), unit(1), 5)] == ["1"]


@pytest.mark.parametrize("older", [None, "2"])
def test_edge_shards_of_an_older_version_are_outdated(tmp_path: Path, older: str | None) -> None:
    """None: shards written before versions existed; 2: UUID point ids (now integers)."""
    idx = EdgeVectorIndex(tmp_path / "vec")
    idx.upsert("core", [(mdoc("1", {}), unit(1))])
    idx.close()
    stamp = tmp_path / "vec" / VERSION_FILE
    if older is None:
        stamp.unlink()
    else:
        stamp.write_text(older)
    again = EdgeVectorIndex(tmp_path / "vec")
    assert again.schema_outdated()
    again.reset_schema()
    assert not again.schema_outdated() and again.count("core") == 0
    again.close()


def test_edge_search_is_exact_and_filtered_on_an_optimized_shard(tmp_path: Path) -> None:
    """The service never optimizes its shards (edge_vectors docstring), but a shard may hold an
    HNSW graph (optimized by hand, by a later version): its searches must still return the exact
    top-k of the points the caller's filter admits, deletes made after the optimize must stay
    deleted and points upserted after it must be found. The graph here is built as poorly as the
    engine allows (m=4, ef_construct=8, filtered searches never switched to a full scan), so an
    approximate search misses neighbours and this test fails without `EXACT`."""
    import qdrant_edge as qe

    dim, n = 32, 3000
    rng = np.random.default_rng(5)
    raw = rng.standard_normal((n, dim))
    vecs = raw / np.linalg.norm(raw, axis=1, keepdims=True)
    docs = [doc(f"t{i % 2}", f"c{i % 3}", str(i), ["public"] if i % 5 else ["group:x"]) for i in range(n)]
    idx = EdgeVectorIndex(tmp_path / "vec")
    idx.upsert("core", [(d, v.tolist()) for d, v in zip(docs, vecs, strict=True)])
    idx.close()
    hnsw = qe.HnswIndexConfig(m=4, ef_construct=8, full_scan_threshold=1, max_indexing_threads=1)
    cfg = qe.EdgeConfig(vectors=qe.EdgeVectorParams(size=dim, distance=qe.Distance.Cosine), hnsw_config=hnsw,
                        optimizers=qe.EdgeOptimizersConfig(indexing_threshold=1))
    shard = qe.EdgeShard.load(str(tmp_path / "vec" / "core"), cfg)
    assert shard.optimize()
    assert shard.info().indexed_vectors_count == n
    shard.close()

    idx = EdgeVectorIndex(tmp_path / "vec")
    gone = {docs[i].key for i in range(0, n, 7)}
    idx.delete("core", sorted(gone, key=lambda k: k.doc_id))
    fresh = [(doc("t0", "c0", f"new{i}", ["public"]), unit(1000 + i, dim)) for i in range(20)]
    idx.upsert("core", fresh)
    keys = [d.key for d in docs] + [d.key for d, _ in fresh]
    acls = [d.acl for d in docs] + [d.acl for d, _ in fresh]
    allv = np.vstack([vecs, np.array([v for _, v in fresh])])
    row = {k: i for i, k in enumerate(keys)}
    filters = [F("t0", ("public",)), F("t0", ("public",), ("c1",)), F("t1", ("group:x",)),
               F("t0", ("public", "group:x"), ("c0", "c2"))]
    for flt in filters:
        ok = np.array([k.tenant == flt.tenant and k not in gone and bool(set(a) & set(flt.acl))
                       and (flt.collections is None or k.collection in flt.collections)
                       for k, a in zip(keys, acls, strict=True)])
        for q in range(15):
            qv = allv[q * 97 % len(allv)] + 0.3 * rng.standard_normal(dim)
            scores = np.where(ok, allv @ (qv / np.linalg.norm(qv)), -np.inf)
            order = np.argsort(-scores)
            k = 20  # the exact top-k, compared as a set below the first near-tie
            while k > 1 and scores[order[k - 1]] - scores[order[k]] < 1e-5:
                k -= 1
            hits = idx.search("core", flt, qv.tolist(), 20)
            assert {h.key for h in hits[:k]} == {keys[i] for i in order[:k]}
            assert all(ok[row[h.key]] for h in hits)
    for d, v in fresh:
        assert idx.search("core", F("t0", ("public",), ("c0",)), v, 1)[0].key == d.key
    idx.close()


def test_edge_indexes_only_declared_fields_within_the_bound_across_restarts(tmp_path: Path) -> None:
    """Payload indexes in a shard every tenant shares: only for fields declared filterable, at
    most `max_indexes` (counted from the shard after a restart), and ranges on undeclared fields
    are still exact inside the query."""
    from shared.adapters import facets

    declared = ["f1", "f2", "f3"]
    wide = mdoc("wide", {f"f{i}": i for i in range(5000)})
    idx = EdgeVectorIndex(tmp_path / "vec", facets.fixed_fields(declared[:2]), max_indexes=2)
    idx.upsert("core", [(wide, unit(1)), (mdoc("b", {"f1": 7, "f4999": 1}), unit(2))])
    schema = idx._shard("core", None).info().payload_schema  # type: ignore[union-attr]
    nums = {k for k in schema if k.startswith("num.")}
    assert nums == {f"num.{facets.num_field(f)}" for f in declared[:2]}
    r = lambda f, **b: {h.key.doc_id for h in idx.search("core", W(FieldCondition(f, "range", **b)), unit(1), 9)}  # noqa: E731
    assert r("f4999", gte=4999) == {"wide"} and r("f4999", lte=1) == {"b"} and r("f1", gte=2) == {"b"}
    idx.close()
    again = EdgeVectorIndex(tmp_path / "vec", facets.fixed_fields(declared), max_indexes=2)
    again.upsert("core", [(wide, unit(1))])  # f3 now declared, but the shard is at its bound
    schema = again._shard("core", None).info().payload_schema  # type: ignore[union-attr]
    assert {k for k in schema if k.startswith("num.")} == nums
    again.close()


def _cert_doc(i: str, certs: list[str], acl: list[str] | None = None) -> StoredDoc:
    return StoredDoc(DocKey("t", "c", i), {}, acl or [PUBLIC_PRINCIPAL], None, "h", 0.0, certs=certs)


@pytest.mark.parametrize(("held", "sees"), HELD_SEES)
def test_certificates_are_required_inside_the_query(index: VectorIndex, held: frozenset[str], sees: set[str]) -> None:
    index.upsert("core", [(_cert_doc(i, certs), unit(1)) for i, certs in DOC_CERTS.items()])
    flt = SearchFilter("t", None, ("*",), certs=held)
    assert {h.key.doc_id for h in index.search("core", flt, unit(1), 50)} == sees


def test_certificates_apply_before_the_top_k_and_with_the_acl(index: VectorIndex) -> None:
    """Many near documents requiring a certificate the caller lacks must not crowd out the one
    far document it may read; the ACL still applies to a caller holding every certificate."""
    near = [(_cert_doc(f"n{i}", ["iss:a"]), unit(1)) for i in range(30)]
    index.upsert("core", [*near, (_cert_doc("far", []), unit(2)), (_cert_doc("hr", ["iss:a"], ["g:hr"]), unit(1))])
    assert [h.key.doc_id for h in index.search("core", SearchFilter("t", None, ("*",)), unit(1), 1)] == ["far"]
    held = SearchFilter("t", None, ("*",), certs=frozenset({"iss:a"}))
    assert "hr" not in {h.key.doc_id for h in index.search("core", held, unit(1), 50)}
    assert len(index.search("core", held, unit(1), 50)) == 31


def test_a_certificate_change_replaces_the_point(index: VectorIndex) -> None:
    index.upsert("core", [(_cert_doc("d", ["iss:a"]), unit(1))])
    assert index.search("core", F(), unit(1), 5) == []
    index.upsert("core", [(_cert_doc("d", []), unit(1))])
    assert [h.key.doc_id for h in index.search("core", F(), unit(1), 5)] == ["d"]
    index.upsert("core", [(_cert_doc("d", ["iss:b"]), [unit(1), unit(3)])])  # now of two passages
    assert index.search("core", F(), unit(1), 5) == []
    assert index.search("core", SearchFilter("t", None, ("*",), certs=frozenset({"iss:b"})), unit(3), 5)


def test_an_edge_shard_made_before_certificates_gets_their_index(tmp_path: Path) -> None:
    """A shard written without the `certs` payload index (an older release) is given one when
    opened; its points, which carry no certificates, stay readable by everyone."""
    import qdrant_edge as qe

    idx = EdgeVectorIndex(tmp_path / "vec")
    idx.upsert("core", [(doc("t", "c", "old"), unit(1))])
    idx.close()
    shard = qe.EdgeShard.load(str(tmp_path / "vec" / "core"))
    shard.update(qe.UpdateOperation.delete_field_index("certs"))
    assert "certs" not in shard.info().payload_schema
    shard.close()
    idx = EdgeVectorIndex(tmp_path / "vec")
    try:
        assert [h.key.doc_id for h in idx.search("core", F(), unit(1), 5)] == ["old"]
        idx.upsert("core", [(_cert_doc("new", ["iss:a"]), unit(1))])
        assert [h.key.doc_id for h in idx.search("core", F(), unit(1), 5)] == ["old"]
        reopened = idx._shard("core", None)
        assert reopened is not None and "certs" in reopened.info().payload_schema
    finally:
        idx.close()
