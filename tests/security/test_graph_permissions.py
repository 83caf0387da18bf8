"""The graph overlay against an oracle: randomized principals x documents x edges (ACLs,
certificates, missing ends, another tenant's look-alikes), then revocations and deletes.

An edge may be shown to a reader only where the reader may read the edge document and both
of its ends. For every reader and every result of a read with `graph: {depth: 2}`, the
neighbours shown must be exactly the documents the oracle reaches in one or two visible edges
(the bounds are set high enough that none cuts), at their shortest depth; every document and
edge on every path must be readable; a hidden end never appears, not in `neighbors`, not in a
path, not in explain; nothing of the other tenant ever does. GET and mget of an edge answer
it exactly where it is visible. Run in one embedded process, and in two API processes on one
PostgreSQL store (writes to one, reads from the other)."""

from __future__ import annotations

import random
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from harness.server import Served, served
from tests.security.matrix import ACLS, ALL_CERTS, CERT_SETS, KEYS, READERS, readable

EDGES = "semantic.edges"
COLLECTIONS = ("kb", "kg")
WORD = "nexus"  # in every document: a keyword read of it pages every readable one
ENV = {"VIBE_GRAPH_MAX_NEIGHBORS_PER_NODE": "100", "VIBE_GRAPH_MAX_NEIGHBORS_TOTAL": "1000",
       "VIBE_GRAPH_MAX_EDGES_PER_NODE": "1000", "VIBE_STREAM_WAIT_SECONDS": "0.5"}
WRITER = {"ta": "m-writer", "tb": "m-b-writer"}
PREDICATES = ("mentions", "replyTo", "authoredBy")


@dataclass
class Node:
    acl: frozenset[str]  # "*": public
    certs: frozenset[str]


@dataclass
class Link:
    src: str  # "collection/id"
    dst: str
    acl: frozenset[str]
    certs: frozenset[str]
    weight: float


class World:
    """What the harness wrote, per tenant: the oracle's only source."""

    def __init__(self) -> None:
        self.docs: dict[str, dict[str, Node]] = {"ta": {}, "tb": {}}
        self.edges: dict[str, dict[str, Link]] = {"ta": {}, "tb": {}}

    def reads(self, key: str, acl: frozenset[str], certs: frozenset[str], tenant: str) -> bool:
        t, principals, held = READERS[key]
        return t == tenant and readable(acl, principals) and certs <= held

    def node_ok(self, key: str, tenant: str, ref: str) -> bool:
        n = self.docs[tenant].get(ref)
        return n is not None and self.reads(key, n.acl, n.certs, tenant)

    def edge_ok(self, key: str, tenant: str, eid: str) -> bool:
        e = self.edges[tenant].get(eid)
        return (e is not None and self.reads(key, e.acl, e.certs, tenant)
                and self.node_ok(key, tenant, e.src) and self.node_ok(key, tenant, e.dst))

    def neighbours(self, key: str, root: str) -> dict[str, int]:
        """Breadth first over the visible edges, both directions, two levels: ref -> depth."""
        tenant = READERS[key][0]
        seen, out, frontier = {root}, {}, [root]
        for depth in (1, 2):
            nxt = []
            for node in frontier:
                for eid, e in self.edges[tenant].items():
                    if node not in (e.src, e.dst) or not self.edge_ok(key, tenant, eid):
                        continue
                    other = e.dst if e.src == node else e.src
                    if other not in seen:
                        seen.add(other)
                        out[other] = depth
                        nxt.append(other)
            frontier = nxt
        return out


def _acl(rng: random.Random) -> list[str] | None:
    acl = rng.choice(ACLS)
    return None if acl is None else [*acl, "svc:writer"]  # the writer may always rewrite


def _doc(ref: str, tenant: str, acl: list[str] | None, certs: list[str]) -> dict[str, Any]:
    body: dict[str, Any] = {"_id": ref.split("/", 1)[1], "title": f"{WORD} {tenant} {ref}"}
    if acl is not None:
        body["_acl"] = acl
    if certs:
        body["_certs"] = certs
    return body


