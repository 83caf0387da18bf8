"""The graph overlay's lookups in the store of record (shared/edges.py says what an edge is)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol, runtime_checkable

from shared.model import StoredDoc


@runtime_checkable
class EdgeStore(Protocol):
    """Edges by the documents they join: each call is one set-based query, whatever the number
    of references, so hydrating a page's neighbours costs a query per depth."""

    def edges_touching(self, tenant: str, refs: Sequence[str], per_ref: int) -> list[StoredDoc]:
        """The edge documents of `tenant` whose `from` or `to` is one of `refs`
        ("<collection>/<id>"): at most `per_ref` per reference and direction, heaviest first
        (then by id). Readability is the caller's business: none is checked here."""

    def edge_degrees(self, tenant: str, refs: Sequence[str]) -> dict[str, int]:
        """How many edges of `tenant` each of `refs` is an end of (absent: none)."""
