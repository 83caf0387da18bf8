"""Collections through the served app (docs/collections.md): the list and who sees counts, the
delete that leaves no trace in any table, index or the cold store, delete by filter within the
caller's ACL, settings honoured by another API process within the TTL, and the name rule at
the front doors."""

from __future__ import annotations

import sqlite3
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from harness.openai_server import OpenAIProtocolServer
from harness.server import Served, served
from shared.adapters.cold_packed import PackedColdStore
from shared.adapters.edge_vectors import EdgeVectorIndex
from shared.adapters.tantivy_lexical import TantivyLexicalIndex
from shared.ports import SearchFilter

BODY = " wind tunnel measurements of boundary layer transition on swept wings"
DOCS = [{"_id": f"d{i}", "title": f"Flutter report {i}", "body": f"case {i}" + BODY} for i in range(6)]
TABLES = ("docs", "sidecar", "doc_usage", "usage_buckets", "provider_usage", "collection_modes", "collection_settings",
          "changes")


@pytest.fixture(scope="module")
def api() -> Iterator[OpenAIProtocolServer]:
    with OpenAIProtocolServer(dim=32) as s:
        yield s


@pytest.fixture(scope="module")
def app(api: OpenAIProtocolServer, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Served]:
    env = {"VIBE_EMBEDDER": "openai", "VIBE_OPENAI_BASE_URL": api.base_url, "VIBE_EMBED_MODEL": "test-embed",
           "VIBE_USAGE_FLUSH_SECONDS": "0.2", "VIBE_BACKFILL_INTERVAL_SECONDS": "0.2",
           "VIBE_PER_TENANT_PER_MIN": "100000", "VIBE_COLLECTION_DELETE_PAGE": "2",
           "VIBE_COLLECTION_LANGUAGES": '{"names": "simple"}'}  # the lexical indexes analyse en and simple
    with served(Path(tmp_path_factory.mktemp("coll")) / "data", env=env) as s:
        yield s


def _rows(data: Path, table: str, collection: str) -> int:
    with sqlite3.connect(data / "vibe.sqlite3") as db:
        return int(db.execute(f"SELECT COUNT(*) FROM {table} WHERE tenant='ta' AND collection=?",  # noqa: S608
                              (collection,)).fetchone()[0])


def _hashes(data: Path, ids: list[str], collection: str) -> dict[str, str]:
    with sqlite3.connect(data / "vibe.sqlite3") as db:
        return {r[0]: r[1] for r in db.execute(
            "SELECT doc_id, content_hash FROM docs WHERE tenant='ta' AND collection=?", (collection,)) if r[0] in ids}


def _cold_hashes(data: Path) -> list[str]:
    cold = PackedColdStore.sqlite(data / "cold")
    try:
        return cold.hashes("ta", "core", "", 10_000)
    finally:
        cold.close()


def _ready(app: Served, collection: str, docs: list[dict[str, Any]]) -> None:
    assert app.bulk("k-admin-a", collection, docs).status_code == 200
    app.read("k-admin-a", collection=collection, q="flutter report", semantic={"strategy": "keyword"}, limit=20)
    for d in docs:
        assert app.wait_status("k-admin-a", collection, str(d["_id"]), "ready", timeout=30) == "ready"


def _until(check: Any, timeout: float = 15) -> Any:
    deadline = time.monotonic() + timeout
    while True:
        out = check()
        if out or time.monotonic() > deadline:
            return out
        time.sleep(0.1)


def test_the_list_shows_counts_to_admin_keys_only(app: Served) -> None:
    assert app.bulk("k-alice", "listed", [{"_id": "a", "title": "x"}, {"_id": "b", "title": "y", "_acl": ["user:bob"]}]
                    ).status_code == 200
    admin = {c["name"]: c for c in app.call("GET", "/v1/collections", "k-admin-a").json()["collections"]}
    assert admin["listed"]["documents"] == 2 and admin["listed"]["eager"] is False
    assert admin["listed"]["language"] == "en" and admin["listed"]["embedFields"] is None
    reader = {c["name"]: c for c in app.call("GET", "/v1/collections", "k-bob").json()["collections"]}
    assert "listed" in reader and "documents" not in reader["listed"]  # no count of what it may not read
    other = app.call("GET", "/v1/collections", "k-admin-b").json()["collections"]
    assert "listed" not in {c["name"] for c in other}  # another tenant's
    assert app.put("k-alice", "listed2", "a", {"title": "z"}).status_code == 201
    page = app.call("GET", "/v1/collections?limit=1", "k-admin-a").json()
    assert len(page["collections"]) == 1 and page["next"] == page["collections"][0]["name"]
    rest = app.call("GET", f"/v1/collections?after={page['next']}", "k-admin-a").json()["collections"]
    assert "listed2" in {c["name"] for c in rest} and page["next"] not in {c["name"] for c in rest}


