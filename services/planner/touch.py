"""Which cold candidates a query spends embedding on.

Three policies, chosen by `Settings.touch_policy`:

- `adaptive` (default): spend where the fused first page is decided, and only as deep as it
  keeps changing.
  1. First what is on the fused first page but has no vector yet (it stands in with its
     lexical score: embedding it settles its place), in page order.
  2. Then the rest of the lexical top `depth` (`limit` x `touch_depth_factor`, at least
     `touch_min_depth`), in lexical order: the documents the semantic leg most often lifts
     onto the page.
  3. A query whose top `depth` is already embedded (a repeat, or a neighbourhood other
     queries embedded) digs `dig_step` further down the lexical list, to at most
     `dig_factor` x `depth`, only while its page is not stable: while the page still draws
     on the deepest `stable_zone` part of what is embedded (at least `unstable_least` of its
     documents), there is likely more below; once it does not, the query costs nothing more.
     Two documents in the deepest 40% (against one in the deepest 30% before): a log of every
     dig (which page documents sat where, and which dug documents reached eager hybrid's page)
     showed that a page drawing on one deep document paid ~1 dug document in 9 on CISI and
     1 in 4-5 on Cranfield, one drawing on two or more ~1 in 3. Chosen on Cranfield (both its
     workloads keep their quality, both spend less; bench/results/touch-unstable-*.json) and
     held out on CISI, which spends less on both of its workloads.
     Repeats therefore settle, instead of digging on every repeat as `fixed` does.
     Before that, small steps in a narrow zone (`dig_step` 5, `stable_zone` 0.3, against 10 / 0.5)
     were chosen on Cranfield with an offline replay of this code and checked with
     `python -m bench.touch_sim` (bench/results/touch-cranfield.json, touch-cisi*.json): on
     Cranfield 4% less spend for 0.002 less quality; on CISI, held out, 4% less spend and 0.004
     more quality, and the `--queries 20` workload under 20% of the corpus (19.7%, was 20.4%).
     What a lexical-only signal cannot do: a linear model of a candidate's semantic z from its
     lexical z explains little (correlation ~0.5, ~0.25 below the lexical top 20), so pruning
     or extending the depth by that estimate moved along the same quality/spend frontier.
     Sharper, with `remember` (default): the planner keeps, per query (a hash of tenant,
     ACL, collection and text, `PageMemory`), the page its last touch saw and what that touch
     probed beyond the page (dig, similar). A repeat is settled, and spends nothing past its
     page, when its page holds the same documents as then, or when none of the probed ones
     made it onto the page (the last probe did not pay), or after `probe_rounds` probes.
     Optional `similar` probes: cold lexical candidates (within `similar_within`) ranked by a
     lexical more-like-this of the semantic leg's best hits with the query (a predictor of what
     the semantic leg would lift), on unsettled repeats (`similar_first`: also the first
     time). Measured in bench/results/touch-*: more quality, but more spend than they save, so
     off by default.
  3b. A dig is bounded by `reach` (z-score fusion): no deeper than a candidate could still reach
     the page with the semantic z of the leg's `reach_best`-th hit, on a query's first
     `reach_until` touches; a query that keeps coming back digs as before (its demand is proven).
  4. Under a tight budget (tokens available below `reserve` x `depth`) the depth shrinks
     towards the page and nobody digs: what enters the page comes first; a query's first touch
     embeds at most `first_under_budget` of them, keeping the bucket for queries that repeat.
  Neighbours (optional, `touch_neighbours`) are lexical more-like-this neighbours of the
  documents the semantic leg ranks highest on the page ("vector similarity once a few are
  embedded"), queried only when the budget has room.
- `depth`: embed what is cold within the top `depth` lexical positions; a repeat finds its
  top already embedded and costs nothing. Neighbours of the top lexical results optionally.
- `fixed`: the naive policy, kept for comparison in `bench lazy`: embed the first K cold
  candidates wherever they sit in the whole candidate list, so every repeat digs deeper.

The choice is a pure function of what the query's own reads returned (`plan`), so it is
tested without a store. Everything here runs inside the caller's tenant + ACL filter: the
lexical list, the fused page and the neighbour searches all come from queries run with the
caller's SearchFilter, so a query never spends embedding on a document it may not read.
"""

