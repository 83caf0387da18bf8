"""Graph hydration: a read's `graph: {depth: 1|2}` lists, under each result of the page, the
documents joined to it by edges (`semantic.edges`, shared/edges.py), in both directions, to the
depth asked.

Bounded and budgeted: one edge lookup (`EdgeStore.edges_touching`, one set-based query) and one
document read per depth, whatever the page's size; at most `per_node` neighbours per node
expanded and `total` for the whole page (VIBE_GRAPH_MAX_NEIGHBORS_PER_NODE, _TOTAL). A node's
heaviest edges come first (weight, then edge id).

Each edge is shown only when the caller may read the edge document itself (ACL, certificates,
an end-user token's filter) and both of its ends: an unreadable edge or end is skipped before
it is counted against a bound, so a hidden document never appears, never takes a slot and
never lengthens a path. The explain record of a neighbour keeps its path; at lookup every edge
and document on it is checked again (`edge_explained`), and a path that is no longer wholly
readable answers as unknown.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Literal, Protocol

from services.core.edge_access import visible_edges
from shared.edges import EDGES, Edge, edge_of, ref_of
from shared.explain_record import ExplainRecord
from shared.model import DocKey, Principal, StoredDoc

if TYPE_CHECKING:
    from shared.ports import DocumentReader, EdgeStore

MAX_DEPTH = 2
OUT: Literal["out"] = "out"
IN: Literal["in"] = "in"
# Edges fetched per node and direction for each neighbour a node may show: some may be unreadable
# by this caller and are skipped before counting, so the lookup takes a few more than it shows.
OVERFETCH = 4


@dataclass(frozen=True, slots=True)
class GraphBounds:
    per_node: int = 10  # neighbours shown per node expanded
    total: int = 100  # neighbours shown for the whole page
    speculate: int = 0  # neighbours by edges a touch queues per page document (VIBE_GRAPH_SPECULATION_PER_DOC)


@dataclass(frozen=True, slots=True)
class Hop:
    """One edge on a path, as stored (`src` → `dst`)."""

    edge: str
    src: DocKey
    dst: DocKey
    predicate: str
    weight: float

    def body(self) -> dict[str, object]:
        return {"edge": self.edge, "from": ref_of(self.src), "to": ref_of(self.dst),
                "predicate": self.predicate, "weight": self.weight}


@dataclass
class Neighbour:
    """A document joined to a result, `depth` edges away, last reached from `via`."""

    key: DocKey
    via: DocKey
    depth: int
    direction: Literal["out", "in"]  # the last edge points away from `via` (out) or to it (in)
    path: list[Hop]
    root: DocKey  # the result it is listed under
    explain_id: str = ""
    fields: dict[str, object] | None = field(default=None)

    @property
    def last(self) -> Hop:
        return self.path[-1]

    def nodes(self) -> list[str]:
        """`collection/id` of each document on the path, the result first, this one last."""
        at = self.root
        out = [ref_of(at)]
        for h in self.path:
            at = h.dst if h.src == at else h.src
            out.append(ref_of(at))
        return out


def hydrate(store: EdgeStore, docs: DocumentReader, principal: Principal, page: Sequence[DocKey], depth: int,
            bounds: GraphBounds) -> tuple[dict[DocKey, list[Neighbour]], dict[DocKey, StoredDoc]]:
    """Each page key's neighbours (in the page's order, nearest first), and the neighbours'
    documents (read and re-checked here, for the fields a caller asked for)."""
    out: dict[DocKey, list[Neighbour]] = {k: [] for k in page}
    seen: dict[DocKey, set[DocKey]] = {k: {k} for k in page}
    # the page's own documents are the first edges' near ends: read again here, as every end is
    # (a speculation's sources come from an index that may lag an ACL change)
    roots = docs.get_docs(list(dict.fromkeys(page)))
    frontier: list[tuple[DocKey, DocKey, list[Hop]]] = [
        (k, k, []) for k in page if (d := roots.get(k)) is not None and d.readable_by(principal)]
    shown_docs: dict[DocKey, StoredDoc] = {}
    room = bounds.total
    for level in range(1, min(depth, MAX_DEPTH) + 1):
        if not frontier or room <= 0:
            break
        refs = list(dict.fromkeys(ref_of(node) for _, node, _ in frontier))
        edges = _readable_edges(store, principal, refs, bounds.per_node * OVERFETCH)
        by_ref: dict[str, list[Edge]] = {}
        for e in edges:
            by_ref.setdefault(ref_of(e.src), []).append(e)
            if e.dst != e.src:
                by_ref.setdefault(ref_of(e.dst), []).append(e)
        others = {e.dst if ref_of(e.src) == r else e.src for r, es in by_ref.items() for e in es}
        ends = docs.get_docs([k for k in others if k not in shown_docs])
        readable = {k for k, d in ends.items() if d.readable_by(principal)}
        shown_docs.update({k: ends[k] for k in readable})
        nxt: list[tuple[DocKey, DocKey, list[Hop]]] = []
        for root, node, path in frontier:
            taken = 0
            for e in sorted(by_ref.get(ref_of(node), ()), key=lambda e: (-e.weight, e.id)):
                if taken >= bounds.per_node or room <= 0:
                    break
                other, direction = (e.dst, OUT) if e.src == node else (e.src, IN)
                if other in seen[root] or other not in shown_docs:
                    continue
                seen[root].add(other)
                hops = [*path, Hop(e.id, e.src, e.dst, e.predicate, e.weight)]
                out[root].append(Neighbour(other, node, level, direction, hops, root))
                nxt.append((root, other, hops))
                taken += 1
                room -= 1
        frontier = nxt
    return out, shown_docs


def linked_keys(store: EdgeStore, docs: DocumentReader, principal: Principal, sources: Sequence[DocKey],
                per_source: int, exclude: set[DocKey]) -> list[DocKey]:
    """Neighbour speculation by edges: the documents one readable edge away from each of
    `sources` (heaviest first, at most `per_source` each, readable by the caller), in source
    order, without repeats or any of `exclude`. What a reader sees next from a page is what its
    documents link to, so these are embedded ahead of a read asking for them."""
    if per_source <= 0 or not sources:
        return []
    found, _ = hydrate(store, docs, principal, sources, 1, GraphBounds(per_source, per_source * len(sources)))
    out: list[DocKey] = []
    seen = set(exclude)
    for k in sources:
        for n in found.get(k, ()):
            if n.key not in seen:
                seen.add(n.key)
                out.append(n.key)
    return out


def _readable_edges(store: EdgeStore, principal: Principal, refs: list[str], per_ref: int) -> list[Edge]:
    """The edges touching `refs` the caller may read as documents (their ends are checked by
    the caller of this, with the documents it reads anyway)."""
    found = store.edges_touching(principal.tenant, refs, per_ref)
    return [e for d in found if d.readable_by(principal) and (e := edge_of(d)) is not None]


# -- explain ------------------------------------------------------------------------------


class Recorder(Protocol):
    """What records neighbours' explain ids (services/planner/explain.py Explains, which imports
    this module for the lookup side)."""

    def record_bodies(self, principal: Principal, items: Sequence[tuple[DocKey, str]]) -> list[str]: ...


def record_neighbours(explains: Recorder, principal: Principal, hydrated: dict[DocKey, list[Neighbour]]) -> None:
    """Each neighbour's explain id: its path, in one batch for the page."""
    flat = [n for ns in hydrated.values() for n in ns]
    if not flat:
        return
    bodies = [(n.key, json.dumps({"edge": {"depth": n.depth, "path": [h.body() for h in n.path],
                                           "nodes": n.nodes()}}, separators=(",", ":"))) for n in flat]
    for n, eid in zip(flat, explains.record_bodies(principal, bodies), strict=True):
        n.explain_id = eid


