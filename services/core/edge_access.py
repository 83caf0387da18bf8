"""Who may see an edge: the caller reads the edge document (its ACL and certificates) and both
documents it joins. An edge to a document the caller cannot read, or to one that does not
exist, is answered as absent wherever edges are shown (GET, mget, a read by `_id`, graph
hydration), so its `from` and `to` never tell a reader that a hidden document exists.

Rewriting or deleting an edge follows the overwrite rule of any document (its own ACL): the
writer of an edge keeps it even when one end is later hidden from them."""

from __future__ import annotations

from collections.abc import Iterable

from shared.edges import edge_of, is_edge
from shared.model import DocKey, Principal, StoredDoc
from shared.ports import DocumentReader


def visible_edges(store: DocumentReader, p: Principal, docs: Iterable[StoredDoc]) -> set[DocKey]:
    """Of `docs`, the keys `p` may see: every non-edge they may read, and the edges they may
    read whose two ends they may read too (one store read for all the ends)."""
    readable = [d for d in docs if d.readable_by(p)]
    edges = {d.key: e for d in readable if is_edge(d.key) and (e := edge_of(d)) is not None}
    ends = store.get_docs(list(dict.fromkeys(k for e in edges.values() for k in (e.src, e.dst)))) if edges else {}

    def seen(k: DocKey) -> bool:
        return (d := ends.get(k)) is not None and d.readable_by(p)

    return {d.key for d in readable if not is_edge(d.key)} | {
        k for k, e in edges.items() if seen(e.src) and seen(e.dst)}


def edge_visible(store: DocumentReader, p: Principal, doc: StoredDoc) -> bool:
    return doc.key in visible_edges(store, p, [doc])