from __future__ import annotations

import hashlib
import logging
import math
import threading
import time
import weakref
import zlib
from collections import OrderedDict
from collections.abc import Callable, Collection, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Literal, NamedTuple

from services.planner.fusion import mean_spread
from shared.follow_up import SWITCH_STATES, FollowUpFlush, SwitchState, merge_mean, switch_state
from shared.metrics import METRICS
from shared.model import DocKey, Hit, SemanticStatus, StoredDoc
from shared.ports import FollowUpStore
from shared.text.hashing import doc_text

Search = Callable[[str, int], list[Hit]]
log = logging.getLogger("vibe.touch")

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
class TouchPolicy:
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
    # touched fewer than `reach_until` times (0 = always): a query that keeps coming back digs as
    # before. Chosen on Cranfield (bench/results/touch-reach-*.json): 10 is the largest bound that
    # keeps its quality, and 2 the largest `reach_until` that keeps its few-distinct-questions
    # workload's; held out, CISI spends less at the same quality on both workloads.
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
    # (a JSON read does not wait for its touch). bench.touch_sim: README "Touch economics".
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
    # small steps it also finds what its first read's page missed, at less spend (measured as a
    # global setting in bench.touch_sim: CISI 1.344x -> 1.298x the oracle, 0.9826 -> 0.9867 of eager,
    # but 0.992 -> 0.955 on its few-distinct-questions workload, which never reaches `auto_after`).
    # Held out as this branch (seeds 41-60, bench/results/touch-auto2-*): CISI, "disagree" in every
    # stream, 1.324x -> 1.313x the oracle and 0.9803 -> 0.9832 of eager; Cranfield unchanged (19
    # of 20 streams "agree" throughout); few-distinct-questions workloads identical.
    auto_disagree: bool = True
    auto_disagree_probe_rounds: int = 1  # the probe_rounds of a collection in "disagree"
    auto_disagree_dig_step: int = 4  # its dig step
    # Tried and left out: that probe picking, among the lexical top 100, the cold candidates a free
    # proxy (MiniLM's static token embeddings ridge-mapped onto the embedder's space) rates closest
    # to the query, at the lexical probe's spend (step 3). Its picks reach eager's page more often
    # (26% against 20%), but the probe is ~7% of CISI's spend; held out, neither bar (README "Touch
    # economics"; bench/results/touch-proxyprobe-*, code in touch-proxy-probe.patch).

    def reaches(self, touches: int) -> bool:
        """Whether `reach_best` bounds the dig of a query touched `touches` times before."""
        return self.reach_best > 0 and (not self.reach_until or touches < self.reach_until)

    def depth(self, limit: int, candidates: int) -> int:
        if self.policy == "fixed":
            return candidates  # the whole list: a repeat finds its top embedded and digs deeper
        return max(self.min_depth, math.ceil(limit * self.depth_factor))


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


class _Seen(NamedTuple):
    page: frozenset[DocKey]  # the page at the query's last touch
    probe: frozenset[DocKey]  # what that touch probed beyond the page
    probed: int  # probing touches so far
    touches: int  # touches so far


