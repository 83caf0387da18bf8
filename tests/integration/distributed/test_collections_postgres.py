"""Collections on the distributed store and keyword index: two API processes on one PostgreSQL
and one OpenSearch node. A language set through one is how the other indexes and searches the
collection (OpenSearch's per-language fields); a collection deleted through one is gone from the
store of record and from the shared index, and its progress is visible through the other."""

from __future__ import annotations

import time
import uuid
from collections.abc import Iterator
from pathlib import Path

import psycopg
import pytest
from opensearchpy import OpenSearch

from harness.server import Served, served

TABLES = ("docs", "sidecar", "doc_usage", "usage_buckets", "provider_usage", "collection_modes", "collection_settings")


@pytest.fixture
def prefix(opensearch_url: str) -> Iterator[str]:
    name = f"vibe-coll-{uuid.uuid4().hex[:10]}-"
    yield name
    client = OpenSearch(hosts=[opensearch_url], timeout=30)
    client.indices.delete(index=name + "*", ignore_unavailable=True, allow_no_indices=True)
    client.indices.delete_index_template(name=name + "template", ignore=[404])
    client.close()


def _found(s: Served, collection: str, q: str) -> list[str]:
    r = s.read("k-admin-a", collection=collection, q=q, semantic={"strategy": "keyword"}, limit=50)
    assert r.status_code == 200, r.text
    return sorted(h["id"] for h in r.json()["results"])


def _rows(url: str, collection: str) -> dict[str, int]:
    with psycopg.connect(url) as db:
        return {t: int(db.execute(f"SELECT COUNT(*) FROM {t} WHERE tenant='ta' AND collection=%s",  # noqa: S608
                                  (collection,)).fetchone()[0]) for t in TABLES}  # type: ignore[index]


def test_collections_across_two_replicas(postgres_url: str, opensearch_url: str, prefix: str, tmp_path: Path) -> None:
    env = {"VIBE_STORE": "postgres", "VIBE_POSTGRES_URL": postgres_url, "VIBE_POSTGRES_POOL_SIZE": "4",
           "VIBE_LEXICAL": "opensearch", "VIBE_OPENSEARCH_URL": opensearch_url, "VIBE_OPENSEARCH_PREFIX": prefix,
           "VIBE_COLD_DIR": str(tmp_path / "cold-volume"), "VIBE_COLLECTION_SETTINGS_TTL_SECONDS": "0.5",
           "VIBE_COLLECTION_DELETE_PAGE": "2", "VIBE_COLLECTION_LANGUAGES": '{"names": "simple"}'}
    with served(tmp_path / "a" / "data", env=env) as a, served(tmp_path / "b" / "data", env=env) as b:
        r = a.call("PUT", "/v1/collections/lang/settings", "k-admin-a", {"language": "simple", "eager": True})
        assert r.status_code == 200 and r.json()["language"] == "simple"
        assert b.put("k-admin-a", "lang", "w", {"title": "Running shoes"}).status_code == 201
        assert b.put("k-admin-a", "lang-en", "w", {"title": "Running shoes"}).status_code == 201
        assert _found(b, "lang-en", "run") == ["w"]  # English: stemmed
        assert _found(b, "lang", "running") == ["w"] and _found(b, "lang", "run") == []  # simple, in b too
        assert b.call("GET", "/v1/collections/lang/settings", "k-admin-a").json()["eager"] is True

        docs = [{"_id": f"d{i}", "title": f"Flutter report {i}"} for i in range(9)]
        assert a.bulk("k-admin-a", "gone", docs).json()["accepted"] == 9
        assert a.call("PUT", "/v1/collections/gone/settings", "k-admin-a", {"embedFields": ["title"]}
                      ).status_code == 200
        assert _found(b, "gone", "flutter") == sorted(d["_id"] for d in docs)
        first = a.call("DELETE", "/v1/collections/gone", "k-admin-a")
        assert first.status_code in (200, 202) and first.json()["deleted"] >= 2
        done = None
        for _ in range(200):  # progress and the end, seen through the other replica
            r = b.call("DELETE", "/v1/collections/gone", "k-admin-a")
            if r.status_code == 200:
                done = r.json()
                break
            time.sleep(0.05)
        assert done is not None and done["remaining"] == 0
        assert _rows(postgres_url, "gone") == dict.fromkeys(TABLES, 0)
        assert _found(a, "gone", "flutter") == [] and _found(b, "gone", "flutter") == []
        # the shared index holds nothing of it either (a read re-checks against the store; ask the index)
        client = OpenSearch(hosts=[opensearch_url], timeout=30)
        try:
            client.indices.refresh(index=prefix + "*")
            hits = client.search(index=prefix + "*", body={"query": {"term": {"collection": "gone"}}})
            assert hits["hits"]["total"]["value"] == 0
            kept = client.search(index=prefix + "*", body={"query": {"term": {"collection": "lang"}}})
            assert kept["hits"]["total"]["value"] == 1
        finally:
            client.close()
