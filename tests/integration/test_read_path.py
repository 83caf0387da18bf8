"""The read path over a real socket: JSON and SSE, ACL and tenant isolation, lazy embedding."""

from __future__ import annotations

from typing import Any

from harness.server import Served, ids

FILLER = (" The team met on Tuesday to review progress, open risks and owners for each workstream."
          " Notes were taken by the program manager and shared in the weekly digest for later reference.")
DOCS = [
    {"_id": "d1", "title": "Quarterly launch notes", "body": "We agreed to push the launch to March 10." + FILLER,
     "_acl": ["group:eng"]},
    {"_id": "d2", "title": "Sales playbook", "body": "Discount rules for the launch quarter." + FILLER,
     "_acl": ["group:sales"]},
    {"_id": "d3", "title": "Company handbook", "body": "Launch reviews happen every quarter." + FILLER},
    {"_id": "d4", "title": "Secret launch memo", "body": "Only the admin may read this launch memo." + FILLER,
     "_acl": ["user:admin"]},
]
FORBIDDEN_FOR_ALICE = {"d2", "d4", "tb1"}


def _load(server: Served, collection: str = "notes") -> None:
    r = server.bulk("k-admin-a", collection, DOCS)
    assert r.status_code == 200 and r.json()["accepted"] == 4, r.text
    r = server.put("k-admin-b", collection, "tb1", {"title": "Other tenant launch", "body": "launch quarter" + FILLER})
    assert r.status_code in (200, 201), r.text


def _all_ids(events: list[tuple[str, dict[str, Any]]]) -> set[str]:
    return {i for _, data in events for i in ids(data.get("results"))}


def test_keyword_json_respects_acl_and_tenant(server: Served) -> None:
    _load(server)
    bob = server.read("k-bob", collection="notes", q="launch quarter", semantic={"strategy": "keyword"})
    assert bob.status_code == 200
    assert set(ids(bob.json()["results"])) == {"d2", "d3"}
    alice = server.read("k-alice", collection="any", q="launch", semantic={"strategy": "keyword"})
    assert set(ids(alice.json()["results"])) == {"d1", "d3"}
    other = server.read("k-admin-b", collection="any", q="launch", semantic={"strategy": "keyword"})
    assert set(ids(other.json()["results"])) == {"tb1"}
    body = alice.json()
    assert body["strategy"] == "keyword"
    assert all(r["matchedBy"] == ["keyword"] and r["explainId"] for r in body["results"])


def test_stream_order_backfill_and_no_leak(server: Served) -> None:
    _load(server, "fresh")  # nothing has touched these yet
    events = server.stream("k-alice", collection="fresh", q="launch date", semantic={"strategy": "hybrid"},
                           limit=10, include={"highlights": True, "semantic": True})
    names = [e for e, _ in events]
    assert names[0] == "lexical" and names[-1] == "done", names
    assert "warming" in names and names.index("warming") > 0
    assert set(names) <= {"lexical", "warming", "semantic", "done"}
    assert not (_all_ids(events) & FORBIDDEN_FOR_ALICE)
    raw = str(events)
    assert "Discount" not in raw and "Only the admin" not in raw and "Other tenant" not in raw
    done = events[-1][1]
    assert done["diagnostics"]["semantic"]["pending"] == 0
    assert {r["id"] for r in done["results"]} == {"d1", "d3"}
    assert all("semantic" in r["matchedBy"] for r in done["results"]), done["results"]
    assert all(r["__semantic"]["status"] == "ready" for r in done["results"])
    first = events[0][1]
    assert any("<b>" in h for r in first["results"] for h in r.get("highlights", [])), first["results"]


def test_touched_documents_become_ready_and_others_stay_none(server: Served) -> None:
    assert server.wait_status("k-alice", "notes", "d1", "ready") == "ready"
    assert server.wait_status("k-bob", "notes", "d2", "ready") == "ready"  # bob's keyword read touched it
    # d4 matched no read of anyone who may see it, so nothing embedded it.
    st = server.call("GET", "/semantic/status?collection=notes&_id=d4", "k-admin-a").json()
    assert st["status"] == "none"
    cov = server.call("GET", "/semantic/coverage?collection=notes", "k-admin-a").json()
    assert cov["states"]["none"] == 1 and cov["ready"] == 3 and cov["total"] == 4
    cov_b = server.call("GET", "/semantic/coverage?collection=notes", "k-admin-b").json()
    assert cov_b["total"] == 1  # tenant b never counts tenant a's documents


