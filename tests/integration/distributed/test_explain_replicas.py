"""Explain records on the distributed store: two API processes on one PostgreSQL. An explainId
one replica issued answers on the other, with the same figures, to its caller only; the row
holds the ranking's figures and the query, never the document's text."""

from __future__ import annotations

import json
from pathlib import Path

import psycopg

from harness.server import served

SECRET = "Zanzibar-47 torsion readings"
DOCS = [{"_id": f"d{i}", "title": f"Flutter test {i}", "body": f"{SECRET} run {i}, flutter at mach 0.{i}."}
        for i in range(6)]


def test_an_explain_id_answers_on_the_other_replica(postgres_url: str, tmp_path: Path) -> None:
    env = {"VIBE_STORE": "postgres", "VIBE_POSTGRES_URL": postgres_url, "VIBE_POSTGRES_POOL_SIZE": "4"}
    with served(tmp_path / "a" / "data", env=env) as a, served(tmp_path / "b" / "data", env=env) as b:
        assert a.bulk("k-alice", "flutter", DOCS).json()["accepted"] == len(DOCS)
        out = a.read("k-alice", collection="flutter", q="flutter mach", semantic={"strategy": "hybrid"}).json()
        assert len(out["results"]) == len(DOCS)
        for hit in out["results"]:
            here = a.call("GET", f"/v1/explain/{hit['explainId']}", "k-alice")
            there = b.call("GET", f"/v1/explain/{hit['explainId']}", "k-alice")
            assert here.status_code == there.status_code == 200, there.text
            mine, theirs = here.json(), there.json()
            assert {k: theirs[k] for k in ("id", "score", "shownScore", "contributions", "fusion", "expiresAt")} == \
                {k: mine[k] for k in ("id", "score", "shownScore", "contributions", "fusion", "expiresAt")}
            assert theirs["shownScore"] == hit["score"] and theirs["id"] == hit["id"]
            assert abs(sum(c["contribution"] for c in theirs["contributions"]) - theirs["score"]) < 1e-9
            for key in ("k-bob", "k-admin-b"):  # another caller of the tenant, another tenant
                assert b.call("GET", f"/v1/explain/{hit['explainId']}", key).status_code == 404
        with psycopg.connect(postgres_url) as db:
            version = db.execute("SELECT MAX(version) FROM schema_migrations").fetchone()
            rows = db.execute("SELECT tenant, body FROM explain_records WHERE id = ANY(%s)",
                              ([h["explainId"] for h in out["results"]],)).fetchall()
        assert version is not None and version[0] >= 3
        assert len(rows) == len(DOCS) and {r[0] for r in rows} == {"ta"}
        assert all(SECRET not in r[1] and json.loads(r[1])["q"] == "flutter mach" for r in rows)
