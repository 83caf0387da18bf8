"""readOnce by `_id`: one document of one collection, with its `__semantic` state when asked;
a document the caller may not read (ACL or certificates) answers exactly like a missing one."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from harness.server import Served, served

KEYS = [
    {"key": "w", "tenant": "t", "principals": ["user:w"], "certs": ["hr:staff"], "scopes": ["read", "write"]},
    {"key": "r", "tenant": "t", "principals": ["user:r", "group:eng"], "scopes": ["read"]},
    {"key": "o", "tenant": "other", "principals": ["user:w"], "certs": ["hr:staff"], "scopes": ["read"]},
]


def _by_id(s: Served, key: str, doc_id: str, collection: str = "posts", **extra: Any) -> tuple[int, Any]:
    r = s.read(key, collection=collection, _id=doc_id, **extra)
    return r.status_code, r.json()


@pytest.fixture(scope="module")
def app(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Served]:
    with served(tmp_path_factory.mktemp("by_id") / "data", keys=KEYS) as s:
        docs = [{"_id": "open", "title": "Gearbox", "_acl": ["group:eng", "user:w"], "_vibe": {"tag": 1}},
                {"_id": "acl", "title": "Gearbox", "_acl": ["user:w"]},
                {"_id": "cert", "title": "Gearbox", "_acl": ["group:eng", "user:w"], "_certs": ["hr:staff"]}]
        r = s.bulk("w", "posts", docs)
        assert r.status_code == 200 and all(i["status"] == 201 for i in r.json()["results"]), r.text
        yield s


def test_a_readable_document_is_answered_without_semantic_state_unless_asked(app: Served) -> None:
    status, got = _by_id(app, "r", "open")
    assert status == 200, got
    assert got == {"_id": "open", "title": "Gearbox", "_vibe": {"tag": 1}}
    status, got = _by_id(app, "r", "open", include={"semantic": True})
    assert status == 200, got
    sem = got.pop("__semantic")
    assert got == {"_id": "open", "title": "Gearbox", "_vibe": {"tag": 1}}
    assert set(sem) >= {"status", "lastEmbeddedAt", "space"} and isinstance(sem["status"], str)
    gets = app.call("GET", "/v1/collections/posts/docs/open?include=semantic", "r").json()
    assert gets["__semantic"]["status"] == sem["status"] and gets["__semantic"]["space"] == sem["space"]


def test_the_writer_holding_acl_and_certificate_reads_every_document(app: Served) -> None:
    for doc_id in ("open", "acl", "cert"):
        status, got = _by_id(app, "w", doc_id)
        assert status == 200 and got["_id"] == doc_id, got
        assert "_certs" not in got and "_acl" not in got


@pytest.mark.parametrize(("key", "doc_id"), [("r", "acl"), ("r", "cert"), ("o", "open")])
def test_an_unreadable_document_answers_exactly_like_a_missing_one(app: Served, key: str, doc_id: str) -> None:
    missing = app.read(key, collection="posts", _id="nope", include={"semantic": True})
    hidden = app.read(key, collection="posts", _id=doc_id, include={"semantic": True})
    assert missing.status_code == hidden.status_code == 404
    strip = lambda b: {k: v for k, v in b["error"].items() if k != "requestId"}  # noqa: E731
    assert strip(hidden.json()) == strip(missing.json()), (hidden.text, missing.text)


@pytest.mark.parametrize(("extra", "field"), [
    ({"q": "gearbox"}, "_id"),
    ({"semantic": {"query": {"text": "gearbox"}}}, "_id"),
    ({"collection": "any"}, "_id"),
    ({"collection": "any", "global": True}, "_id"),
    ({"filter": {"title": "Gearbox"}}, "filter"),
    ({"rerank": True}, "rerank"),
])
def test_id_with_a_search_or_several_collections_is_refused(app: Served, extra: dict[str, Any], field: str) -> None:
    body = {"collection": "posts", "_id": "open", **extra}
    r = app.call("POST", "/v1/read", "r", body, headers={"Accept": "application/json"})
    assert r.status_code == 400, r.text
    err = r.json()["error"]
    assert err["code"] == "invalid_params" and err.get("details", {}).get("field", field) == field, err


def test_a_bad_id_is_refused(app: Served) -> None:
    for bad in ("", "x" * 257, "a\u0001b"):
        r = app.read("r", collection="posts", _id=bad)
        assert r.status_code == 400 and r.json()["error"]["code"] == "invalid_params", r.text
