"""A collection analysed in its own language, over HTTP: set
`VIBE_COLLECTION_LANGUAGES` and restart; the lexical index is rebuilt from the store of record
at start (with progress in the log), and the French collection's keyword search then stems French,
while the English collection, searched in the same read, keeps English analysis."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from harness.server import Served, ids, served

FR_DOCS = [{"_id": "f1", "title": "Les chevaux de l'écurie", "body": "Ils galopent dans les prés."},
           {"_id": "f2", "title": "Les voitures", "body": "Les voitures roulent vite sur la route."}]
EN_DOCS = [{"_id": "e1", "title": "Horses", "body": "The word chevaux is French for horses."}]


def _keyword(s: Served, q: str, collection: str, **extra: Any) -> dict[str, Any]:
    r = s.read("k-alice", q=q, collection=collection, semantic={"strategy": "keyword"}, **extra)
    assert r.status_code == 200, r.text
    return r.json()  # type: ignore[no-any-return]


def test_setting_a_language_rebuilds_and_stems_in_it(tmp_path: Path) -> None:
    data = tmp_path / "data"
    with served(data) as s:
        assert s.bulk("k-alice", "docs_fr", FR_DOCS).json()["rejected"] == 0
        assert s.bulk("k-alice", "docs_en", EN_DOCS).json()["rejected"] == 0
        # English analysis: "chevaux" is not stemmed to "cheval", and "les" is a word like any other
        assert ids(_keyword(s, "cheval", "docs_fr")["results"]) == []
        assert sorted(ids(_keyword(s, "les", "docs_fr")["results"])) == ["f1", "f2"]
        cov = s.call("GET", "/semantic/coverage", "k-admin-a", params={"collection": "docs_fr"}).json()
        assert cov["language"] == "en"

    env = {"VIBE_COLLECTION_LANGUAGES": json.dumps({"docs_fr": "french"})}
    with served(data, env=env) as s:
        assert ids(_keyword(s, "cheval", "docs_fr")["results"]) == ["f1"]  # rebuilt: French stems
        assert ids(_keyword(s, "les", "docs_fr")["results"]) == []  # a French stop word now
        hl = _keyword(s, "cheval", "docs_fr", include={"highlights": True})["results"][0]["highlights"]
        assert "<b>chevaux</b>" in " ".join(hl).lower()
        both = _keyword(s, "chevaux", "any")  # every collection: each in its own language
        assert sorted(ids(both["results"])) == ["e1", "f1"]
        assert ids(_keyword(s, "cheval", "docs_en")["results"]) == []  # English does not stem chevaux
        # A write after the rebuild goes to the French fields at once.
        assert s.put("k-alice", "docs_fr", "f3", {"title": "Un cheval blanc"}).status_code in (200, 201)
        assert sorted(ids(_keyword(s, "chevaux", "docs_fr")["results"])) == ["f1", "f3"]
        cov = s.call("GET", "/semantic/coverage", "k-admin-a", params={"collection": "docs_fr"}).json()
        assert cov["language"] == "fr"
        log = s.log()
    assert "index rebuild started" in log and "index rebuild done" in log
