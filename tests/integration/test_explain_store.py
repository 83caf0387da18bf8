"""GET /v1/explain/{id} over a real socket on the embedded profile: the record tells what the
ranking did (contributions summing to its score, the highlights the read showed, the
certificates, why a document is not embedded), answers only its caller while they may read the
document, survives a restart of the process and expires with its TTL."""

from __future__ import annotations

import html
import re
import time
from pathlib import Path
from typing import Any

import httpx

from harness.server import KEYS, Served, served

FILLER = " The rig was calibrated before each run and the readings were logged by two engineers."
DOCS: list[dict[str, Any]] = [
    {"_id": "wing", "title": "Wing flutter study", "body": "Flutter onset at high speed in the tunnel." + FILLER},
    {"_id": "tail", "title": "Tail buffet", "body": "Buffet and flutter of the tail surfaces." + FILLER},
    {"_id": "pay", "title": "Flutter payroll memo", "body": "Payroll for the flutter team." + FILLER,
     "_certs": ["hr:payroll"]},
    {"_id": "deny", "title": "Flutter notes, not for embedding", "body": "Flutter margins." + FILLER,
     "_vibe": {"semantic": {"intent": "deny"}}},
    {"_id": "eng", "title": "Flutter for engineers only", "body": "Flutter damping." + FILLER, "_acl": ["group:eng"]},
]
CERT_KEY = {"key": "k-hr", "tenant": "ta", "principals": ["user:hr", "group:eng"], "scopes": ["read", "write"],
            "certs": ["hr:payroll"]}


def _explain(s: Served, key: str, eid: str) -> httpx.Response:
    return s.call("GET", f"/v1/explain/{eid}", key)


def _unknown(r: httpx.Response) -> dict[str, Any]:
    assert r.status_code == 404, r.text
    err = dict(r.json()["error"])
    err.pop("requestId", None)
    return err


def _check_against_the_ranking(hit: dict[str, Any], why: dict[str, Any]) -> None:
    assert (why["id"], why["collection"], why["shownScore"]) == (hit["id"], hit["collection"], hit["score"])
    assert why["strategy"] == "hybrid" and why["fusion"] == "zscore"
    assert abs(sum(c["contribution"] for c in why["contributions"]) - why["score"]) < 1e-9, why
    for c in why["contributions"]:
        assert abs(c["weight"] * c["normalised"] - c["contribution"]) < 1e-9, c
    assert why["weights"]["keyword"] + why["weights"]["semantic"] == 1.0
    keyword = [r for r in why["reasons"] if r["type"] == "match" and r["leg"] == "keyword"]
    assert ("keyword" in hit["matchedBy"]) == bool(keyword)
    # the fragments the read showed, each put under the field it came from
    assert [h for r in keyword for h in r.get("highlights", [])] == hit.get("highlights", [])
    doc = next(d for d in DOCS if d["_id"] == hit["id"])
    for r in keyword:  # each fragment's text is the named field's, its marked term the query's
        for fragment in r["highlights"]:
            assert html.unescape(re.sub(r"<[^>]*>", "", fragment)).strip(" .…") in doc[r["field"]], (r, doc)
            assert "<b>flutter</b>" in fragment.lower()


def test_explain_tells_the_ranking_to_its_caller_only_and_survives_a_restart(tmp_path: Path) -> None:
    keys = [*KEYS, CERT_KEY]
    with served(tmp_path / "data", keys=keys) as s:
        r = s.bulk("k-admin-a", "wings", DOCS)
        assert r.status_code == 200 and r.json()["accepted"] == len(DOCS), r.text
        out = s.read("k-hr", collection="wings", q="flutter", semantic={"strategy": "hybrid"},
                     include={"highlights": True}).json()
        hits = {h["id"]: h for h in out["results"]}
        assert {"wing", "tail", "pay", "deny", "eng"} <= set(hits)
        first: dict[str, dict[str, Any]] = {}
        for doc_id, hit in hits.items():
            r = _explain(s, "k-hr", hit["explainId"])
            assert r.status_code == 200, r.text
            first[doc_id] = why = r.json()
            _check_against_the_ranking(hit, why)
        certs = [r for r in first["pay"]["reasons"] if r["type"] == "cert"]
        assert certs == [{"type": "cert", "issuer": "hr", "name": "payroll", "rule": "required"}]
        assert not [r for r in first["wing"]["reasons"] if r["type"] == "cert"]
        denied = [r for r in first["deny"]["reasons"] if r["type"] == "not_embedded"]
        assert [(r["status"], r["space"]) for r in denied] == [("denied", out["diagnostics"].get("space", "default"))]
        assert denied[0]["reason"]

        unknown = _unknown(_explain(s, "k-hr", "AAAAAAAAAAAAAAAA"))
        pay = hits["pay"]["explainId"]
        # another tenant; the same tenant without the ACL, without the certificate, or another caller
        for key in ("k-admin-b", "k-bob", "k-alice", "k-admin-a"):
            assert _unknown(_explain(s, key, pay)) == unknown, key
        # the caller who lost the document loses its explanation
        assert s.put("k-alice", "wings", "eng", {"title": "Flutter, now for sales", "_acl": ["group:sales"]}
                     ).status_code == 200
        assert _unknown(_explain(s, "k-hr", hits["eng"]["explainId"])) == unknown

    with served(tmp_path / "data", keys=keys) as again:  # a new process on the same store
        for doc_id in ("wing", "tail", "pay", "deny"):
            r = _explain(again, "k-hr", hits[doc_id]["explainId"])
            assert r.status_code == 200, (doc_id, r.text)
            why = r.json()
            assert {k: why[k] for k in ("score", "contributions", "weights", "fusion", "expiresAt")} == \
                {k: first[doc_id][k] for k in ("score", "contributions", "weights", "fusion", "expiresAt")}
            assert [x for x in why["reasons"] if x["type"] == "match"] == \
                [x for x in first[doc_id]["reasons"] if x["type"] == "match"]
        assert _unknown(_explain(again, "k-bob", hits["wing"]["explainId"])) == unknown


def test_an_explain_id_expires_with_its_ttl(tmp_path: Path) -> None:
    with served(tmp_path / "data", env={"VIBE_EXPLAIN_TTL_SECONDS": "2"}) as s:
        s.bulk("k-admin-a", "c", [{"_id": "a", "title": "Rotor icing"}, {"_id": "b", "title": "Rotor wake"}])
        out = s.read("k-alice", collection="c", q="rotor", semantic={"strategy": "keyword"}).json()
        eid = out["results"][0]["explainId"]
        r = _explain(s, "k-alice", eid)
        assert r.status_code == 200, r.text
        why = r.json()
        assert why["fusion"] == "none" and why["contributions"][0]["contribution"] == why["score"]
        deadline = why["expiresAt"]
        while time.time() < deadline + 0.05:
            time.sleep(min(0.2, max(0.0, deadline + 0.05 - time.time())))
        assert _explain(s, "k-alice", eid).status_code == 404
