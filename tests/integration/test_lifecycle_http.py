"""The lifecycle through the served app: eviction to the cold store and rehydration
without a provider call (an OpenAI-protocol server counts the calls), revocation across an
eviction, manual and automatic promotion with its backfill, and daily token caps."""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from harness.openai_server import OpenAIProtocolServer
from harness.server import Served, served
from shared.costs import estimate_tokens
from tests.integration.distributed.conftest import wait_for

BODY = " on wing flutter, gust loads and the certification of composite structures in transonic flight"
DOCS = [{"_id": f"d{i}", "title": f"Flutter report {i}", "body": f"case {i}" + BODY} for i in range(6)]


def metric(app: Served, name: str) -> float:
    for line in app.call("GET", "/metrics", None).text.splitlines():
        if line.startswith(name + " ") or line.startswith(name + "{"):
            return float(line.rsplit(" ", 1)[1])
    return 0.0


@pytest.fixture(scope="module")
def api() -> Iterator[OpenAIProtocolServer]:
    with OpenAIProtocolServer(dim=32) as s:
        yield s


@pytest.fixture(scope="module")
def app(api: OpenAIProtocolServer, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Served]:
    env = {"VIBE_EMBEDDER": "openai", "VIBE_OPENAI_BASE_URL": api.base_url, "VIBE_EMBED_MODEL": "test-embed",
           "VIBE_SCHEDULER_INTERVAL_SECONDS": "0.5", "VIBE_USAGE_FLUSH_SECONDS": "0.2",
           "VIBE_BACKFILL_INTERVAL_SECONDS": "0.2", "VIBE_PROMOTE_MIN_QUERIES": "3", "VIBE_PROMOTE_MIN_HITS": "0",
           "VIBE_PER_TENANT_PER_MIN": "100000"}
    with served(Path(tmp_path_factory.mktemp("life")) / "data", env=env) as s:
        yield s


def _ready(app: Served, collection: str, docs: list[dict[str, object]]) -> None:
    assert app.bulk("k-admin-a", collection, docs).status_code == 200
    app.read("k-admin-a", collection=collection, q="flutter report", semantic={"strategy": "keyword"}, limit=20)
    for d in docs:
        assert app.wait_status("k-admin-a", collection, str(d["_id"]), "ready", timeout=30) == "ready"


def test_evicted_vectors_come_back_from_the_cold_store_without_a_provider_call(
        app: Served, api: OpenAIProtocolServer) -> None:
    _ready(app, "ev", DOCS)
    r = app.call("POST", "/semantic/evict", "k-admin-a", {"collection": "ev", "idleSeconds": 0})
    assert r.status_code == 200 and r.json()["evicted"] == len(DOCS)
    assert app.status("k-admin-a", "ev", "d1") == "cold"
    cov = app.call("GET", "/semantic/coverage?collection=ev", "k-admin-a").json()
    assert cov["states"]["cold"] == len(DOCS) and cov["ready"] == 0 and cov["eager"] is False
    assert cov["storage"]["cold"] >= 1 and cov["storage"]["coldBytes"] > 0
    calls, rehydrated = api.requests, metric(app, "vibe_rehydrations_total")
    # evicted vectors are out of the ANN index: a semantic read finds nothing at first (and touches them)
    out = app.read("k-admin-a", collection="ev", q="flutter", semantic={"strategy": "semantic"}, limit=20).json()
    assert out["results"] == []
    calls += 1  # that read's query embedding

    for d in DOCS:
        assert app.wait_status("k-admin-a", "ev", str(d["_id"]), "ready", timeout=30) == "ready"
    assert api.requests == calls  # rehydration made no provider call
    assert metric(app, "vibe_rehydrations_total") - rehydrated == len(DOCS)
    hits = app.read("k-admin-a", collection="ev", q="flutter", semantic={"strategy": "semantic"}).json()["results"]
    assert {h["id"] for h in hits} == {d["_id"] for d in DOCS}


def test_a_revoked_reader_never_sees_a_document_through_an_eviction(app: Served) -> None:
    doc = {"_id": "secret", "title": "Flutter secret", "body": "secret" + BODY, "_acl": ["user:bob", "user:admin"]}
    _ready(app, "rv", [doc])
    evicted = app.call("POST", "/semantic/evict", "k-admin-a", {"collection": "rv", "idleSeconds": 0}).json()
    assert evicted["evicted"] == 1
    assert app.put("k-admin-a", "rv", "secret", {**doc, "_acl": ["user:admin"]}).status_code == 200  # bob revoked
    app.read("k-admin-a", collection="rv", q="flutter secret", semantic={"strategy": "keyword"})
    assert app.wait_status("k-admin-a", "rv", "secret", "ready", timeout=30) == "ready"  # rehydrated
    for strategy in ("keyword", "semantic", "hybrid"):
        out = app.read("k-bob", collection="rv", q="flutter secret", semantic={"strategy": strategy}).json()
        assert out["results"] == [], strategy
    assert app.call("DELETE", "/v1/collections/rv/docs/secret", "k-admin-a").status_code in (200, 204)
    out = app.read("k-admin-a", collection="rv", q="flutter secret", semantic={"strategy": "semantic"}).json()
    assert out["results"] == []


