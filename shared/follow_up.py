"""The "auto" follow-up switch's durable row (services/planner/touch_switch.py `FollowUpSwitch`) and the
arithmetic that merges one process's observations into it, shared by the switch and the stores
(shared/adapters/touch_switch_sql.py) so both apply the same rule.

A row per (tenant, collection): how many streamed first reads were observed (`reads`) and their
running `disagreement` (`mean`), weighing each read 1/min(reads, window): a plain mean for the
first `window` reads, an exponential one (weight 1/window) after.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

SwitchState = Literal["unknown", "agree", "disagree"]
SWITCH_STATES: tuple[SwitchState, ...] = ("unknown", "agree", "disagree")


@dataclass(frozen=True)
class FollowUpRow:
    tenant: str
    collection: str
    reads: int
    mean: float
    updated_at: float


@dataclass(frozen=True)
class FollowUpFlush:
    """What one process has to add since its last load or flush: `n` observations summing to
    `total`, taken on the stored row as it last saw it (`base_reads`, `base_mean`; 0 and 0.0 for
    no row), which made its own running state `reads`, `mean`."""

    base_reads: int
    base_mean: float
    reads: int
    mean: float
    n: int
    total: float


def switch_state(reads: int, mean: float, after: int, below: float) -> SwitchState:
    """"unknown" before `after` reads, then "agree" while the running mean is below `below`,
    "disagree" at or above it."""
    if reads < after:
        return "unknown"
    return "agree" if mean < below else "disagree"


def merge_mean(reads: int, mean: float, n: int, total: float, window: int) -> float:
    """The running mean of a row of `reads` reads at `mean` once `n` more reads summing to `total`
    are added, as the 1/min(reads, window) rule would have it.

    The rule updates one read at a time, and a merge knows only the batch's count and sum, not the
    order of its values: the batch's reads are taken as all equal to their mean. While the row is
    still within the window (plain mean) that is exact: the plain mean of reads + n values does not
    depend on their order. Past the window each read of the batch weighs (1 - 1/window)^k for its
    distance k from the batch's end, so the merge is exact when the batch's values are equal and
    otherwise off by the spread of the batch's values times the spread of those weights, which is
    small while n is small against the window (a flush every few reads, window 100). The first
    reads of a batch that crosses the window are merged into the plain mean, the rest
    exponentially."""
    if n <= 0:
        return mean
    w = max(1, window)
    batch = total / n
    plain = max(0, min(n, w - reads))  # reads of the batch that still fall within the window
    if plain:
        mean = (reads * mean + plain * batch) / (reads + plain)
    rest = n - plain
    if rest:
        keep = (1.0 - 1.0 / w) ** rest
        mean = batch + (mean - batch) * keep
    return mean


def merged(stored: tuple[int, float] | None, flush: FollowUpFlush, window: int) -> tuple[int, float]:
    """The row after a flush. Where the stored row is still the one the flushing process started
    from (nobody else wrote since), its own running state is the exact answer: it applied the rule
    read by read, which the batch merge only approximates, so a single process keeps exactly what
    it would have computed without a store (bench.touch_sim's streams are bit-identical). Otherwise
    another replica's reads came in between: the batch is merged onto the row as it now is."""
    reads, mean = stored if stored is not None else (0, 0.0)
    if (reads, mean) == (flush.base_reads, flush.base_mean):
        return flush.reads, flush.mean
    return reads + flush.n, merge_mean(reads, mean, flush.n, flush.total, window)
