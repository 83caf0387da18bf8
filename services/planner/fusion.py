"""Fusion of the lexical and semantic legs.

Two methods, chosen by `Settings.fusion`:
- `zscore` (default): each leg's scores standardised (z-scores over its top `depth`), then a
  weighted sum with the semantic leg at `semantic_weight`. Scores carry how far ahead a hit
  is, which ranks alone throw away. The weight is chosen leave-one-collection-out
  (`python -m bench fusion_loo`): the weight whose smallest lead over keyword, semantic and
  RRF k=60 across the collections is largest; the weight the other collections pick beats all
  three on each held-out collection too.
- `rrf`: Reciprocal Rank Fusion, k=60, ranks from 1 (as Rifflux-compatible clients rank), kept for clients that want it.
- `minmax_weighted`: the fusion `extract_key_info` clients expect (0.65 semantic + 0.35 lexical on
  min-max normalised scores, ties by recency); only that MCP tool uses it.
A document missing from a leg gets that leg's lowest standardised score: below every hit
the leg did return. Except a lexical candidate that has no vector yet (`unembedded`: lazy
embedding has not reached it): its semantic score is unknown, not low, so it stands in with
its lexical one (z-score: its lexical z; RRF: its lexical rank). Scoring it at the semantic
floor would rank a strong keyword match below every weak document that happens to be
embedded, and the fused answer would be worse than the keyword one while little is embedded.

"The legs agree" is too hopeful once some of the query's candidates are embedded: the two legs
correlate only loosely (~0.5), so a keyword match with no vector usually has a semantic z well
below its lexical z, and standing in with the lexical z keeps keyword false positives on the
page that eager fusion drops. With at least `MIN_PAIRS` embedded candidates among the query's
lexical top `depth`, z-score fusion stands an unembedded candidate in with the query's own
least-squares line from lexical z to semantic z over them (slope clamped to [0, 1]; never more
than its lexical z, never below the floor). With the first pages embedded, the line brings the
lazy answer closer to eager's than "agree" does, and spends a little less embedding; under a
tight per-minute budget it helps some collections and costs others (`python -m bench touch_sim`;
README "Touch economics"). Eager fusion has no unembedded candidate: it is unchanged. The
semantic leg's statistics are taken over the embedded documents, not eager's: on the streams
eager's own rank the same embedded set worse.
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Mapping, Sequence
from collections.abc import Set as AbstractSet
from dataclasses import dataclass, field
from typing import NamedTuple

from shared.model import DocKey, Hit, hit

# The semantic leg's weight in z-score fusion, chosen leave-one-collection-out (see above;
# VIBE_SEMANTIC_WEIGHT overrides it; tests/unit/test_fusion.py keeps the two equal).
DEFAULT_SEMANTIC_WEIGHT = 0.55


def relative(hits: Sequence[Hit]) -> list[Hit]:
    """BM25 scores as shown to callers: divided by the best score of the caller's own list.

    Raw BM25 carries each term's IDF, and IDF counts every document of the tenant, also those
    the caller may not read: a raw score would tell how many unreadable documents contain a
    word. Divided by the top score, a one-term query's scores depend only
    on the readable documents' own text (the IDF cancels); with several terms, the ratios keep
    the terms' relative IDF, a residual the README's Security section states. Z-score fusion is
    unchanged (it is scale-free) and RRF uses ranks."""
    scores = relative_scores([h.score for h in hits])
    return [hit(h.key, s) for h, s in zip(hits, scores, strict=True)]


def relative_scores(scores: Sequence[float]) -> list[float]:
    """`relative` on the scores alone (a first page's candidates whose keys are not read yet)."""
    top = max(scores, default=0.0)
    if top <= 0:
        return list(scores)
    # rounded: float32 noise in the engine's score must not carry the statistics either
    return [round(s / top, 6) for s in scores]


@dataclass(slots=True)
class Fused:
    key: DocKey
    score: float
    lexical_rank: int | None = None
    lexical_score: float | None = None
    semantic_rank: int | None = None
    semantic_score: float | None = None
    matched_by: list[str] = field(default_factory=list)
    # What each leg put into `score` (explain): its normalised score (z-score, or 1/(k + rank)
    # for RRF) before the weight, and its share after it; the shares sum to `score`. A missing
    # leg's share is its floor; `stand_in`: the semantic share is an estimate for a candidate
    # with no vector yet.
    lexical_norm: float | None = None
    semantic_norm: float | None = None
    lexical_part: float = 0.0
    semantic_part: float = 0.0
    stand_in: bool = False


def rrf(lexical: Sequence[Hit], semantic: Sequence[Hit], k: int = 60,
        unembedded: AbstractSet[DocKey] = frozenset()) -> list[Fused]:
    """Sum of 1/(k + rank) over the lists a document appears in; ties broken by key so the
    order is deterministic. One pass per list: this runs on every answer, with ~500
    lexical candidates, so it avoids hashing each key more than once or twice."""
    out: dict[DocKey, Fused] = {}
    for rank, h in enumerate(lexical, 1):
        part = 1.0 / (k + rank)
        lex = out[h.key] = Fused(h.key, part, rank, h.score, matched_by=["keyword"], lexical_norm=part,
                                 lexical_part=part)
        if h.key in unembedded:  # its lexical rank stands in for the semantic one
            lex.score, lex.semantic_norm, lex.semantic_part, lex.stand_in = 2 * part, part, part, True
    for rank, h in enumerate(semantic, 1):
        f = out.get(h.key)
        if f is None:
            f = out[h.key] = Fused(h.key, 0.0)
        part = 1.0 / (k + rank)
        f.semantic_rank, f.semantic_score = rank, h.score
        f.semantic_norm, f.semantic_part = part, part
        f.score += part
        f.matched_by.append("semantic")
    fused = list(out.values())
    fused.sort(key=lambda f: (-f.score, f.key.collection, f.key.doc_id))
    return fused


def single(hits: Sequence[Hit], leg: str) -> list[Fused]:
    """One leg's ranking in the fused shape, scores kept as the engine gave them."""
    out = []
    for i, h in enumerate(hits):
        f = Fused(h.key, h.score, matched_by=["keyword" if leg == "lexical" else "semantic"])
        if leg == "lexical":
            f.lexical_rank, f.lexical_score, f.lexical_norm, f.lexical_part = i + 1, h.score, h.score, h.score
        else:
            f.semantic_rank, f.semantic_score, f.semantic_norm, f.semantic_part = i + 1, h.score, h.score, h.score
        out.append(f)
    return out


def mean_spread(xs: Sequence[float]) -> tuple[float, float]:
    """Mean and population standard deviation of `xs` (spread 1 when they are all equal or there
    are none) in plain floats: `statistics.pstdev` computes exactly with fractions, a quarter of
    a fusion's time on every answer, for digits no ranking uses."""
    n = len(xs)
    if not n:
        return 0.0, 1.0
    m = math.fsum(xs) / n
    return m, math.sqrt(math.fsum((x - m) * (x - m) for x in xs) / n) or 1.0


def _standardised(hits: Sequence[Hit], depth: int) -> tuple[float, float]:
    """Mean and spread of a leg's top scores (spread 1 when they are all equal)."""
    return mean_spread([h.score for h in hits[:depth]])


class LegStats(NamedTuple):
    mean: float
    spread: float
    lowest: float  # the floor a document missing from the leg is given (as a z: below every hit)


def leg_stats(scores: Sequence[float], depth: int = 200) -> LegStats:
    """What z-score fusion takes from a leg's scores: mean and spread of its top `depth`, and
    its lowest score (the mean when it has none)."""
    mean, spread = mean_spread(scores[:depth])
    return LegStats(mean, spread, min(scores, default=mean))


MIN_PAIRS = 5  # embedded lexical candidates needed before fusion trusts the query's own line


class Line(NamedTuple):
    """A query's line from lexical to semantic z over its embedded lexical candidates."""

    a: float
    b: float
    spread: float  # standard deviation of the semantic z around the line
    pairs: int  # how many candidates drew it (0: none; the legs are assumed to agree)


AGREE = Line(0.0, 1.0, 0.0, 0)


def stand_in_line(lexical: Sequence[Hit], fused: Mapping[DocKey, Fused], unembedded: AbstractSet[DocKey],
                  lex_stats: tuple[float, float], sem_stats: tuple[float, float], sem_floor: float,
                  depth: int) -> Line:
    """The least-squares line semantic z = a + b * lexical z over the query's lexical top
    `depth` that have a vector (one missing from the semantic hits is at the floor), slope
    clamped to [0, 1]; AGREE, "the legs agree", with fewer than MIN_PAIRS of them or no
    unembedded candidate to stand in for."""
    if not unembedded:
        return AGREE
    (lm, ls), (sm, ss) = lex_stats, sem_stats
    xs: list[float] = []
    ys: list[float] = []
    for h in lexical[:depth]:
        if h.key in unembedded:
            continue
        s = fused[h.key].semantic_score
        xs.append((h.score - lm) / ls)
        ys.append((s - sm) / ss if s is not None else sem_floor)
    if len(xs) < MIN_PAIRS:
        return AGREE
    mx, my = statistics.fmean(xs), statistics.fmean(ys)
    vx = statistics.fmean([(x - mx) ** 2 for x in xs])
    b = statistics.fmean([(x - mx) * (y - my) for x, y in zip(xs, ys, strict=True)]) / vx if vx > 0 else 1.0
    b = min(1.0, max(0.0, b))
    a = my - b * mx
    spread = math.sqrt(statistics.fmean([(y - a - b * x) ** 2 for x, y in zip(xs, ys, strict=True)]))
    return Line(a, b, spread, len(xs))


def zscore(lexical: Sequence[Hit], semantic: Sequence[Hit], semantic_weight: float = DEFAULT_SEMANTIC_WEIGHT,
           depth: int = 200, unembedded: AbstractSet[DocKey] = frozenset(), stand_in: str = "line",
           lexical_stats: LegStats | None = None) -> list[Fused]:
    """Weighted sum of standardised scores; ties broken by key for a deterministic order.
    `stand_in`: "line" (stand_in_line) or "agree" (an unembedded candidate's lexical z).
    `lexical_stats`: the whole lexical leg's (`leg_stats`) when `lexical` is only its first
    hits (a first page), so that their fused scores are the ones the whole leg gives them."""
    lm, ls, lowest = lexical_stats or leg_stats([h.score for h in lexical], depth)
    sm, ss = _standardised(semantic, depth)
    lex_floor = (lowest - lm) / ls
    sem_floor = (min((h.score for h in semantic), default=sm) - sm) / ss
    out: dict[DocKey, Fused] = {}
    for rank, h in enumerate(lexical, 1):
        out[h.key] = Fused(h.key, 0.0, rank, h.score, None, None, ["keyword"])
    for rank, h in enumerate(semantic, 1):
        f = out.get(h.key)
        if f is None:
            f = out[h.key] = Fused(h.key, 0.0, None, None, rank, h.score, ["semantic"])
        else:
            f.semantic_rank, f.semantic_score = rank, h.score
            f.matched_by.append("semantic")
    w = semantic_weight
    a, b, _, _ = (stand_in_line(lexical, out, unembedded, (lm, ls), (sm, ss), sem_floor, depth)
                  if stand_in == "line" else AGREE)
    for f in out.values():
        lz = (f.lexical_score - lm) / ls if f.lexical_score is not None else lex_floor
        # No vector yet: the query's own line from lexical to semantic z (the legs agree while
        # too few candidates are embedded to draw it), never above its lexical z, and never
        # below a document known to miss the semantic hits (the floor).
        unknown = max(min(lz, a + b * lz), sem_floor) if f.key in unembedded else sem_floor
        sz = (f.semantic_score - sm) / ss if f.semantic_score is not None else unknown
        f.lexical_norm, f.semantic_norm = lz, sz
        f.lexical_part, f.semantic_part = (1 - w) * lz, w * sz
        f.stand_in = f.semantic_score is None and f.key in unembedded
        f.score = f.lexical_part + f.semantic_part
    fused = list(out.values())
    fused.sort(key=lambda f: (-f.score, f.key.collection, f.key.doc_id))
    return fused


EXTRACT_SEMANTIC_WEIGHT, EXTRACT_LEXICAL_WEIGHT = 0.65, 0.35


def _minmax(hits: Sequence[Hit]) -> dict[DocKey, float]:
    if not hits:
        return {}
    lo, hi = min(h.score for h in hits), max(h.score for h in hits)
    return {h.key: 1.0 if hi == lo else (h.score - lo) / (hi - lo) for h in hits}


def minmax_weighted(lexical: Sequence[Hit], semantic: Sequence[Hit], recency: Mapping[DocKey, float]) -> list[Fused]:
    """Each leg's scores min-max normalised, 0.65 semantic + 0.35 lexical; ties go to the more
    recently updated document, then by id, so equal scores order the same on every call."""
    ln, sn = _minmax(lexical), _minmax(semantic)
    keys = list(dict.fromkeys([h.key for h in lexical] + [h.key for h in semantic]))
    out = [Fused(k, EXTRACT_SEMANTIC_WEIGHT * sn.get(k, 0.0) + EXTRACT_LEXICAL_WEIGHT * ln.get(k, 0.0))
           for k in keys]
    out.sort(key=lambda f: (-f.score, -recency.get(f.key, 0.0), f.key.doc_id))
    return out
