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
from shared.model import PUBLIC_PRINCIPAL, DocKey, StoredDoc
from shared.ports import SearchFilter, VectorIndex

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


def test_upsert_replaces_payload_and_delete_removes(index: VectorIndex) -> None:
    index.upsert("core", [(doc("t", "c", "1"), unit(3))])
    index.upsert("core", [(doc("t", "c", "1", ["g:x"]), unit(3))])
    assert index.search("core", F(), unit(3), 5) == []
    assert len(index.search("core", F(acl=("g:x",)), unit(3), 5)) == 1
    index.delete("core", [DocKey("t", "c", "1")])
    assert index.search("core", F(acl=("g:x",)), unit(3), 5) == []


def test_unknown_space_is_empty(index: VectorIndex) -> None:
    assert index.search("nope", F(), unit(1), 5) == []
