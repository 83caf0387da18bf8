"""More-like-this over `semantic.nodes` and `{vector}` queries, served on a real socket with the
in-process workers: the source document is never its own result (JSON, SSE, across cursor pages),
every collection the caller may read is searched, a source the caller may not read answers exactly
like a missing one, the reserved name refuses writes, and a vector query needs the admin scope,
the active space's dimension and finite numbers, and still never returns what the caller may not
read."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from harness.server import Served, ids, served
from shared.adapters.embedders.hash_embedder import HashEmbedder
from tests.integration.distributed.conftest import RecordingProvider

FLUTTER = " flutter of swept wings: aeroelastic flutter margins measured in the wind tunnel"
DOCS: dict[str, list[dict[str, Any]]] = {
    "wings": [
        {"_id": "w1", "title": "Wing flutter", "body": "wing flutter" + FLUTTER},
        {"_id": "w2", "title": "Flutter margins", "body": "margins" + FLUTTER},
        {"_id": "w3", "title": "Boundary layer", "body": "boundary layer transition on a flat plate at low speed"},
        # alike, but alice and the admin may not read them (ACL; certificate)
        {"_id": "wsecret", "title": "Wing flutter", "body": "wing flutter" + FLUTTER, "_acl": ["user:bob"]},
        {"_id": "wcert", "title": "Wing flutter", "body": "wing flutter" + FLUTTER, "_certs": ["lab:flutter"]},
    ],
    "rotors": [
        {"_id": "r1", "title": "Rotor blade flutter", "body": "rotor blade" + FLUTTER},
        {"_id": "r2", "title": "Rotor noise", "body": "helicopter rotor noise and blade vortex interaction"},
    ],
}
READABLE = {("wings", "w1"), ("wings", "w2"), ("wings", "w3"), ("rotors", "r1"), ("rotors", "r2")}


@pytest.fixture(scope="module")
def app(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Served]:
    with served(Path(tmp_path_factory.mktemp("mlt")) / "data") as s:
        for collection, docs in DOCS.items():
            r = s.call("POST", "/semantic/promote", "k-admin-a", {"collection": collection})
            assert r.status_code == 200, r.text
            assert s.bulk("k-admin-a", collection, docs).json()["accepted"] == len(docs)
        # bob reads every document but the certificate's (no key holds its certificate)
        for collection, docs in DOCS.items():
            for d in docs:
                if d["_id"] != "wcert":
                    assert s.wait_status("k-bob", collection, d["_id"], "ready", timeout=60) == "ready"
        yield s


def _nodes(source: tuple[str, str], **extra: Any) -> dict[str, Any]:
    return {"collection": "semantic.nodes", "semantic": {"query": {"doc": {"collection": source[0], "_id": source[1]}}},
            **extra}


def _keys(results: list[dict[str, Any]]) -> list[tuple[str, str]]:
    return [(r["collection"], str(r["id"])) for r in results]


def _error(r: httpx.Response) -> dict[str, Any]:
    """The error as a client tells one from another (the request id differs on every request)."""
    return {k: v for k, v in r.json()["error"].items() if k != "requestId"}


def _dim(app: Served) -> int:
    return int(app.call("GET", "/readyz", None).json()["dim"])


def _vector(app: Served, text: str) -> list[float]:
    """The hash embedder the server runs, in this process: the same text, the same vector."""
    return HashEmbedder(_dim(app)).embed([text])[0]


def test_nodes_searches_every_readable_collection_and_never_returns_the_source(app: Served) -> None:
    for strategy in ("auto", "semantic", "hybrid", "keyword"):
        body = _nodes(("wings", "w1"), limit=20)
        body["semantic"]["strategy"] = strategy
        r = app.read("k-alice", **body)
        assert r.status_code == 200, r.text
        got = _keys(r.json()["results"])
        assert ("wings", "w1") not in got, (strategy, got)
        assert set(got) <= READABLE - {("wings", "w1")}, (strategy, got)
        assert len(got) == len(set(got))
        if strategy != "keyword":  # every readable document has a vector: all four are found
            assert set(got) == READABLE - {("wings", "w1")}, (strategy, got)
            assert {c for c, _ in got} == {"wings", "rotors"}
    # the source's near twins rank above the unrelated documents
    semantic = _nodes(("wings", "w1"))
    semantic["semantic"]["strategy"] = "semantic"
    results = app.read("k-alice", **semantic).json()["results"]
    top = _keys(results)
    assert set(top[:2]) == {("wings", "w2"), ("rotors", "r1")}, top
    # each result explains itself to its reader, in its own collection
    for r in results:
        why = app.call("GET", f"/v1/explain/{r['explainId']}", "k-alice")
        assert why.status_code == 200, why.text
        assert (why.json()["collection"], str(why.json()["id"])) == (r["collection"], r["id"])


def test_cursor_pages_hold_the_whole_ranking_without_the_source(app: Served) -> None:
    whole = app.read("k-alice", **_nodes(("wings", "w1"), limit=20)).json()
    assert whole["nextCursor"] is None
    # `global: true` says what semantic.nodes already is: every collection of the tenant
    said = app.read("k-alice", **_nodes(("wings", "w1"), limit=20, **{"global": True})).json()
    assert _keys(said["results"]) == _keys(whole["results"])
    pages: list[tuple[str, str]] = []
    body = _nodes(("wings", "w1"), limit=1)
    for _ in range(10):
        page = app.read("k-alice", **body).json()
        pages += _keys(page["results"])
        if page["nextCursor"] is None:
            break
        body["cursor"] = page["nextCursor"]
    assert pages == _keys(whole["results"]) and len(pages) == 4
    # the stream: each event's page, and its cursor to the next page
    streamed: list[tuple[str, str]] = []
    body = _nodes(("wings", "w1"), limit=3)
    for _ in range(5):
        events = app.stream("k-alice", **body)
        assert events[-1][0] == "done", events[-1]
        for name, data in events:
            if name != "warming":
                assert ("wings", "w1") not in _keys(data["results"])
        streamed += _keys(events[-1][1]["results"])
        cursor = events[-1][1]["nextCursor"]
        if cursor is None:
            break
        body["cursor"] = cursor
    assert streamed == pages


def test_a_source_the_caller_may_not_read_answers_like_a_missing_one(app: Served) -> None:
    missing = app.read("k-alice", **_nodes(("wings", "nope")))
    for hidden in (("wings", "wsecret"), ("wings", "wcert")):
        r = app.read("k-alice", **_nodes(hidden))
        assert r.status_code == missing.status_code == 404
        assert _error(r) == _error(missing)
        streamed = app.call("POST", "/v1/read", "k-alice", _nodes(hidden), headers={"Accept": "text/event-stream"})
        assert streamed.status_code == 404 and _error(streamed) == _error(missing)
    # bob may read the ACL'd one: it is his source, and never his result
    got = _keys(app.read("k-bob", **_nodes(("wings", "wsecret"))).json()["results"])
    assert ("wings", "wsecret") not in got and ("wings", "w1") in got


def test_nodes_needs_a_document_or_a_vector(app: Served) -> None:
    for body in ({"collection": "semantic.nodes", "q": "wing flutter"},
                 {"collection": "semantic.nodes", "semantic": {"query": {"text": "wing flutter"}}}):
        r = app.read("k-alice", **body)
        assert r.status_code == 400, r.text
        err = r.json()["error"]
        assert err["code"] == "invalid_params" and err["details"]["field"] == "semantic.query", err


def test_the_reserved_name_refuses_every_write_and_edges_stay_writable(app: Served) -> None:
    name = "semantic.nodes"
    calls = [("PUT", f"/v1/collections/{name}/docs/x", "k-alice", {"title": "t"}),
             ("POST", f"/v1/collections/{name}/docs:bulk", "k-alice", {"docs": [{"_id": "x", "title": "t"}]}),
             ("DELETE", f"/v1/collections/{name}/docs/x", "k-alice", None),
             ("PUT", f"/v1/collections/{name}/settings", "k-admin-a", {"embedFields": ["title"]}),
             ("DELETE", f"/v1/collections/{name}", "k-admin-a", None)]
    for method, path, key, body in calls:
        r = app.call(method, path, key, body)
        assert r.status_code == 400, (method, path, r.text)
        assert r.json()["error"]["code"] == "invalid_params" and "reserved" in r.json()["error"]["message"]
    # nothing was written under it
    assert app.call("GET", f"/v1/collections/{name}/docs/x", "k-alice").status_code in (400, 404)
    edge = app.call("PUT", "/v1/collections/semantic.edges/docs/e1", "k-alice",
                    {"from": "wings/w1", "to": "rotors/r1", "predicate": "cites"})
    assert "reserved" not in edge.text, edge.text


def test_a_vector_query_answers_an_admin_within_its_readable_documents(app: Served) -> None:
    vec = _vector(app, "Wing flutter wing flutter" + FLUTTER)
    for collection in ("wings", "any", "semantic.nodes"):
        r = app.read("k-admin-a", collection=collection, semantic={"query": {"vector": vec}}, limit=20)
        assert r.status_code == 200, r.text
        out = r.json()
        assert out["strategy"] == "semantic" and out["diagnostics"]["strategyReason"] == "query_vector"
        got = _keys(out["results"])
        assert got[0] == ("wings", "w1"), got  # the same text's vector: the document itself comes first
        # the ACL'd and the certificate's twins are as near, and never shown to a key that may not read them
        assert set(got) <= READABLE, got
        if collection == "wings":
            assert {c for c, _ in got} == {"wings"}
    # bob reads the ACL'd twin; the same vector finds it for an admin of his tenant only through its ACL
    other = app.read("k-admin-b", collection="any", semantic={"query": {"vector": vec}})
    assert other.status_code == 200 and other.json()["results"] == []  # tenant tb holds nothing
    # a stream answers the same page
    events = app.stream("k-admin-a", collection="wings", semantic={"query": {"vector": vec}}, limit=20)
    assert events[-1][0] == "done" and set(_keys(events[-1][1]["results"])) <= READABLE
    assert ids(events[-1][1]["results"])[0] == "w1"


def test_a_vector_query_is_refused_unless_admin_finite_and_of_the_spaces_dimension(app: Served) -> None:
    dim = _dim(app)
    vec = _vector(app, "wing flutter")

    def refused(key: str, body: dict[str, Any], status: int, field: str | None) -> dict[str, Any]:
        r = app.read(key, **body)
        assert r.status_code == status, (body.get("semantic"), r.text)
        err: dict[str, Any] = r.json()["error"]
        if field is not None:
            assert err["details"]["field"] == field, err
        return err

    err = refused("k-alice", {"collection": "wings", "semantic": {"query": {"vector": vec}}}, 403, None)
    assert err["code"] == "forbidden" and "admin" in err["message"]
    refused("k-bob", {"collection": "any", "semantic": {"query": {"vector": vec}}}, 403, None)
    err = refused("k-admin-a", {"collection": "wings", "semantic": {"query": {"vector": vec[:-1]}}}, 400,
                  "semantic.query.vector")
    assert err["code"] == "invalid_params" and err["details"]["expected"] == dim and str(dim) in err["message"]
    refused("k-admin-a", {"collection": "wings", "semantic": {"query": {"vector": [0.0] * dim}}}, 400,
            "semantic.query.vector")
    refused("k-admin-a", {"collection": "wings", "semantic": {"query": {"vector": [1.0] * 5000}}}, 400,
            "semantic.query.vector")
    refused("k-admin-a", {"collection": "wings", "semantic": {"query": {"vector": [2e6, *vec[1:]]}}}, 400,
            "semantic.query.vector")
    refused("k-admin-a", {"collection": "wings", "semantic": {"query": {"vector": ["1", *vec[1:]]}}}, 400, None)
    refused("k-admin-a", {"collection": "wings", "semantic": {"strategy": "keyword", "query": {"vector": vec}}}, 400,
            "semantic.strategy")
    refused("k-admin-a", {"collection": "wings", "semantic": {"strategy": "hybrid", "query": {"vector": vec}}}, 400,
            "semantic.strategy")
    refused("k-admin-a", {"collection": "wings", "q": "wing", "semantic": {"query": {"vector": vec}}}, 400, "q")
    refused("k-admin-a", {"collection": "wings", "semantic": {"query": {"vector": vec, "text": "wing"}}}, 400, None)
    # NaN and infinity are no JSON numbers: the body is refused before anything reads it
    numbers = ", ".join(["0.1"] * (dim - 1))
    for bad in ("NaN", "Infinity", "1e999"):
        raw = f'{{"collection": "wings", "semantic": {{"query": {{"vector": [{bad}, {numbers}]}}}}}}'
        r = app.call("POST", "/v1/read", "k-admin-a", content=raw.encode(),
                     headers={"Content-Type": "application/json", "Accept": "application/json"})
        assert r.status_code == 400 and r.json()["error"]["code"] == "invalid_params", (bad, r.text)


def test_a_vector_binds_its_cursor(app: Served) -> None:
    vec = _vector(app, "wing flutter" + FLUTTER)
    first = app.read("k-admin-a", collection="any", semantic={"query": {"vector": vec}}, limit=1).json()
    assert first["nextCursor"]
    other = [v + 0.001 for v in vec]
    r = app.read("k-admin-a", collection="any", semantic={"query": {"vector": other}}, limit=1,
                 cursor=first["nextCursor"])
    assert r.status_code == 404  # another query's cursor
    same = app.read("k-admin-a", collection="any", semantic={"query": {"vector": vec}}, limit=1,
                    cursor=first["nextCursor"])
    assert same.status_code == 200 and _keys(same.json()["results"]) != _keys(first["results"])


def test_a_vector_query_never_reaches_the_embedding_provider(tmp_path: Path) -> None:
    """A query text goes to the provider (the control); the same read by vector never does,
    JSON or stream, however often it is asked."""
    provider = RecordingProvider(dim=32)  # (its `__enter__` is typed as the base server's)
    with provider:
        env = {"VIBE_EMBEDDER": "openai", "VIBE_OPENAI_BASE_URL": provider.base_url, "VIBE_EMBED_MODEL": "m"}
        with served(tmp_path / "data", env=env) as app:
            put = app.put("k-admin-a", "v", "a", {"title": "Wing flutter", "body": "flutter margins"})
            assert put.status_code == 201
            before = len(provider.embed_calls())
            r = app.read("k-admin-a", collection="v", semantic={"strategy": "semantic", "query": {"text": "wing"}})
            # the control: the query text went to the provider (the document may follow, by its touch)
            assert r.status_code == 200 and ["wing"] in [t for _, t, _ in provider.embed_calls()[before:]]
            calls = len(provider.embed_calls())
            vec = [0.25] * 32
            for _ in range(2):
                r = app.read("k-admin-a", collection="v", semantic={"query": {"vector": vec}})
                assert r.status_code == 200 and r.json()["strategy"] == "semantic", r.text
                events = app.stream("k-admin-a", collection="v", semantic={"query": {"vector": vec}})
                assert events[-1][0] == "done"
            # the document itself may be embedded by its touch; no query text or vector was sent
            sent = [texts for _, texts, _ in provider.embed_calls()[calls:]]
            assert all("flutter" in " ".join(t) for t in sent), sent
