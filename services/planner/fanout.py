"""Global reads (collection `any`, or `global: true`): one lexical and one semantic leg per
collection the tenant has, each with its own candidate budget, merged by score.

Why fan out rather than one query over the tenant: a single top-k over every collection lets
one large collection take every candidate slot, so a small collection's best match never
reaches fusion, and nothing says what was searched. Here each collection's leg is guaranteed
its share of the candidate list (`share`); slots a collection does not fill go to the best
remaining candidates of the others, so a tenant with one busy collection loses nothing.

Why merging raw scores is sound: the lexical index keeps BM25 statistics per tenant (IDF and
field lengths are the tenant's, whichever collection a document is in), so one tenant's BM25
scores compare across its collections; vector scores compare within one space, and every leg
searches the same space with the same query vector.

Every leg carries the read's own SearchFilter (tenant, ACL, certificates, token filter, `where`,
id allow-list) with only its collections narrowed: nothing a leg returns was not already
admitted inside the engine. A tenant may have many collections: past `max_collections` the
rest is searched by one remainder leg, which names them in its filter (up to REST_BY_NAME of
them) or else searches the whole tenant (as a read of `any` did before fan-out) and drops the hits
of collections with their own leg; so every collection is searched and the remainder is reported
as such, never silently left out.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from concurrent.futures import Future
from dataclasses import dataclass, field, replace
from typing import TypeVar

from services.core.reserved import is_reserved_collection
from services.planner.pools import FANOUT_LEGS
from shared.edges import EDGES
from shared.model import DocKey, Hit
from shared.ports import Candidates, CollectionStore, LexicalIndex, ResolvedCandidates, SearchFilter, VectorIndex

T = TypeVar("T")
# Past the legs of their own, the remainder leg names the rest in its filter (one terms clause, as
# cheap as one collection's) when they are at most this many; beyond, it searches the whole tenant
# and drops the hits of collections with a leg of their own, reading every hit's key to do so.
REST_BY_NAME = 256


@dataclass
class LegReport:
    """What one leg searched and what the budget cut (`diagnostics.collections[]`)."""
    collection: str | None  # None: the remainder leg (every collection without a leg of its own)
    lexical_found: int = 0  # candidates the leg returned (at most `fetch`; the remainder: `k`)
    lexical_kept: int = 0  # of those, in the merged list
    lexical_truncated: bool = False  # the leg filled its fetch: the collection may match more
    semantic_found: int = 0
    semantic_kept: int = 0
    semantic_truncated: bool = False


@dataclass
class GlobalPlan:
    """The legs of one global read, decided once per read (every refresh reuses them)."""
    collections: tuple[str, ...]  # a leg each, by name
    remainder: bool  # more collections than legs: one leg searches the rest
    k: int  # the merged list's length (the read's candidates)
    share: int  # candidates each leg is guaranteed in the merged list
    fetch: int  # candidates each leg asks its engine for
    reports: list[LegReport] = field(default_factory=list)
    # the remainder's collections by name; None: too many to name, it searches the whole tenant
    rest: tuple[str, ...] | None = None

    @property
    def legs(self) -> int:
        return len(self.collections) + self.remainder

    def snapshot(self) -> GlobalPlan:
        """The reports as they are now (an answer's, which later legs of its stream do not change)."""
        return replace(self, reports=[replace(r) for r in self.reports])


def plan_global(store: CollectionStore, tenant: str, k: int, max_collections: int, min_share: int) -> GlobalPlan:
    """The tenant's collections (by name, reserved ones left out: no key reads them) and each
    leg's budget: a share of `k` (at least `min_share`, so many small shares still fill a page
    each), and a fetch of twice the share (at most `k`) so a collection can take up the slots
    sparse ones leave."""
    listed = store.collection_names(tenant, "", max_collections + REST_BY_NAME + 1)
    # edges are never in an index (shared/edges.py): a leg for them would search nothing
    names = [n for n in listed if not is_reserved_collection(n) and n != EDGES]
    own = tuple(names[:max_collections])
    # every name was listed (reserved ones count: more may follow them): the rest, if any, by name
    complete = len(listed) <= max_collections + REST_BY_NAME
    rest = tuple(names[max_collections:]) if complete else None
    remainder = bool(rest) if complete else True
    legs = max(1, len(own) + remainder)
    share = max(min_share, math.ceil(k / legs))
    fetch = min(k, 2 * share) if legs > 1 else k
    reports = [LegReport(c) for c in own] + ([LegReport(None)] if remainder else [])
    return GlobalPlan(own, remainder, k, min(share, k), max(fetch, min(share, k)), reports, rest)


def fair_merge(legs: Sequence[Sequence[float]], share: int, cap: int) -> list[tuple[int, int]]:
    """(leg, rank) of the merged list, best score first. Each leg keeps its first `share`
    entries; the rest of `cap` goes to the best remaining entries of any leg. Every leg's scores
    are best first, so what each keeps is a prefix of its own list (ties taken in rank order),
    which lets lazy candidates read their keys as a prefix too."""
    keep = [min(len(s), share) for s in legs]
    room = cap - sum(keep)
    if room > 0:
        rest = sorted((-s[r], i, r) for i, s in enumerate(legs) for r in range(keep[i], len(s)))
        for _, i, _ in rest[:room]:
            keep[i] += 1
    picks = [(i, r) for i, n in enumerate(keep) for r in range(n)]
    picks.sort(key=lambda p: (-legs[p[0]][p[1]], p[0], p[1]))
    return picks


class MergedCandidates:
    """Several legs' lexical candidates merged (`fair_merge`): the scores are known at once,
    and each leg's keys are read only as deep as the merged prefix asked for needs (a streamed
    first page reads a page's keys, not every leg's)."""

    def __init__(self, legs: Sequence[Candidates], picks: list[tuple[int, int]]):
        self._legs = legs
        self._picks = picks
        self._keys: list[DocKey] = []
        leg_scores = [leg.scores for leg in legs]
        self.scores = [leg_scores[i][r] for i, r in picks]

    def keys(self, n: int) -> list[DocKey]:
        n = min(n, len(self._picks))
        if n > len(self._keys):
            deep: dict[int, int] = {}
            for i, r in self._picks[:n]:
                deep[i] = max(deep.get(i, 0), r + 1)
            got = {i: self._legs[i].keys(d) for i, d in deep.items()}
            self._keys = [got[i][r] for i, r in self._picks[:n]]
        return self._keys[:n]


def _parallel(calls: list[Callable[[], T]]) -> list[T]:
    """The legs on the fan-out pool, the first on this thread (one hand-off fewer)."""
    futures: list[Future[T]] = [FANOUT_LEGS.submit(c) for c in calls[1:]]
    first = [calls[0]()] if calls else []
    return first + [f.result() for f in futures]


def _own(flt: SearchFilter, collection: str) -> SearchFilter:
    """The read's filter, narrowed to one collection (everything else kept as it is)."""
    return replace(flt, collections=(collection,))


def global_lexical(index: LexicalIndex, flt: SearchFilter, text: str, plan: GlobalPlan,
                   cap: int | None = None) -> MergedCandidates:
    """The lexical legs merged; `cap` bounds the merged list (the plan's `k` by default)."""
    def leg(c: str) -> Callable[[], Candidates]:
        return lambda: index.candidates(_own(flt, c), text, plan.fetch)

    rest_found = [0]

    def rest() -> Candidates:
        if plan.rest is not None:
            named = index.candidates(replace(flt, collections=plan.rest), text, plan.fetch)
            rest_found[0] = len(named.scores)
            return named
        # the whole tenant, as `any` searched before fan-out; the keys must be read to drop the
        # collections searched by their own legs (only a tenant with very many collections pays it)
        found = index.candidates(flt, text, plan.k)
        rest_found[0] = len(found.scores)
        keys = found.keys(len(found.scores))
        return ResolvedCandidates([Hit(key, s) for key, s in zip(keys, found.scores, strict=True)
                                   if key.collection not in own])

    own = set(plan.collections)
    calls = [leg(c) for c in plan.collections] + ([rest] if plan.remainder else [])
    legs = _parallel(calls)
    picks = fair_merge([leg.scores for leg in legs], plan.share, cap or plan.k)
    kept = _counts(picks, len(legs))
    for r, found, n in zip(plan.reports, legs, kept, strict=True):
        r.lexical_found, r.lexical_kept = len(found.scores), n
        r.lexical_truncated = (len(found.scores) >= plan.fetch if r.collection is not None
                               else rest_found[0] >= _rest_fetch(plan, plan.fetch, plan.k))
    return MergedCandidates(legs, picks)


def global_semantic(index: VectorIndex, space: str, flt: SearchFilter, vector: list[float],
                    plan: GlobalPlan, k: int) -> list[Hit]:
    """The vector legs merged; `k` bounds the merged list (at most the plan's)."""
    own = set(plan.collections)

    def leg(c: str) -> Callable[[], list[Hit]]:
        return lambda: index.search(space, _own(flt, c), vector, min(plan.fetch, k))

    rest_found = [0]

    def rest() -> list[Hit]:
        if plan.rest is not None:
            named = index.search(space, replace(flt, collections=plan.rest), vector, min(plan.fetch, k))
            rest_found[0] = len(named)
            return named
        found = index.search(space, flt, vector, plan.k)
        rest_found[0] = len(found)
        return [h for h in found if h.key.collection not in own]

    calls = [leg(c) for c in plan.collections] + ([rest] if plan.remainder else [])
    # best first, equal scores by key: the order fair_merge's prefixes assume
    legs = [sorted(hits, key=lambda h: (-h.score, h.key)) for hits in _parallel(calls)]
    picks = fair_merge([[h.score for h in hits] for hits in legs], min(plan.share, k), k)
    kept = _counts(picks, len(legs))
    for r, found, n in zip(plan.reports, legs, kept, strict=True):
        r.semantic_found, r.semantic_kept = len(found), n
        r.semantic_truncated = (len(found) >= min(plan.fetch, k) if r.collection is not None
                                else rest_found[0] >= _rest_fetch(plan, min(plan.fetch, k), plan.k))
    return [legs[i][r] for i, r in picks]


def _rest_fetch(plan: GlobalPlan, named: int, whole: int) -> int:
    """What the remainder leg asked its engine for: a leg's fetch by name, else the whole read's."""
    return named if plan.rest is not None else whole


def _counts(picks: list[tuple[int, int]], legs: int) -> list[int]:
    out = [0] * legs
    for i, _ in picks:
        out[i] += 1
    return out