def _node(acl: list[str] | None, certs: list[str]) -> Node:
    return Node(frozenset(acl) if acl is not None else frozenset({"*"}), frozenset(certs))


def _populate(s: Served, world: World, rng: random.Random) -> None:
    for tenant in ("ta", "tb"):
        refs = [f"{rng.choice(COLLECTIONS)}/d{i}" for i in range(14)]
        by_collection: dict[str, list[dict[str, Any]]] = {}
        for ref in refs:
            acl, certs = _acl(rng), rng.choice(CERT_SETS)
            world.docs[tenant][ref] = _node(acl, certs)
            by_collection.setdefault(ref.split("/")[0], []).append(_doc(ref, tenant, acl, certs))
        for collection, docs in by_collection.items():
            assert s.bulk(WRITER[tenant], collection, docs).json()["rejected"] == 0
        ends = [*world.docs[tenant], "kb/ghost1", "kg/ghost2"]  # edges may name documents never written
        edges = []
        for i in range(40):
            src, dst = rng.sample(ends, 2)
            acl, certs = _acl(rng), rng.choice(CERT_SETS)
            w = round(rng.random(), 3)
            world.edges[tenant][f"e{i}"] = Link(src, dst, *(_node(acl, certs).acl, _node(acl, certs).certs), w)
            body: dict[str, Any] = {"_id": f"e{i}", "from": src, "to": dst, "predicate": rng.choice(PREDICATES),
                                    "weight": w}
            if acl is not None:
                body["_acl"] = acl
            if certs:
                body["_certs"] = certs
            edges.append(body)
        assert s.bulk(WRITER[tenant], EDGES, edges).json()["rejected"] == 0


class Pair:
    """Where the harness writes (`w`) and where it reads (`r`): one process, or two on one store."""

    def __init__(self, w: Served, r: Served):
        self.w, self.r = w, r


