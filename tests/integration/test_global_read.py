"""Global reads over a real socket (collection `any`, `global: true`): a leg per collection with its
own candidate budget, merged and reported per collection; ACL, certificates and tenants hold in
every leg (JSON, SSE, explain); `domainHint`; the fan-out bound."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from harness.server import Served, ids, served

FILLER = (" The review covered the schedule, the open risks and the owners of each workstream;"
          " notes went to the weekly digest for later reference.")


def _key(key: str, tenant: str, principals: list[str], scopes: list[str] | None = None,
         certs: list[str] | None = None) -> dict[str, Any]:
    out: dict[str, Any] = {"key": key, "tenant": tenant, "principals": principals,
                           "scopes": scopes or ["read", "write", "admin"]}
    if certs:
        out["certs"] = certs
    return out


KEYS = [
    _key("k-g1", "g1", ["user:owner"]),
    _key("k-g2-admin", "g2", ["user:admin"]),
    _key("k-g2-alice", "g2", ["user:alice", "group:eng"], ["read"]),
    _key("k-g2-cert", "g2", ["user:carol", "group:eng"], ["read"], certs=["hr:payroll"]),
    _key("k-g3", "g3", ["user:owner"]),
    _key("k-g4", "g4", ["user:owner"]),
    _key("k-g9", "g9", ["user:intruder"]),
]


@pytest.fixture(scope="module")
def app(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Served]:
    # A small fan-out bound and share, so the bound and the budgets show with a few documents.
    env = {"VIBE_GLOBAL_MAX_COLLECTIONS": "4", "VIBE_GLOBAL_MIN_SHARE": "2"}
    with served(Path(tmp_path_factory.mktemp("global")) / "data", env=env, keys=KEYS) as s:
        yield s


def _bulk(app: Served, key: str, collection: str, docs: list[dict[str, Any]]) -> None:
    r = app.bulk(key, collection, docs)
    assert r.status_code == 200 and r.json()["accepted"] == len(docs), r.text


def _legs(body: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {leg["collection"]: leg for leg in body["diagnostics"]["collections"]}


def _keys(results: list[dict[str, Any]]) -> list[tuple[str, str]]:
    return [(r["collection"], r["id"]) for r in results]


def test_a_big_collection_cannot_starve_a_small_one(app: Served) -> None:
    # 30 documents that say "turbine" over and over, and two that say it once in a long text:
    # one top-20 over the tenant would hold only the big collection's documents.
    _bulk(app, "k-g1", "manuals", [{"_id": f"m{i}", "title": "Turbine turbine turbine", "body": f"Turbine {i}."}
                                   for i in range(30)])
    _bulk(app, "k-g1", "letters", [{"_id": f"l{i}", "title": f"Letter {i}", "body": "A note on the turbine." + FILLER}
                                   for i in range(2)])
    r = app.read("k-g1", collection="any", q="turbine", semantic={"strategy": "keyword", "k": 20}, limit=20)
    assert r.status_code == 200, r.text
    body = r.json()
    shown = _keys(body["results"])
    assert {("letters", "l0"), ("letters", "l1")} <= set(shown), shown
    assert len(shown) == 20 and len(set(shown)) == 20  # the merged list is the read's k, no document twice
    legs = _legs(body)
    assert set(legs) == {"letters", "manuals"}
    assert legs["letters"]["lexicalCandidates"] == 2 and legs["letters"]["cutByBudget"]["lexical"] == 0
    assert legs["letters"]["truncated"]["lexical"] is False
    # the big leg asked for 20 (twice its share of 10), kept what the small one left: 18
    assert legs["manuals"]["searched"]["lexical"] == 20 and legs["manuals"]["lexicalCandidates"] == 18
    assert legs["manuals"]["cutByBudget"]["lexical"] == 2 and legs["manuals"]["truncated"]["lexical"] is True
    g = body["diagnostics"]["global"]
    assert (g["legs"], g["perCollection"], g["fetchPerCollection"], g["candidates"], g["remainder"]) == (2, 10, 20, 20,
                                                                                                          None)
    # the small collection's documents rank by their own (lower) BM25: below the big one's
    assert set(shown[-2:]) == {("letters", "l0"), ("letters", "l1")}
    # `global: true` is the same read
    again = app.read("k-g1", collection="any", **{"global": True}, q="turbine",
                     semantic={"strategy": "keyword", "k": 20}, limit=20)
    assert _keys(again.json()["results"]) == shown
    # a single collection's read reports no legs
    one = app.read("k-g1", collection="manuals", q="turbine", semantic={"strategy": "keyword"}).json()
    assert "collections" not in one["diagnostics"] and "global" not in one["diagnostics"]


def test_pages_of_a_global_read_are_its_ranking_without_repeats(app: Served) -> None:
    # the same _id in two collections is two documents; each is shown once, under its collection
    _bulk(app, "k-g4", "alpha", [{"_id": f"d{i}", "title": f"Harbour crane {i}", "body": "harbour crane" + FILLER}
                                 for i in range(7)])
    _bulk(app, "k-g4", "beta", [{"_id": f"d{i}", "title": f"Crane at the harbour {i}", "body": "crane" + FILLER}
                                for i in range(5)])
    full = app.read("k-g4", collection="any", q="harbour crane", semantic={"strategy": "keyword"}, limit=50).json()
    everything = _keys(full["results"])
    assert len(everything) == 12 and len(set(everything)) == 12
    assert {c for c, _ in everything} == {"alpha", "beta"} and ("alpha", "d0") in everything and (
        "beta", "d0") in everything
    paged: list[tuple[str, str]] = []
    cursor = None
    for _ in range(10):
        body: dict[str, Any] = {"collection": "any", "q": "harbour crane", "semantic": {"strategy": "keyword"},
                                "limit": 5}
        if cursor:
            body["cursor"] = cursor
        page = app.read("k-g4", **body).json()
        paged += _keys(page["results"])
        cursor = page["nextCursor"]
        if cursor is None:
            break
    assert paged == everything


@pytest.fixture(scope="module")
def permissions(app: Served) -> None:
    _bulk(app, "k-g2-admin", "wiki", [
        {"_id": "w-open", "title": "Falcon project overview", "body": "The falcon project plan." + FILLER},
        {"_id": "w-eng", "title": "Falcon engineering notes", "body": "Falcon build steps." + FILLER,
         "_acl": ["group:eng"]},
        {"_id": "w-sales", "title": "Falcon pricing SECRETSALES", "body": "Falcon discounts." + FILLER,
         "_acl": ["group:sales"]},
    ])
    _bulk(app, "k-g2-admin", "hr", [
        {"_id": "h-pay", "title": "Falcon payroll SECRETPAY", "body": "Falcon team salaries." + FILLER,
         "_certs": ["hr:payroll"], "_acl": ["group:eng"]},
        {"_id": "h-admin", "title": "Falcon admin memo SECRETADMIN", "body": "Falcon memo." + FILLER,
         "_acl": ["user:admin"]},
    ])
    _bulk(app, "k-g9", "intruder-col",
          [{"_id": "intruder-doc", "title": "Falcon OTHERTENANT", "body": "falcon" + FILLER}])


FORBIDDEN = ("SECRETSALES", "SECRETPAY", "SECRETADMIN", "OTHERTENANT", "intruder-col", "w-sales", "h-pay",
             "h-admin", "intruder-doc")  # long enough never to occur by chance in a cursor or an id


@pytest.mark.parametrize("strategy", ["keyword", "hybrid"])
def test_acl_certificates_and_tenants_hold_in_every_leg(app: Served, permissions: None, strategy: str) -> None:
    want = {"alice": {("wiki", "w-open"), ("wiki", "w-eng")},
            "cert": {("wiki", "w-open"), ("wiki", "w-eng"), ("hr", "h-pay")}}
    for who, key in (("alice", "k-g2-alice"), ("cert", "k-g2-cert")):
        read: dict[str, Any] = {"collection": "any", "q": "falcon", "semantic": {"strategy": strategy}, "limit": 20,
                "include": {"highlights": True, "fields": True, "semantic": True}}
        r = app.read(key, **read)
        assert r.status_code == 200, r.text
        body = r.json()
        assert set(_keys(body["results"])) == want[who], body["results"]
        legs = _legs(body)
        assert set(legs) == {"hr", "wiki"}  # the tenant's collections, never another tenant's
        assert sum(leg["lexicalCandidates"] for leg in legs.values()) == len(want[who])
        assert all(leg["searched"]["lexical"] == leg["lexicalCandidates"] for leg in legs.values())
        events = app.stream(key, **read)
        assert events[-1][0] == "done", events
        shown = {k for _, data in events for k in _keys(data.get("results", []))}
        assert shown <= want[who]
        assert set(_keys(events[-1][1]["results"])) == want[who]
        if strategy == "hybrid":  # the vector legs count only what the caller may read (all of it, once embedded)
            done_legs = _legs(events[-1][1])
            assert events[-1][1]["diagnostics"]["semantic"]["pending"] == 0
            assert sum(leg["semanticHits"] for leg in done_legs.values()) == len(want[who]), done_legs
        explained = [app.call("GET", f"/v1/explain/{res['explainId']}", key) for res in body["results"]]
        assert all(e.status_code == 200 for e in explained)
        raw = r.text + json.dumps(events) + "".join(e.text for e in explained)
        allowed = {"h-pay", "SECRETPAY"} if who == "cert" else set()
        leaked = [s for s in FORBIDDEN if s in raw and s not in allowed]
        assert not leaked, leaked
    # the other tenant's global read sees its own collection only
    other = app.read("k-g9", collection="any", q="falcon", semantic={"strategy": strategy}).json()
    assert _keys(other["results"]) == [("intruder-col", "intruder-doc")]
    assert set(_legs(other)) == {"intruder-col"}


def test_domain_hint_is_accepted_and_reported(app: Served) -> None:
    _bulk(app, "k-g3", "c1", [{"_id": "a", "title": "Glacier survey", "body": "glacier" + FILLER}])
    base = {"collection": "any", "q": "glacier"}
    unused = app.read("k-g3", **base, semantic={"strategy": "keyword", "domainHint": "code"})
    assert unused.status_code == 200, unused.text
    assert unused.json()["diagnostics"]["domainHint"] == {"hint": "code", "used": False, "reason": "no_such_space"}
    used = app.read("k-g3", **base, semantic={"strategy": "hybrid", "domainHint": "core"}).json()
    assert used["diagnostics"]["domainHint"] == {"hint": "core", "used": True, "space": "core"}
    assert used["diagnostics"]["space"] == "core"
    named = app.read("k-g3", collection="c1", q="glacier", semantic={"domainHint": "code"}).json()
    assert named["diagnostics"]["domainHint"]["used"] is False  # a named collection's read reports it too
    for bad in ("", "x" * 129, "code\nspace"):
        r = app.read("k-g3", **base, semantic={"domainHint": bad})
        assert r.status_code == 400, (bad, r.text)
        assert r.json()["error"]["code"] == "invalid_params"
    without = app.read("k-g3", **base).json()
    assert "domainHint" not in without["diagnostics"]


def test_past_the_bound_the_rest_is_searched_by_one_remainder_leg(app: Served) -> None:
    for i in range(1, 7):  # six collections, four legs of their own (VIBE_GLOBAL_MAX_COLLECTIONS=4)
        _bulk(app, "k-g3", f"c{i}", [{"_id": f"r{i}-{j}", "title": f"Reef atlas {i}", "body": "reef" + FILLER}
                                     for j in range(2)])
    body = app.read("k-g3", collection="any", q="reef", semantic={"strategy": "keyword"}, limit=50).json()
    shown = set(_keys(body["results"]))
    assert shown == {(f"c{i}", f"r{i}-{j}") for i in range(1, 7) for j in range(2)}
    assert list(_legs(body)) == ["c1", "c2", "c3", "c4"]
    rest = body["diagnostics"]["global"]["remainder"]
    assert rest["afterCollections"] == 4 and rest["lexicalCandidates"] == 4 and rest["cutByBudget"]["lexical"] == 0
    assert rest["collections"] == 2  # c5 and c6, named in its filter
    assert body["diagnostics"]["global"]["legs"] == 5
    assert all(leg["lexicalCandidates"] == 2 for leg in _legs(body).values())
    assert ids(body["results"])  # each result names its collection (checked above) and an id
