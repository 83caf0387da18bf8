"""Results a page can show without a second request, against the served app:
metadata filters inside the engine query and with the ACL, `include.fields` and escaped
highlights, `docs:mget`, cursor pagination, a readable score, no accepted-but-ignored option,
and CORS. Every answer is also checked against /openapi.json (harness/server.py)."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from harness.server import Served, ids, served

ALICE_ONLY = ["user:alice", "user:admin"]  # the admin key reads every test document
SALES = ["group:sales", "user:admin"]

# collection "lib": every document mentions "turbine"; fields to filter on.
DOCS: list[dict[str, Any]] = [
    {"_id": "a1990", "title": "turbine blade cooling", "year": 1990, "lang": "en", "tags": ["aero", "heat"],
     "peer": True, "_acl": ALICE_ONLY},
    {"_id": "a2001", "title": "turbine noise study", "year": 2001, "lang": "en", "tags": ["acoustics"],
     "peer": False, "_acl": ALICE_ONLY},
    {"_id": "a2010", "title": "turbine wake model", "year": 2010, "lang": "de", "tags": ["aero"], "peer": 1,
     "_acl": ALICE_ONLY},
    {"_id": "s2005", "title": "turbine sales brochure", "year": 2005, "lang": "en", "tags": ["aero"],
     "peer": True, "_acl": SALES},
    {"_id": "p2003", "title": "turbine public note", "year": 2003, "lang": "en", "tags": ["aero", "misc"],
     "peer": True},  # every principal of the tenant
    {"_id": "n-year", "title": "turbine note without a year", "lang": "en", "tags": "aero"},
    {"_id": "s-year", "title": "turbine note with a string year", "year": "2004", "lang": "en"},
]


@pytest.fixture(scope="module")
def app(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Served]:
    env = {"VIBE_CORS_ORIGINS": "https://app.example, https://admin.example"}
    with served(Path(tmp_path_factory.mktemp("surface")) / "data", env=env) as s:
        r = s.bulk("k-admin-a", "lib", DOCS)
        assert r.status_code == 200 and r.json()["rejected"] == 0, r.text
        yield s


def _read(app: Served, key: str, **body: Any) -> dict[str, Any]:
    body.setdefault("semantic", {"strategy": "keyword"})
    r = app.read(key, **body)
    assert r.status_code == 200, r.text
    return r.json()  # type: ignore[no-any-return]


def _found(app: Served, key: str, flt: dict[str, Any], collection: str = "lib") -> set[str]:
    return set(ids(_read(app, key, collection=collection, q="turbine", filter=flt, limit=50)["results"]))


# -- filters --------------------------------------------------------------------------------


def test_filters_hold_together_with_the_acl(app: Served) -> None:
    assert _found(app, "k-alice", {"year": {"gte": 2000}}) == {"a2001", "a2010", "p2003"}
    assert _found(app, "k-bob", {"year": {"gte": 2000}}) == {"s2005", "p2003"}
    assert _found(app, "k-admin-a", {"year": {"gte": 2000, "lt": 2005}}) == {"a2001", "p2003"}
    assert _found(app, "k-alice", {"lang": "de"}) == {"a2010"}
    assert _found(app, "k-bob", {"lang": "de"}) == set()  # a2010 matches but bob may not read it
    assert _found(app, "k-alice", {"lang": {"in": ["de", "fr"]}, "year": {"lte": 2010}}) == {"a2010"}
    # the other tenant sees nothing of tenant ta, whatever the filter
    assert _found(app, "k-admin-b", {"lang": "en"}) == set()


def test_list_fields_match_any_element_and_kinds_never_mix(app: Served) -> None:
    assert _found(app, "k-admin-a", {"tags": "aero"}) == {"a1990", "a2010", "s2005", "p2003", "n-year"}
    assert _found(app, "k-admin-a", {"tags": {"in": ["heat", "misc"]}}) == {"a1990", "p2003"}
    assert _found(app, "k-admin-a", {"peer": True}) == {"a1990", "s2005", "p2003"}  # not a2010's 1
    assert _found(app, "k-admin-a", {"peer": 1}) == {"a2010"}  # not True
    assert _found(app, "k-admin-a", {"year": "2004"}) == {"s-year"}  # a string equals strings only
    assert "s-year" not in _found(app, "k-admin-a", {"year": {"gte": 2000}})  # ranges are numeric
    assert "n-year" not in _found(app, "k-admin-a", {"year": {"lt": 3000}})  # a missing field matches nothing


def test_a_filter_applies_before_the_top_k_not_after(app: Served) -> None:
    """Twenty strong keyword matches outside the filter, two weak ones inside: with a candidate
    pool of 5 per leg, a post-filter of the top 5 would find none of the two."""
    strong = [{"_id": f"strong{i}", "title": "impeller impeller impeller", "kind": "other"} for i in range(20)]
    weak = [{"_id": f"weak{i}", "title": "impeller " + "filler " * 30, "kind": "wanted"} for i in range(2)]
    assert app.bulk("k-admin-a", "topk", strong + weak).json()["rejected"] == 0
    for strategy in ("keyword", "hybrid", "auto"):
        out = _read(app, "k-admin-a", collection="topk", q="impeller", filter={"kind": "wanted"},
                    semantic={"strategy": strategy, "k": 5}, limit=5)
        assert set(ids(out["results"])) == {"weak0", "weak1"}, (strategy, out)


@pytest.mark.parametrize("flt", [
    {"_acl": "user:alice"}, {"year": {}}, {"year": {"in": []}}, {"year": {"gte": "2000"}},
    {"year": {"eq": 1, "in": [1]}}, {"year": {"near": 3}}, {"year": None}, {"year": [1990]},
    {f"f{i}": 1 for i in range(17)}, {"x" * 65: 1}, ["year"], "year=1990", {"year": {"in": list(range(101))}},
])
def test_a_bad_filter_is_a_400_and_changes_nothing(app: Served, flt: Any) -> None:
    before = app.call("GET", "/semantic/coverage?collection=lib", "k-admin-a").json()
    r = app.read("k-alice", collection="lib", q="turbine", filter=flt)
    assert r.status_code == 400 and r.json()["error"]["code"] == "invalid_params", r.text
    after = app.call("GET", "/semantic/coverage?collection=lib", "k-admin-a").json()
    assert before["states"] == after["states"]  # nothing touched, nothing queued


# -- include.fields and highlights ----------------------------------------------------------


def test_include_fields_returns_the_permitted_fields_only(app: Served) -> None:
    assert app.put("k-alice", "lib", "vibed", {"title": "turbine with intent", "year": 1999,
                                               "_acl": ALICE_ONLY,
                                               "_vibe": {"semantic": {"intent": "deny"}}}).status_code == 201
    out = _read(app, "k-alice", collection="lib", q="turbine", include={"fields": True}, limit=50)
    by_id = {r["id"]: r for r in out["results"]}
    assert by_id["a1990"]["fields"] == {k: v for k, v in DOCS[0].items() if not k.startswith("_")}
    assert by_id["vibed"]["fields"] == {"title": "turbine with intent", "year": 1999}
    raw = json.dumps(out)
    assert "_acl" not in raw and "_vibe" not in raw and "intent" not in raw.replace("with intent", "")
    assert "s2005" not in by_id and "sales brochure" not in raw  # bob's document: neither hit nor field
    out = _read(app, "k-alice", collection="lib", q="turbine", include={"fields": ["year", "nope", "_acl"]})
    assert {r["id"]: r["fields"] for r in out["results"]}["a1990"] == {"year": 1990}
    assert all(set(r["fields"]) <= {"year"} for r in out["results"])
    out = _read(app, "k-alice", collection="lib", q="turbine")
    assert all("fields" not in r for r in out["results"])  # default: ids only


def test_highlights_are_escaped(app: Served) -> None:
    assert app.put("k-alice", "html", "x", {"body": "the <script>alert(1)</script> turbine & co"}).status_code == 201
    out = _read(app, "k-alice", collection="html", q="turbine", include={"highlights": True, "fields": ["body"]})
    [hit] = out["results"]
    snippet = " ".join(hit["highlights"])
    assert "<script>" not in snippet and "&lt;script&gt;" in snippet and "turbine" in snippet
    assert hit["fields"]["body"].startswith("the <script>")  # fields are data, returned as stored


# -- mget -------------------------------------------------------------------------------------


def test_mget_answers_forbidden_exactly_like_missing(app: Served) -> None:
    r = app.call("POST", "/v1/collections/lib/docs:mget", "k-bob", {"ids": ["s2005", "a1990", "nope", "p2003"]})
    assert r.status_code == 200, r.text
    docs = r.json()["docs"]
    assert [d["_id"] for d in docs] == ["s2005", "a1990", "nope", "p2003"]
    assert docs[0]["_found"] is True and docs[0]["title"] == "turbine sales brochure"
    assert docs[1] == {"_id": "a1990", "found": False, "_found": False}  # alice's: forbidden to bob
    assert docs[2] == {"_id": "nope", "found": False, "_found": False}  # missing: the same shape
    assert docs[3]["_found"] is True and "_acl" not in docs[3]
    other = app.call("POST", "/v1/collections/lib/docs:mget", "k-admin-b", {"ids": ["p2003"]}).json()
    assert other == {"docs": [{"_id": "p2003", "found": False, "_found": False}]}  # another tenant


@pytest.mark.parametrize("body", [{"ids": []}, {"ids": [f"d{i}" for i in range(101)]}, {"ids": ["a\x01"]},
                                  {"ids": "a1990"}, {"ids": [1]}, {"ids": ["a"], "extra": 1}, {}])
def test_mget_refuses_bad_bodies(app: Served, body: dict[str, Any]) -> None:
    r = app.call("POST", "/v1/collections/lib/docs:mget", "k-alice", body)
    assert r.status_code == 400 and r.json()["error"]["code"] == "invalid_params", r.text


# -- cursors ----------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def many(app: Served) -> list[str]:
    docs = [{"_id": f"m{i:02d}", "text": "propeller " * (1 + i % 7) + f"item {i}"} for i in range(33)]
    assert app.bulk("k-alice", "pages", docs).json()["rejected"] == 0
    # Every document embedded before the pages are read: a lazy collection embeds what each read
    # touches, and a hybrid ranking that changes between two pages' reads would overlap or skip
    # (a cursor is a position in the ranking). Without this the hybrid case passed only when the
    # keyword case had run first and its touches had been embedded by then.
    assert app.call("POST", "/semantic/promote", "k-admin-a", {"collection": "pages"}).status_code == 200
    for d in docs:
        assert app.wait_status("k-alice", "pages", str(d["_id"]), "ready", timeout=60) == "ready"
    return [str(d["_id"]) for d in docs]


@pytest.mark.parametrize("strategy", ["keyword", "hybrid"])
def test_cursor_pages_are_disjoint_and_complete(app: Served, many: list[str], strategy: str) -> None:
    q = {"collection": "pages", "q": "propeller", "semantic": {"strategy": strategy}}
    whole = _read(app, "k-alice", **q, limit=200)
    assert whole["nextCursor"] is None and len(whole["results"]) == len(many)
    seen: list[str] = []
    scores: list[float] = []
    cursor = None
    pages = 0
    while True:
        out = _read(app, "k-alice", **q, limit=7 if pages % 2 else 5, **({"cursor": cursor} if cursor else {}))
        seen += ids(out["results"])
        scores += [r["score"] for r in out["results"]]
        pages += 1
        cursor = out["nextCursor"]
        if cursor is None:
            break
        assert pages < 20
    assert len(seen) == len(set(seen)) == len(many)  # disjoint and complete
    assert seen == ids(whole["results"])  # the same order as one big page
    assert scores == sorted(scores, reverse=True)  # comparable across pages
    assert scores == [r["score"] for r in whole["results"]]


def test_a_cursor_is_bound_to_its_query_and_key(app: Served, many: list[str]) -> None:
    q = {"collection": "pages", "q": "propeller", "limit": 5}
    cursor = _read(app, "k-alice", **q)["nextCursor"]
    assert cursor
    # well-formed but not this query's and key's: 404, like an unknown id (a schema-valid request
    # is never refused as malformed; services/api/cursors.py)
    unknown = [
        ("k-alice", {**q, "q": "propeller item", "cursor": cursor}),  # another query
        ("k-alice", {**q, "filter": {"text": "x"}, "cursor": cursor}),  # another filter
        ("k-alice", {**q, "semantic": {"strategy": "hybrid"}, "cursor": cursor}),  # another strategy
        ("k-admin-a", {**q, "cursor": cursor}),  # another key of the same tenant
        ("k-admin-b", {**q, "cursor": cursor}),  # another tenant
        ("k-alice", {**q, "cursor": cursor[:-2] + ("AA" if cursor[-2:] != "AA" else "BB")}),  # altered MAC
        ("k-alice", {**q, "cursor": "AAAAAAAAAAC" + cursor[11:]}),  # altered offset
        ("k-alice", {**q, "cursor": "A" * 32}),
    ]
    for key, body in unknown:
        body.setdefault("semantic", {"strategy": "keyword"})
        r = app.read(key, **body)
        assert r.status_code == 404 and r.json()["error"]["code"] == "not_found", (key, body, r.text)
        assert r.json()["error"]["details"]["field"] == "cursor"
    for bad in ("not a cursor", cursor + "A", cursor[:-1] + "=", "+" * 32):
        r = app.read("k-alice", semantic={"strategy": "keyword"}, **{**q, "cursor": bad})
        assert r.status_code == 400 and r.json()["error"]["code"] == "invalid_params", (bad, r.text)
    # the same query with another page size and include is fine
    out = _read(app, "k-alice", **{**q, "limit": 3}, cursor=cursor, include={"fields": True})
    assert len(out["results"]) == 3 and not set(ids(out["results"])) & set(ids(_read(app, "k-alice", **q)["results"]))


# -- scores -----------------------------------------------------------------------------------


@pytest.mark.parametrize("strategy", ["keyword", "semantic", "hybrid", "auto"])
def test_scores_are_in_0_1_and_ordered(app: Served, many: list[str], strategy: str) -> None:
    out = _read(app, "k-alice", collection="pages", q="propeller item 3", semantic={"strategy": strategy}, limit=20)
    scores = [r["score"] for r in out["results"]]
    assert scores and all(0 < s <= 1 for s in scores), scores
    assert scores == sorted(scores, reverse=True)
    if strategy != "semantic":
        assert scores[0] == 1.0  # the best result anchors the scale


def test_a_lone_hybrid_hit_scores_one_not_zero(app: Served) -> None:
    assert app.put("k-alice", "lone", "only", {"text": "xylophone"}).status_code == 201
    for strategy in ("keyword", "hybrid"):
        out = _read(app, "k-alice", collection="lone", q="xylophone", semantic={"strategy": strategy})
        assert [(r["id"], r["score"]) for r in out["results"]] == [("only", 1.0)], out


# -- options that are not silently ignored ----------------------------------------------------


@pytest.mark.parametrize(("body", "field"), [
    ({"collection": "lib", "global": True}, "global"),
    ({"semantic": {"domainHint": ""}}, "semantic.domainHint"),  # a hint is accepted (test_global_read.py), not empty
    ({"unknown": 1}, None),
    ({"include": {"fields": "title"}}, None),
    ({"include": {"fields": [""]}}, None),
    ({"include": {"everything": True}}, None),
])
def test_unsupported_options_are_errors(app: Served, body: dict[str, Any], field: str | None) -> None:
    r = app.read("k-alice", q="turbine", **body)
    assert r.status_code == 400 and r.json()["error"]["code"] == "invalid_params", r.text
    if field:
        assert r.json()["error"]["details"]["field"] == field


def test_global_searches_every_collection_of_the_tenant(app: Served) -> None:
    plain = _read(app, "k-alice", q="turbine", limit=50)
    wide = _read(app, "k-alice", q="turbine", limit=50, **{"global": True, "collection": "any"})
    assert ids(wide["results"]) == ids(plain["results"])
    assert {r["collection"] for r in wide["results"]} >= {"lib", "html"}


# -- CORS -------------------------------------------------------------------------------------


def test_cors_preflight_and_answers(app: Served) -> None:
    pre = app.client.options("/v1/read", headers={
        "Origin": "https://app.example", "Access-Control-Request-Method": "POST",
        "Access-Control-Request-Headers": "authorization,content-type,last-event-id"})
    assert pre.status_code == 200, pre.text
    assert pre.headers["access-control-allow-origin"] == "https://app.example"
    allowed = pre.headers["access-control-allow-headers"].lower()
    assert {"authorization", "content-type", "accept", "last-event-id"} <= {h.strip() for h in allowed.split(",")}
    assert "POST" in pre.headers["access-control-allow-methods"]
    denied = app.client.options("/v1/read", headers={"Origin": "https://evil.example",
                                                     "Access-Control-Request-Method": "POST"})
    assert "access-control-allow-origin" not in denied.headers
    r = app.call("POST", "/v1/read", "k-alice", {"q": "turbine"}, headers={"Origin": "https://admin.example"})
    assert r.status_code == 200 and r.headers["access-control-allow-origin"] == "https://admin.example"
    assert "retry-after" in r.headers["access-control-expose-headers"].lower()
    err = app.call("POST", "/v1/read", None, {"q": "turbine"}, headers={"Origin": "https://app.example"})
    assert err.status_code == 401 and err.headers["access-control-allow-origin"] == "https://app.example"


def test_no_cors_unless_configured(tmp_path: Path) -> None:
    with served(tmp_path / "data") as s:
        r = s.client.options("/v1/read", headers={"Origin": "https://app.example",
                                                  "Access-Control-Request-Method": "POST"})
        assert r.status_code == 405 and "access-control-allow-origin" not in r.headers
        r = s.call("POST", "/v1/read", "k-alice", {"q": "x"}, headers={"Origin": "https://app.example"})
        assert r.status_code == 200 and "access-control-allow-origin" not in r.headers
    with served(tmp_path / "data2", env={"VIBE_CORS_ORIGINS": '["https://json.example"]'}) as s:
        r = s.client.options("/healthz", headers={"Origin": "https://json.example",
                                                  "Access-Control-Request-Method": "GET"})
        assert r.status_code == 200 and r.headers["access-control-allow-origin"] == "https://json.example"


def test_explain_names_the_fusion_and_the_shown_score(app: Served, many: list[str]) -> None:
    out = _read(app, "k-alice", collection="pages", q="propeller item 3", semantic={"strategy": "hybrid"})
    top = out["results"][0]
    r = app.call("GET", f"/v1/explain/{top['explainId']}", "k-alice")
    assert r.status_code == 200, r.text
    assert r.json()["fusion"] == "zscore" and r.json()["shownScore"] == top["score"] == 1.0


def test_rrf_scores_are_over_the_best_possible(tmp_path: Path) -> None:
    with served(tmp_path / "data", env={"VIBE_FUSION": "rrf"}) as s:
        s.bulk("k-alice", "r", [{"_id": f"d{i}", "text": f"hydrofoil {'strut ' * i}"} for i in range(6)])
        out = _read(s, "k-alice", collection="r", q="hydrofoil strut", semantic={"strategy": "hybrid"})
        scores = [r["score"] for r in out["results"]]
        assert scores and all(0 < x <= 1 for x in scores) and scores == sorted(scores, reverse=True)
        explained = s.call("GET", f"/v1/explain/{out['results'][0]['explainId']}", "k-alice").json()
        assert explained["fusion"] == "rrf"
        # the RRF sum (a document without a vector yet counts its keyword rank for both legs)
        # over 2 / (60 + 1), the sum of a document ranked first by both
        assert abs(scores[0] - min(1.0, round(explained["score"] * 61 / 2, 6))) < 1e-6, explained
        for hit in out["results"][1:]:
            raw = s.call("GET", f"/v1/explain/{hit['explainId']}", "k-alice").json()["score"]
            assert abs(hit["score"] - max(1e-6, round(raw * 61 / 2, 6))) < 1e-6
