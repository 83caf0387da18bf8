"""Every bad input gets the stable error shape and changes nothing."""

from __future__ import annotations

import pytest

from harness.server import Served


def _error(r, status: int | tuple[int, ...], code: str) -> None:  # noqa: ANN001
    statuses = status if isinstance(status, tuple) else (status,)
    assert r.status_code in statuses, (r.status_code, r.text)
    body = r.json()
    assert body["error"]["code"] == code and body["error"]["message"], body
    assert "Traceback" not in r.text


def test_auth_errors(server: Served) -> None:
    _error(server.put("", "c", "x", {"title": "x"}), 401, "unauthorized")
    _error(server.call("PUT", "/v1/collections/c/docs/x", "nope", {"title": "x"}), 401, "unauthorized")
    _error(server.put("k-bob", "c", "x", {"title": "x"}), 403, "forbidden")
    _error(server.call("GET", "/semantic/coverage", "k-alice"), 403, "forbidden")
    assert server.call("GET", "/v1/collections/c/docs/x", "k-admin-a").status_code == 404


def test_malformed_json_changes_nothing(server: Served) -> None:
    r = server.call("PUT", "/v1/collections/c/docs/m1", "k-admin-a", content=b"{not json",
                    headers={"Content-Type": "application/json"})
    _error(r, 400, "invalid_params")
    assert server.call("GET", "/v1/collections/c/docs/m1", "k-admin-a").status_code == 404


@pytest.mark.parametrize("doc, field", [
    ({"title": "x", "_secret": 1}, "_secret"),
    ({"title": "x", "_acl": "group:eng"}, "_acl"),
    ({"title": "x", "_acl": [""]}, "_acl"),
    ({"title": "x", "_acl": ["user:" + "p" * 40_000]}, "bytes"),  # an "immense term" to OpenSearch
    ({"title": "x", "_acl": [f"g:{i}:" + "p" * 400 for i in range(200)]}, "in all"),  # 80 kB in all
    ({"title": "x", "_vibe": {"semantic": {"intent": "maybe"}}}, "intent"),
    ([1, 2, 3], "object"),
    ({"title": "x", "body": {"nested": ["ok", "a\u0000b"]}}, "NUL"),  # PostgreSQL cannot store it
])
def test_invalid_documents(server: Served, doc: object, field: str) -> None:
    r = server.call("PUT", "/v1/collections/c/docs/bad", "k-admin-a", doc)
    _error(r, 400, "invalid_params")
    assert field in r.json()["error"]["message"]
    assert server.call("GET", "/v1/collections/c/docs/bad", "k-admin-a").status_code == 404


def test_bad_collection_name_and_reserved_any(server: Served) -> None:
    _error(server.put("k-admin-a", "any", "x", {"title": "x"}), 400, "invalid_params")
    _error(server.put("k-admin-a", "bad$name", "x", {"title": "x"}), 400, "invalid_params")


def test_oversize_document(tmp_path) -> None:  # noqa: ANN001
    from harness.server import served

    with served(tmp_path / "data", env={"VIBE_MAX_DOC_BYTES": "2000"}) as s:
        _error(s.put("k-admin-a", "c", "big", {"title": "x", "body": "y" * 5000}), 413, "payload_too_large")
        assert s.call("GET", "/v1/collections/c/docs/big", "k-admin-a").status_code == 404
        r = s.bulk("k-admin-a", "c", [{"_id": "ok", "title": "fine"}, {"_id": "big", "body": "y" * 5000}])
        assert r.status_code == 200
        res = {x["_id"]: x for x in r.json()["results"]}
        assert res["ok"]["status"] == 201 and res["big"]["error"]["code"] == "payload_too_large"


