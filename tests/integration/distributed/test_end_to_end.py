"""End to end on the distributed queue: a touched cold document is embedded by a Celery
worker process (not the API) and streamed to the reader as a `semantic` event."""

from __future__ import annotations

from pathlib import Path

from harness.celery_worker import start_worker
from harness.redis_server import RedisServer
from harness.server import Served, ids
from tests.integration.distributed.conftest import celery_env, stream_semantic_hit, wait_for

FILLER = " Reviewed by the structures group; see the appendix for the full load cases and test setup."


def test_touched_cold_doc_becomes_ready_through_a_worker_and_is_streamed(redis_srv: RedisServer,
                                                                         tmp_path: Path) -> None:
    env = celery_env(redis_srv.url, tmp_path / "data")
    app = Served(tmp_path / "data", env=env)
    worker = None
    try:
        docs = [{"_id": f"w{i}", "title": f"Wing flutter report {i}", "body": f"flutter margin case {i}" + FILLER}
                for i in range(5)]
        assert app.bulk("k-admin-a", "reports", docs).status_code == 200
        assert app.status("k-admin-a", "reports", "w0") == "none"  # lazy: nothing embedded on write

        # No worker yet: the touch is queued in Redis and stays queued (the API never embeds).
        r = app.read("k-admin-a", collection="reports", q="flutter margin", semantic={"strategy": "keyword"})
        assert r.status_code == 200 and r.json()["warming"]["queued"] == 5
        depth = app.call("GET", "/semantic/queueDepth", "k-admin-a").json()
        assert depth["interactive"] == 5 and depth["broker"] == "ok"
        assert app.call("GET", "/semantic/queueDepth", "k-admin-b").json()["total"] == 0  # per tenant
        assert app.status("k-admin-a", "reports", "w0") == "queued"

        worker = start_worker(env, tmp_path / "logs")
        app.put("k-admin-a", "reports", "cold", {"title": "Gust alleviation", "body": "gust load alleviation" + FILLER})
        stream_semantic_hit(app, "gust load alleviation", "cold")
        assert app.status("k-admin-a", "reports", "cold") == "ready"

        wait_for(lambda: all(app.status("k-admin-a", "reports", f"w{i}") == "ready" for i in range(5)), 30,
                 "the earlier touches to be embedded")
        assert '"embed batch done"' in worker.log()
        depth = app.call("GET", "/semantic/queueDepth", "k-admin-a").json()
        assert depth["total"] == 0 and depth["queuedInStore"] == 0
        sem = app.read("k-alice", collection="reports", q="flutter margin", semantic={"strategy": "semantic"})
        assert set(ids(sem.json()["results"])) >= {f"w{i}" for i in range(5)}
        metrics = app.call("GET", "/metrics", None).text
        assert 'vibe_queue_depth{queue="interactive"} 0.0' in metrics
    finally:
        if worker is not None:
            worker.stop()
        app.stop()