def test_a_collection_delete_leaves_no_trace(app: Served) -> None:
    data = app.data_dir
    _ready(app, "gone", DOCS)
    _ready(app, "kept", DOCS[:1])  # same content in another collection: its vector stays
    assert app.call("POST", "/semantic/evict", "k-admin-a", {"collection": "gone", "idleSeconds": 0}).json()[
        "evicted"] == len(DOCS)
    app.read("k-admin-a", collection="gone", q="flutter", semantic={"strategy": "keyword"})
    assert app.call("PUT", "/v1/collections/gone/settings", "k-admin-a", {"embedFields": ["title", "body"]}
                    ).status_code == 200
    cold_before = _cold_hashes(data)
    hashes = _hashes(data, [str(d["_id"]) for d in DOCS], "gone")
    assert set(hashes.values()) - {hashes["d0"]} <= set(cold_before)
    _until(lambda: _rows(data, "usage_buckets", "gone") and _rows(data, "provider_usage", "gone"))
    before = {t: _rows(data, t, "gone") for t in TABLES}
    assert all(before[t] for t in ("docs", "sidecar", "usage_buckets", "provider_usage", "collection_settings")), before
    spent = app.call("GET", "/semantic/usage", "k-admin-a").json()

    r = app.call("DELETE", "/v1/collections/gone", "k-admin-a")
    assert r.status_code in (200, 202) and r.json()["deleted"] >= 2  # pages of 2: at least the request's own
    final = _until(lambda: (x := app.call("DELETE", "/v1/collections/gone", "k-admin-a")).status_code == 200 and x)
    assert final and final.json() == {"collection": "gone", "state": "deleted", "deleted": final.json()["deleted"],
                                      "remaining": 0}
    # the tenant's spend still counts what the deleted collection cost (its cap stays honest)
    assert app.call("GET", "/semantic/usage", "k-admin-a").json()["days"] == spent["days"]

    after = {t: _rows(data, t, "gone") for t in TABLES if t != "changes"}
    assert after == dict.fromkeys(after, 0)
    assert not set(_cold_hashes(data)) & (set(hashes.values()) - {hashes["d0"]})  # cold copies gone too
    assert app.call("GET", "/v1/collections/gone/docs/d1", "k-admin-a").status_code == 404
    for strategy in ("keyword", "semantic"):
        out = app.read("k-admin-a", collection="gone", q="flutter report", semantic={"strategy": strategy}).json()
        assert out["results"] == []
    names = {c["name"] for c in app.call("GET", "/v1/collections", "k-admin-a").json()["collections"]}
    assert "gone" not in names and "kept" in names
    # the other collection's copy of d0's content is untouched and still found
    assert app.call("GET", "/semantic/status?collection=kept&_id=d0", "k-admin-a").json()["status"] == "ready"
    hits = app.read("k-admin-a", collection="kept", q="flutter", semantic={"strategy": "semantic"}).json()["results"]
    assert [h["id"] for h in hits] == ["d0"]


def test_a_collection_delete_needs_admin_and_a_valid_name(app: Served) -> None:
    assert app.call("DELETE", "/v1/collections/listed", "k-alice").status_code == 403
    assert app.call("DELETE", "/v1/collections/mcp-task-x", "k-admin-a").status_code == 400
    assert app.call("DELETE", "/v1/collections/" + "a" * 200, "k-admin-a").status_code == 400