def test_manual_promotion_and_demotion_are_shown_with_their_reason(app: Served) -> None:
    r = app.call("POST", "/semantic/promote", "k-admin-a", {"collection": "man"})
    assert r.status_code == 200 and r.json()["mode"] == "eager" and r.json()["task"]["kind"] == "promote"
    app.put("k-admin-a", "man", "m1", {"title": "Eager", "body": "written after promotion" + BODY})
    assert app.wait_status("k-admin-a", "man", "m1", "ready", timeout=30) == "ready"
    modes = {m["collection"]: m for m in app.call("GET", "/semantic/promotions", "k-admin-a").json()["collections"]}
    assert modes["man"]["state"] == "eager" and modes["man"]["reason"] == "manual" and modes["man"]["manual"]
    assert app.call("GET", "/semantic/promotions", "k-admin-b").json()["collections"] == []  # per tenant
    assert app.call("DELETE", "/semantic/promote?collection=man", "k-admin-a").json()["mode"] == "lazy"
    app.put("k-admin-a", "man", "m2", {"title": "Lazy again", "body": "written after demotion" + BODY})
    time.sleep(0.5)
    assert app.status("k-admin-a", "man", "m2") == "none"
    assert app.call("GET", "/semantic/promotions", "k-bob").status_code == 403
    assert app.call("GET", "/semantic/scheduler", "k-bob").status_code == 403  # admin scope only


def test_a_busy_collection_is_promoted_by_the_scheduler_and_backfilled(app: Served) -> None:
    docs = [{"_id": f"h{i}", "title": f"Hot topic {i}", "body": f"hot {i}" + BODY} for i in range(40)]
    assert app.bulk("k-admin-a", "hot", docs).status_code == 200
    for q in ("hot topic", "flutter hot", "gust loads hot"):
        app.read("k-admin-a", collection="hot", q=q, semantic={"strategy": "keyword"}, limit=5)

    def promoted() -> bool:
        modes = app.call("GET", "/semantic/promotions", "k-admin-a").json()["collections"]
        return any(m["collection"] == "hot" and m["state"] == "eager" for m in modes)

    wait_for(promoted, 30, "the scheduler to promote `hot`")
    mode = next(m for m in app.call("GET", "/semantic/promotions", "k-admin-a").json()["collections"]
                if m["collection"] == "hot")
    assert mode["reason"].startswith("auto: ") and mode["figures"]["queries"] >= 3 and not mode["manual"]
    wait_for(lambda: app.call("GET", "/semantic/coverage?collection=hot", "k-admin-a").json()["ready"] == 40, 60,
             "the promotion backfill to embed every document")
    assert metric(app, 'vibe_promotions_total{action="promote"}') >= 1


def test_reindex_reports_its_backfill_and_force_re_embeds(app: Served, api: OpenAIProtocolServer) -> None:
    _ready(app, "rx", DOCS[:3])
    calls = api.inputs
    r = app.call("POST", "/semantic/reindex", "k-admin-a", {"collection": "rx", "force": True})
    assert r.status_code == 202 and r.json()["queued"] == 3 and r.json()["task"]["kind"] == "reindex"
    wait_for(lambda: api.inputs - calls >= 3, 90, "a forced re-embed of three documents")  # 2 loaded cores
    assert app.call("POST", "/semantic/reindex", "k-admin-a", {"collection": "rx", "force": "yes"}).status_code == 400
    tasks = app.call("GET", "/semantic/backfills", "k-admin-a").json()["backfills"]
    assert any(t["kind"] == "reindex" and t["collection"] == "rx" for t in tasks)


def test_a_daily_token_cap_refuses_with_budget_and_reads_still_answer(
        api: OpenAIProtocolServer, tmp_path: Path) -> None:
    env = {"VIBE_EMBEDDER": "openai", "VIBE_OPENAI_BASE_URL": api.base_url, "VIBE_EMBED_MODEL": "test-embed",
           "VIBE_TENANT_DAILY_TOKENS": "60"}
    with served(tmp_path / "data", env=env) as capped:
        assert capped.bulk("k-admin-a", "cap", DOCS).status_code == 200  # ~30 tokens each: two fit
        events = capped.stream("k-admin-a", collection="cap", q="flutter report", semantic={"strategy": "hybrid"},
                               limit=10)
        done = events[-1]
        assert done[0] == "done" and done[1]["results"]  # the read answered
        cov = capped.call("GET", "/semantic/coverage?collection=cap", "k-admin-a").json()
        assert cov["skipped"].get("budget", 0) >= 1 and cov["ready"] >= 1
        assert done[1]["diagnostics"]["semantic"]["resolved"].get("budget", 0) >= 1
        usage = capped.call("GET", "/semantic/usage?collection=cap", "k-admin-a").json()
        assert usage["dailyTokenCap"] == 60 and 0 < usage["today"]["tokens"] <= 60
        assert usage["days"][0]["documents"] == cov["ready"]
        other = capped.call("GET", "/semantic/usage", "k-admin-b").json()
        assert other["days"] == []  # per tenant


