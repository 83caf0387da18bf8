"""The read surface's JSON (services/api/render.py): a read's domain answer rendered as the API
sends it, key for key and in order (the OpenAPI snapshot declares these shapes)."""

from __future__ import annotations

from services.api.render import answer_body, iso_ms, warming_body
from services.planner.answer import Answer, Diagnostics, SemanticView, Shown, Warming
from shared.model import DocKey, SemanticStatus, SidecarEntry


def _diagnostics() -> Diagnostics:
    return Diagnostics(strategy="hybrid", strategy_reason="natural_language", fusion="zscore", space="default",
                       model="m", building_spaces=[], lexical_candidates=3, lexical_ms=1.23456,
                       semantic_state="ready", semantic_reason=None, semantic_hits=2, queued=1, pending=1,
                       budget_limited=0, backpressure_limited=0, resolved={"ready": 1}, semantic_ms=2.0004,
                       follow_up=None, elapsed_ms=5.55555)


def test_a_result_carries_only_what_was_asked_for_in_a_fixed_order() -> None:
    key = DocKey("t", "notes", "a")
    plain = Shown(key, 0.5, ("keyword",), "e1")
    side = SidecarEntry(key, "default", SemanticStatus.READY, "h", last_embedded_at=0.25)
    full = Shown(key, 1.0, ("keyword", "semantic"), "e2", fields={"title": "x"}, highlights=["<b>x</b>"],
                 passage={"field": "body"}, semantic=SemanticView(side, "default"))
    body = answer_body(Answer([plain, full], "hybrid", Warming(1, 0, 0), _diagnostics()))
    results = body["results"]
    assert isinstance(results, list)
    assert results[0] == {"id": "a", "collection": "notes", "score": 0.5, "matchedBy": ["keyword"], "explainId": "e1"}
    assert list(results[1]) == ["id", "collection", "score", "matchedBy", "explainId", "fields", "highlights",
                                "passage", "__semantic"]
    assert results[1]["__semantic"] == {"status": "ready", "lastEmbeddedAt": "1970-01-01T00:00:00.250Z",
                                        "space": "default"}
    assert list(body) == ["results", "strategy", "warming", "diagnostics"]
    diagnostics = body["diagnostics"]
    assert isinstance(diagnostics, dict)
    assert diagnostics["lexical"] == {"candidates": 3, "tookMs": 1.235}
    assert diagnostics["elapsedMs"] == 5.556


def test_warming_says_why_nothing_warms() -> None:
    assert warming_body(Warming(2, 0, 0)) == {"queued": 2, "message": "Warming up… 2 results are being indexed"}
    assert warming_body(Warming(0, 3, 0))["message"] == "Embedding budget reached: 3 results wait for it"
    assert warming_body(Warming(0, 0, 4))["message"] == "Indexing is behind: 4 results wait until it catches up"
    assert warming_body(Warming(0, 0, 0)) == {"queued": 0, "message": "Nothing to warm up"}


def test_stamps_are_utc_milliseconds() -> None:
    assert iso_ms(None) is None
    assert iso_ms(86400.5) == "1970-01-02T00:00:00.500Z"