def test_delete_by_filter_deletes_only_what_the_writer_may_read(app: Served) -> None:
    docs = [{"_id": f"p{i}", "title": f"Note {i}", "kind": "draft" if i % 2 else "final"} for i in range(8)]
    docs += [{"_id": "secret", "title": "Hidden", "kind": "draft", "_acl": ["user:bob"]}]
    assert app.bulk("k-admin-a", "notes", docs).json()["accepted"] == 9
    assert app.call("POST", "/v1/collections/notes/docs:deleteByFilter", "k-bob",
                    {"filter": {"kind": "draft"}}).status_code == 403  # read scope only
    r = app.call("POST", "/v1/collections/notes/docs:deleteByFilter", "k-alice",
                 {"filter": {"kind": "draft"}, "limit": 3})
    first = r.json()
    assert r.status_code == 200 and first["deleted"] == 3 and first["more"] is True
    r = app.call("POST", "/v1/collections/notes/docs:deleteByFilter", "k-alice",
                 {"filter": {"kind": "draft"}, "after": first["after"]})
    assert r.json()["deleted"] == 1 and r.json()["more"] is False
    left = {d["_id"] for d in app.call("POST", "/v1/collections/notes/docs:mget", "k-admin-a",
                                       {"ids": [d["_id"] for d in docs]}).json()["docs"] if d["_found"]}
    assert left == {"p0", "p2", "p4", "p6"}
    assert app.call("GET", "/v1/collections/notes/docs/secret", "k-bob").status_code == 200  # not alice's to delete
    out = app.read("k-admin-a", collection="notes", q="note", semantic={"strategy": "keyword"}, limit=20).json()
    assert {h["id"] for h in out["results"]} == {"p0", "p2", "p4", "p6"}  # the lexical index followed
    bad = app.call("POST", "/v1/collections/notes/docs:deleteByFilter", "k-alice", {"filter": {"x" * 65: 1}})
    assert bad.status_code == 400 and bad.json()["error"]["code"] == "invalid_params"
    assert app.call("POST", "/v1/collections/notes/docs:deleteByFilter", "k-alice", {}).status_code == 400


def test_settings_are_checked_and_eager_is_the_promotion_state(app: Served) -> None:
    r = app.call("PUT", "/v1/collections/conf/settings", "k-admin-a",
                 {"eager": True, "filterableFields": ["year", "kind"], "language": "simple"})
    assert r.status_code == 200, r.text
    assert r.json()["eager"] is True and r.json()["filterableFields"] == ["year", "kind"]
    promos = app.call("GET", "/semantic/promotions", "k-admin-a").json()["collections"]
    assert any(m["collection"] == "conf" and m["state"] == "eager" for m in promos)
    assert app.call("PUT", "/v1/collections/conf/settings", "k-admin-a", {"eager": False}).json()["eager"] is False
    got = app.call("GET", "/v1/collections/conf/settings", "k-admin-a").json()
    assert got["filterableFields"] == ["year", "kind"] and got["eager"] is False  # kept: not sent
    for bad in ({"language": "klingon"}, {"embedFields": ["a\x01"]}, {"filterableFields": ["_acl"]},
                {"embedFields": "title"}, {"eager": "yes"}, {"colour": 1}):
        r = app.call("PUT", "/v1/collections/conf/settings", "k-admin-a", bad)
        assert r.status_code == 400 and r.json()["error"]["code"] == "invalid_params", bad
    assert app.call("GET", "/v1/collections/conf/settings", "k-alice").status_code == 403
    # a collection with documents keeps its language: its lexical entries are in that language's index
    assert app.call("PUT", "/v1/collections/listed/settings", "k-admin-a", {"language": "simple"}).status_code == 409
    assert app.call("PUT", "/v1/collections/listed/settings", "k-admin-a", {"language": "en"}).status_code == 200


@pytest.mark.parametrize("call", [
    ("POST", "/v1/read", {"collection": "c" * 8192, "q": "x"}),
    ("POST", "/v1/read", {"collection": "bad name", "q": "x"}),
    ("POST", "/v1/read", {"collection": "any", "q": "x", "semantic": {"query": {"doc": {"collection": "c" * 300,
                                                                                         "_id": "a"}}}}),
    ("GET", "/v1/collections/" + "c" * 300 + "/docs/a", None),
    ("DELETE", "/v1/collections/bad%20name/docs/a", None),
    ("GET", "/semantic/coverage?collection=" + "c" * 300, None),
    ("PUT", "/v1/collections/fields/docs/a", {"title": "x", "f" * 65: 1}),
    ("PUT", "/v1/collections/fields/docs/a", {"title": "x", "bad\nname": 1}),
    ("PUT", "/v1/collections/fields/docs/a", {f"f{i}": i for i in range(1001)}),
])
def test_names_are_bounded_at_every_door(app: Served, call: tuple[str, str, Any]) -> None:
    method, path, payload = call
    r = app.call(method, path, "k-admin-a", payload)
    assert r.status_code == 400 and r.json()["error"]["code"] == "invalid_params", r.text
    assert _rows(app.data_dir, "usage_buckets", "c" * 8192) == 0


