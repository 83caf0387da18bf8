"""`auto` by collection state, over HTTP: a short query over a collection almost nothing of which
is embedded is answered by keyword, a natural-language query over an eagerly embedded collection
is hybrid, and `diagnostics.strategyReason` says which figure decided (services/planner/auto_state.py)."""

from __future__ import annotations

from pathlib import Path

from harness.server import served

DOCS = [{"_id": f"d{i}", "body": f"gearbox oil change interval number {i} for the turbine"} for i in range(8)]


def _diag(answer: dict[str, object]) -> dict[str, object]:
    d = answer["diagnostics"]
    assert isinstance(d, dict)
    return d


def test_auto_answers_a_short_query_by_keyword_while_the_collection_is_cold(tmp_path: Path) -> None:
    with served(tmp_path / "data") as s:
        assert s.bulk("k-alice", "fresh", DOCS).status_code == 200
        cov = s.call("GET", "/semantic/coverage?collection=fresh", "k-admin-a").json()
        assert cov["total"] == len(DOCS) and cov["ready"] == 0  # nothing embedded yet (lazy)
        short = s.read("k-alice", collection="fresh", q="gearbox oil").json()
        assert short["strategy"] == "keyword", short["diagnostics"]
        reason = str(_diag(short)["strategyReason"])
        assert reason == "low_coverage: 0.00 of the collection embedded < 0.05, short query (2 words)"
        assert [r["matchedBy"] for r in short["results"]] == [["keyword"]] * len(DOCS)
        # the same state, a longer question: as the query's shape says (hybrid, its vectors warm)
        # (the figure is reused for VIBE_AUTO_COVERAGE_TTL_SECONDS; past it the touch's embeddings may count)
        long = s.read("k-alice", collection="fresh", q="how often should the gearbox oil be changed").json()
        why = str(_diag(long)["strategyReason"])
        assert long["strategy"] == "hybrid" and (why == "natural_language" or why.startswith("high_coverage")), why
        # shape still comes first, and an explicit strategy is never second-guessed
        quoted = s.read("k-alice", collection="fresh", q='"gearbox oil"').json()
        assert _diag(quoted)["strategyReason"] == "quoted_phrase"
        asked = s.read("k-alice", collection="fresh", q="gearbox", semantic={"strategy": "hybrid"}).json()
        assert asked["strategy"] == "hybrid" and _diag(asked)["strategyReason"] == "requested"


def test_auto_is_hybrid_by_state_over_an_embedded_collection(tmp_path: Path) -> None:
    with served(tmp_path / "data") as s:
        on = s.call("PUT", "/v1/collections/warm/settings", "k-admin-a", {"eager": True})
        assert on.status_code == 200 and on.json()["eager"] is True, on.text
        assert s.bulk("k-alice", "warm", DOCS).status_code == 200
        for d in DOCS:
            assert s.wait_status("k-alice", "warm", d["_id"], "ready") == "ready"
        out = s.read("k-alice", collection="warm", q="gearbox oil").json()
        assert out["strategy"] == "hybrid", out["diagnostics"]
        assert _diag(out)["strategyReason"] == "high_coverage: 1.00 of the collection embedded >= 0.5"
        assert any("semantic" in r["matchedBy"] for r in out["results"])
        # a read of `any` uses the tenant's figure (all of its documents are embedded here)
        anywhere = s.read("k-alice", collection="any", q="gearbox oil").json()
        assert _diag(anywhere)["strategyReason"] == "high_coverage: 1.00 of the tenant's documents embedded >= 0.5"
