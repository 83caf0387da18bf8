"""The Python SDK and the graph overlay, against the served app: edges written with `put`/`bulk`
into `semantic.edges`, a read with `graph={"depth": 2}` parsed into `Hit.neighbors`, and a
neighbour's explain typed as an `EdgeReason` with its path and edges."""

from __future__ import annotations

from vibe_semantic_client import Client, EdgeReason, Neighbor

from harness.server import Served
from tests.sdk.conftest import ADMIN, BOB


def test_graph_read_and_neighbour_explain(server: Served, base_url: str) -> None:
    with Client(base_url, ADMIN) as admin:
        admin.bulk("sdkg", [{"_id": "a", "title": "wombat den"}, {"_id": "b", "title": "grass"},
                            {"_id": "c", "title": "rain", "_acl": ["user:admin"]}])
        admin.bulk("semantic.edges", [
            {"_id": "ab", "from": "sdkg/a", "to": "sdkg/b", "predicate": "eats", "weight": 0.7},
            {"_id": "cb", "from": "sdkg/c", "to": "sdkg/b", "predicate": "feeds"}])
        [hit] = admin.read("sdkg", "wombat", strategy="keyword", graph={"depth": 2}).results
        assert [(n.id, n.depth) for n in hit.neighbors or []] == [("b", 1), ("c", 2)]
    with Client(base_url, BOB) as bob:  # bob may not read c: neither it nor the edge to it
        [hit] = bob.read("sdkg", "wombat", strategy="keyword", graph={"depth": 2}).results
        assert hit.neighbors is not None and [n.id for n in hit.neighbors] == ["b"]
        n = hit.neighbors[0]
        assert isinstance(n, Neighbor) and (n.predicate, n.weight, n.direction, n.via) == ("eats", 0.7, "out",
                                                                                           ("sdkg", "a"))
        assert n.path == ["sdkg/a", "sdkg/b"] and n.edges[0]["edge"] == "ab"
        why = bob.explain(n.explain_id or "")
        [edge] = [r for r in why.reasons if isinstance(r, EdgeReason)]
        assert why.strategy == "graph" and edge.path == n.path and edge.depth == 1 and edge.edges == n.edges
        [plain] = bob.read("sdkg", "wombat", strategy="keyword").results
        assert plain.neighbors is None
