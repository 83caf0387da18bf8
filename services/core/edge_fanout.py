"""The per-tenant bound on a node's edges (`VIBE_GRAPH_MAX_EDGES_PER_NODE`): one tenant must not
grow an unbounded fan-out that every graph hydration and every edge lookup would then walk.

Counted at write from the store's edge index (one grouped query per write or bulk), the
batch's own edges included in order, an edge rewritten under its id counted once. Two writers
racing on the same node may pass it by their own edges each: the bound caps growth, it is not a
uniqueness constraint. The refusal names the end (`from` or `to`) and the bound, never how many
edges the node has (the writer may not be able to read them)."""

from __future__ import annotations

from collections.abc import Sequence

from shared.edges import edge_of, is_edge, ref_of
from shared.errors import VibeError, invalid
from shared.model import DocKey, StoredDoc
from shared.ports import DocumentReader, EdgeStore


class EdgeFanout:
    def __init__(self, edges: EdgeStore, docs: DocumentReader, limit: int):
        self.edges = edges
        self.docs = docs
        self.limit = limit

    def refused(self, batch: Sequence[StoredDoc]) -> dict[DocKey, VibeError]:
        """The edges of `batch` that would take an end past the bound, by key (applied in order)."""
        new = [d for d in batch if is_edge(d.key)]
        if not new:
            return {}
        tenant = new[0].key.tenant
        stored = self.docs.get_docs(list(dict.fromkeys(d.key for d in new)))
        ends: dict[DocKey, tuple[str, str]] = {}
        for key, doc in stored.items():
            if (e := edge_of(doc)) is not None:
                ends[key] = (ref_of(e.src), ref_of(e.dst))
        refs = {r for d in new if (e := edge_of(d)) is not None for r in (ref_of(e.src), ref_of(e.dst))}
        degree = self.edges.edge_degrees(tenant, sorted(refs | {r for pair in ends.values() for r in pair}))
        out: dict[DocKey, VibeError] = {}
        for d in new:
            e = edge_of(d)
            if e is None:
                continue
            before = ends.get(d.key)
            for r in before or ():
                degree[r] = degree.get(r, 1) - 1
            pair = (ref_of(e.src), ref_of(e.dst))
            over = next((name for name, r in zip(("from", "to"), pair, strict=True)
                         if degree.get(r, 0) + 1 > self.limit), None)
            if over is not None:
                for r in before or ():
                    degree[r] = degree.get(r, 0) + 1
                out[d.key] = invalid(f"{over}: a document may be an end of at most {self.limit} edges "
                                     "(VIBE_GRAPH_MAX_EDGES_PER_NODE)", field=over)
                continue
            for r in pair:
                degree[r] = degree.get(r, 0) + 1
            ends[d.key] = pair
        return out
