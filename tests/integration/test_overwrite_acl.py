"""A writer may overwrite or delete an existing document only if it can
read it under the document's CURRENT ACL. A writer outside it is refused, nothing changes,
and the refusal tells nothing about the document beyond the one residual bit README
"Security" documents (a PUT refusal shows that something exists at that id).

Against the real app (uvicorn on a socket, harness/server.py). Keys: k-admin-a
(user:admin, write), k-alice (user:alice + group:eng, write), k-bob (read only)."""

from __future__ import annotations

import itertools
import re
from typing import Any

from harness.server import Served

ADMIN, ALICE = "k-admin-a", "k-alice"
COL = "ow"
_n = itertools.count()


def _body(content: bytes) -> bytes:
    """An answer's bytes without its request id (random per request, so it tells nothing about
    the document): what must be identical between answers."""
    return re.sub(rb',"requestId":"[^"]*"', b"", content)


def _id(prefix: str) -> str:
    return f"{prefix}-{next(_n)}"


def _get(s: Served, key: str, doc_id: str, col: str = COL) -> dict[str, Any] | None:
    r = s.call("GET", f"/v1/collections/{col}/docs/{doc_id}", key)
    assert r.status_code in (200, 404), r.text
    return r.json() if r.status_code == 200 else None


def _hidden(s: Served, doc_id: str, **fields: Any) -> dict[str, Any]:
    """A document only user:admin may read; returns what admin reads back."""
    body = {"title": "admin only", "_acl": ["user:admin"], **fields}
    assert s.put(ADMIN, COL, doc_id, body).status_code == 201
    got = _get(s, ADMIN, doc_id)
    assert got is not None
    return got


def _keyword_ids(s: Served, key: str, q: str) -> list[str]:
    r = s.read(key, collection=COL, q=q, semantic={"strategy": "keyword"})
    assert r.status_code == 200, r.text
    return [x["id"] for x in r.json()["results"]]


def test_put_by_a_writer_outside_the_acl_is_refused_and_changes_nothing(server: Served) -> None:
    doc_id = _id("h")
    before = _hidden(server, doc_id, body="original zebracorn text")
    r = server.put(ALICE, COL, doc_id, {"title": "hijacked", "body": "planted quokkaword", "_acl": ["user:alice"]})
    assert r.status_code == 403, r.text
    error = r.json()["error"]
    assert error.pop("requestId") == r.headers["x-request-id"]
    assert error == {"code": "forbidden", "message": "this key may not overwrite this document"}
    assert _get(server, ADMIN, doc_id) == before  # content and ACL unchanged
    assert _get(server, ALICE, doc_id) is None  # still unreadable: no ACL takeover
    assert _keyword_ids(server, ADMIN, "quokkaword") == []  # nothing reached the index
    assert _keyword_ids(server, ALICE, "quokkaword") == []
    assert doc_id in _keyword_ids(server, ADMIN, "zebracorn")


def test_the_refusal_is_the_same_whatever_the_document_holds(server: Served) -> None:
    """Different content, ACL, size, writer intent and semantic state: byte-identical refusals."""
    a, b, c = _id("h"), _id("h"), _id("h")
    _hidden(server, a, body="short")
    _hidden(server, b, body="x " * 5000, _acl=["user:admin", "user:bob", "group:sales"])
    _hidden(server, c, body="denied one", _vibe={"semantic": {"intent": "deny"}})
    server.put(ADMIN, COL, c, {"body": "edited twice", "_acl": ["user:nobody"]})
    answers = {(r.status_code, _body(r.content)) for r in
               (server.put(ALICE, COL, d, {"title": "x"}) for d in (a, b, c))}
    assert len(answers) == 1 and next(iter(answers))[0] == 403


def test_residual_existence_signal_of_a_refused_put(server: Served) -> None:
    """The documented residual: PUT on an absent id creates (201); on an id the writer cannot
    read it is refused (403). A writer can thus learn that an id is taken, nothing more. GET
    and DELETE give no such signal: unreadable answers exactly as absent."""
    taken, free = _id("h"), _id("free")
    _hidden(server, taken)
    assert server.put(ALICE, COL, taken, {"t": 1}).status_code == 403
    assert server.put(ALICE, COL, free, {"t": 1}).status_code == 201
    gone = _id("absent")
    for method in ("GET", "DELETE"):
        hidden = server.call(method, f"/v1/collections/{COL}/docs/{taken}", ALICE)
        absent = server.call(method, f"/v1/collections/{COL}/docs/{gone}", ALICE)
        assert (hidden.status_code, _body(hidden.content)) == (absent.status_code, _body(absent.content)) == (
            404, _body(absent.content))


