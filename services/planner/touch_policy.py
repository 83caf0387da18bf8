"""How far a query's touch may spend, as one immutable policy: the adaptive policy's numbers
(dig steps, stability zone, reach bound, follow-up) and the two simpler policies it replaces.

The defaults are the product's: the composition root builds the policy from them and from the
one operator setting, VIBE_TOUCH_FOLLOW_UP (`services.wiring`); benchmarks and tests construct
a `TouchPolicy` with other numbers and pass it in. Each number was chosen with the offline replay
`python -m bench.touch_sim` (Zipfian query streams over Cranfield, held out on CISI, weighing
spend against the quality of eager hybrid's page) and checked end to end with `python -m bench lazy`.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Literal


@dataclass(frozen=True)
class TouchPolicy:
    """The numbers of the touch (services/planner/touch.py `plan`); the defaults are the product's."""

    policy: str = "adaptive"  # adaptive | depth | fixed
    depth_factor: float = 1.0
    min_depth: int = 10
    neighbours: int = 0  # neighbours queued per source document (0 = off)
    neighbour_sources: int = 3  # how many page documents lend their neighbours
    # adaptive only:
    dig_step: int = 5  # how much deeper a repeat with an unstable page looks
    dig_factor: float = 2.0  # never deeper than this many times the policy depth
    dig_max: int = 60  # nor than this many lexical candidates
    stable_zone: float = 0.4  # the page is unstable while it uses the deepest 40% of what is embedded
    unstable_least: int = 2  # ... at least this many of its documents
    reserve: float = 4.0  # below `reserve` x depth tokens available, spend on the page first, never dig
    # z-score fusion: a dig stops at the lexical depth from which a candidate could still reach the
    # page with the semantic z of the leg's `reach_best`-th hit (0 = off), while the query has been
    # touched fewer than `reach_until` times (0 = always): a query that keeps coming back digs
    # unbounded. On Cranfield 10 is the largest bound that keeps its quality, and 2 the largest
    # `reach_until` that keeps its few-distinct-questions workload's; held out, CISI spends less
    # at the same quality on both workloads.
    reach_best: int = 10
    reach_until: int = 2
    similar: int = 0  # extra cold candidates, ranked by likeness to the semantic leg's best (0 = off)
    similar_sources: int = 3  # how many of the semantic leg's best hits describe "like"
    similar_within: int = 100  # only lexical candidates this deep are picked that way (0 = the whole list)
    similar_first: bool = False  # also on a query's first touch (else only on unsettled repeats)
    remember: bool = True  # a repeat whose page is the one of its last touch is settled (PageMemory)
    probe_rounds: int = 3  # at most this many probing repeats per query (0 = no cap)
    first_under_budget: int = 1  # under a tight budget, a query's first touch embeds at most this many
    # A streamed read of a query seen for the first time touches once more when its first touch's
    # vectors have landed, planning as a repeat would (its top is embedded now, so it may dig while
    # its page is unstable): most first-seen queries are never asked again, so their first read is
    # the only chance to find what the semantic leg lifts from below the lexical top. Streams only
    # (a JSON read does not wait for its touch); README "Touch economics".
    # "auto": per (tenant, collection), by the state of its `FollowUpSwitch` (what its streamed
    # first reads say of their lexical top): "agree" follows up with `auto_dig_step` for that
    # collection's touches; "disagree" (if `auto_disagree`) follows up too, but probes less per
    # query (`auto_disagree_probe_rounds`) in smaller steps (`auto_disagree_dig_step`); "unknown"
    # (too few reads yet) and "disagree" without `auto_disagree` keep the policy as set, no follow-up.
    follow_up: bool | Literal["auto"] = "auto"
    auto_dig_step: int = 8  # the dig step of a collection whose "auto" follow-up is on
    auto_after: int = 50  # "auto": a state only after this many observed first reads of the collection ...
    auto_below: float = -0.05  # ... "agree" while their running `disagreement` is below this, else "disagree"
    auto_window: int = 100  # the running mean weighs the last ~this many first reads (exponential)
    # A collection whose first reads disagree with their lexical top (CISI-like: the semantic leg
    # overrides the top rather than lifting from just below it) pays ~1 dug document in 9, so a
    # follow-up with the usual three probing rounds costs more than it finds; with one round and
    # small steps it also finds what its first read's page missed, at less spend. Applied to every
    # collection it would cost quality on a few-distinct-questions workload (0.992 -> 0.955 of eager
    # on CISI); applied only to collections in "disagree" (held-out streams): CISI, "disagree" in
    # every stream, 1.324x -> 1.313x the oracle's spend and 0.9803 -> 0.9832 of eager's quality;
    # Cranfield unchanged (19 of 20 streams "agree" throughout); few-distinct-questions workloads
    # identical.
    auto_disagree: bool = True
    auto_disagree_probe_rounds: int = 1  # the probe_rounds of a collection in "disagree"
    auto_disagree_dig_step: int = 4  # its dig step
    # A probe that picks, among the lexical top 100, the cold candidates a free proxy (static token
    # embeddings mapped onto the embedder's space) rates closest to the query does not pay: its
    # picks reach eager's page more often (26% against 20%), but the probe is ~7% of CISI's spend
    # and, held out, it improves neither quality nor spend (README "Touch economics").

    def reaches(self, touches: int) -> bool:
        """Whether `reach_best` bounds the dig of a query touched `touches` times before."""
        return self.reach_best > 0 and (not self.reach_until or touches < self.reach_until)

    def depth(self, limit: int, candidates: int) -> int:
        if self.policy == "fixed":
            return candidates  # the whole list: a repeat finds its top embedded and digs deeper
        return max(self.min_depth, math.ceil(limit * self.depth_factor))