def test_a_settings_change_reaches_another_api_process_within_the_ttl(tmp_path: Path) -> None:
    data = tmp_path / "data"
    env = {"VIBE_COLLECTION_SETTINGS_TTL_SECONDS": "0.5", "VIBE_COLLECTION_LANGUAGES": '{"names": "simple"}'}
    with served(data, env=env) as a, served(data, env=env) as b:
        pair = [{"_id": "x", "title": "Same title", "body": "one body"},
                {"_id": "y", "title": "Same title", "body": "another body"}]
        assert b.bulk("k-admin-a", "emb", pair).status_code == 200
        h = _hashes(data, ["x", "y"], "emb")
        assert h["x"] != h["y"]  # every field is embedded: different text, different content
        r = a.call("PUT", "/v1/collections/emb/settings", "k-admin-a", {"embedFields": ["title"]})
        assert r.status_code == 200 and r.json()["embedFields"] == ["title"]

        def honoured() -> bool:
            assert b.bulk("k-admin-a", "emb", pair).status_code == 200
            h = _hashes(data, ["x", "y"], "emb")
            return h["x"] == h["y"]  # b's writes now embed the title only

        assert _until(honoured, timeout=10)
        assert b.call("GET", "/v1/collections/emb/settings", "k-admin-a").json()["embedFields"] == ["title"]

        # the language set through `a` decides how `b` indexes and searches the collection
        assert a.call("PUT", "/v1/collections/lang/settings", "k-admin-a", {"language": "simple"}).status_code == 200
        time.sleep(0.6)  # past the TTL: whatever b read before the change has expired (the bound under test)
        assert b.put("k-admin-a", "lang", "w", {"title": "Running shoes"}).status_code == 201
        assert _until(lambda: _found(b, "lang", "running") == ["w"], timeout=10)
        assert _found(b, "lang", "run") == []  # not stemmed: analysed as `simple` in b too


def _found(app: Served, collection: str, q: str) -> list[str]:
    out = app.read("k-admin-a", collection=collection, q=q, semantic={"strategy": "keyword"}).json()
    return [h["id"] for h in out["results"]]


def test_a_stored_language_decides_how_a_collection_is_analysed(app: Served) -> None:
    doc = {"title": "Running shoes", "body": "the quick runners"}
    assert app.put("k-admin-a", "words-en", "w", doc).status_code == 201
    assert _found(app, "words-en", "run") == ["w"]  # English stems: running -> run
    r = app.call("PUT", "/v1/collections/words/settings", "k-admin-a", {"language": "simple"})
    assert r.status_code == 200 and r.json()["language"] == "simple"
    assert app.put("k-admin-a", "words", "w", doc).status_code == 201
    assert _found(app, "words", "run") == []  # `simple`: no stemming
    assert _found(app, "words", "running") == ["w"]
    listed = {c["name"]: c for c in app.call("GET", "/v1/collections", "k-admin-a").json()["collections"]}
    assert listed["words"]["language"] == "simple" and listed["words-en"]["language"] == "en"
    # deleted with its collection: the documents leave the `simple` index too
    assert app.call("DELETE", "/v1/collections/words", "k-admin-a").status_code == 200
    assert app.put("k-admin-a", "words", "w2", {"title": "Walking"}).status_code == 201
    assert _found(app, "words", "running") == [] and _found(app, "words", "walk") == ["w2"]  # English again


def test_a_deleted_collection_leaves_the_process_indexes(tmp_path: Path) -> None:
    """Read the served process's own tantivy and qdrant-edge indexes once it has stopped: the
    deleted collection's entries are gone from both, the other collection's are still there."""
    data = tmp_path / "data"
    with served(data, env={"VIBE_COLLECTION_DELETE_PAGE": "3"}) as s:
        for name in ("gone", "kept"):
            assert s.call("PUT", f"/v1/collections/{name}/settings", "k-admin-a", {"eager": True}).status_code == 200
            assert s.bulk("k-admin-a", name, DOCS).status_code == 200
            for d in DOCS:
                assert s.wait_status("k-admin-a", name, str(d["_id"]), "ready", timeout=30) == "ready"
        assert _until(lambda: s.call("DELETE", "/v1/collections/gone", "k-admin-a").status_code == 200)
    with sqlite3.connect(data / "vibe.sqlite3") as db:
        vector = np.frombuffer(db.execute("SELECT vec FROM vectors LIMIT 1").fetchone()[0], dtype=np.float32).tolist()
    lexical, vectors = TantivyLexicalIndex(data / "lexical"), EdgeVectorIndex(data / "vectors")
    try:
        def found(collection: str) -> tuple[int, int]:
            flt = SearchFilter("ta", (collection,), ("*", "user:admin"))
            return (len(lexical.search(flt, "flutter report", 50)),
                    len(vectors.search("core", flt, vector, 50)))

        assert found("kept") == (len(DOCS), len(DOCS))
        assert found("gone") == (0, 0)
    finally:
        lexical.close()
        vectors.close()