def test_delete_by_a_writer_outside_the_acl_looks_absent_and_changes_nothing(server: Served) -> None:
    doc_id = _id("h")
    before = _hidden(server, doc_id, body="keep me")
    r = server.call("DELETE", f"/v1/collections/{COL}/docs/{doc_id}", ALICE)
    assert r.status_code == 404 and r.json()["error"]["code"] == "not_found"
    assert _get(server, ADMIN, doc_id) == before
    assert server.call("DELETE", f"/v1/collections/{COL}/docs/{doc_id}", ADMIN).status_code == 200
    assert _get(server, ADMIN, doc_id) is None


def test_bulk_answers_per_document(server: Served) -> None:
    hidden, mine, new = _id("h"), _id("mine"), _id("new")
    before = _hidden(server, hidden, body="bulk target")
    assert server.put(ALICE, COL, mine, {"body": "v1", "_acl": ["group:eng"]}).status_code == 201
    r = server.bulk(ALICE, COL, [{"_id": hidden, "body": "overwritten by bulk", "_acl": ["user:alice"]},
                                 {"_id": mine, "body": "v2", "_acl": ["group:eng"]},
                                 {"_id": new, "body": "fresh"}])
    assert r.status_code == 200, r.text
    out = r.json()
    assert out["errors"] is True and out["accepted"] == 2 and out["rejected"] == 1
    assert out["results"] == [
        {"_id": hidden, "status": 403,
         "error": {"code": "forbidden", "message": "this key may not overwrite this document"}},
        {"_id": mine, "status": 200, "result": "updated"},
        {"_id": new, "status": 201, "result": "created"},
    ]
    assert _get(server, ADMIN, hidden) == before
    assert (_get(server, ALICE, mine) or {}).get("body") == "v2"


def test_bulk_items_apply_as_if_sent_one_by_one(server: Served) -> None:
    """A bulk that first gives an id away (an ACL without the writer) cannot then overwrite
    it: the second item is checked against the ACL the first one set."""
    doc_id = _id("dup")
    r = server.bulk(ALICE, COL, [{"_id": doc_id, "body": "first", "_acl": ["user:admin"]},
                                 {"_id": doc_id, "body": "second", "_acl": ["user:alice"]}])
    res = r.json()["results"]
    assert [x["status"] for x in res] == [201, 403], res
    assert (_get(server, ADMIN, doc_id) or {}).get("body") == "first"
    assert _get(server, ALICE, doc_id) is None
    again = _id("dup")
    res = server.bulk(ALICE, COL, [{"_id": again, "body": "a"}, {"_id": again, "body": "b"}]).json()["results"]
    assert [(x["status"], x.get("result")) for x in res] == [(201, "created"), (200, "updated")]
    assert (_get(server, ALICE, again) or {}).get("body") == "b"


def test_the_current_acl_decides(server: Served) -> None:
    """Granting read lets a writer overwrite; revoking it stops the writer again; a writer
    that created a document with an ACL leaving itself out cannot take it back."""
    doc_id = _id("h")
    _hidden(server, doc_id)
    assert server.put(ALICE, COL, doc_id, {"v": 1}).status_code == 403
    assert server.put(ADMIN, COL, doc_id, {"v": 2, "_acl": ["user:admin", "group:eng"]}).status_code == 200
    assert server.put(ALICE, COL, doc_id, {"v": 3, "_acl": ["group:eng", "user:admin"]}).status_code == 200
    assert (_get(server, ALICE, doc_id) or {}).get("v") == 3
    assert server.put(ADMIN, COL, doc_id, {"v": 4, "_acl": ["user:admin"]}).status_code == 200
    assert server.put(ALICE, COL, doc_id, {"v": 5}).status_code == 403
    assert (_get(server, ADMIN, doc_id) or {}).get("v") == 4
    given = _id("given")
    assert server.put(ALICE, COL, given, {"v": 1, "_acl": ["user:bob"]}).status_code == 201
    assert server.put(ALICE, COL, given, {"v": 2}).status_code == 403
    assert server.call("DELETE", f"/v1/collections/{COL}/docs/{given}", ALICE).status_code == 404
    assert (_get(server, "k-bob", given) or {}).get("v") == 1


def test_a_public_document_stays_writable_by_every_writer(server: Served) -> None:
    doc_id = _id("pub")
    assert server.put(ADMIN, COL, doc_id, {"v": 1}).status_code == 201
    assert server.put(ALICE, COL, doc_id, {"v": 2}).status_code == 200
    assert server.call("DELETE", f"/v1/collections/{COL}/docs/{doc_id}", ALICE).status_code == 200
    assert _get(server, ADMIN, doc_id) is None
    # a deleted id is free again: re-creation is not an overwrite
    assert server.put(ALICE, COL, doc_id, {"v": 3, "_acl": ["user:alice"]}).status_code == 201
