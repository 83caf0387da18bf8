"""Promotion and demotion policy: pure decisions from usage figures, so they can be
tested with any clock and explained with the figures that made them.

- A collection is promoted to eager-on-write when, within the window, it saw at least
  `min_queries` queries OR at least `min_hits` lexical hits on the first pages: either is
  evidence that readers wait on lazy embedding (many queries, or few queries that each find
  many cold documents). A threshold of 0 switches that leg off (a count of at least 0 would
  promote every collection that saw any use). The reason names the leg(s) that fired.
- An automatically promoted collection is demoted after `demote_idle` seconds without a query.
- Manual decisions (an operator's promote or demote) stand until an operator changes them.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from shared.model import CollectionMode, CollectionUsage


@dataclass(frozen=True)
class PromotionPolicy:
    min_queries: int = 20
    min_hits: int = 50
    window_seconds: float = 7200.0
    demote_idle_seconds: float = 7 * 86400.0


def decide_collections(
    policy: PromotionPolicy,
    usage: Iterable[CollectionUsage],
    modes: Iterable[CollectionMode],
    now: float,
) -> list[CollectionMode]:
    """The mode changes to make now (each with its reason and figures)."""
    by_key = {(m.tenant, m.collection): m for m in modes}
    seen: set[tuple[str, str]] = set()
    out: list[CollectionMode] = []
    for u in usage:
        key = (u.tenant, u.collection)
        seen.add(key)
        mode = by_key.get(key)
        if mode is not None and mode.manual:
            continue
        figures: dict[str, Any] = {"queries": u.queries, "hits": u.hits, "windowSeconds": policy.window_seconds,
                   "minQueries": policy.min_queries, "minHits": policy.min_hits}
        if mode is None or mode.mode == "lazy":
            fired = _fired(policy, u)
            if fired:
                figures["fired"] = fired
                out.append(CollectionMode(u.tenant, u.collection, "eager", now, _reason(policy, u, fired), False,
                                          figures))
            continue
        demoted = _idle_demotion(policy, mode, u.last_query_at, now)
        if demoted is not None:
            out.append(demoted)
    for key, mode in by_key.items():  # eager collections whose statistics aged out entirely
        if key not in seen and mode.mode == "eager" and not mode.manual:
            demoted = _idle_demotion(policy, mode, None, now)
            if demoted is not None:
                out.append(demoted)
    return out


def _fired(policy: PromotionPolicy, u: CollectionUsage) -> list[str]:
    """Which promotion legs the window's figures meet: "queries", "hits", both or none."""
    legs = (("queries", u.queries, policy.min_queries), ("hits", u.hits, policy.min_hits))
    return [name for name, seen, least in legs if least > 0 and seen >= least]


def _reason(policy: PromotionPolicy, u: CollectionUsage, fired: list[str]) -> str:
    seen = {"queries": u.queries, "hits": u.hits}
    least = {"queries": policy.min_queries, "hits": policy.min_hits}
    parts = " and ".join(f"{seen[leg]} {leg} (at least {least[leg]})" for leg in fired)
    return f"auto: {parts} in {policy.window_seconds:g} s"


def _idle_demotion(policy: PromotionPolicy, mode: CollectionMode, last_query: float | None,
                   now: float) -> CollectionMode | None:
    last = max(last_query or 0.0, mode.since)
    idle = now - last
    if idle < policy.demote_idle_seconds:
        return None
    reason = f"auto: no query for {idle:.0f} s (demote after {policy.demote_idle_seconds:g} s)"
    figures = {"idleSeconds": round(idle, 3), "lastQueryAt": last_query,
               "demoteIdleSeconds": policy.demote_idle_seconds}
    return CollectionMode(mode.tenant, mode.collection, "lazy", now, reason, False, figures)
