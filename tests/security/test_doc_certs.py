"""A document's `_certs`: validated on write, kept in the store of record (SQLite and
PostgreSQL), and required of every reader besides the ACL. Documents stored before certificates
existed read back with none and stay readable without a rewrite."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest

from harness.server import ids, served
from services.api.render import answer_body
from services.planner.planner import ReadRequest
from services.wiring import Container, build
from shared.config import Settings
from shared.errors import ErrorCode, VibeError
from shared.model import DocKey, Principal
from tests.mcp.support import http

WRITER = Principal("t", ("user:alice",), frozenset({"read", "write"}), frozenset({"hr:staff", "legal:nda"}))
NONE = Principal("t", ("user:alice",), frozenset({"read"}))
ONE = Principal("t", ("user:alice",), frozenset({"read"}), frozenset({"hr:staff"}))
BOTH = Principal("t", ("user:alice",), frozenset({"read"}), frozenset({"hr:staff", "legal:nda"}))


@pytest.fixture(params=["sqlite", "postgres"])
def c(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Container]:
    extra = {} if request.param == "sqlite" else {"store": "postgres", "postgres_url": request.getfixturevalue(
        "postgres_url"), "postgres_pool_size": 2}
    c = build(Settings(data_dir=tmp_path / "data", embedder="hash", **extra))
    c.start()
    try:
        yield c
    finally:
        c.stop()


def _ids(c: Container, who: Principal, q: str) -> set[str]:
    """What the caller is shown, and what the engine ranked for it: both must be its readable set."""
    session = c.planner.open(who, ReadRequest("c", q, "keyword", limit=50))
    shown = {str(r["id"]) for r in answer_body(session.answer())["results"]}  # type: ignore[attr-defined]
    return shown


def test_certs_are_stored_and_required_of_readers(c: Container) -> None:
    bodies = {"open": {"body": "gearbox notes"},
              "one": {"body": "gearbox memo", "_certs": ["hr:staff"]},
              "two": {"body": "gearbox contract", "_certs": ["legal:nda", "hr:staff", "hr:staff"]}}
    c.docs.put([c.docs.parse(WRITER, "c", i, b) for i, b in bodies.items()])
    two = c.store.get_doc(DocKey("t", "c", "two"))
    assert two is not None and two.certs == ["hr:staff", "legal:nda"] and two.vibe == {}
    assert _ids(c, NONE, "gearbox") == {"open"}
    assert _ids(c, ONE, "gearbox") == {"open", "one"}
    assert _ids(c, BOTH, "gearbox") == {"open", "one", "two"}
    assert not two.readable_by(ONE) and two.readable_by(BOTH)


def test_a_certificate_change_alone_is_written_and_enforced(c: Container) -> None:
    c.docs.put([c.docs.parse(WRITER, "c", "d", {"body": "gearbox"})])
    head = c.store.change_log_head()
    c.docs.put([c.docs.parse(WRITER, "c", "d", {"body": "gearbox", "_certs": ["legal:nda"]})])
    assert c.store.change_log_head() > head  # not taken for an unchanged rewrite
    assert _ids(c, ONE, "gearbox") == set()
    assert _ids(c, BOTH, "gearbox") == {"d"}


@pytest.mark.parametrize("certs", [
    "hr:staff", [1], ["nocolon"], [":name"], ["issuer:"], ["a b:c"], ["x:" + "n" * 200],
    ["i:\u00e9"], ["i:n\x1f"], [f"i:n{i}" for i in range(33)], {"a": "b"},
])
def test_bad_certs_are_refused_and_nothing_is_written(c: Container, certs: object) -> None:
    with pytest.raises(VibeError) as err:
        c.docs.parse(WRITER, "c", "d", {"body": "x", "_certs": certs})
    assert err.value.code is ErrorCode.INVALID_PARAMS
    assert c.store.get_doc(DocKey("t", "c", "d")) is None


def test_vibe_may_not_smuggle_the_stored_certificate_key(c: Container) -> None:
    with pytest.raises(VibeError):
        c.docs.parse(WRITER, "c", "d", {"body": "x", "_vibe": {"_certs": ["a:b"]}})


def test_documents_stored_before_certificates_stay_readable(tmp_path: Path) -> None:
    """A row written as the previous release wrote it (no certificate key in its `vibe`
    column) reads back requiring none."""
    c = build(Settings(data_dir=tmp_path / "data", embedder="hash"))
    c.start()
    try:
        c.docs.put([c.docs.parse(WRITER, "c", "old", {"body": "gearbox", "_vibe": {"note": 1}})])
        raw = c.store._conn().execute(  # type: ignore[attr-defined]
            "SELECT vibe FROM docs WHERE doc_id='old'").fetchone()[0]
        assert json.loads(raw) == {"note": 1}
        doc = c.store.get_doc(DocKey("t", "c", "old"))
        assert doc is not None and doc.certs == [] and doc.vibe == {"note": 1}
        assert _ids(c, NONE, "gearbox") == {"old"}
    finally:
        c.stop()


HTTP_KEYS = [
    {"key": "c-writer", "tenant": "t", "principals": ["svc:w"], "certs": ["hr:staff", "legal:nda"],
     "scopes": ["read", "write"]},
    {"key": "c-none", "tenant": "t", "principals": ["user:x"], "scopes": ["read", "write"]},
]


def test_over_http_bad_certs_are_refused_one_by_one_and_unreadable_looks_absent(tmp_path: Path) -> None:
    """PUT with bad `_certs`: 400 `invalid_params`, nothing written. In a bulk, only the bad
    document is refused. A document requiring a certificate the caller lacks is absent to it:
    GET 404, mget `found: false`, no result, and it cannot be overwritten or deleted by it."""
    with served(tmp_path / "data", keys=HTTP_KEYS) as s:
        bad = s.put("c-writer", "c", "bad", {"body": "gearbox", "_certs": ["no colon"]})
        assert bad.status_code == 400 and bad.json()["error"]["code"] == "invalid_params", bad.text
        assert s.call("GET", "/v1/collections/c/docs/bad", "c-writer").status_code == 404
        r = s.bulk("c-writer", "c", [{"_id": "ok", "body": "gearbox", "_certs": ["hr:staff"]},
                                     {"_id": "worse", "body": "gearbox", "_certs": "hr:staff"},
                                     {"_id": "open", "body": "gearbox"}])
        items = {i["_id"]: i for i in r.json()["results"]}
        assert items["worse"]["status"] == 400 and items["worse"]["error"]["code"] == "invalid_params"
        assert items["ok"]["status"] == 201 and items["open"]["status"] == 201
        assert s.call("GET", "/v1/collections/c/docs/ok", "c-writer").status_code == 200
        assert s.call("GET", "/v1/collections/c/docs/ok", "c-none").status_code == 404
        got = s.call("POST", "/v1/collections/c/docs:mget", "c-none", {"ids": ["ok", "open"]}).json()
        assert [d.get("_found") for d in got["docs"]] == [False, True]
        assert ids(s.read("c-none", collection="c", q="gearbox").json()["results"]) == ["open"]
        assert sorted(ids(s.read("c-writer", collection="c", q="gearbox").json()["results"])) == ["ok", "open"]
        assert s.put("c-none", "c", "ok", {"body": "overwritten"}).status_code in (403, 404)
        assert s.call("DELETE", "/v1/collections/c/docs/ok", "c-none").status_code == 404
        assert s.call("GET", "/v1/collections/c/docs/ok", "c-writer").json()["body"] == "gearbox"


def test_over_http_more_like_this_and_delete_by_filter_respect_certificates(tmp_path: Path) -> None:
    """A source document needing a certificate the caller lacks is not found for more-like-this
    (and never shown as a neighbour); deleteByFilter deletes only what the caller may read."""
    with served(tmp_path / "data", keys=HTTP_KEYS, env={"VIBE_EMBEDDER": "hash"}) as s:
        r = s.bulk("c-writer", "c", [{"_id": "secret", "body": "gearbox oil pump", "kind": "x",
                                      "_certs": ["legal:nda"]},
                                     {"_id": "open", "body": "gearbox oil filter", "kind": "x"}])
        assert not r.json()["errors"], r.text
        like = {"collection": "c", "q": "", "semantic": {"strategy": "semantic",
                                                         "query": {"doc": {"collection": "c", "_id": "secret"}}}}
        refused = s.read("c-none", **like)
        assert refused.status_code == 404 and refused.json()["error"]["code"] == "not_found", refused.text
        assert s.read("c-writer", **like).status_code == 200
        like["semantic"]["query"] = {"doc": {"collection": "c", "_id": "open"}}  # type: ignore[index]
        shown = s.read("c-none", **like)
        assert shown.status_code == 200 and "secret" not in ids(shown.json()["results"]), shown.text
        # the writer's reads queued both documents' embedding: once `secret` has its vector it is
        # a neighbour of `open` for the writer (and still never for c-none, checked above)
        assert s.wait_status("c-writer", "c", "secret", "ready") == "ready"
        assert "secret" in ids(s.read("c-writer", **like).json()["results"])  # it is a neighbour
        assert "secret" not in ids(s.read("c-none", **like).json()["results"])
        gone = s.call("POST", "/v1/collections/c/docs:deleteByFilter", "c-none", {"filter": {"kind": "x"}})
        assert gone.status_code == 200 and gone.json()["deleted"] == 1, gone.text
        assert s.call("GET", "/v1/collections/c/docs/secret", "c-writer").status_code == 200
        assert s.call("GET", "/v1/collections/c/docs/open", "c-writer").status_code == 404


def test_mcp_search_shows_a_certified_document_to_a_holder_only(tmp_path: Path) -> None:
    """MCP search filters on the caller's certificates inside its engine queries: a holder finds
    the document, a caller without the certificate never does (lexical and hybrid)."""
    with served(tmp_path / "data", keys=HTTP_KEYS, env={"VIBE_EMBEDDER": "hash"}) as s:
        r = s.bulk("c-writer", "kb", [{"_id": "secret", "content": "gearbox oil pump", "_certs": ["legal:nda"]},
                                      {"_id": "open", "content": "gearbox oil filter"}])
        assert not r.json()["errors"], r.text
        holder, other = http(s.base, "c-writer"), http(s.base, "c-none")
        try:
            for mode in ("lexical", "hybrid"):
                args = {"query": "gearbox", "collection": "kb", "mode": mode, "top_k": 10}
                seen = {str(x["chunk_id"]) for x in holder.ok("search", args)["results"]}
                assert "secret" in seen and "open" in seen, (mode, seen)
                seen = {str(x["chunk_id"]) for x in other.ok("search", args)["results"]}
                assert seen == {"open"}, (mode, seen)
        finally:
            holder.close()
            other.close()