def test_bulk_with_bad_documents_keeps_the_good_ones(server: Served) -> None:
    docs = [{"_id": "b1", "title": "Good one"}, {"title": "no id"}, {"_id": "b2", "_acl": "x"},
            {"_id": "b3", "title": "Good three"}, "not an object"]
    r = server.bulk("k-admin-a", "bulkc", docs)
    assert r.status_code == 200
    out = r.json()
    assert out["accepted"] == 2 and out["rejected"] == 3 and out["errors"] is True
    assert [x.get("error", {}).get("code") for x in out["results"]] == [
        None, "invalid_params", "invalid_params", None, "invalid_params"]
    for i, want in (("b1", 200), ("b2", 404), ("b3", 200)):
        assert server.call("GET", f"/v1/collections/bulkc/docs/{i}", "k-admin-a").status_code == want
    _error(server.call("POST", "/v1/collections/bulkc/docs:bulk", "k-admin-a", {"documents": []}),
           400, "invalid_params")


@pytest.mark.parametrize("body, needle", [
    ({"collection": "c", "q": ""}, "q"),
    ({"collection": "c", "q": "   "}, "q"),
    ({"collection": "c", "q": "x", "semantic": {"strategy": "psychic"}}, "strategy"),
    ({"collection": "c", "q": "x", "limit": 0}, "limit"),
    ({"collection": "c", "q": "x", "limit": 100000}, "limit"),
    ({"collection": "c", "q": "x", "semantic": {"k": 10**9}}, "k"),
    ({"collection": "c", "q": "x", "strategy": "keyword"}, "strategy"),
    ({"collection": "c", "q": "x", "semantic": {"query": {"text": "a", "doc": {"collection": "c", "_id": "x"}}}},
     "exactly one"),
    ({"collection": "c", "q": "x" * 4_097}, "q must be at most 4096 characters"),
    ({"collection": "c", "q": "x", "semantic": {"query": {"text": "y" * 100_000}}}, "semantic.query.text"),
])
def test_bad_reads(server: Served, body: dict, needle: str) -> None:
    r = server.call("POST", "/v1/read", "k-alice", body)
    _error(r, 400, "invalid_params")
    assert needle in r.json()["error"]["message"]


def test_more_like_this_of_a_forbidden_doc_is_not_found(server: Served) -> None:
    server.put("k-admin-a", "mlt", "secret",
               {"title": "Hidden", "body": "classified wing design", "_acl": ["user:admin"]})
    r = server.call("POST", "/v1/read", "k-alice",
                    {"collection": "mlt", "semantic": {"query": {"doc": {"collection": "mlt", "_id": "secret"}}}})
    _error(r, 404, "not_found")


@pytest.mark.parametrize("path, body, bad", [
    ("/semantic/promote", {"collection": "strict", "bogus": 1}, "bogus"),
    ("/semantic/reindex", {"collection": "strict", "forse": True}, "forse"),  # a mistyped `force`
    ("/semantic/evict", {"collection": "strict", "idleSeconds": 0, "idle": 5}, "idle"),
    ("/semantic/spaces", {"space": "strict@v2", "model": "hash:v1@8", "dims": 8}, "dims"),
    ("/semantic/spaces/strict@v2/activate", {"forse": True}, "forse"),
])
def test_an_admin_call_refuses_a_key_it_does_not_take(server: Served, path: str, body: dict, bad: str) -> None:
    """As a read does: an option mistyped on a call that spends must not quietly do the default."""
    r = server.call("POST", path, "k-admin-a", body)
    _error(r, 400, "invalid_params")
    assert r.json()["error"]["details"]["field"] == bad and bad in r.json()["error"]["message"]
    # nothing changed: no promotion, no task, no space
    assert not any(c["collection"] == "strict" for c in
                   server.call("GET", "/semantic/promotions", "k-admin-a").json()["collections"])
    assert not any(t["collection"] == "strict" for t in
                   server.call("GET", "/semantic/backfills", "k-admin-a").json()["backfills"])
    assert "strict@v2" not in {s["space"] for s in server.call("GET", "/semantic/spaces", "k-admin-a").json()["spaces"]}