def test_a_tenant_over_its_daily_cap_reads_lexically_without_a_query_embedding(
        api: OpenAIProtocolServer, tmp_path: Path) -> None:
    """The cap covers query embeddings too. Once tenant `ta` has spent its day on documents,
    its hybrid reads (JSON and SSE) make no provider call at all, answer 200 with the lexical
    ranking and say `budget`; tenant `tb` still gets its query embedded."""
    env = {"VIBE_EMBEDDER": "openai", "VIBE_OPENAI_BASE_URL": api.base_url, "VIBE_EMBED_MODEL": "test-embed",
           "VIBE_TENANT_DAILY_TOKENS": "60"}
    with served(tmp_path / "data", env=env) as capped:
        for key in ("k-admin-a", "k-admin-b"):
            assert capped.bulk(key, "qc", DOCS).status_code == 200
        capped.read("k-admin-a", collection="qc", q="flutter report", semantic={"strategy": "keyword"}, limit=10)

        def spent() -> bool:  # the touched documents are embedded or refused: ~30 tokens each, two fit
            cov = capped.call("GET", "/semantic/coverage?collection=qc", "k-admin-a").json()
            return cov["states"].get("queued", 0) == 0 and cov["skipped"].get("budget", 0) >= 1

        wait_for(spent, 30, "tenant ta's documents to spend its daily cap")
        used = capped.call("GET", "/semantic/usage?collection=qc", "k-admin-a").json()["today"]["tokens"]
        assert used + estimate_tokens("gust loads certification") > 60  # no room left for the query
        keyword = capped.read("k-admin-a", collection="qc", q="gust loads certification",
                              semantic={"strategy": "keyword"}, limit=10).json()["results"]
        assert keyword
        late = {"_id": "late", "title": "Gust loads memo", "body": "a late memo on gust loads certification"}
        assert capped.bulk("k-admin-a", "qc", [late]).status_code == 200  # a cold candidate of the next reads
        calls = api.requests
        before = capped.call("GET", "/semantic/coverage?collection=qc", "k-admin-a").json()

        r = capped.read("k-admin-a", collection="qc", q="gust loads certification", semantic={"strategy": "hybrid"},
                        limit=10)
        assert r.status_code == 200
        out = r.json()
        ids = [h["id"] for h in out["results"]]
        assert "late" in ids and [i for i in ids if i != "late"] == [h["id"] for h in keyword]  # the lexical ranking
        sem = out["diagnostics"]["semantic"]
        assert (sem["state"], sem["reason"]) == ("degraded", "budget")
        # nothing queued for a worker to refuse: the answer says the budget holds its candidates back
        assert sem["queued"] == 0 and sem["budgetLimited"] >= 1, sem
        assert out["warming"] == {"queued": 0, "message": f"Embedding budget reached: {sem['budgetLimited']} "
                                                          "results wait for it"}
        after = capped.call("GET", "/semantic/coverage?collection=qc", "k-admin-a").json()
        assert after["states"] == before["states"]  # no candidate turned `deferred` by this read
        events = capped.stream("k-admin-a", collection="qc", q="composite structures flight",
                               semantic={"strategy": "hybrid"}, limit=10)
        assert events[0][0] == "lexical" and events[0][1]["results"]
        done = events[-1]
        assert done[0] == "done" and done[1]["results"]
        assert (done[1]["diagnostics"]["semantic"]["state"], done[1]["diagnostics"]["semantic"]["reason"]) == (
            "degraded", "budget")
        time.sleep(0.5)  # anything the reads queued has been handled by now
        assert api.requests == calls  # no query embedding, no document embedding
        usage = capped.call("GET", "/semantic/usage?collection=qc", "k-admin-a").json()
        assert usage["today"]["tokens"] == used <= 60  # nothing charged past the cap

        other = capped.read("k-admin-b", collection="qc", q="gust loads certification",
                            semantic={"strategy": "hybrid"}, limit=10).json()
        assert other["diagnostics"]["semantic"]["state"] in ("ready", "warming", "partial")
        assert other["diagnostics"]["semantic"]["reason"] is None and api.requests > calls
