"""The graph overlay over HTTP on a real socket: edges written through the documents API
(validated, a bad one refused with its field and the rest of a bulk going ahead, a node's edges
bounded), never embedded nor searchable, shown only where the caller reads the edge and both
ends; `graph: {depth}` hydrates each result's neighbours to depth 1 or 2 within the bounds,
each with an explain record whose reason is the edge path."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from harness.server import Served, ids, served

EDGES = "semantic.edges"
POSTS = [
    {"_id": "p1", "title": "zebra crossing", "body": "the zebra crossing outside the school"},
    {"_id": "p2", "title": "traffic lights", "body": "lights replace the crossing next year"},
    {"_id": "p3", "title": "bob's draft", "body": "a private draft about lights", "_acl": ["user:bob"]},
    {"_id": "p4", "title": "lab notes", "body": "certified notes about lights", "_certs": ["lab:x"]},
    {"_id": "hub", "title": "okapi hub", "body": "the okapi hub links to many"},
    *({"_id": f"h{i}", "title": f"spoke {i}", "body": f"spoke number {i}"} for i in range(1, 5)),
]
NOTES = [{"_id": "n1", "title": "council minutes", "body": "the council approved the lights"}]
EDGE_DOCS = [
    {"_id": "e1", "from": "posts/p1", "to": "posts/p2", "predicate": "mentions", "weight": 0.9},
    {"_id": "e2", "from": "posts/p1", "to": "posts/p3", "predicate": "mentions", "weight": 0.8},  # end hidden (ACL)
    {"_id": "e3", "from": "notes/n1", "to": "posts/p2", "predicate": "replyTo", "weight": 0.5},  # depth 2 from p1
    {"_id": "e4", "from": "posts/p1", "to": "posts/p4", "predicate": "mentions"},  # end needs a certificate
    {"_id": "e5", "from": "posts/p1", "to": "notes/n1", "predicate": "authoredBy", "_acl": ["user:bob"]},  # edge hidden
    {"_id": "e6", "from": "posts/p1", "to": "posts/ghost", "predicate": "mentions"},  # end missing
]
KEYWORD = {"strategy": "keyword"}


@pytest.fixture(scope="module")
def app(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Served]:
    env = {"VIBE_GRAPH_MAX_EDGES_PER_NODE": "5", "VIBE_GRAPH_MAX_NEIGHBORS_PER_NODE": "2"}
    with served(Path(tmp_path_factory.mktemp("graph")) / "data", env=env) as s:
        for collection, docs in (("posts", POSTS), ("notes", NOTES), (EDGES, EDGE_DOCS)):
            r = s.bulk("k-admin-a", collection, docs)
            assert r.status_code == 200 and r.json()["accepted"] == len(docs), r.text
        yield s


def _read(s: Served, key: str, q: str, depth: int, **extra: Any) -> list[dict[str, Any]]:
    r = s.read(key, collection="posts", q=q, semantic=KEYWORD, graph={"depth": depth}, **extra)
    assert r.status_code == 200, r.text
    return list(r.json()["results"])


def _hit(results: list[dict[str, Any]], doc_id: str) -> dict[str, Any]:
    return next(r for r in results if r["id"] == doc_id)


def _nb(hit: dict[str, Any]) -> list[tuple[str, str, int]]:
    return [(n["collection"], n["id"], n["depth"]) for n in hit["neighbors"]]


def test_depth_one_shows_only_edges_whose_edge_and_both_ends_the_caller_reads(app: Served) -> None:
    p1 = _hit(_read(app, "k-alice", "zebra", 1), "p1")
    assert _nb(p1) == [("posts", "p2", 1)]
    n = p1["neighbors"][0]
    assert (n["predicate"], n["weight"], n["direction"], n["via"]) == ("mentions", 0.9, "out",
                                                                      {"id": "p1", "collection": "posts"})
    assert n["path"] == ["posts/p1", "posts/p2"]
    assert n["edges"] == [{"edge": "e1", "from": "posts/p1", "to": "posts/p2", "predicate": "mentions", "weight": 0.9}]
    # bob reads p3 and the edge e5 (and n1): he sees them; never p4 (nobody holds lab:x) nor the missing end
    bob = _hit(_read(app, "k-bob", "zebra", 1), "p1")
    assert sorted(_nb(bob)) == [("notes", "n1", 1), ("posts", "p2", 1)]  # two per node: p3 cut by the bound
    assert all(n["id"] not in ("p4", "ghost") for n in bob["neighbors"])


def test_depth_two_follows_edges_both_ways_and_keeps_the_path(app: Served) -> None:
    p1 = _hit(_read(app, "k-alice", "zebra", 2, include={"fields": ["title"]}), "p1")
    assert _nb(p1) == [("posts", "p2", 1), ("notes", "n1", 2)]
    n1 = p1["neighbors"][1]
    assert n1["direction"] == "in" and n1["via"] == {"id": "p2", "collection": "posts"}
    assert [h["edge"] for h in n1["edges"]] == ["e1", "e3"]
    assert n1["path"] == ["posts/p1", "posts/p2", "notes/n1"]
    assert n1["fields"] == {"title": "council minutes"}
    # without graph, no neighbors key at all
    r = app.read("k-alice", collection="posts", q="zebra", semantic=KEYWORD)
    assert "neighbors" not in r.json()["results"][0]


def test_explain_of_a_neighbour_gives_the_edge_path(app: Served) -> None:
    p1 = _hit(_read(app, "k-alice", "zebra", 2), "p1")
    n1 = p1["neighbors"][1]
    r = app.call("GET", f"/v1/explain/{n1['explainId']}", "k-alice")
    assert r.status_code == 200, r.text
    [edge] = [x for x in r.json()["reasons"] if x["type"] == "edge"]
    assert edge["path"] == ["posts/p1", "posts/p2", "notes/n1"] and edge["edges"] == n1["edges"]
    assert r.json()["strategy"] == "graph" and edge["depth"] == 2
    # another caller cannot use the id
    assert app.call("GET", f"/v1/explain/{n1['explainId']}", "k-bob").status_code == 404


def test_explain_of_a_neighbour_is_gone_once_an_edge_on_its_path_is_hidden(app: Served) -> None:
    shown = {"from": "posts/h1", "to": "notes/n1", "predicate": "cites"}
    assert app.put("k-admin-a", EDGES, "t1", shown).status_code == 201
    h1 = _hit(_read(app, "k-alice", "spoke 1", 1), "h1")
    [n] = [n for n in h1["neighbors"] if n["id"] == "n1"]
    assert app.call("GET", f"/v1/explain/{n['explainId']}", "k-alice").status_code == 200
    hidden = {"from": "posts/h1", "to": "notes/n1", "predicate": "cites", "_acl": ["user:bob"]}
    assert app.put("k-admin-a", EDGES, "t1", hidden).status_code == 200
    assert app.call("GET", f"/v1/explain/{n['explainId']}", "k-alice").status_code == 404
    assert "n1" not in ids(_hit(_read(app, "k-alice", "spoke 1", 1), "h1")["neighbors"])


def test_neighbours_are_bounded_per_node_heaviest_first(app: Served) -> None:
    spokes = [{"_id": f"s{i}", "from": "posts/hub", "to": f"posts/h{i}", "predicate": "links", "weight": i / 10}
              for i in range(1, 5)]
    assert app.bulk("k-admin-a", EDGES, spokes).json()["accepted"] == 4
    hub = _hit(_read(app, "k-alice", "okapi", 1), "hub")
    assert _nb(hub) == [("posts", "h4", 1), ("posts", "h3", 1)]


def test_a_node_has_at_most_the_bound_of_edges_and_a_bulk_keeps_the_rest(app: Served) -> None:
    # p2 is an end of e1 and e3 already; the bound is 5
    more = [{"_id": f"f{i}", "from": "posts/p2", "to": f"notes/x{i}", "predicate": "cites"} for i in range(5)]
    body = app.bulk("k-admin-a", EDGES, more).json()
    assert body["accepted"] == 3 and body["rejected"] == 2
    refused = [r for r in body["results"] if "error" in r]
    assert [r["_id"] for r in refused] == ["f3", "f4"]
    assert all(r["error"]["code"] == "invalid_params" and "from" in r["error"]["message"] for r in refused)
    r = app.put("k-admin-a", EDGES, "f9", {"from": "notes/y", "to": "posts/p2", "predicate": "cites"})
    assert r.status_code == 400 and r.json()["error"]["details"]["field"] == "to", r.text
    # rewriting an edge already counted is not a new edge
    again = {"from": "posts/p2", "to": "notes/x0", "predicate": "quotes"}
    assert app.put("k-admin-a", EDGES, "f0", again).status_code == 200


@pytest.mark.parametrize(("edge", "field"), [
    ({"to": "posts/p2", "predicate": "p"}, "from"),
    ({"from": "p1", "to": "posts/p2", "predicate": "p"}, "from"),
    ({"from": "bad name/p1", "to": "posts/p2", "predicate": "p"}, "from"),
    ({"from": "any/p1", "to": "posts/p2", "predicate": "p"}, "from"),
    ({"from": "posts/", "to": "posts/p2", "predicate": "p"}, "from"),
    ({"from": "posts/p1", "to": 7, "predicate": "p"}, "to"),
    ({"from": "posts/p1", "to": "posts/p1", "predicate": "p"}, "to"),
    ({"from": "posts/p1", "to": "posts/p2", "predicate": "has space"}, "predicate"),
    ({"from": "posts/p1", "to": "posts/p2", "predicate": "x" * 65}, "predicate"),
    ({"from": "posts/p1", "to": "posts/p2", "predicate": "p", "weight": 2}, "weight"),
    ({"from": "posts/p1", "to": "posts/p2", "predicate": "p", "weight": "heavy"}, "weight"),
    ({"from": "posts/p1", "to": "posts/p2", "predicate": "p", "weight": True}, "weight"),
    ({"from": "posts/p1", "to": "posts/p2", "predicate": "p", "title": "extra"}, "title"),
    ({"from": "posts/p1", "to": "posts/p2", "predicate": "p", "_certs": "lab:x"}, "_certs"),
])
def test_a_bad_edge_is_refused_with_its_field_and_changes_nothing(app: Served, edge: dict[str, Any],
                                                                   field: str) -> None:
    r = app.put("k-admin-a", EDGES, "bad", edge)
    assert r.status_code == 400, r.text
    assert r.json()["error"]["code"] == "invalid_params" and r.json()["error"]["details"]["field"] == field
    assert app.call("GET", f"/v1/collections/{EDGES}/docs/bad", "k-admin-a").status_code == 404
    # in a bulk, the bad edge gets its error and the good one is stored
    good = {"_id": "good", "from": "notes/n1", "to": "notes/n2", "predicate": "p"}
    body = app.bulk("k-admin-a", EDGES, [{"_id": "bad", **edge}, good]).json()
    assert (body["accepted"], body["rejected"]) == (1, 1) and body["results"][0]["error"]["code"] == "invalid_params"


def test_edges_are_never_embedded_nor_searched(app: Served) -> None:
    app.call("POST", "/semantic/promote", "k-admin-a", {"collection": EDGES})
    zebra = {"from": "posts/h3", "to": "notes/n1", "predicate": "zebra"}
    assert app.put("k-admin-a", EDGES, "eager", zebra).status_code == 201
    r = app.call("GET", f"/v1/collections/{EDGES}/docs/eager?include=semantic", "k-admin-a")
    assert r.json()["__semantic"]["status"] == "denied", r.text
    for collection in (EDGES, "any"):
        found = app.read("k-admin-a", collection=collection, q="zebra mentions posts", semantic=KEYWORD).json()
        assert all(x["collection"] != EDGES for x in found["results"]), found
    legs = app.read("k-admin-a", collection="any", q="zebra", semantic=KEYWORD).json()["diagnostics"]["collections"]
    assert EDGES not in [leg["collection"] for leg in legs] and "posts" in [leg["collection"] for leg in legs]


def test_an_edge_document_is_read_only_where_both_ends_are(app: Served) -> None:
    def got(key: str, doc_id: str) -> int:
        return app.call("GET", f"/v1/collections/{EDGES}/docs/{doc_id}", key).status_code

    assert (got("k-alice", "e1"), got("k-alice", "e2"), got("k-bob", "e2")) == (200, 404, 200)
    assert got("k-alice", "e4") == 404 and got("k-alice", "e6") == 404  # certificate end; missing end
    r = app.call("POST", f"/v1/collections/{EDGES}/docs:mget", "k-alice", {"ids": ["e1", "e2", "e5"]})
    assert [d["_found"] for d in r.json()["docs"]] == [True, False, False]
    r = app.read("k-alice", collection=EDGES, _id="e2")
    assert r.status_code == 404
    like_an_edge = {"query": {"doc": {"collection": EDGES, "_id": "e1"}}}
    r = app.read("k-alice", collection="semantic.nodes", semantic=like_an_edge)
    assert r.status_code == 400 and r.json()["error"]["details"]["field"] == "semantic.query.doc.collection"
    # another tenant sees no edge and no neighbour
    assert app.call("GET", f"/v1/collections/{EDGES}/docs/e1", "k-admin-b").status_code == 404


def test_graph_is_bounded_in_the_request(app: Served) -> None:
    for bad in ({"depth": 3}, {"depth": 0}, {"depth": "1"}, {"depth": True}, {"hops": 1}, {}):
        r = app.read("k-alice", collection="posts", q="zebra", graph=bad)
        assert r.status_code == 400 and r.json()["error"]["code"] == "invalid_params", r.text
    r = app.read("k-alice", collection="posts", _id="p1", graph={"depth": 1})
    assert r.status_code == 400 and r.json()["error"]["details"]["field"] == "graph"


def test_a_stream_carries_neighbours_in_every_ranking_event(app: Served) -> None:
    events = app.stream("k-alice", collection="posts", q="zebra", semantic=KEYWORD, graph={"depth": 1})
    ranked = [d for e, d in events if e in ("lexical", "semantic", "done")]
    assert ranked and all(_nb(_hit(d["results"], "p1")) == [("posts", "p2", 1)] for d in ranked)


def test_a_touch_queues_the_page_documents_readable_neighbours_by_edges(app: Served) -> None:
    text = " grows in the valley where the river bends and the farmers sell it at the market"
    docs = [{"_id": "l1", "title": "quokka orchard", "body": "quokka" + text},
            {"_id": "l2", "title": "linked and readable", "body": "pears" + text},
            {"_id": "l3", "title": "linked, bob only", "body": "plums" + text, "_acl": ["user:bob"]},
            {"_id": "l4", "title": "behind a hidden edge", "body": "figs" + text}]
    assert app.bulk("k-admin-a", "lazy", docs).json()["accepted"] == 4
    edges = [{"_id": "sp1", "from": "lazy/l1", "to": "lazy/l2", "predicate": "mentions"},
             {"_id": "sp2", "from": "lazy/l3", "to": "lazy/l1", "predicate": "replyTo"},
             {"_id": "sp3", "from": "lazy/l1", "to": "lazy/l4", "predicate": "mentions", "_acl": ["user:bob"]}]
    assert app.bulk("k-admin-a", EDGES, edges).json()["accepted"] == 3
    assert [app.status("k-bob", "lazy", i) for i in ("l1", "l2", "l3", "l4")] == ["none"] * 4
    r = app.read("k-alice", collection="lazy", q="quokka", semantic=KEYWORD, limit=1)
    assert ids(r.json()["results"]) == ["l1"]
    assert r.json()["warming"]["queued"] == 1  # the page's l1: a speculated neighbour is no result to wait for
    assert app.wait_status("k-admin-a", "lazy", "l2", "ready") == "ready"  # a neighbour alice may read
    # what alice may not read (l3), or reaches only through an edge she may not read (l4), is never queued by her read
    assert app.status("k-bob", "lazy", "l3") == "none" and app.status("k-bob", "lazy", "l4") == "none"
