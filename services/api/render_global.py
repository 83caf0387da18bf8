"""A global read's diagnostics as the API sends them: each collection's leg (what it searched,
what it kept, what its budget cut) and what became of a domain hint."""

from __future__ import annotations

from services.planner.fanout import GlobalPlan, LegReport
from services.planner.hints import HintReport


def _leg(r: LegReport) -> dict[str, object]:
    return {
        "lexicalCandidates": r.lexical_kept,
        "semanticHits": r.semantic_kept,
        "searched": {"lexical": r.lexical_found, "semantic": r.semantic_found},
        "cutByBudget": {"lexical": r.lexical_found - r.lexical_kept, "semantic": r.semantic_found - r.semantic_kept},
        "truncated": {"lexical": r.lexical_truncated, "semantic": r.semantic_truncated},
    }


def global_body(plan: GlobalPlan) -> dict[str, object]:
    """`diagnostics.collections` (a leg each) and `diagnostics.global` (the budgets, and the
    remainder leg of a tenant past VIBE_GLOBAL_MAX_COLLECTIONS)."""
    rest = next((r for r in plan.reports if r.collection is None), None)
    return {
        "collections": [{"collection": r.collection, **_leg(r)} for r in plan.reports if r.collection is not None],
        "global": {
            "legs": plan.legs, "perCollection": plan.share, "fetchPerCollection": plan.fetch,
            "candidates": plan.k,
            "remainder": None if rest is None else {
                "afterCollections": len(plan.collections),
                "collections": None if plan.rest is None else len(plan.rest), **_leg(rest)},
        },
    }


def hint_body(h: HintReport) -> dict[str, object]:
    out: dict[str, object] = {"hint": h.hint, "used": h.used}
    if h.space is not None:
        out["space"] = h.space
    if h.reason is not None:
        out["reason"] = h.reason
    return out