def test_unchanged_reingest_queues_nothing(server: Served) -> None:
    assert server.wait_status("k-alice", "notes", "d1", "ready") == "ready"
    before = server.call("GET", "/semantic/queueDepth", "k-admin-a").json()
    r = server.put("k-alice", "notes", "d1", {k: v for k, v in DOCS[0].items() if k != "_id"})
    assert r.status_code == 200 and r.json()["result"] == "updated"
    assert server.status("k-alice", "notes", "d1") == "ready"
    after = server.call("GET", "/semantic/queueDepth", "k-admin-a").json()
    assert after["queuedInStore"] == before["queuedInStore"] == 0


def test_changed_content_goes_stale_then_ready_on_touch(server: Served) -> None:
    doc = {k: v for k, v in DOCS[2].items() if k != "_id"}
    doc["body"] = "Launch reviews now happen every month." + FILLER
    server.put("k-admin-a", "notes", "d3", doc)
    assert server.status("k-admin-a", "notes", "d3") == "stale"
    server.stream("k-admin-a", collection="notes", q="launch reviews month", semantic={"strategy": "hybrid"})
    assert server.wait_status("k-admin-a", "notes", "d3", "ready") == "ready"


def test_acl_change_is_enforced_on_the_vector_leg(server: Served) -> None:
    server.put("k-admin-a", "notes", "acl1", {"title": "Rotor icing report", "body": "rotor icing" + FILLER})
    server.stream("k-alice", collection="notes", q="rotor icing", semantic={"strategy": "hybrid"})
    assert server.wait_status("k-alice", "notes", "acl1", "ready") == "ready"
    server.put("k-admin-a", "notes", "acl1",
               {"title": "Rotor icing report", "body": "rotor icing" + FILLER, "_acl": ["user:admin"]})
    for strategy in ("semantic", "hybrid", "keyword"):
        out = server.read("k-alice", collection="notes", q="rotor icing", semantic={"strategy": strategy}).json()
        assert "acl1" not in ids(out["results"]), (strategy, out)
    admin = server.read("k-admin-a", collection="notes", q="rotor icing", semantic={"strategy": "semantic"})
    assert "acl1" in ids(admin.json()["results"])


def test_delete_removes_document_everywhere(server: Served) -> None:
    server.put("k-admin-a", "notes", "gone", {"title": "Propeller noise", "body": "propeller noise" + FILLER})
    server.stream("k-admin-a", collection="notes", q="propeller noise", semantic={"strategy": "hybrid"})
    assert server.wait_status("k-admin-a", "notes", "gone", "ready") == "ready"
    assert server.call("DELETE", "/v1/collections/notes/docs/gone", "k-admin-a").status_code == 200
    assert server.call("GET", "/v1/collections/notes/docs/gone", "k-admin-a").status_code == 404
    for strategy in ("semantic", "keyword"):
        out = server.read("k-admin-a", collection="notes", q="propeller noise", semantic={"strategy": strategy})
        assert "gone" not in ids(out.json()["results"])


def test_explain_is_tenant_and_acl_checked(server: Served) -> None:
    out = server.read("k-admin-a", collection="notes", q="launch memo", semantic={"strategy": "keyword"}).json()
    d4 = next(r for r in out["results"] if r["id"] == "d4")
    ok = server.call("GET", f"/v1/explain/{d4['explainId']}", "k-admin-a")
    assert ok.status_code == 200 and ok.json()["reasons"][0]["leg"] == "keyword"
    assert server.call("GET", f"/v1/explain/{d4['explainId']}", "k-alice").status_code == 404
    assert server.call("GET", f"/v1/explain/{d4['explainId']}", "k-admin-b").status_code == 404


def test_unembedded_keyword_match_is_not_ranked_as_semantically_poor(server: Served) -> None:
    """Lazy fusion: a candidate with no vector yet stands in with its lexical score; at the
    semantic floor the strongest keyword match would sink below weaker embedded documents."""
    weak = [{"_id": f"e{i}", "title": f"Note {i}", "body": f"icing mentioned once, topic {t}." + FILLER}
            for i, t in enumerate(("rotor blades", "cafeteria cakes", "parking rules"))]
    assert server.bulk("k-admin-a", "lazyfuse", weak).json()["accepted"] == 3
    server.read("k-admin-a", collection="lazyfuse", q="icing", semantic={"strategy": "keyword"})
    for d in weak:
        assert server.wait_status("k-admin-a", "lazyfuse", d["_id"], "ready") == "ready"
    server.put("k-admin-a", "lazyfuse", "u1", {"title": "Icing icing", "body": "Icing, icing and more icing."})
    out = server.read("k-admin-a", collection="lazyfuse", q="icing", semantic={"strategy": "hybrid"}).json()
    assert out["diagnostics"]["semantic"]["state"] in ("ready", "warming", "partial"), out["diagnostics"]
    top = out["results"][0]
    assert top["id"] == "u1" and top["matchedBy"] == ["keyword"], out["results"]
    assert {r["id"] for r in out["results"][1:]} == {"e0", "e1", "e2"}
