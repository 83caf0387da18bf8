"""The "auto" follow-up's switch: per tenant and collection, whether its streamed first reads
agree with their lexical top (`FollowUpSwitch`), learned from each read's `disagreement` and kept
in the store of record so every replica shares it."""

from __future__ import annotations

import logging
import threading
import time
import zlib
from collections import OrderedDict
from collections.abc import Callable, Sequence

from services.planner.touch_policy import TouchPolicy
from shared.follow_up import SWITCH_STATES, FollowUpFlush, SwitchState, merge_mean, switch_state
from shared.metrics import METRICS
from shared.model import DocKey
from shared.ports import FollowUpStore

log = logging.getLogger("vibe.touch")


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
# Fitted on the default policy's replayed streams of both sets (`python -m bench.touch_sim`, budget
# lifted): Cranfield 1.22 + 0.045 x deep, CISI 1.82 + 0.039 x deep; the line is their mean. Per stream,
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

    def __init__(self, size: int = 10_000, window: int = TouchPolicy.auto_window, store: FollowUpStore | None = None,
                 flush_every: int = 10, refresh_seconds: float = 30.0, after: int = TouchPolicy.auto_after,
                 below: float = TouchPolicy.auto_below, clock: Callable[[], float] = time.monotonic):
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
