"""Admin endpoints: reindex (eager embed of a collection), promote, status, queue depth."""

from __future__ import annotations

import time

from harness.server import Served

TEXT = " Wind tunnel measurements of boundary layer transition on swept wings at high Reynolds numbers."


def _wait_coverage(server: Served, key: str, collection: str, pct: float, timeout: float = 60) -> dict:
    deadline = time.time() + timeout
    cov: dict = {}
    while time.time() < deadline:
        cov = server.call("GET", f"/semantic/coverage?collection={collection}", key).json()
        if cov["indexedPct"] >= pct:
            return cov
        time.sleep(0.1)
    return cov


def test_reindex_embeds_a_whole_collection(server: Served) -> None:
    docs = [{"_id": f"r{i}", "title": f"Report {i}", "body": f"case {i}" + TEXT} for i in range(30)]
    docs.append({"_id": "denied", "title": "Private", "body": "do not embed" + TEXT,
                 "_vibe": {"semantic": {"intent": "deny"}}})
    assert server.bulk("k-admin-a", "reports", docs).json()["accepted"] == 31
    cov = server.call("GET", "/semantic/coverage?collection=reports", "k-admin-a").json()
    assert cov["states"]["none"] == 30 and cov["states"]["denied"] == 1
    assert cov["skipped"] == {"writer_deny": 1}
    r = server.call("POST", "/semantic/reindex", "k-admin-a", {"collection": "reports"})
    assert r.status_code == 202 and r.json()["queued"] == 30
    cov = _wait_coverage(server, "k-admin-a", "reports", 96.0)
    assert cov["ready"] == 30 and cov["states"]["denied"] == 1
    st = server.call("GET", "/semantic/status?collection=reports&_id=r3", "k-admin-a").json()
    assert st["status"] == "ready" and st["space"] == "core" and st["lastEmbeddedAt"]
    st = server.call("GET", "/semantic/status?collection=reports&_id=denied", "k-admin-a").json()
    assert st["status"] == "denied" and st["reason"] == "writer_deny"
    assert server.call("POST", "/semantic/reindex", "k-admin-a", {"collection": "reports"}).json()["queued"] == 0
    depth = server.call("GET", "/semantic/queueDepth", "k-admin-a").json()
    assert {"interactive", "bulk", "inflight", "total", "queuedInStore"} <= set(depth)
    mismatch = server.call("GET", "/semantic/mismatch", "k-admin-a").json()
    assert mismatch["missingVectors"] == 0 and mismatch["ready"] >= 30


def test_denied_document_is_never_embedded_even_when_touched(server: Served) -> None:
    server.stream("k-admin-a", collection="reports", q="do not embed private", semantic={"strategy": "hybrid"})
    assert server.status("k-admin-a", "reports", "denied") == "denied"


def test_promote_makes_writes_eager(server: Served) -> None:
    r = server.call("POST", "/semantic/promote", "k-admin-a", {"collection": "hot"})
    assert r.status_code == 200 and r.json()["mode"] == "eager"
    server.put("k-admin-a", "hot", "h1", {"title": "Hot doc", "body": "eager" + TEXT})
    assert server.wait_status("k-admin-a", "hot", "h1", "ready", timeout=30) == "ready"


def test_unknown_space_is_refused(server: Served) -> None:
    r = server.call("POST", "/semantic/reindex", "k-admin-a", {"space": "nope"})
    assert r.status_code == 404 and r.json()["error"]["code"] == "not_found"


def test_metrics_expose_queue_and_latency(server: Served) -> None:
    text = server.call("GET", "/metrics", None).text
    for name in ("vibe_queue_depth", "vibe_embed_jobs_queued_total", "vibe_read_seconds_bucket",
                 "vibe_embed_jobs_completed_total"):
        assert name in text, name
    lag = [ln for ln in text.splitlines() if ln.startswith('vibe_index_follower_lag_changes{follower="embedded"}')]
    assert len(lag) == 1 and float(lag[0].split()[-1]) >= 0  # computed on scrape from the store
