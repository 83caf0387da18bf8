"""The read surface's JSON: a read's answers (services/planner/answer.py) as the API sends them,
in the JSON answer and in every event of the stream."""

from __future__ import annotations

import time

from services.api.render_global import global_body, hint_body
from services.planner.answer import Answer, Diagnostics, SemanticView, Shown, Warming
from services.planner.graph import neighbour_body
from shared.model import SemanticStatus, SidecarEntry, visible_status


def answer_body(a: Answer) -> dict[str, object]:
    """An answer (the JSON answer, or a `lexical`, `semantic` or `done` event)."""
    return {"results": [result(r) for r in a.results], "strategy": a.strategy,
            "warming": warming_body(a.warming), "diagnostics": diagnostics_body(a.diagnostics)}


def result(r: Shown) -> dict[str, object]:
    out: dict[str, object] = {
        "id": r.key.doc_id,
        "collection": r.key.collection,
        "score": r.score,
        "matchedBy": list(r.matched_by),
        "explainId": r.explain_id,
    }
    if r.fields is not None:
        out["fields"] = r.fields
    if r.highlights is not None:
        out["highlights"] = r.highlights
    if r.passage is not None:
        out["passage"] = r.passage
    if r.semantic is not None:
        out["__semantic"] = semantic_view(r.semantic)
    if r.neighbors is not None:
        out["neighbors"] = [neighbour_body(n) for n in r.neighbors]
    return out


def warming_body(w: Warming) -> dict[str, object]:
    """`warming`: how many results are being indexed, and a line a person can read."""
    n = w.queued
    if n:
        msg = f"Warming up… {n} results are being indexed"
    elif w.budget_limited:
        msg = f"Embedding budget reached: {w.budget_limited} results wait for it"
    elif w.backpressure_limited:
        msg = f"Indexing is behind: {w.backpressure_limited} results wait until it catches up"
    else:
        msg = "Nothing to warm up"
    return {"queued": n, "message": msg}


def diagnostics_body(d: Diagnostics) -> dict[str, object]:
    body = _diagnostics(d)
    if d.global_read is not None:
        body.update(global_body(d.global_read))
    if d.domain_hint is not None:
        body["domainHint"] = hint_body(d.domain_hint)
    if d.rerank is not None:
        r = d.rerank
        body["rerank"] = {"status": r.status, "provider": r.provider, "sent": r.sent, "notSent": r.not_sent,
                          **({"error": r.error} if r.error else {})}
    return body


def _diagnostics(d: Diagnostics) -> dict[str, object]:
    return {
        "strategy": d.strategy,
        "strategyReason": d.strategy_reason,
        "fusion": d.fusion,
        "space": d.space,
        "model": d.model,
        "buildingSpaces": d.building_spaces,
        "lexical": {"candidates": d.lexical_candidates, "tookMs": round(d.lexical_ms, 3)},
        "semantic": {
            "state": d.semantic_state, "reason": d.semantic_reason, "hits": d.semantic_hits,
            "queued": d.queued, "pending": d.pending,
            "budgetLimited": d.budget_limited, "backpressureLimited": d.backpressure_limited,
            "resolved": d.resolved,
            "tookMs": round(d.semantic_ms, 3),
        },
        "followUp": d.follow_up,
        "elapsedMs": round(d.elapsed_ms, 3),
    }


def semantic_view(v: SemanticView) -> dict[str, object]:
    return semantic_projection(v.side, v.space)


def semantic_projection(side: SidecarEntry | None, space: str) -> dict[str, object]:
    """`__semantic`: status, lastEmbeddedAt, space; the reason when one is kept."""
    if side is None:
        return {"status": SemanticStatus.NONE.value, "lastEmbeddedAt": None, "space": space}
    out: dict[str, object] = {
        "status": visible_status(side),
        "lastEmbeddedAt": iso_ms(side.last_embedded_at),
        "space": side.space,
    }
    if side.reason:
        out["reason"] = side.reason
    return out


def iso_ms(ts: float | None) -> str | None:
    """A stamp as the read and admin surfaces show it: UTC, milliseconds."""
    if ts is None:
        return None
    return time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(ts)) + f".{int(ts % 1 * 1000):03d}Z"