class PageMemory:
    """What each query's last touch saw and probed, per query key (a hash of tenant, ACL,
    collection and query: one caller's memory never answers another's), bounded LRU.

    A repeat is settled when its page holds the same documents as at its last touch, or when
    none of what that touch probed beyond the page (dig, similar) made it onto the page: the
    last spend did not pay, so more of the same is unlikely to."""

    def __init__(self, size: int = 10_000):
        self.size = size
        self._seen: OrderedDict[str, _Seen] = OrderedDict()
        self._lock = threading.Lock()

    def settled(self, key: str, page: Sequence[DocKey], rounds: int = 0) -> bool | None:
        """None the first time this query touches; else whether its page is settled (also
        once it has probed `rounds` times, when `rounds` > 0)."""
        with self._lock:
            seen = self._seen.get(key)
            if seen is None:
                return None
            self._seen.move_to_end(key)
        now = frozenset(page)
        return now == seen.page or (bool(seen.probe) and not (seen.probe & now)) or 0 < rounds <= seen.probed

    def touches(self, key: str) -> int:
        """How many times this query's touch was remembered."""
        with self._lock:
            seen = self._seen.get(key)
        return seen.touches if seen else 0

    def remember(self, key: str, page: Sequence[DocKey], probe: Sequence[DocKey]) -> None:
        with self._lock:
            seen = self._seen.pop(key, None)
            probed, touches = (seen.probed, seen.touches) if seen else (0, 0)
            self._seen[key] = _Seen(frozenset(page), frozenset(probe), probed + (1 if probe else 0), touches + 1)
            while len(self._seen) > self.size:
                self._seen.popitem(last=False)


_MEMORIES: weakref.WeakKeyDictionary[object, PageMemory] = weakref.WeakKeyDictionary()
_MEMORIES_LOCK = threading.Lock()


def memory_for(owner: object) -> PageMemory:
    """One page memory per planner (process-local: another replica starts without it, which
    only means one more dig there)."""
    with _MEMORIES_LOCK:
        mem = _MEMORIES.get(owner)
        if mem is None:
            mem = _MEMORIES[owner] = PageMemory()
        return mem


# The "auto" follow-up (TouchPolicy.follow_up == "auto"). A follow-up digs down the lexical list
# below a first read's top; that pays where the semantic leg lifts documents from just below it
# and little where it overrides the lexical top wholesale (a log of every dig: ~1 dug document in
# 4-5 reaches eager's page on Cranfield, 1 in 9 on CISI, which the follow-up takes from 1.32x to
# 1.40x the oracle). What a process sees of that, once a first read's touch has landed: how many
# of the lexical top 10 its fused top 10 leaves out. That count grows with how much of the
# neighbourhood below the top is embedded (what the semantic leg can lift), on both sets alike
# (+0.04 per embedded document of lexical ranks 10-60, up to 30 of them), so a read is compared
# with what that share predicts (AGREE_BASE + AGREE_SLOPE x deep): the residual separates the
# sets at every point of a stream, where the raw count drifts up as a stream embeds more.
# Fitted on the default policy's streams 1-20 of both sets (bench touch_sim, budget lifted):
# Cranfield 1.22 + 0.045 x deep, CISI 1.82 + 0.039 x deep; the line is their mean. Per stream,
# the mean residual over the first 60 first reads is -0.65..-0.12 on Cranfield and -0.01..+0.36
# on CISI (first 40: -0.72..-0.04 against -0.27..+0.27: not yet apart).
IO_STRIPES = 64  # FollowUpSwitch's I/O locks: collections whose store calls may be in flight at once
AGREE_TOP = 10  # the lexical and fused tops compared (whatever the request's page size)
AGREE_DEEP = 60  # lexical ranks AGREE_TOP..AGREE_DEEP count as the neighbourhood below the top
AGREE_DEEP_CAP = 30  # the count's growth flattens past this many embedded there
AGREE_BASE = 1.522
AGREE_SLOPE = 0.0417


def disagreement(lexical: Sequence[DocKey], fused: Sequence[DocKey], deep_ready: int) -> float:
    """How many of the lexical top AGREE_TOP the fused top AGREE_TOP leaves out, over what a read
    with `deep_ready` embedded documents below the lexical top leaves out on average."""
    shown = set(fused[:AGREE_TOP])
    left_out = sum(1 for k in lexical[:AGREE_TOP] if k not in shown)
    return left_out - (AGREE_BASE + AGREE_SLOPE * min(AGREE_DEEP_CAP, deep_ready))