@pytest.fixture(params=["sqlite", "postgres"])
def app(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[tuple[Pair, World, random.Random]]:
    rng = random.Random(20261129)
    world = World()
    if request.param == "sqlite":
        with served(tmp_path / "data", env=ENV, keys=KEYS) as s:
            _populate(s, world, rng)
            yield Pair(s, s), world, rng
        return
    env = {**ENV, "VIBE_STORE": "postgres", "VIBE_POSTGRES_URL": request.getfixturevalue("postgres_url"),
           "VIBE_POSTGRES_POOL_SIZE": "4", "VIBE_TOKEN_SECRET": "graph-token-secret-" + "x" * 32}
    with served(tmp_path / "a", env=env, keys=KEYS) as w, served(tmp_path / "b", env=env, keys=KEYS) as r:
        _populate(w, world, rng)
        yield Pair(w, r), world, rng


def _check_reads(s: Served, world: World) -> int:
    """Every reader's graph read against the oracle; the number of cases checked."""
    cases = 0
    for key in READERS:
        tenant = READERS[key][0]
        r = s.read(key, collection="any", q=WORD, limit=100, semantic={"strategy": "keyword"},
                   graph={"depth": 2}, include={"fields": ["title"]})
        assert r.status_code == 200, r.text
        for hit in r.json()["results"]:
            root = f"{hit['collection']}/{hit['id']}"
            assert world.node_ok(key, tenant, root), (key, root)
            want = world.neighbours(key, root)
            got = {f"{n['collection']}/{n['id']}": n["depth"] for n in hit["neighbors"]}
            assert got == want, (key, root, got, want)
            for n in hit["neighbors"]:
                # the caller's tenant's document, never the other tenant's look-alike
                assert n["fields"]["title"] == f"{WORD} {tenant} {n['collection']}/{n['id']}"
                assert n["path"][0] == root and len(n["path"]) == n["depth"] + 1
                assert all(world.node_ok(key, tenant, ref) for ref in n["path"]), (key, n["path"])
                assert all(world.edge_ok(key, tenant, h["edge"]) for h in n["edges"]), (key, n["edges"])
            cases += len(world.docs[tenant])
    return cases


def _check_explains(s: Served, world: World, rng: random.Random) -> None:
    """Explain of a sample of neighbours: the path's documents and edges all readable; another
    reader gets 404."""
    for key in READERS:
        tenant = READERS[key][0]
        r = s.read(key, collection="any", q=WORD, limit=100, semantic={"strategy": "keyword"}, graph={"depth": 2})
        shown = [n for hit in r.json()["results"] for n in hit["neighbors"]]
        for n in rng.sample(shown, min(4, len(shown))):
            got = s.call("GET", f"/v1/explain/{n['explainId']}", key)
            assert got.status_code == 200, got.text
            [edge] = [x for x in got.json()["reasons"] if x["type"] == "edge"]
            assert all(world.node_ok(key, tenant, ref) for ref in edge["path"])
            assert all(world.edge_ok(key, tenant, h["edge"]) for h in edge["edges"])
            other = next(k for k in READERS if k != key)
            assert s.call("GET", f"/v1/explain/{n['explainId']}", other).status_code == 404


def _check_edge_docs(s: Served, world: World) -> None:
    for key in READERS:
        tenant = READERS[key][0]
        ids = sorted({*world.edges["ta"], *world.edges["tb"]})
        r = s.call("POST", f"/v1/collections/{EDGES}/docs:mget", key, {"ids": ids})
        found = {d["_id"] for d in r.json()["docs"] if d["_found"]}
        assert found == {i for i in ids if world.edge_ok(key, tenant, i)}, key
        for i in ids[:8]:
            got = s.call("GET", f"/v1/collections/{EDGES}/docs/{i}", key).status_code
            assert got == (200 if world.edge_ok(key, tenant, i) else 404), (key, i)


def test_graph_reads_match_the_oracle_before_and_after_revocations(
        app: tuple[Pair, World, random.Random]) -> None:
    pair, world, rng = app
    s, w = pair.r, pair.w
    # every reader sees some graph and misses some: the oracle is not trivially all or nothing
    seen = [sum(len(world.neighbours(k, ref)) for ref in world.docs[READERS[k][0]]
                if world.node_ok(k, READERS[k][0], ref)) for k in READERS]
    assert max(seen) > 0 and any(sum(1 for e in world.edges[READERS[k][0]]
                                     if not world.edge_ok(k, READERS[k][0], e)) for k in READERS)
    cases = _check_reads(s, world)
    _check_explains(s, world, rng)
    _check_edge_docs(s, world)
    # revoke: documents and edges rewritten with other ACLs and certificates, some deleted
    for tenant in ("ta",):
        for ref in rng.sample(sorted(world.docs[tenant]), 4):
            acl, certs = _acl(rng), rng.choice(CERT_SETS)
            world.docs[tenant][ref] = _node(acl, certs)
            assert w.put(WRITER[tenant], ref.split("/")[0], ref.split("/")[1],
                         _doc(ref, tenant, acl, certs)).status_code == 200
        for eid in rng.sample(sorted(world.edges[tenant]), 6):
            e = world.edges[tenant][eid]
            acl, certs = _acl(rng), rng.choice(CERT_SETS)
            e.acl, e.certs = _node(acl, certs).acl, _node(acl, certs).certs
            body: dict[str, Any] = {"from": e.src, "to": e.dst, "predicate": "mentions", "weight": e.weight}
            if acl is not None:
                body["_acl"] = acl
            if certs:
                body["_certs"] = certs
            assert w.put(WRITER[tenant], EDGES, eid, body).status_code == 200
        for ref in rng.sample(sorted(world.docs[tenant]), 2):
            del world.docs[tenant][ref]
            assert w.call("DELETE", f"/v1/collections/{ref.split('/')[0]}/docs/{ref.split('/')[1]}",
                          WRITER[tenant]).status_code == 200
        for eid in rng.sample(sorted(world.edges[tenant]), 3):
            del world.edges[tenant][eid]
            assert w.call("DELETE", f"/v1/collections/{EDGES}/docs/{eid}", WRITER[tenant]).status_code == 200
    cases += _check_reads(s, world)
    _check_explains(s, world, rng)
    _check_edge_docs(s, world)
    assert cases > 100
    assert ALL_CERTS  # the writers hold every certificate: each write above was theirs to make