def is_edge_record(body: dict[str, Any]) -> bool:
    return isinstance(body.get("edge"), dict)


def edge_explained(record: ExplainRecord, body: dict[str, Any], store: DocumentReader, principal: Principal,
                   more: list[dict[str, object]]) -> dict[str, object] | None:
    """A neighbour's explain answer: `{type: "edge", path}`, then the `more` reasons (the
    certificates its document requires); None when any edge or document on the path is no
    longer the caller's to see."""
    path = body["edge"]["path"]
    keys = [DocKey(principal.tenant, EDGES, str(h["edge"])) for h in path]
    edges = store.get_docs(keys)
    if len(edges) != len(set(keys)):
        return None
    seen = visible_edges(store, principal, edges.values())
    if any(k not in seen for k in keys):
        return None
    for h, k in zip(path, keys, strict=True):  # the path as recorded must still be the edges' own
        e = edge_of(edges[k])
        if e is None or (ref_of(e.src), ref_of(e.dst)) != (h["from"], h["to"]):
            return None
    return {"id": record.doc_id, "collection": record.collection, "strategy": "graph",
            "reasons": [{"type": "edge", "path": body["edge"]["nodes"], "edges": path,
                         "depth": body["edge"]["depth"]}, *more],
            "expiresAt": record.expires_at}


def neighbour_body(n: Neighbour) -> dict[str, object]:
    """A neighbour as the read surface shows it (services/api/render.py)."""
    out: dict[str, object] = {
        "id": n.key.doc_id, "collection": n.key.collection, "predicate": n.last.predicate,
        "weight": n.last.weight, "direction": n.direction, "depth": n.depth,
        "via": {"id": n.via.doc_id, "collection": n.via.collection},
        "path": n.nodes(), "edges": [h.body() for h in n.path], "explainId": n.explain_id,
    }
    if n.fields is not None:
        out["fields"] = n.fields
    return out
