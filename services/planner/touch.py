"""Which cold candidates a query spends embedding on (`plan`).

Three policies (`TouchPolicy.policy`, services/planner/touch_policy.py):

- `adaptive` (default): spend where the fused first page is decided, and only as deep as it
  keeps changing.
  1. First what is on the fused first page but has no vector yet (it stands in with its
     lexical score: embedding it settles its place), in page order.
  2. Then the rest of the lexical top `depth` (`limit` x `depth_factor`, at least
     `min_depth`), in lexical order: the documents the semantic leg most often lifts onto
     the page.
  3. A query whose top `depth` is already embedded (a repeat, or a neighbourhood other
     queries embedded) digs `dig_step` further down the lexical list, to at most
     `dig_factor` x `depth`, only while its page is not stable: while the page still draws
     on the deepest `stable_zone` part of what is embedded (at least `unstable_least` of its
     documents), there is likely more below; once it does not, the query costs nothing more.
     Two documents in the deepest 40%: a page drawing on one deep document paid about one dug
     document in 9 (CISI) to one in 4-5 (Cranfield), one drawing on two or more about one in 3.
     Small steps in a narrow zone spend about 4% less for the same quality than steps of 10 in
     the deepest half. A lexical-only signal cannot do better: a candidate's semantic z follows
     its lexical z only loosely (correlation ~0.5, ~0.25 below the lexical top 20), so pruning
     or extending the depth by that estimate moves along the same quality/spend frontier.
     With `remember` (default) the planner keeps, per query (`PageMemory`), the page its last
     touch saw and what that touch probed beyond the page. A repeat is settled, and spends
     nothing past its page, when its page holds the same documents as then, or when none of
     the probed ones made it onto the page (the last probe did not pay), or after
     `probe_rounds` probes: repeats settle instead of digging every time, as `fixed` does.
     Optional `similar` probes: cold lexical candidates (within `similar_within`) ranked by a
     lexical more-like-this of the semantic leg's best hits with the query (a predictor of what
     the semantic leg would lift), on unsettled repeats (`similar_first`: also the first
     time). They add quality but spend more than they save, so they are off by default.
  3b. A dig is bounded by `reach` (z-score fusion): no deeper than a candidate could still reach
     the page with the semantic z of the leg's `reach_best`-th hit, on a query's first
     `reach_until` touches; a query that keeps coming back digs unbounded (its demand is proven).
  4. Under a tight budget (tokens available below `reserve` x `depth`) the depth shrinks
     towards the page and nobody digs: what enters the page comes first; a query's first touch
     embeds at most `first_under_budget` of them, keeping the bucket for queries that repeat.
  Neighbours (optional, `neighbours`) are lexical more-like-this neighbours of the documents
  the semantic leg ranks highest on the page ("vector similarity once a few are embedded"),
  queried only when the budget has room.
- `depth`: embed what is cold within the top `depth` lexical positions; a repeat finds its
  top already embedded and costs nothing. Neighbours of the top lexical results optionally.
- `fixed`: the naive policy, the baseline of `python -m bench lazy`: embed the first K cold
  candidates wherever they sit in the whole candidate list, so every repeat digs deeper.

The choice is a pure function of what the query's own reads returned (`plan`), so it is
tested without a store. Everything here runs inside the caller's tenant + ACL filter: the
lexical list, the fused page and the neighbour searches all come from queries run with the
caller's SearchFilter, so a query never spends embedding on a document it may not read.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Collection, Mapping, Sequence
from dataclasses import dataclass, field

from services.planner.fusion import mean_spread
from services.planner.touch_policy import TouchPolicy
from shared.model import DocKey, Hit, SemanticStatus, StoredDoc
from shared.text.hashing import doc_text

Search = Callable[[str, int], list[Hit]]

# What a candidate's sidecar says, as `plan` sees it.
COLD, PENDING, READY, OTHER = "cold", "pending", "ready", "other"


def touch_state(status: SemanticStatus, cold: Collection[SemanticStatus] = (SemanticStatus.NONE,
                                                                          SemanticStatus.STALE)) -> str:
    """A sidecar status as `plan` sees it: cold (may be embedded), pending, ready, or other
    (denied, deferred, failed: never spent on)."""
    if status in cold:
        return COLD
    if status == SemanticStatus.QUEUED:
        return PENDING
    return READY if status == SemanticStatus.READY else OTHER



@dataclass(frozen=True)
class TouchPlan:
    keys: list[DocKey]  # cold candidates in the order they should be embedded
    depth: int  # how deep into the lexical list the plan looked
    dug: bool  # whether it went past the policy depth (unstable page)
    neighbours: bool  # whether neighbours are worth a search
    probe: list[DocKey] = field(default_factory=list)  # the keys picked beyond the page and the base depth


def frontier(lexical: Sequence[DocKey], state: Mapping[DocKey, str]) -> int:
    """How many leading lexical candidates are not cold (embedded, queued, or ineligible)."""
    for i, k in enumerate(lexical):
        if state.get(k, OTHER) == COLD:
            return i
    return len(lexical)


def unstable(lexical: Sequence[DocKey], page: Sequence[DocKey], edge: int, zone: float, least: int = 1) -> bool:
    """Whether the page still uses the deepest `zone` part of the first `edge` lexical
    candidates (at least `least` of them): then the next ones are likely to reach it too."""
    if edge <= 0:
        return False
    rank = {k: i for i, k in enumerate(lexical[:edge])}
    floor = math.floor(edge * (1 - zone))
    return sum(1 for k in page if rank.get(k, -1) >= floor) >= least


def reach(lexical: Sequence[float], semantic: Sequence[float], threshold: float, weight: float,
          best: int = 1, depth: int = 200) -> int:
    """How many leading lexical candidates could still reach the fused page once embedded
    (z-score fusion, services/planner/fusion.py): those whose lexical z, with the z of the
    `best`-th semantic hit so far, would reach the page's last fused score `threshold`.
    Lexical scores come best first, so the answer is a depth."""
    if not semantic or not lexical:
        return len(lexical)
    lm, ls = mean_spread(lexical[:depth])
    sm, ss = mean_spread(semantic[:depth])
    top = (semantic[min(best, len(semantic)) - 1] - sm) / ss
    n = 0
    for i, x in enumerate(lexical):
        if (1 - weight) * (x - lm) / ls + weight * top < threshold:
            break
        n = i + 1
    return n



def plan(policy: TouchPolicy, limit: int, lexical: Sequence[DocKey], page: Sequence[DocKey],
         state: Mapping[DocKey, str], available: int, reachable: int | None = None,
         similar: Sequence[DocKey] = (), settled: bool | None = None) -> TouchPlan:
    """The cold candidates worth embedding for one query, best first (adaptive policy).

    `lexical` is the query's lexical candidate list, `page` its current fused first page,
    `state` what each candidate's sidecar says, `available` the tenant's budget tokens now,
    `reachable` how deep a candidate could still reach the page (`reach`; None = unknown)."""
    base = policy.depth(limit, len(lexical))
    room = policy.reserve * base
    if available < room:  # tight budget: shrink towards the page, never dig
        depth = limit + math.floor((base - limit) * max(0.0, available) / room) if base > limit else base
        dug = False
    else:
        depth, dug = base, False
        edge = frontier(lexical, state)
        bottom = min(policy.dig_max, math.ceil(base * policy.dig_factor))
        if (not settled and base <= edge < bottom
                and unstable(lexical, page, edge, policy.stable_zone, policy.unstable_least)):
            depth, dug = min(edge + policy.dig_step, bottom), True
    if reachable is not None:
        # Never below the page, also on a first touch: letting `reach` cut a first touch to 5 or 7
        # lexical candidates saves 1.5% of Cranfield's spend but costs 0.0035 of its quality.
        depth = min(depth, max(limit, reachable))
    # Under a tight budget a query seen for the first time (no page memory yet) embeds only its
    # page's best cold documents: most first-seen queries are never asked again (Zipf), and what
    # the bucket keeps goes to the ones that come back (chosen on Cranfield, checked on CISI).
    first_cap = (policy.first_under_budget if available < room and settled is None and policy.remember
                 else None)
    out: list[DocKey] = []
    seen: set[DocKey] = set()
    base_keys = {*page, *lexical[:min(depth, base)]}
    for k in [*page, *lexical[:depth]]:
        if k not in seen and state.get(k, OTHER) == COLD:
            seen.add(k)
            out.append(k)
    if available >= room and policy.similar > 0 and not settled and (settled is not None or policy.similar_first):
        extra = 0
        for k in similar:
            if extra >= policy.similar:
                break
            if k not in seen and state.get(k, OTHER) == COLD:
                seen.add(k)
                out.append(k)
                extra += 1
    if first_cap is not None:
        out = out[:first_cap]
    return TouchPlan(out, depth, dug, available >= room and policy.neighbours > 0,
                     [k for k in out if k not in base_keys])


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