class _Entry:
    """One collection's switch in memory: its running state (`reads`, `mean`), the stored row it
    stands on (`base_*`: as last loaded or written; 0 and 0.0 for none), the observations not yet
    written (`n` of them summing to `total`) and when the row was last read or written (`at`,
    the switch's monotonic clock)."""

    __slots__ = ("reads", "mean", "base_reads", "base_mean", "n", "total", "at")

    def __init__(self, reads: int = 0, mean: float = 0.0, at: float = 0.0):
        self.reads, self.mean = reads, mean
        self.base_reads, self.base_mean = reads, mean
        self.n, self.total = 0, 0.0
        self.at = at

    def rebase(self, reads: int, mean: float, window: int, at: float) -> None:
        """Stand on a stored row read now. The same row as before: nothing changes (so a process
        alone with its store keeps exactly its own running state). Another: the not-yet-written
        observations are merged onto it."""
        self.at = at
        if (reads, mean) == (self.base_reads, self.base_mean):
            return
        self.base_reads, self.base_mean = reads, mean
        self.reads, self.mean = reads + self.n, merge_mean(reads, mean, self.n, self.total, window)


class FollowUpSwitch:
    """Per (tenant, collection), the running `disagreement` of its streamed first reads, and the
    state its "auto" follow-up takes from them (`state`): "agree" after at least `after` of them
    while the running mean is below `below`, "disagree" once it is at or above (and back).
    Keyed by tenant and collection, so one tenant's reads never decide another's spend (nor
    does one collection's another's, whose lexical list may guide its semantic leg well or
    badly). The running mean weighs each read 1/min(reads, window): a plain mean for the first
    `window` reads, exponential after, so a collection whose queries change is followed.

    Durable and shared when given a `store` (the store of record's FollowUpStore: every API
    replica, and a restarted process, sees what the others learned), in memory only without one
    (a Planner built directly, as tests do). The hot path stays in memory: `state` reads the
    store only the first time it is asked about a collection and then at most every
    `refresh_seconds` (so another replica's reads reach this one within that time), never per
    decision. `observe` writes this process's observations not yet written (their count and sum)
    every `flush_every` of them and whenever one would change the collection's state (so a
    change reaches the store, and the other replicas, at once), merging them into the stored row
    in one transaction (shared.follow_up.merged); after a flush the local state is the stored
    one, so replicas converge. At most `flush_every` - 1 observations a collection are lost when
    a process dies.

    Bounded: at most `size` collections in memory, least recently observed dropped first (with a
    store its unwritten observations are written first and it is read again when next asked;
    without one it starts again from "unknown")."""

    def __init__(self, size: int = 10_000, window: int = 100, store: FollowUpStore | None = None,
                 flush_every: int = 10, refresh_seconds: float = 30.0, after: int = 50, below: float = -0.05,
                 clock: Callable[[], float] = time.monotonic):
        self.size = size
        self.window = max(1, window)
        self.store = store
        self.flush_every = max(1, flush_every)
        self.refresh_seconds = refresh_seconds
        self.after, self.below = after, below  # the thresholds of `counts` and of a flush on a change by default
        self.clock = clock
        self._seen: OrderedDict[tuple[str, str], _Entry] = OrderedDict()
        self._lock = threading.Lock()  # the map: held for moments, never across a store call
        # Held across a store call, one lock per stripe of collections (`_io`): a collection's
        # loads, refreshes and observations (with their flushes) go one at a time, so a flush
        # never races another flush or a rebase of the same entry, while another collection's
        # read does not wait behind this one's store call (a slow or hung store then delays only
        # the reads of the collections it is asked about). `state` takes it only to read a
        # collection it has not seen (or not for `refresh_seconds`).
        self._ios = [threading.Lock() for _ in range(IO_STRIPES)]
        # Entries dropped from memory with observations not yet written: flushed by the thread
        # that dropped them once it holds no stripe (`_flush_dropped`), so no thread ever waits
        # for a second stripe while it holds one.
        self._dropped: list[tuple[tuple[str, str], _Entry]] = []
        self._counts: tuple[float, tuple[int, float], dict[SwitchState, int]] | None = None

    def _io(self, key: tuple[str, str]) -> threading.Lock:
        """The I/O lock of the collection's stripe (crc32: the same stripe in every process run,
        unlike `hash` of a string)."""
        return self._ios[zlib.crc32(f"{key[0]}\0{key[1]}".encode()) % IO_STRIPES]

    # -- reading ----------------------------------------------------------------------------

    def _entry(self, key: tuple[str, str]) -> _Entry:
        """The collection's entry, read from the store when not in memory or due a refresh.
        Called with the key's `_io` held."""
        now = self.clock()
        with self._lock:
            e = self._seen.get(key)
        if self.store is None:
            if e is None:
                e = _Entry(at=now)
                self._insert(key, e)
            return e
        if e is not None and now - e.at < self.refresh_seconds:
            return e
        try:
            row = self.store.follow_up_row(*key)
        except Exception:
            # The store away: decide from memory (a collection not seen yet: "unknown") and ask
            # again after `refresh_seconds`, rather than fail the read that asked.
            log.warning("follow-up state not read", exc_info=True)
            row, known = None, False
        else:
            known = True
        reads, mean = (row.reads, row.mean) if row is not None else (0, 0.0)
        if e is None:
            e = _Entry(reads, mean, now)
            self._insert(key, e)
        elif known:
            with self._lock:
                e.rebase(reads, mean, self.window, now)
        else:
            e.at = now
        return e

    def _insert(self, key: tuple[str, str], e: _Entry) -> None:
        with self._lock:
            self._seen[key] = e
            over = []
            while len(self._seen) > self.size:
                over.append(self._seen.popitem(last=False))
            if self.store is not None:  # a dropped collection's observations are not lost with it
                self._dropped.extend(over)  # `n` is read under the stripe: one may be counted still

    def _flush_dropped(self) -> None:
        """Write the observations of entries dropped from memory (`_insert`); called holding no
        stripe. An observation that raced the drop was counted into the dropped entry under its
        stripe, which this takes too: it is written with the rest."""
        while True:
            with self._lock:
                if not self._dropped:
                    return
                key, e = self._dropped.pop()
            with self._io(key):
                if e.n:
                    self._flush(key, e)

    def state(self, tenant: str, collection: str, after: int, below: float) -> SwitchState:
        """"unknown" before `after` observed first reads (or once dropped), then "agree" while the
        running mean is below `below`, "disagree" at or above it: one threshold splits the two,
        so a collection is always in one of them once it has been read enough to tell."""
        key = (tenant, collection)
        with self._lock:
            e = self._seen.get(key)
            seen = (e.reads, e.mean, e.at) if e is not None else None
        if seen is None or (self.store is not None and self.clock() - seen[2] >= self.refresh_seconds):
            if self.store is None:
                return "unknown"
            with self._io(key):
                e = self._entry(key)
                with self._lock:
                    seen = (e.reads, e.mean, e.at)
            self._flush_dropped()
        return switch_state(seen[0], seen[1], after, below)

    def on(self, tenant: str, collection: str, after: int, below: float) -> bool:
        """Whether the collection is in "agree" (its first reads follow up at `auto_dig_step`)."""
        return self.state(tenant, collection, after, below) == "agree"

    # -- learning ---------------------------------------------------------------------------

    def observe(self, tenant: str, collection: str, value: float, after: int | None = None,
                below: float | None = None) -> None:
        """Count one first read's `disagreement`; `after` and `below` (default the switch's) tell
        when the state changes, which writes to the store at once."""
        after = self.after if after is None else after
        below = self.below if below is None else below
        key = (tenant, collection)
        try:
            self._observe(key, value, after, below)
        finally:
            self._flush_dropped()

    def _observe(self, key: tuple[str, str], value: float, after: int, below: float) -> None:
        with self._io(key):
            e = self._entry(key)
            was = switch_state(e.reads, e.mean, after, below)
            with self._lock:
                e.reads += 1
                e.mean = e.mean + (value - e.mean) / min(e.reads, self.window)
                e.n += 1
                e.total += value
                if key in self._seen:
                    self._seen.move_to_end(key)
            now = switch_state(e.reads, e.mean, after, below)
            if self.store is None:
                if now != was:
                    METRICS.follow_up_changes.labels(to=now).inc()
                return
            if now != was or e.n >= self.flush_every:
                self._flush(key, e, after, below)

    def _flush(self, key: tuple[str, str], e: _Entry, after: int | None = None, below: float | None = None) -> None:
        """Write the entry's observations not yet written; it then stands on the merged row.
        Called with the key's `_io` held. A change of the stored state is counted here, once across
        replicas: the transaction that makes it is the one that sees it."""
        assert self.store is not None
        flush = FollowUpFlush(e.base_reads, e.base_mean, e.reads, e.mean, e.n, e.total)
        try:
            before, row = self.store.merge_follow_up(key[0], key[1], flush, self.window)
        except Exception:  # the store away: the observations stay pending for the next flush
            log.warning("follow-up observations not written", exc_info=True)
            return
        with self._lock:
            e.reads, e.mean = e.base_reads, e.base_mean = row.reads, row.mean
            e.n, e.total = 0, 0.0
            e.at = self.clock()
        after = self.after if after is None else after
        below = self.below if below is None else below
        was = switch_state(before.reads, before.mean, after, below) if before is not None else "unknown"
        now = switch_state(row.reads, row.mean, after, below)
        if now != was:
            METRICS.follow_up_changes.labels(to=now).inc()

    def flush(self) -> None:
        """Write every collection's observations not yet written (at shutdown, or before a view
        that should show them)."""
        if self.store is None:
            return
        with self._lock:
            pending = [(k, e) for k, e in self._seen.items() if e.n]
        for k, e in pending:
            with self._io(k):
                if e.n:  # another thread may have written them meanwhile
                    self._flush(k, e)
        self._flush_dropped()

    # -- reporting --------------------------------------------------------------------------

    def counts(self, after: int | None = None, below: float | None = None) -> dict[SwitchState, int]:
        """Collections per state (the vibe_touch_follow_up_collections gauge): with a store, its
        rows, every tenant's and every replica's, read at most every `refresh_seconds`; without
        one, the collections this process holds."""
        after = self.after if after is None else after
        below = self.below if below is None else below
        if self.store is None:
            with self._lock:
                states = [switch_state(e.reads, e.mean, after, below) for e in self._seen.values()]
            return {s: states.count(s) for s in SWITCH_STATES}
        now = self.clock()
        cached = self._counts
        if cached is not None and cached[1] == (after, below) and now - cached[0] < self.refresh_seconds:
            return cached[2]
        counts = self.store.follow_up_counts(after, below)
        self._counts = (now, (after, below), counts)
        return counts

    def __len__(self) -> int:
        with self._lock:
            return len(self._seen)


def query_key(tenant: str, acl: Sequence[str], collection: str, text: str, limit: int) -> str:
    h = hashlib.sha256()
    for part in (tenant, collection, str(limit), *sorted(acl), "\x00", text):
        h.update(part.encode("utf-8", "surrogatepass"))
        h.update(b"\x1f")
    return h.hexdigest()


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
        # lexical candidates saved 1.5% of Cranfield's spend for 0.0035 of its quality (seeds
        # 1-6, bench/results/touch-firstreach-*.json): rejected.
        depth = min(depth, max(limit, reachable))
    # Under a tight budget a query seen for the first time (no page memory yet) embeds only its
    # page's best cold documents: most first-seen queries are never asked again (Zipf), and what
    # the bucket keeps goes to the ones that come back. Measured with bench.touch_sim (chosen on
    # Cranfield, checked on CISI; bench/results/touch-first-*.json).
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
