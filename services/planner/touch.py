"""Which cold candidates a query spends embedding on (V§4.2 "enqueue cold, eligible").

Two policies, chosen by `Settings.touch_policy`:

- `depth` (default): embed what is cold within the top `depth` lexical positions, where
  depth follows the page the caller asked for (`limit` x `touch_depth_factor`, at least
  `touch_min_depth`). A repeated query finds its top already embedded and costs nothing,
  so embedding follows the distinct questions users ask, not how often they ask them.
  Optionally, part of the ceiling goes to lexical neighbours of the top results (documents
  that share the top hits' vocabulary are likely to be semantically close to the query).
- `fixed`: the naive policy, kept for comparison in `bench lazy`: embed the first K cold
  candidates wherever they sit in the whole candidate list, so every repeat digs deeper.

Everything here runs inside the caller's tenant + ACL filter: a query never spends
embedding on a document its caller may not read.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from shared.model import DocKey, Hit, StoredDoc
from shared.text.hashing import doc_text

Search = Callable[[str, int], list[Hit]]


@dataclass(frozen=True)
class TouchPolicy:
    policy: str = "depth"  # depth | fixed
    depth_factor: float = 2.0
    min_depth: int = 10
    neighbours: int = 0  # neighbours queued per top result (0 = off)
    neighbour_sources: int = 3  # how many top results lend their neighbours

    def depth(self, limit: int, candidates: int) -> int:
        if self.policy == "fixed":
            return candidates  # the whole list: a repeat finds its top embedded and digs deeper
        return max(self.min_depth, math.ceil(limit * self.depth_factor))


def neighbour_query(doc: StoredDoc, words: int = 32) -> str:
    """A more-like-this query from a document: its title and the start of its text."""
    return " ".join(doc_text(doc.fields, None).split()[:words])


def neighbours(sources: Sequence[StoredDoc], search: Search, per_source: int, exclude: set[DocKey]) -> list[DocKey]:
    """Top lexical neighbours of each source document, in source order, without repeats."""
    out: list[DocKey] = []
    seen = set(exclude)
    for doc in sources:
        hits = search(neighbour_query(doc), per_source + len(seen) + 1)
        fresh = [h.key for h in hits if h.key not in seen and h.key != doc.key][:per_source]
        seen.update(fresh)
        out += fresh
    return out
